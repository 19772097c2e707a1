//! Builds the shipped plans into the crate (issue 54, item 8): every `plans/*.toml`, in
//! name order, becomes one entry of `$OUT_DIR/shipped_plans.rs`, which `src/plan/shipped.rs`
//! includes. A plan file added to `plans/` is shipped by the next build with no edit
//! anywhere else, so `saintflow train NAME` and `saintflow plans` know it after
//! `cargo install` without the checkout.

use std::path::Path;

fn main() {
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let plans = Path::new(&root).join("plans");
    // A directory: cargo reruns this script when any file in it changes, appears or goes.
    println!("cargo:rerun-if-changed={}", plans.display());
    println!("cargo:rerun-if-changed=build.rs");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&plans)
        .unwrap_or_else(|e| panic!("{}: cannot list the shipped plans: {e}", plans.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            if path.extension()? != "toml" || !path.is_file() {
                return None;
            }
            let name = path.file_stem()?.to_str()?.to_string();
            Some((name, path.to_str()?.to_string()))
        })
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The shipped plans, `plans/*.toml` in name order (written by build.rs).\n\
         pub static SHIPPED: &[ShippedPlan] = &[\n",
    );
    for (name, path) in &files {
        out.push_str(&format!(
            "    ShippedPlan {{ name: {name:?}, text: include_str!({path:?}) }},\n"
        ));
    }
    out.push_str("];\n");
    let dest =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("shipped_plans.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: cannot write: {e}", dest.display()));
}

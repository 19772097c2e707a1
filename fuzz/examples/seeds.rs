//! Writes the seed corpus: `cargo run -p saintflow-fuzz --example seeds [TARGET...]`
//! (default: every target) replaces `fuzz/corpus/<target>/seed_*` with
//! `saintflow_fuzz::seeds::seeds(target)`; inputs libFuzzer added there are kept.

use std::path::Path;

fn main() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = fuzz
        .parent()
        .expect("the fuzz crate sits in the repository");
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    for (target, _) in saintflow_fuzz::TARGETS {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == target) {
            continue;
        }
        let dir = fuzz.join("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for e in std::fs::read_dir(&dir).expect("corpus directory") {
            let p = e.expect("entry").path();
            if p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seed_"))
            {
                std::fs::remove_file(&p).expect("old seed removed");
            }
        }
        let seeds = saintflow_fuzz::seeds::seeds(target, repo);
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(format!("seed_{name}")), bytes).expect("seed written");
        }
        println!("{target}: {} seeds", seeds.len());
    }
}

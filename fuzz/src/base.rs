//! The valid inputs the targets start from, built once per process: a small planted
//! Kronecker store (64 nodes, held as file bytes and written afresh into each execution's
//! temporary directory) and the fixed training plans, one per sampler kind.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use saintflow::plan::Plan;
use saintflow::progress::Progress;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec, Planted};

/// Files of the base store: `(file name, bytes)`, header last.
pub fn store_files() -> &'static [(String, Vec<u8>)] {
    static FILES: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("temporary directory");
        let dir = tmp.path().join("base.sf");
        let spec = KroneckerSpec {
            scale: 6,
            degree: 6.0,
            n_features: 5,
            n_classes: 3,
            seed: 11,
            planted: Some(Planted::default()),
            ..KroneckerSpec::default()
        };
        generate_kronecker(&spec, &dir, false, &Progress::hidden()).expect("base store");
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .expect("base store directory")
            .map(|e| {
                let e = e.expect("directory entry");
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).expect("base store file"))
            })
            .collect();
        files
            .sort_by_key(|(name, _)| (name == saintflow::store::format::HEADER_FILE, name.clone()));
        files
    })
}

/// Writes the base store into `dir/name` and returns its path.
pub fn write_store(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    std::fs::create_dir(&out).expect("store directory");
    for (file, bytes) in store_files() {
        std::fs::write(out.join(file), bytes).expect("store file");
    }
    out
}

/// Each fixed training plan's `[sampler]` keys and layers (one hidden layer of width 8, a
/// classifier).
const PLANS: [(&str, &str); 5] = [
    (
        r#"kind = "frontier"
frontier = 6
budget = 24
graph = "train"
clip = 4"#,
        r#"[[layer]]
dropout = 0.2
params = { W_self = ["in", "hidden"], W_neigh = ["in", "hidden"] }
out = "relu(concat(x @ W_self, A_saint @ x @ W_neigh))"

[output]
params = { W_out = ["in", "classes"], b_out = [1, "classes"] }
out = "l2norm(x) @ W_out + b_out""#,
    ),
    (
        r#"kind = "rw"
roots = 8
depth = 2
graph = "train"
clip = 4"#,
        r#"[[layer]]
params = { W_self = ["in", "hidden"], W_neigh = ["in", "hidden"] }
out = "relu(concat(x @ W_self, A_mean @ x @ W_neigh))"

[output]
params = { W_out = ["in", "classes"] }
out = "A_mean @ x @ W_out""#,
    ),
    (
        r#"kind = "edge"
edges = 16
graph = "full"
clip = 1"#,
        r#"[[layer]]
params = { W0 = ["in", "hidden"] }
out = "relu(A_sym @ x @ W0)"

[output]
params = { W1 = ["in", "classes"] }
out = "A_sym @ x @ W1""#,
    ),
    (
        r#"kind = "node"
budget = 24
graph = "train""#,
        r#"[[layer]]
params = { W1 = ["in", "hidden"], b1 = [1, "hidden"] }
out = "relu((x + A @ x) @ W1 + b1)"

[output]
params = { W_out = ["in", "classes"], b_out = [1, "classes"] }
out = "x @ W_out + b_out""#,
    ),
    (
        r#"kind = "full"
graph = "full""#,
        r#"[[layer]]
params = { W = ["in", "hidden"], a_l = { shape = [1, "hidden"], init = "glorot" }, a_r = { shape = [1, "hidden"], init = "glorot" } }
out = """
z = x @ W
elu(gat(A_sym, z, a_l, a_r, heads=2, slope=0.2) @ z)
"""

[output]
params = { W_out = ["in", "classes"], b_out = [1, "classes"] }
out = "x @ W_out + b_out""#,
    ),
];

/// Number of fixed training plans ([`plan`]).
pub const N_PLANS: usize = PLANS.len();

/// The fixed training plan `i` (mod [`N_PLANS`]): sampler kind `i` of frontier, rw, edge,
/// node, full, each with a different adjacency flavour or op; two epochs.
pub fn plan(i: usize) -> &'static Plan {
    static CELLS: [OnceLock<Plan>; N_PLANS] = [const { OnceLock::new() }; N_PLANS];
    let i = i % N_PLANS;
    CELLS[i].get_or_init(|| {
        let (sampler, body) = PLANS[i];
        let text = format!(
            "name = \"fuzz{i}\"\n\n[dims]\nhidden = 8\n\n[sampler]\n{sampler}\n\n{body}\n\n[optimizer]\nkind = \"adam\"\nlr = 0.01\n\n[[phase]]\nepochs = 2\n"
        );
        Plan::parse(&text, &format!("fuzz{i}.toml")).expect("fixed fuzz plan parses")
    })
}

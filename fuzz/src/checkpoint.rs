//! `checkpoint`: a checkpoint file made of the input, loaded and resumed.
//!
//! The first byte is the mode: bits 0–2 the training plan ([`crate::base::plan`]); bits
//! 3–4 how the rest becomes the file: 0 as is; 1 sealed (magic `SFCKPT02` before it, its
//! xxh3-64 after, so that the decoder sees it past the checksum); 2–3 sealed with the first
//! 16 bytes of the encoding (the plan hash and the seed) set to the plan's and the run's
//! and the last 8 (the graph's identity) to the base store's, so that the resume goes past
//! the identity checks; bit 5 evaluation on.
//!
//! Property: `Checkpoint::load` returns; a loaded checkpoint resumes a run on the base
//! store for one more step (parameters, optimiser state, counters and best-validation copy
//! as the file says) without a panic. Issue 55 items 7, 8 and 10: what loads is what
//! saintflow would write — `save` takes it and it loads back equal — and exports for
//! `best` and `last`, each export read back by `train --init-from`'s reader
//! (`load_safetensors`, the checkpoint's names and shapes as the declarations) bit for bit.

use saintflow::compile::plan_hash;
use saintflow::ir::{Init, ParamDecl};
use saintflow::train::export::{load_safetensors, safetensors_bytes, Which};
use saintflow::train::{Checkpoint, TrainOptions};

use crate::base;
use crate::input::Input;

/// The seed of the resumed runs (and of the seed corpus's checkpoints).
pub const SEED: u64 = 5;

/// The checkpoint file's magic.
pub const MAGIC: &[u8; 8] = b"SFCKPT02";

/// The fuzz target's body (see the module documentation).
pub fn checkpoint(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let plan = base::plan(usize::from(mode & 7));
    let mut body = input.rest().to_vec();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let store_dir = base::write_store(tmp.path(), "s.sf");
    let store = saintflow::GraphStore::open(&store_dir).expect("the base store opens");
    let file = match (mode >> 3) & 3 {
        0 => body,
        k => {
            if k >= 2 && body.len() >= 24 {
                body[..8].copy_from_slice(&plan_hash(plan).to_le_bytes());
                body[8..16].copy_from_slice(&SEED.to_le_bytes());
                let n = body.len();
                body[n - 8..].copy_from_slice(&store.identity().to_le_bytes());
            }
            seal(&body)
        }
    };
    let path = tmp.path().join("checkpoint.bin");
    std::fs::write(&path, &file).expect("input written");
    let Ok(c) = Checkpoint::load(&path) else {
        return;
    };
    round_trips(&c, tmp.path());
    let _ = TrainOptions::new(plan, &store)
        .seed(SEED)
        .checkpoint(&path)
        .resume(true)
        .max_steps(c.step.saturating_add(1))
        .no_eval(mode & 0x20 == 0)
        .train();
}

/// Magic + `body` + xxh3-64 of both: a file `Checkpoint::load` reads past its checks.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(body);
    let sum = xxhash_rust::xxh3::xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// What a loaded checkpoint promises (see the module documentation); panics otherwise.
fn round_trips(c: &Checkpoint, dir: &std::path::Path) {
    let again = dir.join("resaved.bin");
    c.save(&again).expect("a loaded checkpoint saves");
    assert_eq!(
        &Checkpoint::load(&again).expect("a saved checkpoint loads"),
        c,
        "save then load changed the checkpoint"
    );
    for which in [Which::Best, Which::Last] {
        let bytes = safetensors_bytes(c, which, None, &again).expect("a loaded checkpoint exports");
        let st = dir.join("export.safetensors");
        std::fs::write(&st, &bytes).expect("export written");
        let tensors = which.pick(c).0;
        let decls: Vec<ParamDecl> = tensors
            .iter()
            .map(|t| ParamDecl {
                name: t.name.clone(),
                rows: t.rows,
                cols: t.cols,
                init: Init::Zeros,
            })
            .collect();
        let back = load_safetensors(&st, &decls).expect("an export reads back as --init-from");
        for t in tensors {
            let got = back.get(&t.name).expect("every exported tensor");
            let same = got.data.len() == t.data.len()
                && got
                    .data
                    .iter()
                    .zip(&t.data)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{}: exported values differ", t.name);
        }
    }
}

//! `checkpoint`: a checkpoint file made of the input, loaded and resumed.
//!
//! The first byte is the mode: bits 0–2 the training plan ([`crate::base::plan`]); bits
//! 3–4 how the rest becomes the file: 0 as is; 1 sealed (magic `SFCKPT07` before it, its
//! xxh3-64 after, so that the decoder sees it past the checksum: the rest is the
//! safetensors body); 2–3 sealed with the header's plan hash and seed set to the plan's and
//! the run's and its graph identity to the base store's (when the body's JSON parses that
//! far: [`with_identity`]), so that the resume goes past the identity checks; bit 5
//! evaluation on.
//!
//! Property: `Checkpoint::load` returns; a loaded checkpoint resumes a run on the base
//! store for one more step (parameters, optimiser state, counters and best-validation copy
//! as the file says) without a panic. Issue 55 items 7, 8 and 10: what loads is what
//! saintflow would write — `save` takes it and it loads back equal — and exports for
//! `best` and `last`, each export read back by `train --init-from`'s reader
//! (`load_safetensors`, the checkpoint's names and shapes as the declarations) bit for bit.

use saintflow::compile::plan_hash;
use saintflow::ir::{Init, ParamDecl};
use saintflow::train::checkpoint::seal;
use saintflow::train::export::{load_safetensors, safetensors_bytes, Which};
use saintflow::train::{Checkpoint, TrainOptions};

use crate::base;
use crate::input::Input;

/// The seed of the resumed runs (and of the seed corpus's checkpoints).
pub const SEED: u64 = 5;

/// The checkpoint file's magic.
pub use saintflow::train::checkpoint::MAGIC;

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
            if k >= 2 {
                body = with_identity(&body, plan_hash(plan), SEED, store.identity());
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

/// `body` (a checkpoint's safetensors body) with its header's `plan_hash`, `seed` and
/// `graph_id` set, or as it is when its safetensors header or the checkpoint JSON inside
/// does not parse (the loader then refuses it anyway).
pub fn with_identity(body: &[u8], plan_hash: u64, seed: u64, graph_id: u64) -> Vec<u8> {
    use serde_json::Value;
    let edited = || -> Option<Vec<u8>> {
        let n = usize::try_from(u64::from_le_bytes(body.get(..8)?.try_into().ok()?)).ok()?;
        let end = n.checked_add(8)?;
        let mut outer: Value = serde_json::from_slice(body.get(8..end)?).ok()?;
        let text = outer.get("__metadata__")?.get("checkpoint")?.as_str()?;
        let mut inner: Value = serde_json::from_str(text).ok()?;
        let h = inner.as_object_mut()?;
        h.insert("plan_hash".into(), plan_hash.into());
        h.insert("seed".into(), seed.into());
        h.insert("graph_id".into(), graph_id.into());
        *outer.get_mut("__metadata__")?.get_mut("checkpoint")? = inner.to_string().into();
        let json = outer.to_string();
        let mut out = (json.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(json.as_bytes());
        out.extend_from_slice(&body[end..]);
        Some(out)
    };
    edited().unwrap_or_else(|| body.to_vec())
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

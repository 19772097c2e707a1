//! `store_step`: a damaged copy of a valid store, opened, checked and trained for one step.
//!
//! Input: a mode byte, then damage operations until the input ends (at most 16):
//!
//! | op (byte % 5) | operands | effect |
//! |---|---|---|
//! | 0 overwrite | file, offset u16, len u8 (≤ 32), bytes | bytes written at offset % (len + 1) |
//! | 1 truncate | file, len u16 | the file cut to len (when shorter) |
//! | 2 zero | file, offset u16, len u16 | a range set to zero |
//! | 3 append | file, len u8 (≤ 32), bytes | bytes added at the end |
//! | 4 header field | field u8, value u64 | a numeric field of the header's JSON body set, the prefix resealed |
//!
//! `file` (byte % 8) is one of the seven section files or the header. Mode bits: 0–2 the
//! training plan (sampler kind, [`crate::base::plan`]); 4: reseal (the header's section
//! checksums and its prefix recomputed, so that only structural damage remains and `check`
//! must find it); 5: evaluate (the full-graph validation and test passes after the step).
//!
//! Property: `GraphStore::open`, `check`, `info` and a one-step training return, with an
//! error or not; none panics. Training runs whether or not `check` passed, as `saintflow
//! train` does (it opens with the cheap checks only).

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use saintflow::store::format::{SectionId, HEADER_FILE, PREFIX_BYTES};
use saintflow::store::GraphStore;
use saintflow::train::{MemoryLimit, TrainOptions};

use crate::base;
use crate::input::Input;

/// Header fields op 4 can set, as JSON pointers into the body.
const FIELDS: [&str; 12] = [
    "/n_nodes",
    "/n_entries",
    "/n_train_entries",
    "/n_features",
    "/n_classes",
    "/split/train",
    "/split/val",
    "/split/test",
    "/label_kind",
    "/train_graph",
    "/sections/{k}/len",
    "/sections/{k}/bytes",
];

/// The fuzz target's body (see the module documentation).
pub fn store_step(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let dir = base::write_store(tmp.path(), "s.sf");
    for _ in 0..16 {
        if input.is_empty() {
            break;
        }
        damage(&dir, &mut input);
    }
    if mode & 0x10 != 0 {
        reseal(&dir);
    }
    let Ok(store) = GraphStore::open(&dir) else {
        return;
    };
    let _ = saintflow::store::check(&store);
    let _ = saintflow::store::info(&store);
    let plan = base::plan(usize::from(mode & 7));
    let _ = TrainOptions::new(plan, &store)
        .seed(3)
        .epochs(1)
        .max_steps(1)
        .no_eval(mode & 0x20 == 0)
        .memory_limit(MemoryLimit::Bytes(MEMORY))
        .train();
}

/// What the memory check may let one run have: a header's C or F can make a 64-node
/// store's plan need gigabytes, and the check must refuse it before allocating, well
/// inside the fuzzer's `-rss_limit_mb=4096`.
pub const MEMORY: u64 = 512 << 20;

fn file_path(dir: &Path, which: u8) -> std::path::PathBuf {
    match SectionId::ALL.get(usize::from(which % 8)) {
        Some(id) => dir.join(id.file_name()),
        None => dir.join(HEADER_FILE),
    }
}

fn damage(dir: &Path, input: &mut Input<'_>) {
    let op = input.u8() % 5;
    if op == 4 {
        let field = input.u8();
        let value = input.u64();
        set_header_field(dir, field, value);
        return;
    }
    let path = file_path(dir, input.u8());
    let Ok(bytes) = std::fs::read(&path) else {
        return;
    };
    let len = bytes.len();
    let mut f = OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("store file opens for writing");
    match op {
        0 => {
            let at = usize::from(input.u16()) % (len + 1);
            let n = usize::from(input.u8() % 33);
            let b = input.take(n);
            f.seek(SeekFrom::Start(at as u64)).expect("seek");
            f.write_all(b).expect("write");
        }
        1 => {
            let to = usize::from(input.u16());
            if to < len {
                f.set_len(to as u64).expect("truncate");
            }
        }
        2 => {
            let at = usize::from(input.u16()).min(len);
            let n = usize::from(input.u16()).min(len - at);
            f.seek(SeekFrom::Start(at as u64)).expect("seek");
            f.write_all(&vec![0u8; n]).expect("write");
        }
        _ => {
            let n = usize::from(input.u8() % 33);
            let b = input.take(n);
            f.seek(SeekFrom::End(0)).expect("seek");
            f.write_all(b).expect("write");
        }
    }
}

/// Sets one numeric (or enum) field of the header's JSON body and reseals the prefix; a
/// header whose body is no longer JSON is left alone.
fn set_header_field(dir: &Path, field: u8, value: u64) {
    let path = dir.join(HEADER_FILE);
    let Ok(bytes) = std::fs::read(&path) else {
        return;
    };
    let Some(body) = bytes.get(PREFIX_BYTES..) else {
        return;
    };
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return;
    };
    let pointer = FIELDS[usize::from(field) % FIELDS.len()].replace(
        "{k}",
        &(usize::from(field / 16) % SectionId::ALL.len()).to_string(),
    );
    let new = match pointer.as_str() {
        "/label_kind" => serde_json::json!(["single", "multi"][(value % 2) as usize]),
        "/train_graph" => serde_json::json!(["induced", "given"][(value % 2) as usize]),
        _ => serde_json::json!(value),
    };
    if let Some(slot) = json.pointer_mut(&pointer) {
        *slot = new;
    }
    let body = serde_json::to_vec_pretty(&json).expect("JSON serialises");
    write_header(&path, &bytes[..PREFIX_BYTES], &body);
}

/// Rewrites the header with `prefix`'s magic and version, `body`, and the body's length
/// and checksum.
fn write_header(path: &Path, prefix: &[u8], body: &[u8]) {
    let mut out = prefix[..12].to_vec();
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(body).to_le_bytes());
    out.extend_from_slice(body);
    std::fs::write(path, out).expect("header written");
}

/// Recomputes the sections' checksums in the header (when its body is still JSON with a
/// section list) and the prefix's length and checksum, so that only structural damage is
/// left for `check` to find.
fn reseal(dir: &Path) {
    let path = dir.join(HEADER_FILE);
    let Ok(bytes) = std::fs::read(&path) else {
        return;
    };
    if bytes.len() < PREFIX_BYTES {
        return;
    }
    let raw = &bytes[PREFIX_BYTES..];
    let body = match serde_json::from_slice::<serde_json::Value>(raw) {
        Ok(mut json) => {
            for (k, id) in SectionId::ALL.iter().enumerate() {
                let sum = std::fs::read(dir.join(id.file_name()))
                    .map(|b| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&b)));
                if let (Ok(sum), Some(slot)) =
                    (sum, json.pointer_mut(&format!("/sections/{k}/xxh3")))
                {
                    *slot = serde_json::json!(sum);
                }
            }
            serde_json::to_vec_pretty(&json).expect("JSON serialises")
        }
        Err(_) => raw.to_vec(),
    };
    write_header(&path, &bytes[..PREFIX_BYTES], &body);
}

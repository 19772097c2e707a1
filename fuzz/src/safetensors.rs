//! `safetensors`: a `.safetensors` file made of the input, read as `train --init-from`
//! reads weights (issue 55: the fuzz targets cover every reader of weights).
//!
//! The first byte is the mode: bits 0–2 the training plan ([`crate::base::plan`]); bit 3
//! how the rest becomes the file: 0 as is; 1 the rest as the values of a well-formed file
//! of the plan's parameters (F32, the declared shapes, in declaration order; the input's
//! bytes repeated or cut to fit), so that the values — NaN, ±inf, subnormals — are fuzzed
//! past the header; bit 4 with mode 1: the header's first tensor declared F64 instead;
//! bit 5: one training step from the weights when they load.
//!
//! Property: `load_safetensors` returns; weights it accepts are every declared parameter
//! of its declared shape and finite, and a run starts from them without a panic.

use saintflow::compile::lower_for;
use saintflow::op::Registry;
use saintflow::train::export::load_safetensors;
use saintflow::train::TrainOptions;

use crate::base;
use crate::input::Input;

/// The seed of the runs started from the weights.
pub const SEED: u64 = 5;

/// The fuzz target's body (see the module documentation).
pub fn safetensors(data: &[u8]) {
    let mut input = Input::new(data);
    let mode = input.u8();
    let plan = base::plan(usize::from(mode & 7));
    let rest = input.rest();
    let tmp = tempfile::tempdir().expect("temporary directory");
    let store_dir = base::write_store(tmp.path(), "s.sf");
    let store = saintflow::GraphStore::open(&store_dir).expect("the base store opens");
    let lowered = lower_for(plan, &store, &Registry::with_builtins()).expect("a fixed plan lowers");
    let decls = &lowered.params;
    let file = if mode & 8 == 0 {
        rest.to_vec()
    } else {
        let shapes: Vec<(String, usize, usize)> = decls
            .iter()
            .map(|d| (d.name.clone(), d.rows, d.cols))
            .collect();
        well_formed(&shapes, rest, mode & 16 != 0)
    };
    let path = tmp.path().join("weights.safetensors");
    std::fs::write(&path, &file).expect("input written");
    let Ok(params) = load_safetensors(&path, decls) else {
        return;
    };
    for d in decls {
        let t = params
            .get(&d.name)
            .expect("every declared parameter loaded");
        assert_eq!((t.rows, t.cols), (d.rows, d.cols), "{}: shape", d.name);
        assert_eq!(t.data.len(), d.rows * d.cols, "{}: values", d.name);
        assert!(
            t.data.iter().all(|x| x.is_finite()),
            "{}: a non-finite weight was accepted",
            d.name
        );
    }
    if mode & 32 != 0 {
        let _ = TrainOptions::new(plan, &store)
            .seed(SEED)
            .init_from(&path)
            .max_steps(1)
            .no_eval(true)
            .train();
    }
}

/// A `.safetensors` file of F32 tensors `shapes` (name, rows, cols) in order, their values
/// `values` repeated or cut to fit (zeros when empty); with `f64_first` the first tensor's
/// dtype is written `F64` (and its byte range doubled), a file of another type.
pub fn well_formed(shapes: &[(String, usize, usize)], values: &[u8], f64_first: bool) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (i, (name, rows, cols)) in shapes.iter().enumerate() {
        let f64 = f64_first && i == 0;
        let bytes = rows * cols * if f64 { 8 } else { 4 };
        header.insert(
            name.clone(),
            serde_json::json!({
                "dtype": if f64 { "F64" } else { "F32" },
                "shape": [rows, cols],
                "data_offsets": [offset, offset + bytes],
            }),
        );
        offset += bytes;
    }
    let mut text = serde_json::Value::Object(header).to_string().into_bytes();
    // The format pads the header with spaces to a multiple of 8.
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend((0..offset).map(|i| {
        if values.is_empty() {
            0
        } else {
            values[i % values.len()]
        }
    }));
    out
}

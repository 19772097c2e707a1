//! `export`: a checkpoint's parameters round-trip through .safetensors bit for bit, under
//! their plan names, with the metadata; `train --init-from` of an exported file takes up
//! the loss where the run left it, and a file that does not fit the plan is refused with
//! every mismatch; `embed --logits` predicts what the run measured (issue 32 part 2).

mod common;

use safetensors::tensor::Dtype;
use safetensors::SafeTensors;
use saintflow::exec::Interpreter;
use saintflow::plan::Plan;
use saintflow::store::Role;
use saintflow::train::checkpoint::{Checkpoint, SavedTensor};
use saintflow::train::export::{export_safetensors, Which};
use saintflow::train::{TrainOptions, TrainOutcome};
use saintflow::GraphStore;

fn tensor(name: &str, rows: usize, cols: usize, seed: f32) -> SavedTensor {
    let data = (0..rows * cols)
        .map(|i| seed * (i as f32 + 0.1).sin() / 3.0)
        .collect();
    SavedTensor {
        name: name.into(),
        rows,
        cols,
        data,
    }
}

fn checkpoint(best: Option<Vec<SavedTensor>>) -> Checkpoint {
    let best_val = best.as_ref().map(|_| saintflow::train::Metrics {
        accuracy: 0.5,
        f1_micro: 0.5,
        f1_macro: 0.4,
        ..Default::default()
    });
    Checkpoint {
        plan_hash: 0xfeed_beef,
        seed: 5,
        epoch: 4,
        step: 40,
        params: vec![tensor("W0", 7, 3, 1.0), tensor("b0", 1, 3, 2.0)],
        opt_m: vec![],
        opt_v: vec![],
        opt_t: 40,
        best_params: best,
        best_epoch: 2,
        best_val,
        elapsed: 1.5,
        log_pos: None,
        graph_id: 11,
        dist: None,
        best_link: None,
        early: None,
        best_loss: None,
        state: vec![],
        best_state: None,
    }
}

fn assert_round_trip(bytes: &[u8], want: &[SavedTensor]) {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let mut names: Vec<&String> = st.names();
    names.sort();
    let mut want_names: Vec<&String> = want.iter().map(|t| &t.name).collect();
    want_names.sort();
    assert_eq!(names, want_names);
    for t in want {
        let v = st.tensor(&t.name).unwrap();
        assert_eq!(v.dtype(), Dtype::F32);
        assert_eq!(v.shape(), &[t.rows, t.cols]);
        let got: Vec<u32> = v
            .data()
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<u32> = t.data.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want, "{}: bit for bit", t.name);
    }
}

#[test]
fn current_and_best_round_trip_with_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let best = vec![tensor("W0", 7, 3, -1.0), tensor("b0", 1, 3, 0.5)];
    let ckpt = checkpoint(Some(best.clone()));
    let cp = dir.path().join("checkpoint.bin");
    ckpt.save(&cp).unwrap();

    let out = dir.path().join("model.safetensors");
    let plan = "[model]\nlayers = 2\n";
    assert_eq!(
        export_safetensors(&cp, &out, Which::Last, Some(plan)).unwrap(),
        2
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_round_trip(&bytes, &ckpt.params);
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let m = meta.metadata().as_ref().expect("__metadata__");
    assert_eq!(m["format"], "saintflow");
    assert_eq!(m["plan"], plan);
    assert_eq!(m["plan_hash"], "00000000feedbeef");
    assert_eq!((m["seed"].as_str(), m["epoch"].as_str()), ("5", "4"));
    assert_eq!(m["which"], "last");
    assert_eq!(
        (m["epochs_trained"].as_str(), m["step"].as_str()),
        ("4", "40")
    );
    let dims: serde_json::Value = serde_json::from_str(&m["dims"]).unwrap();
    assert_eq!(dims, serde_json::json!({"W0": [7, 3], "b0": [1, 3]}));

    let out_best = dir.path().join("best.safetensors");
    export_safetensors(&cp, &out_best, Which::Best, None).unwrap();
    let bytes = std::fs::read(&out_best).unwrap();
    assert_round_trip(&bytes, &best);
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let m = meta.metadata().as_ref().unwrap();
    assert_eq!(m["which"], "best");
    // Issue 55 item 10: the best weights' file records their epoch, not the last one.
    assert_eq!(
        (m["epoch"].as_str(), m["epochs_trained"].as_str()),
        ("2", "4")
    );
    assert!(!m.contains_key("plan"));
    // Only the two outputs and the checkpoint: no temporary left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

/// Issue 55 item 10: one rule for every reader of weights: the best-validation ones, or
/// the last epoch's when the run never evaluated (as `embed`); a damaged checkpoint is an
/// error.
#[test]
fn issue55_best_falls_back_to_the_last_without_an_evaluation_and_a_damaged_checkpoint_is_an_error()
{
    let dir = tempfile::tempdir().unwrap();
    let cp = dir.path().join("checkpoint.bin");
    let ckpt = checkpoint(None);
    ckpt.save(&cp).unwrap();
    let out = dir.path().join("m.safetensors");
    assert_eq!(export_safetensors(&cp, &out, Which::Best, None).unwrap(), 2);
    let bytes = std::fs::read(&out).unwrap();
    assert_round_trip(&bytes, &ckpt.params);
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let m = meta.metadata().as_ref().unwrap();
    assert_eq!((m["which"].as_str(), m["epoch"].as_str()), ("last", "4"));
    std::fs::remove_file(&out).unwrap();
    std::fs::write(&cp, b"garbage").unwrap();
    let e = export_safetensors(&cp, &out, Which::Last, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a saintflow checkpoint"), "{e}");
    assert!(!out.exists());
}

#[test]
fn the_command_exports_a_run_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let ckpt = checkpoint(None);
    ckpt.save(&run.join("checkpoint.bin")).unwrap();
    let out = dir.path().join("m.safetensors");
    let r = std::process::Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .arg("export")
        .arg(&run)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stdout).contains("2 tensors"));
    assert_round_trip(&std::fs::read(&out).unwrap(), &ckpt.params);
}

// ---- The way in: `train --init-from` (issue 32 part 2) ---------------------------------------

/// The shipped GCN with dropout off, so a step's loss is a function of the parameters alone.
fn gcn() -> Plan {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/plans/gcn.toml");
    let text = std::fs::read_to_string(path).unwrap();
    Plan::parse_with_overrides(&text, path, &["layer.0.dropout=0", "output.dropout=0"]).unwrap()
}

fn step_losses(out: &TrainOutcome) -> Vec<(u64, f64)> {
    common::step_losses(&out.records)
}

#[test]
fn init_from_an_exported_checkpoint_trains_on_from_the_same_loss() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 9)).unwrap();
    let plan = gcn();
    let ck = dir.path().join("ck.bin");
    let opts = |epochs| {
        TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .threads(2)
            .seed(3)
            .epochs(epochs)
    };
    opts(20).checkpoint(&ck).train().unwrap();
    let weights = dir.path().join("w.safetensors");
    export_safetensors(&ck, &weights, Which::Last, None).unwrap();
    // The run resumed for one more epoch, and a fresh run (another seed) from the weights:
    // their first step sees the same parameters, so the same loss, bit for bit.
    let resumed = opts(21).checkpoint(&ck).resume(true).train().unwrap();
    let (_, want) = *step_losses(&resumed).last().unwrap();
    let from = TrainOptions::new(&plan, &store)
        .runner(&Interpreter)
        .threads(2)
        .seed(99)
        .epochs(5)
        .init_from(&weights)
        .train()
        .unwrap();
    let losses = step_losses(&from);
    assert_eq!(
        losses[0].1.to_bits(),
        want.to_bits(),
        "{losses:?} vs {want}"
    );
    // It starts below a fresh start's loss and trains on from there.
    let fresh = step_losses(&opts(1).train().unwrap())[0].1;
    assert!(losses[0].1 < 0.9 * fresh, "{losses:?}, fresh {fresh}");
    assert!(losses.windows(2).all(|w| w[1].1 < w[0].1), "{losses:?}");
}

#[test]
fn init_from_lists_every_mismatch_with_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 8)).unwrap();
    let plan = gcn();
    // W0 of the wrong shape, W1 missing, an extra tensor, and one in F64.
    let w0 = vec![0f32; 5 * 16];
    let w1 = vec![0f64; 4];
    let views = vec![
        (
            "W0".to_string(),
            safetensors::tensor::TensorView::new(
                Dtype::F32,
                vec![5, 16],
                bytemuck::cast_slice(&w0),
            )
            .unwrap(),
        ),
        (
            "bias".to_string(),
            safetensors::tensor::TensorView::new(Dtype::F64, vec![1, 4], bytemuck::cast_slice(&w1))
                .unwrap(),
        ),
    ];
    let path = dir.path().join("bad.safetensors");
    std::fs::write(&path, safetensors::serialize(views, &None).unwrap()).unwrap();
    let e = TrainOptions::new(&plan, &store)
        .runner(&Interpreter)
        .epochs(1)
        .init_from(&path)
        .train()
        .unwrap_err()
        .to_string();
    for want in [
        "bad.safetensors: --init-from",
        "`W0` has shape [5, 16], the plan declares",
        "`W1` is missing",
        "not parameters of the plan: bias",
        "the plan declares W0 [",
    ] {
        assert!(e.contains(want), "{want:?} not in {e}");
    }
    let garbage = dir.path().join("garbage.safetensors");
    std::fs::write(&garbage, b"not a safetensors file at all").unwrap();
    let e = TrainOptions::new(&plan, &store)
        .epochs(1)
        .init_from(&garbage)
        .train()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("garbage.safetensors") && e.contains("not a safetensors file"),
        "{e}"
    );
    // The command line: --init-from with --resume is a usage error.
    let r = common::saintflow(
        &[
            "train",
            "plans/gcn.toml",
            "--graph",
            "g.sf",
            "--checkpoint",
            "ck",
            "--resume",
            "--init-from",
            "w.safetensors",
        ],
        dir.path(),
    );
    assert_eq!(
        r.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
}

#[test]
fn embed_logits_predict_what_the_run_measured() {
    // `embed --logits` of the best parameters: the argmax on the test nodes gives the test
    // accuracy the run reported.
    let dir = tempfile::tempdir().unwrap();
    let g = common::planted(dir.path(), 9);
    let plan = concat!(env!("CARGO_MANIFEST_DIR"), "/plans/gcn.toml");
    let gs = g.to_str().unwrap();
    let out = common::saintflow_ok(
        &[
            "train",
            plan,
            "--graph",
            gs,
            "--epochs",
            "30",
            "--checkpoint",
            "run/",
            "--json",
            "--threads",
            "2",
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let test_line = text
        .lines()
        .rev()
        .find(|l| l.contains("\"kind\":\"test\""))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(test_line).unwrap();
    let reported = v["test"]["accuracy"].as_f64().unwrap();
    common::saintflow_ok(
        &[
            "embed",
            plan,
            "--graph",
            gs,
            "--checkpoint",
            "run/",
            "--logits",
            "-o",
            "logits.npy",
        ],
        dir.path(),
    );
    let logits = saintflow::npy::MappedF32::open(&dir.path().join("logits.npy")).unwrap();
    let store = GraphStore::open(&g).unwrap();
    assert_eq!(
        (logits.rows(), logits.cols()),
        (store.n_nodes(), store.n_classes())
    );
    let view = logits.view();
    let labels = store.labels();
    let test = store.nodes_with_role(Role::Test);
    let right = test
        .iter()
        .filter(|&&v| {
            let row = view.row(v as usize);
            let best = (0..row.len()).fold(0, |b, c| if row[c] > row[b] { c } else { b });
            labels.has_class(v, best as u32)
        })
        .count();
    let accuracy = right as f64 / test.len() as f64;
    assert!(
        (accuracy - reported).abs() < 1e-3,
        "{accuracy} vs reported {reported}"
    );
}

// ---- Issue 55 items 7 and 8: crafted checkpoints and weights ---------------------------------

/// Every way a checkpoint's fields can be impossible, one at a time: each is refused by
/// `Checkpoint::load` naming the file and the field, by `export` (nothing written; a
/// duplicated name once panicked inside the safetensors crate), and by `save` (never
/// writes what the loader refuses).
#[test]
fn issue55_crafted_checkpoint_fields_are_refused_on_load_save_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let good = checkpoint(Some(vec![
        tensor("W0", 7, 3, -1.0),
        tensor("b0", 1, 3, 0.5),
    ]));
    type Craft = fn(&mut Checkpoint);
    let cases: Vec<(&str, Craft)> = vec![
        ("parameter `W0` twice", |c| c.params[1].name = "W0".into()),
        ("a tensor without a name", |c| c.params[0].name.clear()),
        ("expected that many values", |c| c.params[0].rows = 8),
        ("expected that many values", |c| {
            c.params[0].rows = usize::MAX
        }),
        ("params: parameter `W0` value 4 (row 1, column 1)", |c| {
            c.params[0].data[4] = f32::NAN
        }),
        ("params: parameter `b0` value 2", |c| {
            c.params[1].data[2] = f32::INFINITY
        }),
        ("best_params: parameter `W0` value 0", |c| {
            c.best_params.as_mut().unwrap()[0].data[0] = f32::NEG_INFINITY
        }),
        ("best_params: names and shapes differ", |c| {
            c.best_params.as_mut().unwrap().pop();
        }),
        ("opt_m: parameter `W0` value", |c| {
            c.opt_m = vec![tensor("W0", 1, 21, 1.0)];
            c.opt_m[0].data[20] = f32::NAN;
        }),
        ("opt_v: parameter `W0` value 0", |c| {
            c.opt_v = vec![tensor("W0", 1, 21, 1.0)];
            c.opt_v[0].data[0] = -1.0;
        }),
        ("step: not reachable", |c| {
            c.epoch = 1_000_000_000_000_000_000
        }),
        ("step: not reachable", |c| {
            c.step = u64::MAX;
            c.opt_t = u64::MAX;
        }),
        ("step: not reachable", |c| {
            c.step = 3;
            c.opt_t = 3
        }),
        ("opt_t: more optimiser steps than steps", |c| c.opt_t = 41),
        ("best_epoch: not an epoch of the run", |c| c.best_epoch = 5),
        ("best_epoch: not an epoch of the run", |c| c.best_epoch = 0),
        ("best_val.f1_micro: not a metric", |c| {
            c.best_val.as_mut().unwrap().f1_micro = f64::NAN
        }),
        ("best_val.accuracy: not a metric", |c| {
            c.best_val.as_mut().unwrap().accuracy = 1.5
        }),
        ("one without the other", |c| c.best_val = None),
        ("elapsed: expected finite seconds", |c| c.elapsed = -1.0),
        ("elapsed: expected finite seconds", |c| {
            c.elapsed = f64::INFINITY
        }),
        ("dist: a rank's loss mean or variance", |c| {
            c.dist = Some(saintflow::dist::DistState {
                ranks: vec![(1.0, 0.5, true), (f64::NAN, 0.1, true)],
                var_bar: 0.2,
            })
        }),
        ("dist: a rank's loss mean or variance", |c| {
            c.dist = Some(saintflow::dist::DistState {
                ranks: vec![(1.0, 0.5, true)],
                var_bar: -1.0,
            })
        }),
    ];
    for (i, (want, craft)) in cases.into_iter().enumerate() {
        let mut c = good.clone();
        craft(&mut c);
        let cp = dir.path().join(format!("crafted{i}.bin"));
        std::fs::write(&cp, c.encode_unchecked()).unwrap();
        let e = Checkpoint::load(&cp).unwrap_err().to_string();
        assert!(
            e.contains(&format!("crafted{i}.bin: checkpoint: ")) && e.contains(want),
            "case {i}: {want:?} not in {e}"
        );
        for which in [Which::Best, Which::Last] {
            let out = dir.path().join(format!("out{i}.safetensors"));
            let e = export_safetensors(&cp, &out, which, None).unwrap_err();
            assert!(e.to_string().contains(want), "case {i}: {e}");
            assert!(!out.exists(), "case {i}: an export was written");
        }
        let resaved = dir.path().join(format!("resaved{i}.bin"));
        let e = c.save(&resaved).unwrap_err().to_string();
        assert!(
            e.contains("not written") && e.contains(want),
            "case {i}: {e}"
        );
        assert!(!resaved.exists(), "case {i}: save wrote what load refuses");
        let bytes = saintflow::train::export::safetensors_bytes(&c, Which::Last, None, &cp);
        assert!(bytes.is_err(), "case {i}: exported from memory");
    }
    // The untouched one loads, exports and saves.
    let cp = dir.path().join("good.bin");
    good.save(&cp).unwrap();
    assert_eq!(Checkpoint::load(&cp).unwrap(), good);
}

/// NaN or ±inf in an `--init-from` file is refused before training, naming the tensor and
/// the element (it was trained on, and ReLU hid it).
#[test]
fn issue55_init_from_refuses_non_finite_weights() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 8)).unwrap();
    let plan = gcn();
    let ck = dir.path().join("ck.bin");
    let opts = || {
        TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .threads(1)
            .seed(3)
            .epochs(1)
    };
    opts().checkpoint(&ck).train().unwrap();
    let weights = dir.path().join("w.safetensors");
    export_safetensors(&ck, &weights, Which::Last, None).unwrap();
    let bytes = std::fs::read(&weights).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut views = Vec::new();
        let mut owned: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();
        for (name, v) in st.tensors() {
            let mut data: Vec<f32> = v
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            if name == "W1" {
                data[5] = bad;
            }
            owned.push((name, v.shape().to_vec(), data));
        }
        for (name, shape, data) in &owned {
            let view = safetensors::tensor::TensorView::new(
                Dtype::F32,
                shape.clone(),
                bytemuck::cast_slice(data),
            )
            .unwrap();
            views.push((name.clone(), view));
        }
        let path = dir.path().join("nan.safetensors");
        std::fs::write(&path, safetensors::serialize(views, &None).unwrap()).unwrap();
        let e = opts().init_from(&path).train().unwrap_err().to_string();
        assert!(
            e.contains("nan.safetensors: --init-from")
                && e.contains("`W1` value 5")
                && e.contains(&format!("is {bad}, expected a finite number")),
            "{e}"
        );
    }
}

/// A checkpoint past the run's end (a crafted epoch that passes the field checks) is
/// refused on resume instead of ending the run as finished; the same epoch count resumes.
#[test]
fn issue55_a_checkpoint_past_the_runs_end_is_refused_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 8)).unwrap();
    let plan = gcn();
    let ck = dir.path().join("ck.bin");
    let opts = |epochs| {
        TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .threads(1)
            .seed(3)
            .epochs(epochs)
            .checkpoint(&ck)
            .resume(true)
    };
    opts(3).train().unwrap();
    let e = opts(2).train().unwrap_err().to_string();
    assert!(
        e.contains("ck.bin: checkpoint: epoch: past this run's end")
            && e.contains("expected at most 2")
            && e.contains("got 3"),
        "{e}"
    );
    let done = opts(3).train().unwrap();
    assert_eq!(done.epochs, 3);
}

/// Issue 55 item 7: when the loss becomes non-finite the error names where the first
/// non-finite value came from (the node, its op and its plan expression), found by a
/// diagnostic pass, here from finite but huge `--init-from` weights that overflow in the
/// first layer.
#[test]
fn issue55_a_non_finite_loss_names_the_node_that_produced_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = GraphStore::open(common::planted(dir.path(), 8)).unwrap();
    let plan = gcn();
    let ck = dir.path().join("ck.bin");
    let opts = || {
        TrainOptions::new(&plan, &store)
            .runner(&Interpreter)
            .threads(1)
            .seed(3)
            .epochs(1)
    };
    opts().checkpoint(&ck).train().unwrap();
    let ckpt = Checkpoint::load(&ck).unwrap();
    let owned: Vec<(String, Vec<usize>, Vec<f32>)> = ckpt
        .params
        .iter()
        .map(|t| {
            let v = if t.name == "W0" { 3e38 } else { 1.0 };
            (t.name.clone(), vec![t.rows, t.cols], vec![v; t.data.len()])
        })
        .collect();
    let views: Vec<_> = owned
        .iter()
        .map(|(n, shape, d)| {
            let v = safetensors::tensor::TensorView::new(
                Dtype::F32,
                shape.clone(),
                bytemuck::cast_slice(d),
            )
            .unwrap();
            (n.clone(), v)
        })
        .collect();
    let path = dir.path().join("huge.safetensors");
    std::fs::write(&path, safetensors::serialize(views, &None).unwrap()).unwrap();
    let e = opts().init_from(&path).train().unwrap_err().to_string();
    eprintln!("{e}");
    assert!(e.contains("at step 0 (epoch 1)"), "{e}");
    assert!(e.contains("the first non-finite value is"), "{e}");
    assert!(
        e.contains("with finite inputs") && e.contains("(op "),
        "{e}"
    );
    assert!(e.contains("W0"), "the node's expression names W0: {e}");
}

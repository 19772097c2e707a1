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
        best_val: None,
        elapsed: 1.5,
        log_pos: None,
        graph_id: 11,
        dist: None,
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
        export_safetensors(&cp, &out, Which::Current, Some(plan)).unwrap(),
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
    assert_eq!(m["which"], "current");
    let dims: serde_json::Value = serde_json::from_str(&m["dims"]).unwrap();
    assert_eq!(dims, serde_json::json!({"W0": [7, 3], "b0": [1, 3]}));

    let out_best = dir.path().join("best.safetensors");
    export_safetensors(&cp, &out_best, Which::Best, None).unwrap();
    let bytes = std::fs::read(&out_best).unwrap();
    assert_round_trip(&bytes, &best);
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let m = meta.metadata().as_ref().unwrap();
    assert_eq!(m["which"], "best");
    assert!(!m.contains_key("plan"));
    // Only the two outputs and the checkpoint: no temporary left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn best_without_an_evaluation_and_a_damaged_checkpoint_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cp = dir.path().join("checkpoint.bin");
    checkpoint(None).save(&cp).unwrap();
    let out = dir.path().join("m.safetensors");
    let e = export_safetensors(&cp, &out, Which::Best, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("checkpoint.bin") && e.contains("no best-validation"),
        "{e}"
    );
    assert!(!out.exists());
    std::fs::write(&cp, b"garbage").unwrap();
    let e = export_safetensors(&cp, &out, Which::Current, None)
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
    export_safetensors(&ck, &weights, Which::Current, None).unwrap();
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

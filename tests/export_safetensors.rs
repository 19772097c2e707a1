//! `export`: a checkpoint's parameters round-trip through .safetensors bit for bit, under
//! their plan names, with the metadata (issue 32 part 2).

use safetensors::tensor::Dtype;
use safetensors::SafeTensors;
use saintflow::train::checkpoint::{Checkpoint, SavedTensor};
use saintflow::train::export::{export_safetensors, Which};

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

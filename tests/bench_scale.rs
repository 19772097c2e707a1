//! `saintflow bench scale` on tiny generated graphs: every run's row holds the median
//! recomputed here from its log, memcap's peak is read from its report line (a stand-in
//! script), a missing memcap is a warning and the runs go on uncapped, stores are reused.

use std::path::Path;
use std::process::Command;

fn bench(dir: &Path, memcap: &Path, repeat: &str) -> std::process::Output {
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/graphsage.toml");
    Command::new(env!("CARGO_BIN_EXE_saintflow"))
        .args(["bench", "scale", "-q", "--dir", "stores", "--scales", "8,9"])
        .args(["--degrees", "4,8", "--degree-scale", "8", "--steps", "7"])
        .args(["--warmup", "2", "--threads", "1", "-o", "out", "--plan"])
        .arg(plan)
        .args([
            "--set",
            "sampler.frontier=20",
            "--set",
            "sampler.budget=120",
        ])
        .args(["--set", "dims.hidden=8", "--repeat", repeat, "--memcap"])
        .arg(memcap)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn bench_scale_tables_the_logs_medians_and_the_caps_peak() {
    let tmp = tempfile::tempdir().unwrap();
    // A stand-in memcap: runs the command, then reports like the real one.
    let fake = tmp.path().join("memcap");
    std::fs::write(
        &fake,
        "#!/bin/sh\nshift\n\"$@\"\nc=$?\necho \"memcap: limit=1 peak=123456789 failcnt=0 exit=$c\" >&2\nexit $c\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = bench(tmp.path(), &fake, "2");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("generating"), "{err}");
    let out = tmp.path().join("out");
    let points: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("scale.json")).unwrap()).unwrap();
    let want = [
        ("V", 8, 16),
        ("V", 9, 16),
        ("degree", 8, 4),
        ("degree", 8, 8),
    ];
    assert_eq!(points.len(), want.len());
    for (p, (series, scale, degree)) in points.iter().zip(want) {
        assert_eq!(
            (
                p["series"].as_str().unwrap(),
                p["scale"].as_u64().unwrap(),
                p["degree"].as_u64().unwrap()
            ),
            (series, scale, degree)
        );
        assert_eq!(p["nodes"], 1u64 << scale);
        assert_eq!(p["cap_peak"], 123456789);
        let steps_of = |suffix: &str| -> Vec<serde_json::Value> {
            let log = out.join(format!("logs/{series}-s{scale}-d{degree}{suffix}.log"));
            std::fs::read_to_string(log)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|r| r["kind"] == "step")
                .collect()
        };
        let wall = |steps: &[serde_json::Value]| -> f64 {
            median(
                steps[2..]
                    .iter()
                    .map(|s| s["ms"]["wall"].as_f64().unwrap())
                    .collect(),
            )
        };
        let (steps, again) = (steps_of(""), steps_of("-r1"));
        assert_eq!((steps.len(), again.len()), (7, 7));
        assert_eq!(p["steps"], 7);
        let rounds = [wall(&steps), wall(&again)];
        assert_eq!(p["round_ms"], serde_json::json!(rounds));
        assert_eq!(
            p["median_ms"].as_f64().unwrap(),
            (rounds[0] + rounds[1]) / 2.0
        );
        let per: Vec<f64> = steps[2..]
            .iter()
            .map(|s| s["ms"]["wall"].as_f64().unwrap() * 1000.0 / s["nodes"].as_f64().unwrap())
            .collect();
        assert!((p["ms_per_1000_nodes"].as_f64().unwrap() - median(per)).abs() < 1e-9);
    }
    let table = std::fs::read_to_string(out.join("scale.md")).unwrap();
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("| \\|V\\| |"))
            .count(),
        2
    );
    assert_eq!(
        table
            .lines()
            .filter(|l| l.starts_with("| degree |"))
            .count(),
        2
    );
    assert!(table.contains("memcap 4G"));
    let svg = std::fs::read_to_string(out.join("scale.svg")).unwrap();
    assert!(svg.contains("Step time vs |V|") && svg.contains("Step time vs degree"));
    assert!(out.join("scale.png").is_file());

    // Without memcap: a warning, uncapped runs, the stores reused (not generated again).
    let o = bench(tmp.path(), &tmp.path().join("no-such-memcap"), "1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("NOT memory-capped") && !err.contains("generating"),
        "{err}"
    );
    let table = std::fs::read_to_string(out.join("scale.md")).unwrap();
    assert!(table.contains("NOT memory-capped"));
}

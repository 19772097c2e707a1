//! A full disk during a write: a clear error naming the file, nothing left behind, and an
//! existing store replaced with `--force` survives. Uses a 1 MiB tmpfs, so it needs root
//! (CI and the development machines run as root); elsewhere it says so and returns.

use std::path::{Path, PathBuf};
use std::process::Command;

use saintflow::progress::Progress;
use saintflow::store::gen::{generate_kronecker, KroneckerSpec};
use saintflow::store::{check, GraphStore};

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Option<Tmpfs> {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn full_disk_is_an_error_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(tmp.path()) else {
        eprintln!("cannot mount a tmpfs here (not root?): full-disk test not run");
        return;
    };
    let dest = fs.0.join("g.sf");
    // A small store that fits, then a forced replacement that cannot (2^14 × 32 floats = 2 MiB).
    let small = KroneckerSpec {
        scale: 6,
        n_features: 2,
        ..Default::default()
    };
    generate_kronecker(&small, &dest, false, &Progress::hidden()).unwrap();
    let before = std::fs::read(dest.join("full.indices.u32")).unwrap();
    let big = KroneckerSpec {
        scale: 14,
        n_features: 32,
        ..Default::default()
    };
    let msg = match generate_kronecker(&big, &dest, true, &Progress::hidden()) {
        Ok(_) => panic!("a 2 MiB store fitted in a 1 MiB tmpfs"),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(
        msg.contains(".g.sf.tmp-"),
        "error does not name the file being written: {msg}"
    );
    // The old store is intact and valid; no temporary directory remains.
    let s = GraphStore::open(&dest).unwrap();
    check(&s).unwrap();
    assert_eq!(
        std::fs::read(dest.join("full.indices.u32")).unwrap(),
        before
    );
    let names: Vec<String> = std::fs::read_dir(&fs.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["g.sf".to_string()], "left behind: {names:?}");
    drop(s);
}

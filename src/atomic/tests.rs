use super::*;

#[test]
fn replaces_the_file_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.bin");
    std::fs::write(&p, b"old").unwrap();
    write_atomic(&p, b"new contents").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "a temporary file was left: {names:?}");
}

#[test]
fn an_uncommitted_file_leaves_the_old_one_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.npy");
    std::fs::write(&p, b"old").unwrap();
    {
        let mut f = AtomicFile::create(&p).unwrap();
        f.write_at(4, b"tail").unwrap();
        f.write_at(0, b"head").unwrap();
        // Dropped: an error happened before commit.
    }
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    let mut f = AtomicFile::create(&p).unwrap();
    f.write_at(4, b"tail").unwrap();
    f.write_at(0, b"head").unwrap();
    f.commit().unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"headtail");
}

#[test]
fn create_parent_dirs_makes_the_missing_ones_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a/b/c.bin");
    create_parent_dirs(&p).unwrap();
    assert!(dir.path().join("a/b").is_dir() && !p.exists());
    write_atomic(&p, b"x").unwrap();
    create_parent_dirs(&p).unwrap(); // exists: nothing to do
    assert_eq!(std::fs::read(&p).unwrap(), b"x");
    // A file where a directory should be is an error.
    assert!(create_parent_dirs(&p.join("d.bin")).is_err());
    create_parent_dirs(Path::new("bare-name.bin")).unwrap();
}

/// Issue 55, item 2: the guard over every kind of path an output may name.
#[test]
fn issue55_the_output_guard_refuses_inputs_links_devices_stores_and_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = d.join("plan.toml");
    std::fs::write(&input, b"plan").unwrap();
    std::fs::hard_link(&input, d.join("hard")).unwrap();
    std::os::unix::fs::symlink(&input, d.join("soft")).unwrap();
    std::fs::create_dir_all(d.join("g.sf/sub")).unwrap();
    std::fs::write(d.join("g.sf").join(STORE_MARKER), b"h").unwrap();
    std::fs::write(d.join("mine"), b"user").unwrap();
    let check = |out: &Path, force: bool| {
        let mut g = OutputGuard::new();
        g.input("PLAN", &input).file("-o", out, force);
        g.check()
    };
    // The input under every name: itself, a hard link, a `..` path; a symbolic link
    // to it is refused as the input too.
    for p in [
        input.clone(),
        d.join("hard"),
        d.join("g.sf/../plan.toml"),
        d.join("soft"),
    ] {
        assert!(
            matches!(check(&p, true), Err(OutputError::IsInput { .. })),
            "{}",
            p.display()
        );
    }
    // Inside a store, at any depth, existing or not.
    for p in [
        "g.sf/header.sf",
        "g.sf/new.bin",
        "g.sf/sub/x",
        "g.sf/sub/../y",
    ] {
        assert!(
            matches!(check(&d.join(p), true), Err(OutputError::InStore { .. })),
            "{p}"
        );
    }
    // Not a regular file, even with force.
    for (p, kind) in [
        (d.join("g.sf"), "a directory"),
        (PathBuf::from("/dev/null"), "a character device"),
    ] {
        match check(&p, true) {
            Err(OutputError::NotRegular { kind: k, .. }) => assert_eq!(k, kind),
            other => panic!("{}: {other:?}", p.display()),
        }
    }
    let dangling = d.join("dangling");
    std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
    assert!(matches!(
        check(&dangling, true),
        Err(OutputError::NotRegular {
            kind: "a symbolic link",
            ..
        })
    ));
    // An existing regular file needs force; a new path does not.
    assert!(matches!(
        check(&d.join("mine"), false),
        Err(OutputError::Exists { .. })
    ));
    check(&d.join("mine"), true).unwrap();
    check(&d.join("new"), false).unwrap();
    check(&d.join("a/b/new"), false).unwrap();
    // Two outputs of one command: the same path however spelt, existing or not.
    for (a, b) in [
        ("x.svg", "x.svg"),
        ("x.svg", "sub/../x.svg"),
        ("mine", "hard2"),
    ] {
        if b == "hard2" {
            let _ = std::fs::hard_link(d.join("mine"), d.join("hard2"));
        }
        let mut g = OutputGuard::new();
        std::fs::create_dir_all(d.join("sub")).unwrap();
        g.file("--log", &d.join(a), true)
            .file("--plot", &d.join(b), true);
        assert!(
            matches!(g.check(), Err(OutputError::SameFile { .. })),
            "{a} {b}"
        );
    }
    // A directory output: an existing directory is its writer's decision.
    let mut g = OutputGuard::new();
    g.input("STORE", &d.join("g.sf")).dir("-o", &d.join("sub"));
    g.check().unwrap();
    let mut g = OutputGuard::new();
    g.input("STORE", &d.join("g.sf")).dir("-o", &d.join("g.sf"));
    assert!(matches!(g.check(), Err(OutputError::IsInput { .. })));
    // Nothing was written by any check.
    assert_eq!(std::fs::read(&input).unwrap(), b"plan");
    assert_eq!(std::fs::read(d.join("mine")).unwrap(), b"user");
}

#[test]
fn a_missing_directory_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("no/such/dir/out");
    assert!(write_atomic(&p, b"x").is_err());
}

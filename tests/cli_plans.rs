//! Issue 54, item 8: the shipped plans are built into the binary and found by name outside
//! the checkout (a file path still works and wins when it exists); `saintflow plans` lists
//! every one with its Cora figure from plans/README.md's table (their one source), and the
//! README's table is `saintflow plans --markdown`.

mod common;

use std::path::Path;

use common::{saintflow, saintflow_ok};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The stems of `plans/*.toml`, sorted.
fn plan_files() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("plans"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// plans/README.md's table of the shipped plans, read here on its own: (name, Cora cell).
fn readme_rows() -> Vec<(String, String)> {
    let md = std::fs::read_to_string(root().join("plans/README.md")).unwrap();
    let begin = md
        .find("<!-- shipped plans: begin -->")
        .expect("plans/README.md marks its table of the shipped plans");
    let end = md.find("<!-- shipped plans: end -->").unwrap();
    md[begin..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert!(
                (2..=3).contains(&cells.len()),
                "plans/README.md: a row of the shipped plans is `| file | model | Cora |`: {l}"
            );
            let name = cells[0].trim_matches('`').trim_end_matches(".toml");
            // A row without its Cora cell reads as none measured, as the binary reads it.
            (name.to_string(), cells.get(2).unwrap_or(&"—").to_string())
        })
        .collect()
}

/// A small planted store in `dir` (a graph a user imported).
fn store(dir: &Path) -> String {
    common::gen_planted_cli(8, "g.sf", dir);
    "g.sf".to_string()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn every_plan_file_has_one_row_in_the_plans_readme_table() {
    let rows = readme_rows();
    let mut names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    names.sort();
    assert_eq!(
        names,
        plan_files(),
        "plans/README.md's table of the shipped plans must have one row per plans/*.toml"
    );
    for (name, cora) in &rows {
        assert!(
            !cora.is_empty(),
            "{name}: an empty Cora cell (write — for none)"
        );
    }
}

#[test]
fn plans_lists_every_shipped_plan_with_its_task_and_cora_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let out = text(&saintflow_ok(&["plans"], tmp.path()).stdout);
    for (name, cora) in readme_rows() {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("`saintflow plans` has no line for {name}:\n{out}"));
        assert!(line.contains(&cora), "{name}: {cora} missing from {line:?}");
        let file = std::fs::read_to_string(root().join(format!("plans/{name}.toml"))).unwrap();
        let t: toml::Table = file.parse().unwrap();
        let task = if t.contains_key("embedding") {
            "embedding"
        } else if t
            .get("task")
            .and_then(|t| t.get("kind"))
            .and_then(|k| k.as_str())
            == Some("link")
        {
            "link"
        } else {
            "node"
        };
        assert_eq!(line.split_whitespace().nth(1), Some(task), "{line}");
        let description = t["description"].as_str().unwrap();
        assert!(
            line.ends_with(description),
            "{line:?} lacks {description:?}"
        );
    }
    assert!(out.contains("81.7"), "the GCN's Cora figure:\n{out}");
}

#[test]
fn plans_name_prints_the_shipped_file_and_a_wrong_name_is_refused_with_the_nearest() {
    let tmp = tempfile::tempdir().unwrap();
    for name in plan_files() {
        let out = saintflow_ok(&["plans", &name], tmp.path());
        let file = std::fs::read_to_string(root().join(format!("plans/{name}.toml"))).unwrap();
        assert_eq!(text(&out.stdout), file, "{name}");
    }
    let out = saintflow(&["plans", "gnc"], tmp.path());
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("gnc: no shipped plan has this name, did you mean `gcn`?"),
        "{err}"
    );
}

/// The README's table between its `plans` markers is `saintflow plans --markdown`.
#[test]
fn the_readme_table_of_plans_is_the_binarys() {
    let tmp = tempfile::tempdir().unwrap();
    let table = text(&saintflow_ok(&["plans", "--markdown"], tmp.path()).stdout);
    assert_eq!(table.lines().count(), plan_files().len() + 2, "{table}");
    let md = std::fs::read_to_string(root().join("README.md")).unwrap();
    let begin = "<!-- plans: begin -->\n";
    let at = md.find(begin).expect("README.md marks its table of plans") + begin.len();
    let end = md[at..].find("<!-- plans: end -->").unwrap();
    assert_eq!(
        &md[at..at + end],
        table,
        "README.md's table of plans is stale (a plan added to plans/, or a figure changed in \
         plans/README.md's table): paste `saintflow plans --markdown` between its markers"
    );
}

/// `cargo install` leaves no checkout: a plan is named, and runs, with no plans/ anywhere.
#[test]
fn a_shipped_plan_trains_by_name_in_a_directory_without_plans() {
    let tmp = tempfile::tempdir().unwrap();
    let g = store(tmp.path());
    for arg in ["gcn", "gcn.toml", "plans/gcn.toml"] {
        let out = saintflow_ok(
            &[
                "train",
                arg,
                "--graph",
                &g,
                "--epochs",
                "3",
                "--threads",
                "1",
            ],
            tmp.path(),
        );
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(stdout.starts_with("gcn on g.sf: "), "{stdout}");
        assert!(
            stderr.contains(&format!(
                "note: plan {arg}: the shipped plans/gcn.toml built into saintflow"
            )),
            "{stderr}"
        );
    }
    // The other plan commands take names too.
    let out = saintflow_ok(&["explain", "sgc", "--graph", &g], tmp.path());
    assert!(
        text(&out.stdout).starts_with("# sgc (sgc)"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_file_wins_over_the_shipped_plan_of_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let g = store(tmp.path());
    // The user's gcn.toml: the shipped GCN renamed and one layer narrower.
    let mine = std::fs::read_to_string(root().join("plans/gcn.toml"))
        .unwrap()
        .replace("name = \"gcn\"", "name = \"my_gcn\"");
    assert!(mine.contains("my_gcn"));
    std::fs::write(tmp.path().join("gcn.toml"), &mine).unwrap();
    let out = saintflow_ok(
        &[
            "train",
            "gcn.toml",
            "--graph",
            &g,
            "--epochs",
            "2",
            "--threads",
            "1",
        ],
        tmp.path(),
    );
    assert!(
        text(&out.stdout).starts_with("my_gcn on g.sf: "),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains(
            "note: plan gcn.toml: the file in this directory, not the shipped plan of that name"
        ),
        "{}",
        text(&out.stderr)
    );
    // A path to an existing file says nothing: it is plainly a file.
    std::fs::create_dir(tmp.path().join("plans")).unwrap();
    std::fs::write(tmp.path().join("plans/gcn.toml"), &mine).unwrap();
    let out = saintflow_ok(
        &[
            "train",
            "plans/gcn.toml",
            "--graph",
            &g,
            "--epochs",
            "2",
            "--threads",
            "1",
        ],
        tmp.path(),
    );
    assert!(text(&out.stdout).starts_with("my_gcn on g.sf: "));
    assert!(
        !text(&out.stderr).contains("note: plan"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_plan_that_is_neither_a_file_nor_a_shipped_name_is_refused_with_the_nearest_name() {
    let tmp = tempfile::tempdir().unwrap();
    let g = store(tmp.path());
    let out = saintflow(&["train", "gnc", "--graph", &g], tmp.path());
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("error: gnc: no such plan file, and no shipped plan has this name, did you mean `gcn`? (`saintflow plans` lists the shipped plans: "),
        "{err}"
    );
    let out = saintflow(&["train", "my/own.toml", "--graph", &g], tmp.path());
    assert!(
        text(&out.stderr).contains("error: my/own.toml: no such plan file ("),
        "{}",
        text(&out.stderr)
    );
}

/// The Python stubs type `sf.train(NAME, …)` by the plan's family for the names they list:
/// each must be a shipped plan of that family (a plan missing from the lists is typed as
/// the union, which is not wrong; a listed name of the other family would be).
#[test]
fn the_python_stubs_type_each_listed_plan_name_by_its_family() {
    let pyi = std::fs::read_to_string(root().join("python/saintflow/__init__.pyi")).unwrap();
    let names = |alias: &str| -> Vec<String> {
        let at = pyi.find(&format!("{alias} = Literal[")).expect(alias) + alias.len() + 11;
        let end = at + pyi[at..].find(']').unwrap();
        pyi[at..end]
            .split(',')
            .map(|n| n.trim().trim_matches('"').to_string())
            .filter(|n| !n.is_empty())
            .collect()
    };
    let (gnn, embedding) = (names("_GnnPlanName"), names("_EmbeddingPlanName"));
    assert!(gnn.contains(&"gcn".to_string()) && embedding.contains(&"deepwalk".to_string()));
    for (list, embedding_family) in [(&gnn, false), (&embedding, true)] {
        for name in list {
            let plan = saintflow::plan::shipped::find(name)
                .unwrap_or_else(|| panic!("the stubs name `{name}`, which is not shipped"));
            assert_eq!(
                plan.task() == "embedding",
                embedding_family,
                "`{name}` is typed as the wrong family in python/saintflow/__init__.pyi"
            );
        }
    }
}

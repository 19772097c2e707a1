//! The shipped plans (issue 54, item 8): every `plans/*.toml`, built into the crate by
//! `build.rs` (one list, no second copy to keep in step), so a plan is found by its name
//! (`saintflow train gcn --graph g.sf`) wherever the binary runs, after `cargo install`
//! without the checkout. [`PlanSource::resolve`] says where a plan argument points: a file
//! that exists always wins; else a shipped plan by its name (`gcn`, `gcn.toml`, or a
//! `plans/gcn.toml` that is not there). The Cora figures `saintflow plans` prints are read
//! from plans/README.md's table, built in as well: that table is their one source.

use std::path::{Path, PathBuf};

use super::{read_plan_file, PlanError, PlanErrorKind};

/// A plan file of `plans/`, built into the crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShippedPlan {
    /// The file's stem: `gcn` for `plans/gcn.toml`.
    pub name: &'static str,
    /// The file's text as shipped.
    pub text: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/shipped_plans.rs"));

/// plans/README.md, whose table between [`TABLE_BEGIN`] and [`TABLE_END`] gives each shipped
/// plan's Cora figure.
const PLANS_README: &str = include_str!("../../plans/README.md");

/// The line before the table of the shipped plans in plans/README.md.
pub const TABLE_BEGIN: &str = "<!-- shipped plans: begin -->";
/// The line after it.
pub const TABLE_END: &str = "<!-- shipped plans: end -->";

/// Every shipped plan, in name order.
pub fn shipped() -> &'static [ShippedPlan] {
    SHIPPED
}

/// The shipped plan named `name` (`gcn`; `gcn.toml` too).
pub fn find(name: &str) -> Option<&'static ShippedPlan> {
    let stem = name.strip_suffix(".toml").unwrap_or(name);
    SHIPPED.iter().find(|p| p.name == stem)
}

impl ShippedPlan {
    /// Where it lives in the repository: `plans/gcn.toml`.
    pub fn file(&self) -> String {
        format!("plans/{}.toml", self.name)
    }

    /// Its top-level `description` (one line; empty when the file has none).
    pub fn description(&self) -> String {
        self.text
            .parse::<toml::Table>()
            .ok()
            .and_then(|t| t.get("description")?.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Its description up to the first `:` outside parentheses (`GCN (Kipf & Welling, ICLR
    /// 2017)`), or up to the first ` (` when there is none: the name of the model.
    pub fn title(&self) -> String {
        let d = self.description();
        let mut depth = 0i32;
        for (i, c) in d.char_indices() {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ':' if depth == 0 => return d[..i].trim().to_string(),
                _ => {}
            }
        }
        match d.find(" (") {
            Some(i) => d[..i].to_string(),
            None => d,
        }
    }

    /// What it learns: `node` (classes of nodes), `link` (`[task] kind = "link"`) or
    /// `embedding` (an `[embedding]` plan).
    pub fn task(&self) -> &'static str {
        let Ok(t) = self.text.parse::<toml::Table>() else {
            return "node";
        };
        if t.contains_key("embedding") {
            return "embedding";
        }
        let link = t
            .get("task")
            .and_then(|t| t.get("kind"))
            .and_then(|k| k.as_str())
            == Some("link");
        if link {
            "link"
        } else {
            "node"
        }
    }

    /// Its Cora figure from plans/README.md's table (`81.7`; `AUC 0.934 …` for a link
    /// plan), or None where the table gives none (`—`) or has no row for it.
    pub fn cora(&self) -> Option<&'static str> {
        cora_rows()
            .find(|(name, _)| *name == self.name)
            .and_then(|(_, fig)| fig)
    }
}

/// The rows of plans/README.md's table of the shipped plans: (plan name, Cora figure),
/// the figure None where the cell is `—`, empty or missing.
pub fn cora_rows() -> impl Iterator<Item = (&'static str, Option<&'static str>)> {
    table_rows(PLANS_README).filter_map(|cells| {
        let name = cells
            .first()?
            .trim()
            .strip_prefix('`')?
            .strip_suffix(".toml`")?;
        let fig = cells
            .get(2)
            .map(|c| c.trim())
            .filter(|c| !c.is_empty() && *c != "—");
        Some((name, fig))
    })
}

/// The cells of each body row of the table between [`TABLE_BEGIN`] and [`TABLE_END`] in
/// `md` (the header row and the `|---|` rule skipped).
pub fn table_rows(md: &str) -> impl Iterator<Item = Vec<&str>> {
    md.lines()
        .skip_while(|l| l.trim() != TABLE_BEGIN)
        .skip(1)
        .take_while(|l| l.trim() != TABLE_END)
        .filter(|l| l.trim_start().starts_with('|'))
        .skip(2)
        .map(|l| {
            let l = l.trim();
            let l = l.strip_prefix('|').unwrap_or(l);
            let l = l.strip_suffix('|').unwrap_or(l);
            l.split('|').collect()
        })
}

/// Where a plan argument points (see the module's documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanSource {
    /// A file on disk.
    File(PathBuf),
    /// A shipped plan, named by `arg`.
    Shipped {
        /// The plan.
        plan: &'static ShippedPlan,
        /// What named it (`gcn`, `plans/gcn.toml`).
        arg: PathBuf,
    },
}

impl PlanSource {
    /// The plan `arg` names: the file when it exists (a file wins over a shipped plan of
    /// the same name), else the shipped plan whose name it is (`gcn`, `gcn.toml`, or a
    /// missing `…/plans/gcn.toml`), else an error naming the argument, what it is not and
    /// the nearest shipped names.
    pub fn resolve(arg: &Path) -> Result<PlanSource, PlanError> {
        if arg.exists() {
            return Ok(PlanSource::File(arg.to_path_buf()));
        }
        if let Some(plan) = shipped_name(arg).and_then(find) {
            return Ok(PlanSource::Shipped {
                plan,
                arg: arg.to_path_buf(),
            });
        }
        let bare = arg.components().count() == 1;
        let stem = arg
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let near = crate::suggest::did_you_mean(&stem, SHIPPED.iter().map(|p| p.name));
        Err(PlanError {
            file: arg.display().to_string(),
            line: 0,
            col: 0,
            kind: PlanErrorKind::Io,
            what: format!(
                "no such plan file{}{near} (`saintflow plans` lists the shipped plans: {})",
                if bare {
                    ", and no shipped plan has this name"
                } else {
                    ""
                },
                SHIPPED
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            source_line: String::new(),
        })
    }

    /// The plan's text.
    pub fn text(&self) -> Result<String, PlanError> {
        match self {
            PlanSource::File(path) => read_plan_file(path),
            PlanSource::Shipped { plan, .. } => Ok(plan.text.to_string()),
        }
    }

    /// How errors name it: the file, or `plans/gcn.toml (shipped)`.
    pub fn label(&self) -> String {
        match self {
            PlanSource::File(path) => path.display().to_string(),
            PlanSource::Shipped { plan, .. } => format!("{} (shipped)", plan.file()),
        }
    }

    /// The name a plan without `name =` takes: the file's stem.
    pub fn stem(&self) -> String {
        match self {
            PlanSource::File(path) => path
                .file_stem()
                .map_or_else(|| "plan".to_string(), |s| s.to_string_lossy().into_owned()),
            PlanSource::Shipped { plan, .. } => plan.name.to_string(),
        }
    }

    /// What a command says about which plan it took, when that is not plain from the
    /// argument: a shipped plan, or a file that shadows the shipped plan of its name.
    pub fn note(&self) -> Option<String> {
        match self {
            PlanSource::Shipped { plan, arg } => Some(format!(
                "plan {}: the shipped {} built into saintflow (`saintflow plans {}` prints it)",
                arg.display(),
                plan.file(),
                plan.name
            )),
            PlanSource::File(path) => {
                let shadows =
                    path.components().count() == 1 && shipped_name(path).and_then(find).is_some();
                shadows.then(|| {
                    format!(
                        "plan {}: the file in this directory, not the shipped plan of that name",
                        path.display()
                    )
                })
            }
        }
    }
}

/// The shipped name `arg` may stand for: a bare `gcn` or `gcn.toml`, or `…/plans/gcn.toml`.
fn shipped_name(arg: &Path) -> Option<&str> {
    let file = arg.file_name()?.to_str()?;
    if arg.components().count() == 1 {
        return Some(file);
    }
    let in_plans = arg
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "plans");
    (in_plans && file.ends_with(".toml")).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plan_file_is_shipped_and_nothing_else() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                (p.extension()? == "toml")
                    .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
            })
            .collect();
        on_disk.sort();
        let built: Vec<&str> = shipped().iter().map(|p| p.name).collect();
        assert_eq!(built, on_disk);
        for p in shipped() {
            let disk = std::fs::read_to_string(dir.join(format!("{}.toml", p.name))).unwrap();
            assert_eq!(p.text, disk, "{} differs from the file", p.name);
        }
    }

    #[test]
    fn names_resolve_to_shipped_plans_and_files_win() {
        let tmp = tempfile::tempdir().unwrap();
        let gcn = find("gcn").expect("gcn is shipped");
        assert_eq!(find("gcn.toml"), Some(gcn));
        assert_eq!(find("nope"), None);
        for arg in ["gcn", "gcn.toml"] {
            let s = PlanSource::resolve(Path::new(arg)).unwrap();
            assert!(matches!(s, PlanSource::Shipped { plan, .. } if plan.name == "gcn"));
            assert!(s.note().unwrap().contains("shipped plans/gcn.toml"));
        }
        // A missing `plans/NAME.toml` (a README command outside the checkout).
        let missing = tmp.path().join("plans/gat.toml");
        let s = PlanSource::resolve(&missing).unwrap();
        assert_eq!(s.text().unwrap(), find("gat").unwrap().text);
        // An existing file wins, whatever its name.
        let mine = tmp.path().join("plans");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(mine.join("gat.toml"), "name = \"mine\"\n").unwrap();
        let s = PlanSource::resolve(&mine.join("gat.toml")).unwrap();
        assert_eq!(s, PlanSource::File(mine.join("gat.toml")));
        assert_eq!(s.text().unwrap(), "name = \"mine\"\n");
        assert_eq!(s.note(), None);
        // A missing path elsewhere is an error with the nearest name.
        let e = PlanSource::resolve(Path::new("gnc"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("gnc: no such plan file, and no shipped plan has this name"),
            "{e}"
        );
        assert!(e.contains("did you mean `gcn`?"), "{e}");
        let e = PlanSource::resolve(&tmp.path().join("x/gcn.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such plan file"), "{e}");
    }

    #[test]
    fn titles_stop_at_the_first_colon_outside_parentheses() {
        let title = |d: &'static str| {
            let text: &'static str = Box::leak(format!("description = {d:?}\n").into_boxed_str());
            ShippedPlan { name: "t", text }.title()
        };
        assert_eq!(
            title("GCN (Kipf & Welling, ICLR 2017): Z = Â·X"),
            "GCN (Kipf & Welling, ICLR 2017)"
        );
        assert_eq!(title("A (b: c), d"), "A");
        assert_eq!(title("plain"), "plain");
    }

    #[test]
    fn table_rows_skip_the_header_and_stop_at_the_end_marker() {
        let md = format!(
            "x\n{TABLE_BEGIN}\n| file | model | Cora |\n|---|---|---|\n| `a.toml` | A | 1.0 |\n| `b.toml` | B | — |\n| `c.toml` | C |\n{TABLE_END}\n| `d.toml` | D | 2 |\n"
        );
        let rows: Vec<Vec<&str>> = table_rows(&md).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], vec![" `a.toml` ", " A ", " 1.0 "]);
    }
}

//! `saintflow plans`: the shipped plans (built into the binary, `plan::shipped`), one line
//! each: name, task, Cora figure (from plans/README.md's table) and description;
//! `plans NAME` prints one plan's file, to read or to copy and change; `--markdown` the
//! table the top README holds (a test keeps the two equal).

use clap::Args;

use crate::error::Result;
use crate::plan::shipped::{find, shipped, ShippedPlan};
use crate::suggest::did_you_mean;

#[derive(Debug, Args)]
pub(super) struct PlansArgs {
    /// Print this plan's file (`saintflow plans gcn > my_gcn.toml` to start a variant).
    name: Option<String>,
    /// Print the list as the Markdown table of the README.
    #[arg(long, conflicts_with = "name")]
    markdown: bool,
}

/// What the Cora column holds, said under the list and the table.
const CORA_NOTE: &str = "Cora: node plans, mean test accuracy (%) over seeds 1–5 on the \
     Planetoid split; link plans, test AUC, AP and MRR, medians over seeds 1–5 on `split-edges \
     --val 0.05 --test 0.1 --negatives 1000`; — where none was measured. Settings and the \
     papers' figures: plans/README.md.";

pub(super) fn run(a: PlansArgs) -> Result<()> {
    if let Some(name) = &a.name {
        let Some(plan) = find(name) else {
            return Err(crate::plan::PlanError {
                file: name.clone(),
                line: 0,
                col: 0,
                kind: crate::plan::PlanErrorKind::Name,
                what: format!(
                    "no shipped plan has this name{} (`saintflow plans` lists them)",
                    did_you_mean(name, shipped().iter().map(|p| p.name))
                ),
                source_line: String::new(),
            }
            .into());
        };
        return super::out(plan.text);
    }
    if a.markdown {
        return super::out(&markdown());
    }
    let w = shipped().iter().map(|p| p.name.len()).max().unwrap_or(4);
    let cora = |p: &ShippedPlan| p.cora().unwrap_or("—").to_string();
    let cw = shipped()
        .iter()
        .map(|p| cora(p).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut text = format!("{:w$}  {:9}  {:cw$}  description\n", "plan", "task", "Cora");
    for p in shipped() {
        let fig = cora(p);
        let pad = cw - fig.chars().count();
        text.push_str(&format!(
            "{:w$}  {:9}  {fig}{}  {}\n",
            p.name,
            p.task(),
            " ".repeat(pad),
            p.description()
        ));
    }
    text.push_str(&format!(
        "\n{CORA_NOTE}\nTrain one by name: `saintflow train gcn --graph g.sf`; a file path works \
         too and wins when it exists. `saintflow plans gcn` prints a plan's file.\n"
    ));
    super::out(&text)
}

/// The README's table of the shipped plans: plan, task, Cora figure, model (the
/// description's title).
pub(super) fn markdown() -> String {
    let mut t = String::from("| plan | task | Cora | model |\n|---|---|---|---|\n");
    for p in shipped() {
        t.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            p.name,
            p.task(),
            p.cora().unwrap_or("—"),
            p.title()
        ));
    }
    t
}

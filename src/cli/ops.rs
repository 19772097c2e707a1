//! `saintflow ops`: the catalogue of the ops a plan file may call by name — the built-ins
//! and, in a user crate's binary (`cli::run_with`), the user's — with their attributes and
//! one line each; `ops NAME` one op; `--json` the same as JSON.

use clap::Args;

use crate::error::Result;
use crate::op::Registry;
use crate::suggest::did_you_mean;

#[derive(Debug, Args)]
pub(super) struct OpsArgs {
    /// One op's entry (default: every op).
    name: Option<String>,
    /// Print JSON: an array of {"name", "attributes", "doc"}.
    #[arg(long)]
    json: bool,
    /// Print the catalogue as the Markdown table plans/README.md holds.
    #[arg(long, conflicts_with_all = ["json", "name"])]
    markdown: bool,
}

pub(super) fn run(a: OpsArgs, registry: &Registry) -> Result<()> {
    if a.markdown {
        super::out(&registry.catalogue_markdown())?;
        return Ok(());
    }
    let names: Vec<&str> = match &a.name {
        Some(n) if registry.contains(n) => vec![n.as_str()],
        Some(n) => {
            let what = format!(
                "unknown op `{n}`{} (`saintflow ops` lists every op)\n",
                did_you_mean(n, registry.names())
            );
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, what).exit()
        }
        None => registry.names().collect(),
    };
    let entries: Vec<(&str, &[String], &str)> = names
        .iter()
        .filter_map(|&n| {
            registry
                .spec(n)
                .map(|s| (n, s.attrs.as_slice(), s.doc.as_str()))
        })
        .collect();
    if a.json {
        let v: Vec<serde_json::Value> = entries
            .iter()
            .map(|(n, attrs, doc)| serde_json::json!({"name": n, "attributes": attrs, "doc": doc}))
            .collect();
        super::out(&format!("{}\n", serde_json::Value::Array(v)))?;
        return Ok(());
    }
    let width = entries.iter().map(|e| e.0.len()).max().unwrap_or(0);
    let attrs: Vec<String> = entries
        .iter()
        .map(|e| format!("[{}]", e.1.join(", ")))
        .collect();
    let aw = attrs.iter().map(|a| a.chars().count()).max().unwrap_or(0);
    for ((n, _, doc), attrs) in entries.iter().zip(&attrs) {
        super::out(&format!("{n:width$}  {attrs:aw$}  {doc}\n"))?;
    }
    if a.name.is_none() {
        super::out(
            "\nAlso in every `out` expression: `a @ b` (matmul chain), `a + b` (add, bias rows \
             broadcast), `a - b`, `a * b`, `c * a`, `-a`; the adjacencies A, A_mean, A_sym, \
             A_saint; x and the layer's parameters; earlier outputs h0 (the features), h1, h2, \
             … and named layers; [constants], `l` (the copy of a repeated layer), and `log`, \
             `exp`, `sqrt` of numbers (plans/README.md).\n",
        )?;
    }
    Ok(())
}

//! A plan file of either family (issue 54, item 2): the one place where a file is told to
//! be a GNN plan or an `[embedding]` plan. Every command and the Python binding load plans
//! here and then map their arguments; none sniffs the file itself.

use std::path::Path;

use super::embedding::{is_embedding_text, EmbeddingPlan};
use super::shipped::PlanSource;
use super::{Plan, PlanError, PlanErrorKind};

/// A parsed and typed plan of either family. A file with a top-level `[embedding]` table
/// is an embedding plan (DeepWalk, LINE, node2vec); any other file is a GNN plan, and a
/// file that is not TOML at all gets the GNN parser's syntax error.
// One value per command, moved once: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum AnyPlan {
    /// Layers, a sampler and a loss: `train`, `embed --checkpoint`, `explain`.
    Gnn(Plan),
    /// Node embedding without GNN layers: `train` and `embed` train it.
    Embedding(EmbeddingPlan),
}

impl AnyPlan {
    /// Reads the plan `path` names once ([`PlanSource::resolve`]: the file when it exists,
    /// else the shipped plan of that name, `gcn`), tells its family and types it with
    /// `overrides` (`key.path=value`; for a GNN plan `model.X` is an alias of `dims.X`, see
    /// [`Plan::parse_with_overrides`]).
    pub fn load<S: AsRef<str>>(path: &Path, overrides: &[S]) -> Result<AnyPlan, PlanError> {
        AnyPlan::load_from(&PlanSource::resolve(path)?, overrides)
    }

    /// [`AnyPlan::load`] of a resolved source.
    pub fn load_from<S: AsRef<str>>(
        source: &PlanSource,
        overrides: &[S],
    ) -> Result<AnyPlan, PlanError> {
        let text = source.text()?;
        AnyPlan::parse(&text, &source.label(), &source.stem(), overrides)
    }

    /// Types `text` (named `file` in errors; an `[embedding]` plan without `name =` is
    /// called `stem`) as the family it is.
    pub fn parse<S: AsRef<str>>(
        text: &str,
        file: &str,
        stem: &str,
        overrides: &[S],
    ) -> Result<AnyPlan, PlanError> {
        let overrides: Vec<&str> = overrides.iter().map(AsRef::as_ref).collect();
        if is_embedding_text(text) {
            EmbeddingPlan::parse_with_overrides(text, file, stem, &overrides)
                .map(AnyPlan::Embedding)
        } else {
            Plan::parse_with_overrides(text, file, &overrides).map(AnyPlan::Gnn)
        }
    }

    /// The GNN plan, or an error naming the file as an embedding plan for a command that
    /// takes GNN plans only (`explain`, `partition --plan`, `export`).
    pub fn into_gnn(self, path: &Path) -> Result<Plan, PlanError> {
        match self {
            AnyPlan::Gnn(p) => Ok(p),
            AnyPlan::Embedding(_) => Err(PlanError {
                file: path.display().to_string(),
                line: 0,
                col: 0,
                kind: PlanErrorKind::Family,
                what: "is an [embedding] plan (node embedding, no GNN layers): this command takes GNN plans; `saintflow embed PLAN --graph G -o emb.npy` trains an embedding plan".into(),
                source_line: String::new(),
            }),
        }
    }

    /// The plan's name (`name =`, or the file's stem).
    pub fn name(&self) -> &str {
        match self {
            AnyPlan::Gnn(p) => &p.name,
            AnyPlan::Embedding(p) => &p.name,
        }
    }
}

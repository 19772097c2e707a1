//! Lowering of what plans say about a typed store (issue 57 item 3; plans/README.md
//! "Typed graphs"): `[input]` (h0 per node type), relation adjacencies `A_mean[r]`,
//! `sum_relations(e)` / `mean_relations(e)` (e once per relation, `r` bound to it) and
//! `basis(a, V, r)`. A homogeneous graph answers as one type `node` and one relation `to`
//! (the whole graph): `A_mean[to]` is `A_mean`'s node itself, so such a plan lowers there
//! to what a homogeneous plan has.

use std::sync::Arc;

use crate::ir::{Fact, Init, NodeId};
use crate::suggest::did_you_mean;

use super::super::expr::{Expr, ExprKind, KwArg};
use super::super::schema::{InputSpec, Layer};
use super::super::{PlanError, PlanErrorKind};
use super::{
    relation_flavour, Add, AdjKind, BasisWeight, Lowerer, MatMul, RelAdjacency, RelationBlock,
    Scope, TypeInput, TypeRows, Val,
};

impl Lowerer<'_> {
    /// `[input]`: h0 over every node type's rows, from the features node `features` (a
    /// homogeneous graph's) or from each type's own source.
    pub(super) fn input(
        &mut self,
        spec: &InputSpec,
        features: NodeId,
    ) -> Result<NodeId, PlanError> {
        let env = self.env;
        let wd = spec
            .weight_decay
            .unwrap_or(self.plan.optimizer.weight_decay() as f32);
        let at = spec.at;
        let Some(types) = env.types else {
            if env.n_features == 0 {
                return Err(self.src.error(
                    at,
                    PlanErrorKind::Graph,
                    "[input]: the graph is homogeneous and has no features: a learned table per node needs a typed store (its node count per type); train an [embedding] plan for featureless homogeneous graphs",
                ));
            }
            let w = self.declare_param(
                "input.W.node",
                env.n_features,
                spec.dim,
                Init::Glorot,
                at,
                wd,
            )?;
            return self.input_node(
                Arc::new(MatMul::plain(2)),
                &[features, w],
                "x[node] @ input.W.node",
                at,
            );
        };
        let mut h: Option<NodeId> = None;
        let mut start = 0u64;
        for ty in &types.node_types {
            let (lo, hi) = (start, start + ty.count);
            start = hi;
            let range = (lo as u32, hi as u32);
            let name = &ty.name;
            let part = if ty.n_features > 0 {
                let width = ty.n_features as usize;
                let t = types.type_index(name).expect("its own type");
                let x = self.input_node(
                    Arc::new(TypeInput {
                        ty: t,
                        name: name.clone(),
                        start: range.0,
                        end: range.1,
                        width,
                    }),
                    &[self.sample],
                    &format!("x[{name}]"),
                    at,
                )?;
                let pname = format!("input.W.{name}");
                let w = self.declare_param(&pname, width, spec.dim, Init::Glorot, at, wd)?;
                self.input_node(
                    Arc::new(MatMul::plain(2)),
                    &[x, w],
                    &format!("x[{name}] @ {pname}"),
                    at,
                )?
            } else {
                let pname = format!("input.E.{name}");
                let rows = ty.count as usize;
                if rows == 0 {
                    continue;
                }
                let e = self.declare_param(&pname, rows, spec.dim, Init::Glorot, at, wd)?;
                self.sparse_rows.insert(pname.clone());
                self.input_node(
                    Arc::new(TypeRows {
                        name: name.clone(),
                        start: range.0,
                        end: range.1,
                        scatter: false,
                    }),
                    &[e, self.sample],
                    &format!("{pname}[{name}]"),
                    at,
                )?
            };
            h = Some(match h {
                None => part,
                Some(acc) => {
                    self.input_node(Arc::new(Add), &[acc, part], "h0 (the types' sum)", at)?
                }
            });
        }
        h.ok_or_else(|| {
            self.src.error(
                at,
                PlanErrorKind::Graph,
                "[input]: the store has no node of any type",
            )
        })
    }

    fn input_node(
        &mut self,
        op: Arc<dyn crate::op::Op>,
        inputs: &[NodeId],
        label: &str,
        at: usize,
    ) -> Result<NodeId, PlanError> {
        let id = self.g.add(op, inputs, label).map_err(|e| {
            self.src
                .error(at, PlanErrorKind::Op, format!("[input]: {e}"))
        })?;
        self.origins.entry(label.to_string()).or_insert(at);
        Ok(id)
    }

    /// Every relation as the plan may write it, for messages.
    fn relation_list(&self) -> String {
        (0..self.env.n_relations())
            .map(|r| {
                let (s, n, d) = self.env.relation_names(r);
                format!("[\"{s}\", \"{n}\", \"{d}\"]")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The relation an index names: `r` inside `sum_relations`, a relation's name when one
    /// relation has it, or `(source type, name, destination type)`.
    fn resolve_relation(
        &self,
        layer: &Layer,
        scope: &Scope,
        what: &str,
        items: &[Expr],
    ) -> Result<usize, PlanError> {
        fn text(e: &Expr) -> Option<&str> {
            match &e.kind {
                ExprKind::Name(n) | ExprKind::Str(n) => Some(n.as_str()),
                _ => None,
            }
        }
        let at = items.first().map_or(0, |e| e.span.start);
        let n_rel = self.env.n_relations();
        let all = || (0..n_rel).map(|r| self.env.relation_names(r));
        match items {
            [one] if matches!(one.kind, ExprKind::Name(ref n) if n == "r") => scope.relation.ok_or_else(|| {
                self.err(
                    layer,
                    at,
                    PlanErrorKind::Name,
                    format!("`{what}[r]`: `r` is each relation only inside `sum_relations(…)` or `mean_relations(…)`; name a relation here: one of {}", self.relation_list()),
                )
            }),
            [one] => {
                let name = text(one).unwrap_or_default();
                let hits: Vec<usize> = (0..n_rel)
                    .filter(|&r| self.env.relation_names(r).1 == name)
                    .collect();
                match hits.as_slice() {
                    [r] => Ok(*r),
                    [] => {
                        let hint = did_you_mean(name, all().map(|(_, n, _)| n));
                        Err(self.err(
                            layer,
                            at,
                            PlanErrorKind::Name,
                            format!("`{what}[{name}]`: the graph has no relation `{name}`{hint}; its relations: {}", self.relation_list()),
                        ))
                    }
                    many => Err(self.err(
                        layer,
                        at,
                        PlanErrorKind::Name,
                        format!(
                            "`{what}[{name}]`: {} relations are named `{name}`: write the types too, one of {}",
                            many.len(),
                            many.iter()
                                .map(|&r| {
                                    let (s, n, d) = self.env.relation_names(r);
                                    format!("{what}[\"{s}\", \"{n}\", \"{d}\"]")
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                }
            }
            [a, b, c] => {
                let want = (text(a), text(b), text(c));
                let (Some(s), Some(n), Some(d)) = want else {
                    unreachable!("index items are names or strings")
                };
                (0..n_rel)
                    .find(|&r| self.env.relation_names(r) == (s, n, d))
                    .ok_or_else(|| {
                        let same: Vec<String> = all()
                            .filter(|&(_, name, _)| name == n)
                            .map(|(s, n, d)| format!("`{what}[\"{s}\", \"{n}\", \"{d}\"]`"))
                            .collect();
                        let hint = if same.is_empty() {
                            let written = format!("{s} {n} {d}");
                            let names: Vec<String> =
                                all().map(|(s, n, d)| format!("{s} {n} {d}")).collect();
                            did_you_mean(&written, names.iter().map(String::as_str))
                        } else {
                            format!(" (`{n}` is {})", same.join(", "))
                        };
                        self.err(
                            layer,
                            at,
                            PlanErrorKind::Name,
                            format!("`{what}[\"{s}\", \"{n}\", \"{d}\"]`: the graph has no such relation{hint}; its relations: {}", self.relation_list()),
                        )
                    })
            }
            _ => Err(self.err(
                layer,
                at,
                PlanErrorKind::Expr,
                format!("`{what}[…]` takes one relation: its name, `r`, or [\"source type\", \"name\", \"destination type\"] (3 items), got {} items", items.len()),
            )),
        }
    }

    /// `A_mean[r]` and the other flavours of one relation.
    pub(super) fn relation_adjacency(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        (name, at, items): (&str, usize, &[Expr]),
    ) -> Result<NodeId, PlanError> {
        let Some(kind) = AdjKind::ALL.into_iter().find(|k| k.plan_name() == name) else {
            return self.relation_block(layer, scope, e, (name, at, items));
        };
        if !relation_flavour(kind) {
            return Err(self.err(
                layer,
                at,
                PlanErrorKind::Expr,
                format!("`{name}[…]`: a relation's adjacency is `A`, `A_mean` (R-GCN's 1/c_(i,r)), `A_sym_noloop`, `A_col` or `A_saint` (GraphSAINT's per relation): flavours without self loops"),
            ));
        }
        let r = self.resolve_relation(layer, scope, name, items)?;
        let Some(types) = self.env.types else {
            // The one relation of a homogeneous graph is the graph.
            return self.name(layer, scope, name, e);
        };
        if let Some(&id) = self.rel_adj.get(&(kind.plan_name(), r)) {
            return Ok(id);
        }
        let (s, n, d) = self.env.relation_names(r);
        let label = format!("{name}[\"{s}\", \"{n}\", \"{d}\"]");
        let op = RelAdjacency::new(
            kind,
            r,
            types.relations[r].reverse as usize,
            format!("{s} {n} {d}"),
        );
        let id = self
            .g
            .add(Arc::new(op), &[self.sample], label)
            .map_err(|err| self.internal(err))?;
        self.rel_adj.insert((kind.plan_name(), r), id);
        Ok(id)
    }

    /// `q[r]` of a value that is not an adjacency: relation r's block of its rows, stacked
    /// one block per relation (`["relations", c]` gives a `[1, c]` row: RGAT's attention
    /// vectors; `["relations * in", out]` a weight per relation).
    fn relation_block(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        (name, at, items): (&str, usize, &[Expr]),
    ) -> Result<NodeId, PlanError> {
        let value = match self.name_value(layer, scope, name, e)? {
            Val::Node(id) => id,
            Val::Num(_) => {
                return Err(self.err(
                    layer,
                    at,
                    PlanErrorKind::Expr,
                    format!("`{name}[…]`: `{name}` is a number; a relation indexes an adjacency (`A_mean[r]`) or a value with a block of rows per relation (`q[r]`, q declared [\"relations\", …])"),
                ))
            }
        };
        let relations = self.env.n_relations();
        let rows = match self.g.fact(value) {
            Fact::Dense { rows, .. } => rows.as_known(),
            _ => None,
        };
        if !rows.is_some_and(|n| n > 0 && n % relations == 0) {
            return Err(self.err(
                layer,
                at,
                PlanErrorKind::Graph,
                format!("`{name}[…]`: {name} is {}: a relation takes its block of rows from a value with one block per relation ({relations}); declare it [\"relations\", …] (a row each) or [\"relations * in\", …] (a matrix each); the adjacencies that take a relation are `A[r]`, `A_mean[r]`, `A_sym_noloop[r]`, `A_col[r]`", self.g.fact(value)),
            ));
        }
        let relation = self.resolve_relation(layer, scope, name, items)?;
        let op = RelationBlock {
            relation,
            relations,
            scatter: false,
        };
        self.add(layer, e, Arc::new(op), &[value])
    }

    /// `sum_relations(e)`, `mean_relations(e)`, `basis(a, V, r)`.
    pub(super) fn relation_fn(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        (name, args, kwargs): (&str, &[Expr], &[KwArg]),
    ) -> Result<Val, PlanError> {
        self.no_attributes(layer, name, kwargs)?;
        if name == "basis" {
            return self.basis(layer, scope, e, args);
        }
        let [body] = args else {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Expr,
                format!("`{name}` takes one expression in `r`, each relation: `{name}(A_mean[r] @ x @ basis(a, V, r))`"),
            ));
        };
        if scope.relation.is_some() {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Expr,
                format!("`{name}` inside another sum over relations: `r` would name two relations"),
            ));
        }
        let n_rel = self.env.n_relations();
        let mut acc: Option<NodeId> = None;
        for r in 0..n_rel {
            scope.relation = Some(r);
            let v = self.expr(layer, scope, body);
            scope.relation = None;
            let v = self.node(layer, v?, body, &format!("the body of `{name}`"))?;
            acc = Some(match acc {
                None => v,
                Some(a) => self.add(layer, e, Arc::new(Add), &[a, v])?,
            });
        }
        let sum = acc.expect("at least one relation");
        if name == "mean_relations" && n_rel > 1 {
            return self.scale(layer, e, 1.0 / n_rel as f64, sum);
        }
        Ok(Val::Node(sum))
    }

    /// `basis(a, V, r)`: W_r = Σ_b a[r, b] V_b.
    fn basis(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        args: &[Expr],
    ) -> Result<Val, PlanError> {
        let [a, v, r] = args else {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Expr,
                "`basis(a, V, r)` takes the coefficients a [relations, B], the bases V [B * in, out] and the relation (`r`, or a relation's name)",
            ));
        };
        let relation = match &r.kind {
            ExprKind::Name(_) | ExprKind::Str(_) => {
                self.resolve_relation(layer, scope, "basis", std::slice::from_ref(r))?
            }
            ExprKind::Index { .. } => {
                return Err(self.err(
                    layer,
                    r.span.start,
                    PlanErrorKind::Expr,
                    "`basis`'s third argument is a relation: `r` or a relation's name",
                ))
            }
            _ => {
                return Err(self.err(
                    layer,
                    r.span.start,
                    PlanErrorKind::Expr,
                    "`basis`'s third argument is a relation: `r` or a relation's name",
                ))
            }
        };
        let av = self.expr(layer, scope, a)?;
        let an = self.node(layer, av, a, "argument 1 of `basis`")?;
        let vv = self.expr(layer, scope, v)?;
        let vn = self.node(layer, vv, v, "argument 2 of `basis`")?;
        let n_rel = self.env.n_relations();
        let rows = match self.g.fact(an) {
            Fact::Dense { rows, .. } => rows.as_known(),
            _ => None,
        };
        if rows != Some(n_rel) {
            return Err(self.err(
                layer,
                a.span.start,
                PlanErrorKind::Graph,
                format!("`basis`: a is {}, expected one row per relation ({n_rel}): declare it with shape [\"relations\", B]", self.g.fact(an)),
            ));
        }
        let (s, n, d) = self.env.relation_names(relation);
        let op = BasisWeight {
            relation,
            name: format!("{s} {n} {d}"),
        };
        Ok(Val::Node(self.add(layer, e, Arc::new(op), &[an, vn])?))
    }
}

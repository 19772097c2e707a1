//! Lowering of one layer copy: its parameters declared (or a shared layer's first copy's
//! found), its `dropout`, its program's bindings checked, then its statements lowered in
//! order; a binding never used is an error.

use std::collections::HashMap;

use crate::ir::{Init, NodeId};
use crate::op::{Attr, Attrs};

use super::super::schema::{DimRef, InitSpec, Layer};
use super::super::typing::RESERVED;
use super::super::{PlanError, PlanErrorKind, MAX_DIM};
use super::{Lowerer, Scope, Val};

impl Lowerer<'_> {
    /// Lowers copy `copy` (from 1) of a layer on input `x`, its parameters named with
    /// `suffix`, or those of its first copy when `reuse` (`share = true`); returns its
    /// result and where its final expression is.
    pub(super) fn layer(
        &mut self,
        layer: &Layer,
        x: NodeId,
        suffix: &str,
        copy: usize,
        reuse: bool,
    ) -> Result<(NodeId, usize), PlanError> {
        let width = self
            .g
            .fact(x)
            .matrix()
            .and_then(|(_, c)| c.as_known())
            .expect("layer inputs are checked [n, k]");
        let mut scope = Scope {
            names: HashMap::new(),
            nums: HashMap::new(),
            copy,
            bound: HashMap::new(),
            current: 0,
            uses: HashMap::new(),
            relation: None,
        };
        self.layer_params(layer, &mut scope, width, suffix, reuse)?;
        let x = self.dropout(layer, x)?;
        scope.names.insert("x".into(), x);
        self.bindings(layer, &mut scope)?;
        let stmts = &layer.program;
        let last = stmts.last().expect("a parsed `out` is not empty");
        let mut result = None;
        for (i, s) in stmts.iter().enumerate() {
            scope.current = i;
            let v = self.expr(layer, &mut scope, &s.expr)?;
            match (&s.target, v) {
                (Some((n, _)), Val::Num(c)) => {
                    scope.nums.insert(n.clone(), c);
                }
                (Some((n, _)), Val::Node(node)) => {
                    scope.names.insert(n.clone(), node);
                }
                (None, v) => result = Some(self.node(layer, v, &s.expr, "a layer's result")?),
            }
        }
        for s in stmts {
            if let Some((n, span)) = &s.target {
                if scope.uses.get(n).copied().unwrap_or(0) == 0 {
                    return Err(self.err(
                        layer,
                        span.start,
                        PlanErrorKind::Name,
                        format!("`{n}` is bound but never used"),
                    ));
                }
            }
        }
        let result = result.expect("the last statement is an expression");
        Ok((result, Self::at(layer, last.expr.span.start)))
    }

    /// Declares the parameters of a layer copy (or, when `reuse`, finds its first copy's)
    /// into `scope`; `width` is the layer input's.
    fn layer_params(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        width: usize,
        suffix: &str,
        reuse: bool,
    ) -> Result<(), PlanError> {
        let wd = layer
            .weight_decay
            .unwrap_or(self.plan.optimizer.weight_decay() as f32);
        for p in &layer.params {
            if reuse {
                let node = self.param_of[&format!("{}{suffix}", p.name)];
                scope.names.insert(p.name.clone(), node);
                continue;
            }
            let n_relations = self.env.n_relations();
            let leaf = |d: &DimRef| match d {
                DimRef::In => width,
                DimRef::Features => self.env.n_features,
                DimRef::Classes => self.env.n_classes,
                DimRef::Relations => n_relations,
                DimRef::Known(k) => *k,
                DimRef::Formula(_) => unreachable!("a formula's leaves are not formulas"),
            };
            let resolve = |d: &DimRef| {
                match d {
                DimRef::Formula(f) => f.eval(&leaf).filter(|&k| k <= MAX_DIM).ok_or_else(|| {
                    self.src.error(
                        p.span.start,
                        PlanErrorKind::Graph,
                        format!(
                            "a shape entry or Glorot fan of `{}` is not a whole number between 1 and {MAX_DIM} here (in = {width}, features = {}, classes = {})",
                            p.name, self.env.n_features, self.env.n_classes
                        ),
                    )
                }),
                d => Ok(leaf(d)),
            }
            };
            let (rows, cols) = (resolve(&p.shape[0])?, resolve(&p.shape[1])?);
            let name = format!("{}{suffix}", p.name);
            if let Some(&first) = self.declared.get(&name) {
                let line = self.src.error(first, PlanErrorKind::Name, "").line;
                return Err(self.src.error(
                    p.span.start,
                    PlanErrorKind::Name,
                    format!("parameter `{name}` is declared twice (first on line {line}): parameters need distinct names"),
                ));
            }
            self.declared.insert(name.clone(), p.span.start);
            let init = match &p.init {
                None if rows == 1 => Init::Zeros,
                None => Init::Glorot,
                Some(InitSpec::Fixed(i)) => *i,
                Some(InitSpec::GlorotFans(i, o)) => Init::GlorotFans(resolve(i)?, resolve(o)?),
            };
            let wd = p.weight_decay.unwrap_or(wd);
            let node = self.declare_param(&name, rows, cols, init, p.span.start, wd)?;
            if let Some(l) = layer.lasso.filter(|&l| l > 0.0 && rows > 1) {
                self.lasso.insert(name.clone(), l);
            }
            scope.names.insert(p.name.clone(), node);
        }
        Ok(())
    }

    /// The layer input `x` after the layer's `dropout` key (itself when there is none).
    fn dropout(&mut self, layer: &Layer, x: NodeId) -> Result<NodeId, PlanError> {
        let mut x = x;
        if let Some(p) = layer.dropout.filter(|&p| p > 0.0) {
            if !self.env.registry.contains("dropout") {
                return Err(self.src.error(
                    layer.dropout_span,
                    PlanErrorKind::Name,
                    "`dropout` needs the op `dropout`, which is not registered",
                ));
            }
            let op = self
                .env
                .registry
                .make("dropout", &Attrs::new().with("p", Attr::Num(f64::from(p))))
                .map_err(|e| {
                    self.src
                        .error(layer.dropout_span, PlanErrorKind::Op, e.to_string())
                })?;
            let label = format!("dropout(x, p={p})");
            x = self.g.add(op, &[x], label.clone()).map_err(|e| {
                self.src
                    .error(layer.dropout_span, PlanErrorKind::Op, e.to_string())
            })?;
            self.origins.entry(label).or_insert(layer.dropout_span);
        }
        Ok(x)
    }

    /// Records every binding of the layer's program in `scope.bound`, refusing a binding
    /// of a built-in name, of a parameter, or of a name bound before.
    fn bindings(&mut self, layer: &Layer, scope: &mut Scope) -> Result<(), PlanError> {
        let stmts = &layer.program;
        for (i, s) in stmts.iter().enumerate() {
            let Some((n, span)) = &s.target else { continue };
            if scope.names.contains_key(n) || RESERVED.contains(&n.as_str()) {
                let what = if n == "x" || RESERVED.contains(&n.as_str()) {
                    "a built-in name (the layer input or an adjacency)"
                } else {
                    "a parameter of this layer"
                };
                return Err(self.err(
                    layer,
                    span.start,
                    PlanErrorKind::Name,
                    format!("cannot bind `{n}`: it is {what}"),
                ));
            }
            if let Some(&(_, first)) = scope.bound.get(n) {
                let line = self
                    .src
                    .error(Self::at(layer, first), PlanErrorKind::Name, "")
                    .line;
                return Err(self.err(
                    layer,
                    span.start,
                    PlanErrorKind::Name,
                    format!("`{n}` is bound twice (first on line {line}): use another name"),
                ));
            }
            scope.bound.insert(n.clone(), (i, span.start));
        }
        Ok(())
    }
}

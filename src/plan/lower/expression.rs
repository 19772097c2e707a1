//! Lowering of an expression, one arm per expression kind: numbers fold, names resolve
//! (bindings, parameters, adjacencies, earlier layers' outputs, constants, `l`), operators
//! become `add`/`sub`/`mul`/`scale`, a chain of `@` one `MatMul`; calls are in call.rs,
//! relation adjacencies and `sum_relations(…)` in typed.rs.

use std::sync::Arc;

use crate::ir::NodeId;
use crate::op::builtin::{Add, AdjKind, Adjacency, MatMul};
use crate::op::Attrs;
use crate::suggest::did_you_mean;

use super::super::aggregations;
use super::super::expr::{BinOp, Expr, ExprKind};
use super::super::schema::Layer;
use super::super::{PlanError, PlanErrorKind};
use super::{Lowerer, Scope, Val, NUMBER_FNS, RELATION_FNS};

impl Lowerer<'_> {
    pub(super) fn expr(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
    ) -> Result<Val, PlanError> {
        match &e.kind {
            ExprKind::Number(x) => Ok(Val::Num(*x)),
            ExprKind::Str(s) => Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Expr,
                format!(
                    "the string {s:?} is not a value: strings are attributes (`f(x, key=\"…\")`)"
                ),
            )),
            ExprKind::Paren(inner) => self.expr(layer, scope, inner),
            ExprKind::Index {
                name,
                name_span,
                items,
            } => self
                .relation_adjacency(layer, scope, e, (name, name_span.start, items))
                .map(Val::Node),
            ExprKind::Call {
                name, args, kwargs, ..
            } if RELATION_FNS.contains(&name.as_str()) && !self.env.registry.contains(name) => {
                self.relation_fn(layer, scope, e, (name, args, kwargs))
            }
            ExprKind::Name(n) => self.name_value(layer, scope, n, e),
            ExprKind::Neg(a) => match self.expr(layer, scope, a)? {
                Val::Num(x) => Ok(Val::Num(-x)),
                Val::Node(n) => self.scale(layer, e, -1.0, n),
            },
            ExprKind::Binary { op, lhs, rhs } => self.binary(layer, scope, e, op, lhs, rhs),
            ExprKind::Chain(operands) => {
                let mut inputs = Vec::with_capacity(operands.len());
                for o in operands {
                    let v = self.expr(layer, scope, o)?;
                    inputs.push(self.node(layer, v, o, "an operand of `@`")?);
                }
                Ok(Val::Node(self.add(
                    layer,
                    e,
                    Arc::new(MatMul::plain(inputs.len())),
                    &inputs,
                )?))
            }
            ExprKind::Call {
                name, args, kwargs, ..
            } if NUMBER_FNS.contains(&name.as_str()) && !self.env.registry.contains(name) => {
                self.number_fn(layer, scope, e, (name, args, kwargs))
            }
            ExprKind::Call {
                name, args, kwargs, ..
            } if aggregations::NAMES.contains(&name.as_str())
                && !self.env.registry.contains(name) =>
            {
                let written = aggregations::rewrite(name, args, kwargs, e)
                    .expect("one of the names")
                    .map_err(|what| self.err(layer, e.span.start, PlanErrorKind::Op, what))?;
                self.expr(layer, scope, &written)
            }
            ExprKind::Call {
                name,
                name_span,
                args,
                kwargs,
            } => self.call(layer, scope, e, (name, name_span.start, args, kwargs)),
        }
    }

    /// A name: a number binding, a constant, `l`, an earlier layer's output, or what
    /// [`Self::name`] finds.
    pub(super) fn name_value(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        n: &str,
        e: &Expr,
    ) -> Result<Val, PlanError> {
        if let Some(&c) = scope.nums.get(n) {
            *scope.uses.entry(n.to_string()).or_default() += 1;
            return Ok(Val::Num(c));
        }
        if !scope.names.contains_key(n) && !scope.bound.contains_key(n) {
            if let Some(&c) = self.plan.constants.get(n) {
                return Ok(Val::Num(c));
            }
            if n == "l" {
                return Ok(Val::Num(scope.copy as f64));
            }
            if let Some(&id) = self.outputs.get(n) {
                return Ok(Val::Node(id));
            }
        }
        self.name(layer, scope, n, e).map(Val::Node)
    }

    /// `lhs op rhs`: numbers folded, matrices through `add`, `sub`, `mul` and `scale`.
    fn binary(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        op: &BinOp,
        lhs: &Expr,
        rhs: &Expr,
    ) -> Result<Val, PlanError> {
        let (l, r) = (self.expr(layer, scope, lhs)?, self.expr(layer, scope, rhs)?);
        let sym = op.symbol();
        match (op, l, r) {
            (BinOp::Add, Val::Num(a), Val::Num(b)) => Ok(Val::Num(a + b)),
            (BinOp::Sub, Val::Num(a), Val::Num(b)) => Ok(Val::Num(a - b)),
            (BinOp::Mul, Val::Num(a), Val::Num(b)) => Ok(Val::Num(a * b)),
            (BinOp::Div, Val::Num(a), Val::Num(b)) if b != 0.0 => Ok(Val::Num(a / b)),
            // A broadcast row on the left (`b + x @ W`, `b - x @ W`) goes on the
            // right, where `add` takes it: b + y as y + b, b − y as (−y) + b, the
            // same bits (IEEE addition commutes; b − y is b + (−y)).
            (BinOp::Add, Val::Node(a), Val::Node(b)) => {
                let (a, b) = if self.row_of(a, b) { (b, a) } else { (a, b) };
                Ok(Val::Node(self.add(layer, e, Arc::new(Add), &[a, b])?))
            }
            (BinOp::Sub, Val::Node(a), Val::Node(b)) if self.row_of(a, b) => {
                let Val::Node(neg) = self.scale(layer, e, -1.0, b)? else {
                    unreachable!("a matrix scaled is a matrix")
                };
                Ok(Val::Node(self.add(layer, e, Arc::new(Add), &[neg, a])?))
            }
            (BinOp::Sub, Val::Node(a), Val::Node(b)) => {
                let op = self.operator_op(layer, e, "sub", Attrs::new())?;
                Ok(Val::Node(self.add(layer, e, op, &[a, b])?))
            }
            (BinOp::Mul, Val::Node(a), Val::Node(b)) => {
                let op = self.operator_op(layer, e, "mul", Attrs::new())?;
                Ok(Val::Node(self.add(layer, e, op, &[a, b])?))
            }
            (BinOp::Mul, Val::Num(c), Val::Node(a)) | (BinOp::Mul, Val::Node(a), Val::Num(c)) => {
                self.scale(layer, e, c, a)
            }
            (BinOp::Div, Val::Node(a), Val::Num(c)) if c != 0.0 => self.scale(layer, e, 1.0 / c, a),
            (BinOp::Div, _, Val::Num(_)) => Err(self.err(
                layer,
                rhs.span.start,
                PlanErrorKind::Op,
                "division by zero",
            )),
            (BinOp::Div, _, Val::Node(_)) => Err(self.err(
                layer,
                rhs.span.start,
                PlanErrorKind::Op,
                "only division by a number is supported (`x / 2`)",
            )),
            _ => Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Op,
                format!("`{}`: a number and a matrix cannot be combined with `{sym}` (only `c * a` and `a / c` mix them)", Self::label(layer, e)),
            )),
        }
    }

    pub(super) fn name(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        n: &str,
        e: &Expr,
    ) -> Result<NodeId, PlanError> {
        if let Some(&id) = scope.names.get(n) {
            if scope.bound.contains_key(n) {
                *scope.uses.entry(n.to_string()).or_default() += 1;
            }
            return Ok(id);
        }
        if let Some(kind) = AdjKind::ALL.into_iter().find(|k| k.plan_name() == n) {
            if let Some(&id) = self.adj.get(kind.plan_name()) {
                return Ok(id);
            }
            let id = self
                .g
                .add(
                    Arc::new(Adjacency { kind }),
                    &[self.sample],
                    kind.plan_name(),
                )
                .map_err(|err| self.internal(err))?;
            self.adj.insert(kind.plan_name(), id);
            return Ok(id);
        }
        let at = e.span.start;
        if let Some(&(i, def)) = scope.bound.get(n) {
            let what = if i == scope.current {
                format!("`{n}` is used in its own definition (a cycle)")
            } else {
                let line = self
                    .src
                    .error(Self::at(layer, def), PlanErrorKind::Name, "")
                    .line;
                format!("`{n}` is used before it is defined (it is bound on line {line}, below)")
            };
            return Err(self.err(layer, at, PlanErrorKind::Name, what));
        }
        if self.plan.dims.contains_key(n) {
            return Err(self.err(
                layer,
                at,
                PlanErrorKind::Name,
                format!("`{n}` is a dim, not a value: dims size parameters and attributes"),
            ));
        }
        let elsewhere = self
            .plan
            .layers
            .iter()
            .chain(std::iter::once(&self.plan.output))
            .any(|l| l.params.iter().any(|p| p.name == n));
        if elsewhere {
            return Err(self.err(
                layer,
                at,
                PlanErrorKind::Name,
                format!("`{n}` is a parameter of another layer: parameters belong to the layer declaring them (declare `{n}` in this layer's `params`)"),
            ));
        }
        if n == "r" {
            return Err(self.err(
                layer,
                at,
                PlanErrorKind::Name,
                "`r` is each relation inside `sum_relations(…)` or `mean_relations(…)`, and only indexes there: `A_mean[r]`, `basis(a, V, r)`",
            ));
        }
        let known: Vec<&str> = scope
            .names
            .keys()
            .map(String::as_str)
            .chain(scope.bound.keys().map(String::as_str))
            .chain(AdjKind::ALL.iter().map(|k| k.plan_name()))
            .chain(self.outputs.keys().map(String::as_str))
            .chain(self.plan.constants.keys().map(String::as_str))
            .collect();
        let hint = did_you_mean(n, known.into_iter());
        let what = if hint.is_empty() {
            format!("unknown name `{n}`: not `x`, an adjacency (A, A_mean, A_sym, A_saint), a binding, a parameter of this layer (declare it in `params`), an earlier layer's output (h0 the features, h1, h2, … or a layer's `name`), a [constants] name or `l` (the copy)")
        } else {
            format!("unknown name `{n}`{hint}")
        };
        Err(self.err(layer, at, PlanErrorKind::Name, what))
    }
}

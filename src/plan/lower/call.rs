//! Lowering of calls: a registry op with its keyword arguments as attributes, an op that
//! says how its calls lower (`batchnorm`'s running statistics), and the number functions
//! (`log`, `exp`, `sqrt`) folded.

use std::sync::Arc;

use crate::ir::NodeId;
use crate::op::{Attr, Attrs, Op, OpError};

use super::super::expr::{self, Expr, ExprKind, KwArg};
use super::super::schema::Layer;
use super::super::{PlanError, PlanErrorKind};
use super::{running_names, Lowerer, RunningStats, Scope, Val};

impl Lowerer<'_> {
    /// A call of a registry op `name(args, key=value, …)`: the keyword arguments become
    /// attributes; an op that says how its calls lower goes through [`Self::plan_call`].
    pub(super) fn call(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        (name, name_at, args, kwargs): (&str, usize, &[Expr], &[KwArg]),
    ) -> Result<Val, PlanError> {
        let mut attrs = Attrs::new();
        for k in kwargs {
            let v = match &k.value.kind {
                ExprKind::Number(x) => Attr::Num(*x),
                ExprKind::Neg(inner) if matches!(inner.kind, ExprKind::Number(_)) => {
                    let ExprKind::Number(x) = inner.kind else { unreachable!() };
                    Attr::Num(-x)
                }
                ExprKind::Str(s) => Attr::Str(s.clone()),
                ExprKind::Name(b) if b == "true" || b == "false" => Attr::Bool(b == "true"),
                ExprKind::Name(d) if self.plan.dims.contains_key(d) => {
                    Attr::Num(self.plan.dims[d] as f64)
                }
                ExprKind::Name(c) if self.plan.constants.contains_key(c) => {
                    Attr::Num(self.plan.constants[c])
                }
                _ => {
                    return Err(self.err(
                        layer,
                        k.value.span.start,
                        PlanErrorKind::Expr,
                        format!("attribute `{}` of `{name}`: expected a number, a string, true/false, a [dims] or a [constants] name, got `{}`", k.name, Self::label(layer, &k.value)),
                    ))
                }
            };
            attrs.0.insert(k.name.clone(), v);
        }
        let op = match self.env.registry.make(name, &attrs) {
            Ok(op) => op,
            Err(err) => {
                let (at, kind) = match &err {
                    _ if !self.env.registry.contains(name) => (name_at, PlanErrorKind::Name),
                    OpError::Attr { name: a, .. } => (
                        kwargs
                            .iter()
                            .find(|k| &k.name == a)
                            .map_or(e.span.start, |k| k.name_span.start),
                        PlanErrorKind::Op,
                    ),
                    _ => (e.span.start, PlanErrorKind::Op),
                };
                let what = if self.env.registry.contains(name) {
                    format!("in `{}`: {err}", Self::label(layer, e))
                } else {
                    err.to_string()
                };
                return Err(self.err(layer, at, kind, what));
            }
        };
        let mut inputs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let v = self.expr(layer, scope, a)?;
            inputs.push(self.node(layer, v, a, &format!("argument {} of `{name}`", i + 1))?);
        }
        if op.as_plan_call().is_some() {
            return self.plan_call(layer, e, op, &attrs, inputs);
        }
        Ok(Val::Node(self.add(layer, e, op, &inputs)?))
    }

    /// A call of an op that says how its calls lower ([`PlanCall`](crate::op::PlanCall): `batchnorm`,
    /// `layernorm`) on the written `inputs`: the op for that many arguments; one with
    /// running state also gets its state's name, the subgraph as its last input, and the
    /// node of its step statistics (the output `state/NAME`).
    pub(super) fn plan_call(
        &mut self,
        layer: &Layer,
        e: &Expr,
        op: Arc<dyn Op>,
        attrs: &Attrs,
        mut inputs: Vec<NodeId>,
    ) -> Result<Val, PlanError> {
        let name = op.name().to_string();
        let call = op.as_plan_call().expect("asked by the caller");
        let running = call.running();
        let state = match attrs.0.get("name") {
            Some(Attr::Str(s)) if !s.is_empty() => s.clone(),
            _ => format!("{name}.{}", self.running.len()),
        };
        let made = call
            .for_call(inputs.len(), &state)
            .map_err(|what| self.err(layer, e.span.start, PlanErrorKind::Op, what))?;
        let Some(running) = running else {
            // An op without state that reads the subgraph still takes it last.
            if let crate::op::Arity::Exact(kinds) = made.args() {
                if kinds.last() == Some(&crate::op::Kind::Subgraph)
                    && kinds.len() == inputs.len() + 1
                {
                    inputs.push(self.sample);
                }
            }
            return Ok(Val::Node(self.add(layer, e, made, &inputs)?));
        };
        let clash = self.running.iter().any(|r| r.name == state)
            || running_names(&state)
                .iter()
                .any(|n| self.declared.contains_key(n));
        if clash {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Name,
                format!("`{name}`'s running statistics `{state}` are named twice: give each {name} its own `name=` (in a repeated layer leave `name=` out: each copy then gets its own `{name}.K`)"),
            ));
        }
        let x = inputs[0];
        inputs.push(self.sample);
        let y = self.add(layer, e, made, &inputs)?;
        let label = format!("{}({})", running.stats.name(), Self::label(layer, e));
        let at = Self::at(layer, e.span.start);
        let node = self
            .g
            .add(running.stats, &[x, self.sample], label)
            .map_err(|err| self.src.error(at, PlanErrorKind::Op, err.to_string()))?;
        let cols = self
            .g
            .fact(x)
            .matrix()
            .and_then(|(_, c)| c.as_known())
            .ok_or_else(|| {
                self.src.error(
                    at,
                    PlanErrorKind::Op,
                    format!("`{name}`: x must be a [n, k] matrix of known width"),
                )
            })?;
        let r = RunningStats {
            name: state,
            cols,
            momentum: running.momentum,
            stats: node,
        };
        self.g.set_output(r.output(), node);
        self.running.push(r);
        Ok(Val::Node(y))
    }

    /// An error at the first of `kwargs`, if any: function `name` takes none.
    pub(super) fn no_attributes(
        &self,
        layer: &Layer,
        name: &str,
        kwargs: &[expr::KwArg],
    ) -> Result<(), PlanError> {
        match kwargs.first() {
            Some(k) => Err(self.err(
                layer,
                k.name_span.start,
                PlanErrorKind::Expr,
                format!("`{name}` takes no attribute"),
            )),
            None => Ok(()),
        }
    }

    /// `log(c)`, `exp(c)` or `sqrt(c)` of a number, folded.
    pub(super) fn number_fn(
        &mut self,
        layer: &Layer,
        scope: &mut Scope,
        e: &Expr,
        (name, args, kwargs): (&str, &[Expr], &[expr::KwArg]),
    ) -> Result<Val, PlanError> {
        let [a] = args else {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Expr,
                format!("`{name}` takes one number"),
            ));
        };
        self.no_attributes(layer, name, kwargs)?;
        let Val::Num(c) = self.expr(layer, scope, a)? else {
            return Err(self.err(
                layer,
                a.span.start,
                PlanErrorKind::Op,
                format!("`{name}` applies to numbers (constants, `l`, number bindings), not to matrices"),
            ));
        };
        let v = match name {
            "log" => c.ln(),
            "exp" => c.exp(),
            _ => c.sqrt(),
        };
        if !v.is_finite() {
            return Err(self.err(
                layer,
                e.span.start,
                PlanErrorKind::Op,
                format!("`{}` is {v} (of {c})", Self::label(layer, e)),
            ));
        }
        Ok(Val::Num(v))
    }
}

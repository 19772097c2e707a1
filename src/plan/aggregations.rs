//! Named neighbour aggregations written in the plan language itself (issue 58 item 5):
//! `var_agg(A, x)`, `std_agg(A, x, eps=1e-5)` and `multi_agg(A, x, aggrs="mean,max,min,std")`
//! are rewritten, before lowering, into the expressions they stand for — products by A,
//! elementwise ops, `max_agg`/`min_agg`, `concat` — so their gradients are autodiff's,
//! their order the planner's, and out-of-core evaluation the same as for any plan:
//!
//! * `var_agg(A, x)` = `A @ (x * x) - (A @ x) * (A @ x)`: with `A_mean`, the variance of the
//!   neighbours' rows, E(x²) − E(x)² (PyG's `VarAggregation`);
//! * `std_agg(A, x, eps)` = `sqrt(var_agg(A, x), eps=eps)`: √max(var, ε) (PyG's
//!   `StdAggregation`, ε = 1e-5);
//! * `multi_agg(A, x, aggrs="…")`: the listed aggregations side by side (`concat`), each of
//!   `mean` (`A @ x`: the mean with `A_mean`), `max`, `min`, `std`, `var` (PNA's
//!   aggregators; PyG's `MultiAggregation` with `mode="cat"`).
//!
//! A registered op of the same name (a user's) takes precedence, as for number functions.

use super::expr::{BinOp, Expr, ExprKind, KwArg};

/// The names rewritten here.
pub const NAMES: &[&str] = &["var_agg", "std_agg", "multi_agg"];

/// The aggregations `multi_agg` takes.
pub const MULTI: &[&str] = &["mean", "max", "min", "std", "var"];

/// The rewrite of a call `name(args, kwargs)` at `e`, if `name` is one of [`NAMES`]; an
/// error message (for the call's position) when its arguments are wrong.
pub fn rewrite(
    name: &str,
    args: &[Expr],
    kwargs: &[KwArg],
    e: &Expr,
) -> Option<Result<Expr, String>> {
    if !NAMES.contains(&name) {
        return None;
    }
    Some(rewrite_known(name, args, kwargs, e))
}

fn rewrite_known(name: &str, args: &[Expr], kwargs: &[KwArg], e: &Expr) -> Result<Expr, String> {
    let [a, x] = args else {
        return Err(format!(
            "`{name}` takes 2 arguments (an adjacency and a matrix: `{name}(A_mean, x)`), got {}",
            args.len()
        ));
    };
    let allowed: &[&str] = match name {
        "std_agg" => &["eps"],
        "multi_agg" => &["aggrs", "eps"],
        _ => &[],
    };
    if let Some(k) = kwargs.iter().find(|k| !allowed.contains(&k.name.as_str())) {
        return Err(format!(
            "`{name}` has no attribute `{}` (it takes {})",
            k.name,
            if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            }
        ));
    }
    let eps: Vec<KwArg> = kwargs.iter().filter(|k| k.name == "eps").cloned().collect();
    let at = |kind| Expr {
        kind,
        span: e.span.clone(),
    };
    let paren = |inner: Expr| at(ExprKind::Paren(Box::new(inner)));
    let chain = |l: &Expr, r: Expr| paren(at(ExprKind::Chain(vec![l.clone(), r])));
    let binary = |op, lhs: Expr, rhs: Expr| {
        at(ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        })
    };
    let call = |name: &str, args: Vec<Expr>, kwargs: Vec<KwArg>| {
        at(ExprKind::Call {
            name: name.into(),
            name_span: e.span.clone(),
            args,
            kwargs,
        })
    };
    let var = || {
        let sq = paren(binary(BinOp::Mul, x.clone(), x.clone()));
        let mean = chain(a, x.clone());
        paren(binary(
            BinOp::Sub,
            chain(a, sq),
            binary(BinOp::Mul, mean.clone(), mean),
        ))
    };
    let one = |agg: &str| -> Result<Expr, String> {
        Ok(match agg {
            "mean" => chain(a, x.clone()),
            "max" => call("max_agg", vec![a.clone(), x.clone()], vec![]),
            "min" => call("min_agg", vec![a.clone(), x.clone()], vec![]),
            "var" => var(),
            "std" => call("sqrt", vec![var()], eps.clone()),
            other => {
                return Err(format!(
                    "`multi_agg`: unknown aggregation `{other}` in aggrs, expected some of {}",
                    MULTI.join(", ")
                ))
            }
        })
    };
    match name {
        "var_agg" => Ok(var()),
        "std_agg" => one("std"),
        _ => {
            let list =
                match kwargs.iter().find(|k| k.name == "aggrs") {
                    None => "mean,max,min,std".to_string(),
                    Some(k) => match &k.value.kind {
                        ExprKind::Str(s) => s.clone(),
                        _ => return Err(
                            "`multi_agg`: aggrs is a string of names, e.g. aggrs=\"mean,max,std\""
                                .into(),
                        ),
                    },
                };
            let parts: Vec<Expr> = list
                .split(',')
                .map(|s| one(s.trim()))
                .collect::<Result<_, _>>()?;
            Ok(match parts.len() {
                1 => parts.into_iter().next().expect("one"),
                _ => call("concat", parts, vec![]),
            })
        }
    }
}

//! The expression language of `out` strings: a lexer and a recursive-descent parser. Every
//! node carries its byte range in the (decoded) string, so lowering can point at it.
//!
//! ```text
//! program   := sep* statement (sep+ statement)* sep*        sep := newline | ';'
//! statement := NAME '=' expr | expr                         (the last one: an expr)
//! expr      := term (('+' | '-') term)*
//! term      := unary (('*' | '/') unary)*
//! unary     := '-' unary | chain
//! chain     := power ('@' power)*                           one MatMul chain node
//! power     := primary ('^' INTEGER)?                       k copies of the operand
//! primary   := NUMBER | STRING | NAME | NAME '(' args ')' | NAME '[' index ']' | '(' expr ')'
//! index     := item (',' item)*              item := NAME | STRING   (a relation, a type)
//! args      := (arg (',' arg)* ','?)?      arg := expr | NAME '=' expr   (keywords last)
//! ```
//! `@` binds tighter than `*`, so `0.5 * A @ x` scales the product. `A_sym^3 @ x` is
//! `A_sym @ A_sym @ A_sym @ x`, one chain the planner orders like any other (k from 1 to
//! [`MAX_POWER`]). Newlines inside
//! parentheses continue the line; `#` starts a comment. Names may contain dots
//! (`user.gelu`, the namespaced custom ops).
//!
//! Limits, checked while parsing so that no input can exhaust the stack (the parser, the
//! lowering and dropping an [`Expr`] all recurse over the tree): an `out` string is at most
//! [`MAX_EXPR_BYTES`] bytes and an expression tree at most [`MAX_EXPR_DEPTH`] levels deep,
//! counting every operator, call, parenthesis and unary minus on the way down (a left-deep
//! sum `a + b + c` is 3 levels: two `+` and an operand).

use std::ops::Range;

/// The largest power `X^k` (64: GCNII's depth).
pub const MAX_POWER: u64 = 64;

/// The longest `out` string, in bytes (64 KiB: a hundred times the longest shipped one).
pub const MAX_EXPR_BYTES: usize = 64 * 1024;

/// The deepest expression tree: 64 levels. At each level the parser recurses through
/// about six frames (expr → term → unary → chain → primary → args), so the limit keeps it,
/// the lowering and the tree's drop within a few hundred frames: far inside the 2 MiB
/// stack of a spawned thread. Real layers nest a handful of levels.
pub const MAX_EXPR_DEPTH: usize = 64;

/// A parse error at byte `at` of the expression string.
#[derive(Clone, Debug, PartialEq)]
pub struct ExprError {
    /// Byte offset in the string.
    pub at: usize,
    /// What is wrong.
    pub what: String,
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl BinOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
}

/// A keyword argument of a call (`p=0.5`): becomes an op attribute.
#[derive(Clone, Debug, PartialEq)]
pub struct KwArg {
    /// The attribute name.
    pub name: String,
    /// Where the name is.
    pub name_span: Range<usize>,
    /// Its value (a literal, `true`/`false`, a dim name, or a negated number).
    pub value: Expr,
}

/// What an expression is.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A name: `x`, a parameter, an adjacency, a binding.
    Name(String),
    /// A number.
    Number(f64),
    /// A string (attributes only).
    Str(String),
    /// `-e`.
    Neg(Box<Expr>),
    /// `a op b`.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// `a @ b @ …`, two or more operands: one chain product.
    Chain(Vec<Expr>),
    /// `f(args, key=value)`.
    Call {
        /// The op's name.
        name: String,
        /// Where the name is.
        name_span: Range<usize>,
        /// Positional arguments.
        args: Vec<Expr>,
        /// Keyword arguments.
        kwargs: Vec<KwArg>,
    },
    /// `(e)`: a parenthesised expression (a product in it is a chain of its own).
    Paren(Box<Expr>),
    /// `A_mean[cites]`, `A_mean["paper", "cites", "paper"]`, `A_mean[r]`: a name indexed
    /// by a relation (issue 57); each item a name or a string.
    Index {
        /// The indexed name.
        name: String,
        /// Where the name is.
        name_span: Range<usize>,
        /// The items, each `ExprKind::Name` or `ExprKind::Str`.
        items: Vec<Expr>,
    },
}

/// An expression and its byte range.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Range<usize>,
}

/// One line of an `out` program.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// `name = …`: the bound name and its range; `None` for the final expression.
    pub target: Option<(String, Range<usize>)>,
    /// The expression.
    pub expr: Expr,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Num(f64),
    Str(String),
    Op(char),
    Sep,
    Eof,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Name(n) => format!("`{n}`"),
        Tok::Num(x) => format!("the number {x}"),
        Tok::Str(s) => format!("the string {s:?}"),
        Tok::Op(c) => format!("`{c}`"),
        Tok::Sep => "the end of the line".into(),
        Tok::Eof => "the end of the expression".into(),
    }
}

fn lex(s: &str) -> Result<Vec<(Tok, Range<usize>)>, ExprError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        match c {
            b' ' | b'\t' | b'\r' => i += 1,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'\n' | b';' => {
                i += 1;
                if depth == 0 {
                    out.push((Tok::Sep, start..i));
                } else if c == b';' {
                    return Err(ExprError {
                        at: start,
                        what: "`;` inside parentheses".into(),
                    });
                }
            }
            b'(' | b')' | b',' | b'=' | b'+' | b'-' | b'*' | b'/' | b'@' | b'^' | b'[' | b']' => {
                if c == b'(' || c == b'[' {
                    depth += 1;
                } else if c == b')' || c == b']' {
                    depth = depth.saturating_sub(1);
                }
                i += 1;
                out.push((Tok::Op(c as char), start..i));
            }
            b'0'..=b'9' | b'.' if c != b'.' || b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                    i += 1;
                }
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                        j += 1;
                    }
                    if j < b.len() && b[j].is_ascii_digit() {
                        i = j;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                }
                let text = s[start..i].replace('_', "");
                let x = text.parse::<f64>().map_err(|_| ExprError {
                    at: start,
                    what: format!("`{}` is not a number", &s[start..i]),
                })?;
                out.push((Tok::Num(x), start..i));
            }
            b'"' | b'\'' => {
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    i += 1;
                }
                if i >= b.len() || b[i] != c {
                    return Err(ExprError {
                        at: start,
                        what: "unterminated string".into(),
                    });
                }
                i += 1;
                out.push((Tok::Str(s[start + 1..i - 1].to_string()), start..i));
            }
            _ if c.is_ascii_alphabetic() || c == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.')
                {
                    i += 1;
                }
                out.push((Tok::Name(s[start..i].to_string()), start..i));
            }
            _ => {
                let ch = s[start..].chars().next().expect("in bounds");
                return Err(ExprError {
                    at: start,
                    what: format!("unexpected character `{ch}`"),
                });
            }
        }
    }
    out.push((Tok::Eof, s.len()..s.len()));
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, Range<usize>)>,
    pos: usize,
}

/// An expression with the depth of its tree (a leaf is 1).
type Deep = (Expr, usize);

/// The error for a tree deeper than [`MAX_EXPR_DEPTH`], at byte `at`.
fn too_deep(at: usize) -> ExprError {
    ExprError {
        at,
        what: format!(
            "the expression nests deeper than {MAX_EXPR_DEPTH} levels (operators, calls and parentheses): split it with `name = …` bindings"
        ),
    }
}

/// `depth` if within the limit, else the error at `at`.
fn within(depth: usize, at: usize) -> Result<usize, ExprError> {
    if depth > MAX_EXPR_DEPTH {
        Err(too_deep(at))
    } else {
        Ok(depth)
    }
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }
    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].0
    }
    fn span(&self) -> Range<usize> {
        self.toks[self.pos].1.clone()
    }
    fn bump(&mut self) -> (Tok, Range<usize>) {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn is_op(&self, c: char) -> bool {
        *self.peek() == Tok::Op(c)
    }
    fn error<T>(&self, what: impl Into<String>) -> Result<T, ExprError> {
        Err(ExprError {
            at: self.span().start,
            what: what.into(),
        })
    }
    fn expect(&mut self, c: char, context: &str) -> Result<Range<usize>, ExprError> {
        if self.is_op(c) {
            Ok(self.bump().1)
        } else {
            self.error(format!(
                "expected `{c}` {context}, found {}",
                describe(self.peek())
            ))
        }
    }

    fn program(&mut self) -> Result<Vec<Statement>, ExprError> {
        let mut stmts = Vec::new();
        loop {
            while *self.peek() == Tok::Sep {
                self.bump();
            }
            if *self.peek() == Tok::Eof {
                break;
            }
            let target = match (self.peek().clone(), self.peek_at(1)) {
                (Tok::Name(n), Tok::Op('=')) => {
                    let span = self.bump().1;
                    self.bump();
                    Some((n, span))
                }
                _ => None,
            };
            let (expr, _) = self.expr(0)?;
            if !matches!(self.peek(), Tok::Sep | Tok::Eof) {
                return self.error(format!(
                    "expected an operator or the end of the line, found {}",
                    describe(self.peek())
                ));
            }
            stmts.push(Statement { target, expr });
        }
        Ok(stmts)
    }

    // Every method takes `above`, the levels above the expression it parses, and returns
    // the depth of the tree it built; `above + depth` never exceeds MAX_EXPR_DEPTH, so the
    // recursion stops at the limit whatever the input.

    fn expr(&mut self, above: usize) -> Result<Deep, ExprError> {
        let (mut lhs, mut depth) = self.term(above)?;
        loop {
            let op = match self.peek() {
                Tok::Op('+') => BinOp::Add,
                Tok::Op('-') => BinOp::Sub,
                _ => return Ok((lhs, depth)),
            };
            let at = self.bump().1.start;
            // The new node sits above both operands.
            within(above + depth + 1, at)?;
            let (rhs, d) = self.term(above + 1)?;
            depth = within(above + depth.max(d) + 1, at)? - above;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn term(&mut self, above: usize) -> Result<Deep, ExprError> {
        let (mut lhs, mut depth) = self.unary(above)?;
        loop {
            let op = match self.peek() {
                Tok::Op('*') => BinOp::Mul,
                Tok::Op('/') => BinOp::Div,
                _ => return Ok((lhs, depth)),
            };
            let at = self.bump().1.start;
            within(above + depth + 1, at)?;
            let (rhs, d) = self.unary(above + 1)?;
            depth = within(above + depth.max(d) + 1, at)? - above;
            lhs = binary(op, lhs, rhs);
        }
    }

    fn unary(&mut self, above: usize) -> Result<Deep, ExprError> {
        if self.is_op('-') {
            let start = self.bump().1.start;
            within(above + 1, start)?;
            let (e, d) = self.unary(above + 1)?;
            let span = start..e.span.end;
            return Ok((
                Expr {
                    kind: ExprKind::Neg(Box::new(e)),
                    span,
                },
                d + 1,
            ));
        }
        self.chain(above)
    }

    fn chain(&mut self, above: usize) -> Result<Deep, ExprError> {
        let (first, d0) = self.primary(above)?;
        let first = self.power(first)?;
        if first.len() == 1 && !self.is_op('@') {
            let e = first.into_iter().next().expect("one operand");
            return Ok((e, d0));
        }
        // A chain is one node over all its operands.
        within(above + d0 + 1, first[0].span.start)?;
        let (mut ops, mut depth) = (first, d0);
        while self.is_op('@') {
            self.bump();
            let (e, d) = self.primary(above + 1)?;
            depth = depth.max(d);
            ops.extend(self.power(e)?);
        }
        let span = ops[0].span.start..ops[ops.len() - 1].span.end;
        Ok((
            Expr {
                kind: ExprKind::Chain(ops),
                span,
            },
            depth + 1,
        ))
    }

    /// `e` and an optional `^ k` after it: k copies of `e` (k a whole number from 1 to
    /// [`MAX_POWER`]).
    fn power(&mut self, e: Expr) -> Result<Vec<Expr>, ExprError> {
        if !self.is_op('^') {
            return Ok(vec![e]);
        }
        let at = self.bump().1.start;
        let k = match self.peek().clone() {
            Tok::Num(x) if x.fract() == 0.0 && (1.0..=MAX_POWER as f64).contains(&x) => x as usize,
            _ => {
                return Err(ExprError {
                    at,
                    what: format!(
                        "`^` takes a whole number from 1 to {MAX_POWER} (a power of a matrix: \
                         `A_sym^2 @ x`)"
                    ),
                })
            }
        };
        self.bump();
        Ok(vec![e; k])
    }

    fn primary(&mut self, above: usize) -> Result<Deep, ExprError> {
        let (tok, span) = (self.peek().clone(), self.span());
        within(above + 1, span.start)?;
        let leaf = |kind| {
            Ok((
                Expr {
                    kind,
                    span: span.clone(),
                },
                1,
            ))
        };
        match tok {
            Tok::Num(x) => {
                self.bump();
                leaf(ExprKind::Number(x))
            }
            Tok::Str(s) => {
                self.bump();
                leaf(ExprKind::Str(s))
            }
            Tok::Name(name) => {
                self.bump();
                if self.is_op('[') {
                    return self.index(name, span, above);
                }
                if !self.is_op('(') {
                    return leaf(ExprKind::Name(name));
                }
                self.bump();
                let (args, kwargs, d) = self.args(&name, above + 1)?;
                let end = self.expect(')', &format!("to close the call of `{name}`"))?;
                Ok((
                    Expr {
                        kind: ExprKind::Call {
                            name,
                            name_span: span.clone(),
                            args,
                            kwargs,
                        },
                        span: span.start..end.end,
                    },
                    d + 1,
                ))
            }
            Tok::Op('(') => {
                self.bump();
                let (inner, d) = self.expr(above + 1)?;
                let end = self.expect(')', "to close the parenthesis")?;
                Ok((
                    Expr {
                        kind: ExprKind::Paren(Box::new(inner)),
                        span: span.start..end.end,
                    },
                    d + 1,
                ))
            }
            other => self.error(format!("expected an operand, found {}", describe(&other))),
        }
    }

    /// `NAME [ item, … ]` after the name (at `span`): one to three names or strings.
    fn index(&mut self, name: String, span: Range<usize>, above: usize) -> Result<Deep, ExprError> {
        within(above + 2, span.start)?;
        self.bump();
        let mut items = Vec::new();
        loop {
            let (tok, at) = (self.peek().clone(), self.span());
            let kind = match tok {
                Tok::Name(n) => ExprKind::Name(n),
                Tok::Str(s) => ExprKind::Str(s),
                other => {
                    return self.error(format!(
                        "expected a relation or node type (a name or a string) in `{name}[…]`, found {}",
                        describe(&other)
                    ))
                }
            };
            self.bump();
            items.push(Expr { kind, span: at });
            if !self.is_op(',') {
                break;
            }
            self.bump();
        }
        let end = self.expect(']', &format!("to close `{name}[`"))?;
        Ok((
            Expr {
                kind: ExprKind::Index {
                    name,
                    name_span: span.clone(),
                    items,
                },
                span: span.start..end.end,
            },
            2,
        ))
    }

    /// A call's arguments, each parsed `above` levels down; their greatest depth.
    fn args(
        &mut self,
        call: &str,
        above: usize,
    ) -> Result<(Vec<Expr>, Vec<KwArg>, usize), ExprError> {
        let (mut args, mut kwargs) = (Vec::new(), Vec::<KwArg>::new());
        let mut depth = 0;
        while !self.is_op(')') {
            if let (Tok::Name(n), Tok::Op('=')) = (self.peek().clone(), self.peek_at(1)) {
                let name_span = self.bump().1;
                self.bump();
                if kwargs.iter().any(|k| k.name == n) {
                    return Err(ExprError {
                        at: name_span.start,
                        what: format!("attribute `{n}` given twice in the call of `{call}`"),
                    });
                }
                let (value, d) = self.expr(above)?;
                depth = depth.max(d);
                kwargs.push(KwArg {
                    name: n,
                    name_span,
                    value,
                });
            } else {
                if let Some(k) = kwargs.last() {
                    return self.error(format!(
                        "positional argument after the keyword argument `{}` in the call of `{call}`",
                        k.name
                    ));
                }
                let (e, d) = self.expr(above)?;
                depth = depth.max(d);
                args.push(e);
            }
            if !self.is_op(',') {
                break;
            }
            self.bump();
        }
        Ok((args, kwargs, depth))
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span.start..rhs.span.end;
    Expr {
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        span,
    }
}

/// Parses an `out` program into statements (possibly none: the caller reports an empty
/// `out`).
/// Strings longer than [`MAX_EXPR_BYTES`] and trees deeper than [`MAX_EXPR_DEPTH`] are
/// errors.
pub fn parse(s: &str) -> Result<Vec<Statement>, ExprError> {
    if s.len() > MAX_EXPR_BYTES {
        return Err(ExprError {
            at: 0,
            what: format!(
                "`out` is {} bytes long, the limit is {MAX_EXPR_BYTES}",
                s.len()
            ),
        });
    }
    let toks = lex(s)?;
    Parser { toks, pos: 0 }.program()
}

/// Collapses whitespace runs (newlines included) to one space: node labels are one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Name(n) => n.clone(),
            ExprKind::Number(x) => x.to_string(),
            ExprKind::Str(v) => format!("{v:?}"),
            ExprKind::Neg(e) => format!("(neg {})", show(e)),
            ExprKind::Binary { op, lhs, rhs } => {
                format!("({} {} {})", op.symbol(), show(lhs), show(rhs))
            }
            ExprKind::Chain(ops) => {
                format!("(@ {})", ops.iter().map(show).collect::<Vec<_>>().join(" "))
            }
            ExprKind::Call {
                name, args, kwargs, ..
            } => {
                let mut parts: Vec<String> = args.iter().map(show).collect();
                parts.extend(
                    kwargs
                        .iter()
                        .map(|k| format!("{}={}", k.name, show(&k.value))),
                );
                format!("{name}({})", parts.join(", "))
            }
            ExprKind::Paren(e) => format!("[{}]", show(e)),
            ExprKind::Index { name, items, .. } => {
                format!(
                    "{name}<{}>",
                    items.iter().map(show).collect::<Vec<_>>().join(", ")
                )
            }
        }
    }

    fn one(s: &str) -> String {
        let p = parse(s).unwrap();
        assert_eq!(p.len(), 1);
        show(&p[0].expr)
    }

    #[test]
    fn precedence_and_chains() {
        assert_eq!(one("A_mean @ x @ W"), "(@ A_mean x W)");
        assert_eq!(one("A @ (x @ W)"), "(@ A [(@ x W)])");
        assert_eq!(one("0.5 * A @ x + b"), "(+ (* 0.5 (@ A x)) b)");
        assert_eq!(one("-x @ W - b"), "(- (neg (@ x W)) b)");
        assert_eq!(
            one("dropout(x, p=0.5, mode=\"a\")"),
            "dropout(x, p=0.5, mode=\"a\")"
        );
        assert_eq!(one("f(\n  a,\n  b,\n)"), "f(a, b)");
        assert_eq!(one("1e-3 * x / 2"), "(/ (* 0.001 x) 2)");
    }

    #[test]
    fn relation_indices() {
        assert_eq!(one("A_mean[cites] @ x @ W"), "(@ A_mean<cites> x W)");
        assert_eq!(
            one("A_mean[\"paper\", 'cites', paper] @ x"),
            "(@ A_mean<\"paper\", \"cites\", paper> x)"
        );
        assert_eq!(one("sum_relations(A[r] @ x)"), "sum_relations((@ A<r> x))");
        let e = parse("A_mean[] @ x").unwrap_err();
        assert_eq!(e.at, 7);
        assert!(e.what.contains("a name or a string"), "{}", e.what);
        let e = parse("A_mean[cites @ x").unwrap_err();
        assert!(e.what.contains("to close `A_mean[`"), "{}", e.what);
        let e = parse("A_mean[1]").unwrap_err();
        assert!(e.what.contains("found the number 1"), "{}", e.what);
    }

    #[test]
    fn statements_and_spans() {
        let s = "z = x @ W  # project\n\nrelu(A @ z)";
        let p = parse(s).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].target.as_ref().unwrap().0, "z");
        assert_eq!(&s[p[0].expr.span.clone()], "x @ W");
        assert_eq!(&s[p[1].expr.span.clone()], "relu(A @ z)");
    }

    #[test]
    fn errors_point_at_the_token() {
        let e = parse("relu(x @ W").unwrap_err();
        assert_eq!(e.at, 10);
        assert!(e.what.contains("expected `)`"), "{}", e.what);
        let e = parse("x @ $").unwrap_err();
        assert_eq!((e.at, e.what.as_str()), (4, "unexpected character `$`"));
        let e = parse("x W").unwrap_err();
        assert_eq!(e.at, 2);
        let e = parse("f(p=1, x)").unwrap_err();
        assert!(e.what.contains("positional argument after"), "{}", e.what);
    }

    /// Issue 15: 30000 nested parentheses, unary minuses or a 20000-term sum (all within
    /// the length limit) used to overflow the stack; each is now an error at the token
    /// that crosses the limit, and the limit itself parses.
    #[test]
    fn issue_15_nesting_is_limited() {
        let deep = format!("{}x{}", "(".repeat(30_000), ")".repeat(30_000));
        let e = parse(&deep).unwrap_err();
        assert!(e.what.contains("deeper than 64"), "{}", e.what);
        assert_eq!(
            e.at, MAX_EXPR_DEPTH,
            "the 65th parenthesis is the 65th level"
        );
        let e = parse(&format!("{}x", "-".repeat(60_000))).unwrap_err();
        assert_eq!(e.at, MAX_EXPR_DEPTH);
        let sum = vec!["x"; 20_000].join("+");
        assert!(sum.len() < MAX_EXPR_BYTES);
        let e = parse(&sum).unwrap_err();
        assert!(e.what.contains("deeper than 64"), "{}", e.what);
        let e = parse(&format!("{}x{}", "f(".repeat(20_000), ")".repeat(20_000))).unwrap_err();
        assert!(e.what.contains("deeper than 64"), "{}", e.what);
        // At the limit: 63 minuses or parentheses over a leaf, a 64-level sum.
        parse(&format!("{}x", "-".repeat(MAX_EXPR_DEPTH - 1))).unwrap();
        parse(&vec!["x"; MAX_EXPR_DEPTH].join("+")).unwrap();
        parse(&vec!["x"; MAX_EXPR_DEPTH + 1].join("+")).unwrap_err();
        let p = format!("{}x{}", "(".repeat(62), ")".repeat(62));
        parse(&p).unwrap();
        parse(&format!("({p})")).unwrap();
        parse(&format!("(({p}))")).unwrap_err();
        // A long flat argument list is not deep.
        parse(&format!("concat({})", vec!["x"; 5000].join(", "))).unwrap();
    }

    #[test]
    fn issue_15_length_is_limited() {
        let long = format!("x{}", " ".repeat(MAX_EXPR_BYTES));
        let e = parse(&long).unwrap_err();
        assert!(
            e.what.contains("bytes long, the limit is 65536"),
            "{}",
            e.what
        );
        parse(&long[..MAX_EXPR_BYTES]).unwrap();
    }
}

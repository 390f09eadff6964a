//! Errors and warnings (docs/language.md, "Errors and warnings"): the
//! diagnostics of the checker, how constructs are named in them, and
//! what the unsupported ones are instead.

use super::{off, Checker, R};
use crate::diag::Severity;
use crate::types::Ty;
use rustpython_parser::ast::{self, Constant, Ranged};

/// How a statement kind is named in messages.
pub(super) fn stmt_name(s: &ast::Stmt) -> &'static str {
    use ast::Stmt::*;
    match s {
        FunctionDef(_) => "a nested 'def'",
        AsyncFunctionDef(_) => "'async def'",
        ClassDef(_) => "'class'",
        Return(_) => "'return' outside a chain",
        Delete(_) => "'del'",
        Assign(_) => "assignment",
        TypeAlias(_) => "'type' aliases",
        AugAssign(_) => "augmented assignment",
        AnnAssign(_) => "annotated assignment",
        For(_) => "'for'",
        AsyncFor(_) => "'async for'",
        While(_) => "'while'",
        If(_) => "'if'",
        With(_) | AsyncWith(_) => "'with'",
        Match(_) => "'match'",
        Raise(_) => "'raise'",
        Try(_) | TryStar(_) => "'try'",
        Assert(_) => "'assert'",
        Import(_) => "'import'",
        ImportFrom(_) => "'from ... import'",
        Global(_) => "'global'",
        Nonlocal(_) => "'nonlocal'",
        Expr(_) => "expression statement",
        Pass(_) => "'pass'",
        Break(_) => "'break'",
        Continue(_) => "'continue'",
    }
}

/// How an expression kind is named in messages.
pub(super) fn expr_name(e: &ast::Expr) -> &'static str {
    use ast::Expr::*;
    match e {
        BoolOp(_) => "'and'/'or'",
        NamedExpr(_) => "':=' (assignment expressions)",
        BinOp(_) => "this operator",
        UnaryOp(_) => "this operator",
        Lambda(_) => "'lambda'",
        IfExp(_) => "conditional expressions",
        Dict(_) => "dicts",
        Set(_) => "sets",
        ListComp(_) | SetComp(_) | DictComp(_) | GeneratorExp(_) => "comprehensions",
        Await(_) => "'await'",
        Yield(_) | YieldFrom(_) => "'yield'",
        Compare(_) => "comparisons",
        Call(_) => "calls",
        FormattedValue(_) | JoinedStr(_) => "f-strings",
        Constant(c) => match c.value {
            ast::Constant::Str(_) => "strings",
            ast::Constant::Bytes(_) => "bytes",
            ast::Constant::Float(_) | ast::Constant::Complex { .. } => "floating-point numbers",
            ast::Constant::None => "None",
            ast::Constant::Ellipsis => "'...'",
            _ => "this constant",
        },
        Attribute(_) => "attributes",
        Subscript(_) => "subscripts",
        Starred(_) => "'*' unpacking",
        Name(_) => "names",
        List(_) => "lists",
        Tuple(_) => "tuples",
        Slice(_) => "slices",
    }
}

/// Where a converted value goes; the help texts name the fix there.
#[derive(Clone, Copy, Debug)]
pub(super) enum Dest<'n> {
    /// The result of the chain of this name (`return e`).
    Result(&'n str),
    /// The local, parameter or constant of this name.
    Named(&'n str),
    /// An operand, argument, key or map value.
    Value,
}

/// The smallest and largest value of integer type `ty`.
pub(super) fn int_range(ty: Ty) -> (i128, i128) {
    if ty.signed() {
        (-(1i128 << (ty.bits() - 1)), (1i128 << (ty.bits() - 1)) - 1)
    } else {
        (0, (1i128 << ty.bits()) - 1)
    }
}

/// The help for literal `v`, which does not fit `ty`, converted for
/// `dest`: its range, and the fix: a signed type for a negative value
/// in an unsigned type, a wider one for a value too large (or too
/// small for a signed type).
pub(super) fn fit_help(ty: Ty, v: i128, dest: Dest) -> String {
    if ty == Ty::Bool {
        return "use True or False".into();
    }
    let (lo, hi) = int_range(ty);
    if v >= lo {
        return format!("{ty} holds {lo} .. {hi}; use a wider type or wrap explicitly: {ty}(x)");
    }
    // The smallest signed type at least as wide as `ty` that holds `v`.
    let s = [8, 16, 32, 64]
        .into_iter()
        .map(|b| Ty::int(true, b))
        .find(|t| t.bits() >= ty.bits() && t.fits(v))
        .unwrap_or(Ty::S64);
    if ty.signed() {
        return format!(
            "{ty} holds {lo} .. {hi}; use a wider signed type ({s}) or wrap explicitly: {ty}(x)"
        );
    }
    let range = format!("{ty} holds {lo} .. {hi} (no negative values)");
    match dest {
        Dest::Result(c) => {
            format!("{range}; declare the result of {c} as a signed type: def {c}(...) -> {s}")
        }
        Dest::Named(n) => format!("{range}; declare '{n}' as a signed type: {n}: {s} = ..."),
        Dest::Value => format!("{range}; use a signed type ({s}) or wrap explicitly: {ty}(x)"),
    }
}

/// The help of the warning for a call result of type `from` narrowed
/// to `to` for `dest`.
pub(super) fn narrow_help(from: Ty, to: Ty, dest: Dest) -> String {
    let cast = format!("use an explicit cast if the value always fits: {to}(...)");
    match dest {
        Dest::Result(c) => format!("{cast}; otherwise give {c} a wider result: -> {from}"),
        Dest::Named(n) => format!("{cast}; otherwise declare '{n}' with a wider type: {n}: {from}"),
        Dest::Value => format!("{cast}; otherwise use a wider type ({from})"),
    }
}

impl Checker<'_> {
    /// The error at byte `at` (stops checking).
    pub(super) fn err<T>(&self, at: usize, msg: impl Into<String>, help: &str) -> R<T> {
        Err(Box::new(self.sm.diag(
            Severity::Error,
            at,
            msg.into(),
            help,
        )))
    }

    /// A warning at byte `at` (checking goes on).
    pub(super) fn warn(&mut self, at: usize, msg: impl Into<String>, help: &str) {
        let d = self.sm.diag(Severity::Warning, at, msg.into(), help);
        self.warnings.push(d);
    }

    /// The source text of a node (on one line).
    pub(super) fn text_of<T: Ranged>(&self, n: &T) -> String {
        let r = n.range();
        let (a, b) = (u32::from(r.start()) as usize, u32::from(r.end()) as usize);
        let t = self.sm.source.get(a..b).unwrap_or("");
        t.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Line and column of byte `at`.
    pub(super) fn line_of(&self, at: usize) -> (u32, u32) {
        self.sm.position(at)
    }

    /// The error for `/`.
    pub(super) fn div_err<T>(&self, at: usize) -> R<T> {
        self.err(
            at,
            "'/' is not supported: chains use integer arithmetic",
            "use '//' for integer division (x // 0 == 0)",
        )
    }

    /// The error for `**`.
    pub(super) fn pow_err<T>(&self, at: usize) -> R<T> {
        self.err(
            at,
            "'**' is not supported",
            "multiply explicitly, or shift for powers of two: 1 << n",
        )
    }

    /// The error for an expression chains do not have, with what instead.
    pub(super) fn unsupported_expr<T>(&self, e: &ast::Expr) -> R<T> {
        let (what, help) = match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Float(_) | Constant::Complex { .. } => (
                    "floating-point numbers are not supported",
                    "use integers (scale values, e.g. rates in packets per second)",
                ),
                Constant::Str(_) | Constant::Bytes(_) => (
                    "strings are not supported here",
                    "strings appear only as classifier keys and in attach()",
                ),
                Constant::None => ("None is not supported", "use 0, or a verdict such as PASS"),
                _ => (
                    "this constant is not supported",
                    "use integers, True or False",
                ),
            },
            ast::Expr::List(_) => (
                "lists are not supported",
                "use a map: ArrayMap(u64, N) indexed m[i]",
            ),
            ast::Expr::Tuple(_) => (
                "tuples are only map keys",
                "use separate values, or a tuple as a key: m[(a, b)] of m = HashMap((u32, u32), u64, N)",
            ),
            ast::Expr::Dict(_) => (
                "dicts are not supported here",
                "declare a map: m = HashMap(u32, u64, 1024) and use m[k]",
            ),
            ast::Expr::Set(_) => ("sets are not supported", "use a map and 'k in m'"),
            ast::Expr::ListComp(_)
            | ast::Expr::SetComp(_)
            | ast::Expr::DictComp(_)
            | ast::Expr::GeneratorExp(_) => (
                "comprehensions are not supported",
                "use a 'for i in range(...)' loop",
            ),
            ast::Expr::Lambda(_) => ("'lambda' is not supported", "define a chain with 'def'"),
            ast::Expr::Await(_) => (
                "'await' is not supported",
                "chains run to completion per packet",
            ),
            ast::Expr::Yield(_) | ast::Expr::YieldFrom(_) => {
                ("'yield' is not supported", "return a value or a verdict")
            }
            ast::Expr::NamedExpr(_) => ("':=' is not supported", "assign in a statement: x = e"),
            ast::Expr::JoinedStr(_) | ast::Expr::FormattedValue(_) => (
                "f-strings are not supported",
                "strings appear only as classifier keys and in attach()",
            ),
            ast::Expr::Starred(_) => ("'*' unpacking is not supported", "pass each argument"),
            ast::Expr::Slice(_) => (
                "slices are not supported",
                "read packet fields with Packet.read_u8/u16/u32/u64(off)",
            ),
            _ => (
                "this expression is not supported",
                "see docs/language.md for the supported expressions",
            ),
        };
        self.err(off(e), what, help)
    }
}

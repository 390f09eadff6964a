//! Expressions (docs/language.md, "Types and arithmetic"): literals and
//! their types, names, operators, comparisons, conversions.

use super::errors::{expr_name, fit_help, int_range, narrow_help, Dest};
use super::{off, Checker, Scope, Sym, R, TE};
use crate::ir::{BinOp, CmpOp, Expr, ExprKind};
use crate::types::Ty;
use rustpython_parser::ast::{self, Constant};

/// `not t`, folded when `t` is a constant.
fn fold_not(t: Expr) -> Expr {
    match t.as_const() {
        Some(v) => Expr::konst(Ty::Bool, (v == 0) as u64),
        None => Expr {
            ty: Ty::Bool,
            kind: ExprKind::Not(Box::new(t)),
        },
    }
}

impl Checker<'_> {
    /// The type a type annotation names.
    pub(super) fn type_of(&self, e: &ast::Expr) -> R<Ty> {
        if let ast::Expr::Name(n) = e {
            if let Some(t) = Ty::from_name(n.id.as_str()) {
                return Ok(t);
            }
            let alt = match n.id.as_str() {
                "int" => "u64 (or s64 for signed values)",
                "float" => "an integer type (floats are not supported)",
                _ => "u8, u16, u32, u64, s8, s16, s32, s64 or bool",
            };
            return self.err(
                off(e),
                format!("unknown type '{}'", n.id.as_str()),
                &format!("use {alt}"),
            );
        }
        self.err(
            off(e),
            format!("{} cannot be a type", expr_name(e)),
            "use u8, u16, u32, u64, s8, s16, s32, s64 or bool",
        )
    }

    /// A condition: any integer or bool; truthiness.
    pub(super) fn cond(&mut self, e: &ast::Expr, sc: &mut Scope) -> R<Expr> {
        let t = self.expr(e, sc)?;
        Ok(self.truth(t))
    }

    /// The truth value (bool) of `t`.
    fn truth(&self, t: TE) -> Expr {
        match t {
            TE::Lit(v, _) => Expr::konst(Ty::Bool, (v != 0) as u64),
            TE::Typed(e) => e.cast(Ty::Bool),
        }
    }

    /// Gives a literal the type `default` (must fit); typed expressions unchanged.
    pub(super) fn typed(&self, t: TE, default: Ty) -> R<Expr> {
        match t {
            TE::Typed(e) => Ok(e),
            TE::Lit(v, at) => {
                let ty = if v < 0 && !default.signed() {
                    Ty::S64
                } else {
                    default
                };
                if !ty.fits(v) {
                    return self.err(
                        at,
                        format!("{v} does not fit {ty}"),
                        &fit_help(ty, v, Dest::Value),
                    );
                }
                Ok(Expr::konst(ty, v as u64))
            }
        }
    }

    /// Converts to `ty` (assignment, arguments): literals must fit,
    /// typed values wrap.
    pub(super) fn convert(&self, t: TE, ty: Ty) -> R<Expr> {
        self.convert_for(t, ty, Dest::Value)
    }

    /// [`convert`](Self::convert) for `dest` (named in the help when a
    /// literal does not fit).
    fn convert_for(&self, t: TE, ty: Ty, dest: Dest) -> R<Expr> {
        match t {
            TE::Lit(v, at) => {
                if !ty.fits(v) {
                    return self.err(at, format!("{v} does not fit {ty}"), &fit_help(ty, v, dest));
                }
                Ok(Expr::konst(ty, v as u64))
            }
            TE::Typed(e) => Ok(e.cast(ty)),
        }
    }

    /// Converts `t`, the value of `value`, to be stored as `dest` of type
    /// `ty` (an assignment, a `return`, an argument, a map value). The
    /// result of a call (the whole of `value`) converted to a narrower
    /// integer type is an implicit narrowing, which gets a warning;
    /// explicit casts and arithmetic on call results do not.
    pub(super) fn store(&mut self, t: TE, ty: Ty, value: &ast::Expr, dest: Dest) -> R<Expr> {
        if let TE::Typed(e) = &t {
            let call = matches!(e.kind, ExprKind::CallNf { .. } | ExprKind::CallChain { .. });
            if call && ty.is_int() && e.ty.is_int() && ty.bits() < e.ty.bits() {
                self.warn(
                    off(value),
                    format!(
                        "implicit narrowing of the call result from {} to {ty}",
                        e.ty
                    ),
                    &narrow_help(e.ty, ty, dest),
                );
            }
        }
        self.convert_for(t, ty, dest)
    }

    /// Checks an expression: typed, or a literal not yet typed.
    pub(super) fn expr(&mut self, e: &ast::Expr, sc: &mut Scope) -> R<TE> {
        let at = off(e);
        match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Int(b) => Ok(TE::Lit(self.big(b, at)?, at)),
                Constant::Bool(b) => Ok(TE::Typed(Expr::konst(Ty::Bool, *b as u64))),
                _ => self.unsupported_expr(e),
            },
            ast::Expr::Name(n) => self.name(n.id.as_str(), at, sc),
            ast::Expr::BinOp(b) => {
                let l = self.expr(&b.left, sc)?;
                let r = self.expr(&b.right, sc)?;
                self.binop(b.op, l, r, at)
            }
            ast::Expr::UnaryOp(u) => {
                let v = self.expr(&u.operand, sc)?;
                self.unary(u.op, v, at)
            }
            ast::Expr::BoolOp(b) => self.bool_op(b, sc),
            ast::Expr::Compare(c) => self.compare(c, sc),
            ast::Expr::IfExp(i) => {
                let c = self.cond(&i.test, sc)?;
                let a = self.expr(&i.body, sc)?;
                let b = self.expr(&i.orelse, sc)?;
                let (a, b) = self.unify(a, b, at, true)?;
                let ty = a.ty;
                Ok(TE::Typed(Expr {
                    ty,
                    kind: ExprKind::IfExp(Box::new(c), Box::new(a), Box::new(b)),
                }))
            }
            ast::Expr::Call(call) => self.call(call, sc),
            ast::Expr::Attribute(a) => self.packet_attr(a, at),
            ast::Expr::Subscript(sub) => self.map_get(sub, sc),
            _ => self.unsupported_expr(e),
        }
    }

    /// `not v`, `-v`, `+v`, `~v` (literals stay literals; constants fold).
    fn unary(&self, op: ast::UnaryOp, v: TE, at: usize) -> R<TE> {
        match (op, v) {
            (ast::UnaryOp::Not, v) => {
                let t = self.truth(v);
                Ok(TE::Typed(fold_not(t)))
            }
            (ast::UnaryOp::USub, TE::Lit(v, _)) => Ok(TE::Lit(-v, at)),
            (ast::UnaryOp::UAdd, v) => Ok(v),
            (ast::UnaryOp::Invert, TE::Lit(v, _)) => Ok(TE::Lit(!v, at)),
            (op, TE::Typed(x)) => {
                if x.ty == Ty::Bool {
                    return self.err(
                        at,
                        "arithmetic on bool is not supported",
                        "convert first: u8(flag)",
                    );
                }
                if let Some(c) = x.as_const() {
                    let v = if op == ast::UnaryOp::USub {
                        c.wrapping_neg()
                    } else {
                        !c
                    };
                    return Ok(TE::Typed(Expr::konst(x.ty, v)));
                }
                let ty = x.ty;
                let kind = if op == ast::UnaryOp::USub {
                    ExprKind::Neg(Box::new(x))
                } else {
                    ExprKind::Inv(Box::new(x))
                };
                Ok(TE::Typed(Expr { ty, kind }))
            }
        }
    }

    /// `a and b and ...`, `a or b or ...` on truth values.
    fn bool_op(&mut self, b: &ast::ExprBoolOp, sc: &mut Scope) -> R<TE> {
        let mut acc: Option<Expr> = None;
        for v in &b.values {
            let t = self.expr(v, sc)?;
            let t = self.truth(t);
            acc = Some(match acc {
                None => t,
                Some(a) => {
                    let kind = match b.op {
                        ast::BoolOp::And => ExprKind::And(Box::new(a), Box::new(t)),
                        ast::BoolOp::Or => ExprKind::Or(Box::new(a), Box::new(t)),
                    };
                    Expr { ty: Ty::Bool, kind }
                }
            });
        }
        Ok(TE::Typed(acc.unwrap_or_else(|| Expr::konst(Ty::Bool, 0))))
    }

    /// A comparison `a OP b` (not chained), or `k in m` / `k not in m`.
    fn compare(&mut self, c: &ast::ExprCompare, sc: &mut Scope) -> R<TE> {
        let at = off(c);
        if c.ops.len() != 1 {
            return self.err(
                at,
                "chained comparisons are not supported",
                "combine with 'and': a < b and b < c",
            );
        }
        let op = c.ops[0];
        let rhs = &c.comparators[0];
        if matches!(op, ast::CmpOp::In | ast::CmpOp::NotIn) {
            return self.map_has(&c.left, rhs, op == ast::CmpOp::NotIn, sc);
        }
        let cop = match op {
            ast::CmpOp::Eq => CmpOp::Eq,
            ast::CmpOp::NotEq => CmpOp::Ne,
            ast::CmpOp::Lt => CmpOp::Lt,
            ast::CmpOp::LtE => CmpOp::Le,
            ast::CmpOp::Gt => CmpOp::Gt,
            ast::CmpOp::GtE => CmpOp::Ge,
            _ => {
                return self.err(
                    at,
                    "'is' / 'is not' are not supported",
                    "compare values with == and !=",
                )
            }
        };
        let l = self.expr(&c.left, sc)?;
        let r = self.expr(rhs, sc)?;
        if let (TE::Lit(a, _), TE::Lit(b, _)) = (&l, &r) {
            let v = match cop {
                CmpOp::Eq => a == b,
                CmpOp::Ne => a != b,
                CmpOp::Lt => a < b,
                CmpOp::Le => a <= b,
                CmpOp::Gt => a > b,
                CmpOp::Ge => a >= b,
            };
            return Ok(TE::Typed(Expr::konst(Ty::Bool, v as u64)));
        }
        if let Some(e) = self.fixed_by_literal(cop, &l, &r, (&c.left, rhs), at) {
            return Ok(TE::Typed(e));
        }
        let (l, r) = self.unify(l, r, at, true)?;
        if l.ty == Ty::Bool && !matches!(cop, CmpOp::Eq | CmpOp::Ne) {
            return self.err(
                at,
                "bools are compared with == and != only",
                "convert first: u8(flag)",
            );
        }
        self.fixed_by_type(cop, &l, &r, (&c.left, rhs), at);
        Ok(TE::Typed(Expr {
            ty: Ty::Bool,
            kind: ExprKind::Cmp(cop, Box::new(l), Box::new(r)),
        }))
    }

    /// A comparison of a value with a literal outside its type's range
    /// (`x == 300`, `x < -1` for `x: u8`): always false or always true,
    /// with a warning. The comparison becomes `x < MIN` (false) or
    /// `x >= MIN` (true) in `x`'s type, so `x` is still evaluated.
    fn fixed_by_literal(
        &mut self,
        op: CmpOp,
        l: &TE,
        r: &TE,
        src: (&ast::Expr, &ast::Expr),
        at: usize,
    ) -> Option<Expr> {
        let (x, v, op, x_src) = match (l, r) {
            (TE::Typed(x), TE::Lit(v, _)) => (x, *v, op, src.0),
            (TE::Lit(v, _), TE::Typed(x)) => (x, *v, flip(op), src.1),
            _ => return None,
        };
        if !x.ty.is_int() || x.ty.fits(v) {
            return None;
        }
        let (lo, hi) = int_range(x.ty);
        let always = decide(op, (lo, hi), v)?;
        self.fixed_cmp_warning(always, x_src, x.ty, (lo, hi), v, at);
        let cmp = if always { CmpOp::Ge } else { CmpOp::Lt };
        Some(Expr {
            ty: Ty::Bool,
            kind: ExprKind::Cmp(
                cmp,
                Box::new(x.clone()),
                Box::new(Expr::konst(x.ty, lo as u64)),
            ),
        })
    }

    /// Warns when a comparison of a value with a constant is decided by
    /// the value's type alone (`x < 0` or `x >= 0` for unsigned `x`,
    /// `x > 255` for `x: u8`, also through a widening cast).
    fn fixed_by_type(
        &mut self,
        op: CmpOp,
        l: &Expr,
        r: &Expr,
        src: (&ast::Expr, &ast::Expr),
        at: usize,
    ) {
        let (x, c, op, x_src) = match (l.as_const(), r.as_const()) {
            (None, Some(c)) => (l, r.ty.value(c), op, src.0),
            (Some(c), None) => (r, l.ty.value(c), flip(op), src.1),
            _ => return,
        };
        if !x.ty.is_int() {
            return;
        }
        let (ty, range) = value_range(x);
        if let Some(always) = decide(op, range, c) {
            self.fixed_cmp_warning(always, x_src, ty, range, c, at);
        }
    }

    /// "comparison is always false: x is u8 (0..255)", with the fix.
    fn fixed_cmp_warning(
        &mut self,
        always: bool,
        x_src: &ast::Expr,
        ty: Ty,
        (lo, hi): (i128, i128),
        c: i128,
        at: usize,
    ) {
        let x = self.text_of(x_src);
        let help = if c <= lo && !ty.signed() {
            let s = Ty::int(true, ty.bits());
            format!("{x} is unsigned and never negative; give it a signed type ({s}) if it can be negative")
        } else if c <= lo {
            format!("{x} is never below {lo}; give it a wider type if it can be")
        } else if c >= hi {
            format!("{x} is never above {hi}; give it a wider type if it can be")
        } else {
            format!("{x} holds {lo}..{hi} only")
        };
        self.warn(
            at,
            format!("comparison is always {always}: {x} is {ty} ({lo}..{hi})"),
            &help,
        );
    }

    /// A name in a chain: a local, a constant, `True`/`False`; errors for the rest.
    pub(super) fn name(&mut self, id: &str, at: usize, sc: &Scope) -> R<TE> {
        if let Some(&l) = sc.by_name.get(id) {
            return Ok(TE::Typed(Expr {
                ty: sc.locals[l].1,
                kind: ExprKind::Local(l),
            }));
        }
        match self.syms.get(id) {
            Some(Sym::Const(None, v)) => Ok(TE::Lit(*v, at)),
            Some(Sym::Const(Some(t), v)) => Ok(TE::Typed(Expr::konst(*t, *v as u64))),
            Some(Sym::Map(_)) => self.err(at, format!("map '{id}' is not a value"), &format!("read an entry: {id}[key]")),
            Some(Sym::Nf(_)) | Some(Sym::Chain(_)) => self.err(at, format!("'{id}' must be called"), &format!("{id}(...)")),
            Some(Sym::Classifier(_)) => self.err(at, format!("classifier '{id}' is configured at module level"), &format!("{id}(chain) at module level")),
            None => match id {
                "True" => Ok(TE::Typed(Expr::konst(Ty::Bool, 1))),
                "False" => Ok(TE::Typed(Expr::konst(Ty::Bool, 0))),
                v if nfkit_abi::verdict::Action::from_name(v).is_some() => self.err(at, format!("verdict {v} can only be returned"), &format!("return {v}")),
                "Packet" => self.err(at, "Packet is not a value", "use Packet.len or Packet.read_u8(off)"),
                _ => self.err(at, format!("unknown name '{id}'"), "declare locals with a type (x: u32 = 0), import NFs (from nf.MODULE import name), or define constants at module level"),
            },
        }
    }

    /// Gives two operands one type: a literal takes the other's type;
    /// otherwise same signedness, wider width.
    fn unify(&self, l: TE, r: TE, at: usize, allow_bool: bool) -> R<(Expr, Expr)> {
        let (l, r) = match (l, r) {
            (TE::Lit(a, aat), TE::Lit(b, _)) => {
                let ty = if a < 0 || b < 0 { Ty::S64 } else { Ty::U64 };
                (
                    self.convert(TE::Lit(a, aat), ty)?,
                    self.convert(TE::Lit(b, at), ty)?,
                )
            }
            (TE::Lit(a, aat), TE::Typed(e)) => (self.lit_as(a, aat, e.ty)?, e),
            (TE::Typed(e), TE::Lit(b, bat)) => {
                let t = e.ty;
                (e, self.lit_as(b, bat, t)?)
            }
            (TE::Typed(a), TE::Typed(b)) => (a, b),
        };
        if (l.ty == Ty::Bool) != (r.ty == Ty::Bool) {
            return self.err(
                at,
                format!("cannot combine {} and {}", l.ty, r.ty),
                "convert explicitly: u8(flag) or bool(x)",
            );
        }
        if l.ty == Ty::Bool {
            if !allow_bool {
                return self.err(
                    at,
                    "arithmetic on bool is not supported",
                    "convert first: u8(flag)",
                );
            }
            return Ok((l, r));
        }
        if l.ty.signed() != r.ty.signed() {
            return self.err(
                at,
                format!(
                    "cannot mix signed and unsigned operands ({} and {})",
                    l.ty, r.ty
                ),
                &format!("cast one side: {}(x) or {}(x)", l.ty, r.ty),
            );
        }
        let ty = if l.ty.bits() >= r.ty.bits() {
            l.ty
        } else {
            r.ty
        };
        Ok((l.cast(ty), r.cast(ty)))
    }

    /// Literal `v` as the other operand's type `ty` (must fit).
    fn lit_as(&self, v: i128, at: usize, ty: Ty) -> R<Expr> {
        if ty == Ty::Bool {
            if v == 0 || v == 1 {
                return Ok(Expr::konst(Ty::Bool, v as u64));
            }
            return self.err(at, format!("{v} is not a bool"), "use True or False");
        }
        if !ty.fits(v) {
            return self.err(
                at,
                format!("literal {v} does not fit {ty}"),
                &fit_help(ty, v, Dest::Value),
            );
        }
        Ok(Expr::konst(ty, v as u64))
    }

    /// A binary operator: literals fold, shifts take the value's type,
    /// other operands are unified; warns where `//` and `%` differ from Python.
    pub(super) fn binop(&mut self, op: ast::Operator, l: TE, r: TE, at: usize) -> R<TE> {
        use ast::Operator::*;
        let bop = match op {
            Add => BinOp::Add,
            Sub => BinOp::Sub,
            Mult => BinOp::Mul,
            FloorDiv => BinOp::Div,
            Mod => BinOp::Mod,
            BitAnd => BinOp::And,
            BitOr => BinOp::Or,
            BitXor => BinOp::Xor,
            LShift => BinOp::Shl,
            RShift => BinOp::Shr,
            Div => return self.div_err(at),
            Pow => return self.pow_err(at),
            MatMult => {
                return self.err(
                    at,
                    "'@' is not supported",
                    "chains use integer arithmetic: + - * // % & | ^ << >>",
                )
            }
        };
        if let (TE::Lit(a, _), TE::Lit(b, _)) = (&l, &r) {
            return Ok(TE::Lit(self.fold(op, *a, *b, at)?, at));
        }
        // Shifts: the count takes the value's type (modulo its width).
        let (a, b) = if matches!(bop, BinOp::Shl | BinOp::Shr) {
            let a = match l {
                TE::Typed(e) => e,
                TE::Lit(v, lat) => self.typed(TE::Lit(v, lat), Ty::U64)?,
            };
            if a.ty == Ty::Bool {
                return self.err(
                    at,
                    "arithmetic on bool is not supported",
                    "convert first: u8(flag)",
                );
            }
            let b = match r {
                TE::Lit(v, _) => Expr::konst(a.ty, (v.rem_euclid(a.ty.bits() as i128)) as u64),
                TE::Typed(e) => {
                    if e.ty == Ty::Bool {
                        return self.err(
                            at,
                            "arithmetic on bool is not supported",
                            "convert first: u8(flag)",
                        );
                    }
                    e.cast(a.ty)
                }
            };
            (a, b)
        } else {
            self.unify(l, r, at, false)?
        };
        let ty = a.ty;
        if matches!(bop, BinOp::Div | BinOp::Mod) {
            let sym = if bop == BinOp::Div { "//" } else { "%" };
            if ty.signed() {
                self.warn(
                    at,
                    format!("signed '{sym}' truncates toward zero (Python floors)"),
                    "results differ from Python for negative operands",
                );
            }
            if b.as_const().is_none_or(|v| v == 0) {
                let what = if bop == BinOp::Div {
                    "x // 0 == 0"
                } else {
                    "x % 0 == x"
                };
                self.warn(
                    at,
                    format!("the divisor may be 0: {what} here (Python raises)"),
                    "test the divisor first if 0 needs other handling",
                );
            }
        }
        if let (Some(x), Some(y)) = (a.as_const(), b.as_const()) {
            return Ok(TE::Typed(Expr::konst(
                ty,
                crate::eval::binop(bop, ty, x, y),
            )));
        }
        Ok(TE::Typed(Expr {
            ty,
            kind: ExprKind::Bin(bop, Box::new(a), Box::new(b)),
        }))
    }
}

/// `c OP x` as `x OP' c`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        o => o,
    }
}

/// The type whose range `e` is known to stay in, and that range: its
/// own type's, or through widening casts that keep the value, the
/// narrower operand's.
fn value_range(e: &Expr) -> (Ty, (i128, i128)) {
    if let ExprKind::Cast(inner) = &e.kind {
        if inner.ty.is_int() {
            let (ty, (lo, hi)) = value_range(inner);
            if e.ty.fits(lo) && e.ty.fits(hi) {
                return (ty, (lo, hi));
            }
        }
    }
    (e.ty, int_range(e.ty))
}

/// The outcome of `x OP c` for every `x` in `lo..=hi`, when it is the
/// same for all of them.
fn decide(op: CmpOp, (lo, hi): (i128, i128), c: i128) -> Option<bool> {
    let (always_true, always_false) = match op {
        CmpOp::Eq => (lo == c && hi == c, c < lo || c > hi),
        CmpOp::Ne => (c < lo || c > hi, lo == c && hi == c),
        CmpOp::Lt => (hi < c, lo >= c),
        CmpOp::Le => (hi <= c, lo > c),
        CmpOp::Gt => (lo > c, hi <= c),
        CmpOp::Ge => (lo >= c, hi < c),
    };
    if always_true {
        Some(true)
    } else if always_false {
        Some(false)
    } else {
        None
    }
}

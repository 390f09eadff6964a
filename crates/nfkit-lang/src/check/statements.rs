//! Chain statements (docs/language.md, "Chains"): locals, assignment,
//! augmented assignment, `if`, `break`/`continue`, `return` (values and
//! verdicts), expression statements and `del`.

use super::errors::{expr_name, stmt_name, Dest};
use super::module::is_builtin;
use super::{off, Checker, Scope, R, TE};
use crate::ir::{BinOp, Expr, ExprKind, Stmt, StmtKind};
use crate::types::Ty;
use nfkit_abi::verdict::Action;
use rustpython_parser::ast::{self, Constant};

/// The verdict without an argument named `id` (`DROP`, `PASS`, ...).
pub(super) fn plain_verdict(id: &str) -> Option<Action> {
    Action::from_name(id).filter(|a| !a.takes_arg())
}

/// The verdict with an argument named `id` (`REDIRECT(n)`, ...).
pub(super) fn verdict_call(id: &str) -> Option<Action> {
    Action::from_name(id).filter(|a| a.takes_arg())
}

impl Checker<'_> {
    /// Checks a block of statements.
    pub(super) fn block(&mut self, body: &[ast::Stmt], sc: &mut Scope) -> R<Vec<Stmt>> {
        let mut out = Vec::new();
        for s in body {
            self.stmt(s, sc, &mut out)?;
        }
        Ok(out)
    }

    /// A statement at byte `at`.
    pub(super) fn mk(&self, at: usize, kind: StmtKind) -> Stmt {
        let (line, col) = self.line_of(at);
        Stmt { line, col, kind }
    }

    /// Checks one statement, adding its IR to `out`.
    fn stmt(&mut self, s: &ast::Stmt, sc: &mut Scope, out: &mut Vec<Stmt>) -> R<()> {
        let at = off(s);
        let kind = match s {
            ast::Stmt::Pass(_) => return Ok(()),
            ast::Stmt::Expr(e) => match self.expr_stmt(e, sc)? {
                Some(k) => k,
                None => return Ok(()),
            },
            ast::Stmt::AnnAssign(a) => self.ann_assign(a, sc)?,
            ast::Stmt::Assign(a) => self.assign(a, sc)?,
            ast::Stmt::AugAssign(a) => self.aug_assign(a, sc)?,
            ast::Stmt::If(i) => {
                let cond = self.cond(&i.test, sc)?;
                let then = self.block(&i.body, sc)?;
                let els = self.block(&i.orelse, sc)?;
                StmtKind::If { cond, then, els }
            }
            ast::Stmt::While(w) => self.while_loop(w, sc)?,
            ast::Stmt::For(f) => return self.for_loop(f, sc, out),
            ast::Stmt::Break(_) | ast::Stmt::Continue(_) => {
                if sc.loops == 0 {
                    return self.err(
                        at,
                        format!("{} outside a loop", stmt_name(s)),
                        "use it inside 'while' or 'for'",
                    );
                }
                if matches!(s, ast::Stmt::Break(_)) {
                    StmtKind::Break
                } else {
                    StmtKind::Continue
                }
            }
            ast::Stmt::Return(r) => self.ret(r, sc)?,
            ast::Stmt::Delete(d) => return self.del(d, sc, out),
            other => return self.unsupported_stmt(other),
        };
        out.push(self.mk(at, kind));
        Ok(())
    }

    /// An expression statement: a call (or a packet write); `None` for a
    /// docstring.
    fn expr_stmt(&mut self, e: &ast::StmtExpr, sc: &mut Scope) -> R<Option<StmtKind>> {
        if let ast::Expr::Constant(ast::ExprConstant {
            value: Constant::Str(_),
            ..
        }) = e.value.as_ref()
        {
            return Ok(None); // a docstring
        }
        if let ast::Expr::Call(call) = e.value.as_ref() {
            if let Some(st) = self.packet_write(call, sc)? {
                return Ok(Some(st));
            }
            let v = self.expr(&e.value, sc)?;
            let v = self.typed(v, Ty::U64)?;
            return Ok(Some(StmtKind::Expr(v)));
        }
        self.err(
            off(e.value.as_ref()),
            format!("{} as a statement has no effect", expr_name(&e.value)),
            "statements are assignments, calls, if/while/for, return",
        )
    }

    /// `x: T = e`: declares (or re-assigns, with the same type) a local.
    fn ann_assign(&mut self, a: &ast::StmtAnnAssign, sc: &mut Scope) -> R<StmtKind> {
        let at = off(a);
        let ast::Expr::Name(n) = a.target.as_ref() else {
            return self.err(
                at,
                "only names can be declared with a type",
                "x: u32 = value",
            );
        };
        let ty = self.type_of(&a.annotation)?;
        let Some(v) = &a.value else {
            return self.err(
                at,
                format!("local '{}' needs a value", n.id.as_str()),
                &format!("{}: {ty} = 0", n.id.as_str()),
            );
        };
        let name = n.id.as_str();
        self.check_local_name(name, off(n))?;
        if let Some(&l) = sc.by_name.get(name) {
            if sc.locals[l].1 != ty {
                return self.err(
                    off(n),
                    format!("'{name}' is already a {} local", sc.locals[l].1),
                    "a local keeps the type of its first declaration; use another name or a cast",
                );
            }
        }
        let e = self.expr(v, sc)?;
        let e = self.store(e, ty, v, Dest::Named(name))?;
        let l = match sc.by_name.get(name) {
            Some(&l) => l,
            None => sc.add(name, ty),
        };
        Ok(StmtKind::Assign { local: l, value: e })
    }

    /// `x = e` (a new local takes the type of `e`) or `m[k] = e`.
    fn assign(&mut self, a: &ast::StmtAssign, sc: &mut Scope) -> R<StmtKind> {
        let at = off(a);
        if a.targets.len() != 1 {
            return self.err(
                at,
                "chained assignment is not supported",
                "assign each name separately",
            );
        }
        match &a.targets[0] {
            ast::Expr::Name(n) => {
                let name = n.id.as_str();
                let e = self.expr(&a.value, sc)?;
                let l = match sc.by_name.get(name) {
                    Some(&l) => l,
                    None => {
                        self.check_local_name(name, off(n))?;
                        let ty = match &e {
                            TE::Typed(x) => x.ty,
                            TE::Lit(v, _) if *v < 0 => Ty::S64,
                            TE::Lit(..) => Ty::U64,
                        };
                        sc.add(name, ty)
                    }
                };
                let ty = sc.locals[l].1;
                let e = self.store(e, ty, &a.value, Dest::Named(name))?;
                Ok(StmtKind::Assign { local: l, value: e })
            }
            ast::Expr::Subscript(sub) => self.map_set(sub, &a.value, sc),
            ast::Expr::Attribute(attr) => self.err(
                off(attr),
                format!("cannot assign to '{}'", attr.attr.as_str()),
                "write packet bytes with Packet.write_u8/u16/u32/u64(off, value)",
            ),
            ast::Expr::Tuple(_) | ast::Expr::List(_) => self.err(
                at,
                "unpacking assignment is not supported",
                "assign each name separately",
            ),
            other => self.err(
                off(other),
                format!("cannot assign to {}", expr_name(other)),
                "assign to a local name or a map entry m[k]",
            ),
        }
    }

    /// `x op= e` on a local, or `m[k] op= e` on a map value.
    fn aug_assign(&mut self, a: &ast::StmtAugAssign, sc: &mut Scope) -> R<StmtKind> {
        let at = off(a);
        match a.target.as_ref() {
            ast::Expr::Name(n) => {
                let name = n.id.as_str();
                let Some(&l) = sc.by_name.get(name) else {
                    return self.err(
                        off(n),
                        format!("unknown local '{name}'"),
                        &format!("declare it first: {name}: u32 = 0"),
                    );
                };
                let ty = sc.locals[l].1;
                let cur = TE::Typed(Expr {
                    ty,
                    kind: ExprKind::Local(l),
                });
                let rhs = self.expr(&a.value, sc)?;
                let r = self.binop(a.op, cur, rhs, at)?;
                let r = self.convert(r, ty)?;
                Ok(StmtKind::Assign { local: l, value: r })
            }
            ast::Expr::Subscript(sub) => self.map_update(sub, a.op, &a.value, at, sc),
            other => self.err(
                off(other),
                format!("cannot assign to {}", expr_name(other)),
                "assign to a local name or a map entry m[k]",
            ),
        }
    }

    /// `return`, `return e` (converted to the chain's type) or `return VERDICT`.
    fn ret(&mut self, r: &ast::StmtReturn, sc: &mut Scope) -> R<StmtKind> {
        Ok(match &r.value {
            None => StmtKind::Return(Expr::konst(sc.ret, 0)),
            Some(v) => match self.verdict(v, sc)? {
                Some(vd) => StmtKind::Verdict(vd),
                None => {
                    let e = self.expr(v, sc)?;
                    let chain = self.prog.chains[sc.chain].name.clone();
                    StmtKind::Return(self.store(e, sc.ret, v, Dest::Result(&chain))?)
                }
            },
        })
    }

    /// The error for a statement chains do not have, with what instead.
    fn unsupported_stmt<T>(&self, s: &ast::Stmt) -> R<T> {
        let help = match s {
            ast::Stmt::FunctionDef(_) => "define chains at module level",
            ast::Stmt::ClassDef(_) => "chains use integer locals and maps",
            ast::Stmt::With(_) | ast::Stmt::AsyncWith(_) => "chains have no resources to manage",
            ast::Stmt::Try(_) | ast::Stmt::TryStar(_) | ast::Stmt::Raise(_) => {
                "return a verdict (e.g. return DROP); faults go to the classifier's fault action"
            }
            ast::Stmt::Global(_) | ast::Stmt::Nonlocal(_) => "keep state across packets in a map",
            ast::Stmt::Assert(_) => "test with 'if' and return a verdict",
            ast::Stmt::Import(_) | ast::Stmt::ImportFrom(_) => "import at module level",
            ast::Stmt::Match(_) => "use if/elif/else",
            _ => "see docs/language.md for the supported statements",
        };
        self.err(
            off(s),
            format!("{} is not supported in a chain", stmt_name(s)),
            help,
        )
    }

    /// A local may not shadow a module-level or built-in name.
    pub(super) fn check_local_name(&self, name: &str, at: usize) -> R<()> {
        if self.syms.contains_key(name) || is_builtin(name) {
            return self.err(
                at,
                format!("'{name}' is a module-level name and cannot be assigned in a chain"),
                "use another name for the local",
            );
        }
        Ok(())
    }

    /// A verdict expression (`DROP`, `REDIRECT(x)`), if `e` is one.
    pub(super) fn verdict(&mut self, e: &ast::Expr, sc: &mut Scope) -> R<Option<Expr>> {
        match e {
            ast::Expr::Name(n) => {
                let id = n.id.as_str();
                if sc.by_name.contains_key(id) {
                    return Ok(None);
                }
                if let Some(a) = plain_verdict(id) {
                    return Ok(Some(Expr::konst(Ty::U64, a.verdict(0))));
                }
                if verdict_call(id).is_some() {
                    return self.err(
                        off(e),
                        format!("{id} needs an argument"),
                        &format!("return {id}(n)"),
                    );
                }
                Ok(None)
            }
            ast::Expr::Call(c) => {
                let ast::Expr::Name(n) = c.func.as_ref() else {
                    return Ok(None);
                };
                let id = n.id.as_str();
                let Some(act) = verdict_call(id).filter(|_| !sc.by_name.contains_key(id)) else {
                    return Ok(None);
                };
                if c.args.len() != 1 || !c.keywords.is_empty() {
                    return self.err(
                        off(e),
                        format!("{id} takes one argument"),
                        &format!("return {id}(n)"),
                    );
                }
                let a = self.expr(&c.args[0], sc)?;
                let a = self.convert(a, Ty::U32)?;
                let base = act.verdict(0);
                if let Some(v) = a.as_const() {
                    return Ok(Some(Expr::konst(Ty::U64, base | v)));
                }
                Ok(Some(Expr {
                    ty: Ty::U64,
                    kind: ExprKind::Bin(
                        BinOp::Or,
                        Box::new(a.cast(Ty::U64)),
                        Box::new(Expr::konst(Ty::U64, base)),
                    ),
                }))
            }
            _ => Ok(None),
        }
    }
}

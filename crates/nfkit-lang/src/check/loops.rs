//! Loops (docs/language.md, "Loops"): `while` with an iteration cap,
//! `for ... in range(...)` with a proven bound or a cap.

use super::bpf_loop::{bpf_loop_note, BPF_LOOP_ABOVE, MAX_LOOP_CAP};
use super::errors::expr_name;
use super::{off, Checker, Scope, R, TE};
use crate::ir::{BinOp, CmpOp, Expr, ExprKind, Stmt, StmtKind};
use crate::types::Ty;
use rustpython_parser::ast;

impl Checker<'_> {
    /// `while cond:` with the module's iteration cap (and a warning
    /// saying so).
    pub(super) fn while_loop(&mut self, w: &ast::StmtWhile, sc: &mut Scope) -> R<StmtKind> {
        let at = off(w);
        if !w.orelse.is_empty() {
            return self.err(
                at,
                "'while ... else' is not supported",
                "test the condition after the loop",
            );
        }
        let cond = self.cond(&w.test, sc)?;
        let cap = self.loop_cap;
        self.warn(
            at,
            format!("'while' loop: the compiler cannot prove a bound; an iteration cap of {cap} applies (exceeding it is a fault){}", bpf_loop_note(cap)),
            "set the cap with LOOP_CAP = N at module level, or use 'for i in range(CONST)'",
        );
        let counter = sc.add(&format!("$cap{}", sc.locals.len()), Ty::U32);
        let body = self.loop_body(at, cap, &w.body, sc)?;
        Ok(StmtKind::Loop {
            cond,
            body,
            step: Vec::new(),
            cap: Some((cap, counter)),
            trips: cap,
        })
    }

    /// `for var in range(...)`: the assignments of the start and end,
    /// then the loop (`var < end` or `var > end` for a negative step).
    pub(super) fn for_loop(
        &mut self,
        f: &ast::StmtFor,
        sc: &mut Scope,
        out: &mut Vec<Stmt>,
    ) -> R<()> {
        let at = off(f);
        let (var, call) = self.range_of(f)?;
        let cap_kw = self.range_cap_kw(call)?;
        let args: Vec<TE> = call
            .args
            .iter()
            .map(|a| self.expr(a, sc))
            .collect::<R<_>>()?;
        let (start, end, step) = match args.len() {
            1 => (TE::Lit(0, at), args[0].clone(), TE::Lit(1, at)),
            2 => (args[0].clone(), args[1].clone(), TE::Lit(1, at)),
            _ => (args[0].clone(), args[1].clone(), args[2].clone()),
        };
        let step_v = match const_of(&step) {
            Some(v) => v,
            None => {
                return self.err(
                    off(&call.args[2]),
                    "the range step must be a constant",
                    RANGE_HELP,
                )
            }
        };
        if step_v == 0 {
            return self.err(
                off(&call.args[call.args.len() - 1]),
                "range step 0 never ends",
                "use a non-zero constant step",
            );
        }
        let name = var.id.as_str();
        let ty = match sc.by_name.get(name) {
            Some(&l) => sc.locals[l].1,
            None => range_type(&start, &end, &step),
        };
        if ty == Ty::Bool {
            return self.err(off(var), "the loop variable must be an integer", RANGE_HELP);
        }
        let trips = match (const_of(&start), const_of(&end)) {
            (Some(a), Some(b)) => Some(range_trips(a, b, step_v)),
            _ => None,
        };
        let start = self.convert(start, ty)?;
        let end = self.convert(end, ty)?;
        let l = match sc.by_name.get(name) {
            Some(&l) => l,
            None => {
                self.check_local_name(name, off(var))?;
                sc.add(name, ty)
            }
        };
        let end_l = sc.add(&format!("$end{}", sc.locals.len()), ty);
        let cap = self.range_cap(trips, cap_kw, at);
        let local = |l| Expr {
            ty,
            kind: ExprKind::Local(l),
        };
        let cmp = if step_v > 0 { CmpOp::Lt } else { CmpOp::Gt };
        let cond = Expr {
            ty: Ty::Bool,
            kind: ExprKind::Cmp(cmp, Box::new(local(l)), Box::new(local(end_l))),
        };
        for (local, value) in [(l, start), (end_l, end)] {
            out.push(self.mk(at, StmtKind::Assign { local, value }));
        }
        let max_trips = match (trips, cap) {
            (Some(n), Some(c)) => (n.min(c as i128)).clamp(0, u32::MAX as i128) as u32,
            (Some(n), None) => n.clamp(0, u32::MAX as i128) as u32,
            (None, Some(c)) => c,
            (None, None) => self.loop_cap,
        };
        let cap = cap.map(|c| (c, sc.add(&format!("$cap{}", sc.locals.len()), Ty::U32)));
        let body = self.loop_body(at, cap.map_or(0, |c| c.0), &f.body, sc)?;
        let step = vec![self.mk(
            at,
            StmtKind::Assign {
                local: l,
                value: Expr {
                    ty,
                    kind: ExprKind::Bin(
                        BinOp::Add,
                        Box::new(local(l)),
                        Box::new(Expr::konst(ty, step_v as u64)),
                    ),
                },
            },
        )];
        out.push(self.mk(
            at,
            StmtKind::Loop {
                cond,
                body,
                step,
                cap,
                trips: max_trips,
            },
        ));
        Ok(())
    }

    /// The loop variable and the `range(...)` call of a `for` loop.
    fn range_of<'f>(&self, f: &'f ast::StmtFor) -> R<(&'f ast::ExprName, &'f ast::ExprCall)> {
        let at = off(f);
        if !f.orelse.is_empty() {
            return self.err(
                at,
                "'for ... else' is not supported",
                "test the condition after the loop",
            );
        }
        let ast::Expr::Name(var) = f.target.as_ref() else {
            return self.err(
                off(f.target.as_ref()),
                "the loop variable must be a name",
                RANGE_HELP,
            );
        };
        let ast::Expr::Call(call) = f.iter.as_ref() else {
            return self.err(
                off(f.iter.as_ref()),
                format!("loops over {} are not supported", expr_name(&f.iter)),
                RANGE_HELP,
            );
        };
        if !matches!(call.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "range") {
            return self.err(
                off(call),
                "'for' loops only iterate over range(...)",
                RANGE_HELP,
            );
        }
        if call.args.is_empty() || call.args.len() > 3 {
            return self.err(
                off(call),
                format!("range takes 1 to 3 arguments, got {}", call.args.len()),
                RANGE_HELP,
            );
        }
        Ok((var, call))
    }

    /// The `cap=N` keyword of a `range(...)`, if given.
    fn range_cap_kw(&self, call: &ast::ExprCall) -> R<Option<u32>> {
        let mut cap_kw = None;
        for k in &call.keywords {
            match k.arg.as_ref().map(|a| a.as_str()) {
                Some("cap") => {
                    let v = self.const_expr(&k.value)?;
                    if !(1..=MAX_LOOP_CAP).contains(&v) {
                        return self.err(
                            off(&k.value),
                            format!("cap {v} is out of range"),
                            "use 1 .. 8388607",
                        );
                    }
                    cap_kw = Some(v as u32);
                }
                _ => return self.err(off(k), "range takes only the keyword 'cap'", RANGE_HELP),
            }
        }
        Ok(cap_kw)
    }

    /// The iteration cap of a `range` loop with `trips` proven
    /// iterations (if constant) and `cap=` keyword `cap_kw`, with the
    /// warnings that say which cap applies. A large proven bound becomes
    /// the cap of a `bpf_loop` (never exceeded).
    fn range_cap(&mut self, trips: Option<i128>, cap_kw: Option<u32>, at: usize) -> Option<u32> {
        match (trips, cap_kw) {
            (Some(n), None) if n > BPF_LOOP_ABOVE as i128 && n <= MAX_LOOP_CAP => Some(n as u32),
            (Some(_), None) => None,
            (Some(n), Some(c)) => {
                if n > c as i128 {
                    self.warn(
                        at,
                        format!(
                            "this loop runs {n} times but cap={c} stops it (a fault) after {c}{}",
                            bpf_loop_note(c)
                        ),
                        "raise the cap or shorten the range",
                    );
                }
                Some(c)
            }
            (None, c) => {
                let cap = c.unwrap_or(self.loop_cap);
                self.warn(
                    at,
                    format!("loop bound is not a constant: an iteration cap of {cap} applies (exceeding it is a fault){}", bpf_loop_note(cap)),
                    if c.is_some() { "the cap comes from cap=" } else { "set it with range(..., cap=N) or LOOP_CAP = N" },
                );
                Some(cap)
            }
        }
    }

    /// The body of a loop with iteration cap `cap` (0: none), checked
    /// inside the loop (for `break`, `continue` and nested `bpf_loop`s).
    fn loop_body(
        &mut self,
        at: usize,
        cap: u32,
        body: &[ast::Stmt],
        sc: &mut Scope,
    ) -> R<Vec<Stmt>> {
        let outer = self.enter_loop(at, cap)?;
        sc.loops += 1;
        let body = self.block(body, sc);
        sc.loops -= 1;
        self.in_bpf_loop = outer;
        body
    }
}

/// The help of every `range` error.
const RANGE_HELP: &str =
    "for i in range(n), range(a, b) or range(a, b, step); cap=N sets the iteration cap";

/// The value of a constant range argument.
fn const_of(t: &TE) -> Option<i128> {
    match t {
        TE::Lit(v, _) => Some(*v),
        TE::Typed(e) => e.as_const().map(|c| e.ty.value(c)),
    }
}

/// The type of a new `range` loop variable: the first typed bound's,
/// else `s64` when a literal is negative, else `u64`.
fn range_type(start: &TE, end: &TE, step: &TE) -> Ty {
    let typed = [start, end].iter().find_map(|t| match t {
        TE::Typed(e) => Some(e.ty),
        _ => None,
    });
    let neg = [start, end, step]
        .iter()
        .any(|t| matches!(t, TE::Lit(v, _) if *v < 0));
    typed.unwrap_or(if neg { Ty::S64 } else { Ty::U64 })
}

/// The iterations of `range(a, b, step)` (0 when empty).
fn range_trips(a: i128, b: i128, step: i128) -> i128 {
    let n = if step > 0 {
        (b - a + step - 1) / step
    } else {
        (a - b + (-step) - 1) / (-step)
    };
    n.max(0)
}

//! The module pass (docs/language.md, "Module level"): the hook from
//! `attach` first, then imports, constants, maps and chain declarations
//! in order; then the chain bodies, the recursion check and the
//! classifier call.

use super::bpf_loop::MAX_LOOP_CAP;
use super::errors::{expr_name, fit_help, stmt_name, Dest};
use super::maps::MAP_CTORS;
use super::{off, Checked, Checker, Options, Scope, Sym, DEFAULT_LOOP_CAP, MAX_ARGS, R};
use crate::diag::{Diagnostic, Severity, SourceMap};
use crate::ir::{Chain, Program};
use crate::types::Ty;
use nfkit_nf::Hook;
use rustpython_parser::ast::{self, Constant};
use std::collections::HashMap;

/// [`check`] of a script imported `depth` levels deep.
pub(super) fn check_at(
    file: &str,
    source: &str,
    opts: &Options,
    depth: u32,
) -> Result<Checked, Box<Diagnostic>> {
    let script_lines = source.lines().count() as u32 + 1;
    let (expanded, declared) = crate::pipeline::expand(file, source, crate::pipeline::position())?;
    let source = expanded.as_str();
    let sm = SourceMap::new(file, source);
    let module = match rustpython_parser::parse(source, rustpython_parser::Mode::Module, file) {
        Ok(m) => m,
        Err(e) => {
            let off = u32::from(e.offset) as usize;
            return Err(Box::new(sm.diag(
                Severity::Error,
                off,
                format!("invalid syntax: {}", e.error),
                "chain scripts are Python syntax: see docs/language.md",
            )));
        }
    };
    let body = match module {
        ast::Mod::Module(m) => m.body,
        _ => Vec::new(),
    };
    let mut c = Checker {
        sm,
        opts,
        syms: HashMap::new(),
        prog: Program {
            file: file.to_string(),
            source: source.to_string(),
            nfs: Vec::new(),
            maps: Vec::new(),
            chains: Vec::new(),
            classifier: None,
            attach: None,
            consts: Vec::new(),
            tables: declared.tables,
            patterns: Vec::new(),
        },
        warnings: Vec::new(),
        loop_cap: DEFAULT_LOOP_CAP,
        hook: opts.hook.unwrap_or(Hook::Xdp),
        defs: Vec::new(),
        calls: Vec::new(),
        depth,
        in_bpf_loop: false,
    };
    c.module(&body)?;
    // Code generated for tables and pipelines warns about nothing the
    // script wrote (e.g. the rule scan's loop cap).
    c.warnings.retain(|w| w.line <= script_lines);
    let hook = c.hook;
    Ok(Checked {
        program: c.prog,
        hook,
        warnings: c.warnings,
    })
}

/// Names of the language that scripts cannot redefine.
pub(super) fn is_builtin(name: &str) -> bool {
    Ty::from_name(name).is_some()
        || nfkit_abi::verdict::Action::from_name(name).is_some()
        || matches!(name, "Packet" | "range" | "attach" | "True" | "False")
        || MAP_CTORS.iter().any(|(n, _, _)| *n == name)
        || name == super::patterns::CTOR
}

impl<'a> Checker<'a> {
    /// Defines a module-level name (once; not a built-in).
    pub(super) fn define(&mut self, name: &str, sym: Sym, at: usize) -> R<()> {
        if self.syms.contains_key(name) {
            return self.err(
                at,
                format!("'{name}' is already defined"),
                "give each import, constant, map and chain its own name (use 'import x as y' to rename)",
            );
        }
        if is_builtin(name) {
            return self.err(
                at,
                format!("'{name}' is a built-in name of the chain language"),
                "pick another name",
            );
        }
        self.syms.insert(name.to_string(), sym);
        Ok(())
    }

    /// The module pass (see the module doc).
    pub(super) fn module(&mut self, body: &'a [ast::Stmt]) -> R<()> {
        // The hook first: `attach` may come last but decides packet rules.
        for s in body {
            if let ast::Stmt::Expr(e) = s {
                if let ast::Expr::Call(call) = e.value.as_ref() {
                    if matches!(call.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "attach")
                    {
                        self.attach(call)?;
                    }
                }
            }
        }
        let mut cls_calls: Vec<&'a ast::ExprCall> = Vec::new();
        for s in body {
            match s {
                ast::Stmt::ImportFrom(i) => self.import(i)?,
                ast::Stmt::Import(i) => {
                    return self.err(
                        off(i),
                        "'import MODULE' is not supported",
                        "import names: 'from nf.meter import tb_dst' or 'from lib.common import chain'",
                    )
                }
                ast::Stmt::Assign(a) => self.module_assign(a)?,
                ast::Stmt::AnnAssign(a) => self.module_ann_assign(a)?,
                ast::Stmt::FunctionDef(f) => self.declare_chain(f)?,
                ast::Stmt::Expr(e) => match e.value.as_ref() {
                    ast::Expr::Constant(ast::ExprConstant {
                        value: Constant::Str(_),
                        ..
                    }) => {}
                    ast::Expr::Call(call) => {
                        let name = match call.func.as_ref() {
                            ast::Expr::Name(n) => n.id.as_str(),
                            _ => "",
                        };
                        if name == "attach" {
                            continue;
                        }
                        match self.syms.get(name) {
                            Some(Sym::Classifier(_)) => cls_calls.push(call),
                            _ => {
                                return self.err(
                                    off(call),
                                    format!(
                                        "only classifier configuration and 'attach' can be called at module level{}",
                                        if name.is_empty() { String::new() } else { format!(", not '{name}'") }
                                    ),
                                    "call NFs inside a chain ('def'); configure the classifier with e.g. 'every_packet(chain)' after importing it from nf.classify",
                                )
                            }
                        }
                    }
                    other => {
                        return self.err(
                            off(other),
                            format!("{} at module level has no effect", expr_name(other)),
                            "module level holds imports, constants, maps, chains, the classifier call and 'attach'",
                        )
                    }
                },
                ast::Stmt::Pass(_) => {}
                other => {
                    return self.err(
                        off(other),
                        format!("{} is not supported at module level", stmt_name(other)),
                        "module level holds imports, constants, maps, chains ('def'), the classifier call and 'attach'",
                    )
                }
            }
        }
        // Chain bodies.
        self.calls = vec![Vec::new(); self.defs.len()];
        for i in 0..self.defs.len() {
            self.chain_body(i)?;
        }
        self.recursion()?;
        let mut seen_cls = false;
        for call in cls_calls {
            if seen_cls {
                return self.err(
                    off(call),
                    "a script has at most one classifier",
                    "configure one classifier; pick chains by key inside it",
                );
            }
            seen_cls = true;
            self.classifier(call)?;
        }
        Ok(())
    }

    /// `attach("IFACE", "HOOK")`: the hook to compile for (unless the
    /// options set one).
    pub(super) fn attach(&mut self, call: &ast::ExprCall) -> R<()> {
        if self.prog.attach.is_some() {
            return self.err(
                off(call),
                "a script has at most one 'attach'",
                "keep one attach(\"IFACE\", \"HOOK\")",
            );
        }
        let help =
            "attach(\"eth0\", \"xdp\"): hooks xdp, xdp-generic, tc-ingress, tc-egress, socket, switch";
        if call.args.len() != 2 || !call.keywords.is_empty() {
            return self.err(off(call), "attach takes two strings", help);
        }
        let s = |e: &ast::Expr| match e {
            ast::Expr::Constant(ast::ExprConstant {
                value: Constant::Str(s),
                ..
            }) => Some(s.clone()),
            _ => None,
        };
        let (Some(iface), Some(hook)) = (s(&call.args[0]), s(&call.args[1])) else {
            return self.err(off(call), "attach takes two strings", help);
        };
        let h = match hook.as_str() {
            "xdp" | "xdp-generic" => Hook::Xdp,
            "tc-ingress" | "tc-egress" | "tc" => Hook::Tc,
            "socket" => Hook::Socket,
            "switch" => Hook::Switch,
            _ => return self.err(off(&call.args[1]), format!("unknown hook '{hook}'"), help),
        };
        if self.opts.hook.is_none() {
            self.hook = h;
        }
        self.prog.attach = Some((iface, hook));
        Ok(())
    }

    /// `NAME = value`: a map declaration or an untyped constant
    /// (`LOOP_CAP` sets the default iteration cap).
    fn module_assign(&mut self, a: &ast::StmtAssign) -> R<()> {
        let [ast::Expr::Name(target)] = a.targets.as_slice() else {
            return self.err(
                off(a),
                "module level assigns one name at a time",
                "write 'NAME = value'",
            );
        };
        let name = target.id.as_str();
        // A map declaration?
        if let ast::Expr::Call(call) = a.value.as_ref() {
            if let ast::Expr::Name(f) = call.func.as_ref() {
                if let Some(&(_, mt, keyed)) =
                    MAP_CTORS.iter().find(|(n, _, _)| *n == f.id.as_str())
                {
                    return self.map_decl(name, call, mt, keyed, off(target));
                }
                if f.id.as_str() == super::patterns::CTOR {
                    return self.patterns_decl(name, call, off(target));
                }
            }
        }
        let v = self.const_expr(&a.value)?;
        if name == "LOOP_CAP" {
            if !(1..=MAX_LOOP_CAP).contains(&v) {
                return self.err(
                    off(a.value.as_ref()),
                    format!("LOOP_CAP {v} is out of range"),
                    "use 1 .. 8388607",
                );
            }
            self.loop_cap = v as u32;
        }
        self.prog
            .consts
            .push((name.to_string(), None, Ty::U64.wrap(v as u64)));
        self.define(name, Sym::Const(None, v), off(target))
    }

    /// `NAME: T = value`: a typed constant.
    fn module_ann_assign(&mut self, a: &ast::StmtAnnAssign) -> R<()> {
        let ast::Expr::Name(target) = a.target.as_ref() else {
            return self.err(
                off(a),
                "module level assigns one name at a time",
                "write 'NAME: u32 = value'",
            );
        };
        let ty = self.type_of(&a.annotation)?;
        let Some(value) = &a.value else {
            return self.err(
                off(a),
                "a constant needs a value",
                "write 'NAME: u32 = value'",
            );
        };
        let v = self.const_expr(value)?;
        if !ty.fits(v) {
            return self.err(
                off(value.as_ref()),
                format!("{v} does not fit {ty}"),
                &fit_help(ty, v, Dest::Named(target.id.as_str())),
            );
        }
        let name = target.id.as_str();
        if name == "LOOP_CAP" && (1..=MAX_LOOP_CAP).contains(&v) {
            self.loop_cap = v as u32;
        }
        self.prog
            .consts
            .push((name.to_string(), Some(ty), ty.wrap(v as u64)));
        self.define(name, Sym::Const(Some(ty), v), off(target))
    }

    /// A compile-time integer (literals, constants, operators).
    pub(super) fn const_expr(&self, e: &ast::Expr) -> R<i128> {
        match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Int(b) => self.big(b, off(e)),
                Constant::Bool(b) => Ok(*b as i128),
                _ => self.unsupported_expr(e),
            },
            ast::Expr::Name(n) => match self.syms.get(n.id.as_str()) {
                Some(Sym::Const(_, v)) => Ok(*v),
                Some(_) => self.err(
                    off(e),
                    format!("'{}' is not a constant", n.id.as_str()),
                    "constants are integer expressions of literals and other constants",
                ),
                None => match n.id.as_str() {
                    "True" => Ok(1),
                    "False" => Ok(0),
                    id => self.err(
                        off(e),
                        format!("unknown name '{id}'"),
                        "define constants before using them: NAME = 10",
                    ),
                },
            },
            ast::Expr::UnaryOp(u) => {
                let v = self.const_expr(&u.operand)?;
                match u.op {
                    ast::UnaryOp::USub => Ok(-v),
                    ast::UnaryOp::UAdd => Ok(v),
                    ast::UnaryOp::Invert => Ok(!v),
                    ast::UnaryOp::Not => Ok((v == 0) as i128),
                }
            }
            ast::Expr::BinOp(b) => {
                let l = self.const_expr(&b.left)?;
                let r = self.const_expr(&b.right)?;
                self.fold(b.op, l, r, off(e))
            }
            _ => self.err(
                off(e),
                format!("{} are not constant expressions", expr_name(e)),
                "a constant is an integer expression of literals and other constants",
            ),
        }
    }

    /// An integer literal (at most 64 bits, either sign).
    pub(super) fn big(&self, b: &impl ToString, at: usize) -> R<i128> {
        match b.to_string().parse::<i128>() {
            Ok(v) if (-(1i128 << 64)..(1i128 << 64)).contains(&v) => Ok(v),
            _ => self.err(
                at,
                "integer literal is too large",
                "integers have at most 64 bits",
            ),
        }
    }

    /// Folds a binary operator on literals (Python semantics for literals
    /// that stay in range; the result must fit 64 bits).
    pub(super) fn fold(&self, op: ast::Operator, l: i128, r: i128, at: usize) -> R<i128> {
        use ast::Operator::*;
        let v = match op {
            Add => l.checked_add(r),
            Sub => l.checked_sub(r),
            Mult => l.checked_mul(r),
            FloorDiv => Some(if r == 0 { 0 } else { l / r }),
            Mod => Some(if r == 0 { l } else { l % r }),
            LShift => {
                if !(0..128).contains(&r) {
                    None
                } else {
                    l.checked_mul(1i128 << r)
                }
            }
            RShift => {
                if r < 0 {
                    None
                } else {
                    Some(l >> r.min(127))
                }
            }
            BitOr => Some(l | r),
            BitAnd => Some(l & r),
            BitXor => Some(l ^ r),
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
        match v {
            Some(v) if (-(1i128 << 64)..(1i128 << 64)).contains(&v) => Ok(v),
            _ => self.err(
                at,
                "constant expression overflows 64 bits",
                "keep constants within 64 bits",
            ),
        }
    }

    /// A `def`: its name, parameters and return type (the body comes later).
    fn declare_chain(&mut self, f: &'a ast::StmtFunctionDef) -> R<()> {
        let at = off(f);
        if !f.decorator_list.is_empty() {
            return self.err(
                off(&f.decorator_list[0]),
                "decorators are not supported",
                "define plain chains: def name(p: u32) -> u64:",
            );
        }
        let a = &f.args;
        if !a.posonlyargs.is_empty()
            || a.vararg.is_some()
            || !a.kwonlyargs.is_empty()
            || a.kwarg.is_some()
        {
            return self.err(
                at,
                "chains take plain positional parameters",
                "def name(a: u32, b: u64) -> u64:",
            );
        }
        if a.args.len() > MAX_ARGS {
            return self.err(
                off(&a.args[MAX_ARGS].def),
                format!(
                    "a chain has at most {MAX_ARGS} parameters, '{}' has {}",
                    f.name.as_str(),
                    a.args.len()
                ),
                "pass more state through a map",
            );
        }
        let mut params = Vec::new();
        for p in &a.args {
            if p.default.is_some() {
                return self.err(
                    off(&p.def),
                    "default parameter values are not supported",
                    "pass every argument at the call",
                );
            }
            let Some(ann) = &p.def.annotation else {
                return self.err(
                    off(&p.def),
                    format!("parameter '{}' needs a type", p.def.arg.as_str()),
                    &format!("annotate it: {}: u32", p.def.arg.as_str()),
                );
            };
            params.push((p.def.arg.to_string(), self.type_of(ann)?));
        }
        let ret = match &f.returns {
            Some(r) => self.type_of(r)?,
            None => Ty::U64,
        };
        let idx = self.prog.chains.len();
        let (line, _) = self.line_of(at);
        self.prog.chains.push(Chain {
            name: f.name.to_string(),
            params: params.clone(),
            ret,
            locals: params,
            body: Vec::new(),
            line,
        });
        self.defs.push(Some(f));
        self.define(f.name.as_str(), Sym::Chain(idx), at)
    }

    /// Checks the body of chain `i` (not for imported chains).
    fn chain_body(&mut self, i: usize) -> R<()> {
        let Some(f) = self.defs[i] else {
            return Ok(());
        };
        let ch = &self.prog.chains[i];
        let mut sc = Scope {
            locals: Vec::new(),
            by_name: HashMap::new(),
            loops: 0,
            chain: i,
            ret: ch.ret,
        };
        for (n, t) in ch.params.clone() {
            if sc.by_name.contains_key(&n) {
                return self.err(
                    off(f),
                    format!("parameter '{n}' appears twice"),
                    "give parameters distinct names",
                );
            }
            sc.add(&n, t);
        }
        let body = self.block(&f.body, &mut sc)?;
        let ch = &mut self.prog.chains[i];
        ch.body = body;
        ch.locals = sc.locals;
        Ok(())
    }

    /// Chain calls are inlined: a cycle in the call graph is an error.
    pub(super) fn recursion(&self) -> R<()> {
        // Depth-first search for a cycle; the error names the path.
        fn visit(c: &Checker, n: usize, path: &mut Vec<usize>, done: &mut Vec<bool>) -> R<()> {
            if done[n] {
                return Ok(());
            }
            for &(m, at) in &c.calls[n] {
                if let Some(p) = path.iter().position(|&x| x == m) {
                    let mut names: Vec<&str> = path[p..]
                        .iter()
                        .map(|&k| c.prog.chains[k].name.as_str())
                        .collect();
                    names.push(&c.prog.chains[m].name);
                    return c.err(
                        at,
                        format!("recursion is not supported: {}", names.join(" -> ")),
                        "chain calls are inlined; use a loop instead",
                    );
                }
                path.push(m);
                visit(c, m, path, done)?;
                path.pop();
            }
            done[n] = true;
            Ok(())
        }
        let mut done = vec![false; self.calls.len()];
        for n in 0..self.calls.len() {
            let mut path = vec![n];
            visit(self, n, &mut path, &mut done)?;
        }
        Ok(())
    }
}

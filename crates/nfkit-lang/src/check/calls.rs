//! Calls (docs/language.md, "Calls and verdicts"): casts `u8(e)` ..
//! `s64(e)`, NF calls, chain calls (inlined: recorded in the call graph
//! for the recursion check), and the methods of Packet and maps.

use super::errors::{expr_name, Dest};
use super::statements::verdict_call;
use super::{off, Checker, Scope, Sym, R, TE};
use crate::ir::{Expr, ExprKind};
use crate::types::Ty;
use rustpython_parser::ast;

impl Checker<'_> {
    /// A call by name: a cast, an NF, a chain; the errors for the rest.
    pub(super) fn call(&mut self, call: &ast::ExprCall, sc: &mut Scope) -> R<TE> {
        let at = off(call);
        if let ast::Expr::Attribute(a) = call.func.as_ref() {
            return self.method(call, a, sc);
        }
        let ast::Expr::Name(n) = call.func.as_ref() else {
            return self.err(
                at,
                format!("{} cannot be called", expr_name(&call.func)),
                "call NFs, chains, casts and Packet methods by name",
            );
        };
        let id = n.id.as_str();
        if !call.keywords.is_empty() {
            return self.err(
                off(&call.keywords[0]),
                "keyword arguments are not supported",
                "pass arguments by position",
            );
        }
        for a in &call.args {
            if let ast::Expr::Starred(_) = a {
                return self.unsupported_expr(a);
            }
        }
        if let Some(ty) = Ty::from_name(id) {
            if call.args.len() != 1 {
                return self.err(
                    at,
                    format!("{id}(...) takes one argument"),
                    &format!("{id}(x)"),
                );
            }
            let v = self.expr(&call.args[0], sc)?;
            return Ok(TE::Typed(match v {
                TE::Lit(v, _) => Expr::konst(ty, v as u64),
                TE::Typed(e) => e.cast(ty),
            }));
        }
        match self.syms.get(id).cloned() {
            Some(Sym::Nf(i)) => self.nf_call(call, i, sc),
            Some(Sym::Chain(i)) => self.chain_call(call, i, sc),
            Some(Sym::Classifier(_)) => self.err(
                at,
                format!("classifier '{id}' is configured at module level"),
                &format!("{id}(chain) at module level"),
            ),
            Some(Sym::Map(_)) => self.err(
                at,
                format!("map '{id}' cannot be called"),
                &format!("read an entry: {id}[key]"),
            ),
            Some(Sym::Const(..)) => self.err(
                at,
                format!("constant '{id}' cannot be called"),
                "use it as a value",
            ),
            None => self.unknown_call(id, at),
        }
    }

    /// A call of NF `i`: arguments as u64, result u64.
    fn nf_call(&mut self, call: &ast::ExprCall, i: usize, sc: &mut Scope) -> R<TE> {
        let nf = self.prog.nfs[i].clone();
        let defaults = super::patterns::default_args(&nf, call.args.len());
        if call.args.len() + defaults != nf.arity {
            return self.err(
                off(call),
                format!(
                    "{} takes {} argument{}, got {}",
                    nf.name,
                    nf.arity,
                    if nf.arity == 1 { "" } else { "s" },
                    call.args.len()
                ),
                &format!("see 'nfkit nf show {}.{}'", nf.module, nf.name),
            );
        }
        let mut args = Vec::new();
        for a in &call.args {
            let v = self.expr(a, sc)?;
            args.push(self.convert(v, Ty::U64)?);
        }
        args.extend((0..defaults).map(|_| Expr::konst(Ty::U64, 0)));
        Ok(TE::Typed(Expr {
            ty: Ty::U64,
            kind: ExprKind::CallNf { nf: i, args },
        }))
    }

    /// A call of chain `i` (inlined), recorded in the call graph.
    fn chain_call(&mut self, call: &ast::ExprCall, i: usize, sc: &mut Scope) -> R<TE> {
        let at = off(call);
        let (params, ret, name) = {
            let c = &self.prog.chains[i];
            (c.params.clone(), c.ret, c.name.clone())
        };
        if call.args.len() != params.len() {
            return self.err(
                at,
                format!(
                    "chain {name} takes {} argument{}, got {}",
                    params.len(),
                    if params.len() == 1 { "" } else { "s" },
                    call.args.len()
                ),
                &format!(
                    "def {name}({})",
                    params
                        .iter()
                        .map(|(n, t)| format!("{n}: {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        let mut args = Vec::new();
        for (a, (p, t)) in call.args.iter().zip(&params) {
            let v = self.expr(a, sc)?;
            args.push(self.store(v, *t, a, Dest::Named(p))?);
        }
        self.calls[sc.chain].push((i, at));
        Ok(TE::Typed(Expr {
            ty: ret,
            kind: ExprKind::CallChain { chain: i, args },
        }))
    }

    /// The error for a call of a name that is not callable, with what
    /// to write instead.
    fn unknown_call(&self, id: &str, at: usize) -> R<TE> {
        if verdict_call(id).is_some() {
            return self.err(
                at,
                format!("verdict {id}(...) can only be returned"),
                &format!("return {id}(n)"),
            );
        }
        let help = match id {
            "range" => "range(...) is only used in 'for i in range(...)'",
            "len" => "use Packet.len for the packet length",
            "int" => "cast with u64(x) or s64(x)",
            "print" => "count events in a map instead",
            "attach" => "attach(\"eth0\", \"xdp\") at module level",
            "abs" | "min" | "max" => "write it with a conditional expression: a if a < b else b",
            _ => "call imported NFs, chains of this script, casts u8(x)..s64(x)/bool(x) and Packet methods",
        };
        self.err(at, format!("unknown function '{id}'"), help)
    }

    /// A method call: `Packet.read_uN(off)` or `m.get(k, default)`.
    pub(super) fn method(
        &mut self,
        call: &ast::ExprCall,
        a: &ast::ExprAttribute,
        sc: &mut Scope,
    ) -> R<TE> {
        let at = off(call);
        let ast::Expr::Name(base) = a.value.as_ref() else {
            return self.err(
                at,
                "method calls are only supported on Packet and maps",
                "Packet.read_u8(off), m.get(k, default)",
            );
        };
        if base.id.as_str() == "Packet" {
            return self.packet_read(call, a.attr.as_str(), sc);
        }
        let map = self.map_ref(&a.value)?;
        self.map_method(call, map, a.attr.as_str(), sc)
    }
}

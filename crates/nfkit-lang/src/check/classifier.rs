//! The classifier configuration (docs/language.md, "Module level"):
//! which chain runs for which key, the default and fault actions.

use super::statements::{plain_verdict, verdict_call};
use super::{off, Checker, Sym, MAX_CHAINS, R};
use crate::ir::{Classifier, ClsKey};
use crate::types::Ty;
use nfkit_abi::verdict::Action;
use rustpython_parser::ast::{self, Constant};

/// The classifiers of `nf.classify`.
pub(super) const CLASSIFIERS: [&str; 7] = [
    "every_packet",
    "by_ipv4_dst",
    "by_ipv4_src",
    "by_ipv6_dst",
    "by_ipv6_src",
    "by_l4_dport",
    "by_dscp",
];

impl Checker<'_> {
    /// A chain named as a classifier target.
    fn chain_arg(&self, e: &ast::Expr) -> R<usize> {
        if let ast::Expr::Name(n) = e {
            if let Some(Sym::Chain(i)) = self.syms.get(n.id.as_str()) {
                return Ok(*i);
            }
            return self.err(
                off(e),
                format!("'{}' is not a chain of this script", n.id.as_str()),
                "name a chain defined with 'def'",
            );
        }
        self.err(
            off(e),
            "expected a chain name",
            "name a chain defined with 'def'",
        )
    }

    /// A constant verdict (`default=`, `fault=`).
    fn const_verdict(&self, e: &ast::Expr) -> R<u64> {
        let help = "DROP, PASS, ABORTED, TX, FLOOD, REDIRECT(n), CONTROLLER(n), HOST(n)";
        match e {
            ast::Expr::Name(n) => {
                if let Some(a) = plain_verdict(n.id.as_str()) {
                    return Ok(a.verdict(0));
                }
                self.err(
                    off(e),
                    format!("'{}' is not a verdict", n.id.as_str()),
                    help,
                )
            }
            ast::Expr::Call(c) => {
                if let ast::Expr::Name(n) = c.func.as_ref() {
                    let call = verdict_call(n.id.as_str()).filter(|_| c.args.len() == 1);
                    if let Some(a) = call {
                        let v = self.const_expr(&c.args[0])?;
                        if !Ty::U32.fits(v) {
                            return self.err(
                                off(&c.args[0]),
                                format!("{v} does not fit u32"),
                                "verdict arguments are u32",
                            );
                        }
                        return Ok(a.verdict(v as u32));
                    }
                }
                self.err(off(e), "expected a verdict", help)
            }
            _ => self.err(off(e), "expected a verdict", help),
        }
    }

    /// The classifier call: its keys, chains, default and fault actions.
    pub(super) fn classifier(&mut self, call: &ast::ExprCall) -> R<()> {
        let at = off(call);
        let ast::Expr::Name(n) = call.func.as_ref() else {
            return Ok(());
        };
        let Some(Sym::Classifier(name)) = self.syms.get(n.id.as_str()).cloned() else {
            return Ok(());
        };
        let mut default = Action::Pass.verdict(0);
        let mut fault = Action::Drop.verdict(0);
        for k in &call.keywords {
            match k.arg.as_ref().map(|a| a.as_str()) {
                Some("default") => default = self.const_verdict(&k.value)?,
                Some("fault") => fault = self.const_verdict(&k.value)?,
                _ => {
                    return self.err(
                        off(k),
                        "classifiers take the keywords 'default' and 'fault'",
                        "by_dscp({46: voice}, default=PASS, fault=DROP)",
                    )
                }
            }
        }
        let mut entries = Vec::new();
        if name == "every_packet" {
            if call.args.len() != 1 {
                return self.err(at, "every_packet takes one chain", "every_packet(chain)");
            }
            entries.push((ClsKey::All, self.chain_arg(&call.args[0])?));
        } else {
            let help = match name.as_str() {
                "by_l4_dport" => "by_l4_dport({53: dns, 80: web}, default=PASS)",
                "by_dscp" => "by_dscp({46: voice, 0: best_effort}, default=PASS)",
                "by_ipv6_dst" | "by_ipv6_src" => {
                    "by_ipv6_dst({\"2001:db8::/32\": a}, default=PASS)"
                }
                _ => "by_ipv4_dst({\"198.18.0.0/24\": a, \"198.18.1.1\": b}, default=PASS)",
            };
            let [ast::Expr::Dict(d)] = call.args.as_slice() else {
                return self.err(at, format!("{name} takes a dict of keys to chains"), help);
            };
            for (k, v) in d.keys.iter().zip(&d.values) {
                let Some(k) = k else {
                    return self.err(off(v), "'**' in a classifier dict is not supported", help);
                };
                let key = self.cls_key(&name, k, help)?;
                if entries.iter().any(|(x, _)| *x == key) {
                    return self.err(off(k), "duplicate classifier key", help);
                }
                entries.push((key, self.chain_arg(v)?));
            }
        }
        let (line, _) = self.line_of(at);
        let c = Classifier {
            name,
            entries,
            default,
            fault,
            line,
        };
        self.prog.classifier = Some(c);
        if self.prog.dispatched().len() > MAX_CHAINS {
            return self.err(
                at,
                format!("a classifier dispatches at most {MAX_CHAINS} chains"),
                "merge chains or dispatch inside a chain",
            );
        }
        Ok(())
    }

    /// One key of classifier `cls`: a port, a DSCP value, an address or prefix.
    fn cls_key(&self, cls: &str, k: &ast::Expr, help: &str) -> R<ClsKey> {
        match cls {
            "by_l4_dport" | "by_dscp" => {
                let v = self.const_expr(k)?;
                if cls == "by_dscp" {
                    if !(0..64).contains(&v) {
                        return self.err(
                            off(k),
                            format!("DSCP {v} is out of range"),
                            "DSCP values are 0..63",
                        );
                    }
                    Ok(ClsKey::Dscp(v as u8))
                } else {
                    if !(0..65536).contains(&v) {
                        return self.err(
                            off(k),
                            format!("port {v} is out of range"),
                            "ports are 0..65535",
                        );
                    }
                    Ok(ClsKey::Port(v as u16))
                }
            }
            _ => {
                let ast::Expr::Constant(ast::ExprConstant {
                    value: Constant::Str(s),
                    ..
                }) = k
                else {
                    return self.err(off(k), "classifier address keys are strings", help);
                };
                let (a, p) = match s.split_once('/') {
                    Some((a, p)) => (a, Some(p)),
                    None => (s.as_str(), None),
                };
                let v6 = cls.starts_with("by_ipv6");
                let bad = || {
                    self.err(
                        off(k),
                        format!(
                            "'{s}' is not an IPv{} address or prefix",
                            if v6 { 6 } else { 4 }
                        ),
                        help,
                    )
                };
                let max = if v6 { 128 } else { 32 };
                let prefix = match p {
                    None => max,
                    Some(p) => match p.parse::<u8>() {
                        Ok(p) if p <= max => p,
                        _ => return bad(),
                    },
                };
                if v6 {
                    match a.parse::<std::net::Ipv6Addr>() {
                        Ok(ip) => Ok(ClsKey::Ipv6 {
                            addr: ip.octets(),
                            prefix,
                        }),
                        Err(_) => bad(),
                    }
                } else {
                    match a.parse::<std::net::Ipv4Addr>() {
                        Ok(ip) => Ok(ClsKey::Ipv4 {
                            addr: ip.octets(),
                            prefix,
                        }),
                        Err(_) => bad(),
                    }
                }
            }
        }
    }
}

//! Pipelines (docs/language.md, "Pipelines"): `Table(...)` declarations,
//! `T.apply()` and `pipeline(pre=..., tables=[...], post=...)`, expanded
//! into the chain language before checking.
//!
//! [`expand`] reads the script's declarations (errors at their line and
//! column), blanks them out of the source (so every other position is
//! unchanged), renames `T.apply(` to `T_apply(` (same length) and appends
//! the tables' maps and chains ([`crate::table::Table::source`]) and the
//! position's entry: `every_packet` of the ingress pipeline (`pre`, the
//! tables in order, `REDIRECT` to the port they chose) or, for
//! [`Position::Post`], of the `post` chain.

use crate::diag::{Diagnostic, Severity, SourceMap};
use crate::table::{
    field, Action, Entry, KeyMatch, MatchKind, Table, MAX_ARG, MAX_SIZE, MAX_TERNARY,
};
use nfkit_abi::verdict::Action as Verdict;
use rustpython_parser::ast::{self, Constant, Ranged};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write;

/// Which program of a pipeline a compile builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Position {
    /// On arrival: `pre`, then the tables (the XDP / TC ingress program).
    #[default]
    Ingress,
    /// Per output port before transmission (the TC egress program).
    Post,
}

thread_local! {
    static POSITION: Cell<Position> = const { Cell::new(Position::Ingress) };
}

/// Runs `f` (a compile) for the pipeline position `p`.
pub fn at_position<T>(p: Position, f: impl FnOnce() -> T) -> T {
    let old = POSITION.with(|c| c.replace(p));
    let out = f();
    POSITION.with(|c| c.set(old));
    out
}

/// The position compiles on this thread build.
pub fn position() -> Position {
    POSITION.with(|c| c.get())
}

/// A `pipeline(...)` call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pipeline {
    pub pre: Option<String>,
    /// Tables (`T`) and chains between them, in order.
    pub stages: Vec<Stage>,
    pub post: Option<String>,
    /// The verdict when no stage chose an output port.
    pub miss: String,
    pub line: u32,
}

/// One stage of a pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    Table(String),
    Chain(String),
}

/// The tables and pipeline of a script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    pub tables: Vec<Table>,
    pub pipeline: Option<Pipeline>,
    /// Local names of tables imported from library scripts (`from
    /// lib.NAME import T`): the library declares them (its maps, entries
    /// and `T_apply` chain come with the import, `check::imports`).
    pub imported: Vec<String>,
}

/// The library script `from lib.REST import ...` reads, next to `file`:
/// `lib/REST.chain` or `lib/REST.py` (path, source).
pub fn lib_script(file: &str, rest: &str) -> Option<(std::path::PathBuf, String)> {
    let base = std::path::Path::new(file)
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let rel: std::path::PathBuf = std::iter::once("lib").chain(rest.split('.')).collect();
    ["chain", "py"].iter().find_map(|ext| {
        let p = base.join(&rel).with_extension(ext);
        std::fs::read_to_string(&p).ok().map(|src| (p, src))
    })
}

/// Names of the tables a library script declares (`T = Table(...)` at
/// module level); none when it does not parse (its import reports it).
fn lib_tables(path: &std::path::Path, source: &str) -> Vec<String> {
    let file = path.display().to_string();
    let Ok(ast::Mod::Module(m)) =
        rustpython_parser::parse(source, rustpython_parser::Mode::Module, &file)
    else {
        return Vec::new();
    };
    m.body
        .iter()
        .filter_map(|s| match s {
            ast::Stmt::Assign(a) => match (a.targets.as_slice(), a.value.as_ref()) {
                ([ast::Expr::Name(t)], ast::Expr::Call(c))
                    if matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "Table") =>
                {
                    Some(t.id.to_string())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

type R<T> = Result<T, Box<Diagnostic>>;

struct Reader<'s> {
    sm: SourceMap,
    consts: HashMap<String, i128>,
    chains: HashMap<String, usize>,
    tables: Vec<Table>,
    /// Tables imported from library scripts (local names).
    imported: Vec<String>,
    src: &'s str,
}

fn off<T: Ranged>(n: &T) -> usize {
    u32::from(n.start()) as usize
}

impl Reader<'_> {
    fn err<T>(&self, at: usize, msg: impl Into<String>, help: &str) -> R<T> {
        Err(Box::new(self.sm.diag(
            Severity::Error,
            at,
            msg.into(),
            help,
        )))
    }

    fn line(&self, at: usize) -> u32 {
        self.src[..at.min(self.src.len())].matches('\n').count() as u32 + 1
    }

    /// An integer: literal, module constant, `+ - * | & << >>`, MAC string.
    fn int(&self, e: &ast::Expr) -> R<i128> {
        match e {
            ast::Expr::Constant(c) => match &c.value {
                Constant::Int(b) => match b.to_string().parse::<i128>() {
                    Ok(v) => Ok(v),
                    Err(_) => self.err(off(e), "integer literal is too large", "at most 64 bits"),
                },
                Constant::Bool(b) => Ok(*b as i128),
                Constant::Str(s) => match parse_mac(s) {
                    Some(m) => Ok(m as i128),
                    None => self.err(
                        off(e),
                        format!("'{s}' is not a MAC address"),
                        "write an integer, a constant or \"02:00:00:00:00:01\"",
                    ),
                },
                _ => self.err(off(e), "expected an integer", "write an integer or a constant"),
            },
            ast::Expr::Name(n) => match self.consts.get(n.id.as_str()) {
                Some(v) => Ok(*v),
                None => self.err(
                    off(e),
                    format!("'{}' is not a constant defined above", n.id.as_str()),
                    "table entries take integers and module constants (NAME = 10) defined before the table",
                ),
            },
            ast::Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::USub) => {
                Ok(-self.int(&u.operand)?)
            }
            ast::Expr::BinOp(b) => {
                let (l, r) = (self.int(&b.left)?, self.int(&b.right)?);
                use ast::Operator::*;
                let v = match b.op {
                    Add => l.checked_add(r),
                    Sub => l.checked_sub(r),
                    Mult => l.checked_mul(r),
                    BitOr => Some(l | r),
                    BitAnd => Some(l & r),
                    BitXor => Some(l ^ r),
                    LShift if (0..64).contains(&r) => l.checked_mul(1 << r),
                    RShift if (0..128).contains(&r) => Some(l >> r),
                    _ => None,
                };
                match v {
                    Some(v) if (-(1i128 << 64)..(1i128 << 64)).contains(&v) => Ok(v),
                    _ => self.err(
                        off(e),
                        "not a constant integer expression of at most 64 bits",
                        "use + - * | & ^ << >> on integers",
                    ),
                }
            }
            _ => self.err(off(e), "expected an integer", "write an integer or a constant"),
        }
    }

    fn string<'e>(&self, e: &'e ast::Expr, what: &str, help: &str) -> R<&'e str> {
        match e {
            ast::Expr::Constant(ast::ExprConstant {
                value: Constant::Str(s),
                ..
            }) => Ok(s.as_str()),
            _ => self.err(off(e), format!("{what} must be a string"), help),
        }
    }

    fn name<'e>(&self, e: &'e ast::Expr, what: &str, help: &str) -> R<&'e str> {
        match e {
            ast::Expr::Name(n) => Ok(n.id.as_str()),
            _ => self.err(off(e), format!("{what} must be a name"), help),
        }
    }

    /// `NAME = Table(keys=..., actions=..., size=N, default=..., entries=[...])`.
    fn table(&self, name: &str, call: &ast::ExprCall) -> R<Table> {
        const HELP: &str = "Table(keys={\"ip.dst\": \"lpm\"}, actions=[route, DROP], size=256, default=DROP, entries=[...])";
        if let Some(a) = call.args.first() {
            return self.err(off(a), "Table takes keyword arguments", HELP);
        }
        let mut kw: HashMap<&str, &ast::Expr> = HashMap::new();
        for k in &call.keywords {
            let Some(id) = &k.arg else {
                return self.err(off(k), "'**' is not supported in Table", HELP);
            };
            if !matches!(
                id.as_str(),
                "keys" | "actions" | "size" | "default" | "entries"
            ) {
                return self.err(
                    off(k),
                    format!("Table has no argument '{}'", id.as_str()),
                    "arguments: keys, actions, size, default, entries",
                );
            }
            kw.insert(id.as_str(), &k.value);
        }
        let line = self.line(off(call));
        // keys
        let Some(keys_e) = kw.get("keys") else {
            return self.err(off(call), format!("table '{name}' needs keys"), HELP);
        };
        let ast::Expr::Dict(d) = keys_e else {
            return self.err(
                off(*keys_e),
                "keys must be a dict of field to match kind",
                "keys={\"ip.src\": \"ternary\", \"ip.proto\": \"exact\"}",
            );
        };
        let mut keys = Vec::new();
        for (k, v) in d.keys.iter().zip(&d.values) {
            let Some(k) = k else {
                return self.err(off(v), "'**' is not supported in keys", HELP);
            };
            let fname = self.string(k, "a key field", "\"ip.dst\"")?;
            let Some(fld) = field(fname) else {
                let names: Vec<&str> = crate::table::FIELDS.iter().map(|f| f.name).collect();
                return self.err(
                    off(k),
                    format!("unknown key field '{fname}'"),
                    &format!("fields: {}", names.join(", ")),
                );
            };
            if keys
                .iter()
                .any(|(f, _): &(&crate::table::Field, _)| f.name == fname)
            {
                return self.err(
                    off(k),
                    format!("key '{fname}' appears twice"),
                    "list each field once",
                );
            }
            let kind_s = self.string(v, "a match kind", "\"exact\", \"lpm\" or \"ternary\"")?;
            let Some(kind) = MatchKind::from_name(kind_s) else {
                return self.err(
                    off(v),
                    format!("unknown match kind '{kind_s}'"),
                    "match kinds: \"exact\", \"lpm\", \"ternary\"",
                );
            };
            if kind == MatchKind::Lpm {
                if !fld.ipv4 {
                    return self.err(
                        off(v),
                        format!("'{fname}' cannot be matched by lpm"),
                        "lpm matches ip.src or ip.dst; use ternary with a mask for other fields",
                    );
                }
                if keys.iter().any(|(_, k)| *k == MatchKind::Lpm) {
                    return self.err(
                        off(v),
                        "a table has at most one lpm key",
                        "match the other address with \"ternary\" (prefixes as masks)",
                    );
                }
            }
            keys.push((fld, kind));
        }
        if keys.is_empty() {
            return self.err(off(*keys_e), "a table needs at least one key", HELP);
        }
        if keys.iter().any(|(_, k)| *k == MatchKind::Lpm)
            && keys.iter().any(|(_, k)| *k == MatchKind::Ternary)
        {
            return self.err(
                off(*keys_e),
                "a table mixes lpm and ternary keys",
                "write the prefix as a ternary mask (\"198.18.0.0/16\") in a ternary table",
            );
        }
        // actions
        let Some(acts_e) = kw.get("actions") else {
            return self.err(off(call), format!("table '{name}' needs actions"), HELP);
        };
        let ast::Expr::List(l) = acts_e else {
            return self.err(
                off(*acts_e),
                "actions must be a list",
                "actions=[route, DROP]",
            );
        };
        let mut actions = Vec::new();
        for a in &l.elts {
            let n = self.name(
                a,
                "an action",
                "a verdict (DROP, PASS, REDIRECT), NoAction or a chain",
            )?;
            let act = if n == "REDIRECT" {
                Action::Redirect
            } else if n == "NoAction" {
                Action::NoAction
            } else if let Some(v) = Verdict::from_name(n) {
                if v.takes_arg() {
                    return self.err(
                        off(a),
                        format!("{n} needs an argument and cannot be a table action"),
                        "use REDIRECT (its port is the entry's argument) or a chain that returns the verdict",
                    );
                }
                Action::Verdict(n.to_string())
            } else if let Some(&arity) = self.chains.get(n) {
                if arity > 1 {
                    return self.err(
                        off(a),
                        format!("action '{n}' takes {arity} parameters"),
                        "an action chain takes the entry's argument (one u64) or nothing",
                    );
                }
                Action::Chain {
                    name: n.to_string(),
                    arity,
                }
            } else {
                return self.err(
                    off(a),
                    format!("unknown action '{n}'"),
                    "actions are verdicts (DROP, PASS, TX, REDIRECT), NoAction or chains defined in this script; call an NF (extern) from a chain",
                );
            };
            if actions.contains(&act) {
                return self.err(
                    off(a),
                    format!("action '{n}' appears twice"),
                    "list each action once",
                );
            }
            actions.push(act);
        }
        if actions.is_empty() || actions.len() > 255 {
            return self.err(off(*acts_e), "a table has 1 to 255 actions", HELP);
        }
        // size
        let size = match kw.get("size") {
            Some(e) => {
                let v = self.int(e)?;
                let max = if keys.iter().any(|(_, k)| *k == MatchKind::Ternary) {
                    MAX_TERNARY
                } else {
                    MAX_SIZE
                };
                if !(1..=max as i128).contains(&v) {
                    return self.err(
                        off(*e),
                        format!("table size {v} is out of range"),
                        &format!("use 1 .. {max} (ternary tables are scanned rule by rule)"),
                    );
                }
                v as u32
            }
            None => return self.err(off(call), format!("table '{name}' needs a size"), HELP),
        };
        let mut t = Table {
            name: name.to_string(),
            keys,
            actions,
            size,
            default: 0,
            entries: Vec::new(),
            line,
        };
        if let Some(e) = kw.get("default") {
            let (a, arg) = self.action_ref(&t, e)?;
            t.default = crate::table::word(a, arg);
        } else {
            return self.err(
                off(call),
                format!("table '{name}' needs a default action"),
                "default=DROP, or default=(action, argument)",
            );
        }
        if let Some(e) = kw.get("entries") {
            let ast::Expr::List(l) = e else {
                return self.err(
                    off(*e),
                    "entries must be a list",
                    "entries=[(\"198.18.1.0/24\", route, 2)]",
                );
            };
            if l.elts.len() > size as usize {
                return self.err(
                    off(*e),
                    format!("{} entries do not fit size {size}", l.elts.len()),
                    "raise the size",
                );
            }
            for x in &l.elts {
                let entry = self.entry(&t, x)?;
                t.entries.push(entry);
            }
        }
        Ok(t)
    }

    /// An action reference: `NAME` or `(NAME, argument)`.
    fn action_ref(&self, t: &Table, e: &ast::Expr) -> R<(usize, u64)> {
        let (n, arg) = match e {
            ast::Expr::Tuple(tu) if tu.elts.len() == 2 => (&tu.elts[0], Some(&tu.elts[1])),
            _ => (e, None),
        };
        let name = self.name(
            n,
            "an action",
            "an action of the table, or (action, argument)",
        )?;
        let Some(i) = t.actions.iter().position(|a| a.name() == name) else {
            return self.err(
                off(n),
                format!("'{name}' is not an action of table '{}'", t.name),
                "list it in actions=[...]",
            );
        };
        let v = match arg {
            Some(a) => {
                let v = self.int(a)?;
                if !(0..=MAX_ARG as i128).contains(&v) {
                    return self.err(
                        off(a),
                        format!("action argument {v} does not fit 56 bits"),
                        "arguments are 0 .. 2^56 - 1",
                    );
                }
                v as u64
            }
            None => 0,
        };
        Ok((i, v))
    }

    /// `(match, action)` or `(match, action, argument)`.
    fn entry(&self, t: &Table, e: &ast::Expr) -> R<Entry> {
        const HELP: &str = "an entry is (match, action) or (match, action, argument); several keys: ((k1, k2), action)";
        let ast::Expr::Tuple(tu) = e else {
            return self.err(off(e), "an entry must be a tuple", HELP);
        };
        if !(2..=3).contains(&tu.elts.len()) {
            return self.err(off(e), "an entry has 2 or 3 items", HELP);
        }
        let ms: Vec<&ast::Expr> = if t.keys.len() == 1 {
            vec![&tu.elts[0]]
        } else {
            match &tu.elts[0] {
                ast::Expr::Tuple(m) if m.elts.len() == t.keys.len() => m.elts.iter().collect(),
                other => {
                    return self.err(
                        off(other),
                        format!(
                            "the match must be a tuple of {} values, one per key",
                            t.keys.len()
                        ),
                        HELP,
                    )
                }
            }
        };
        let mut keys = Vec::new();
        for (m, (fld, kind)) in ms.into_iter().zip(&t.keys) {
            keys.push(self.key_match(m, fld, *kind)?);
        }
        let act_e = match tu.elts.get(2) {
            Some(_) => ast::Expr::Tuple(ast::ExprTuple {
                range: tu.range,
                elts: vec![tu.elts[1].clone(), tu.elts[2].clone()],
                ctx: ast::ExprContext::Load,
            }),
            None => tu.elts[1].clone(),
        };
        let (action, arg) = self.action_ref(t, &act_e)?;
        Ok(Entry {
            keys,
            action,
            arg,
            line: self.line(off(e)),
        })
    }

    fn key_match(&self, m: &ast::Expr, fld: &crate::table::Field, kind: MatchKind) -> R<KeyMatch> {
        let bits = fld.ty.bytes() * 8;
        let full = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let full = if fld.mac { (1u64 << 48) - 1 } else { full };
        let fbits = if fld.mac { 48 } else { bits };
        let fits = |v: i128| (0..=full as i128).contains(&v);
        // Strings: addresses, prefixes, "*".
        if let ast::Expr::Constant(ast::ExprConstant {
            value: Constant::Str(s),
            ..
        }) = m
        {
            if s == "*" {
                if kind != MatchKind::Ternary {
                    return self.err(off(m), "'*' matches only ternary keys", "give the value");
                }
                return Ok(KeyMatch {
                    value: 0,
                    mask: 0,
                    prefix: 0,
                });
            }
            if fld.ipv4 {
                let Some((a, p)) = parse_prefix(s) else {
                    return self.err(
                        off(m),
                        format!("'{s}' is not an IPv4 address or prefix"),
                        "write \"198.18.1.0/24\" or \"198.18.1.1\"",
                    );
                };
                if p < 32 && kind == MatchKind::Exact {
                    return self.err(
                        off(m),
                        format!("'{s}' is a prefix but {} is matched exactly", fld.name),
                        "give a whole address, or match the key by lpm or ternary",
                    );
                }
                let mask = if p == 0 {
                    0
                } else {
                    (u32::MAX << (32 - p)) as u64
                };
                if a as u64 & !mask != 0 {
                    return self.err(
                        off(m),
                        format!("'{s}' has bits set beyond its prefix"),
                        "clear the host bits (198.18.1.0/24)",
                    );
                }
                return Ok(KeyMatch {
                    value: a as u64,
                    mask,
                    prefix: p,
                });
            }
        }
        // (value, mask) for ternary.
        if let ast::Expr::Tuple(tu) = m {
            if kind != MatchKind::Ternary || tu.elts.len() != 2 {
                return self.err(
                    off(m),
                    "(value, mask) matches only ternary keys",
                    "give the value",
                );
            }
            let (v, k) = (self.int(&tu.elts[0])?, self.int(&tu.elts[1])?);
            if !fits(v) || !fits(k) {
                return self.err(
                    off(m),
                    format!("value or mask does not fit {}", fld.ty),
                    "use values of the field's width",
                );
            }
            if v & !k != 0 {
                return self.err(off(m), "the value has bits outside its mask", "clear them");
            }
            return Ok(KeyMatch {
                value: v as u64,
                mask: k as u64,
                prefix: fbits,
            });
        }
        let v = self.int(m)?;
        if !fits(v) {
            return self.err(
                off(m),
                format!("{v} does not fit {} ({})", fld.name, fld.ty),
                "use a value of the field's width",
            );
        }
        Ok(KeyMatch {
            value: v as u64,
            mask: full,
            prefix: fbits,
        })
    }

    /// `pipeline(pre=chain, tables=[T, chain, ...], post=chain, miss=DROP)`.
    fn pipeline(&self, call: &ast::ExprCall) -> R<Pipeline> {
        const HELP: &str = "pipeline(pre=check, tables=[ROUTES, ACL], post=egress, miss=DROP)";
        if let Some(a) = call.args.first() {
            return self.err(off(a), "pipeline takes keyword arguments", HELP);
        }
        let mut p = Pipeline {
            miss: "DROP".into(),
            line: self.line(off(call)),
            ..Pipeline::default()
        };
        let chain = |e: &ast::Expr, what: &str| -> R<String> {
            let n = self.name(e, what, "a chain defined in this script")?;
            match self.chains.get(n) {
                Some(0) => Ok(n.to_string()),
                Some(_) => self.err(
                    off(e),
                    format!("the {what} chain '{n}' takes parameters"),
                    "position chains take none",
                ),
                None => self.err(off(e), format!("unknown chain '{n}'"), "define it with def"),
            }
        };
        for k in &call.keywords {
            let id = k.arg.as_ref().map(|a| a.as_str()).unwrap_or("");
            match id {
                "pre" => p.pre = Some(chain(&k.value, "pre")?),
                "post" => p.post = Some(chain(&k.value, "post")?),
                "miss" => {
                    let n = self.name(&k.value, "miss", "a verdict: DROP, PASS, TX")?;
                    if Verdict::from_name(n).is_none_or(|v| v.takes_arg()) {
                        return self.err(
                            off(&k.value),
                            format!("'{n}' is not a verdict without argument"),
                            "DROP, PASS, TX, ABORTED",
                        );
                    }
                    p.miss = n.to_string();
                }
                "tables" => {
                    let ast::Expr::List(l) = &k.value else {
                        return self.err(off(&k.value), "tables must be a list", HELP);
                    };
                    for e in &l.elts {
                        let n = self.name(e, "a stage", "a table or a chain")?;
                        if self.tables.iter().any(|t| t.name == n)
                            || self.imported.iter().any(|t| t == n)
                        {
                            p.stages.push(Stage::Table(n.to_string()));
                        } else if !self.chains.contains_key(n) {
                            return self.err(
                                off(e),
                                format!("unknown table or chain '{n}'"),
                                "stages are tables declared above (T = Table(...)) and chains (def)",
                            );
                        } else {
                            p.stages.push(Stage::Chain(chain(e, "stage")?));
                        }
                    }
                }
                _ => {
                    return self.err(
                        off(k),
                        format!("pipeline has no argument '{id}'"),
                        "arguments: pre, tables, post, miss",
                    )
                }
            }
        }
        Ok(p)
    }
}

/// "a.b.c.d" or "a.b.c.d/n": the address as an integer and the prefix.
fn parse_prefix(s: &str) -> Option<(u32, u32)> {
    let (a, p) = match s.split_once('/') {
        Some((a, p)) => (a, p.parse::<u32>().ok().filter(|p| *p <= 32)?),
        None => (s, 32),
    };
    let ip: std::net::Ipv4Addr = a.parse().ok()?;
    Some((u32::from(ip), p))
}

/// "aa:bb:cc:dd:ee:ff" as a 48-bit integer.
fn parse_mac(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut v = 0u64;
    for p in parts {
        if p.len() != 2 {
            return None;
        }
        v = (v << 8) | u64::from_str_radix(p, 16).ok()?;
    }
    Some(v)
}

/// Reads the tables and pipeline of `source` (none: `Declared` empty).
pub fn declared(file: &str, source: &str) -> R<(Declared, Vec<(usize, usize)>)> {
    let sm = SourceMap::new(file, source);
    let Ok(module) = rustpython_parser::parse(source, rustpython_parser::Mode::Module, file) else {
        // The checker reports syntax errors.
        return Ok((Declared::default(), Vec::new()));
    };
    let body = match module {
        ast::Mod::Module(m) => m.body,
        _ => Vec::new(),
    };
    let mut r = Reader {
        sm,
        consts: HashMap::new(),
        chains: HashMap::new(),
        tables: Vec::new(),
        imported: Vec::new(),
        src: source,
    };
    for s in &body {
        match s {
            ast::Stmt::FunctionDef(f) => {
                r.chains.insert(f.name.to_string(), f.args.args.len());
            }
            ast::Stmt::ImportFrom(i) => {
                let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                let Some((path, src)) = module
                    .strip_prefix("lib.")
                    .and_then(|m| lib_script(file, m))
                else {
                    continue;
                };
                let tables = lib_tables(&path, &src);
                for alias in &i.names {
                    if tables.iter().any(|t| t == alias.name.as_str()) {
                        let local = alias.asname.as_ref().unwrap_or(&alias.name);
                        r.imported.push(local.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    let mut blank = Vec::new();
    let mut pipeline = None;
    for s in &body {
        match s {
            ast::Stmt::Assign(a) => {
                let [ast::Expr::Name(t)] = a.targets.as_slice() else {
                    continue;
                };
                if let ast::Expr::Call(c) = a.value.as_ref() {
                    if matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "Table") {
                        if r.tables.iter().any(|x| x.name == t.id.as_str())
                            || r.chains.contains_key(t.id.as_str())
                        {
                            return r.err(
                                off(t),
                                format!("'{}' is already defined", t.id.as_str()),
                                "give each table its own name",
                            );
                        }
                        let table = r.table(t.id.as_str(), c)?;
                        r.tables.push(table);
                        blank.push((off(s), u32::from(s.end()) as usize));
                        continue;
                    }
                }
                if let Ok(v) = r.int(&a.value) {
                    r.consts.insert(t.id.to_string(), v);
                }
            }
            ast::Stmt::AnnAssign(a) => {
                if let (ast::Expr::Name(t), Some(v)) = (a.target.as_ref(), &a.value) {
                    if let Ok(v) = r.int(v) {
                        r.consts.insert(t.id.to_string(), v);
                    }
                }
            }
            ast::Stmt::Expr(e) => {
                if let ast::Expr::Call(c) = e.value.as_ref() {
                    if matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "pipeline")
                    {
                        if pipeline.is_some() {
                            return r.err(
                                off(c),
                                "a script has at most one pipeline",
                                "declare every position in one pipeline(...)",
                            );
                        }
                        pipeline = Some(r.pipeline(c)?);
                        blank.push((off(s), u32::from(s.end()) as usize));
                    }
                }
            }
            _ => {}
        }
    }
    Ok((
        Declared {
            tables: r.tables,
            pipeline,
            imported: r.imported,
        },
        blank,
    ))
}

/// The script with its tables and pipeline expanded for `pos` (the
/// source unchanged when it declares neither), and what it declared.
pub fn expand(file: &str, source: &str, pos: Position) -> R<(String, Declared)> {
    let (decl, blank) = declared(file, source)?;
    if decl.tables.is_empty() && decl.pipeline.is_none() && decl.imported.is_empty() {
        return Ok((source.to_string(), decl));
    }
    let mut out: Vec<u8> = source.as_bytes().to_vec();
    for (a, b) in blank {
        for c in &mut out[a..b.min(source.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    let mut out = String::from_utf8_lossy(&out).into_owned();
    for t in decl.tables.iter().map(|t| &t.name).chain(&decl.imported) {
        out = rename_apply(&out, t);
    }
    let mut gen = String::new();
    for t in &decl.tables {
        gen.push_str(&t.source());
    }
    if let Some(p) = &decl.pipeline {
        let _ = writeln!(gen, "\n# pipeline (line {})", p.line);
        let _ = writeln!(
            gen,
            "from nf.classify import every_packet as pipeline_every_packet"
        );
        if let Some(post) = &p.post {
            // Also in the ingress program (not dispatched there): `post_of`
            // builds the post program from the expanded source.
            let _ = writeln!(gen, "def {POST_CHAIN}() -> u64:");
            let _ = writeln!(gen, "    {post}()");
            let _ = writeln!(gen, "    return PASS");
        }
        match pos {
            Position::Ingress => {
                let _ = writeln!(gen, "def pipeline_ingress() -> u64:");
                if let Some(pre) = &p.pre {
                    let _ = writeln!(gen, "    {pre}()");
                }
                let _ = writeln!(gen, "    _out: u64 = 0");
                let _ = writeln!(gen, "    _r: u64 = 0");
                for s in &p.stages {
                    let call = match s {
                        Stage::Table(t) => format!("{t}_apply()"),
                        Stage::Chain(c) => format!("{c}()"),
                    };
                    let _ = writeln!(gen, "    _r = {call}");
                    let _ = writeln!(gen, "    if _r != 0:");
                    let _ = writeln!(gen, "        _out = _r");
                }
                let _ = writeln!(gen, "    if _out == 0:");
                let _ = writeln!(gen, "        return {}", p.miss);
                let _ = writeln!(gen, "    return REDIRECT(_out)");
                let _ = writeln!(gen, "{INGRESS_CLS}");
            }
            Position::Post => {
                if p.post.is_none() {
                    let _ = writeln!(gen, "def {POST_CHAIN}() -> u64:");
                    let _ = writeln!(gen, "    return PASS");
                }
                let _ = writeln!(gen, "{POST_CLS}");
            }
        }
    }
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&gen);
    Ok((out, decl))
}

/// The generated chain of the `post` position.
const POST_CHAIN: &str = "pipeline_post";
/// The classifier call of the ingress program, and of the post program.
const INGRESS_CLS: &str = "pipeline_every_packet(pipeline_ingress)";
const POST_CLS: &str = "pipeline_every_packet(pipeline_post)";

/// The `post` program of a compiled ingress pipeline (`None`: the script
/// has no `post`): the same expanded source with the post chain as the
/// classifier's. Loaded beside the ingress program with its maps kept
/// (one set of maps for every position), it runs per output port.
pub fn post_of(
    c: &crate::Compiled,
    opts: &crate::Options,
) -> Result<Option<crate::Compiled>, crate::CompileError> {
    let src = &c.program.source;
    if !src.contains(&format!("def {POST_CHAIN}()")) || !src.contains(INGRESS_CLS) {
        return Ok(None);
    }
    let post_src = src.replacen(INGRESS_CLS, POST_CLS, 1);
    let mut pc = crate::compile(&c.program.file, &post_src, opts)?;
    // The entries are the ingress program's (its maps are kept).
    pc.program.tables.clear();
    Ok(Some(pc))
}

/// `T.apply(` → `T_apply(` where `T` is a whole name.
fn rename_apply(src: &str, t: &str) -> String {
    let pat = format!("{t}.apply(");
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(i) = rest.find(&pat) {
        out.push_str(&rest[..i]);
        // A whole name: not the tail of a longer name or an attribute.
        let whole = !out
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        if whole {
            out.push_str(t);
            out.push_str("_apply(");
        } else {
            out.push_str(&pat);
        }
        rest = &rest[i + pat.len()..];
    }
    out.push_str(rest);
    out
}

/// The map writes of the tables' declared entries.
pub fn writes(decl: &Declared) -> Vec<crate::table::Write3> {
    decl.tables.iter().flat_map(|t| t.writes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_is_renamed_only_for_whole_names() {
        let s = rename_apply("x = ACL.apply()\ny = MYACL.apply()\n", "ACL");
        assert_eq!(s, "x = ACL_apply()\ny = MYACL.apply()\n");
    }

    #[test]
    fn prefixes_and_macs_parse() {
        assert_eq!(parse_prefix("198.18.1.0/24"), Some((0xc612_0100, 24)));
        assert_eq!(parse_prefix("198.18.1.0/33"), None);
        assert_eq!(parse_mac("02:00:00:00:00:0a"), Some(0x0200_0000_000a));
        assert_eq!(parse_mac("02:00"), None);
    }
}

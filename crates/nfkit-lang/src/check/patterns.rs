//! `NAME = Patterns([...])` and `NAME = Patterns(file="x.txt")`: a set
//! of regular expressions compiled to its DFA (`nfkit-dpi`) when the
//! script is checked; NAME becomes the set's id, the first argument of
//! `match` from `nf.dpi` (`match(SQLI)` or `match(SQLI, limit)`).
//! Keywords: `file=` (a pattern file, relative to the script),
//! `max_states=` (the set's state budget).

use super::{off, Checker, Sym, R};
use crate::ir::NfRef;
use crate::patterns::PatternSet;
use nfkit_dpi::tables::STATES;
use nfkit_dpi::{DpiError, Options};
use rustpython_parser::ast::{self, Constant};

/// The constructor's name.
pub(super) const CTOR: &str = "Patterns";

/// Arguments `nf` takes by default when `given` are written: `match`
/// of `nf.dpi` without its limit (0: the NF's default).
pub(super) fn default_args(nf: &NfRef, given: usize) -> usize {
    (nf.module == "nf.dpi" && nf.name == "match" && given + 1 == nf.arity) as usize
}

const HELP: &str =
    "NAME = Patterns([\"(?i)union\\\\s+select\", ...]) or Patterns(file=\"patterns.txt\")";

fn string(e: &ast::Expr) -> Option<&str> {
    match e {
        ast::Expr::Constant(ast::ExprConstant {
            value: Constant::Str(s),
            ..
        }) => Some(s.as_str()),
        _ => None,
    }
}

impl Checker<'_> {
    /// `name = Patterns(...)` (`at`: the name).
    pub(super) fn patterns_decl(&mut self, name: &str, call: &ast::ExprCall, at: usize) -> R<()> {
        let mut max_states = None;
        let mut file = None;
        for k in &call.keywords {
            match k.arg.as_ref().map(|a| a.as_str()) {
                Some("file") => match string(&k.value) {
                    Some(f) => file = Some((f.to_string(), off(&k.value))),
                    None => return self.err(off(&k.value), "file= takes a string", HELP),
                },
                Some("max_states") => {
                    let v = self.const_expr(&k.value)?;
                    if !(1..STATES as i128).contains(&v) {
                        return self.err(
                            off(&k.value),
                            format!("max_states {v} is out of range"),
                            &format!("1 .. {}", STATES - 1),
                        );
                    }
                    max_states = Some(v as usize);
                }
                _ => {
                    return self.err(
                        off(k),
                        "Patterns takes a list of strings, file= and max_states=",
                        HELP,
                    )
                }
            }
        }
        // (pattern, where its errors point, its line in a file)
        let mut pats: Vec<(String, usize, Option<usize>)> = Vec::new();
        match (call.args.as_slice(), &file) {
            ([ast::Expr::List(l)], None) => {
                for e in &l.elts {
                    match string(e) {
                        Some(s) => pats.push((s.to_string(), off(e), None)),
                        None => return self.err(off(e), "a pattern is a string", HELP),
                    }
                }
            }
            ([], Some((f, at))) => {
                let path = std::path::Path::new(&self.prog.file)
                    .parent()
                    .unwrap_or(std::path::Path::new(""))
                    .join(f);
                let text = match std::fs::read_to_string(&path) {
                    Ok(t) => t,
                    Err(e) => {
                        return self.err(
                            *at,
                            format!("cannot read pattern file {}: {e}", path.display()),
                            "pattern files are found relative to the script",
                        )
                    }
                };
                for (line, p) in nfkit_dpi::patterns::parse(&text) {
                    pats.push((p, *at, Some(line)));
                }
            }
            _ => {
                return self.err(
                    off(call),
                    "Patterns takes one list of strings, or file=",
                    HELP,
                )
            }
        }
        if pats.is_empty() {
            return self.err(off(call), "a pattern set needs at least one pattern", HELP);
        }
        let used: usize = self.prog.patterns.iter().map(|p| p.dfa.states()).sum();
        let room = STATES - 1 - used;
        let opts = Options {
            max_states: max_states.unwrap_or(room).min(room).max(1),
            ..Options::default()
        };
        let texts: Vec<&str> = pats.iter().map(|p| p.0.as_str()).collect();
        let dfa = match nfkit_dpi::compile(&texts, &opts) {
            Ok(d) => d,
            Err(e) => {
                let index = match &e {
                    DpiError::Syntax { index, .. } | DpiError::TooManyStates { index, .. } => {
                        *index
                    }
                    _ => 0,
                };
                let (_, at, line) = &pats[index.min(pats.len() - 1)];
                let src = match (line, &file) {
                    (Some(l), Some((f, _))) => format!("{f} line {l}: "),
                    _ => String::new(),
                };
                let help = if opts.max_states < max_states.unwrap_or(room) || used > 0 {
                    format!(
                        "the sets declared before {name} take {used} of the {} DFA states the dpi NF holds",
                        STATES - 1
                    )
                } else {
                    "see docs/dpi.md (syntax, state budget)".to_string()
                };
                return self.err(*at, format!("{name}: {src}{e}"), &help);
            }
        };
        let id = self.prog.patterns.len();
        if id >= nfkit_dpi::tables::SETS {
            return self.err(
                off(call),
                format!("more than {} Patterns sets", nfkit_dpi::tables::SETS),
                "merge sets: one set holds many patterns",
            );
        }
        let (line, _) = self.line_of(at);
        self.prog.patterns.push(PatternSet {
            name: name.to_string(),
            line,
            dfa,
        });
        self.define(name, Sym::Const(None, id as i128), at)
    }
}

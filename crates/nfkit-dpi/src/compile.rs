//! Patterns to a [`Dfa`]: `regex-automata` parses, determinises and
//! minimises; this module numbers the states reachable from the start
//! of a payload densely and enforces the state budget.
//!
//! Syntax is `regex-syntax`'s with Unicode off and arbitrary bytes
//! allowed: classes, alternation, repetition, anchors (`^` start and `$`
//! end of the payload), `(?i)` (ASCII case folding), byte escapes
//! (`\x00`..`\xff`). Matching is a search anywhere in the payload.

use crate::dfa::{Dfa, COLUMNS, EOI};
use crate::error::DpiError;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::nfa::thompson;
use regex_automata::util::{primitives::StateID, start, syntax};
use regex_automata::{Anchored, MatchKind};
use std::collections::HashMap;

/// How to compile a pattern set.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Most DFA states the set may need (the `dpi` NF's tables hold
    /// [`crate::tables::STATES`] over all sets).
    pub max_states: usize,
    /// Match every pattern ignoring ASCII case (as `(?i)` on each).
    pub case_insensitive: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_states: crate::tables::STATES,
            case_insensitive: false,
        }
    }
}

/// Compiles `patterns` into one DFA that finds the first match of any
/// of them. Errors name the pattern: a syntax error, or the pattern
/// whose addition takes the DFA over `opts.max_states`.
pub fn compile<S: AsRef<str>>(patterns: &[S], opts: &Options) -> Result<Dfa, DpiError> {
    if patterns.is_empty() {
        return Err(DpiError::Empty);
    }
    let pats: Vec<&str> = patterns.iter().map(|p| p.as_ref()).collect();
    for (index, p) in pats.iter().enumerate() {
        regex_automata::util::syntax::parse_with(p, &syntax_config(opts)).map_err(|e| {
            DpiError::Syntax {
                index,
                pattern: p.to_string(),
                why: first_line(&e.to_string()),
            }
        })?;
    }
    match build(&pats, opts) {
        Ok(dfa) => Ok(dfa),
        Err(Blown::Other(why)) => Err(DpiError::Syntax {
            index: 0,
            pattern: pats.join(" | "),
            why,
        }),
        // Find the first pattern whose addition blows the budget.
        Err(Blown::Budget(total)) => {
            for k in 1..=pats.len() {
                if let Err(Blown::Budget(states)) = build(&pats[..k], opts) {
                    return Err(DpiError::TooManyStates {
                        index: k - 1,
                        pattern: pats[k - 1].to_string(),
                        states,
                        budget: opts.max_states,
                    });
                }
            }
            Err(DpiError::TooManyStates {
                index: pats.len() - 1,
                pattern: pats[pats.len() - 1].to_string(),
                states: total,
                budget: opts.max_states,
            })
        }
    }
}

enum Blown {
    /// States needed (at least this many).
    Budget(usize),
    Other(String),
}

fn syntax_config(opts: &Options) -> syntax::Config {
    syntax::Config::new()
        .unicode(false)
        .utf8(false)
        .case_insensitive(opts.case_insensitive)
}

fn first_line(s: &str) -> String {
    // regex-syntax errors draw the pattern with a caret over lines.
    s.lines()
        .rev()
        .find(|l| l.starts_with("error:"))
        .map(|l| l.trim_start_matches("error:").trim().to_string())
        .unwrap_or_else(|| s.lines().next().unwrap_or_default().to_string())
}

fn build(pats: &[&str], opts: &Options) -> Result<Dfa, Blown> {
    // Bytes regex-automata may use while determinising (generous: the
    // unminimised DFA is larger than the result).
    let limit = opts.max_states.saturating_mul(COLUMNS * 4 * 8).max(1 << 20);
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Unanchored)
                .minimize(true)
                .dfa_size_limit(Some(limit))
                .determinize_size_limit(Some(limit)),
        )
        .syntax(syntax_config(opts))
        .thompson(thompson::Config::new().utf8(false))
        .build_many(pats)
        .map_err(|e| {
            if e.to_string().contains("exceeded") {
                Blown::Budget(opts.max_states + 1)
            } else {
                Blown::Other(e.to_string())
            }
        })?;
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::No))
        .map_err(|e| Blown::Other(e.to_string()))?;
    let mut out = number(&dfa, start, opts.max_states)?;
    out.patterns = pats.iter().map(|p| p.to_string()).collect();
    Ok(out)
}

/// Numbers the states reachable from `start` in breadth-first order and
/// fills the table.
fn number(dfa: &dense::DFA<Vec<u32>>, start: StateID, budget: usize) -> Result<Dfa, Blown> {
    let mut ids: HashMap<StateID, u16> = HashMap::new();
    let mut order = vec![start];
    ids.insert(start, 0);
    let mut next = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let s = order[i];
        for col in 0..COLUMNS {
            let t = if col == EOI {
                dfa.next_eoi_state(s)
            } else {
                dfa.next_state(s, col as u8)
            };
            let n = match ids.get(&t) {
                Some(&n) => n,
                None => {
                    if order.len() >= budget || order.len() >= u16::MAX as usize {
                        return Err(Blown::Budget(order.len() + 1));
                    }
                    let n = order.len() as u16;
                    ids.insert(t, n);
                    order.push(t);
                    n
                }
            };
            next.push(n);
        }
        i += 1;
    }
    let accept = order
        .iter()
        .map(|&s| {
            if !dfa.is_match_state(s) {
                return 0;
            }
            let lowest = (0..dfa.match_len(s))
                .map(|k| dfa.match_pattern(s, k).as_usize())
                .min()
                .unwrap_or(0);
            lowest as u16 + 1
        })
        .collect();
    let dead = order
        .iter()
        .position(|&s| dfa.is_dead_state(s))
        .map_or(u16::MAX, |d| d as u16);
    Ok(Dfa {
        next,
        accept,
        start: 0,
        dead,
        patterns: Vec::new(),
    })
}

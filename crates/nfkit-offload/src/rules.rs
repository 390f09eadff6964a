//! Paths to flower rules.
//!
//! Every path becomes one rule, in the executor's order (priority 1
//! first): a decided DROP / TX / REDIRECT whose pattern the field model
//! expresses exactly (bits and length) keeps its action; every other
//! path (software, PASS, not expressible) becomes a `pass` rule widened
//! to what flower can match, which hands its packets, and possibly more,
//! to the eBPF program: always safe. `pass` rules that no later
//! offloaded rule overlaps are then left out (they change nothing), a
//! rule budget demotes the least specific offloaded rules to software,
//! and adjacent rules with one action whose patterns differ in one bit
//! are merged.

use crate::fields::{self, FlowerMatch};
use crate::pattern::Pattern;
use crate::symbolic::{Analysis, Outcome, XdpAction};
use std::fmt;

/// What a rule does with the packets it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleAction {
    Drop,
    /// Back out of the receiving device (XDP_TX).
    Tx,
    /// Out of the device with this ifindex.
    Redirect(u32),
    /// On to the host, where the eBPF program decides.
    Pass,
}

impl fmt::Display for RuleAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleAction::Drop => write!(f, "drop"),
            RuleAction::Tx => write!(f, "tx"),
            RuleAction::Redirect(i) => write!(f, "redirect({i})"),
            RuleAction::Pass => write!(f, "pass"),
        }
    }
}

/// One flower rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// tc priority: lower matches first (1, 2, ...).
    pub prio: u32,
    pub pattern: Pattern,
    pub action: RuleAction,
    /// The paths (indices into [`Analysis::paths`]) it stands for.
    pub paths: Vec<usize>,
}

/// Options of [`generate`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RulesOptions {
    /// At most this many rules; the least specific offloaded paths go
    /// to software beyond it.
    pub max_rules: Option<usize>,
}

/// Why a path is not offloaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// The program must decide (state, helpers, budgets, ...).
    Software(String),
    /// A decided verdict flower cannot express exactly.
    Inexpressible(String),
    /// Left out by the rule budget.
    OverBudget,
}

/// The rules and what happened to each path.
#[derive(Clone, Debug)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub paths: usize,
    /// Paths whose DROP / TX / REDIRECT the rules carry.
    pub offloaded: usize,
    /// Paths that PASS (flower passes them too; the program agrees).
    pub passed: usize,
    /// Paths left to the program, with why.
    pub fallbacks: Vec<(usize, Fallback)>,
    /// Rule count before and after merging.
    pub before_merge: usize,
    pub after_merge: usize,
}

struct Cand {
    pattern: Pattern,
    action: RuleAction,
    paths: Vec<usize>,
}

/// Generates the rules for `a`.
pub fn generate(a: &Analysis, opts: &RulesOptions) -> RuleSet {
    let mut fallbacks = Vec::new();
    let mut passed = 0;
    let mut cands: Vec<Cand> = Vec::with_capacity(a.paths.len());
    for (i, p) in a.paths.iter().enumerate() {
        let pass = |pat: &Pattern| Cand {
            pattern: fields::widen(pat),
            action: RuleAction::Pass,
            paths: vec![i],
        };
        let act = match &p.outcome {
            Outcome::Software(why) => {
                fallbacks.push((i, Fallback::Software(why.clone())));
                cands.push(pass(&p.pattern));
                continue;
            }
            Outcome::Action(XdpAction::Pass) => {
                passed += 1;
                cands.push(pass(&p.pattern));
                continue;
            }
            Outcome::Action(XdpAction::Drop) => RuleAction::Drop,
            Outcome::Action(XdpAction::Tx) => RuleAction::Tx,
            Outcome::Action(XdpAction::Redirect(d)) => RuleAction::Redirect(*d),
        };
        match exact(&p.pattern) {
            Ok(pattern) => cands.push(Cand {
                pattern,
                action: act,
                paths: vec![i],
            }),
            Err(why) => {
                fallbacks.push((i, Fallback::Inexpressible(why)));
                cands.push(pass(&p.pattern));
            }
        }
    }
    prune(&mut cands);
    if let Some(max) = opts.max_rules {
        while cands.len() > max {
            let victim = cands
                .iter()
                .enumerate()
                .filter(|(_, c)| c.action != RuleAction::Pass)
                .min_by_key(|(i, c)| (c.pattern.specificity(), std::cmp::Reverse(*i)))
                .map(|(i, _)| i);
            let Some(v) = victim else { break };
            cands[v].action = RuleAction::Pass;
            for &p in &cands[v].paths {
                fallbacks.push((p, Fallback::OverBudget));
            }
            prune(&mut cands);
        }
    }
    let before_merge = cands.len();
    merge(&mut cands);
    let offloaded = cands
        .iter()
        .filter(|c| c.action != RuleAction::Pass)
        .map(|c| c.paths.len())
        .sum();
    fallbacks.sort_by_key(|f| f.0);
    let rules: Vec<Rule> = cands
        .into_iter()
        .enumerate()
        .map(|(i, c)| Rule {
            prio: i as u32 + 1,
            pattern: c.pattern,
            action: c.action,
            paths: c.paths,
        })
        .collect();
    RuleSet {
        after_merge: rules.len(),
        rules,
        paths: a.paths.len(),
        offloaded,
        passed,
        fallbacks,
        before_merge,
    }
}

/// The rule pattern of a path when flower matches exactly its packets.
fn exact(p: &Pattern) -> Result<Pattern, String> {
    fields::express(p)?;
    let mut p = p.clone();
    p.min_len = p.min_len.max(14);
    let hl = fields::header_len(&p);
    if hl != p.min_len.max(14) {
        return Err(format!(
            "the path needs {} bytes, the fields it tests imply {hl}",
            p.min_len
        ));
    }
    Ok(p)
}

/// Whether every frame `b` matches also matches `a`.
fn covers(a: &Pattern, b: &Pattern) -> bool {
    a.min_len <= b.min_len
        && a.mask.iter().enumerate().all(|(i, &m)| {
            let bm = b.mask.get(i).copied().unwrap_or(0);
            let bv = b.value.get(i).copied().unwrap_or(0);
            m & bm == m && (a.value[i] ^ bv) & m == 0
        })
}

/// Leaves out rules an earlier rule covers (they never match) and
/// `pass` rules no later offloaded rule overlaps.
fn prune(c: &mut Vec<Cand>) {
    let mut i = 1;
    while i < c.len() {
        if (0..i).any(|j| covers(&c[j].pattern, &c[i].pattern)) {
            c.remove(i);
        } else {
            i += 1;
        }
    }
    let mut keep = vec![true; c.len()];
    let mut later: Vec<&Pattern> = Vec::new();
    for i in (0..c.len()).rev() {
        if c[i].action == RuleAction::Pass {
            keep[i] = later.iter().any(|p| p.overlaps(&c[i].pattern));
        } else {
            later.push(&c[i].pattern);
        }
    }
    let mut k = keep.into_iter();
    c.retain(|_| k.next().unwrap_or(true));
}

/// Merges adjacent rules with one action: a pattern equal to the one
/// before (shadowed), or the other half of it.
fn merge(c: &mut Vec<Cand>) {
    let mut changed = true;
    while changed {
        changed = false;
        let mut i = 0;
        while i + 1 < c.len() {
            if c[i].action == c[i + 1].action {
                let m = if c[i].pattern == c[i + 1].pattern {
                    Some(c[i].pattern.clone())
                } else {
                    c[i].pattern.merge(&c[i + 1].pattern).filter(|m| {
                        fields::express(m).is_ok() && fields::header_len(m) == m.min_len
                    })
                };
                if let Some(m) = m {
                    let next = c.remove(i + 1);
                    c[i].pattern = m;
                    c[i].paths.extend(next.paths);
                    changed = true;
                    continue;
                }
            }
            i += 1;
        }
    }
}

impl RuleSet {
    /// The first rule that matches `frame`.
    pub fn first_match(&self, frame: &[u8]) -> Option<&Rule> {
        self.rules.iter().find(|r| r.pattern.matches(frame))
    }

    /// Rules that drop, transmit or redirect.
    pub fn offloading_rules(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| r.action != RuleAction::Pass)
            .count()
    }

    /// `tc filter add ... flower ...` lines for ingress of `dev`, with
    /// `skip` (`skip_sw`, `skip_hw` or empty); `ifname` names the
    /// device of a redirect's ifindex.
    pub fn to_tc_lines(
        &self,
        dev: &str,
        skip: &str,
        ifname: &dyn Fn(u32) -> String,
    ) -> Vec<String> {
        self.rules
            .iter()
            .map(|r| {
                let FlowerMatch { protocol, keys } =
                    fields::express(&r.pattern).unwrap_or_else(|_| FlowerMatch {
                        protocol: "all".into(),
                        keys: Vec::new(),
                    });
                let action = match r.action {
                    RuleAction::Drop => "drop".to_string(),
                    RuleAction::Pass => "pass".to_string(),
                    RuleAction::Tx => format!("mirred egress redirect dev {dev}"),
                    RuleAction::Redirect(i) => format!("mirred egress redirect dev {}", ifname(i)),
                };
                let mut line = format!(
                    "tc filter add dev {dev} ingress prio {} protocol {protocol} flower",
                    r.prio
                );
                for k in std::iter::once(skip)
                    .filter(|s| !s.is_empty())
                    .chain(keys.iter().map(String::as_str))
                {
                    line.push(' ');
                    line.push_str(k);
                }
                line.push_str(" action ");
                line.push_str(&action);
                line
            })
            .collect()
    }
}

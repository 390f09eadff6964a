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
use crate::rewrite::Rewrite;
use crate::symbolic::{Analysis, Count, Outcome, XdpAction};
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
    /// Port ranges from merging, matched besides the pattern.
    pub ranges: Vec<PortRange>,
    /// Counter additions of its paths: the program's statistics count
    /// these times the rule's packets (empty for `pass`: the program
    /// counts those itself).
    pub counts: Vec<Count>,
    /// A `u32` filter rather than a flower rule: its pattern is matched
    /// on the frame's bytes where they are. The guards of
    /// [`crate::guard`] (no paths, `pass`) and the rules flower cannot
    /// match exactly ([`crate::u32match`]).
    pub u32_filter: bool,
    /// The header rewrite (pedit, csum) before a TX or redirect.
    pub rewrite: Option<Rewrite>,
}

/// A big-endian 16-bit field at `at` (34: source port, 36: destination
/// port) within `lo..=hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub at: usize,
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    fn matches(&self, frame: &[u8]) -> bool {
        frame
            .get(self.at..self.at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .is_some_and(|v| (self.lo..=self.hi).contains(&v))
    }

    fn key(&self) -> String {
        let name = if self.at == 34 {
            "src_port"
        } else {
            "dst_port"
        };
        if self.lo == self.hi {
            format!("{name} {}", self.lo)
        } else {
            format!("{name} {}-{}", self.lo, self.hi)
        }
    }
}

impl Rule {
    /// Whether the rule is a guard ([`crate::guard`]): a `u32` one, or
    /// the flower guard for TCP headers cut short.
    pub fn is_guard(&self) -> bool {
        (self.u32_filter && self.paths.is_empty()) || crate::guard::is_tcp_cut_guard(self)
    }

    /// Whether `frame` matches the rule, as flower matches it: a header
    /// the frame lacks reads as zeros ([`fields::absent_view`]).
    pub fn matches(&self, frame: &[u8]) -> bool {
        if self.u32_filter {
            let csum_tcp = self.rewrite.as_ref().is_some_and(|rw| rw.csum_tcp);
            return self.pattern.matches(frame)
                && (!csum_tcp || crate::u32match::holds_total_length(frame));
        }
        // Flower finds the L4 header after any IPv4 options and has no
        // key for the IP version nor the IHL.
        let frame = &fields::flower_frame(frame)[..];
        let v4 = self.pattern.value.get(12..14) == Some(&[8, 0])
            && self.pattern.mask.get(12..14) == Some(&[0xff; 2]);
        let v6 = self.pattern.value.get(12..14) == Some(&[0x86, 0xdd])
            && self.pattern.mask.get(12..14) == Some(&[0xff; 2]);
        let mut p = self.pattern.clone();
        if v4 || v6 {
            for b in if v4 { 0 } else { 4 }..8 {
                p.clear_bit(14 * 8 + b);
            }
            p.min_len = self.pattern.min_len;
        }
        if let Some(view) = fields::absent_view(&self.pattern, frame) {
            p.min_len = 0;
            return p.matches(&view) && self.ranges.iter().all(|r| r.matches(&view));
        }
        p.matches(frame) && self.ranges.iter().all(|r| r.matches(frame))
    }
}

/// Options of [`generate`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RulesOptions {
    /// At most this many rules; the least specific offloaded paths go
    /// to software beyond it. The guards ([`crate::guard`]) come on top.
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
    ranges: Vec<PortRange>,
    counts: Vec<Count>,
    rewrite: Option<Rewrite>,
}

impl Cand {
    /// Same action, counter additions and rewrite: interchangeable.
    fn same(&self, o: &Cand) -> bool {
        self.action == o.action && self.counts == o.counts && self.rewrite == o.rewrite
    }
}

/// Generates the rules for `a`.
pub fn generate(a: &Analysis, opts: &RulesOptions) -> RuleSet {
    let mut fallbacks = Vec::new();
    let mut passed = 0;
    let mut cands: Vec<Cand> = Vec::with_capacity(a.paths.len());
    // EtherTypes of paths left to the u32 guards (IP version/IHL other
    // than the field model's).
    let mut guarded_et: Vec<[u8; 2]> = Vec::new();
    for (i, p) in a.paths.iter().enumerate() {
        if let Some(et) = crate::guard::taken_by_guards(&p.pattern) {
            // Its frames meet a guard first (forced below when a rule
            // could decide them), which hands them to the program.
            match &p.outcome {
                Outcome::Software(why) => fallbacks.push((i, Fallback::Software(why.clone()))),
                Outcome::Action(XdpAction::Pass) => passed += 1,
                Outcome::Action(_) => fallbacks.push((
                    i,
                    Fallback::Inexpressible(
                        "IP version or header length other than the field model's (a u32 guard passes its frames to the program)".into(),
                    ),
                )),
            }
            if !guarded_et.contains(&et) {
                guarded_et.push(et);
            }
            continue;
        }
        let pass = |pat: &Pattern| Cand {
            pattern: fields::widen(pat),
            action: RuleAction::Pass,
            paths: vec![i],
            ranges: Vec::new(),
            counts: Vec::new(),
            rewrite: None,
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
        let exact_nofrag = |pat: &Pattern| {
            let mut pat = exact(pat)?;
            // act_csum leaves a later fragment's checksum alone and
            // redoes a first fragment's over that fragment only: the
            // fragment bits (0x3fff of bytes 20..22) must be 0.
            if p.rewrite.as_ref().is_some_and(|rw| rw.csum_tcp)
                && !(pat.set_byte(20, 0, 0x3f) & pat.set_byte(21, 0, 0xff))
            {
                return Err(
                    "a TCP checksum fix-up on a fragment, which act_csum would not redo the same way"
                        .to_string(),
                );
            }
            Ok(pat)
        };
        match exact_nofrag(&p.pattern) {
            Ok(pattern) => cands.push(Cand {
                pattern,
                action: act,
                paths: vec![i],
                ranges: Vec::new(),
                counts: p.counts.clone(),
                rewrite: p.rewrite.clone(),
            }),
            Err(why) => {
                fallbacks.push((i, Fallback::Inexpressible(why)));
                cands.push(pass(&p.pattern));
            }
        }
    }
    prune(&mut cands);
    let before_merge = cands.len();
    merge(&mut cands);
    // A UDP port rule becomes one u32 filter per prefix of its ranges.
    let size = |c: &Cand| {
        if crate::u32match::needs_u32(&c.pattern, &c.ranges, c.action, c.rewrite.as_ref()) {
            crate::u32match::expanded_len(&c.ranges)
        } else {
            1
        }
    };
    if let Some(max) = opts.max_rules {
        while cands.iter().map(size).sum::<usize>() > max {
            // A rule that no later offloaded rule overlaps frees its slot
            // when demoted (its `pass` is pruned); among those, and then
            // among the rest, the least specific goes first.
            let frees = |i: usize| {
                !cands[i + 1..]
                    .iter()
                    .any(|l| l.action != RuleAction::Pass && l.pattern.overlaps(&cands[i].pattern))
            };
            let victim = cands
                .iter()
                .enumerate()
                .filter(|(_, c)| c.action != RuleAction::Pass)
                .min_by_key(|(i, c)| (!frees(*i), specificity(c), std::cmp::Reverse(*i)))
                .map(|(i, _)| i);
            let Some(v) = victim else { break };
            cands[v].action = RuleAction::Pass;
            cands[v].rewrite = None;
            for &p in &cands[v].paths {
                fallbacks.push((p, Fallback::OverBudget));
            }
            prune(&mut cands);
            merge(&mut cands);
        }
    }
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
            ranges: c.ranges,
            rewrite: if c.action == RuleAction::Pass {
                None
            } else {
                c.rewrite
            },
            counts: if c.action == RuleAction::Pass {
                Vec::new()
            } else {
                c.counts
            },
            u32_filter: false,
        })
        .collect();
    let rules: Vec<Rule> = rules
        .into_iter()
        .flat_map(|r| {
            if crate::u32match::needs_u32(&r.pattern, &r.ranges, r.action, r.rewrite.as_ref()) {
                crate::u32match::expand(&r)
            } else {
                vec![r]
            }
        })
        .collect();
    let after_merge = rules.len();
    // A guard is needed for a skipped path's frames only if some rule
    // could decide them: one on that EtherType or on none.
    let force = |et: [u8; 2]| {
        guarded_et.contains(&et)
            && rules.iter().any(|r| {
                r.action != RuleAction::Pass
                    && (r
                        .pattern
                        .mask
                        .get(12..14)
                        .is_none_or(|m| m.iter().all(|&x| x == 0))
                        || r.pattern.value.get(12..14) == Some(&et[..]))
            })
    };
    let (v4, v6) = (force([8, 0]), force([0x86, 0xdd]));
    let rules = crate::guard::guarded_forced(rules, v4, v6);
    RuleSet {
        after_merge,
        rules,
        paths: a.paths.len(),
        offloaded,
        passed,
        fallbacks,
        before_merge,
    }
}

/// Required bits, a port range counting as the bits of its width.
fn specificity(c: &Cand) -> u32 {
    c.pattern.specificity()
        + c.ranges
            .iter()
            .map(|r| {
                16 - (u32::from(r.hi - r.lo) + 1)
                    .next_power_of_two()
                    .trailing_zeros()
            })
            .sum::<u32>()
}

/// The rule pattern of a path when flower matches exactly its packets.
pub(crate) fn exact(p: &Pattern) -> Result<Pattern, String> {
    fields::express(p)?;
    if let Some(why) = fields::matches_absent_header(p) {
        return Err(why.to_string());
    }
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
pub(crate) fn covers(a: &Pattern, b: &Pattern) -> bool {
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
/// before (shadowed), the other half of it, or the next port interval.
fn merge(c: &mut Vec<Cand>) {
    let mut changed = true;
    while changed {
        changed = false;
        // Within a run of rules with one action the order does not
        // matter (the first of them to match gives the same action):
        // sorted, halves of one pattern become neighbours.
        let mut start = 0;
        while start < c.len() {
            let mut end = start + 1;
            while end < c.len() && c[end].same(&c[start]) {
                end += 1;
            }
            c[start..end].sort_by(|a, b| {
                (&a.pattern.mask, &a.pattern.value, a.pattern.min_len).cmp(&(
                    &b.pattern.mask,
                    &b.pattern.value,
                    b.pattern.min_len,
                ))
            });
            start = end;
        }
        let mut i = 0;
        while i + 1 < c.len() {
            if c[i].same(&c[i + 1]) {
                if let Some((p, r)) = merge_ports(&c[i], &c[i + 1]) {
                    let next = c.remove(i + 1);
                    c[i].pattern = p;
                    c[i].ranges = r;
                    c[i].paths.extend(next.paths);
                    changed = true;
                    continue;
                }
                let m = if c[i].ranges != c[i + 1].ranges {
                    None
                } else if c[i].pattern == c[i + 1].pattern {
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

/// The interval of ports at `at` a candidate requires: its range, or
/// its bits there when they are a prefix.
fn port_interval(c: &Cand, at: usize) -> Option<(u16, u16)> {
    if let Some(r) = c.ranges.iter().find(|r| r.at == at) {
        return Some((r.lo, r.hi));
    }
    let get = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    let m = u16::from_be_bytes([get(&c.pattern.mask, at), get(&c.pattern.mask, at + 1)]);
    let v = u16::from_be_bytes([get(&c.pattern.value, at), get(&c.pattern.value, at + 1)]);
    (m != 0 && m.leading_ones() + m.trailing_zeros() == 16).then_some((v & m, (v & m) | !m))
}

fn without_port(c: &Cand, at: usize) -> (Pattern, Vec<PortRange>) {
    let mut p = c.pattern.clone();
    for pos in (at as u32 * 8)..((at as u32 + 2) * 8) {
        p.clear_bit(pos);
    }
    let r = c.ranges.iter().filter(|r| r.at != at).copied().collect();
    (p, r)
}

/// Two adjacent rules that differ only in contiguous port intervals of
/// one field: the pattern without that field and the ranges with the
/// union.
fn merge_ports(a: &Cand, b: &Cand) -> Option<(Pattern, Vec<PortRange>)> {
    if !a.same(b) || fields::express(&a.pattern).is_err() {
        return None;
    }
    // Bytes 34..38 are the ports only in IPv4 with IHL 5 (in IPv6 they
    // are address bits).
    if fields::l4_proto(&a.pattern).map(|x| x.0) != Some(34)
        || fields::l4_proto(&b.pattern).map(|x| x.0) != Some(34)
    {
        return None;
    }
    for at in [34, 36] {
        let (Some((al, ah)), Some((bl, bh))) = (port_interval(a, at), port_interval(b, at)) else {
            continue;
        };
        let (pa, ra) = without_port(a, at);
        let (pb, rb) = without_port(b, at);
        if pa != pb || ra != rb {
            continue;
        }
        let joined = if ah.checked_add(1) == Some(bl) {
            (al, bh)
        } else if bh.checked_add(1) == Some(al) {
            (bl, ah)
        } else {
            continue;
        };
        let mut r = ra;
        r.push(PortRange {
            at,
            lo: joined.0,
            hi: joined.1,
        });
        r.sort_by_key(|x| x.at);
        return Some((pa, r));
    }
    None
}

impl RuleSet {
    /// The first rule that matches `frame`.
    pub fn first_match(&self, frame: &[u8]) -> Option<&Rule> {
        self.rules.iter().find(|r| r.matches(frame))
    }

    /// Redirect rules whose target `exists` does not know become `pass`
    /// (the program then redirects, or not, itself): flower cannot send
    /// to a device that is not there. Their paths are reported as
    /// inexpressible; the ifindexes are returned.
    pub fn demote_missing_targets(&mut self, exists: &dyn Fn(u32) -> bool) -> Vec<u32> {
        let mut gone = Vec::new();
        for r in &mut self.rules {
            let RuleAction::Redirect(i) = r.action else {
                continue;
            };
            if exists(i) {
                continue;
            }
            r.action = RuleAction::Pass;
            r.rewrite = None;
            r.counts.clear();
            self.offloaded -= r.paths.len().min(self.offloaded);
            for &p in &r.paths {
                self.fallbacks.push((
                    p,
                    Fallback::Inexpressible(format!(
                        "redirects to ifindex {i}, which no device here has"
                    )),
                ));
            }
            if !gone.contains(&i) {
                gone.push(i);
            }
        }
        self.fallbacks.sort_by_key(|f| f.0);
        gone
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
            .flat_map(|r| {
                let FlowerMatch { protocol, keys } = if r.u32_filter {
                    let protocol = match fields::exact(&r.pattern, 12..14).as_deref() {
                        Some([8, 0]) => "ip".to_string(),
                        Some([0x86, 0xdd]) => "ipv6".to_string(),
                        Some(t) => format!("0x{:02x}{:02x}", t[0], t[1]),
                        None => "all".to_string(),
                    };
                    let text = crate::u32match::keys(&r.pattern)
                        .map(|k| crate::u32match::tc_text(&k))
                        .unwrap_or_else(|| "# no u32 keys #".into());
                    FlowerMatch {
                        protocol,
                        keys: vec![text],
                    }
                } else {
                    fields::express(&r.pattern).unwrap_or_else(|_| FlowerMatch {
                        protocol: "all".into(),
                        keys: Vec::new(),
                    })
                };
                let rewrite = match &r.rewrite {
                    Some(rw) => {
                        let et = fields::exact(&r.pattern, 12..14)
                            .map_or(0, |t| u16::from_be_bytes([t[0], t[1]]));
                        rw.tc_actions(et).unwrap_or_else(|e| format!("# {e} # "))
                    }
                    None => String::new(),
                };
                let action = match r.action {
                    RuleAction::Drop => "drop".to_string(),
                    RuleAction::Pass => "pass".to_string(),
                    RuleAction::Tx => format!("mirred egress redirect dev {dev}"),
                    RuleAction::Redirect(i) => format!("mirred egress redirect dev {}", ifname(i)),
                };
                if r.rewrite.as_ref().is_some_and(|rw| rw.csum_tcp) && r.u32_filter {
                    let head = format!(
                        "tc filter add dev {dev} ingress prio {} protocol {protocol}",
                        r.prio
                    );
                    return crate::u32match::total_length_lines(
                        &head,
                        r.prio,
                        skip,
                        &keys.join(" "),
                        &format!("{rewrite}{action}"),
                    );
                }
                let mut line = format!(
                    "tc filter add dev {dev} ingress prio {} protocol {protocol} {}",
                    r.prio,
                    if r.u32_filter { "u32" } else { "flower" }
                );
                let ranges: Vec<String> = r.ranges.iter().map(PortRange::key).collect();
                for k in std::iter::once(skip)
                    .filter(|s| !s.is_empty())
                    .chain(keys.iter().map(String::as_str))
                    .chain(ranges.iter().map(String::as_str))
                {
                    line.push(' ');
                    line.push_str(k);
                }
                line.push_str(" action ");
                line.push_str(&rewrite);
                line.push_str(&action);
                vec![line]
            })
            .collect()
    }
}

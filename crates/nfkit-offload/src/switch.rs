//! Replacing installed rules without a window: the new rules go in at
//! fresh priorities (a band before or after the old one), in first-match
//! order, and only then do the old rules go, last first. At every step
//! a frame meets either its old decision or its new one, never a third
//! (see [`plan`] for why), which [`replay`] lets the model check.

use crate::rules::{Rule, RuleAction};

/// The highest tc filter priority (16 bits in `tcm_info`).
pub const MAX_PRIO: u32 = 0xffff;

/// Why no switch can be planned.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SwitchError {
    #[error("{new} new rules fit neither before priority {lo} nor after {hi} (priorities end at {MAX_PRIO})")]
    NoRoom { new: usize, lo: u32, hi: u32 },
}

/// One netlink operation of a switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Add new rule `rule` (its index in the new set) at `prio`.
    Add { rule: usize, prio: u32 },
    /// Delete the old rule at `prio`.
    Delete { prio: u32 },
}

/// The new rules' priorities and the operations, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchPlan {
    /// Priority of each new rule, ascending (first-match order kept).
    pub prios: Vec<u32>,
    pub steps: Vec<Step>,
}

/// Plans the switch from rules installed at `old` (ascending
/// priorities) to `new` rules.
///
/// The new band goes before the old one when it fits below its lowest
/// priority, else right after its highest, so bands alternate. The new
/// rules are added first to last, then the old ones deleted last to
/// first. With the new band in front, a frame first meets a prefix of
/// the new rules: it matches its own first new rule there or none, and
/// then the whole old set decides it as before. With the old band in
/// front, it meets the whole old set, then a prefix of the new rules:
/// it matches its first old rule (old decision) or reaches its first new
/// rule or none (none of the old rules matching, "no rule" is its old
/// decision too). Deleting the old rules last to first leaves a prefix
/// of them in front of (or behind) the whole new set: a frame matches
/// its first old rule there (old decision) or no old rule, and the new
/// set decides it (new decision; behind the new set, an old rule is
/// only reached by frames no new rule matches, whose new decision is
/// "no rule", and the first old rule they meet is their own).
pub fn plan(old: &[u32], new: usize) -> Result<SwitchPlan, SwitchError> {
    let n = new as u32;
    let (lo, hi) = (
        old.iter().copied().min().unwrap_or(u32::MAX),
        old.iter().copied().max().unwrap_or(0),
    );
    let first = if old.is_empty() || (new as u64) < lo as u64 {
        1
    } else if hi as u64 + new as u64 <= MAX_PRIO as u64 {
        hi + 1
    } else {
        return Err(SwitchError::NoRoom { new, lo, hi });
    };
    let prios: Vec<u32> = (first..first + n).collect();
    let mut old_desc = old.to_vec();
    old_desc.sort_unstable_by(|a, b| b.cmp(a));
    let steps = prios
        .iter()
        .enumerate()
        .map(|(rule, &prio)| Step::Add { rule, prio })
        .chain(old_desc.into_iter().map(|prio| Step::Delete { prio }))
        .collect();
    Ok(SwitchPlan { prios, steps })
}

/// The rules installed after each step of `plan`, in first-match
/// order (first the state before any step), for the model: `old` as
/// installed, `new` before renumbering.
pub fn replay(old: &[Rule], new: &[Rule], plan: &SwitchPlan) -> Vec<Vec<Rule>> {
    let mut now: Vec<Rule> = old.to_vec();
    let mut states = vec![now.clone()];
    for s in &plan.steps {
        match *s {
            Step::Add { rule, prio } => {
                if let Some(r) = new.get(rule) {
                    let mut r = r.clone();
                    r.prio = prio;
                    now.push(r);
                }
            }
            Step::Delete { prio } => now.retain(|r| r.prio != prio),
        }
        now.sort_by_key(|r| r.prio);
        states.push(now.clone());
    }
    states
}

/// What the first matching rule of `rules` (in order) does with
/// `frame`: `None` when it reaches the program (no rule, or `pass`).
pub fn outcome(rules: &[Rule], frame: &[u8]) -> Option<RuleAction> {
    rules
        .iter()
        .find(|r| r.matches(frame))
        .map(|r| r.action)
        .filter(|a| *a != RuleAction::Pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_alternate_and_steps_add_then_delete_backwards() {
        let p = plan(&[], 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.prios, vec![1, 2, 3]);
        let p = plan(&[1, 2, 3], 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.prios, vec![4, 5]);
        assert_eq!(
            p.steps,
            vec![
                Step::Add { rule: 0, prio: 4 },
                Step::Add { rule: 1, prio: 5 },
                Step::Delete { prio: 3 },
                Step::Delete { prio: 2 },
                Step::Delete { prio: 1 },
            ]
        );
        let p = plan(&[4, 5], 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.prios, vec![1, 2, 3]);
        let p = plan(&[4, 5], 4).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.prios, vec![6, 7, 8, 9]);
        assert_eq!(
            plan(&[10, MAX_PRIO - 1], 20),
            Err(SwitchError::NoRoom {
                new: 20,
                lo: 10,
                hi: MAX_PRIO - 1
            })
        );
    }
}

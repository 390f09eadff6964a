//! The flower-matching model and the equivalence check: for a frame,
//! "the rules first, then the program for what they pass on" must
//! decide like "the program alone".

use crate::rules::{RuleAction, RuleSet};
use nfkit_vm::{Context, Redirect, RunOptions, RunResult, Vm, XdpMd};
use std::fmt;

/// What happens to a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Drop,
    Pass,
    Tx,
    Redirect(u32),
    /// Any other return code, or a fault (with its text).
    Other(String),
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Drop => write!(f, "DROP"),
            Decision::Pass => write!(f, "PASS"),
            Decision::Tx => write!(f, "TX"),
            Decision::Redirect(i) => write!(f, "REDIRECT({i})"),
            Decision::Other(s) => write!(f, "{s}"),
        }
    }
}

/// The decision of an XDP run of the VM.
pub fn decision_of(res: &RunResult) -> Decision {
    match &res.result {
        Err(e) => Decision::Other(format!("fault: {e}")),
        Ok(code) => match *code as u32 {
            1 => Decision::Drop,
            2 => Decision::Pass,
            3 => Decision::Tx,
            4 => match &res.redirect {
                Some(Redirect::Ifindex { ifindex, .. }) => Decision::Redirect(*ifindex),
                other => Decision::Other(format!("redirect {other:?}")),
            },
            c => Decision::Other(format!("return {c}")),
        },
    }
}

/// Runs XDP entry `entry` of `vm` on `frame`.
pub fn run_xdp(vm: &Vm, entry: &str, frame: &[u8]) -> Decision {
    decision_of(&vm.run(
        entry,
        Context::Xdp(XdpMd::new(frame)),
        &RunOptions::default(),
    ))
}

/// A frame on which the two sides disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    pub frame: Vec<u8>,
    /// Priority of the rule that decided, if one did.
    pub rule: Option<u32>,
    pub with_rules: Decision,
    pub alone: Decision,
}

/// Counts of an equivalence run.
#[derive(Clone, Debug, Default)]
pub struct Equivalence {
    pub frames: usize,
    /// Frames a rule decided without the program.
    pub by_rules: usize,
    pub disagreements: Vec<Disagreement>,
}

impl Equivalence {
    /// Checks one frame: `alone` runs the program that sees every frame,
    /// `software` the one that sees only what the rules pass on.
    pub fn check(
        &mut self,
        rules: &RuleSet,
        frame: &[u8],
        alone: &mut dyn FnMut(&[u8]) -> Decision,
        software: &mut dyn FnMut(&[u8]) -> Decision,
    ) {
        self.frames += 1;
        let want = alone(frame);
        let rule = rules.first_match(frame);
        let got = match rule.map(|r| r.action) {
            Some(RuleAction::Drop) => Decision::Drop,
            Some(RuleAction::Tx) => Decision::Tx,
            Some(RuleAction::Redirect(i)) => Decision::Redirect(i),
            Some(RuleAction::Pass) | None => software(frame),
        };
        if rule.is_some_and(|r| r.action != RuleAction::Pass) {
            self.by_rules += 1;
        }
        if got != want {
            self.disagreements.push(Disagreement {
                frame: frame.to_vec(),
                rule: rule.map(|r| r.prio),
                with_rules: got,
                alone: want,
            });
        }
    }
}

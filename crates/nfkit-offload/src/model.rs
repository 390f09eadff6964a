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
                Some(Redirect::Ifindex { ifindex, .. })
                | Some(Redirect::Map {
                    ifindex: Some(ifindex),
                    ..
                }) => Decision::Redirect(*ifindex),
                other => Decision::Other(format!("redirect {other:?}")),
            },
            c => Decision::Other(format!("return {c}")),
        },
    }
}

/// Runs XDP entry `entry` of `vm` on `frame`: the decision and the
/// packet as the program left it.
pub fn run_xdp_bytes(vm: &Vm, entry: &str, frame: &[u8]) -> (Decision, Vec<u8>) {
    let r = vm.run(
        entry,
        Context::Xdp(XdpMd::new(frame)),
        &RunOptions::default(),
    );
    (decision_of(&r), r.packet)
}

/// Runs XDP entry `entry` of `vm` on `frame`.
pub fn run_xdp(vm: &Vm, entry: &str, frame: &[u8]) -> Decision {
    decision_of(&vm.run(
        entry,
        Context::Xdp(XdpMd::new(frame)),
        &RunOptions::default(),
    ))
}

/// A run giving the decision and the packet afterwards.
pub type RunBytes<'a> = dyn FnMut(&[u8]) -> (Decision, Vec<u8>) + 'a;

/// A frame on which the two sides disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    pub frame: Vec<u8>,
    /// Priority of the rule that decided, if one did.
    pub rule: Option<u32>,
    pub with_rules: Decision,
    pub alone: Decision,
    /// With [`Equivalence::check_bytes`], when the decisions agree but
    /// the frames sent out differ: (with the rules, alone).
    pub bytes: Option<(Vec<u8>, Vec<u8>)>,
}

/// Counts of an equivalence run.
#[derive(Clone, Debug, Default)]
pub struct Equivalence {
    pub frames: usize,
    /// Frames a rule decided without the program.
    pub by_rules: usize,
    pub disagreements: Vec<Disagreement>,
    /// With [`Equivalence::check_bytes`]: frames a rule rewrote.
    pub rewritten: usize,
    /// Of those, frames whose IPv4 header checksum was wrong on arrival
    /// and whose rule's `csum ip4h` stands for an incremental update
    /// ([`Rewrite::assumes_valid_csum`](crate::Rewrite)), or whose TCP
    /// checksum was wrong and whose rule has `csum tcp` (always an
    /// incremental update): outside the assumption, so those checksum
    /// bytes are not compared (every other byte is).
    pub bad_csum: usize,
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
                bytes: None,
            });
        }
    }

    /// [`check`](Equivalence::check), and for frames sent on (TX,
    /// redirect) the bytes too: a rule's rewrite applied as pedit and
    /// csum do must give the frame the program sends. The runs give the
    /// decision and the packet afterwards.
    pub fn check_bytes(
        &mut self,
        rules: &RuleSet,
        frame: &[u8],
        alone: &mut RunBytes,
        software: &mut RunBytes,
    ) {
        self.frames += 1;
        let (want, want_bytes) = alone(frame);
        let rule = rules.first_match(frame);
        let (mut got, mut got_bytes) = match rule.map(|r| r.action) {
            Some(RuleAction::Drop) => (Decision::Drop, frame.to_vec()),
            Some(RuleAction::Tx) => (Decision::Tx, frame.to_vec()),
            Some(RuleAction::Redirect(i)) => (Decision::Redirect(i), frame.to_vec()),
            Some(RuleAction::Pass) | None => software(frame),
        };
        let mut mask_csum = false;
        let mut mask_tcp = false;
        if let Some(rw) = rule
            .filter(|r| r.action != RuleAction::Pass)
            .and_then(|r| r.rewrite.as_ref())
        {
            self.rewritten += 1;
            if !rw.apply(&mut got_bytes) {
                // act_csum dropped it.
                got = Decision::Drop;
            }
            if rw.csum_ip4h && rw.assumes_valid_csum && !crate::rewrite::ipv4_checksum_ok(frame) {
                self.bad_csum += 1;
                mask_csum = true;
            }
            if rw.csum_tcp && !crate::rewrite::tcp_checksum_ok(frame) {
                self.bad_csum += 1;
                mask_tcp = true;
            }
        }
        if rule.is_some_and(|r| r.action != RuleAction::Pass) {
            self.by_rules += 1;
        }
        let sent = matches!(want, Decision::Tx | Decision::Redirect(_));
        let same_bytes = !sent || {
            let (mut a, mut b) = (got_bytes.clone(), want_bytes.clone());
            for (on, r) in [(mask_csum, 24..26), (mask_tcp, crate::rewrite::CSUM_TCP)] {
                if !on {
                    continue;
                }
                for x in [&mut a, &mut b] {
                    if let Some(c) = x.get_mut(r.clone()) {
                        c.fill(0);
                    }
                }
            }
            a == b
        };
        if got != want || !same_bytes {
            self.disagreements.push(Disagreement {
                frame: frame.to_vec(),
                rule: rule.map(|r| r.prio),
                with_rules: got,
                alone: want,
                bytes: (!same_bytes).then_some((got_bytes, want_bytes)),
            });
        }
    }
}

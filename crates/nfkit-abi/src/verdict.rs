//! Results of NFs and chains (docs/abi.md 1): a `u64` that is a value
//! (bit 63 clear), a verdict (bit 63 set, bits 40..62 clear, action in
//! bits 32..39, argument in bits 0..31) or a fault (anything else with bit
//! 63 set).

use std::fmt;

/// Bit 63: set on verdicts and faults.
pub const VERDICT_BIT: u64 = 1 << 63;
/// The canonical fault (`NF_FAULT`): bits 40..62 set, so never a verdict.
pub const FAULT: u64 = u64::MAX;
/// The largest plain value (`NF_VALUE_MAX`).
pub const VALUE_MAX: u64 = !VERDICT_BIT;

/// A verdict's action (`NF_ACT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Action {
    Aborted = 0,
    Drop = 1,
    Pass = 2,
    Tx = 3,
    Redirect = 4,
    Flood = 5,
    Controller = 6,
    Host = 7,
}

impl Action {
    /// Every action, by code.
    pub const ALL: [Action; 8] = [
        Action::Aborted,
        Action::Drop,
        Action::Pass,
        Action::Tx,
        Action::Redirect,
        Action::Flood,
        Action::Controller,
        Action::Host,
    ];
    /// The largest action code (`NF_ACT_MAX`).
    pub const MAX: u8 = 7;

    /// The action of code `c`.
    pub fn from_code(c: u64) -> Option<Action> {
        Action::ALL.get(usize::try_from(c).ok()?).copied()
    }

    /// Its code (`NF_ACT_*`).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// `ABORTED`, `DROP`, ... as scripts, reports and the C macros spell it.
    pub fn name(self) -> &'static str {
        match self {
            Action::Aborted => "ABORTED",
            Action::Drop => "DROP",
            Action::Pass => "PASS",
            Action::Tx => "TX",
            Action::Redirect => "REDIRECT",
            Action::Flood => "FLOOD",
            Action::Controller => "CONTROLLER",
            Action::Host => "HOST",
        }
    }

    /// The action named `name` (upper case, as [`Action::name`]).
    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether its argument means something (`REDIRECT(ifindex)`,
    /// `CONTROLLER(reason)`, `HOST(queue)`).
    pub fn takes_arg(self) -> bool {
        matches!(self, Action::Redirect | Action::Controller | Action::Host)
    }

    /// The encoded verdict with argument `arg` (`NF_VERDICT(act, arg)`).
    pub fn verdict(self, arg: u32) -> u64 {
        encode(self, arg)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The encoded verdict (`NF_VERDICT(act, arg)`).
pub fn encode(action: Action, arg: u32) -> u64 {
    VERDICT_BIT | (u64::from(action.code()) << 32) | u64::from(arg)
}

/// A result, classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NfResult {
    /// A plain value (63 bits) for the caller.
    Value(u64),
    /// A verdict: ends processing of the packet.
    Verdict { action: Action, arg: u32 },
    /// Top bit set but not a well-formed verdict (e.g. a C `-EINVAL`).
    Fault(u64),
}

impl NfResult {
    /// Classifies raw result `r` (`nf_is_value` / `nf_is_verdict` /
    /// `nf_is_fault`).
    pub fn of(r: u64) -> NfResult {
        if r & VERDICT_BIT == 0 {
            return NfResult::Value(r);
        }
        match decode(r) {
            Some((action, arg)) => NfResult::Verdict { action, arg },
            None => NfResult::Fault(r),
        }
    }
}

/// `(action, argument)` of a well-formed verdict.
pub fn decode(r: u64) -> Option<(Action, u32)> {
    // Bits 40..62 clear and bit 63 set: the high word is 0x800000aa.
    let hi = r >> 32;
    if hi & 0xffff_ff00 != 0x8000_0000 {
        return None;
    }
    Some((Action::from_code(hi & 0xff)?, r as u32))
}

/// Whether `r` is a well-formed verdict.
pub fn is_verdict(r: u64) -> bool {
    decode(r).is_some()
}

/// `DROP`, `REDIRECT(3)`, ... for a verdict; `0x...` for anything else.
pub fn name(r: u64) -> String {
    match decode(r) {
        Some((a, arg)) if a.takes_arg() => format!("{a}({arg})"),
        Some((a, _)) => a.name().to_string(),
        None => format!("0x{r:x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_classify() {
        for a in Action::ALL {
            for arg in [0u32, 7, u32::MAX] {
                let r = a.verdict(arg);
                assert_eq!(decode(r), Some((a, arg)));
                assert_eq!(NfResult::of(r), NfResult::Verdict { action: a, arg });
            }
            assert_eq!(Action::from_name(a.name()), Some(a));
        }
        assert_eq!(NfResult::of(5), NfResult::Value(5));
        assert_eq!(NfResult::of(VALUE_MAX), NfResult::Value(VALUE_MAX));
        assert_eq!(NfResult::of(FAULT), NfResult::Fault(FAULT));
        // Action 8 and bits 40..62 make faults, as does -EINVAL.
        assert!(!is_verdict(VERDICT_BIT | (8 << 32)));
        assert!(!is_verdict(VERDICT_BIT | (1 << 40) | (1 << 32)));
        assert!(!is_verdict(-22i64 as u64));
        assert_eq!(name(Action::Redirect.verdict(3)), "REDIRECT(3)");
        assert_eq!(name(Action::Drop.verdict(0)), "DROP");
        assert_eq!(name(5), "0x5");
    }
}

//! Hooks and attach points, and what each hook's return codes do with the
//! packet (docs/abi.md 1).
//!
//! A [`Hook`] is what a program is built for: its context type (NFs are
//! compiled once per hook) and its return codes. [`Hook::Switch`] is
//! nfkit's software switch: an XDP context (NFs are the XDP builds), but
//! the classifier returns the chain's resolved verdict (the full `u64`
//! of docs/abi.md 1) instead of an XDP return code. An [`AttachPoint`] is
//! where a deployment attaches it: XDP in the driver or the generic path,
//! TC ingress or egress, a socket.

use crate::verdict::{Action, NfResult};
use std::fmt;
use std::str::FromStr;

/// What a program is built for: XDP, TC (sched_cls), socket filter, or
/// nfkit's software switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    Xdp,
    Tc,
    Socket,
    /// The software switch (`nfkit switch run`): `struct xdp_md` as
    /// context, the resolved verdict as the return value.
    Switch,
}

impl Hook {
    /// Every hook NFs are built for, in build order (the switch uses the
    /// XDP builds of NFs; only the classifier is built for it).
    pub const ALL: [Hook; 3] = [Hook::Xdp, Hook::Tc, Hook::Socket];
    /// Every hook, the switch included.
    pub const EVERY: [Hook; 4] = [Hook::Xdp, Hook::Tc, Hook::Socket, Hook::Switch];

    /// The hook whose context and NF builds this one uses: XDP for the
    /// switch, itself otherwise.
    pub fn ctx_hook(self) -> Hook {
        match self {
            Hook::Switch => Hook::Xdp,
            h => h,
        }
    }

    /// `xdp`, `tc`, `socket`: the name in file names (`meter.xdp.o`),
    /// sections and docs.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Xdp => "xdp",
            Hook::Tc => "tc",
            Hook::Socket => "socket",
            Hook::Switch => "switch",
        }
    }

    /// The preprocessor symbol selecting the hook (`NF_HOOK_XDP`).
    pub fn define(self) -> &'static str {
        match self {
            Hook::Xdp => "NF_HOOK_XDP",
            Hook::Tc => "NF_HOOK_TC",
            Hook::Socket => "NF_HOOK_SOCKET",
            Hook::Switch => "NF_HOOK_SWITCH",
        }
    }

    /// Prefix of an NF's standalone export (`xdp_`, `tc_`, `sock_`).
    pub fn standalone_prefix(self) -> &'static str {
        match self {
            Hook::Xdp | Hook::Switch => "xdp_",
            Hook::Tc => "tc_",
            Hook::Socket => "sock_",
        }
    }

    /// The hook id of the info-block and frame slots (`NF_HOOKID_*`; the
    /// switch uses XDP's slots, as its NFs are the XDP builds).
    pub fn id(self) -> u32 {
        match self {
            Hook::Xdp | Hook::Switch => 0,
            Hook::Tc => 1,
            Hook::Socket => 2,
        }
    }

    /// The return code as the hook reads it from `r0`: XDP and socket
    /// filters the low 32 bits unsigned, TC the low 32 bits as a signed
    /// int (`TC_ACT_UNSPEC` is -1); the switch the whole verdict (as
    /// `i64`: its bits, negative since bit 63 is set).
    pub fn code(self, r0: u64) -> i64 {
        match self {
            Hook::Tc => i64::from(r0 as u32 as i32),
            Hook::Xdp | Hook::Socket => i64::from(r0 as u32),
            Hook::Switch => r0 as i64,
        }
    }

    /// The name of return code `code` (from [`Hook::code`]): `XDP_PASS`,
    /// `TC_ACT_SHOT`, `keep 60 bytes`, `unknown (9)`.
    pub fn code_name(self, code: i64) -> String {
        let named = match self {
            Hook::Xdp => usize::try_from(code).ok().and_then(|c| XDP_CODES.get(c)),
            Hook::Tc if code == TC_ACT_UNSPEC => Some(&"TC_ACT_UNSPEC"),
            Hook::Tc => usize::try_from(code).ok().and_then(|c| TC_CODES.get(c)),
            Hook::Socket if code == 0 => return "drop".into(),
            Hook::Socket => return format!("keep {code} bytes"),
            Hook::Switch => return crate::verdict::name(code as u64),
        };
        named.map_or_else(|| format!("unknown ({code})"), |n| (*n).to_string())
    }

    /// What return code `code` (from [`Hook::code`]) does with the packet.
    pub fn fate(self, code: i64) -> Fate {
        match self {
            Hook::Xdp => match code {
                XDP_PASS => Fate::Pass,
                XDP_TX => Fate::Tx,
                XDP_REDIRECT => Fate::Redirect,
                _ => Fate::Drop,
            },
            // As the kernel's clsact path reads a direct-action result;
            // tcx reads STOLEN, QUEUED and TRAP as "next" (nfkit never
            // returns them).
            Hook::Tc => match code {
                TC_ACT_SHOT | TC_ACT_STOLEN | TC_ACT_QUEUED | TC_ACT_TRAP => Fate::Drop,
                TC_ACT_REDIRECT => Fate::Redirect,
                _ => Fate::Pass,
            },
            Hook::Socket if code == 0 => Fate::Drop,
            Hook::Socket => Fate::Pass,
            Hook::Switch => match crate::verdict::NfResult::of(code as u64) {
                NfResult::Verdict { action, .. } => match action {
                    Action::Aborted | Action::Drop => Fate::Drop,
                    Action::Pass | Action::Host | Action::Controller => Fate::Pass,
                    Action::Tx => Fate::Tx,
                    Action::Redirect | Action::Flood => Fate::Redirect,
                },
                // The switch classifier always resolves; anything else
                // is a broken program, dropped.
                _ => Fate::Drop,
            },
        }
    }

    /// Whether code `code` lets the packet go on (up the stack, back out
    /// or to another device).
    pub fn keeps_packet(self, code: i64) -> bool {
        self.fate(code) != Fate::Drop
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownHook(pub String);

impl fmt::Display for UnknownHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown hook `{}` (hooks: xdp, tc, socket, switch)",
            self.0
        )
    }
}
impl std::error::Error for UnknownHook {}

impl FromStr for Hook {
    type Err = UnknownHook;
    fn from_str(s: &str) -> Result<Hook, UnknownHook> {
        match s {
            "xdp" => Ok(Hook::Xdp),
            "tc" | "sched_cls" => Ok(Hook::Tc),
            "socket" | "sock" | "socket_filter" => Ok(Hook::Socket),
            "switch" => Ok(Hook::Switch),
            _ => Err(UnknownHook(s.to_string())),
        }
    }
}

/// What a hook's return code does with the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Goes on up the stack (XDP_PASS, TC_ACT_OK, a socket's kept bytes).
    Pass,
    /// Goes back out of the device it came in on (XDP_TX).
    Tx,
    /// Goes out of another device (XDP_REDIRECT, TC_ACT_REDIRECT).
    Redirect,
    /// Dropped or consumed.
    Drop,
}

pub const XDP_ABORTED: i64 = 0;
pub const XDP_DROP: i64 = 1;
pub const XDP_PASS: i64 = 2;
pub const XDP_TX: i64 = 3;
pub const XDP_REDIRECT: i64 = 4;
/// Names of the XDP codes, by value.
pub const XDP_CODES: [&str; 5] = [
    "XDP_ABORTED",
    "XDP_DROP",
    "XDP_PASS",
    "XDP_TX",
    "XDP_REDIRECT",
];

pub const TC_ACT_UNSPEC: i64 = -1;
pub const TC_ACT_OK: i64 = 0;
pub const TC_ACT_RECLASSIFY: i64 = 1;
pub const TC_ACT_SHOT: i64 = 2;
pub const TC_ACT_PIPE: i64 = 3;
pub const TC_ACT_STOLEN: i64 = 4;
pub const TC_ACT_QUEUED: i64 = 5;
pub const TC_ACT_REPEAT: i64 = 6;
pub const TC_ACT_REDIRECT: i64 = 7;
pub const TC_ACT_TRAP: i64 = 8;
/// Names of the TC codes 0.., by value.
pub const TC_CODES: [&str; 9] = [
    "TC_ACT_OK",
    "TC_ACT_RECLASSIFY",
    "TC_ACT_SHOT",
    "TC_ACT_PIPE",
    "TC_ACT_STOLEN",
    "TC_ACT_QUEUED",
    "TC_ACT_REPEAT",
    "TC_ACT_REDIRECT",
    "TC_ACT_TRAP",
];

/// Where a deployment attaches a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttachPoint {
    /// XDP in the driver (native).
    Xdp,
    /// XDP in the generic (skb) path.
    XdpGeneric,
    /// TC ingress (tcx link, or a clsact filter).
    TcIngress,
    /// TC egress.
    TcEgress,
    /// A socket filter on a socket a process holds.
    Socket,
}

impl AttachPoint {
    /// Every attach point.
    pub const ALL: [AttachPoint; 5] = [
        AttachPoint::Xdp,
        AttachPoint::XdpGeneric,
        AttachPoint::TcIngress,
        AttachPoint::TcEgress,
        AttachPoint::Socket,
    ];
    /// The attach points of an interface (what `nfkit deploy` takes).
    pub const INTERFACE: [AttachPoint; 4] = [
        AttachPoint::Xdp,
        AttachPoint::XdpGeneric,
        AttachPoint::TcIngress,
        AttachPoint::TcEgress,
    ];

    /// The name in scripts (`attach("eth0", "xdp-generic")`), on the
    /// command line and in the state file.
    pub fn name(self) -> &'static str {
        match self {
            AttachPoint::Xdp => "xdp",
            AttachPoint::XdpGeneric => "xdp-generic",
            AttachPoint::TcIngress => "tc-ingress",
            AttachPoint::TcEgress => "tc-egress",
            AttachPoint::Socket => "socket",
        }
    }

    /// The hook programs attached here are built for.
    pub fn hook(self) -> Hook {
        match self {
            AttachPoint::Xdp | AttachPoint::XdpGeneric => Hook::Xdp,
            AttachPoint::TcIngress | AttachPoint::TcEgress => Hook::Tc,
            AttachPoint::Socket => Hook::Socket,
        }
    }

    /// The attach point a script without `attach(...)` gets for `hook`
    /// (the switch is no kernel attach point: its context hook's, XDP;
    /// deployments refuse switch builds).
    pub fn default_for(hook: Hook) -> AttachPoint {
        match hook {
            Hook::Xdp | Hook::Switch => AttachPoint::Xdp,
            Hook::Tc => AttachPoint::TcIngress,
            Hook::Socket => AttachPoint::Socket,
        }
    }

    /// Is this an XDP attach point?
    pub fn is_xdp(self) -> bool {
        self.hook() == Hook::Xdp
    }
}

impl fmt::Display for AttachPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not an attach point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownAttachPoint(pub String);

impl fmt::Display for UnknownAttachPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown hook `{}` (xdp, xdp-generic, tc-ingress, tc-egress, socket)",
            self.0
        )
    }
}
impl std::error::Error for UnknownAttachPoint {}

impl FromStr for AttachPoint {
    type Err = UnknownAttachPoint;
    fn from_str(s: &str) -> Result<AttachPoint, UnknownAttachPoint> {
        AttachPoint::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAttachPoint(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in Hook::EVERY {
            assert_eq!(h.name().parse::<Hook>(), Ok(h));
        }
        for a in AttachPoint::ALL {
            assert_eq!(a.name().parse::<AttachPoint>(), Ok(a));
            assert_eq!(AttachPoint::default_for(a.hook()).hook(), a.hook());
        }
        assert!("xpd".parse::<Hook>().is_err());
        assert!("xdp_generic".parse::<AttachPoint>().is_err());
    }

    #[test]
    fn codes_and_fates() {
        assert_eq!(Hook::Tc.code(u32::MAX as u64), TC_ACT_UNSPEC);
        assert_eq!(Hook::Tc.code_name(-1), "TC_ACT_UNSPEC");
        assert_eq!(Hook::Tc.code_name(7), "TC_ACT_REDIRECT");
        assert_eq!(Hook::Xdp.code_name(9), "unknown (9)");
        assert_eq!(Hook::Socket.code_name(60), "keep 60 bytes");
        for (code, kept) in [
            (0, false),
            (1, false),
            (2, true),
            (3, true),
            (4, true),
            (5, false),
        ] {
            assert_eq!(Hook::Xdp.keeps_packet(code), kept, "xdp {code}");
        }
        for (code, kept) in [
            (-1, true),
            (0, true),
            (1, true),
            (2, false),
            (3, true),
            (4, false),
            (7, true),
        ] {
            assert_eq!(Hook::Tc.keeps_packet(code), kept, "tc {code}");
        }
        assert!(!Hook::Socket.keeps_packet(0));
        assert!(Hook::Socket.keeps_packet(1));
        use crate::verdict::encode;
        let sw = |a, arg| Hook::Switch.fate(Hook::Switch.code(encode(a, arg)));
        assert_eq!(sw(Action::Drop, 0), Fate::Drop);
        assert_eq!(sw(Action::Redirect, 3), Fate::Redirect);
        assert_eq!(sw(Action::Host, 1), Fate::Pass);
        assert_eq!(Hook::Switch.fate(Hook::Switch.code(5)), Fate::Drop);
        assert_eq!(
            Hook::Switch.code_name(Hook::Switch.code(encode(Action::Redirect, 2))),
            "REDIRECT(2)"
        );
    }
}

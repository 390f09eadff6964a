//! The hooks an NF is built for. The context type is part of an NF's
//! signature, so every source is compiled once per hook.

use std::fmt;
use std::str::FromStr;

/// A hook: XDP, TC (sched_cls) or socket filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    Xdp,
    Tc,
    Socket,
}

impl Hook {
    /// Every hook, in build order.
    pub const ALL: [Hook; 3] = [Hook::Xdp, Hook::Tc, Hook::Socket];

    /// `xdp`, `tc`, `socket`: the name in file names (`meter.xdp.o`) and docs.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Xdp => "xdp",
            Hook::Tc => "tc",
            Hook::Socket => "socket",
        }
    }

    /// The preprocessor symbol selecting the hook (`NF_HOOK_XDP`).
    pub fn define(self) -> &'static str {
        match self {
            Hook::Xdp => "NF_HOOK_XDP",
            Hook::Tc => "NF_HOOK_TC",
            Hook::Socket => "NF_HOOK_SOCKET",
        }
    }

    /// Prefix of the standalone export of an NF (`xdp_`, `tc_`, `sock_`).
    pub fn standalone_prefix(self) -> &'static str {
        match self {
            Hook::Xdp => "xdp_",
            Hook::Tc => "tc_",
            Hook::Socket => "sock_",
        }
    }

    /// The ELF section of the hook's programs (`xdp`, `tc`, `socket`).
    pub fn section(self) -> &'static str {
        self.name()
    }

    /// The program type of the hook's programs.
    pub fn prog_type(self) -> nfkit_object::ProgType {
        match self {
            Hook::Xdp => nfkit_object::ProgType::Xdp,
            Hook::Tc => nfkit_object::ProgType::SchedCls,
            Hook::Socket => nfkit_object::ProgType::SocketFilter,
        }
    }

    /// The hook of programs of type `t`, if NFs have one for it.
    pub fn from_prog_type(t: nfkit_object::ProgType) -> Option<Hook> {
        match t {
            nfkit_object::ProgType::Xdp => Some(Hook::Xdp),
            nfkit_object::ProgType::SchedCls | nfkit_object::ProgType::SchedAct => Some(Hook::Tc),
            nfkit_object::ProgType::SocketFilter => Some(Hook::Socket),
            _ => None,
        }
    }

    /// The hook id of the packet info slot (abi.md 3): 0 XDP, 1 TC, 2 socket.
    pub fn id(self) -> u32 {
        match self {
            Hook::Xdp => 0,
            Hook::Tc => 1,
            Hook::Socket => 2,
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a hook.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown hook `{0}` (hooks: xdp, tc, socket)")]
pub struct UnknownHook(pub String);

impl FromStr for Hook {
    type Err = UnknownHook;
    fn from_str(s: &str) -> Result<Hook, UnknownHook> {
        match s {
            "xdp" => Ok(Hook::Xdp),
            "tc" | "sched_cls" => Ok(Hook::Tc),
            "socket" | "sock" | "socket_filter" => Ok(Hook::Socket),
            _ => Err(UnknownHook(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in Hook::ALL {
            assert_eq!(h.name().parse::<Hook>(), Ok(h));
        }
        assert!("xpd".parse::<Hook>().is_err());
        for h in Hook::ALL {
            assert_eq!(Hook::from_prog_type(h.prog_type()), Some(h));
        }
    }
}

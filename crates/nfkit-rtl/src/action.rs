//! The engine's action module (`rtl/ebpf_action.sv`): how it reads a
//! finished run (its settings, [`ActionConfig`]) and what it answers
//! ([`ActionOut`]): one of nfkit's actions (docs/abi.md 1) with its
//! argument, and where the packet goes, as the software switch decides.

use nfkit_abi::verdict::Action;

/// Host queues the action module holds (`ebpf_action`'s `HOSTS`).
pub const MAX_HOSTS: usize = 4;
/// Ports it decides among (`ebpf_action`'s `PORTS`).
pub const MAX_PORTS: usize = 8;

/// The action module's settings (the software switch's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionConfig {
    /// r0 is nfkit's 64-bit verdict (a chain built for the switch hook);
    /// otherwise an XDP return code with the run's redirect.
    pub verdicts: bool,
    /// Ports, numbered 1..=nports by REDIRECT (indices from 0 here).
    pub nports: u8,
    /// The host queues' ports (indices): PASS and HOST(0) go out of the
    /// first, HOST(q) out of the q-th (the first when there is none).
    pub hosts: Vec<u8>,
    /// What a fault, or an r0 that is no verdict in verdict mode, gets
    /// (a verdict; DROP when it is none).
    pub fault_verdict: u64,
}

impl Default for ActionConfig {
    /// XDP return codes, four ports, no host port, faults dropped.
    fn default() -> ActionConfig {
        ActionConfig {
            verdicts: false,
            nports: 4,
            hosts: Vec::new(),
            fault_verdict: Action::Drop.verdict(0),
        }
    }
}

/// Where the action module sends a packet (nfkit-switch's `Decision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// ABORTED, DROP.
    Drop,
    /// Out of one port (an index).
    Port(u8),
    /// A copy out of each port in the mask (bit p: port index p).
    Flood(u8),
    /// To the controller, with the reason.
    Controller(u32),
    /// PASS or HOST without a host port: dropped.
    NoHostPort,
    /// REDIRECT to a port number that does not exist: dropped.
    NoSuchPort,
}

/// The action module's answer for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionOut {
    pub action: Action,
    pub arg: u32,
    /// The run faulted, or its r0 was no verdict in verdict mode: the
    /// fault action was taken (the switch counts it).
    pub fault: bool,
    pub decision: Decision,
}

impl ActionOut {
    /// From the shim's words: `action | decision << 8 | fault << 16 |
    /// port << 24` and the argument and mask.
    pub(crate) fn decode(word: u32, arg: u32, mask: u32) -> ActionOut {
        let action = Action::from_code(u64::from(word & 7)).unwrap_or(Action::Drop);
        let port = (word >> 24) as u8;
        let decision = match (word >> 8) & 7 {
            1 => Decision::Port(port),
            2 => Decision::Flood(mask as u8),
            3 => Decision::Controller(arg),
            4 => Decision::NoHostPort,
            5 => Decision::NoSuchPort,
            _ => Decision::Drop,
        };
        ActionOut {
            action,
            arg,
            fault: (word >> 16) & 1 == 1,
            decision,
        }
    }
}

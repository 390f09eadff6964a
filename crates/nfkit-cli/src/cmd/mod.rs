//! One module per top-level command (or command group).

pub mod asm;
pub mod check;
pub mod compile;
pub mod deploy;
pub mod disasm;
pub mod map;
pub mod nf;
pub mod object;
pub mod prog;
pub mod recv;
pub mod run;
pub mod run_script;
pub mod send;
pub mod vm;

use nfkit_abi::Hook;
use nfkit_object::ProgType;

/// The hook a program type runs at, for its return codes
/// ([`Hook::code_name`], [`Hook::keeps_packet`]); `None` for types
/// nfkit does not run on packets.
pub fn hook_of(t: ProgType) -> Option<Hook> {
    match t {
        ProgType::Xdp => Some(Hook::Xdp),
        ProgType::SchedCls | ProgType::SchedAct => Some(Hook::Tc),
        ProgType::SocketFilter => Some(Hook::Socket),
        _ => None,
    }
}

/// A pcap error that names the file once: I/O errors name it already,
/// the others (bad magic, truncated record, ...) get it as a prefix.
pub fn pcap_error(path: &std::path::Path) -> impl Fn(nfkit_pcap::PcapError) -> anyhow::Error + '_ {
    move |e| match e {
        nfkit_pcap::PcapError::Io { .. } => anyhow::Error::new(e),
        e => anyhow::anyhow!("{}: {e}", path.display()),
    }
}

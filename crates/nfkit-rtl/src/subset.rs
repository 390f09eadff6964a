//! The instruction subset of the RTL core, and the loader's check.
//!
//! The core runs: every ALU64/ALU32 operation (division and modulo,
//! signed ones included, on the multi-cycle divider; `movsx`), byte
//! swaps (`le`, `be`, `bswap`), loads of every width (sign-extending ones
//! included), stores of every width (register and immediate), `lddw` of a
//! constant, every JMP/JMP32 jump (and `gotol`), `exit`, atomics on 4 or 8
//! bytes (add/or/and/xor and their fetch forms, xchg, cmpxchg), and `call`
//! of the helpers its coprocessor serves ([`HELPERS`]). Everything else is
//! refused by name.

use crate::error::RtlError;
use nfkit_isa::{
    disasm::format_insn, helpers::helper_name, CallKind, Insn, LddwKind, Size, Syntax,
};

/// Helpers the coprocessor serves: (id, what it answers).
pub const HELPERS: &[(i32, &str)] = &[
    (
        1,
        "bpf_map_lookup_elem: the value's address in the value slots, or 0",
    ),
    (2, "bpf_map_update_elem: 0 or a negative errno"),
    (3, "bpf_map_delete_elem: 0 or a negative errno"),
    (5, "bpf_ktime_get_ns: the packet's timestamp"),
    (8, "bpf_get_smp_processor_id: the engine's number"),
    (
        23,
        "bpf_redirect: XDP_REDIRECT with the output port set (XDP_ABORTED for flags)",
    ),
    (
        93,
        "bpf_spin_lock: a no-op on one engine (the lock must be an aligned word of a map value)",
    ),
    (94, "bpf_spin_unlock: as bpf_spin_lock"),
    (
        51,
        "bpf_redirect_map: on a devmap, XDP_REDIRECT to its entry or every port (BPF_F_BROADCAST), the low flag bits when absent",
    ),
    (
        54,
        "bpf_xdp_adjust_meta: moves data_meta within the headroom (the kernel's checks)",
    ),
];

/// Why `insn` is outside the subset, or `None` when the core runs it.
pub fn lacks(insn: &Insn) -> Option<String> {
    let why = match *insn {
        Insn::Alu { .. }
        | Insn::Endian { .. }
        | Insn::Ldx { .. }
        | Insn::St { .. }
        | Insn::Stx { .. }
        | Insn::Ja { .. }
        | Insn::Gotol { .. }
        | Insn::Jmp { .. }
        | Insn::Exit => return None,
        Insn::Lddw {
            kind: LddwKind::Imm64,
            ..
        } => return None,
        Insn::Lddw { kind, .. } => match kind {
            LddwKind::MapIdx | LddwKind::MapIdxValue => return None,
            LddwKind::MapFd | LddwKind::MapValue => {
                "a map file descriptor reference (link the object first)".to_string()
            }
            LddwKind::Func => "a function address".to_string(),
            LddwKind::BtfId => "a kernel variable".to_string(),
            LddwKind::Imm64 => return None,
        },
        Insn::Call {
            kind: CallKind::Helper,
            imm,
        } => {
            if HELPERS.iter().any(|(id, _)| *id == imm) {
                return None;
            }
            match helper_name(imm) {
                Some(name) if name.starts_with("bpf_") => format!("helper {imm} ({name})"),
                Some(name) => format!("helper {imm} (bpf_{name})"),
                None => format!("helper {imm}"),
            }
        }
        Insn::Call {
            kind: CallKind::Local,
            ..
        } => "a bpf-to-bpf call".to_string(),
        Insn::Call {
            kind: CallKind::Kfunc,
            ..
        } => "a kfunc call".to_string(),
        Insn::Callx { .. } => "an indirect call (callx)".to_string(),
        Insn::Atomic {
            size: Size::W | Size::DW,
            ..
        } => return None,
        Insn::Atomic { .. } => "an atomic operation on 1 or 2 bytes".to_string(),
        Insn::AddrSpaceCast { .. } => "addr_space_cast".to_string(),
        Insn::LdAbs { .. } | Insn::LdInd { .. } => {
            "a legacy packet load (ld_abs/ld_ind)".to_string()
        }
        Insn::MayGoto { .. } => "may_goto".to_string(),
    };
    Some(why)
}

/// Checks every instruction of a program: the first outside the subset is
/// named with its slot, and every other kind of lack (first slot each)
/// listed after it.
pub fn check(insns: &[Insn]) -> Result<(), RtlError> {
    let mut first: Option<(usize, String, String)> = None;
    let mut more: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut slot = 0;
    for insn in insns {
        if let Some(what) = lacks(insn) {
            if !seen.contains(&what) {
                if first.is_none() {
                    first = Some((slot, format_insn(insn, Syntax::Llvm), what.clone()));
                } else {
                    more.push(format!("{what} (slot {slot})"));
                }
                seen.push(what);
            }
        }
        slot += insn.slots();
    }
    match first {
        None => Ok(()),
        Some((slot, insn, what)) => Err(RtlError::Unsupported {
            slot,
            insn,
            what,
            more,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_isa::{AtomicOp, Reg};

    #[test]
    fn refuses_by_name() {
        let prog = [
            Insn::lddw(Reg::R0, 1),
            Insn::Atomic {
                size: Size::B,
                op: AtomicOp::Add { fetch: false },
                dst: Reg::FP,
                src: Reg::R0,
                off: -8,
            },
            Insn::Exit,
        ];
        let err = check(&prog).expect_err("atomics are outside the subset");
        let text = err.to_string();
        assert!(text.starts_with("slot 2:"), "{text}");
        assert!(text.contains("atomic operation on 1 or 2 bytes"), "{text}");
        let ok = Insn::Atomic {
            size: Size::W,
            op: AtomicOp::CmpXchg,
            dst: Reg::FP,
            src: Reg::R1,
            off: -8,
        };
        assert!(check(&[ok, Insn::Exit]).is_ok());
    }

    #[test]
    fn refuses_helpers_by_name() {
        let call = Insn::Call {
            kind: CallKind::Helper,
            imm: 6,
        };
        let text = check(&[call, Insn::Exit])
            .expect_err("trace_printk")
            .to_string();
        assert!(text.contains("helper 6 (bpf_trace_printk)"), "{text}");
        let ok = Insn::Call {
            kind: CallKind::Helper,
            imm: 5,
        };
        assert!(check(&[ok, Insn::Exit]).is_ok());
    }
}

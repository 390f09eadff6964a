//! What a loaded program can do to the memory of a run, read off its
//! instructions once at load: how deep below each frame pointer it can
//! write, whether it can move the packet's start into the headroom, and
//! whether it can write the packet at all. Runs use these facts to clear
//! only what the last run could have dirtied and to copy the packet back
//! only when the program may have changed it. Every fact errs on the safe
//! side: an instruction the scan does not understand makes it "anything".

#![forbid(unsafe_code)]

use crate::config::FRAME_SIZE;
use crate::helpers::table::id;
use nfkit_isa::{CallKind, Insn, Operand, Reg};

/// Memory effects of all instructions of a program (every entry,
/// function and tail-call target of one image together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Facts {
    /// Bytes below a frame's top that any run can touch, when the frame
    /// pointer is only ever used as the base of loads and stores with a
    /// constant offset (so no pointer into the stack exists anywhere
    /// else); [`FRAME_SIZE`] when it escapes (copied, moved, passed).
    pub stack_reach: usize,
    /// A helper may move `data` or `data_meta` below where the run
    /// started them (the headroom becomes readable).
    pub moves_head: bool,
    /// Some instruction or helper may write the packet.
    pub writes_packet: bool,
    /// The program may open frames past the entry's (bpf-to-bpf calls,
    /// `bpf_loop` callbacks, indirect calls).
    pub calls: bool,
    /// No instruction calls anything (helpers, kfuncs, functions, indirect
    /// calls) or loads through `LD_ABS`/`LD_IND`: a run touches nothing
    /// of the machine but its registers, its memory and the context, so
    /// the helpers' state (network, clock/random overrides, locks,
    /// reservations, side-effect lists) needs no reset between runs.
    pub calls_nothing: bool,
    /// Some instruction is an atomic operation (native code runs those
    /// through the interpreter's memory access code, which reaches the
    /// packet in the runner's buffer only: such a run cannot use the
    /// caller's buffer in place).
    pub atomics: bool,
}

/// Helpers that never write program memory through a pointer argument
/// and never move the packet (tail calls run entries of the same image,
/// which are scanned too; `bpf_loop` callbacks are functions of it).
const PURE_HELPERS: &[i32] = &[
    id::MAP_LOOKUP_ELEM,
    id::MAP_UPDATE_ELEM,
    id::MAP_DELETE_ELEM,
    id::KTIME_GET_NS,
    id::TRACE_PRINTK,
    id::GET_PRANDOM_U32,
    id::GET_SMP_PROCESSOR_ID,
    id::TAIL_CALL,
    id::REDIRECT,
    id::PERF_EVENT_OUTPUT,
    id::CSUM_DIFF,
    id::GET_NUMA_NODE_ID,
    id::REDIRECT_MAP,
    id::JIFFIES64,
    id::KTIME_GET_BOOT_NS,
    id::RINGBUF_OUTPUT,
    id::RINGBUF_RESERVE,
    id::RINGBUF_SUBMIT,
    id::RINGBUF_DISCARD,
    id::RINGBUF_QUERY,
    id::KTIME_GET_COARSE_NS,
    id::LOOP,
    id::XDP_GET_BUFF_LEN,
];

/// Helpers that move the packet's start down (into the headroom).
const HEAD_MOVERS: &[i32] = &[
    id::SKB_CHANGE_HEAD,
    id::XDP_ADJUST_HEAD,
    id::SKB_ADJUST_ROOM,
    id::XDP_ADJUST_META,
];

impl Facts {
    /// The facts of `insns`.
    pub fn of(insns: &[Insn]) -> Facts {
        let fp = Reg::FP;
        let mut reach = 0i64;
        let mut escapes = false;
        let mut moves_head = false;
        let mut writes_packet = false;
        let mut calls = false;
        let mut calls_any = false;
        let mut atomics = false;
        let mut base = |r: Reg, off: i16| {
            if r == fp {
                reach = reach.max(-(off as i64));
            }
        };
        for insn in insns {
            match *insn {
                Insn::Ldx { src, off, .. } => base(src, off),
                Insn::St { dst, off, .. } => {
                    base(dst, off);
                    writes_packet |= dst != fp;
                }
                Insn::Stx { dst, src, off, .. } => {
                    base(dst, off);
                    writes_packet |= dst != fp;
                    escapes |= src == fp;
                }
                Insn::Atomic { dst, src, off, .. } => {
                    base(dst, off);
                    writes_packet |= dst != fp;
                    escapes |= src == fp;
                    atomics = true;
                }
                Insn::Alu { dst, src, .. } => {
                    escapes |= dst == fp || src == Operand::Reg(fp);
                }
                Insn::Endian { dst, .. } => escapes |= dst == fp,
                Insn::AddrSpaceCast { dst, src, .. } => escapes |= dst == fp || src == fp,
                Insn::LdInd { src, .. } => {
                    escapes |= src == fp;
                    calls_any = true;
                }
                Insn::LdAbs { .. } => calls_any = true,
                Insn::Callx { .. }
                | Insn::Call {
                    kind: CallKind::Kfunc,
                    ..
                } => {
                    moves_head = true;
                    writes_packet = true;
                    calls = true;
                    calls_any = true;
                }
                Insn::Call {
                    kind: CallKind::Helper,
                    imm,
                } => {
                    moves_head |= HEAD_MOVERS.contains(&imm);
                    writes_packet |= !PURE_HELPERS.contains(&imm);
                    calls |= imm == id::LOOP;
                    calls_any = true;
                }
                Insn::Call {
                    kind: CallKind::Local,
                    ..
                } => {
                    calls = true;
                    calls_any = true;
                }
                // Comparisons read the frame pointer's value but keep no
                // copy of it; the rest touch no memory.
                Insn::Jmp { .. }
                | Insn::Ja { .. }
                | Insn::Gotol { .. }
                | Insn::MayGoto { .. }
                | Insn::Lddw { .. }
                | Insn::Exit => {}
            }
        }
        let stack_reach = if escapes {
            FRAME_SIZE
        } else {
            // Whole words: a store of 8 at fp-4 faults, but round anyway.
            (reach.clamp(0, FRAME_SIZE as i64) as usize).next_multiple_of(8)
        };
        Facts {
            stack_reach: stack_reach.min(FRAME_SIZE),
            moves_head,
            writes_packet,
            calls,
            calls_nothing: !calls_any,
            atomics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_isa::asm::{assemble, Syntax};

    fn facts(text: &str) -> Facts {
        let insns = assemble(text, Some(Syntax::Llvm)).expect("assembles");
        Facts::of(&insns)
    }

    #[test]
    fn no_stack_no_packet_writes() {
        let f = facts("r0 = 2\nexit");
        assert_eq!(f.stack_reach, 0);
        assert!(!f.moves_head && !f.writes_packet && !f.calls);
    }

    #[test]
    fn calls_and_atomics_are_seen() {
        let f = facts("r2 = *(u32 *)(r1 + 0)\nif r2 > 5 goto +1\nr0 = 1\nexit");
        assert!(f.calls_nothing && !f.atomics);
        let f = facts("call 5\nr0 = 0\nexit");
        assert!(!f.calls_nothing);
        let f = facts("r0 = 0\nr0 += 1\nif r0 < 5 goto -2\nexit");
        assert!(f.calls_nothing && !f.atomics);
        let mut insns = assemble("r1 = 1\nr0 = 0\nexit", Some(Syntax::Llvm)).expect("assembles");
        let atomic = Insn::Atomic {
            size: nfkit_isa::Size::DW,
            op: nfkit_isa::AtomicOp::Add { fetch: false },
            dst: Reg::FP,
            src: Reg::R1,
            off: -8,
        };
        insns.insert(1, atomic);
        let f = Facts::of(&insns);
        assert!(f.calls_nothing && f.atomics);
        insns[1] = Insn::Call {
            kind: CallKind::Local,
            imm: 1,
        };
        let f = Facts::of(&insns);
        assert!(!f.calls_nothing && !f.atomics);
    }

    #[test]
    fn calls_and_loops_open_frames() {
        assert!(facts("call 181\nr0 = 0\nexit").calls);
        assert!(!facts("call 1\nr0 = 0\nexit").calls);
    }

    #[test]
    fn direct_frame_accesses_give_their_depth() {
        let f = facts("*(u64 *)(r10 - 16) = r1\nr0 = *(u32 *)(r10 - 40)\nexit");
        assert_eq!(f.stack_reach, 40);
        assert!(!f.writes_packet);
    }

    #[test]
    fn an_escaping_frame_pointer_means_the_whole_frame() {
        let f = facts("r2 = r10\nr2 += -8\n*(u64 *)(r2 + 0) = r1\nr0 = 0\nexit");
        assert_eq!(f.stack_reach, FRAME_SIZE);
        let f = facts("*(u64 *)(r10 - 8) = r10\nr0 = 0\nexit");
        assert_eq!(f.stack_reach, FRAME_SIZE);
    }

    #[test]
    fn stores_and_helpers_mark_packet_writes() {
        assert!(facts("*(u8 *)(r1 + 0) = 1\nr0 = 0\nexit").writes_packet);
        assert!(!facts("call 1\nr0 = 0\nexit").writes_packet);
        let f = facts("r2 = -8\ncall 44\nr0 = 0\nexit");
        assert!(f.moves_head && f.writes_packet);
    }
}

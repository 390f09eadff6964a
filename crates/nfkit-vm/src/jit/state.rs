//! The state native code runs with: one [`JitCtx`] per run, reached
//! through `r12` from every instruction. Its layout is `repr(C)` and the
//! code generator addresses fields by the offsets below.

use crate::interp::{Machine, Stop};
use crate::mem::Window;
use std::mem::offset_of;

/// What stopped native code early, in [`JitCtx::native_fault`].
pub(crate) const FAULT_NONE: u64 = 0;
/// A call went past the frame limit.
pub(crate) const FAULT_DEPTH: u64 = 2;
/// A glue function stopped the run: [`JitCtx::stop`] says how.
pub(crate) const FAULT_STOP: u64 = 3;

/// Per-run state shared by native code and the glue functions.
#[repr(C)]
pub(crate) struct JitCtx {
    /// The machine's window table and its length (refreshed after every
    /// glue call: adding a region may move it).
    pub win: *mut Window,
    pub nwin: u64,
    /// Instructions the run may still execute (in `r9` while native code
    /// runs; here around glue calls and at the end).
    pub count: u64,
    pub budget: u64,
    /// `rsp` of the entry stub after its pushes: a fault unwinds to it.
    pub saved_rsp: u64,
    /// Current call depth, its limit, and the deepest reached.
    pub depth: u64,
    pub max_frames: u64,
    pub deepest: u64,
    /// `may_goto` iterations left in the current frame, and the budget a
    /// new frame starts with.
    pub may_goto: u64,
    pub may_goto_budget: u64,
    /// One of the `FAULT_*` codes, and the op it happened at.
    pub native_fault: u64,
    pub fault_pc: u64,
    /// Op of the last `exit` executed.
    pub exit_pc: u64,
    /// Host address of byte 0 of the packet buffer minus the packet
    /// region's bits (`PACKET << 32`): plus a packet pointer, the host
    /// address it points to (fixed for a run).
    pub packet_base: u64,
    /// Host address of byte 0 of the stack buffer minus the current
    /// frame's region bits (`(STACK + depth) << 32`): plus r10 and an
    /// offset, the host address of a byte of the current frame (calls
    /// move it down by `1 << 32`, returns back up).
    pub frame_base: u64,
    /// Scratch slots for division.
    pub scratch: [u64; 2],
    /// Where registers are spilled around glue calls: the machine's own
    /// `regs` (r0..r10), so helpers read their arguments in place.
    pub regs: *mut u64,
    /// Native address a glue call asks the code to continue at (tail
    /// calls), 0 to continue after the call.
    pub jump: u64,
    /// A `bpf_loop` the last helper call asks native code to run:
    /// iterations (0: none), callback's native address, its context
    /// argument, and the op of the call (for a call depth fault).
    pub loop_n: u64,
    pub loop_cb: u64,
    pub loop_ctx: u64,
    pub loop_pc: u64,
    /// What 4-byte loads of an XDP context's fields give (`xdp_md` is six
    /// `u32`s; data pointers as VM addresses), valid while `ctx_ok` is 1:
    /// glue calls clear it (a helper may move the packet), the next load
    /// through the glue fills it again.
    pub ctx_ok: u64,
    /// Bytes of the context the table covers.
    pub ctx_len: u64,
    pub ctx_vals: [u64; XDP_CTX_FIELDS],
    /// The run's machine.
    pub machine: *mut Machine,
    /// The compiled code (addresses of functions for tail calls).
    pub code: *const super::Code,
    /// How a glue function stopped the run.
    pub stop: Option<Stop>,
    /// The interpreter finished the run (the budget ran out mid-block):
    /// the machine's count is exact.
    pub handed_off: bool,
    /// A run on the caller's buffer in place (the lean run, see
    /// `vm::fast`): its first byte, its offset in the packet region and
    /// its length; null when the packet is in the runner's buffer, or
    /// was moved there when the interpreter took over (`glue::budget_out`).
    pub in_place: *mut u8,
    pub in_place_off: u64,
    pub in_place_len: u64,
    /// The run's CPU when the per-CPU arrays' static value regions show
    /// its slots (`Memory::statics_cpu`), else `u64::MAX`: native code's
    /// inline array lookups use it, and leave other runs to the glue.
    pub statics_cpu: u64,
    /// A glue function ran in this run (set by every glue entry that
    /// works on the machine): the machine is no longer as the run
    /// started it, so the run cannot leave its runner armed
    /// (`vm::fast::Armed`).
    pub glued: u64,
}

/// [`JitCtx::statics_cpu`] for a run on machine `m`.
#[inline(always)]
pub(crate) fn statics_cpu(m: &Machine) -> u64 {
    if m.mem.statics_cpu == m.cpu {
        u64::from(m.cpu)
    } else {
        u64::MAX
    }
}

impl JitCtx {
    /// Forgets the caller's buffer of an in-place run (the packet is in
    /// the runner's buffer from here on, or the run is over); says whether
    /// the run was still there.
    #[inline(always)]
    pub(crate) fn forget_place(&mut self) -> bool {
        let was = !self.in_place.is_null();
        self.in_place = std::ptr::null_mut();
        self.in_place_off = 0;
        self.in_place_len = 0;
        was
    }

    /// A context with no run: null pointers, zero counts, the VM's frame
    /// limit and `may_goto` budget (what every run starts from).
    pub(crate) fn new(max_frames: u64, may_goto_budget: u64) -> JitCtx {
        JitCtx {
            win: std::ptr::null_mut(),
            nwin: 0,
            count: 0,
            budget: 0,
            saved_rsp: 0,
            depth: 0,
            max_frames,
            deepest: 0,
            may_goto: 0,
            may_goto_budget,
            native_fault: FAULT_NONE,
            fault_pc: 0,
            exit_pc: 0,
            packet_base: 0,
            frame_base: 0,
            scratch: [0; 2],
            regs: std::ptr::null_mut(),
            jump: 0,
            ctx_ok: 0,
            ctx_len: 0,
            ctx_vals: [0; XDP_CTX_FIELDS],
            loop_n: 0,
            loop_cb: 0,
            loop_ctx: 0,
            loop_pc: 0,
            machine: std::ptr::null_mut(),
            code: std::ptr::null(),
            stop: None,
            handed_off: false,
            in_place: std::ptr::null_mut(),
            in_place_off: 0,
            in_place_len: 0,
            statics_cpu: u64::MAX,
            glued: 0,
        }
    }
}

/// Fields of `struct xdp_md`.
pub(crate) const XDP_CTX_FIELDS: usize = 6;

macro_rules! off {
    ($f:ident) => {
        offset_of!(JitCtx, $f) as i32
    };
}

pub(crate) const WIN: i32 = off!(win);
pub(crate) const NWIN: i32 = off!(nwin);
pub(crate) const COUNT: i32 = off!(count);
pub(crate) const SAVED_RSP: i32 = off!(saved_rsp);
pub(crate) const DEPTH: i32 = off!(depth);
pub(crate) const MAX_FRAMES: i32 = off!(max_frames);
pub(crate) const DEEPEST: i32 = off!(deepest);
pub(crate) const MAY_GOTO: i32 = off!(may_goto);
pub(crate) const NATIVE_FAULT: i32 = off!(native_fault);
pub(crate) const FAULT_PC: i32 = off!(fault_pc);
pub(crate) const EXIT_PC: i32 = off!(exit_pc);
pub(crate) const PACKET_BASE: i32 = off!(packet_base);
pub(crate) const FRAME_BASE: i32 = off!(frame_base);
pub(crate) const SCRATCH: i32 = off!(scratch);
pub(crate) const REGS: i32 = off!(regs);
pub(crate) const JUMP: i32 = off!(jump);
pub(crate) const CTX_OK: i32 = off!(ctx_ok);
pub(crate) const CTX_LEN: i32 = off!(ctx_len);
pub(crate) const CTX_VALS: i32 = off!(ctx_vals);
pub(crate) const LOOP_N: i32 = off!(loop_n);
pub(crate) const LOOP_CB: i32 = off!(loop_cb);
pub(crate) const LOOP_CTX: i32 = off!(loop_ctx);
pub(crate) const LOOP_PC: i32 = off!(loop_pc);
pub(crate) const STATICS_CPU: i32 = off!(statics_cpu);

/// Offset of spilled register `r` from the spill area's address.
pub(crate) const fn reg(r: u8) -> i32 {
    8 * r as i32
}

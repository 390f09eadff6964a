//! Functions native code calls for what it does not do inline: accesses
//! outside every open window (context fields, faults), helpers, atomics,
//! legacy packet loads. Each takes the run's [`JitCtx`], works on its
//! machine with the interpreter's own code (one semantics for both
//! engines), and on a fault records it and sets `native_fault`, which the
//! calling code checks before going on.

use super::state::{JitCtx, FAULT_STOP};
use crate::error::RunErrorKind;
use crate::helpers::table::{self, id::LOOP};
use crate::interp::{Machine, Step, Stop};

/// The machine behind `jc`, and a refreshed window table once done.
///
/// # Safety
/// `jc` is the live context of a run (`Code::exec` made it): its
/// `machine` points to the run's machine, borrowed for the whole run.
unsafe fn with_machine<T>(jc: *mut JitCtx, f: impl FnOnce(&mut Machine) -> Step<T>) -> Option<T> {
    // SAFETY: see the function's contract; native code is suspended in
    // this call, so nothing else touches the machine.
    let jc = unsafe { &mut *jc };
    let m = unsafe { &mut *jc.machine };
    m.count = jc.budget.saturating_sub(jc.count);
    jc.ctx_ok = 0;
    jc.glued = 1;
    m.may_goto = jc.may_goto as u32;
    let r = f(m);
    jc.may_goto = m.may_goto as u64;
    let w = m.mem.windows_mut();
    jc.win = w.as_mut_ptr();
    jc.nwin = w.len() as u64;
    match r {
        Ok(v) => Some(v),
        Err(stop) => {
            jc.stop = Some(stop);
            jc.native_fault = FAULT_STOP;
            None
        }
    }
}

/// Splits `info` = `pc << 8 | size << 1 | write`.
fn unpack(info: u64) -> (usize, usize, bool) {
    (
        (info >> 8) as usize,
        ((info >> 1) & 0xf) as usize,
        info & 1 == 1,
    )
}

/// A load or store no open window allows at first sight: the context,
/// or a fault. Returns the loaded value.
pub(crate) extern "sysv64" fn mem_slow(jc: *mut JitCtx, addr: u64, info: u64, value: u64) -> u64 {
    let (pc, size, write) = unpack(info);
    // SAFETY: called by native code with its live context.
    let r = unsafe {
        with_machine(jc, |m| {
            if write {
                m.store(addr, size, value, pc).map(|()| 0)
            } else {
                m.load(addr, size, pc)
            }
        })
    };
    if !write && r.is_some() {
        // SAFETY: as above.
        unsafe { fill_ctx(&mut *jc) };
    }
    r.unwrap_or(0)
}

/// Fills the XDP context's field values for native code's loads (as
/// `ctx::load` gives them: data pointers as packet addresses;
/// `egress_ifindex` only for devmap programs).
pub(crate) fn fill_ctx(jc: &mut JitCtx) {
    // SAFETY: `jc` is a live context; the machine is not borrowed now.
    let m = unsafe { &*jc.machine };
    let crate::ctx::CtxState::Xdp {
        ingress_ifindex,
        rx_queue_index,
        egress_ifindex,
    } = m.ctx
    else {
        return;
    };
    let pkt = |o: usize| crate::mem::addr(crate::mem::PACKET, o as u64);
    jc.ctx_vals = [
        pkt(m.pkt.data),
        pkt(m.pkt.data_end),
        pkt(m.pkt.meta),
        ingress_ifindex as u64,
        rx_queue_index as u64,
        egress_ifindex as u64,
    ];
    let fields = if m.prog_type == nfkit_object::ProgType::Xdp {
        5
    } else {
        6
    };
    jc.ctx_len = 4 * fields;
    jc.ctx_ok = 1;
}

/// Helper `id` (or, `dynamic`, the one whose id is in register `id`)
/// called from op `pc`, arguments in `regs[1..=5]`; r0 goes to
/// `regs[0]`. A tail call sets `jump`; `bpf_loop` sets `loop_*` for
/// native code to run the callbacks.
pub(crate) extern "sysv64" fn helper(jc: *mut JitCtx, id: u64, pc: u64, dynamic: u64) -> u64 {
    // SAFETY: called by native code with its live context.
    unsafe { move_home(&mut *jc) };
    // SAFETY: called by native code with its live context; `regs` is
    // the machine's register file, 11 registers long.
    let (code, hid) = unsafe {
        let hid = if dynamic != 0 {
            *(*jc).regs.add((id & 15).min(10) as usize)
        } else {
            id
        };
        ((*jc).code, hid)
    };
    let pc = pc as usize;
    // SAFETY: as above; a shared borrow of the machine, ended here.
    let profile = unsafe {
        let m: &Machine = &*(*jc).machine;
        m.vm.config.profile
    };
    let is_loop =
        hid == LOOP as u64 && (dynamic == 0 || table::lookup(profile, hid as i64).is_some());
    let mut request = None;
    // SAFETY: as above.
    let next = unsafe {
        with_machine(jc, |m| {
            if is_loop && m.vm.config.profile == crate::config::Profile::Kernel {
                let a = [m.regs[1], m.regs[2], m.regs[3], m.regs[4]];
                match m.loop_args(a, pc)? {
                    Ok(cb) if a[0] > 0 => request = Some((a[0], cb, a[2])),
                    Ok(_) => m.regs[0] = 0,
                    Err(r0) => m.regs[0] = r0,
                }
                return Ok(pc + 1);
            }
            if dynamic != 0 {
                m.helper_checked(hid, pc, pc + 1)
            } else {
                m.helper(hid as i64, pc, pc + 1)
            }
        })
    };
    // SAFETY: as above; the machine is not borrowed any more.
    let ctx = unsafe { &mut *jc };
    ctx.jump = 0;
    let mut native = |op: usize, what: &str| -> u64 {
        // SAFETY: the code outlives the run.
        match unsafe { (*code).func_addr(op) } {
            Some(a) => a as u64,
            None => {
                ctx.stop = Some(Stop::Fault {
                    pc,
                    kind: RunErrorKind::Setup(format!("the JIT has no code at op {op} ({what})")),
                });
                ctx.native_fault = FAULT_STOP;
                0
            }
        }
    };
    if let Some((n, cb, cb_ctx)) = request {
        let addr = native(cb, "bpf_loop callback");
        ctx.loop_n = if addr != 0 { n } else { 0 };
        ctx.loop_cb = addr;
        ctx.loop_ctx = cb_ctx;
        ctx.loop_pc = pc as u64;
    } else if let Some(next) = next {
        if next != pc + 1 {
            // A tail call: continue at the entry's native code (the
            // helper returns an entry's first op).
            ctx.jump = native(next, "tail call");
        }
    }
    0
}

/// Helper `id` called from op `pc` when it is neither a tail call nor
/// `bpf_loop` (no control transfer to ask native code for): straight
/// into the machine's helper, without the generic call's tail-call and
/// loop bookkeeping. Arguments in `regs[1..=5]`, r0 to `regs[0]`.
pub(crate) extern "sysv64" fn helper_plain(jc: *mut JitCtx, id: u64, pc: u64) -> u64 {
    let pc = pc as usize;
    // SAFETY: called by native code with its live context.
    unsafe { move_home(&mut *jc) };
    // SAFETY: called by native code with its live context.
    let _ = unsafe {
        with_machine(jc, |m| match m.helper(id as i64, pc, pc + 1)? {
            next if next == pc + 1 => Ok(()),
            next => Err(Stop::Fault {
                pc,
                kind: RunErrorKind::Setup(format!(
                    "helper {id} at op {pc} continued at op {next}: the JIT called it as one \
                     that returns to the next op"
                )),
            }),
        })
    };
    0
}

/// A helper [`Machine::pure_helper`] serves (clock, random numbers,
/// CPU): its r0, without the generic helper path (it reads no argument,
/// touches no memory and cannot fault).
pub(crate) extern "sysv64" fn helper_pure(jc: *mut JitCtx, id: u64) -> u64 {
    // SAFETY: called by native code with its live context; the machine
    // is only read, and nothing else touches it meanwhile.
    let m = unsafe { &*(*jc).machine };
    m.pure_helper(id as i32).unwrap_or(0)
}

/// Map helper `id` (lookup, per-CPU lookup, update, delete) at op `pc`,
/// arguments in `regs[1..=4]`, r0 to `regs[0]`: straight into the map
/// code. A map helper cannot move the packet, so the context table
/// stays valid.
pub(crate) extern "sysv64" fn helper_map(jc: *mut JitCtx, id: u64, pc: u64) -> u64 {
    // SAFETY: called by native code with its live context.
    unsafe { move_home(&mut *jc) };
    // SAFETY: as above.
    let ctx_ok = unsafe { (*jc).ctx_ok };
    let _ = unsafe {
        with_machine(jc, |m| {
            m.regs[0] = m.map_helper(id as i32, pc as usize)?;
            Ok(())
        })
    };
    // SAFETY: as above; the machine is not borrowed any more.
    unsafe { (*jc).ctx_ok = ctx_ok };
    0
}

/// An atomic operation at op `pc` (all registers in `regs`).
pub(crate) extern "sysv64" fn atomic(jc: *mut JitCtx, info: u64, off: u64) -> u64 {
    // info = pc << 24 | size << 16 | aux << 8 | dst << 4 | src
    let pc = (info >> 24) as usize;
    let size = ((info >> 16) & 0xff) as usize;
    let aux = ((info >> 8) & 0xff) as u8;
    let (d, s) = (((info >> 4) & 15) as usize, (info & 15) as usize);
    // SAFETY: called by native code with its live context.
    unsafe { move_home(&mut *jc) };
    // SAFETY: as above.
    let _ = unsafe { with_machine(jc, |m| m.atomic(d, s, aux, off as i32, size, pc)) };
    0
}

/// `LD_ABS`/`LD_IND` at op `pc`: r0 in `regs[0]`.
pub(crate) extern "sysv64" fn ld_abs(jc: *mut JitCtx, info: u64, k: u64) -> u64 {
    let (pc, size, _) = unpack(info);
    // SAFETY: called by native code with its live context.
    unsafe { move_home(&mut *jc) };
    // SAFETY: as above.
    let _ = unsafe { with_machine(jc, |m| m.ld_abs(size, k as i64, pc)) };
    0
}

/// The budget runs out in the block starting at op `pc`: the interpreter
/// runs from there (all registers in `regs`) and stops where the budget
/// ends, with the interpreter's exact count, fault and side effects.
pub(crate) extern "sysv64" fn budget_out(jc: *mut JitCtx, pc: u64) -> u64 {
    // SAFETY: called by native code with its live context.
    unsafe { move_home(&mut *jc) };
    // SAFETY: called by native code with its live context.
    let _ = unsafe {
        with_machine(jc, |m| {
            match m.exec(&m.vm.clone().program.ops, pc as usize, false) {
                Ok(v) => Err::<(), _>(Stop::Exit(v)),
                Err(s) => Err(s),
            }
        })
    };
    // SAFETY: as above.
    unsafe { (*jc).handed_off = true };
    0
}

/// A run on the caller's buffer in place that reaches the interpreter's
/// code (the interpreter takes the run over, or a helper, an atomic or a
/// legacy packet load runs): the packet moves into the runner's buffer
/// (where the interpreter's memory code and the helpers reach it), the
/// packet window and `packet_base` point there again, and the run goes
/// on there and is copied back by the caller. A no-op once moved (or
/// when the run was never in place), so every glue entry that reaches
/// program memory through the machine calls it first.
///
/// # Safety
/// `jc` is the live context of a run; `in_place`, when not null, is the
/// caller's buffer of `in_place_len` bytes, borrowed mutably for the run.
unsafe fn move_home(jc: &mut JitCtx) {
    if jc.in_place.is_null() {
        return;
    }
    // SAFETY: see the function's contract; native code is suspended.
    let m = unsafe { &mut *jc.machine };
    let bytes = unsafe { std::slice::from_raw_parts(jc.in_place, jc.in_place_len as usize) };
    let (off, pkt) = (jc.in_place_off as usize, crate::mem::PACKET);
    let home = m.mem.region(pkt).map(|r| {
        // SAFETY: the packet region's buffer is the runner's own, reached
        // only through the runner borrowed mutably for this run.
        let _ = unsafe { r.buf.write_unshared(off, bytes) };
        r.buf.host_addr()
    });
    if let (Some(base), Some(w)) = (home, m.mem.windows_mut().get_mut(pkt as usize)) {
        w.base = base;
        // Proven accesses after this (native code goes on after a
        // helper) reach the runner's buffer too.
        jc.packet_base = (base as u64).wrapping_sub((pkt as u64) << 32);
    }
    jc.forget_place();
}

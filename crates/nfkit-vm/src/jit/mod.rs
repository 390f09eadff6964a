//! The x86-64 JIT: compiles a checked [`Program`] to native code behind
//! the same run API as the interpreter, which stays the reference (and
//! the fallback on other architectures and for what the JIT refuses).
//!
//! * `emit`: the code generator (register mapping, inline window checks,
//!   calls, the budget).
//! * `state`: [`JitCtx`](state::JitCtx), the per-run state native code
//!   reaches through `r12`.
//! * `glue`: the Rust functions native code calls (helpers, context
//!   fields, faults, atomics).
//! * `pages`: the executable memory code is copied to, kept across
//!   program versions.
//!
//! Safety: native code touches memory only at `base + off` of a window
//! whose check passed (or r10-relative inside the live frame), windows lie
//! inside guard-paged buffers, and code pages are written, then made
//! read+execute before they run, never writable and executable at once
//! (`pages`).

#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
mod emit;
mod glue;
#[cfg(target_arch = "x86_64")]
mod pages;
mod state;

use crate::check::EntryInfo;
use crate::config::{EngineUse, VmConfig};
use crate::error::RunErrorKind;
use crate::interp::{Machine, Step, Stop};
use crate::mem;
use crate::prog::Program;

/// A [`JitCtx`](state::JitCtx) a runner keeps across runs of entry
/// `entry`, whose native code starts at `target`.
pub(crate) struct Kept {
    jc: state::JitCtx,
    entry: usize,
    target: usize,
}

impl Kept {
    /// A context for runs of the VM configured by `config`, its per-run
    /// fields (pointers included) written by each run.
    pub(crate) fn new(config: &VmConfig) -> Box<Kept> {
        Box::new(Kept {
            jc: state::JitCtx::new(config.max_frames as u64, config.may_goto_budget as u64),
            entry: usize::MAX,
            target: 0,
        })
    }
}

// SAFETY: the context's pointers (machine, registers, windows, code, the
// caller's buffer of an in-place run) are written from the run's own
// exclusive borrows before native code runs and are not dereferenced
// between runs; the runner that keeps it is borrowed mutably for a run.
unsafe impl Send for Kept {}
unsafe impl Sync for Kept {}

/// The fault of a run whose entry has no native code.
#[cold]
fn no_code(start: usize) -> Stop {
    Stop::Fault {
        pc: start,
        kind: RunErrorKind::Setup(format!("the JIT has no code at op {start}")),
    }
}

/// A program compiled to native code.
pub(crate) struct Code {
    /// The code (kept alive: `enter` and `funcs` point into it).
    #[cfg(target_arch = "x86_64")]
    _pages: pages::CodePages,
    /// Address of the entry stub in `buf` (the buffer never moves).
    enter: usize,
    /// `(first op, address)` of every function, by op.
    funcs: Vec<(usize, usize)>,
    /// One past the last op of each op's basic block.
    block_end: Vec<u32>,
    /// Some packet access runs unchecked on the checker's proof.
    proofs: bool,
}

fn is_tc(t: nfkit_object::ProgType) -> bool {
    matches!(
        t,
        nfkit_object::ProgType::SchedCls | nfkit_object::ProgType::SchedAct
    )
}

/// Compiles `program`; per entry, what will run it.
pub(crate) fn compile(
    program: &Program,
    entries: &[EntryInfo],
    config: &VmConfig,
    statics: &[Option<crate::vm::StaticValues>],
) -> (Option<Code>, Vec<EngineUse>) {
    match build(program, config, statics) {
        Ok(code) => {
            let uses = entries
                .iter()
                .map(|e| match &e.refused {
                    Some(_) => EngineUse::Interp,
                    None => EngineUse::Jit,
                })
                .collect();
            (Some(code), uses)
        }
        Err(why) => (
            None,
            entries
                .iter()
                .map(|_| EngineUse::Fallback(why.clone()))
                .collect(),
        ),
    }
}

/// Native bytes per op the first mapping is sized for (the switch's
/// test programs take about 127).
#[cfg(target_arch = "x86_64")]
const CODE_BYTES_PER_OP: usize = 160;

#[cfg(target_arch = "x86_64")]
fn build(
    program: &Program,
    config: &VmConfig,
    statics: &[Option<crate::vm::StaticValues>],
) -> Result<Code, String> {
    let kernel = config.profile == crate::config::Profile::Kernel;
    let block_len = emit::blocks(program);
    let block_end = emit::block_ends(&block_len);
    // Code is assembled for the address it runs at: a mapping is taken
    // first (of a size most programs fit), and a program that outgrows
    // it is assembled again for a larger one.
    let guess = program.ops.len() * CODE_BYTES_PER_OP + 4096;
    let map_err = |e: std::io::Error| format!("cannot map code memory: {e}");
    let mut pages = pages::CodePages::take(guess).map_err(map_err)?;
    let generated = loop {
        let g = emit::Emitter::new(
            program,
            config.may_goto_budget,
            kernel,
            statics,
            pages.addr(),
            block_len.clone(),
            guess,
        )?
        .generate()?;
        if g.code.len() <= pages.capacity() {
            break g;
        }
        pages = pages::CodePages::take(g.code.len()).map_err(map_err)?;
    };
    pages
        .write(&generated.code)
        .map_err(|e| format!("cannot make the code executable: {e}"))?;
    let base = pages.addr();
    Ok(Code {
        enter: base + generated.enter.0,
        funcs: generated
            .funcs
            .iter()
            .map(|&(op, o)| (op, base + o.0))
            .collect(),
        _pages: pages,
        block_end,
        proofs: program.packet_proven.iter().any(|&p| p) || program.ctx_field.iter().any(|&p| p),
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn build(
    _program: &Program,
    _config: &VmConfig,
    _statics: &[Option<crate::vm::StaticValues>],
) -> Result<Code, String> {
    Err("the JIT generates x86-64 code only".into())
}

impl Code {
    /// Native address of the function starting at op `op`.
    pub(crate) fn func_addr(&self, op: usize) -> Option<usize> {
        let i = self.funcs.binary_search_by_key(&op, |&(o, _)| o).ok()?;
        Some(self.funcs[i].1)
    }

    /// Runs the compiled code from op `start` (an entry's first op) on
    /// machine `m`, whose registers, regions and frame 0 are set up;
    /// `None` when native code must not run this context (the checker's
    /// packet proofs assume `r1` is the entry's own kind of context: an
    /// XDP program given raw memory or a socket buffer runs on the
    /// interpreter).
    #[inline(always)]
    pub(crate) fn exec(&self, m: &mut Machine, start: usize) -> Option<Step<u64>> {
        let own_ctx = match (&m.ctx, m.prog_type) {
            (crate::ctx::CtxState::Xdp { .. }, nfkit_object::ProgType::Xdp) => true,
            (crate::ctx::CtxState::Skb(_), t) => t != nfkit_object::ProgType::Xdp,
            (crate::ctx::CtxState::None, t) => t != nfkit_object::ProgType::Xdp && !is_tc(t),
            _ => false,
        };
        if self.proofs && (!own_ctx || m.regs[1] != mem::addr(mem::CTX, 0)) {
            return None;
        }
        Some(self.exec_native(m, start))
    }

    fn exec_native(&self, m: &mut Machine, start: usize) -> Step<u64> {
        let Some(target) = self.func_addr(start) else {
            return Err(no_code(start));
        };
        let budget = m.budget;
        let machine: *mut Machine = m;
        // SAFETY: `machine` is the exclusive borrow `m`, not used again
        // until native code returns (`conclude` takes it back).
        let mut jc = self.fresh_ctx(unsafe { &mut *machine });
        glue::fill_ctx(&mut jc);
        let r0 = self.enter(&mut jc, target);
        // SAFETY: native code has returned; the borrow is ours again.
        self.conclude(unsafe { &mut *machine }, &mut jc, r0, budget)
    }

    /// A run's context for machine `m` (its registers, windows, count and
    /// `may_goto` budget as they are now).
    fn fresh_ctx(&self, m: &mut Machine) -> state::JitCtx {
        let budget = m.budget;
        let stack_base = m
            .mem
            .region(mem::STACK)
            .map_or(0, |r| r.buf.host_addr() as u64);
        let packet_base = m.mem.window(mem::PACKET).map_or(0, |w| w.base as u64);
        let (max_frames, may_goto_budget) = (
            m.vm.config.max_frames as u64,
            m.vm.config.may_goto_budget as u64,
        );
        let mut jc = state::JitCtx::new(max_frames, may_goto_budget);
        jc.count = budget.saturating_sub(m.count);
        jc.budget = budget;
        jc.may_goto = m.may_goto as u64;
        jc.packet_base = packet_base.wrapping_sub((mem::PACKET as u64) << 32);
        jc.frame_base = stack_base.wrapping_sub((mem::STACK as u64) << 32);
        jc.statics_cpu = state::statics_cpu(m);
        jc.regs = m.regs.as_mut_ptr();
        let win = m.mem.windows_mut();
        jc.win = win.as_mut_ptr();
        jc.nwin = win.len() as u64;
        jc.machine = m;
        jc.code = self;
        jc
    }

    /// The lean entry of the XDP fast path: machine `m` is reset for a
    /// run of the entry at op `start` (index `ei`) on its own XDP context
    /// (`r1` the context, the packet window at `pkt`), so none of
    /// [`Code::exec`]'s checks apply. The context `kept` is built once
    /// per runner (made with the buffers, so a run allocates nothing);
    /// a run writes only its per-run fields. `in_place`: the packet
    /// window is the caller's buffer (first byte, offset in the packet
    /// region, length) for this run; after it, [`Code::leave_place`]
    /// says whether it stayed there.
    #[inline(always)]
    pub(crate) fn run_xdp(
        &self,
        kept: &mut Option<Box<Kept>>,
        m: &mut Machine,
        (ei, start): (usize, usize),
        xdp: [u64; state::XDP_CTX_FIELDS],
        in_place: Option<(*mut u8, usize, usize)>,
    ) -> Step<u64> {
        let k = kept.get_or_insert_with(|| Kept::new(&m.vm.config));
        if k.entry != ei {
            let Some(target) = self.func_addr(start) else {
                return Err(no_code(start));
            };
            k.entry = ei;
            k.target = target;
        }
        let budget = m.budget;
        let stack_base = m
            .mem
            .region(mem::STACK)
            .map_or(0, |r| r.buf.host_addr() as u64);
        let packet_base = m.mem.window(mem::PACKET).map_or(0, |w| w.base as u64);
        let jc = &mut k.jc;
        jc.count = budget.saturating_sub(m.count);
        jc.budget = budget;
        jc.depth = 0;
        jc.deepest = 0;
        jc.may_goto = m.may_goto as u64;
        jc.native_fault = state::FAULT_NONE;
        jc.fault_pc = 0;
        jc.exit_pc = 0;
        jc.packet_base = packet_base.wrapping_sub((mem::PACKET as u64) << 32);
        jc.frame_base = stack_base.wrapping_sub((mem::STACK as u64) << 32);
        jc.jump = 0;
        jc.loop_n = 0;
        jc.ctx_vals = xdp;
        jc.ctx_len = 4 * 5;
        jc.ctx_ok = 1;
        jc.stop = None;
        jc.handed_off = false;
        jc.glued = 0;
        (jc.in_place, jc.in_place_off, jc.in_place_len) = match in_place {
            Some((p, off, len)) => (p, off as u64, len as u64),
            None => (std::ptr::null_mut(), 0, 0),
        };
        jc.statics_cpu = state::statics_cpu(m);
        jc.regs = m.regs.as_mut_ptr();
        let win = m.mem.windows_mut();
        jc.win = win.as_mut_ptr();
        jc.nwin = win.len() as u64;
        let machine: *mut Machine = m;
        jc.machine = machine;
        jc.code = self;
        let r0 = self.enter(jc, k.target);
        // SAFETY: native code has returned; `m` was not used meanwhile.
        self.conclude(unsafe { &mut *machine }, jc, r0, budget)
    }

    /// The armed run of the XDP fast path (`vm::fast::Armed`): `kept` is
    /// as the last clean run of the same entry on the same runner left it
    /// (no glue reached, no fault, nothing moved: depth, `native_fault`,
    /// `jump`, `stop`, the context table and its validity, the target are
    /// as [`Code::run_xdp`] sets them), so only what differs between two
    /// such runs is written: the count and `may_goto` budget, the packet
    /// (its base, its end in the context table, the caller's buffer) and
    /// the machine's pointers. `Ok((r0, instructions))`: the run reached
    /// an `exit` without the glue, the machine untouched; `Err(r0)`: it reached the glue or
    /// faulted, and [`Code::conclude_kept`] ends it as any other run.
    #[inline(always)]
    pub(crate) fn run_armed(
        &self,
        k: &mut Kept,
        m: &mut Machine,
        budget: u64,
        (packet_base, data_end): (u64, u64),
        (p, off, len): (*mut u8, usize, usize),
    ) -> Result<(u64, u64), u64> {
        let jc = &mut k.jc;
        jc.count = budget;
        jc.may_goto = jc.may_goto_budget;
        jc.packet_base = packet_base;
        jc.ctx_vals[1] = data_end;
        (jc.in_place, jc.in_place_off, jc.in_place_len) = (p, off as u64, len as u64);
        jc.regs = m.regs.as_mut_ptr();
        let win = m.mem.windows_mut();
        jc.win = win.as_mut_ptr();
        jc.nwin = win.len() as u64;
        jc.machine = m;
        let r0 = self.enter(jc, k.target);
        if jc.native_fault == state::FAULT_NONE && jc.glued == 0 {
            // No pointer to the caller's buffer outlives the run.
            jc.forget_place();
            Ok((r0, budget.saturating_sub(jc.count)))
        } else {
            Err(r0)
        }
    }

    /// Ends an armed run that reached the glue or faulted
    /// ([`Code::run_armed`] gave `Err(r0)`), as [`Code::run_xdp`] ends
    /// every run.
    pub(crate) fn conclude_kept(
        &self,
        m: &mut Machine,
        k: &mut Kept,
        r0: u64,
        budget: u64,
    ) -> Step<u64> {
        self.conclude(m, &mut k.jc, r0, budget)
    }

    /// Whether the last run of `kept` reached no glue function.
    #[inline(always)]
    pub(crate) fn unglued(kept: &Option<Box<Kept>>) -> bool {
        kept.as_ref().is_some_and(|k| k.jc.glued == 0)
    }

    /// Whether the last run of `kept` ended with its packet still in the
    /// caller's buffer (no hand-off to the interpreter moved it into the
    /// runner's own). Forgets the caller's buffer either way, so no
    /// pointer to it outlives the run.
    #[inline(always)]
    pub(crate) fn leave_place(kept: &mut Option<Box<Kept>>) -> bool {
        kept.as_mut().is_some_and(|k| k.jc.forget_place())
    }

    /// After native code returned `r0`: the machine's count, depth and
    /// `may_goto` budget from `jc`, and how the run ended.
    #[inline(always)]
    fn conclude(&self, m: &mut Machine, jc: &mut state::JitCtx, r0: u64, budget: u64) -> Step<u64> {
        // (The spill area is the machine's registers: r1..r10 are as the
        // last glue call saw them, r0 is set below.)
        m.deepest = m.deepest.max(jc.deepest as usize);
        m.may_goto = jc.may_goto as u32;
        if !jc.handed_off {
            m.count = budget.saturating_sub(jc.count);
        }
        let stop = match jc.native_fault {
            state::FAULT_NONE => {
                m.regs[0] = r0;
                if let Some(l) = m.lock_held.take() {
                    m.unlock(l);
                    return Err(Stop::Fault {
                        pc: jc.exit_pc as usize,
                        kind: RunErrorKind::Helper {
                            helper: "spin_lock".into(),
                            why: "the program ended holding a spin lock".into(),
                        },
                    });
                }
                return Ok(r0);
            }
            state::FAULT_DEPTH => Stop::Fault {
                pc: jc.fault_pc as usize,
                kind: RunErrorKind::CallDepth {
                    limit: m.vm.config.max_frames,
                },
            },
            _ => jc.stop.take().unwrap_or(Stop::Fault {
                pc: jc.fault_pc as usize,
                kind: RunErrorKind::Setup("native code stopped without a reason".into()),
            }),
        };
        // The count went up by the whole block at its start: take back
        // the ops after the one that stopped the run.
        if !jc.handed_off {
            let pc = match &stop {
                Stop::Fault { pc, .. } => Some(*pc),
                Stop::Exit(_) => None,
            };
            if let Some(end) = pc.and_then(|pc| self.block_end.get(pc).map(|&e| (pc, e))) {
                m.count = m
                    .count
                    .saturating_sub((end.1 as usize).saturating_sub(end.0 + 1) as u64);
            }
        }
        Err(stop)
    }

    #[cfg(target_arch = "x86_64")]
    fn enter(&self, jc: &mut state::JitCtx, target: usize) -> u64 {
        type Enter = unsafe extern "sysv64" fn(*mut state::JitCtx, usize) -> u64;
        // SAFETY: `enter` is the address of the entry stub generated with
        // this signature in `buf`, which is executable and outlives the
        // call.
        unsafe {
            let f: Enter = std::mem::transmute(self.enter);
            f(jc, target)
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn enter(&self, _jc: &mut state::JitCtx, _target: usize) -> u64 {
        0
    }
}

//! The per-packet fast path of [`Runner::run_packet`](crate::Runner::run_packet):
//! an XDP run on a runner whose machine, regions and packet buffer are
//! already set up by an earlier run of the same shape. Such a run only
//! copies the frame into the placed packet buffer (a plain `memcpy`: the
//! buffer is the runner's own), moves the packet window, clears what the
//! last run may have dirtied, resets the machine and runs; everything
//! else (the checks of the run's arguments, laying out the context,
//! placing the regions) was done once. Anything out of the ordinary
//! (another context kind, metadata, a packet too big for the buffer, a
//! traced run, the first run) takes the general path, which gives the
//! same result.

use super::{clear_stack, Buffers, Layout, Placed, Shape, Vm};
use crate::config::{Engine, EngineUse, RunOptions};
use crate::ctx::{CtxState, PacketPtrs, XdpMd};
use crate::interp::Stop;
use crate::mem::{self, GuardedBuf, RegionKind};
use crate::result::RunOutcome;
use nfkit_object::ProgType;
use std::sync::Arc;

/// The `xdp_md` fields of a fast run (what [`XdpMd`] gives besides the
/// packet).
#[derive(Clone, Copy)]
pub(crate) struct XdpFields {
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
    pub headroom: usize,
    pub tailroom: usize,
}

impl XdpFields {
    /// The fields of `md`, if it has no metadata (runs with metadata take
    /// the general path).
    #[inline(always)]
    pub fn of(md: &XdpMd<'_>) -> Option<XdpFields> {
        md.meta.is_empty().then_some(XdpFields {
            ingress_ifindex: md.ingress_ifindex,
            rx_queue_index: md.rx_queue_index,
            egress_ifindex: md.egress_ifindex,
            headroom: md.headroom,
            tailroom: md.tailroom,
        })
    }

    /// What [`XdpMd::new`] makes for a packet of `len` bytes.
    #[inline(always)]
    pub fn default_for(len: usize) -> XdpFields {
        XdpFields {
            ingress_ifindex: 1,
            rx_queue_index: 0,
            egress_ifindex: 0,
            headroom: crate::ctx::XDP_HEADROOM,
            tailroom: 4096usize
                .saturating_sub(crate::ctx::XDP_HEADROOM + 320)
                .saturating_sub(len),
        }
    }
}

impl Vm {
    /// Whether XDP entry `ei` can run on a packet of `len` bytes with
    /// `md` the fast way ([`Vm::run_xdp_fast`]); when not, the run takes
    /// the general path. (A separate check, so the fast run builds its
    /// outcome in place instead of moving it through an `Option`.)
    #[inline(always)]
    pub(crate) fn fast_ok(
        &self,
        bufs: &Buffers,
        ei: usize,
        len: usize,
        md: &XdpFields,
        opts: &RunOptions,
    ) -> bool {
        let inner = &*self.inner;
        let Some(e) = inner.entries.get(ei) else {
            return false;
        };
        let Some(need) = md
            .headroom
            .checked_add(len)
            .and_then(|n| n.checked_add(md.tailroom))
        else {
            return false;
        };
        let placed = Placed {
            ctx: RegionKind::Ctx,
            has_pkt: true,
            raw: false,
            socket: false,
            buf: Arc::as_ptr(&bufs.packet) as usize,
        };
        e.prog_type == ProgType::Xdp
            && e.refused.is_none()
            && !opts.trace
            && opts.cpu < inner.config.ncpus
            && bufs.placed == Some(placed)
            && bufs.packet.len() >= need
            && bufs.machine.is_some()
            && bufs.stack.len() == inner.config.max_frames * crate::config::FRAME_SIZE
    }

    /// Runs XDP entry `ei` on `packet` the fast way; [`Vm::fast_ok`]
    /// said it can.
    #[inline(always)]
    pub(crate) fn run_xdp_fast(
        &self,
        bufs: &mut Buffers,
        ei: usize,
        packet: &mut Vec<u8>,
        md: XdpFields,
        opts: &RunOptions,
    ) -> RunOutcome {
        let inner = &*self.inner;
        let (Some(e), Some(_)) = (inner.entries.get(ei), bufs.machine.as_deref()) else {
            return not_fast();
        };
        let len = packet.len();
        let headroom = md.headroom;
        let data_end = headroom + len;
        clear_stack(&bufs.stack, bufs.stack_dirty, inner.facts.stack_reach);
        bufs.stack_dirty = 0;
        let jit_direct = !opts.interp && matches!(inner.engines.get(ei), Some(EngineUse::Jit));
        if inner.facts.calls_nothing {
            return self.run_xdp_lean::<false>(bufs, (ei, e), packet, md, opts);
        }
        if jit_direct && inner.jit.is_some() {
            return self.run_xdp_lean::<true>(bufs, (ei, e), packet, md, opts);
        }
        let pb = &bufs.packet;
        if inner.facts.moves_head {
            let _ = pb.fill(0, headroom, 0);
        }
        copy_in(pb, headroom, packet);
        let pkt = PacketPtrs {
            meta: headroom,
            data: headroom,
            data_end,
            skb_len: len,
        };
        let Some(m) = bufs.machine.as_deref_mut() else {
            return not_fast();
        };
        m.mem.reset(inner.base_mem.len());
        m.mem.set_window(mem::CTX, 0, 0);
        m.mem.set_window(mem::PACKET, headroom, data_end);
        let shape = Shape {
            pkt,
            headroom,
            len,
            has_pkt: true,
            socket: false,
        };
        let mut layout = Layout {
            shape,
            tailroom: md.tailroom,
            ctx: CtxState::Xdp {
                ingress_ifindex: md.ingress_ifindex,
                rx_queue_index: md.rx_queue_index,
                egress_ifindex: md.egress_ifindex,
            },
            args: [mem::addr(mem::CTX, 0), 0],
            raw: false,
        };
        self.reset_machine(m, e, &mut layout, opts);
        let jit = match (&inner.jit, inner.engines.get(ei)) {
            (Some(code), Some(EngineUse::Jit)) if !opts.interp => Some(code),
            _ => None,
        };
        let (outcome, engine) = match jit {
            Some(code) => {
                let xdp = xdp_words(headroom, data_end, md);
                let step = code.run_xdp(&mut bufs.jit, m, (ei, e.start_op), xdp, None);
                (step, Engine::Jit)
            }
            None => (
                m.exec(&inner.program.ops, e.start_op, false),
                Engine::Interp,
            ),
        };
        // What `finish` does, for an XDP run (no socket buffer to give
        // back; the entry's frame stays open).
        let result = self.result_of(m, outcome, e);
        let mut shape = shape;
        shape.pkt = m.pkt;
        for d in 1..=m.deepest {
            m.mem.close_frame(d);
        }
        let head_delta = m.pkt.data as i64 - headroom as i64;
        let redirect = m.redirect.take();
        let insns = m.count;
        bufs.stack_dirty = m.deepest + 1;
        m.ctx = CtxState::None;
        bufs.last_shape = shape;
        let packet_written =
            super::write_back(&bufs.packet, &shape, inner.facts.writes_packet, packet);
        RunOutcome {
            result,
            head_delta,
            packet_written,
            redirect,
            skb: None,
            insns,
            engine,
        }
    }
}

// The lean run sets the context's and the packet's windows as a pair.
const _: () = assert!(mem::CTX + 1 == mem::PACKET);

/// The outcome of a fast run whose conditions [`Vm::fast_ok`] checked
/// but that found them broken (not reached).
#[cold]
fn not_fast() -> RunOutcome {
    RunOutcome::setup_failed(crate::error::RunErrorKind::Setup(
        "the fast path's conditions do not hold".into(),
    ))
}

impl Vm {
    /// The lean run: of a program that calls nothing (`Facts::calls_nothing`)
    /// on either engine, and the direct run of any program on the JIT.
    /// For a program that calls nothing no helper can have changed the
    /// machine's helper state (network state, clock/random overrides,
    /// locks, reservations, side effects, dynamic regions) in any run, so
    /// only what a run reads is set: registers, count and budget, the
    /// context and the packet's pointers; for one that calls helpers the
    /// helper state is reset too, each part only where the last run left
    /// something (`Vm::reset_helper_state`; `HELPERS`: the program calls
    /// something). On the JIT a program without
    /// atomics runs on the caller's buffer in place: the packet window's
    /// base is the caller's bytes for the run (the same offsets, headroom
    /// and bounds as in the runner's buffer), so nothing is copied in or
    /// out. Native code reaches the packet only through its inline window
    /// checks, the checker's proofs and its inline array lookups (whose
    /// key read is a window check), all bounded by that window; an access
    /// the window refuses goes to the interpreter's code, which refuses it
    /// the same way. Anything that reaches program memory through the
    /// interpreter's code (a helper but the clock/random/CPU ones, an
    /// atomic, a legacy packet load, the interpreter taking over when the
    /// budget runs out mid-block) first moves the packet into the
    /// runner's buffer (`glue::move_home`: the window and the proofs'
    /// base point there from then on), and the run's end copies it back
    /// as on any other run. The window points back at the runner's buffer
    /// before this returns.
    #[inline(always)]
    fn run_xdp_lean<const HELPERS: bool>(
        &self,
        bufs: &mut Buffers,
        (ei, e): (usize, &crate::check::EntryInfo),
        packet: &mut Vec<u8>,
        md: XdpFields,
        opts: &RunOptions,
    ) -> RunOutcome {
        let inner = &*self.inner;
        let len = packet.len();
        let headroom = md.headroom;
        let data_end = headroom + len;
        let jit = match (&inner.jit, inner.engines.get(ei)) {
            (Some(code), Some(EngineUse::Jit)) if !opts.interp => Some(code),
            _ => None,
        };
        let budget = opts.budget.unwrap_or(inner.config.budget);
        // (A constant: the call-free run compiles without the helpers' part.)
        let helpers = HELPERS;
        let in_place = jit.is_some() && !inner.facts.atomics;
        let own = bufs.packet.host_addr();
        if helpers && inner.facts.moves_head {
            // The headroom a helper may move `data` into (in the runner's
            // buffer, where the helper runs) holds nothing of an earlier run.
            let _ = bufs.packet.fill(0, headroom, 0);
        }
        if !in_place {
            copy_in(&bufs.packet, headroom, packet);
        }
        let Some(m) = bufs.machine.as_deref_mut() else {
            return not_fast();
        };
        m.mem.reset(inner.base_mem.len());
        if helpers {
            self.reset_helper_state(m, opts);
        }
        let base = if in_place {
            (packet.as_mut_ptr() as usize).wrapping_sub(headroom)
        } else {
            own
        };
        if let Some([.., ctx, pkt]) = m.mem.windows_mut().get_mut(..=mem::PACKET as usize) {
            ctx.lo = 0;
            ctx.hi = 0;
            ctx.whi = 0;
            // XDP's packet region is writable (placed so by the general
            // path, `Placed` checked by `fast_ok`).
            *pkt = mem::Window {
                base,
                lo: headroom as u64,
                hi: data_end as u64,
                whi: data_end as u64,
            };
        }
        let pkt = PacketPtrs {
            meta: headroom,
            data: headroom,
            data_end,
            skb_len: len,
        };
        m.frames.clear();
        m.regs = [0; 16];
        m.regs[1] = mem::addr(mem::CTX, 0);
        m.regs[10] = mem::addr(
            mem::STACK,
            (inner.config.max_frames * crate::config::FRAME_SIZE) as u64,
        );
        m.count = 0;
        m.budget = budget;
        m.cpu = opts.cpu;
        m.prog_type = e.prog_type;
        m.may_goto = inner.config.may_goto_budget;
        m.ctx = CtxState::Xdp {
            ingress_ifindex: md.ingress_ifindex,
            rx_queue_index: md.rx_queue_index,
            egress_ifindex: md.egress_ifindex,
        };
        m.pkt = pkt;
        m.pkt_min = crate::ctx::XDP_FRAME_SIZE.min(headroom);
        m.pkt_max = data_end + md.tailroom;
        m.mac = headroom;
        m.deepest = 0;
        // What the runner shows of the run (`Runner::tunnel_key`) is the
        // options' tunnel key, as after any other run.
        if m.net.tunnel.is_some() || opts.tunnel_key.is_some() {
            m.net.tunnel = opts.tunnel_key.clone();
        }
        if !m.trace.is_empty() {
            m.trace.clear();
        }
        let (outcome, engine) = match jit {
            Some(code) => {
                let xdp = xdp_words(headroom, data_end, md);
                let place = in_place.then_some((packet.as_mut_ptr(), headroom, len));
                let step = code.run_xdp(&mut bufs.jit, m, (ei, e.start_op), xdp, place);
                (step, Engine::Jit)
            }
            None => (
                m.exec(&inner.program.ops, e.start_op, false),
                Engine::Interp,
            ),
        };
        let lean = Lean {
            ei,
            e,
            in_place,
            own,
            headroom,
            len,
        };
        self.lean_end::<HELPERS>(bufs, lean, outcome, engine, packet, opts)
    }

    /// The end of a lean run (and of an armed run that reached the glue
    /// or faulted): the outcome, the packet copied back unless the run
    /// stayed in place, the buffers' record of the run. A call-free run
    /// that ended at an `exit` (on the JIT: in place and clear of the
    /// glue) arms the runner for the next ([`Armed`]).
    #[inline(always)]
    fn lean_end<const HELPERS: bool>(
        &self,
        bufs: &mut Buffers,
        l: Lean<'_>,
        outcome: crate::interp::Step<u64>,
        engine: Engine,
        packet: &mut Vec<u8>,
        opts: &RunOptions,
    ) -> RunOutcome {
        let inner = &*self.inner;
        let (e, in_place, own, headroom, len) = (l.e, l.in_place, l.own, l.headroom, l.len);
        let helpers = HELPERS;
        // Still on the caller's buffer, unless the interpreter took the
        // run over (then the packet is in the runner's buffer).
        let unglued = in_place && crate::jit::Code::unglued(&bufs.jit);
        let stayed = in_place && crate::jit::Code::leave_place(&mut bufs.jit);
        let Some(m) = bufs.machine.as_deref_mut() else {
            return not_fast();
        };
        if in_place {
            // The caller's buffer is the packet no longer.
            if let Some(w) = m.mem.windows_mut().get_mut(mem::PACKET as usize) {
                w.base = own;
            }
        }
        let result = if helpers {
            // Locks and reservations a helper left, as any run's end.
            self.result_of(m, outcome, e)
        } else {
            match outcome {
                Ok(v) | Err(Stop::Exit(v)) => Ok(v),
                Err(Stop::Fault { pc, kind }) => {
                    Err(self.fault(pc, kind, nfkit_abi::hook::XDP_ABORTED as u64))
                }
            }
        };
        // (Only helpers move the head or redirect.)
        let head_delta = m.pkt.data as i64 - headroom as i64;
        let redirect = if helpers { m.redirect.take() } else { None };
        for d in 1..=m.deepest {
            m.mem.close_frame(d);
        }
        let insns = m.count;
        bufs.stack_dirty = m.deepest + 1;
        let shape = Shape {
            // A helper may have moved the packet's ends (only after it
            // moved the packet home: a run that stayed has them as set).
            pkt: m.pkt,
            headroom,
            len,
            has_pkt: true,
            socket: false,
        };
        bufs.last_shape = shape;
        // A JIT run arms only in place and clear of the glue (what the
        // armed JIT run assumes); an interpreter run of a program that
        // calls nothing leaves nothing behind but registers, count and
        // `may_goto` budget, which the armed interpreter run sets.
        let clean = match engine {
            Engine::Jit => in_place && stayed && unglued,
            Engine::Interp => !in_place,
        };
        if !helpers
            && clean
            && bufs.armed.is_none()
            && result.is_ok()
            && m.deepest == 0
            && m.frames.is_empty()
            && m.trace.is_empty()
            && m.net.tunnel.is_none()
        {
            // The machine is as this run found it but for r0 (which the
            // next run must find zero, as a reset gives it) and the
            // packet's end: the next run of this shape needs no reset.
            if let CtxState::Xdp {
                ingress_ifindex,
                rx_queue_index,
                egress_ifindex,
            } = m.ctx
            {
                m.regs[0] = 0;
                bufs.armed = Some(Armed {
                    ei: l.ei,
                    jit: engine == Engine::Jit,
                    interp: opts.interp,
                    ingress_ifindex,
                    rx_queue_index,
                    egress_ifindex,
                    headroom,
                    room: bufs.packet.len(),
                    budget: m.budget,
                    cpu: opts.cpu,
                    own,
                });
            }
        }
        let packet_written = if stayed {
            inner.facts.writes_packet
        } else {
            super::write_back(&bufs.packet, &shape, inner.facts.writes_packet, packet)
        };
        RunOutcome {
            result,
            head_delta,
            packet_written,
            redirect,
            skb: None,
            insns,
            engine,
        }
    }
}

/// What the end of a lean run needs of its start.
struct Lean<'a> {
    ei: usize,
    e: &'a crate::check::EntryInfo,
    /// The run was on the caller's buffer in place.
    in_place: bool,
    /// Host address of the runner's own packet buffer.
    own: usize,
    headroom: usize,
    len: usize,
}

/// A runner armed by a clean run: the machine, the region table and the
/// native code's kept context are exactly as the next run of the same
/// entry, on a packet of the same shape with the same options, would
/// set them, but for the packet (and, on the interpreter, registers,
/// count and `may_goto` budget, which every run changes). Set by the
/// end of a lean run of a program that calls nothing that ended at an
/// `exit`: on the JIT one in place that reached no glue (so no glue
/// touched the machine, no region was added, no frame opened, registers
/// are as a reset leaves them), on the interpreter any such run.
/// Cleared by every other run (`Vm::run_on` when it does not admit the
/// run, the general path's `prepare`, a fault or glue in the armed run;
/// pooled buffers lose it). Such a run ([`Vm::run_armed`]) on the JIT
/// writes only the packet's window and ends, the count and the caller's
/// buffer: about half the lean run's host instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Armed {
    ei: usize,
    /// Native code ran (in place), else the interpreter.
    jit: bool,
    /// The options' `interp`.
    interp: bool,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
    headroom: usize,
    /// Bytes of the runner's packet buffer (headroom, frame and tailroom
    /// must fit).
    room: usize,
    /// The run's instruction budget (the options' or the VM's).
    budget: u64,
    cpu: u32,
    /// Host address of the runner's own packet buffer.
    own: usize,
}

impl Armed {
    /// The tailroom of a run of entry `ei` on a frame of `len` bytes with
    /// `fields` and `opts`, if the runner armed so can run it without a
    /// reset; `config_budget`: the VM's budget.
    #[inline(always)]
    pub(crate) fn admits(
        &self,
        ei: usize,
        len: usize,
        fields: &XdpFields,
        opts: &RunOptions,
        config_budget: u64,
    ) -> Option<usize> {
        let same = ei == self.ei
            && !opts.trace
            && opts.interp == self.interp
            && opts.cpu == self.cpu
            && opts.tunnel_key.is_none()
            && opts.budget.unwrap_or(config_budget) == self.budget
            && fields.headroom == self.headroom
            && fields.ingress_ifindex == self.ingress_ifindex
            && fields.rx_queue_index == self.rx_queue_index
            && fields.egress_ifindex == self.egress_ifindex;
        let need = self
            .headroom
            .checked_add(len)?
            .checked_add(fields.tailroom)?;
        (same && need <= self.room).then_some(fields.tailroom)
    }
}

impl Vm {
    /// The armed run ([`Armed`]; `admits` said yes): the packet window
    /// moved onto the caller's buffer, the machine's packet ends set, the
    /// native code run; a run that reaches the glue or faults ends as a
    /// lean run does (and leaves the runner unarmed).
    #[inline(always)]
    pub(crate) fn run_armed(
        &self,
        bufs: &mut Buffers,
        packet: &mut Vec<u8>,
        tailroom: usize,
        opts: &RunOptions,
    ) -> RunOutcome {
        let inner = &*self.inner;
        let Some(a) = &bufs.armed else {
            return not_fast();
        };
        let (ei, headroom, budget, own, jit) = (a.ei, a.headroom, a.budget, a.own, a.jit);
        let (Some(e), Some(m)) = (inner.entries.get(ei), bufs.machine.as_deref_mut()) else {
            return not_fast();
        };
        clear_stack(&bufs.stack, bufs.stack_dirty, inner.facts.stack_reach);
        let len = packet.len();
        let data_end = headroom + len;
        if !jit {
            // The interpreter: the frame copied in, the packet's ends, and
            // what every run of the interpreter changes (registers, count,
            // `may_goto` budget).
            copy_in(&bufs.packet, headroom, packet);
            if let Some(w) = m.mem.windows_mut().get_mut(mem::PACKET as usize) {
                w.hi = data_end as u64;
                w.whi = data_end as u64;
            }
            m.pkt.data_end = data_end;
            m.pkt.skb_len = len;
            m.pkt_max = data_end + tailroom;
            m.regs = [0; 16];
            m.regs[1] = mem::addr(mem::CTX, 0);
            m.regs[10] = mem::addr(
                mem::STACK,
                (inner.config.max_frames * crate::config::FRAME_SIZE) as u64,
            );
            m.count = 0;
            m.may_goto = inner.config.may_goto_budget;
            let outcome = m.exec(&inner.program.ops, e.start_op, false);
            if outcome.is_err() {
                bufs.armed = None;
            }
            let lean = Lean {
                ei,
                e,
                in_place: false,
                own,
                headroom,
                len,
            };
            return self.lean_end::<false>(bufs, lean, outcome, Engine::Interp, packet, opts);
        }
        let (Some(code), Some(k)) = (inner.jit.as_ref(), bufs.jit.as_deref_mut()) else {
            return not_fast();
        };
        let p = packet.as_mut_ptr();
        let base = (p as usize).wrapping_sub(headroom);
        if let Some(w) = m.mem.windows_mut().get_mut(mem::PACKET as usize) {
            // (`lo` is the armed headroom.)
            w.base = base;
            w.hi = data_end as u64;
            w.whi = data_end as u64;
        }
        m.pkt.data_end = data_end;
        m.pkt.skb_len = len;
        m.pkt_max = data_end + tailroom;
        let packet_base = (base as u64).wrapping_sub((mem::PACKET as u64) << 32);
        let end = mem::addr(mem::PACKET, data_end as u64);
        let run = code.run_armed(k, m, budget, (packet_base, end), (p, headroom, len));
        match run {
            Ok((r0, insns)) => {
                if let Some(w) = m.mem.windows_mut().get_mut(mem::PACKET as usize) {
                    w.base = own;
                }
                bufs.last_shape.pkt = m.pkt;
                bufs.last_shape.len = len;
                RunOutcome {
                    result: Ok(r0),
                    head_delta: 0,
                    packet_written: inner.facts.writes_packet,
                    redirect: None,
                    skb: None,
                    insns,
                    engine: Engine::Jit,
                }
            }
            Err(r0) => {
                bufs.armed = None;
                let outcome = code.conclude_kept(m, k, r0, budget);
                let lean = Lean {
                    ei,
                    e,
                    in_place: true,
                    own,
                    headroom,
                    len,
                };
                self.lean_end::<false>(bufs, lean, outcome, Engine::Jit, packet, opts)
            }
        }
    }
}

/// Copies the frame into the runner's packet buffer at `off`.
#[inline(always)]
#[allow(unsafe_code)]
pub(super) fn copy_in(buf: &GuardedBuf, off: usize, frame: &[u8]) {
    // SAFETY: `buf` is a runner's packet buffer (`Buffers::packet`),
    // reached only through that runner's buffers, which the caller
    // borrows mutably: no other thread touches it during the copy.
    let _ = unsafe { buf.write_unshared(off, frame) };
}

/// Copies the packet out of the runner's packet buffer at `off`.
#[inline(always)]
#[allow(unsafe_code)]
pub(super) fn copy_out(buf: &GuardedBuf, off: usize, out: &mut [u8]) {
    // SAFETY: as in `copy_in`.
    let _ = unsafe { buf.read_unshared(off, out) };
}

/// The JIT's `xdp_md` table for a frame at `headroom` ending at
/// `data_end` in the packet region: data, data_end, data_meta (no
/// metadata), then the interface fields.
fn xdp_words(headroom: usize, data_end: usize, md: XdpFields) -> [u64; 6] {
    let at = |o: usize| mem::addr(mem::PACKET, o as u64);
    [
        at(headroom),
        at(data_end),
        at(headroom),
        u64::from(md.ingress_ifindex),
        u64::from(md.rx_queue_index),
        u64::from(md.egress_ifindex),
    ]
}

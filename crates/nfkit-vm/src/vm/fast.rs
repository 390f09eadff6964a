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
    /// Runs XDP entry `ei` on `packet` the fast way, or `None` (having
    /// touched nothing) when the run needs the general path.
    #[inline(always)]
    pub(crate) fn run_xdp_fast(
        &self,
        bufs: &mut Buffers,
        ei: usize,
        packet: &mut Vec<u8>,
        md: XdpFields,
        opts: &RunOptions,
    ) -> Option<RunOutcome> {
        let inner = &*self.inner;
        let e = inner.entries.get(ei)?;
        let len = packet.len();
        let headroom = md.headroom;
        let data_end = headroom.checked_add(len)?;
        let need = data_end.checked_add(md.tailroom)?;
        let placed = Placed {
            ctx: RegionKind::Ctx,
            has_pkt: true,
            raw: false,
            socket: false,
            buf: Arc::as_ptr(&bufs.packet) as usize,
        };
        if e.prog_type != ProgType::Xdp
            || e.refused.is_some()
            || opts.trace
            || opts.cpu >= inner.config.ncpus
            || bufs.placed != Some(placed)
            || bufs.packet.len() < need
            || bufs.machine.is_none()
            || bufs.stack.len() != inner.config.max_frames * crate::config::FRAME_SIZE
        {
            return None;
        }
        clear_stack(&bufs.stack, bufs.stack_dirty, inner.facts.stack_reach);
        bufs.stack_dirty = 0;
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
        let m = bufs.machine.as_deref_mut()?;
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
                let at = |o: usize| mem::addr(mem::PACKET, o as u64);
                let xdp = [
                    at(headroom),
                    at(data_end),
                    at(headroom),
                    md.ingress_ifindex as u64,
                    md.rx_queue_index as u64,
                    md.egress_ifindex as u64,
                ];
                let step = code.run_xdp(&mut bufs.jit, m, (ei, e.start_op), xdp);
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
        Some(RunOutcome {
            result,
            head_delta,
            packet_written,
            redirect,
            skb: None,
            insns,
            engine,
        })
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

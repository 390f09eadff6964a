//! The interpreter: one `match` over pre-decoded ops in a tight loop, with
//! exact ISA semantics (wrapping arithmetic everywhere, x/0 = 0, x%0 = x,
//! signed overflow, masked shifts, 32-bit zero extension) and every memory
//! access checked against the region table. The loop is compiled twice:
//! with and without tracing, so the fast path carries no tracing cost.

#![forbid(unsafe_code)]

use crate::ctx::{self, CtxState, CtxValue, PacketPtrs};
use crate::error::RunErrorKind;
use crate::mem::{self, Memory, Rmw};
use crate::prog::Code;
use crate::result::{Redirect, TraceStep};
use crate::trace::Pending;
use crate::vm::Inner;
use nfkit_object::ProgType;

/// Why execution stopped early.
pub(crate) enum Stop {
    /// A fault at op `pc`.
    Fault { pc: usize, kind: RunErrorKind },
    /// The program ended with this r0 from inside (LD_ABS out of bounds,
    /// the conformance suite's unwind helper).
    Exit(u64),
}

pub(crate) type Step<T> = Result<T, Stop>;

pub(crate) fn fault<T>(pc: usize, kind: RunErrorKind) -> Step<T> {
    Err(Stop::Fault { pc, kind })
}

/// What a call frame returns to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FrameKind {
    /// A bpf-to-bpf call.
    Call,
    /// A `bpf_loop` callback: iteration `i` of `n`, callback at op `cb`.
    Loop { i: u64, n: u64, cb: usize, ctx: u64 },
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub ret: usize,
    pub saved: [u64; 4],
    pub fp: u64,
    pub may_goto: u32,
    pub kind: FrameKind,
}

/// A ring-buffer reservation live in this run: region id, map index and
/// data offset in the ring's buffer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reservation {
    pub region: u32,
    pub map: usize,
    pub off: usize,
}

/// All state of one run.
pub(crate) struct Machine {
    /// The VM (held by the runner's buffers, so a run takes no
    /// reference).
    pub vm: std::sync::Arc<Inner>,
    pub regs: [u64; 16],
    pub mem: Memory,
    pub frames: Vec<Frame>,
    pub count: u64,
    pub budget: u64,
    pub cpu: u32,
    pub prog_type: ProgType,
    pub tail_calls: u32,
    pub may_goto: u32,
    pub ctx: CtxState,
    pub pkt: PacketPtrs,
    /// Lowest offset `data`/`data_meta` may move to (`xdp_frame` reserved).
    pub pkt_min: usize,
    /// Highest offset `data_end` may grow to.
    pub pkt_max: usize,
    /// Offset of the mac header (socket filters: 14 bytes before data).
    pub mac: usize,
    /// Deepest frame index reached (for clearing the stack between runs).
    pub deepest: usize,
    pub redirect: Option<Redirect>,
    pub printk: Vec<String>,
    /// The run's clock and random numbers when its options override the
    /// VM's configuration (see [`Machine::clock`]).
    pub clock: Option<std::sync::Arc<dyn crate::config::Clock>>,
    pub rng: Option<std::sync::Arc<dyn crate::config::Rng>>,
    pub lock_held: Option<u64>,
    /// Routes, tunnel metadata and perf records of this run.
    pub net: crate::helpers::net::NetRun,
    pub reservations: Vec<Reservation>,
    pub trace: Vec<TraceStep>,
    /// The traced instruction running now (see `trace`).
    pub trace_pending: Option<Box<Pending>>,
}

impl Machine {
    /// The run's clock: the options', else the VM's.
    #[inline]
    pub fn clock(&self) -> &dyn crate::config::Clock {
        self.clock.as_deref().unwrap_or(&*self.vm.config.clock)
    }

    /// The run's random numbers: the options', else the VM's.
    #[inline]
    pub fn rng(&self) -> &dyn crate::config::Rng {
        self.rng.as_deref().unwrap_or(&*self.vm.config.rng)
    }

    /// Updates the packet region's window after the packet pointers move.
    pub fn sync_packet_region(&mut self) {
        let lo = self.pkt.meta.min(self.pkt.data);
        self.mem
            .set_window(mem::PACKET, lo, self.pkt.data_end.max(lo));
    }

    #[inline(always)]
    pub(crate) fn load(&self, addr: u64, size: usize, pc: usize) -> Step<u64> {
        if let Some((buf, off)) = self.mem.resolve(addr, size, false) {
            if let Some(v) = buf.load(off, size) {
                return Ok(v);
            }
        }
        self.load_slow(addr, size, pc)
    }

    /// A 4-byte load from the context region: the packet pointers of an
    /// `xdp_md` (`data`, `data_end`, `data_meta`, what every XDP program
    /// reads first) without the general context path; anything else as
    /// [`Machine::load`] would.
    #[inline(always)]
    fn load_ctx_word(&self, addr: u64, pc: usize) -> Step<u64> {
        if let CtxState::Xdp { .. } = self.ctx {
            let at = match addr & 0xffff_ffff {
                0 => Some(self.pkt.data),
                4 => Some(self.pkt.data_end),
                8 => Some(self.pkt.meta),
                _ => None,
            };
            if let Some(o) = at {
                return Ok(mem::addr(mem::PACKET, o as u64));
            }
        }
        self.load_slow(addr, 4, pc)
    }

    #[cold]
    fn load_slow(&self, addr: u64, size: usize, pc: usize) -> Step<u64> {
        if self.mem.is_ctx(addr) {
            let off = addr & 0xffff_ffff;
            return match ctx::load(&self.ctx, self.prog_type, &self.pkt, off, size) {
                Ok(CtxValue::Value(v)) => Ok(v),
                Ok(CtxValue::Packet(o)) => Ok(mem::addr(mem::PACKET, o as u64)),
                Err(why) => fault(
                    pc,
                    RunErrorKind::Context {
                        offset: off,
                        size,
                        write: false,
                        why,
                    },
                ),
            };
        }
        fault(
            pc,
            RunErrorKind::Access {
                addr,
                size,
                write: false,
                region: self.mem.describe(addr),
            },
        )
    }

    #[inline(always)]
    pub(crate) fn store(&mut self, addr: u64, size: usize, v: u64, pc: usize) -> Step<()> {
        if let Some((buf, off)) = self.mem.resolve(addr, size, true) {
            if buf.store(off, size, v).is_some() {
                return Ok(());
            }
        }
        self.store_slow(addr, size, v, pc)
    }

    #[cold]
    fn store_slow(&mut self, addr: u64, size: usize, v: u64, pc: usize) -> Step<()> {
        if self.mem.is_ctx(addr) {
            let off = addr & 0xffff_ffff;
            return ctx::store(&mut self.ctx, self.prog_type, off, size, v).or_else(|why| {
                fault(
                    pc,
                    RunErrorKind::Context {
                        offset: off,
                        size,
                        write: true,
                        why,
                    },
                )
            });
        }
        fault(
            pc,
            RunErrorKind::Access {
                addr,
                size,
                write: true,
                region: self.mem.describe(addr),
            },
        )
    }

    pub(crate) fn atomic(
        &mut self,
        d: usize,
        s: usize,
        aux: u8,
        off: i32,
        size: usize,
        pc: usize,
    ) -> Step<()> {
        let addr = self.regs[d].wrapping_add(off as i64 as u64);
        let Some((buf, o)) = self.mem.resolve(addr, size, true) else {
            return fault(pc, RunErrorKind::Atomic { addr });
        };
        let trunc = |v: u64| if size == 4 { v as u32 as u64 } else { v };
        let src = self.regs[s];
        let fetch = aux & 1 == 1;
        let old = match aux {
            0 | 1 => buf.rmw(o, size, Rmw::Add, src),
            2 | 3 => buf.rmw(o, size, Rmw::Or, src),
            4 | 5 => buf.rmw(o, size, Rmw::And, src),
            6 | 7 => buf.rmw(o, size, Rmw::Xor, src),
            8 => buf.rmw(o, size, Rmw::Xchg, src),
            _ => {
                let old = buf.cmpxchg(o, size, trunc(self.regs[0]), src);
                match old {
                    Some(v) => {
                        self.regs[0] = trunc(v);
                        return Ok(());
                    }
                    None => return fault(pc, RunErrorKind::Atomic { addr }),
                }
            }
        };
        match old {
            Some(v) => {
                if fetch || aux == 8 {
                    self.regs[s] = trunc(v);
                }
                Ok(())
            }
            None => fault(pc, RunErrorKind::Atomic { addr }),
        }
    }

    /// Legacy `LD_ABS`/`LD_IND`: a big-endian load from the socket
    /// buffer's data; out of bounds ends the program with r0 = 0.
    pub(crate) fn ld_abs(&mut self, size: usize, off: i64, pc: usize) -> Step<()> {
        const SKF_NET_OFF: i64 = -0x10_0000;
        const SKF_LL_OFF: i64 = -0x20_0000;
        let k = off as i32 as i64;
        let (base, rel) = if k >= 0 {
            (self.pkt.data as i64, k)
        } else if k >= SKF_NET_OFF {
            // Network header: socket filters start there, TC/raw 14 bytes in.
            let net = if self.prog_type == ProgType::SocketFilter {
                self.pkt.data
            } else {
                self.pkt.data + ctx::ETH_HLEN
            };
            (net as i64, k - SKF_NET_OFF)
        } else if k >= SKF_LL_OFF {
            (self.mac as i64, k - SKF_LL_OFF)
        } else {
            return Err(Stop::Exit(0));
        };
        let start = base + rel;
        if rel < 0 || start < self.mac as i64 || start + size as i64 > self.pkt.data_end as i64 {
            return Err(Stop::Exit(0));
        }
        let buf = match self.mem.region(mem::PACKET) {
            Some(r) => r.buf.clone(),
            None => return fault(pc, RunErrorKind::Setup("no packet".into())),
        };
        let mut b = [0u8; 8];
        if buf.read(start as usize, &mut b[..size]).is_none() {
            return Err(Stop::Exit(0));
        }
        let v = match size {
            1 => b[0] as u64,
            2 => u16::from_be_bytes([b[0], b[1]]) as u64,
            _ => u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64,
        };
        self.regs[0] = v;
        Ok(())
    }

    fn push_frame(&mut self, ret: usize, kind: FrameKind, pc: usize) -> Step<()> {
        if self.frames.len() + 1 >= self.vm.config.max_frames {
            return fault(
                pc,
                RunErrorKind::CallDepth {
                    limit: self.vm.config.max_frames,
                },
            );
        }
        self.frames.push(Frame {
            ret,
            saved: [self.regs[6], self.regs[7], self.regs[8], self.regs[9]],
            fp: self.regs[10],
            may_goto: self.may_goto,
            kind,
        });
        let depth = self.frames.len();
        self.deepest = self.deepest.max(depth);
        // The callee's frame becomes live; its pointer is its own region,
        // so it reaches neither the caller's frame nor the next one.
        let Some(fp) = self.mem.open_frame(depth) else {
            return fault(pc, RunErrorKind::CallDepth { limit: depth });
        };
        self.regs[10] = fp;
        self.may_goto = self.vm.config.may_goto_budget;
        Ok(())
    }

    /// Starts a `bpf_loop` (called from the helper): returns the op to
    /// continue at.
    pub(crate) fn start_loop(
        &mut self,
        n: u64,
        cb: usize,
        cb_ctx: u64,
        ret: usize,
        pc: usize,
    ) -> Step<usize> {
        if n == 0 {
            self.regs[0] = 0;
            return Ok(ret);
        }
        self.push_frame(
            ret,
            FrameKind::Loop {
                i: 0,
                n,
                cb,
                ctx: cb_ctx,
            },
            pc,
        )?;
        self.regs[1] = 0;
        self.regs[2] = cb_ctx;
        Ok(cb)
    }

    /// Runs from op `pc` until the entry's `exit`.
    /// `ops` is the VM's program (`self.vm.program.ops`), passed apart so
    /// the loop can hold it while it changes the machine.
    pub(crate) fn exec(&mut self, ops: &[crate::prog::Op], pc: usize, trace: bool) -> Step<u64> {
        let r = if trace {
            self.exec_loop::<true>(ops, pc)
        } else {
            self.exec_loop::<false>(ops, pc)
        };
        if trace {
            // The instruction noted last faulted, unless the budget ran
            // out before the next one began.
            let fault_pc = match &r {
                Err(Stop::Fault {
                    kind: RunErrorKind::Budget { .. },
                    ..
                }) => None,
                Err(Stop::Fault { pc, .. }) => Some(*pc),
                _ => None,
            };
            self.trace_end(None, fault_pc);
        }
        r
    }

    fn exec_loop<const TRACE: bool>(&mut self, ops: &[crate::prog::Op], pc: usize) -> Step<u64> {
        // The instruction counter lives in a local (a machine register)
        // during the loop, and goes back to `self` however the loop ends.
        let mut count = self.count;
        let r = self.exec_inner::<TRACE>(ops, pc, &mut count);
        self.count = count;
        r
    }

    #[inline(always)]
    fn exec_inner<const TRACE: bool>(
        &mut self,
        ops: &[crate::prog::Op],
        mut pc: usize,
        count: &mut u64,
    ) -> Step<u64> {
        use Code::*;
        let budget = self.budget;
        loop {
            let Some(&op) = ops.get(pc) else {
                return fault(
                    pc,
                    RunErrorKind::Setup(format!("no instruction at op {pc}")),
                );
            };
            *count += 1;
            if *count > budget {
                return fault(pc, RunErrorKind::Budget { limit: budget });
            }
            if TRACE {
                self.trace_end(Some(pc), None);
                self.trace_begin(pc);
            }
            let d = (op.dst & 15) as usize;
            let s = (op.src & 15) as usize;
            let cur = pc;
            pc += 1;
            let r = &mut self.regs;
            match op.code {
                Add64K => r[d] = r[d].wrapping_add(op.imm),
                Add64X => r[d] = r[d].wrapping_add(r[s]),
                Sub64K => r[d] = r[d].wrapping_sub(op.imm),
                Sub64X => r[d] = r[d].wrapping_sub(r[s]),
                Mul64K => r[d] = r[d].wrapping_mul(op.imm),
                Mul64X => r[d] = r[d].wrapping_mul(r[s]),
                Div64K => r[d] = r[d].checked_div(op.imm).unwrap_or(0),
                Div64X => r[d] = r[d].checked_div(r[s]).unwrap_or(0),
                SDiv64K => r[d] = sdiv64(r[d], op.imm),
                SDiv64X => r[d] = sdiv64(r[d], r[s]),
                Or64K => r[d] |= op.imm,
                Or64X => r[d] |= r[s],
                And64K => r[d] &= op.imm,
                And64X => r[d] &= r[s],
                Lsh64K => r[d] = r[d].wrapping_shl(op.imm as u32),
                Lsh64X => r[d] = r[d].wrapping_shl(r[s] as u32),
                Rsh64K => r[d] = r[d].wrapping_shr(op.imm as u32),
                Rsh64X => r[d] = r[d].wrapping_shr(r[s] as u32),
                Mod64K => r[d] = r[d].checked_rem(op.imm).unwrap_or(r[d]),
                Mod64X => r[d] = r[d].checked_rem(r[s]).unwrap_or(r[d]),
                SMod64K => r[d] = smod64(r[d], op.imm),
                SMod64X => r[d] = smod64(r[d], r[s]),
                Xor64K => r[d] ^= op.imm,
                Xor64X => r[d] ^= r[s],
                Mov64K => r[d] = op.imm,
                Mov64X => r[d] = r[s],
                Arsh64K => r[d] = (r[d] as i64).wrapping_shr(op.imm as u32) as u64,
                Arsh64X => r[d] = (r[d] as i64).wrapping_shr(r[s] as u32) as u64,
                Neg64 => r[d] = r[d].wrapping_neg(),
                MovSx64B => r[d] = r[s] as i8 as i64 as u64,
                MovSx64H => r[d] = r[s] as i16 as i64 as u64,
                MovSx64W => r[d] = r[s] as i32 as i64 as u64,
                Add32K => r[d] = (r[d] as u32).wrapping_add(op.imm as u32) as u64,
                Add32X => r[d] = (r[d] as u32).wrapping_add(r[s] as u32) as u64,
                Sub32K => r[d] = (r[d] as u32).wrapping_sub(op.imm as u32) as u64,
                Sub32X => r[d] = (r[d] as u32).wrapping_sub(r[s] as u32) as u64,
                Mul32K => r[d] = (r[d] as u32).wrapping_mul(op.imm as u32) as u64,
                Mul32X => r[d] = (r[d] as u32).wrapping_mul(r[s] as u32) as u64,
                Div32K => r[d] = (r[d] as u32).checked_div(op.imm as u32).unwrap_or(0) as u64,
                Div32X => r[d] = (r[d] as u32).checked_div(r[s] as u32).unwrap_or(0) as u64,
                SDiv32K => r[d] = sdiv32(r[d], op.imm),
                SDiv32X => r[d] = sdiv32(r[d], r[s]),
                Or32K => r[d] = (r[d] as u32 | op.imm as u32) as u64,
                Or32X => r[d] = (r[d] as u32 | r[s] as u32) as u64,
                And32K => r[d] = (r[d] as u32 & op.imm as u32) as u64,
                And32X => r[d] = (r[d] as u32 & r[s] as u32) as u64,
                Lsh32K => r[d] = (r[d] as u32).wrapping_shl(op.imm as u32) as u64,
                Lsh32X => r[d] = (r[d] as u32).wrapping_shl(r[s] as u32) as u64,
                Rsh32K => r[d] = (r[d] as u32).wrapping_shr(op.imm as u32) as u64,
                Rsh32X => r[d] = (r[d] as u32).wrapping_shr(r[s] as u32) as u64,
                Mod32K => {
                    let a = r[d] as u32;
                    r[d] = a.checked_rem(op.imm as u32).unwrap_or(a) as u64
                }
                Mod32X => {
                    let a = r[d] as u32;
                    r[d] = a.checked_rem(r[s] as u32).unwrap_or(a) as u64
                }
                SMod32K => r[d] = smod32(r[d], op.imm),
                SMod32X => r[d] = smod32(r[d], r[s]),
                Xor32K => r[d] = (r[d] as u32 ^ op.imm as u32) as u64,
                Xor32X => r[d] = (r[d] as u32 ^ r[s] as u32) as u64,
                Mov32K => r[d] = op.imm as u32 as u64,
                Mov32X => r[d] = r[s] as u32 as u64,
                Arsh32K => r[d] = (r[d] as i32).wrapping_shr(op.imm as u32) as u32 as u64,
                Arsh32X => r[d] = (r[d] as i32).wrapping_shr(r[s] as u32) as u32 as u64,
                Neg32 => r[d] = (r[d] as u32).wrapping_neg() as u64,
                MovSx32B => r[d] = r[s] as i8 as i32 as u32 as u64,
                MovSx32H => r[d] = r[s] as i16 as i32 as u32 as u64,
                Trunc16 => r[d] = r[d] as u16 as u64,
                Trunc32 => r[d] = r[d] as u32 as u64,
                Nop => {}
                Swap16 => r[d] = (r[d] as u16).swap_bytes() as u64,
                Swap32 => r[d] = (r[d] as u32).swap_bytes() as u64,
                Swap64 => r[d] = r[d].swap_bytes(),
                // One arm per access size, so each inlines a fixed-size
                // check and load.
                LdxB => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    self.regs[d] = self.load(a, 1, cur)?;
                }
                LdxH => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    self.regs[d] = self.load(a, 2, cur)?;
                }
                LdxW => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    self.regs[d] = if self.mem.is_ctx(a) {
                        self.load_ctx_word(a, cur)?
                    } else {
                        self.load(a, 4, cur)?
                    };
                }
                LdxDW => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    self.regs[d] = self.load(a, 8, cur)?;
                }
                LdxSB => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    let v = self.load(a, 1, cur)?;
                    self.regs[d] = v as i8 as i64 as u64;
                }
                LdxSH => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    let v = self.load(a, 2, cur)?;
                    self.regs[d] = v as i16 as i64 as u64;
                }
                LdxSW => {
                    let a = r[s].wrapping_add(op.off as i64 as u64);
                    let v = self.load(a, 4, cur)?;
                    self.regs[d] = v as i32 as i64 as u64;
                }
                StB => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), op.imm);
                    self.store(a, 1, v, cur)?;
                }
                StH => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), op.imm);
                    self.store(a, 2, v, cur)?;
                }
                StW => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), op.imm);
                    self.store(a, 4, v, cur)?;
                }
                StDW => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), op.imm);
                    self.store(a, 8, v, cur)?;
                }
                StxB => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), r[s]);
                    self.store(a, 1, v, cur)?;
                }
                StxH => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), r[s]);
                    self.store(a, 2, v, cur)?;
                }
                StxW => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), r[s]);
                    self.store(a, 4, v, cur)?;
                }
                StxDW => {
                    let (a, v) = (r[d].wrapping_add(op.off as i64 as u64), r[s]);
                    self.store(a, 8, v, cur)?;
                }
                Atomic => self.atomic(d, s, op.aux, op.off, op.imm as usize, cur)?,
                Lddw => r[d] = op.imm,
                LdAbs => self.ld_abs(op.aux as usize, op.imm as i64, cur)?,
                LdInd => {
                    let k = (r[s] as u32 as i32 as i64).wrapping_add(op.imm as i64);
                    self.ld_abs(op.aux as usize, k, cur)?
                }
                Ja => pc = op.off as usize,
                JeqK => jif(&mut pc, r[d] == op.imm, op.off),
                JeqX => jif(&mut pc, r[d] == r[s], op.off),
                JgtK => jif(&mut pc, r[d] > op.imm, op.off),
                JgtX => jif(&mut pc, r[d] > r[s], op.off),
                JgeK => jif(&mut pc, r[d] >= op.imm, op.off),
                JgeX => jif(&mut pc, r[d] >= r[s], op.off),
                JsetK => jif(&mut pc, r[d] & op.imm != 0, op.off),
                JsetX => jif(&mut pc, r[d] & r[s] != 0, op.off),
                JneK => jif(&mut pc, r[d] != op.imm, op.off),
                JneX => jif(&mut pc, r[d] != r[s], op.off),
                JsgtK => jif(&mut pc, (r[d] as i64) > op.imm as i64, op.off),
                JsgtX => jif(&mut pc, (r[d] as i64) > r[s] as i64, op.off),
                JsgeK => jif(&mut pc, (r[d] as i64) >= op.imm as i64, op.off),
                JsgeX => jif(&mut pc, (r[d] as i64) >= r[s] as i64, op.off),
                JltK => jif(&mut pc, r[d] < op.imm, op.off),
                JltX => jif(&mut pc, r[d] < r[s], op.off),
                JleK => jif(&mut pc, r[d] <= op.imm, op.off),
                JleX => jif(&mut pc, r[d] <= r[s], op.off),
                JsltK => jif(&mut pc, (r[d] as i64) < op.imm as i64, op.off),
                JsltX => jif(&mut pc, (r[d] as i64) < (r[s] as i64), op.off),
                JsleK => jif(&mut pc, (r[d] as i64) <= op.imm as i64, op.off),
                JsleX => jif(&mut pc, (r[d] as i64) <= r[s] as i64, op.off),
                Jeq32K => jif(&mut pc, r[d] as u32 == op.imm as u32, op.off),
                Jeq32X => jif(&mut pc, r[d] as u32 == r[s] as u32, op.off),
                Jgt32K => jif(&mut pc, r[d] as u32 > op.imm as u32, op.off),
                Jgt32X => jif(&mut pc, r[d] as u32 > r[s] as u32, op.off),
                Jge32K => jif(&mut pc, r[d] as u32 >= op.imm as u32, op.off),
                Jge32X => jif(&mut pc, r[d] as u32 >= r[s] as u32, op.off),
                Jset32K => jif(&mut pc, r[d] as u32 & op.imm as u32 != 0, op.off),
                Jset32X => jif(&mut pc, r[d] as u32 & r[s] as u32 != 0, op.off),
                Jne32K => jif(&mut pc, r[d] as u32 != op.imm as u32, op.off),
                Jne32X => jif(&mut pc, r[d] as u32 != r[s] as u32, op.off),
                Jsgt32K => jif(&mut pc, r[d] as i32 > op.imm as i32, op.off),
                Jsgt32X => jif(&mut pc, r[d] as i32 > r[s] as i32, op.off),
                Jsge32K => jif(&mut pc, r[d] as i32 >= op.imm as i32, op.off),
                Jsge32X => jif(&mut pc, r[d] as i32 >= r[s] as i32, op.off),
                Jlt32K => jif(&mut pc, (r[d] as u32) < op.imm as u32, op.off),
                Jlt32X => jif(&mut pc, (r[d] as u32) < r[s] as u32, op.off),
                Jle32K => jif(&mut pc, r[d] as u32 <= op.imm as u32, op.off),
                Jle32X => jif(&mut pc, r[d] as u32 <= r[s] as u32, op.off),
                Jslt32K => jif(&mut pc, (r[d] as i32) < op.imm as i32, op.off),
                Jslt32X => jif(&mut pc, (r[d] as i32) < r[s] as i32, op.off),
                Jsle32K => jif(&mut pc, r[d] as i32 <= op.imm as i32, op.off),
                Jsle32X => jif(&mut pc, r[d] as i32 <= r[s] as i32, op.off),
                MayGoto => {
                    if self.may_goto == 0 {
                        pc = op.off as usize;
                    } else {
                        self.may_goto -= 1;
                    }
                }
                Call => pc = self.helper(op.imm as i64, cur, pc)?,
                Callx => {
                    let id = r[d];
                    pc = self.helper_checked(id, cur, pc)?;
                }
                CallLocal => {
                    self.push_frame(pc, FrameKind::Call, cur)?;
                    pc = op.off as usize;
                }
                Exit => {
                    let Some(f) = self.frames.pop() else {
                        if let Some(l) = self.lock_held.take() {
                            self.unlock(l);
                            return fault(
                                cur,
                                RunErrorKind::Helper {
                                    helper: "spin_lock".into(),
                                    why: "the program ended holding a spin lock".into(),
                                },
                            );
                        }
                        return Ok(self.regs[0]);
                    };
                    // The callee's frame dies with it.
                    self.mem.close_frame(self.frames.len() + 1);
                    let r = &mut self.regs;
                    r[6] = f.saved[0];
                    r[7] = f.saved[1];
                    r[8] = f.saved[2];
                    r[9] = f.saved[3];
                    r[10] = f.fp;
                    self.may_goto = f.may_goto;
                    pc = f.ret;
                    if let FrameKind::Loop { i, n, cb, ctx } = f.kind {
                        let done = i + 1;
                        if self.regs[0] != 0 || done >= n {
                            self.regs[0] = done;
                        } else {
                            self.push_frame(
                                f.ret,
                                FrameKind::Loop {
                                    i: done,
                                    n,
                                    cb,
                                    ctx,
                                },
                                cur,
                            )?;
                            self.regs[1] = done;
                            self.regs[2] = ctx;
                            pc = cb;
                        }
                    }
                }
            }
        }
    }
}

#[inline(always)]
fn jif(pc: &mut usize, cond: bool, target: i32) {
    if cond {
        *pc = target as usize;
    }
}

#[inline(always)]
fn sdiv64(a: u64, b: u64) -> u64 {
    if b == 0 {
        0
    } else {
        (a as i64).wrapping_div(b as i64) as u64
    }
}

#[inline(always)]
fn smod64(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        (a as i64).wrapping_rem(b as i64) as u64
    }
}

#[inline(always)]
fn sdiv32(a: u64, b: u64) -> u64 {
    let (a, b) = (a as i32, b as i32);
    if b == 0 {
        0
    } else {
        a.wrapping_div(b) as u32 as u64
    }
}

#[inline(always)]
fn smod32(a: u64, b: u64) -> u64 {
    let (a, b) = (a as i32, b as i32);
    if b == 0 {
        a as u32 as u64
    } else {
        a.wrapping_rem(b) as u32 as u64
    }
}

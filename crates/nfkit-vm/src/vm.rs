//! The VM: a checked, translated program plus its maps ([`Vm`]), and the
//! per-thread machinery that runs it on a context ([`Runner`]), giving a
//! [`RunResult`].

#![forbid(unsafe_code)]

use crate::check::{check, EntryInfo};
use crate::config::{RunOptions, VmConfig, FRAME_SIZE};
use crate::ctx::{self, Context, CtxState, PacketPtrs, SkbFields, SkbState};
use crate::error::{LoadError, Rule, RunError, RunErrorKind};
use crate::interp::{Frame, Machine, Stop};
use crate::maps::{Map, Maps};
use crate::mem::{self, GuardedBuf, Memory, Region, RegionKind};
use crate::prog::Program;
use nfkit_isa::Insn;
use nfkit_object::{Image, ProgType};
use std::sync::{Arc, Mutex};

/// Where a program sent the packet (`bpf_redirect`, `bpf_redirect_map`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `bpf_redirect(ifindex, flags)`.
    Ifindex { ifindex: u32, flags: u64 },
    /// `bpf_redirect_map(devmap, key, flags)`; `ifindex` is the first
    /// 4 bytes of the entry's value.
    Map {
        map: usize,
        key: u32,
        ifindex: Option<u32>,
    },
    /// `bpf_redirect_map` with `BPF_F_BROADCAST`.
    Broadcast { map: usize, exclude_ingress: bool },
}

/// One register change of a traced instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegChange {
    pub reg: u8,
    pub old: u64,
    pub new: u64,
}

/// One executed instruction of a traced run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceStep {
    /// Op index (see [`Vm::location`]).
    pub op: usize,
    /// Slot index in the Image.
    pub slot: usize,
    pub insn: Option<Insn>,
    pub changes: Vec<RegChange>,
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// r0 at the entry's `exit`, or why the run failed.
    pub result: Result<u64, RunError>,
    /// The packet afterwards (`data..data_end`), or the conformance
    /// memory afterwards for [`Context::Raw`].
    pub packet: Vec<u8>,
    /// XDP metadata afterwards (`data_meta..data`).
    pub meta: Vec<u8>,
    /// How far `data` moved (`bpf_xdp_adjust_head`); negative when the
    /// packet grew at the front.
    pub head_delta: i64,
    /// Redirect target set by a helper during the run.
    pub redirect: Option<Redirect>,
    /// Writable `__sk_buff` fields afterwards (socket filter / TC).
    pub skb: Option<SkbFields>,
    /// `bpf_trace_printk` output, one entry per call.
    pub printk: Vec<String>,
    /// Instructions executed (helper calls count as one).
    pub insns: u64,
    /// Every executed instruction (when [`RunOptions::trace`] is set).
    pub trace: Vec<TraceStep>,
}

impl RunResult {
    /// r0, if the run ended normally.
    pub fn r0(&self) -> Option<u64> {
        self.result.as_ref().ok().copied()
    }

    /// The hook's return code: r0, or the fault code after an error.
    pub fn code(&self) -> u64 {
        match &self.result {
            Ok(v) => *v,
            Err(e) => e.fault_code,
        }
    }
}

/// Selects an entry program by index or by name.
pub trait EntryRef {
    fn entry_index(&self, vm: &Vm) -> Option<usize>;
}

impl EntryRef for usize {
    fn entry_index(&self, vm: &Vm) -> Option<usize> {
        (*self < vm.inner.entries.len()).then_some(*self)
    }
}

impl EntryRef for &str {
    fn entry_index(&self, vm: &Vm) -> Option<usize> {
        vm.inner.entries.iter().position(|e| e.name == *self)
    }
}

impl EntryRef for String {
    fn entry_index(&self, vm: &Vm) -> Option<usize> {
        self.as_str().entry_index(vm)
    }
}

/// Reusable per-thread buffers of runs.
struct Buffers {
    regions: Vec<Region>,
    stack: Arc<GuardedBuf>,
    packet: Arc<GuardedBuf>,
    frames: Vec<Frame>,
    /// Bytes at the top of the stack the last run may have dirtied.
    stack_dirty: usize,
}

/// Names of the per-run regions, made once.
struct RegionNames {
    stack: Arc<str>,
    context: Arc<str>,
    packet: Arc<str>,
    memory: Arc<str>,
}

/// Shared, immutable part of a VM.
pub struct Inner {
    pub(crate) program: Program,
    pub(crate) entries: Vec<EntryInfo>,
    pub(crate) maps: Maps,
    pub(crate) config: VmConfig,
    base_regions: Vec<Region>,
    names: RegionNames,
    empty: Arc<GuardedBuf>,
    pool: Mutex<Vec<Buffers>>,
}

/// A loaded program with its maps. Cheap to clone (shared), `Send + Sync`:
/// every thread may run it at once; the maps are shared.
#[derive(Clone)]
pub struct Vm {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("ops", &self.inner.program.ops.len())
            .field("entries", &self.inner.entries)
            .field("maps", &self.inner.maps.len())
            .finish()
    }
}

fn alloc(len: usize) -> Result<Arc<GuardedBuf>, LoadError> {
    GuardedBuf::new(len)
        .map(Arc::new)
        .map_err(|e| LoadError::Alloc(e.to_string()))
}

impl Vm {
    /// Checks and translates `image`, and creates its maps.
    pub fn new(image: &Image, config: VmConfig) -> Result<Vm, LoadError> {
        if config.max_frames == 0 || config.max_frames > 64 {
            return Err(LoadError::Image(format!(
                "max_frames must be 1..=64, is {}",
                config.max_frames
            )));
        }
        let checked = check(image, &config)?;
        let maps = Maps::new(&image.maps, config.ncpus, checked.entries.len())?;
        let empty = alloc(0)?;
        let mut base = vec![
            Region::opaque("null", &empty),
            Region::opaque("map handles", &empty),
            Region::opaque("functions", &empty),
            Region::opaque("stack", &empty),
            Region::opaque("context", &empty),
            Region::opaque("packet", &empty),
        ];
        for m in maps.iter() {
            let name = format!("map '{}'", m.name());
            base.push(match m.region() {
                Some((buf, writable)) if m.ringbuf().is_none() => Region::mem(&name, buf, writable),
                _ => Region::opaque(&name, &empty),
            });
        }
        // Prog array slots the object fills at load (`__array(values, ...)`),
        // as libbpf does.
        for init in &image.map_inits {
            let bad = |detail: String| LoadError::Map {
                index: init.map,
                name: image
                    .maps
                    .get(init.map)
                    .map_or_else(String::new, |m| m.name.clone()),
                detail,
            };
            let m = maps
                .by_index(init.map)
                .ok_or_else(|| bad("initialised, but no such map".into()))?;
            if init.entry >= checked.entries.len() {
                return Err(bad(format!("slot {} names no entry program", init.slot)));
            }
            m.update(
                &init.slot.to_le_bytes(),
                &(init.entry as u32).to_le_bytes(),
                crate::maps::BPF_ANY,
            )
            .map_err(|e| bad(format!("slot {}: {e}", init.slot)))?;
        }
        Ok(Vm {
            inner: Arc::new(Inner {
                program: checked.program,
                entries: checked.entries,
                maps,
                config,
                base_regions: base,
                names: RegionNames {
                    stack: "stack".into(),
                    context: "context".into(),
                    packet: "packet".into(),
                    memory: "memory".into(),
                },
                empty,
                pool: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Decodes raw little-endian instructions into a one-entry Image of
    /// `prog_type` and loads it.
    pub fn from_bytes(
        bytes: &[u8],
        prog_type: ProgType,
        config: VmConfig,
    ) -> Result<Vm, LoadError> {
        let insns = nfkit_isa::decode_bytes(bytes).map_err(|e| LoadError::Insn {
            slot: e.index,
            location: format!("slot {}", e.index),
            rule: Rule::Decode,
            detail: e.kind.to_string(),
        })?;
        Vm::new(&Image::from_insns("prog", prog_type, insns), config)
    }

    /// The VM's maps, in the Image's order.
    pub fn maps(&self) -> &Maps {
        &self.inner.maps
    }

    /// The map called `name`.
    pub fn map(&self, name: &str) -> Option<&Arc<Map>> {
        self.inner.maps.get(name)
    }

    /// Entry programs: name and program type, by index.
    pub fn entries(&self) -> Vec<(String, ProgType)> {
        self.inner
            .entries
            .iter()
            .map(|e| (e.name.clone(), e.prog_type))
            .collect()
    }

    /// Index of the entry called `name`.
    pub fn entry_index(&self, name: &str) -> Option<usize> {
        name.entry_index(self)
    }

    pub fn config(&self) -> &VmConfig {
        &self.inner.config
    }

    /// Number of (pre-decoded) instructions.
    pub fn len(&self) -> usize {
        self.inner.program.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.program.ops.is_empty()
    }

    /// `function+offset` of op `op` (as in [`TraceStep::op`]).
    pub fn location(&self, op: usize) -> String {
        self.inner.program.location(op)
    }

    /// A runner owning reusable buffers, for one thread's many runs.
    pub fn runner(&self) -> Runner {
        let bufs = self.take_buffers();
        Runner {
            vm: self.clone(),
            bufs: Some(bufs),
        }
    }

    /// Runs entry `entry` once (buffers come from a shared pool).
    pub fn run(&self, entry: impl EntryRef, ctx: Context, opts: &RunOptions) -> RunResult {
        let mut bufs = self.take_buffers();
        let r = self.run_with(&mut bufs, entry, ctx, opts);
        if let Ok(mut pool) = self.inner.pool.lock() {
            if pool.len() < 64 {
                pool.push(bufs);
            }
        }
        r
    }

    fn take_buffers(&self) -> Buffers {
        if let Some(b) = self.inner.pool.lock().ok().and_then(|mut p| p.pop()) {
            return b;
        }
        let stack_len = self.inner.config.max_frames * FRAME_SIZE;
        Buffers {
            regions: self.inner.base_regions.clone(),
            stack: GuardedBuf::new(stack_len)
                .map(Arc::new)
                .unwrap_or_else(|_| self.inner.empty.clone()),
            packet: self.inner.empty.clone(),
            frames: Vec::with_capacity(self.inner.config.max_frames),
            stack_dirty: stack_len,
        }
    }

    fn run_with(
        &self,
        bufs: &mut Buffers,
        entry: impl EntryRef,
        ctx: Context,
        opts: &RunOptions,
    ) -> RunResult {
        let inner = &*self.inner;
        let fail = |kind: RunErrorKind| RunResult {
            result: Err(RunError {
                slot: 0,
                location: String::new(),
                kind,
                fault_code: 0,
            }),
            packet: Vec::new(),
            meta: Vec::new(),
            head_delta: 0,
            redirect: None,
            skb: None,
            printk: Vec::new(),
            insns: 0,
            trace: Vec::new(),
        };
        let Some(ei) = entry.entry_index(self) else {
            return fail(RunErrorKind::Setup("no such entry program".into()));
        };
        let e = &inner.entries[ei];
        if opts.cpu >= inner.config.ncpus {
            return fail(RunErrorKind::Setup(format!(
                "cpu {} out of range ({} CPUs)",
                opts.cpu, inner.config.ncpus
            )));
        }
        let stack_len = inner.config.max_frames * FRAME_SIZE;
        if bufs.stack.len() != stack_len {
            return fail(RunErrorKind::Setup("cannot allocate the stack".into()));
        }
        // Zero the part of the stack earlier runs may have written, so
        // runs are reproducible.
        let dirty = bufs.stack_dirty.min(stack_len);
        let _ = bufs.stack.fill(stack_len - dirty, dirty, 0);

        // Lay out the packet (or raw memory) and the context.
        let socket = e.prog_type == ProgType::SocketFilter;
        let (bytes, headroom, tailroom, meta): (&[u8], usize, usize, &[u8]) = match &ctx {
            Context::Empty => (&[], 0, 0, &[]),
            Context::Raw(m) => (m, 0, 0, &[]),
            Context::Xdp(x) => (x.packet, x.headroom.max(x.meta.len()), x.tailroom, x.meta),
            Context::Skb(s) => (s.packet, 0, 0, &[]),
        };
        let need = headroom + bytes.len() + tailroom;
        if bufs.packet.len() < need || bufs.packet.is_empty() {
            match GuardedBuf::new(need.max(4096).next_power_of_two()) {
                Ok(b) => bufs.packet = Arc::new(b),
                Err(e) => {
                    return fail(RunErrorKind::Setup(format!(
                        "cannot allocate the packet: {e}"
                    )))
                }
            }
        }
        let pb = bufs.packet.clone();
        let _ = pb.fill(0, headroom, 0);
        let _ = pb.write(headroom - meta.len(), meta);
        let _ = pb.write(headroom, bytes);
        let data_end = headroom + bytes.len();
        let mut pkt = PacketPtrs {
            meta: headroom - meta.len(),
            data: headroom,
            data_end,
            skb_len: bytes.len(),
        };
        let mut mac = headroom;
        let (ctx_state, r1, r2) = match &ctx {
            Context::Empty => (CtxState::None, 0, 0),
            Context::Raw(m) => (CtxState::None, mem::addr(mem::PACKET, 0), m.len() as u64),
            Context::Xdp(x) => (
                CtxState::Xdp {
                    ingress_ifindex: x.ingress_ifindex,
                    rx_queue_index: x.rx_queue_index,
                    egress_ifindex: x.egress_ifindex,
                },
                mem::addr(mem::CTX, 0),
                0,
            ),
            Context::Skb(s) => {
                if socket {
                    pkt.data = headroom + bytes.len().min(ctx::ETH_HLEN);
                    pkt.meta = pkt.data;
                    pkt.skb_len = data_end - pkt.data;
                }
                mac = headroom;
                (
                    CtxState::Skb(Box::new(SkbState::from(s))),
                    mem::addr(mem::CTX, 0),
                    0,
                )
            }
        };
        let has_pkt = !matches!(ctx, Context::Empty);
        let pkt_writable = !socket;
        let ctx_len = ctx::ctx_size(&ctx_state);

        let mut regions = std::mem::take(&mut bufs.regions);
        regions.truncate(inner.base_regions.len());
        // The fixed regions are set in place: their names are shared
        // strings made once per VM, so a run allocates nothing here.
        let set =
            |r: &mut Region, kind, buf: &Arc<GuardedBuf>, lo, hi, writable, name: &Arc<str>| {
                r.kind = kind;
                if !Arc::ptr_eq(&r.buf, buf) {
                    r.buf = buf.clone();
                }
                r.lo = lo;
                r.hi = hi;
                r.writable = writable;
                if !Arc::ptr_eq(&r.name, name) {
                    r.name = name.clone();
                }
            };
        let names = &inner.names;
        let stack = &bufs.stack;
        set(
            &mut regions[mem::STACK as usize],
            RegionKind::Mem,
            stack,
            0,
            stack.len(),
            true,
            &names.stack,
        );
        if ctx_len > 0 {
            set(
                &mut regions[mem::CTX as usize],
                RegionKind::Ctx,
                &inner.empty,
                0,
                ctx_len,
                true,
                &names.context,
            );
        } else {
            set(
                &mut regions[mem::CTX as usize],
                RegionKind::Opaque,
                &inner.empty,
                0,
                0,
                false,
                &names.context,
            );
        }
        if has_pkt {
            let name = if matches!(ctx, Context::Raw(_)) {
                &names.memory
            } else {
                &names.packet
            };
            set(
                &mut regions[mem::PACKET as usize],
                RegionKind::Mem,
                &pb,
                pkt.meta,
                pkt.data_end,
                pkt_writable,
                name,
            );
        } else {
            set(
                &mut regions[mem::PACKET as usize],
                RegionKind::Opaque,
                &inner.empty,
                0,
                0,
                false,
                &names.packet,
            );
        }

        let mut frames = std::mem::take(&mut bufs.frames);
        frames.clear();
        let mut m = Machine {
            vm: inner,
            regs: [0; 16],
            mem: Memory { regions },
            frames,
            count: 0,
            budget: opts.budget.unwrap_or(inner.config.budget),
            cpu: opts.cpu,
            prog_type: e.prog_type,
            tail_calls: 0,
            may_goto: inner.config.may_goto_budget,
            ctx: ctx_state,
            pkt,
            pkt_min: ctx::XDP_FRAME_SIZE.min(pkt.meta),
            pkt_max: data_end + tailroom,
            mac,
            deepest: 0,
            redirect: None,
            printk: Vec::new(),
            clock: opts
                .clock
                .clone()
                .unwrap_or_else(|| inner.config.clock.clone()),
            rng: opts.rng.clone().unwrap_or_else(|| inner.config.rng.clone()),
            lock_held: None,
            reservations: Vec::new(),
            trace: Vec::new(),
            trace_pending: None,
        };
        m.regs[1] = r1;
        m.regs[2] = r2;
        m.regs[10] = mem::addr(mem::STACK, stack_len as u64);
        let outcome = m.exec(e.start_op, opts.trace);
        let fault_code = match e.prog_type {
            ProgType::SchedCls | ProgType::SchedAct => 2,
            _ => 0,
        };
        let mut result = match outcome {
            Ok(v) | Err(Stop::Exit(v)) => Ok(v),
            Err(Stop::Fault { pc, kind }) => Err(RunError {
                slot: inner.program.slot(pc),
                location: inner.program.location(pc),
                kind,
                fault_code,
            }),
        };
        if let Some(l) = m.lock_held.take() {
            m.unlock(l);
        }
        if m.drop_reservations() && result.is_ok() {
            result = Err(RunError {
                slot: 0,
                location: e.name.clone(),
                kind: RunErrorKind::Helper {
                    helper: "bpf_ringbuf_reserve".into(),
                    why: "the program ended with an unreleased reservation".into(),
                },
                fault_code,
            });
        }
        let p = m.pkt;
        let mut packet = vec![0u8; p.data_end.saturating_sub(p.data)];
        let mut metab = vec![0u8; p.data.saturating_sub(p.meta)];
        if has_pkt {
            let _ = pb.read(p.data, &mut packet);
            let _ = pb.read(p.meta, &mut metab);
        }
        if matches!(ctx, Context::Skb(_)) && socket {
            // Socket filters cannot change the packet; report the whole frame.
            packet = bytes.to_vec();
        }
        let skb = match &m.ctx {
            CtxState::Skb(s) => Some(s.out.clone()),
            _ => None,
        };
        let head_delta = if socket {
            0
        } else {
            p.data as i64 - headroom as i64
        };
        let res = RunResult {
            result,
            packet,
            meta: metab,
            head_delta,
            redirect: m.redirect.take(),
            skb,
            printk: std::mem::take(&mut m.printk),
            insns: m.count,
            trace: std::mem::take(&mut m.trace),
        };
        bufs.regions = std::mem::take(&mut m.mem.regions);
        bufs.frames = std::mem::take(&mut m.frames);
        // Frames below the deepest one used were never touched.
        bufs.stack_dirty = (m.deepest + 1) * FRAME_SIZE;
        res
    }
}

/// Runs a [`Vm`] many times with buffers reused between runs (one per
/// thread).
pub struct Runner {
    vm: Vm,
    bufs: Option<Buffers>,
}

impl Runner {
    /// Runs entry `entry` on `ctx`.
    pub fn run(&mut self, entry: impl EntryRef, ctx: Context, opts: &RunOptions) -> RunResult {
        let mut bufs = match self.bufs.take() {
            Some(b) => b,
            None => self.vm.take_buffers(),
        };
        let r = self.vm.run_with(&mut bufs, entry, ctx, opts);
        self.bufs = Some(bufs);
        r
    }

    pub fn vm(&self) -> &Vm {
        &self.vm
    }
}

//! The VM: a checked, translated program plus its maps ([`Vm`]), and the
//! per-thread machinery that runs it on a context ([`Runner`]), giving a
//! [`RunResult`].

// Only `fast`'s two packet copies are unsafe (and allowed there).
#![deny(unsafe_code)]

mod fast;

use crate::check::{check, EntryInfo};
use crate::config::{Engine, EngineUse, RunOptions, VmConfig, FRAME_SIZE};
use crate::ctx::{self, Context, CtxState, PacketPtrs, SkbState};
use crate::error::{LoadError, Rule, RunError, RunErrorKind};
use crate::facts::Facts;
use crate::interp::{Frame, Machine, Step, Stop};
use crate::maps::{Map, Maps};
use crate::mem::{self, GuardedBuf, Memory, Region, RegionKind, Role};
use crate::prog::Program;
use crate::result::{RunOutcome, RunResult};
pub use crate::runner::Runner;
use nfkit_abi::hook;
use nfkit_object::{Image, ProgType};
use std::sync::{Arc, Mutex};

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
pub(crate) struct Buffers {
    /// The region table and the call frames, until the machine is made:
    /// then they move into it and stay there (see `mem_of`).
    mem: Memory,
    stack: Arc<GuardedBuf>,
    pub(crate) packet: Arc<GuardedBuf>,
    frames: Vec<Frame>,
    /// Frames the last run may have dirtied (its deepest call depth + 1),
    /// each at most `Facts::stack_reach` bytes below its top.
    stack_dirty: usize,
    /// The socket-buffer state runs use, boxed once.
    skb: Option<Box<SkbState>>,
    /// Where the last run left the packet.
    pub(crate) last_shape: Shape,
    /// How the context and packet regions were last placed: a run that
    /// places them the same way only moves the packet's window.
    placed: Option<Placed>,
    /// The machine runs use, kept between runs (reset, not rebuilt: its
    /// construction and teardown were a third of a short run). It also
    /// keeps the last run's side effects (`trace_printk` lines, perf
    /// records, clones, tunnel key, trace) for the runner to show.
    /// Buffers given back to the VM's pool leave it behind (it holds
    /// the VM).
    pub(crate) machine: Option<Box<Machine>>,
    /// The native code's run context the XDP fast path keeps.
    pub(crate) jit: Option<Box<crate::jit::Kept>>,
    /// Set when the last run left everything as the next run of its
    /// shape needs it (`fast::Armed`); cleared by every run it does not
    /// fit.
    pub(crate) armed: Option<fast::Armed>,
}

/// The region table runs use: the machine's once it exists (it keeps
/// the table and the frames from then on), else the buffers' own `mem`.
#[inline(always)]
fn mem_of<'a>(machine: &'a mut Option<Box<Machine>>, mem: &'a mut Memory) -> &'a mut Memory {
    match machine.as_deref_mut() {
        Some(m) => &mut m.mem,
        None => mem,
    }
}

/// What `place_regions` set the context and packet regions to (the
/// packet buffer by address; the buffers hold it, so it cannot be reused
/// by another while this is kept).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Placed {
    ctx: RegionKind,
    has_pkt: bool,
    raw: bool,
    socket: bool,
    buf: usize,
}

/// What a run records besides its outcome, moved out of the machine
/// into a [`RunResult`].
#[derive(Default)]
struct Side {
    printk: Vec<String>,
    perf: Vec<crate::result::PerfEvent>,
    clones: Vec<crate::result::CloneRedirect>,
    tunnel_key: Option<crate::result::TunnelKey>,
    trace: Vec<crate::result::TraceStep>,
}

/// Where a run left the packet in the runner's packet buffer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Shape {
    pub pkt: PacketPtrs,
    /// Offset of `data` at the start.
    pub headroom: usize,
    /// Bytes of the packet (or raw memory) given.
    pub len: usize,
    /// A packet (or raw memory) region existed.
    pub has_pkt: bool,
    /// A socket filter's read-only packet.
    pub socket: bool,
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
    /// Native code of the entries the JIT compiled.
    jit: Option<crate::jit::Code>,
    /// What runs each entry.
    engines: Vec<EngineUse>,
    /// The region table every run starts from (frames, context and
    /// packet are placed per runner and per run).
    base_mem: Memory,
    names: RegionNames,
    empty: Arc<GuardedBuf>,
    /// Boxed: a run moves only a pointer in and out of the pool.
    #[allow(clippy::vec_box)]
    pool: Mutex<Vec<Box<Buffers>>>,
    /// What the program can do to a run's memory.
    facts: Facts,
    /// By map index: the array maps whose values have regions of their
    /// own in `base_mem` (see [`StaticValues`]).
    pub(crate) statics: Vec<Option<StaticValues>>,
    /// How long loading took, by stage.
    times: LoadTimes,
}

/// How long [`Vm::new`] took, by stage (the switch's swap-time bench).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadTimes {
    /// Checking the program (the VM's verifier) and translating it.
    pub check: std::time::Duration,
    /// Creating (or sharing) the maps and the region table.
    pub maps: std::time::Duration,
    /// Compiling to native code (zero on the interpreter).
    pub jit: std::time::Duration,
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
        Vm::load(image, config, None, &|_| false)
    }

    /// [`Vm::new`], but every map of `image` that `keep` names and that
    /// `old` has in a compatible form ([`Map::can_share`]: same name,
    /// type, sizes) keeps `old`'s entries: both VMs share it. The other
    /// maps are new. `old` is left as it is (a hitless reload builds the
    /// next version this way while the running one goes on).
    pub fn new_keeping(
        image: &Image,
        config: VmConfig,
        old: &Vm,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vm, LoadError> {
        Vm::load(image, config, Some(old), keep)
    }

    fn load(
        image: &Image,
        config: VmConfig,
        old: Option<&Vm>,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<Vm, LoadError> {
        if config.max_frames == 0 || config.max_frames > 64 {
            return Err(LoadError::Image(format!(
                "max_frames must be 1..=64, is {}",
                config.max_frames
            )));
        }
        let t0 = std::time::Instant::now();
        let checked = check(image, &config)?;
        let t1 = std::time::Instant::now();
        let maps = Maps::new_keeping(&image.maps, config.ncpus, checked.entries.len(), |s| {
            let old = old?;
            keep(&s.name)
                .then(|| old.map(&s.name))
                .flatten()
                .map(|m| &**m)
        })?;
        let empty = alloc(0)?;
        let closed = |name: &str| (Region::opaque(name, &empty), mem::Window::CLOSED);
        let mut base = vec![
            closed("null"),
            closed("map handles"),
            closed("functions"),
            closed("context"),
            closed("packet"),
        ];
        // Frames get the runner's stack in `take_buffers`.
        base.extend((0..mem::MAX_FRAMES).map(|_| closed("stack")));
        base.extend(maps.iter().map(|m| map_region(m, &empty)));
        let statics = static_values(&maps, &mut base);
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
        let t2 = std::time::Instant::now();
        let (jit, engines) = match config.engine {
            Engine::Jit => {
                crate::jit::compile(&checked.program, &checked.entries, &config, &statics)
            }
            Engine::Interp => (None, vec![EngineUse::Interp; checked.entries.len()]),
        };
        let times = LoadTimes {
            check: t1 - t0,
            maps: t2 - t1,
            jit: t2.elapsed(),
        };
        let facts = Facts::of(&checked.program.insns);
        Ok(Vm {
            inner: Arc::new(Inner {
                facts,
                times,
                jit,
                engines,
                program: checked.program,
                entries: checked.entries,
                maps,
                config,
                base_mem: Memory::new(base),
                statics,
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

    /// How long loading took, by stage.
    pub fn load_times(&self) -> LoadTimes {
        self.inner.times
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

    /// Why entry `entry` cannot run, if it cannot: a helper it reaches is
    /// unknown to the VM or not allowed for its type (the load succeeds
    /// as long as some entry of the Image can run).
    pub fn entry_refused(&self, entry: impl EntryRef) -> Option<&LoadError> {
        let ei = entry.entry_index(self)?;
        self.inner.entries.get(ei)?.refused.as_ref()
    }

    /// What runs entry `entry`: the interpreter, the JIT, or the
    /// interpreter because the JIT could not compile it (and why).
    pub fn engine(&self, entry: impl EntryRef) -> Option<&EngineUse> {
        let ei = entry.entry_index(self)?;
        self.inner.engines.get(ei)
    }

    /// Ops (by index) whose packet access the checker proved in bounds
    /// on every run, so native code leaves out its check (kernel-profile
    /// loads only).
    pub fn proven_packet_accesses(&self) -> Vec<usize> {
        let p = &self.inner.program.packet_proven;
        (0..p.len()).filter(|&i| p[i]).collect()
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

    /// `function+offset` of op `op` (as in [`TraceStep::op`](crate::TraceStep::op)).
    pub fn location(&self, op: usize) -> String {
        self.inner.program.location(op)
    }

    /// A runner owning reusable buffers, for one thread's many runs.
    pub fn runner(&self) -> Runner {
        Runner::new(self.clone(), self.take_buffers())
    }

    /// Runs entry `entry` once (buffers come from a shared pool).
    pub fn run(&self, entry: impl EntryRef, ctx: Context, opts: &RunOptions) -> RunResult {
        let mut bufs = self.take_buffers();
        let r = self.run_with(&mut bufs, entry, ctx, opts);
        if let Ok(mut pool) = self.inner.pool.lock() {
            if pool.len() < 64 {
                // The machine holds the VM: a pooled one would keep it
                // alive forever. Its region table and frames go back to
                // the buffers.
                bufs.armed = None;
                if let Some(m) = bufs.machine.take() {
                    let m = *m;
                    bufs.mem = m.mem;
                    bufs.frames = m.frames;
                }
                pool.push(bufs);
            }
        }
        r
    }

    pub(crate) fn take_buffers(&self) -> Box<Buffers> {
        if let Some(b) = self.inner.pool.lock().ok().and_then(|mut p| p.pop()) {
            return b;
        }
        let stack_len = self.inner.config.max_frames * FRAME_SIZE;
        let stack = GuardedBuf::new(stack_len)
            .map(Arc::new)
            .unwrap_or_else(|_| self.inner.empty.clone());
        let mut mem = self.inner.base_mem.clone();
        for d in 0..self.inner.config.max_frames {
            let (r, w) = Region::frame(d as u32, &stack, &self.inner.names.stack);
            mem.replace(mem::STACK + d as u32, r, w);
        }
        // The entry's frame is always live.
        let _ = mem.open_frame(0);
        Box::new(Buffers {
            mem,
            stack,
            packet: self.inner.empty.clone(),
            frames: Vec::with_capacity(self.inner.config.max_frames),
            // A new mapping is zeroed.
            stack_dirty: 0,
            skb: None,
            last_shape: Shape::default(),
            placed: None,
            machine: None,
            armed: None,
            jit: self
                .inner
                .jit
                .as_ref()
                .map(|_| crate::jit::Kept::new(&self.inner.config)),
        })
    }

    /// One run with a [`RunResult`]: the core run, then the packet and
    /// the side effects copied out.
    pub(crate) fn run_with(
        &self,
        bufs: &mut Buffers,
        entry: impl EntryRef,
        ctx: Context,
        opts: &RunOptions,
    ) -> RunResult {
        let out = self.run_core(bufs, entry, &ctx, opts);
        let s = bufs.last_shape;
        let p = s.pkt;
        let mut packet = vec![0u8; p.data_end.saturating_sub(p.data)];
        let mut meta = vec![0u8; p.data.saturating_sub(p.meta)];
        if s.has_pkt {
            let _ = bufs.packet.read(p.data, &mut packet);
            let _ = bufs.packet.read(p.meta, &mut meta);
        }
        if let (Context::Skb(sk), true) = (&ctx, s.socket) {
            // Socket filters cannot change the packet; report the whole frame.
            packet = sk.packet.to_vec();
        }
        // The side effects move out of the machine (which stays).
        let mut side = Side::default();
        if let Some(m) = bufs.machine.as_deref_mut() {
            side = Side {
                printk: std::mem::take(&mut m.printk),
                perf: std::mem::take(&mut m.net.perf),
                clones: std::mem::take(&mut m.net.clones),
                tunnel_key: m.net.tunnel.take(),
                trace: std::mem::take(&mut m.trace),
            };
        }
        RunResult {
            result: out.result,
            packet,
            meta,
            head_delta: out.head_delta,
            redirect: out.redirect,
            skb: out.skb,
            printk: side.printk,
            perf_events: side.perf,
            clones: side.clones,
            tunnel_key: side.tunnel_key,
            insns: out.insns,
            engine: out.engine,
            trace: side.trace,
        }
    }

    /// One run, in three phases: `prepare` (entry, stack, packet,
    /// context, regions), `Machine::exec` (or the entry's native code),
    /// `finish` (the outcome; buffers and side effects back to `bufs`).
    /// The phases are inlined back into this function: a short program's
    /// run costs little more than this setup. Allocates nothing once
    /// `bufs` has served one run of the same shape.
    #[inline(always)]
    pub(crate) fn run_core(
        &self,
        bufs: &mut Buffers,
        entry: impl EntryRef,
        ctx: &Context,
        opts: &RunOptions,
    ) -> RunOutcome {
        match self.prepare(bufs, entry, ctx, opts) {
            Ok((e, layout)) => self.execute(bufs, e, layout, opts, None),
            Err(kind) => {
                bufs.last_shape = Shape::default();
                RunOutcome::setup_failed(kind)
            }
        }
    }

    /// [`Runner::run_packet`]'s run: `run_core` on the context `ctx`
    /// makes of `packet`, with the packet written back into it when the
    /// program may have changed it. (The write-back happens inside, so
    /// the outcome is built once, in place.)
    #[inline(always)]
    pub(crate) fn run_on(
        &self,
        bufs: &mut Buffers,
        entry: impl EntryRef,
        packet: &mut Vec<u8>,
        ctx: crate::ctx::PacketCtx,
        opts: &RunOptions,
    ) -> RunOutcome {
        let fields = match ctx {
            crate::ctx::PacketCtx::Xdp => Some(fast::XdpFields::default_for(packet.len())),
            crate::ctx::PacketCtx::XdpWith(md) => fast::XdpFields::of(md),
            _ => None,
        };
        if let Some(a) = &bufs.armed {
            let admitted = match (&fields, entry.entry_index(self)) {
                (Some(f), Some(ei)) => {
                    a.admits(ei, packet.len(), f, opts, self.inner.config.budget)
                }
                _ => None,
            };
            match admitted {
                Some(tailroom) => return self.run_armed(bufs, packet, tailroom, opts),
                None => bufs.armed = None,
            }
        }
        self.run_unarmed(bufs, entry, packet, ctx, opts, fields)
    }

    /// `run_on` when the runner is not armed for the run: the lean and
    /// fast paths, else the general one. (Not inlined, so the armed run
    /// does not pay this one's frame.)
    #[inline(never)]
    fn run_unarmed(
        &self,
        bufs: &mut Buffers,
        entry: impl EntryRef,
        packet: &mut Vec<u8>,
        ctx: crate::ctx::PacketCtx,
        opts: &RunOptions,
        fields: Option<fast::XdpFields>,
    ) -> RunOutcome {
        if let (Some(f), Some(ei)) = (fields, entry.entry_index(self)) {
            if self.fast_ok(bufs, ei, packet.len(), &f, opts) {
                return self.run_xdp_fast(bufs, ei, packet, f, opts);
            }
        }
        match self.prepare(bufs, entry, &ctx.context(packet), opts) {
            Ok((e, layout)) => self.execute(bufs, e, layout, opts, Some(packet)),
            Err(kind) => {
                bufs.last_shape = Shape::default();
                RunOutcome::setup_failed(kind)
            }
        }
    }

    /// Runs entry `e` on what `prepare` laid out: the machine, the
    /// interpreter or the entry's native code, then `finish`.
    #[inline(always)]
    fn execute(
        &self,
        bufs: &mut Buffers,
        e: &EntryInfo,
        mut layout: Layout,
        opts: &RunOptions,
        back: Option<&mut Vec<u8>>,
    ) -> RunOutcome {
        let mut m = self.machine(bufs, e, &mut layout, opts);
        let jit = match (&self.inner.jit, self.inner.engines.get(e.index)) {
            (Some(code), Some(EngineUse::Jit)) if !opts.trace && !opts.interp => Some(code),
            _ => None,
        };
        let native = jit.and_then(|code| code.exec(&mut m, e.start_op));
        let ran_native = native.is_some();
        let outcome = match native {
            Some(outcome) => outcome,
            None => m.exec(&self.inner.program.ops, e.start_op, opts.trace),
        };
        // Native code keeps `m.deepest` as the interpreter does, so the
        // frames to clear are known either way.
        let engine = if ran_native {
            Engine::Jit
        } else {
            Engine::Interp
        };
        let out = self.finish(&mut m, outcome, e, &layout, bufs, (engine, false), back);
        bufs.machine = Some(m);
        out
    }

    /// Checks the run's arguments, clears what the last run may have
    /// written to the stack, lays out the packet and the context, and
    /// points the fixed regions at them.
    #[inline(always)]
    fn prepare(
        &self,
        bufs: &mut Buffers,
        entry: impl EntryRef,
        ctx: &Context,
        opts: &RunOptions,
    ) -> Result<(&EntryInfo, Layout), RunErrorKind> {
        let inner = &*self.inner;
        bufs.armed = None;
        let Some(ei) = entry.entry_index(self) else {
            return Err(RunErrorKind::Setup("no such entry program".into()));
        };
        let e = &inner.entries[ei];
        if let Some(why) = &e.refused {
            return Err(RunErrorKind::Setup(format!(
                "program {} cannot run: {why}",
                e.name
            )));
        }
        if opts.cpu >= inner.config.ncpus {
            return Err(RunErrorKind::Setup(format!(
                "cpu {} out of range ({} CPUs)",
                opts.cpu, inner.config.ncpus
            )));
        }
        let stack_len = inner.config.max_frames * FRAME_SIZE;
        if bufs.stack.len() != stack_len {
            return Err(RunErrorKind::Setup("cannot allocate the stack".into()));
        }
        clear_stack(&bufs.stack, bufs.stack_dirty, inner.facts.stack_reach);
        bufs.stack_dirty = 0;
        let layout = lay_out(bufs, ctx, e.prog_type, inner.facts.moves_head)?;
        self.place_regions(bufs, &layout);
        Ok((e, layout))
    }

    /// Points the context and packet regions of `bufs.mem` at this run's
    /// buffers (the frames stay where `take_buffers` put them).
    #[inline(always)]
    fn place_regions(&self, bufs: &mut Buffers, l: &Layout) {
        let inner = &*self.inner;
        let m = mem_of(&mut bufs.machine, &mut bufs.mem);
        m.reset(inner.base_mem.len());
        let s = &l.shape;
        let ctx_kind = if ctx::ctx_size(&l.ctx) > 0 {
            RegionKind::Ctx
        } else {
            RegionKind::Opaque
        };
        let key = Placed {
            ctx: ctx_kind,
            has_pkt: s.has_pkt,
            raw: l.raw,
            socket: s.socket,
            buf: Arc::as_ptr(&bufs.packet) as usize,
        };
        if bufs.placed == Some(key) {
            // Only windows change during a run (the packet's, when its
            // pointers move); regions stay as placed.
            m.set_window(mem::CTX, 0, 0);
            if s.has_pkt {
                m.set_window(mem::PACKET, s.pkt.meta, s.pkt.data_end);
            } else {
                m.set_window(mem::PACKET, 0, 0);
            }
            return;
        }
        // The fixed regions are set in place: their names are shared
        // strings made once per VM, so a run allocates nothing here.
        let names = &inner.names;
        let empty = &inner.empty;
        m.place(mem::CTX, ctx_kind, empty, (0, 0, false), &names.context);
        if s.has_pkt {
            let name = if l.raw { &names.memory } else { &names.packet };
            let window = (s.pkt.meta, s.pkt.data_end, !s.socket);
            m.place(mem::PACKET, RegionKind::Mem, &bufs.packet, window, name);
        } else {
            let name = &names.packet;
            m.place(mem::PACKET, RegionKind::Opaque, empty, (0, 0, false), name);
        }
        bufs.placed = Some(key);
    }

    /// The run's machine, its registers set for entry `e`: the buffers'
    /// machine reset in place (made once per buffers), with the buffers'
    /// region table, frames and side-effect lists swapped in.
    #[inline(always)]
    fn machine(
        &self,
        bufs: &mut Buffers,
        e: &EntryInfo,
        l: &mut Layout,
        opts: &RunOptions,
    ) -> Box<Machine> {
        let mut m = match bufs.machine.take() {
            Some(m) => m,
            None => Box::new(Machine {
                vm: self.inner.clone(),
                regs: [0; 16],
                mem: std::mem::take(&mut bufs.mem),
                frames: std::mem::take(&mut bufs.frames),
                count: 0,
                budget: 0,
                cpu: 0,
                prog_type: e.prog_type,
                tail_calls: 0,
                may_goto: 0,
                ctx: CtxState::None,
                pkt: l.shape.pkt,
                pkt_min: 0,
                pkt_max: 0,
                mac: 0,
                deepest: 0,
                redirect: None,
                printk: Vec::new(),
                clock: None,
                rng: None,
                lock_held: None,
                net: crate::helpers::net::NetRun::new(None, None),
                reservations: Vec::new(),
                trace: Vec::new(),
                trace_pending: None,
            }),
        };
        self.reset_machine(&mut m, e, l, opts);
        m
    }

    /// Resets machine `m` for a run of entry `e` on layout `l` (what any
    /// earlier run may have left, and the run's own settings).
    #[inline(always)]
    fn reset_machine(&self, m: &mut Machine, e: &EntryInfo, l: &mut Layout, opts: &RunOptions) {
        let inner = &*self.inner;
        m.frames.clear();
        m.regs = [0; 16];
        m.regs[1] = l.args[0];
        m.regs[2] = l.args[1];
        // The entry's frame pointer: the top of its frame, at the top of
        // the stack.
        m.regs[10] = mem::addr(mem::STACK, (inner.config.max_frames * FRAME_SIZE) as u64);
        self.reset_helper_state(m, opts);
        let pkt = l.shape.pkt;
        m.count = 0;
        m.budget = opts.budget.unwrap_or(inner.config.budget);
        m.cpu = opts.cpu;
        m.prog_type = e.prog_type;
        m.may_goto = inner.config.may_goto_budget;
        m.ctx = std::mem::replace(&mut l.ctx, CtxState::None);
        m.pkt = pkt;
        m.pkt_min = ctx::XDP_FRAME_SIZE.min(pkt.meta);
        m.pkt_max = pkt.data_end + l.tailroom;
        m.mac = l.shape.headroom;
        m.deepest = 0;
    }

    /// Resets what only helpers change (side effects, the network state,
    /// tail calls, redirect, the clock and random overrides, locks,
    /// reservations, the per-CPU static regions' CPU), each only where
    /// the last run left something or the options differ: no reference
    /// count is taken when the options give the same clock, generator,
    /// routes or tunnel key as the last run.
    #[inline(always)]
    pub(crate) fn reset_helper_state(&self, m: &mut Machine, opts: &RunOptions) {
        // The last run's side effects go (they stay in the machine, not
        // swapped in and out: that cost a sixth of a short run).
        if !m.printk.is_empty() {
            m.printk.clear();
        }
        if !m.trace.is_empty() {
            m.trace.clear();
        }
        let net = &mut m.net;
        if !net.perf.is_empty() {
            net.perf.clear();
        }
        if !net.clones.is_empty() {
            net.clones.clear();
        }
        if !same_arc(&net.fib, &opts.fib) {
            net.fib = opts.fib.clone();
        }
        if net.tunnel.is_some() || opts.tunnel_key.is_some() {
            net.tunnel = opts.tunnel_key.clone();
        }
        net.encapsulated = false;
        net.mac_len = ctx::ETH_HLEN;
        net.csum_unnecessary = None;
        m.tail_calls = 0;
        m.redirect = None;
        // Overrides cost a reference count; the VM's own clock and
        // generator none, and the same override as the last run's none.
        if !same_arc(&m.clock, &opts.clock) {
            m.clock = opts.clock.clone();
        }
        if !same_arc(&m.rng, &opts.rng) {
            m.rng = opts.rng.clone();
        }
        m.lock_held = None;
        m.reservations.clear();
        m.trace_pending = None;
        if m.mem.statics_cpu != opts.cpu {
            self.layout_statics(m, opts.cpu);
        }
    }

    /// Points the static value regions of the per-CPU arrays at `cpu`'s
    /// slots (they are laid out for one CPU at a time: a runner's runs
    /// usually keep theirs).
    #[cold]
    fn layout_statics(&self, m: &mut Machine, cpu: u32) {
        for s in self.inner.statics.iter().flatten() {
            if s.ncpus > 1 && cpu < s.ncpus {
                for k in 0..s.max {
                    let off = s.offset(k, cpu);
                    m.mem
                        .set_window(s.first + k, off, off + s.value_size as usize);
                }
            }
        }
        m.mem.statics_cpu = cpu;
    }

    /// The run's outcome from the machine after `exec`; gives the
    /// buffers, the context state and the side effects back to `bufs`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        m: &mut Machine,
        outcome: Step<u64>,
        e: &EntryInfo,
        l: &Layout,
        bufs: &mut Buffers,
        (engine, all_frames): (Engine, bool),
        back: Option<&mut Vec<u8>>,
    ) -> RunOutcome {
        let result = self.result_of(m, outcome, e);
        let skb = match std::mem::replace(&mut m.ctx, CtxState::None) {
            CtxState::Skb(s) => {
                let out = s.out.clone();
                bufs.skb = Some(s);
                Some(out)
            }
            _ => None,
        };
        let mut shape = l.shape;
        shape.pkt = m.pkt;
        let head_delta = if shape.socket {
            0
        } else {
            m.pkt.data as i64 - shape.headroom as i64
        };
        // Frames a fault left live close; the entry's stays open.
        for d in 1..=m.deepest {
            m.mem.close_frame(d);
        }
        // Frames below the deepest one used were never touched.
        bufs.stack_dirty = if all_frames {
            self.inner.config.max_frames
        } else {
            m.deepest + 1
        };
        bufs.last_shape = shape;
        let packet_written = match back {
            Some(v) => write_back(&bufs.packet, &shape, self.inner.facts.writes_packet, v),
            None => false,
        };
        RunOutcome {
            result,
            head_delta,
            packet_written,
            redirect: m.redirect.take(),
            skb,
            insns: m.count,
            engine,
        }
    }
}

impl Vm {
    /// The result of entry `e`'s run from `outcome`, once the lock a
    /// faulting run held is released and reservations it left are
    /// dropped (a fault of their own if the run had ended well).
    #[inline(always)]
    pub(crate) fn result_of(
        &self,
        m: &mut Machine,
        outcome: Step<u64>,
        e: &EntryInfo,
    ) -> Result<u64, RunError> {
        // XDP_ABORTED is 0, as is a socket filter's "drop".
        let fault_code = match e.prog_type {
            ProgType::SchedCls | ProgType::SchedAct => hook::TC_ACT_SHOT as u64,
            _ => hook::XDP_ABORTED as u64,
        };
        let mut result = match outcome {
            Ok(v) | Err(Stop::Exit(v)) => Ok(v),
            Err(Stop::Fault { pc, kind }) => Err(self.fault(pc, kind, fault_code)),
        };
        if let Some(lock) = m.lock_held.take() {
            m.unlock(lock);
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
        result
    }

    /// The error of a fault at op `pc`.
    #[cold]
    fn fault(&self, pc: usize, kind: RunErrorKind, fault_code: u64) -> RunError {
        let program = &self.inner.program;
        RunError {
            slot: program.slot(pc),
            location: program.location(pc),
            kind,
            fault_code,
        }
    }
}

/// Copies the packet a run left (`data..data_end`) into the caller's
/// `out` when the program may have changed it: it can write the packet
/// (`writes`) or moved its ends. True if it did.
#[inline(always)]
fn write_back(buf: &GuardedBuf, s: &Shape, writes: bool, out: &mut Vec<u8>) -> bool {
    if !s.has_pkt || s.socket {
        return false;
    }
    let p = s.pkt;
    let moved = p.data != s.headroom || p.data_end != s.headroom + s.len;
    if !moved && !writes {
        return false;
    }
    out.resize(p.data_end.saturating_sub(p.data), 0);
    fast::copy_out(buf, p.data, out);
    true
}

/// Whether two optional shared values are the same one (both absent, or
/// the same allocation).
#[inline(always)]
fn same_arc<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
        _ => false,
    }
}

/// Zeroes what the last run may have written to the stack: in each of
/// its `frames` frames from the top, the `reach` bytes below the frame's
/// top (the whole frame when the program's frame pointer escapes), so no
/// byte of one run is readable in the next.
#[inline(always)]
#[allow(unsafe_code)]
fn clear_stack(stack: &GuardedBuf, frames: usize, reach: usize) {
    if reach == 0 {
        // (The common case of straight programs: nothing to clear.)
        return;
    }
    let len = stack.len();
    let frames = frames.min(len / FRAME_SIZE);
    // SAFETY (both fills): `stack` is a runner's own stack buffer
    // (`Buffers::stack`), reached only through that runner's buffers,
    // which the caller borrows mutably: no other thread touches it.
    if reach >= FRAME_SIZE {
        let n = frames * FRAME_SIZE;
        let _ = unsafe { stack.fill_unshared(len - n, n, 0) };
    } else if reach > 0 {
        for d in 0..frames {
            let top = len - d * FRAME_SIZE;
            let _ = unsafe { stack.fill_unshared(top - reach, reach, 0) };
        }
    }
}

/// Array values with a region of their own made at load, for all maps
/// together at most this many (the region table is copied per runner).
const STATIC_VALUES_MAX: u32 = 4096;

/// An array map (plain or per-CPU, or global data) whose values each
/// have a fixed region, made at load: value `k` is region `first + k`,
/// its window exactly that value (for per-CPU arrays, the slot of the
/// CPU the runner's regions are laid out for, `Memory::statics_cpu`).
/// A lookup then gives `first + k`'s address at once, on every engine
/// (the JIT computes it inline), instead of making a region per lookup;
/// the bound is the same: one value, one CPU's slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StaticValues {
    pub first: u32,
    pub max: u32,
    pub ncpus: u32,
    pub stride: u32,
    pub value_size: u32,
    pub key_size: u32,
}

impl StaticValues {
    /// Byte offset of value `k` on `cpu` in the map's buffer.
    #[inline(always)]
    pub fn offset(&self, k: u32, cpu: u32) -> usize {
        (k as usize * self.ncpus as usize + cpu as usize) * self.stride as usize
    }

    /// What a lookup of key `k` gives on `cpu` (ignored for a plain
    /// array): the address of value `k`'s region, or 0 past `max`.
    #[inline(always)]
    pub fn lookup(&self, k: u32, cpu: u32) -> u64 {
        let c = if self.ncpus == 1 { 0 } else { cpu };
        if k < self.max {
            mem::addr(self.first + k, self.offset(k, c) as u64)
        } else {
            0
        }
    }
}

/// Adds the static value regions (CPU 0's slots) of the array maps that
/// fit [`STATIC_VALUES_MAX`] to `base`; by map index, what was made.
fn static_values(maps: &Maps, base: &mut Vec<(Region, mem::Window)>) -> Vec<Option<StaticValues>> {
    let mut out = vec![None; maps.iter().map(|m| m.index + 1).max().unwrap_or(0)];
    let mut left = STATIC_VALUES_MAX;
    for m in maps.iter() {
        let (crate::maps::Store::Array(a), Some((buf, writable))) = (&*m.store, m.value_buf())
        else {
            continue;
        };
        if a.max > left || base.len() + a.max as usize >= u32::MAX as usize {
            continue;
        }
        left -= a.max;
        let s = StaticValues {
            first: base.len() as u32,
            max: a.max,
            ncpus: a.ncpus,
            stride: a.stride as u32,
            value_size: a.value_size as u32,
            key_size: m.spec.key_size,
        };
        // The name dynamic value regions get (`Memory::map_name`).
        let name: Arc<str> = format!("map '{}'", m.name()).into();
        for k in 0..a.max {
            let off = s.offset(k, 0);
            let r = Region {
                kind: mem::RegionKind::Mem,
                buf: buf.clone(),
                name: name.clone(),
                role: Role::MapValue(m.index as u32),
                writable,
            };
            base.push((r, mem::Window::of(buf, off, off + a.value_size, writable)));
        }
        if let Some(o) = out.get_mut(m.index) {
            *o = Some(s);
        }
    }
    out
}

/// The base region of map `m`, reached by `lddw` of a map value (direct
/// value access): the first value of an array or a global section, the
/// way the kernel offers it; other maps' values are reached only through
/// the regions `bpf_map_lookup_elem` makes, one value each.
fn map_region(m: &Map, empty: &Arc<GuardedBuf>) -> (Region, mem::Window) {
    let name = format!("map '{}'", m.name());
    if let (crate::maps::Store::Array(a), Some((buf, writable))) = (&*m.store, m.region()) {
        if a.ncpus == 1 {
            let window = mem::Window::of(&buf, 0, a.value_size, writable);
            let mut r = Region::mem(&name, buf, writable);
            r.role = Role::MapValue(m.index as u32);
            return (r, window);
        }
    }
    (Region::opaque(&name, empty), mem::Window::CLOSED)
}

/// The packet (or raw memory) and context of one run, as laid out in the
/// run's packet buffer.
struct Layout {
    /// Where the packet is, and what kind.
    shape: Shape,
    /// Bytes the packet may grow at its end.
    tailroom: usize,
    ctx: CtxState,
    /// r1 and r2 at entry.
    args: [u64; 2],
    /// The conformance suite's raw memory, not a packet.
    raw: bool,
}

/// Bytes a TC program's frame may grow by in one run.
const SKB_TAILROOM: usize = 8192;

/// Copies the packet (or raw memory) of `ctx` into `bufs.packet` (grown
/// when too small) and builds the context state for a `prog_type`
/// program. The headroom is cleared only when the program can move the
/// packet's start into it (`moves_head`): no other run reads it.
#[inline(always)]
fn lay_out(
    bufs: &mut Buffers,
    ctx: &Context,
    prog_type: ProgType,
    moves_head: bool,
) -> Result<Layout, RunErrorKind> {
    let socket = prog_type == ProgType::SocketFilter;
    let (bytes, headroom, tailroom, meta): (&[u8], usize, usize, &[u8]) = match ctx {
        Context::Empty => (&[], 0, 0, &[]),
        Context::Raw(m) => (m, 0, 0, &[]),
        Context::Xdp(x) => (x.packet, x.headroom.max(x.meta.len()), x.tailroom, x.meta),
        // TC programs may grow the frame (`bpf_skb_adjust_room`,
        // `bpf_skb_change_proto`) at its end.
        Context::Skb(s) if !socket => (s.packet, 0, SKB_TAILROOM, &[]),
        Context::Skb(s) => (s.packet, 0, 0, &[]),
    };
    let need = headroom + bytes.len() + tailroom;
    if bufs.packet.len() < need || bufs.packet.is_empty() {
        let b = GuardedBuf::new(need.max(4096).next_power_of_two())
            .map_err(|e| RunErrorKind::Setup(format!("cannot allocate the packet: {e}")))?;
        bufs.packet = Arc::new(b);
    }
    let pb = &bufs.packet;
    if moves_head {
        let _ = pb.fill(0, headroom - meta.len(), 0);
    }
    if !meta.is_empty() {
        let _ = pb.write(headroom - meta.len(), meta);
    }
    fast::copy_in(pb, headroom, bytes);
    let data_end = headroom + bytes.len();
    let mut pkt = PacketPtrs {
        meta: headroom - meta.len(),
        data: headroom,
        data_end,
        skb_len: bytes.len(),
    };
    let (state, args) = match ctx {
        Context::Empty => (CtxState::None, [0, 0]),
        Context::Raw(m) => (CtxState::None, [mem::addr(mem::PACKET, 0), m.len() as u64]),
        Context::Xdp(x) => (
            CtxState::Xdp {
                ingress_ifindex: x.ingress_ifindex,
                rx_queue_index: x.rx_queue_index,
                egress_ifindex: x.egress_ifindex,
            },
            [mem::addr(mem::CTX, 0), 0],
        ),
        Context::Skb(s) => {
            if socket {
                pkt.data = headroom + bytes.len().min(ctx::ETH_HLEN);
                pkt.meta = pkt.data;
                pkt.skb_len = data_end - pkt.data;
            }
            // The box of earlier runs is reused.
            let state = match bufs.skb.take() {
                Some(mut b) => {
                    *b = SkbState::from(s);
                    b
                }
                None => Box::new(SkbState::from(s)),
            };
            (CtxState::Skb(state), [mem::addr(mem::CTX, 0), 0])
        }
    };
    Ok(Layout {
        shape: Shape {
            pkt,
            headroom,
            len: bytes.len(),
            has_pkt: !matches!(ctx, Context::Empty),
            socket,
        },
        tailroom,
        ctx: state,
        args,
        raw: matches!(ctx, Context::Raw(_)),
    })
}

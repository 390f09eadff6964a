//! The engine: one compiled chain script loaded once into the VM, run by
//! N worker threads (pinned), each with its own VM runner, its own
//! receive queues and its own transmit queue on every port (the
//! crossbar). A worker takes a batch from a receive queue, runs the
//! classifier on each frame in place (its `xdp_md` carrying the input
//! port as `ingress_ifindex` and the queue as `rx_queue_index`), turns
//! the resolved verdict into outputs ([`crate::action`]), stages them per
//! output port and sends each port's batch through its own queue.
//!
//! Dispatch: a port with fewer receive queues than workers is polled by
//! the workers that own its queues, which hand each frame to worker
//! `flow_hash % N` through that worker's bounded lock-free inbox (the
//! frame's buffer is swapped for a free one: no copy); a flow always
//! lands on one worker, so its order is kept.
//!
//! Time: in a replay (every input is a pcap) `nf_now()` is the frame's
//! record time (each worker's VM clock is set per frame and
//! `nf_config.clock_pinned` is `NF_CLOCK_RAND_ONLY`, so `nf_rand()` is
//! the pinned sequence `nfkit run` uses): a replay gives what `nfkit
//! run` gives. Live, the real clock. Per-CPU maps: worker `i` is CPU `i`.

use crate::action::{self, Decision};
use crate::code::Code;
use crate::controller::Controller;
use crate::counters::{ChainTotals, Stats, WorkerCounters};
use crate::flow::flow_hash;
use crate::port::{
    Batch, OpenPort, OutFrame, PortSpec, PortStats, RxQueue, TxQueue, BATCH, FRAME_ROOM,
};
use crate::reload::{lock, Published, ReloadReport, Slot, Version, VersionFrames, VersionTotals};
use crate::update::{
    Applied, RefusalRecord, Stages, UpdateAuth, UpdateError, UpdateReport, UpdateState,
};
use crate::SwitchError;
use crossbeam_queue::ArrayQueue;
use nfkit_abi::{maps as abi_maps, verdict, Hook, NfConfig};
use nfkit_control::runner::{ScriptVm, STAT_NAMES};
use nfkit_lang::Compiled;
use nfkit_update::{Body, CodeFormat, Position};
use nfkit_vm::ctx::{XdpMd, XDP_HEADROOM};
use nfkit_vm::{Clock, Engine, PacketCtx, RunOptions, Runner, VmConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to run a switch.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Worker threads (at least 1).
    pub workers: usize,
    /// The VM's engine.
    pub engine: Engine,
    /// Pin worker `i` to the `i`-th allowed CPU.
    pub pin: bool,
    /// The workers' nice value (below 0: favoured by the scheduler over
    /// other work on their CPUs, so a busy worker is preempted less and
    /// takes a new version sooner; needs CAP_SYS_NICE). `None`: inherited.
    pub nice: Option<i32>,
    /// The host port (index from 0) where PASS and HOST go; `None`: the
    /// first TAP port, if any. It is host queue 0.
    pub host_port: Option<usize>,
    /// More host queues (port indexes from 0): `HOST(q)` for `q >= 1`
    /// goes out of `host_queues[q - 1]` (a queue that does not exist:
    /// queue 0, as PASS).
    pub host_queues: Vec<usize>,
    /// Frames the controller channel holds.
    pub controller_capacity: usize,
    /// Frames each worker's dispatch inbox holds.
    pub inbox_capacity: usize,
    /// Keep running when every input is done (until stopped): a replay
    /// whose switch stays up for status and reloads.
    pub linger: bool,
    /// Take authenticated updates ([`Switch::update`]) signed with these
    /// keys; `None`: no updates.
    pub auth: Option<UpdateAuth>,
}

impl Default for SwitchConfig {
    fn default() -> SwitchConfig {
        SwitchConfig {
            workers: 1,
            engine: Engine::best(),
            pin: true,
            nice: None,
            host_port: None,
            host_queues: Vec::new(),
            controller_capacity: 1024,
            inbox_capacity: 1024,
            linger: false,
            auth: None,
        }
    }
}

/// Staged frames go out after at most this many frames of a batch: a
/// frame waits for the chain runs of at most 31 others before its
/// transmit (not for the whole batch), and 32 is what one kick of a
/// copy-mode AF_XDP socket transmits, so no kick is added.
const FLUSH_EVERY: usize = 32;

/// A frame handed from the worker polling its port to the worker its
/// flow hash picks.
struct Handed {
    buf: Vec<u8>,
    port: usize,
    queue: u32,
    arrival_ns: u64,
}

/// What the workers share.
struct Shared {
    stop: AtomicBool,
    /// Do not end when every input is done.
    linger: bool,
    /// Receive queues not finished yet.
    active_rx: AtomicUsize,
    /// Frames handed over and not yet processed.
    in_flight: AtomicUsize,
    /// Some port dispatches: frames may come through the inboxes.
    dispatching: bool,
    inboxes: Vec<ArrayQueue<Handed>>,
    /// Spare frame buffers for hand-overs.
    free: ArrayQueue<Vec<u8>>,
    controller: Arc<Controller>,
    /// The running version of the chain, and the workers' view of it.
    slot: Slot,
}

/// A worker's clock: the arrival time of the frame being run (a replay:
/// the pcap record's time; live: `CLOCK_MONOTONIC` when the worker took
/// the frame off its receive ring, the clock `bpf_ktime_get_ns` reads).
#[derive(Debug, Default)]
struct FrameClock(AtomicU64);

impl Clock for FrameClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A running switch.
pub struct Switch {
    /// The VM configuration every version loads with.
    vm_config: VmConfig,
    workers: usize,
    /// One reload at a time.
    reloading: Mutex<()>,
    reloads: AtomicU64,
    reload_failures: AtomicU64,
    ports: Vec<OpenPort>,
    names: Vec<(String, String)>,
    counters: Arc<Vec<WorkerCounters>>,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<Result<(), SwitchError>>>,
    replay: bool,
    pinned: Vec<Option<usize>>,
    /// Authenticated updates: the verifier, counters and log.
    updates: Option<Mutex<UpdateState>>,
    /// The `SCHED_FIFO` priority verified updates are applied at (0:
    /// the caller's own; [`Switch::set_update_priority`]).
    update_priority: std::sync::atomic::AtomicI32,
    /// The system refused the real-time priority (said once on stderr).
    realtime_refused: std::sync::Once,
}

/// One receive queue a worker polls.
struct RxSlot {
    port: usize,
    queue: u32,
    q: Box<dyn RxQueue>,
    /// The port has fewer queues than workers: dispatch by flow hash.
    dispatch: bool,
    done: bool,
}

/// Frames staged for one output port.
struct Stage {
    frames: Vec<Vec<u8>>,
    arrival_ns: Vec<u64>,
    len: usize,
}

impl Stage {
    fn new() -> Stage {
        Stage {
            frames: (0..BATCH).map(|_| Vec::with_capacity(FRAME_ROOM)).collect(),
            arrival_ns: vec![0; BATCH],
            len: 0,
        }
    }
}

struct Worker {
    id: usize,
    workers: usize,
    /// The version this worker runs, its runner and entry.
    ver: Arc<Version>,
    runner: Runner,
    entry: usize,
    /// The version's `post` runner per output port (crate::pipeline).
    post: Vec<Option<crate::pipeline::PostRunner>>,
    opts: RunOptions,
    clock: Arc<FrameClock>,
    /// Live ports (not a replay): frames are timed receive to transmit.
    live: bool,
    rx: Vec<RxSlot>,
    tx: Vec<Box<dyn TxQueue>>,
    stage: Vec<Stage>,
    counters: Arc<Vec<WorkerCounters>>,
    shared: Arc<Shared>,
    fault: u64,
    /// Host queues in order (queue 0 takes PASS); empty: no host port.
    hosts: Vec<usize>,
    pin: bool,
    nice: Option<i32>,
}

impl Switch {
    /// Starts a switch running `compiled` (compiled for [`Hook::Switch`])
    /// on `ports`, opened for `cfg.workers` workers.
    pub fn start(
        compiled: &Compiled,
        mut ports: Vec<OpenPort>,
        cfg: &SwitchConfig,
    ) -> Result<Switch, SwitchError> {
        if compiled.hook != Hook::Switch {
            return Err(SwitchError::Hook(compiled.hook));
        }
        if ports.is_empty() {
            return Err(SwitchError::NoPorts);
        }
        if ports.len() > usize::from(u16::MAX) {
            return Err(SwitchError::TooManyPorts(ports.len()));
        }
        let workers = cfg.workers.max(1);
        for p in &ports {
            if p.tx.len() != workers {
                return Err(SwitchError::TxQueues {
                    port: p.spec.name().to_string(),
                    got: p.tx.len(),
                    workers,
                });
            }
            if p.rx.len() > workers {
                return Err(SwitchError::RxQueues {
                    port: p.spec.name().to_string(),
                    got: p.rx.len(),
                    workers,
                });
            }
        }
        let mut vm_config = VmConfig::kernel().with_engine(cfg.engine);
        vm_config.ncpus = workers as u32;
        let replay = ports.iter().any(|p| !p.rx.is_empty())
            && ports
                .iter()
                .all(|p| p.rx.is_empty() || matches!(p.spec, PortSpec::Pcap { .. }));
        let script = ScriptVm::new_with(compiled, vm_config.clone())?;
        let mut first = version(1, script, replay, workers)?;
        first.posts = posts(
            crate::pipeline::Post::load(
                Code::Script(compiled),
                &first.script,
                vm_config.clone(),
                workers,
                ports.len(),
                1,
            )?,
            ports.len(),
        );
        let first = Arc::new(first);
        let host = cfg.host_port.filter(|&h| h < ports.len()).or_else(|| {
            ports
                .iter()
                .position(|p| matches!(p.spec, PortSpec::Tap { .. }))
        });
        if let Some(&q) = cfg.host_queues.iter().find(|&&q| q >= ports.len()) {
            return Err(SwitchError::HostQueue(q + 1));
        }
        let hosts: Vec<usize> = host
            .into_iter()
            .chain(cfg.host_queues.iter().copied())
            .collect();
        let names: Vec<(String, String)> = ports
            .iter()
            .map(|p| (p.spec.name().to_string(), p.spec.to_string()))
            .collect();
        let counters: Arc<Vec<WorkerCounters>> = Arc::new(
            (0..workers)
                .map(|_| WorkerCounters::new(ports.len()))
                .collect(),
        );
        let dispatching = workers > 1
            && ports
                .iter()
                .any(|p| !p.rx.is_empty() && p.rx.len() < workers);
        let inbox = if dispatching {
            cfg.inbox_capacity.max(BATCH)
        } else {
            1
        };
        let free = ArrayQueue::new(inbox * workers);
        if dispatching {
            for _ in 0..inbox * workers {
                let _ = free.push(Vec::with_capacity(FRAME_ROOM));
            }
        }
        let rx_total: usize = ports.iter().map(|p| p.rx.len()).sum();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            linger: cfg.linger,
            active_rx: AtomicUsize::new(rx_total),
            in_flight: AtomicUsize::new(0),
            dispatching,
            inboxes: (0..workers).map(|_| ArrayQueue::new(inbox)).collect(),
            free,
            controller: Arc::new(Controller::new(cfg.controller_capacity, FRAME_ROOM)),
            slot: Slot::new(Arc::clone(&first), workers),
        });
        // Queues and rings per worker.
        let mut rx_of: Vec<Vec<RxSlot>> = (0..workers).map(|_| Vec::new()).collect();
        let mut tx_of: Vec<Vec<Box<dyn TxQueue>>> = (0..workers).map(|_| Vec::new()).collect();
        for (pi, p) in ports.iter_mut().enumerate() {
            let dispatch = p.rx.len() < workers;
            for (qi, q) in std::mem::take(&mut p.rx).into_iter().enumerate() {
                rx_of[qi].push(RxSlot {
                    port: pi,
                    queue: qi as u32,
                    q,
                    dispatch,
                    done: false,
                });
            }
            for (w, q) in std::mem::take(&mut p.tx).into_iter().enumerate() {
                tx_of[w].push(q);
            }
        }
        let mut threads = Vec::with_capacity(workers);
        let (pin_tx, pin_rx) = std::sync::mpsc::channel();
        for (id, (rx, tx)) in rx_of.into_iter().zip(tx_of).enumerate() {
            let clock = Arc::new(FrameClock::default());
            let opts = RunOptions {
                cpu: id as u32,
                clock: Some(Arc::clone(&clock) as Arc<dyn Clock>),
                ..RunOptions::default()
            };
            let w = Worker {
                id,
                workers,
                runner: first.take_runner(id),
                post: first
                    .posts
                    .iter()
                    .enumerate()
                    .map(|(port, p)| p.as_ref().map(|p| p.take(id, port)))
                    .collect(),
                entry: first.entry,
                fault: first.fault,
                ver: Arc::clone(&first),
                opts,
                clock,
                live: !replay,
                rx,
                stage: tx.iter().map(|_| Stage::new()).collect(),
                tx,
                counters: Arc::clone(&counters),
                shared: Arc::clone(&shared),
                hosts: hosts.clone(),
                pin: cfg.pin,
                nice: cfg.nice,
            };
            let pin_tx = pin_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("nfkit-sw{id}"))
                .spawn(move || w.run(&pin_tx))
                .map_err(|source| SwitchError::Spawn { worker: id, source })?;
            threads.push(h);
        }
        drop(pin_tx);
        let mut pinned = vec![None; workers];
        for (id, cpu) in pin_rx.iter().take(workers) {
            if let Some(p) = pinned.get_mut(id) {
                *p = cpu;
            }
        }
        Ok(Switch {
            vm_config,
            workers,
            reloading: Mutex::new(()),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            ports,
            names,
            counters,
            shared,
            threads,
            replay,
            pinned,
            updates: cfg
                .auth
                .as_ref()
                .map(|a| Mutex::new(UpdateState::new(a, 1))),
            update_priority: std::sync::atomic::AtomicI32::new(crate::pin::UPDATE_PRIORITY),
            realtime_refused: std::sync::Once::new(),
        })
    }

    /// Whether the switch replays pcaps (the clock is the records').
    pub fn replay(&self) -> bool {
        self.replay
    }

    /// The CPU each worker was pinned to (`None`: not pinned).
    pub fn pinned(&self) -> &[Option<usize>] {
        &self.pinned
    }

    /// The index of the port called `name`, or numbered `name` (from 1).
    fn port_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|(n, _)| n == name).or_else(|| {
            name.parse::<usize>()
                .ok()
                .filter(|&i| i >= 1 && i <= self.names.len())
                .map(|i| i - 1)
        })
    }

    /// Each port's (name, spec), in port order (port `i + 1`).
    pub fn names(&self) -> &[(String, String)] {
        &self.names
    }

    /// The controller channel (frames sent with `CONTROLLER(reason)`).
    pub fn controller(&self) -> Arc<Controller> {
        Arc::clone(&self.shared.controller)
    }

    /// Receive-to-transmit time of the frames sent so far (live ports;
    /// nothing in a replay), summed over workers ([`crate::latency`]).
    pub fn latency(&self) -> crate::latency::LatencySummary {
        crate::latency::LatencySummary::of(self.counters.iter().map(|c| &c.latency))
    }

    /// The running version of the script (its VM and maps, shared with
    /// the workers).
    pub fn script(&self) -> Arc<Version> {
        self.shared.slot.current()
    }

    /// Hitless reload: loads `compiled` (VM checks, JIT, maps) off the
    /// packet path, its maps keeping the running version's entries by
    /// name ([`ScriptVm::new_keeping`]), publishes it and waits until
    /// every worker runs it (a worker finishes the batch at hand on the
    /// version it started with; an idle worker takes it with its next
    /// frame). A script that does not load is counted
    /// (`reload_failures`) and the running version goes on.
    pub fn reload(&self, compiled: &Compiled) -> Result<ReloadReport, SwitchError> {
        let _one = lock(&self.reloading);
        let n = self.shared.slot.current().number + 1;
        let (r, _) = self
            .reload_as(Code::Script(compiled), n, "pre", n)
            .inspect_err(|_| {
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
            })?;
        Ok(r)
    }

    /// Loads `code` as version `n` and publishes it (the reload lock
    /// held); gives the report and how publishing went.
    fn reload_as(
        &self,
        code: Code<'_>,
        n: u64,
        position: &str,
        label: u64,
    ) -> Result<(ReloadReport, Published), SwitchError> {
        let t0 = Instant::now();
        let next = self.load_next(code, n, position, label)?;
        let load = t0.elapsed();
        let p = self.publish(next);
        self.reloads.fetch_add(1, Ordering::Relaxed);
        Ok((
            ReloadReport {
                version: n,
                previous: p.previous,
                load,
                switch: p.switch,
                workers: self.workers,
                parked: p.parked,
            },
            p,
        ))
    }

    /// Publishes `next` and waits until every worker runs it (the reload
    /// lock held).
    fn publish(&self, next: Version) -> Published {
        let slot = &self.shared.slot;
        let g = next.generation;
        let next = Arc::new(next);
        let t1 = Instant::now();
        let old = slot.publish(next);
        let at = Instant::now();
        // Published: an update's real-time priority ends here, so that
        // waiting for the workers never holds up one on this CPU.
        crate::pin::Realtime::lower();
        let (parked, switch) = slot.wait(g, || self.is_done());
        let previous = old.number;
        drop(old);
        slot.sweep();
        Published {
            at,
            publish: at - t1,
            parked,
            switch,
            previous,
        }
    }

    /// Version `n` of the chain, loaded (not yet published), its frames
    /// counted as `position`'s version `label`.
    fn load_next(
        &self,
        code: Code<'_>,
        n: u64,
        position: &str,
        label: u64,
    ) -> Result<Version, SwitchError> {
        if code.hook() != Hook::Switch {
            return Err(SwitchError::Hook(code.hook()));
        }
        let cur = self.shared.slot.current();
        let script = code.load(self.vm_config.clone(), Some(&cur.script))?;
        let mut v = version(n, script, self.replay, self.workers)?;
        v.generation = cur.generation + 1;
        v.frames = VersionFrames::new(position, label, self.workers);
        let ports = self.names.len();
        v.posts = posts(
            crate::pipeline::Post::load(
                code,
                &v.script,
                self.vm_config.clone(),
                self.workers,
                ports,
                n,
            )?,
            ports,
        );
        Ok(v)
    }

    /// Applies an authenticated update message `bytes` (received at
    /// `received`, from `source`, named in the log): verified first
    /// (docs/update.md); new code for `pre` (a chain script, compiled by
    /// `compile(name, source)` for the switch hook) is loaded and
    /// published hitlessly as version N of the message; an entry update
    /// writes one entry of a map of the running version. Anything
    /// refused is counted per reason and logged, and changes nothing.
    pub fn update(
        &self,
        bytes: &[u8],
        source: &str,
        received: Instant,
        compile: &dyn Fn(&str, &str) -> Result<Compiled, String>,
    ) -> Result<UpdateReport, UpdateError> {
        let Some(state) = &self.updates else {
            return Err(UpdateError::NotEnabled);
        };
        let _one = lock(&self.reloading);
        let mut st = lock(state);
        let t0 = Instant::now();
        let checked = match st.verifier.check(bytes) {
            Ok(v) => v,
            Err(r) => {
                let e = UpdateError::Refused(r);
                st.refuse(source, &e);
                return Err(e);
            }
        };
        let verify = t0.elapsed();
        let m = &checked.message;
        let previous = st.verifier.current(&m.position);
        // Verified: applied at a real-time priority where allowed, so
        // that no normal thread preempts it in the middle (refused
        // messages stay at the caller's priority).
        let prio = self.update_priority.load(Ordering::Relaxed);
        let rt = (prio > 0).then(|| {
            let (rt, err) = crate::pin::Realtime::raise(prio);
            if let Some(e) = err {
                self.realtime_refused.call_once(|| {
                    eprintln!(
                        "switch: updates are applied at normal priority (SCHED_FIFO {prio} refused: {e})"
                    )
                });
            }
            rt
        });
        let realtime = rt.as_ref().is_some_and(|r| r.raised());
        let applied = self.apply(m, compile);
        drop(rt);
        let a = match applied {
            Ok(a) => a,
            Err(e) => {
                st.refuse(source, &e);
                return Err(e);
            }
        };
        st.verifier.accept(&checked);
        st.applied();
        Ok(UpdateReport {
            position: m.position.to_string(),
            kind: m.body.kind_name(),
            version: m.version,
            previous,
            key_id: checked.key_id,
            verify,
            load: a.load,
            switch: a.switch,
            total: a.done.saturating_duration_since(received),
            workers: self.workers,
            parked: a.parked,
            stages: a.stages,
            realtime,
        })
    }

    /// The `SCHED_FIFO` priority verified updates are applied at (1-99;
    /// 0: at the calling thread's own; default
    /// [`crate::pin::UPDATE_PRIORITY`]). Where the system refuses it
    /// the update is applied at the caller's priority, said once on
    /// standard error and in [`UpdateReport::realtime`].
    pub fn set_update_priority(&self, prio: i32) {
        self.update_priority
            .store(prio.clamp(0, 99), Ordering::Relaxed);
    }

    /// Applies a verified update.
    fn apply(
        &self,
        m: &nfkit_update::Message,
        compile: &dyn Fn(&str, &str) -> Result<Compiled, String>,
    ) -> Result<Applied, UpdateError> {
        match (&m.position, &m.body) {
            (Position::Pre, _) => {}
            // The ingress code the table's actions call (crate::pipeline).
            (Position::Table(_), Body::Code { .. }) => {}
            (Position::Post(p), Body::Code { .. }) => {
                if self.port_index(p).is_none() {
                    return Err(UpdateError::Rejected(format!(
                        "no port `{p}` in this switch"
                    )));
                }
            }
            // Entries of a pipeline table (crate::pipeline).
            (Position::Table(t), Body::EntrySet { map, .. } | Body::EntryDelete { map, .. })
                if crate::pipeline::is_table_map(t, map) => {}
            (Position::Table(t), Body::EntrySet { map, .. } | Body::EntryDelete { map, .. }) => {
                return Err(UpdateError::Rejected(format!(
                    "map `{map}` is not a map of table `{t}`"
                )))
            }
            _ => {
                return Err(UpdateError::Unsupported(format!(
                    "position {}: this switch takes code and entries at `pre`, code and \
                     entries at `table:NAME`, code at `post:PORT`",
                    m.position
                )))
            }
        }
        let t0 = Instant::now();
        let entry = |done: Instant| Applied {
            load: done - t0,
            switch: Duration::ZERO,
            parked: 0,
            done,
            stages: Stages::default(),
        };
        match &m.body {
            Body::Code {
                format: CodeFormat::ChainScript,
                name,
                bytes,
            } => {
                let text = std::str::from_utf8(bytes).map_err(|e| {
                    UpdateError::Rejected(format!("script {name} is not UTF-8: {e}"))
                })?;
                let compiled = compile(name, text).map_err(UpdateError::Rejected)?;
                self.apply_code(m, Code::Script(&compiled), t0)
            }
            Body::Code {
                format: CodeFormat::Object,
                name,
                bytes,
            } => {
                let object = nfkit_lang::chain_object::read_for_load(bytes, name)
                    .map_err(|e| UpdateError::Rejected(e.to_string()))?;
                self.apply_code(m, Code::Object(&object), t0)
            }
            Body::EntrySet { map, key, value } => {
                let cur = self.shared.slot.current();
                let mp = cur.vm.map(map).ok_or_else(|| {
                    UpdateError::Rejected(format!("no map `{map}` in the running version"))
                })?;
                mp.update(key, value, 0)
                    .map_err(|e| UpdateError::Rejected(format!("map `{map}`: {e}")))?;
                Ok(entry(Instant::now()))
            }
            Body::EntryDelete { map, key } => {
                let cur = self.shared.slot.current();
                let mp = cur.vm.map(map).ok_or_else(|| {
                    UpdateError::Rejected(format!("no map `{map}` in the running version"))
                })?;
                mp.delete(key)
                    .map_err(|e| UpdateError::Rejected(format!("map `{map}`: {e}")))?;
                Ok(entry(Instant::now()))
            }
        }
    }

    /// Loads and publishes new code for `m`'s position (`t0`: when
    /// applying began; reading the code took until now).
    fn apply_code(
        &self,
        m: &nfkit_update::Message,
        code: Code<'_>,
        t0: Instant,
    ) -> Result<Applied, UpdateError> {
        let decode = t0.elapsed();
        let rejected = |e: SwitchError| UpdateError::Rejected(e.to_string());
        let cur = self.shared.slot.current();
        let (p, times) = match &m.position {
            Position::Post(p) => {
                if code.hook() != Hook::Switch {
                    return Err(rejected(SwitchError::Hook(code.hook())));
                }
                let port = self.port_index(p).unwrap_or(0);
                let post = crate::pipeline::Post::load_program(
                    code,
                    &cur.script,
                    self.vm_config.clone(),
                    self.workers,
                    self.names.len(),
                    VersionFrames::new(&m.position.to_string(), m.version, self.workers),
                )
                .map_err(rejected)?;
                let times = post.script.vm.load_times();
                let next = cur.with_post(port, Arc::new(post), self.workers);
                drop(cur);
                (self.publish(next), times)
            }
            Position::Table(t) => {
                let next = self
                    .load_next(code, cur.number, &m.position.to_string(), m.version)
                    .map_err(rejected)?;
                crate::pipeline::keeps_table(t, &cur.script, &next.script)
                    .map_err(UpdateError::Rejected)?;
                let times = next.script.vm.load_times();
                drop(cur);
                (self.publish(next), times)
            }
            Position::Pre => {
                drop(cur);
                let (_, p) = self
                    .reload_as(code, m.version, "pre", m.version)
                    .map_err(rejected)?;
                let times = self.shared.slot.current().script.vm.load_times();
                (p, times)
            }
        };
        // Loading: from the code read to the version stored.
        let load = (p.at - p.publish).saturating_duration_since(t0);
        let vm = times.check + times.maps + times.jit;
        Ok(Applied {
            load,
            switch: p.switch,
            parked: p.parked,
            done: p.at + p.switch,
            stages: Stages {
                decode,
                check: times.check,
                maps: times.maps,
                jit: times.jit,
                prepare: load.saturating_sub(decode + vm),
                publish: p.publish,
            },
        })
    }

    /// Counts and logs a refusal that did not come as an update message
    /// (a plain reload asked of a switch that takes authenticated
    /// updates only); gives the error to answer with.
    pub fn refuse_unauthenticated(&self, source: &str) -> UpdateError {
        let e = UpdateError::Refused(nfkit_update::Refusal::Unauthenticated);
        if let Some(state) = &self.updates {
            lock(state).refuse(source, &e);
        }
        e
    }

    /// Replaces the keys updates are checked with (rotation); versions
    /// and nonces seen stay. False when the switch takes no updates.
    pub fn set_update_keys(&self, keys: nfkit_update::KeyRing) -> bool {
        match &self.updates {
            Some(s) => {
                lock(s).verifier.set_keys(keys);
                true
            }
            None => false,
        }
    }

    /// Whether the switch takes authenticated updates only.
    pub fn takes_updates(&self) -> bool {
        self.updates.is_some()
    }

    /// The last refusals ([`crate::update::LOG_KEPT`] at most), oldest
    /// first.
    pub fn refusals(&self) -> Vec<RefusalRecord> {
        self.updates
            .as_ref()
            .map(|s| lock(s).log())
            .unwrap_or_default()
    }

    /// Counts a reload refused before it reached the switch (its script
    /// did not compile).
    pub fn count_reload_failure(&self) {
        self.reload_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Reloads done and refused.
    pub fn reload_counts(&self) -> (u64, u64) {
        (
            self.reloads.load(Ordering::Relaxed),
            self.reload_failures.load(Ordering::Relaxed),
        )
    }

    /// Asks the workers to stop (they finish the batch at hand).
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    /// True once every worker has ended (all inputs done, or stopped).
    pub fn is_done(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// The counters now.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::sum(&self.counters, &self.names);
        let cur = self.shared.slot.current();
        s.version = cur.number;
        if let Some(u) = &self.updates {
            s.updates = lock(u).totals(cur.number);
        }
        (s.reloads, s.reload_failures) = self.reload_counts();
        let totals = |v: &Arc<VersionFrames>| VersionTotals {
            position: v.position.clone(),
            version: v.number,
            frames: v.total(),
        };
        s.versions = lock(&self.shared.slot.history).iter().map(totals).collect();
        s.post_versions = lock(&self.shared.slot.post_history)
            .iter()
            .map(totals)
            .collect();
        s.chains = cur
            .stats()
            .into_iter()
            .map(|c| ChainTotals {
                chain: c.chain,
                counts: c
                    .counts
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(k, &n)| (STAT_NAMES[k].to_string(), n))
                    .collect(),
            })
            .collect();
        s
    }

    /// Waits for the workers, closes every port (pcap outputs are written
    /// then) and gives the final counters and what the ports counted.
    /// The first error of a worker or a port is returned after all ports
    /// are closed.
    pub fn finish(mut self) -> Result<(Stats, Vec<PortStats>), SwitchError> {
        let mut first: Option<SwitchError> = None;
        for (i, t) in std::mem::take(&mut self.threads).into_iter().enumerate() {
            let r = t.join().unwrap_or_else(|_| {
                Err(SwitchError::Worker {
                    worker: i,
                    why: "panicked".into(),
                })
            });
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        }
        let stats = self.stats();
        let mut port_stats = Vec::with_capacity(self.ports.len());
        for p in &mut self.ports {
            match p.shut() {
                Ok(s) => port_stats.push(s),
                Err(e) => {
                    port_stats.push(PortStats::default());
                    first.get_or_insert(e.into());
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok((stats, port_stats)),
        }
    }

    /// Waits until every input is done (polling every `every`), then
    /// [`finish`](Switch::finish)es.
    pub fn run_to_end(self, every: Duration) -> Result<(Stats, Vec<PortStats>), SwitchError> {
        while !self.is_done() {
            std::thread::sleep(every);
        }
        self.finish()
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop();
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
    }
}

/// Every port's post slot holding `post` (the script's own).
fn posts(
    post: Option<crate::pipeline::Post>,
    ports: usize,
) -> Vec<Option<Arc<crate::pipeline::Post>>> {
    let post = post.map(Arc::new);
    vec![post; ports]
}

/// Version `number` of `script`: clock mode set, entry and fault action
/// found, a runner made for each of `workers` workers.
fn version(
    number: u64,
    script: ScriptVm,
    replay: bool,
    workers: usize,
) -> Result<Version, SwitchError> {
    let entry = script
        .vm
        .entry_index(script.entry())
        .ok_or(nfkit_control::runner::RunError::NoClassifier)?;
    let fault = configure(&script, replay)?;
    Ok(Version::new(
        number,
        Arc::new(script),
        entry,
        fault,
        workers,
    ))
}

/// Sets the clock mode (replay: random pinned, time from each worker's
/// frame clock) and gives the fault action.
fn configure(script: &ScriptVm, replay: bool) -> Result<u64, SwitchError> {
    let drop = verdict::Action::Drop.verdict(0);
    let Some(m) = script.vm.map(abi_maps::CONFIG) else {
        return Ok(drop);
    };
    let key = 0u32.to_le_bytes();
    let cfg = m
        .lookup(&key)
        .ok()
        .flatten()
        .as_deref()
        .and_then(NfConfig::from_bytes)
        .unwrap_or_default();
    if replay {
        let pinned = NfConfig {
            clock_pinned: nfkit_abi::layout::CLOCK_RAND_ONLY,
            ..cfg
        };
        m.update(&key, &pinned.to_bytes(), 0)
            .map_err(|e| SwitchError::Worker {
                worker: 0,
                why: format!("setting nfkit_config: {e}"),
            })?;
    }
    Ok(if verdict::is_verdict(cfg.fault_action) {
        cfg.fault_action
    } else {
        drop
    })
}

/// Stops every worker when the one holding it ends in a panic.
struct StopOnPanic(Arc<Shared>);

impl Drop for StopOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop.store(true, Ordering::Relaxed);
        }
    }
}

impl Worker {
    /// Pins the thread and works until done; a worker's error (a
    /// port's) or panic stops every worker.
    fn run(
        self,
        pinned: &std::sync::mpsc::Sender<(usize, Option<usize>)>,
    ) -> Result<(), SwitchError> {
        let cpu = if self.pin {
            crate::pin::pin_current(self.id)
        } else {
            None
        };
        if let Some(n) = self.nice {
            crate::pin::nice_current(n);
        }
        let _ = pinned.send((self.id, cpu));
        let shared = Arc::clone(&self.shared);
        let _guard = StopOnPanic(Arc::clone(&shared));
        let id = self.id;
        let r = self.work();
        // An ended worker never delays a reload.
        shared.slot.park(id, true);
        if r.is_err() {
            shared.stop.store(true, Ordering::Relaxed);
        }
        r
    }

    fn work(mut self) -> Result<(), SwitchError> {
        let mut batch = Batch::new();
        let mut idle: u32 = 0;
        // An idle worker waits in poll() on its queues' descriptors (a
        // frame wakes it at once) when every queue has them and no frame
        // can come through an inbox; else it sleeps 100 µs at a time.
        let mut fds = Vec::new();
        let wait = !self.shared.dispatching && self.rx.iter().all(|r| r.q.wait_fds(&mut fds));
        loop {
            // A new version? (Also read before every frame; here an idle
            // worker lets the old version go.)
            if self.shared.slot.epoch() != self.ver.generation {
                self.switch_version();
            }
            let mut work = self.drain_inbox();
            for i in 0..self.rx.len() {
                if self.rx[i].done {
                    continue;
                }
                let n = {
                    let slot = &mut self.rx[i];
                    let n = slot
                        .q
                        .recv(&mut batch, Duration::ZERO)
                        .map_err(SwitchError::from)?;
                    if n == 0 && slot.q.finished() {
                        slot.done = true;
                        self.shared.active_rx.fetch_sub(1, Ordering::AcqRel);
                    }
                    n
                };
                work += n;
                let (port, queue, dispatch) =
                    (self.rx[i].port, self.rx[i].queue, self.rx[i].dispatch);
                for f in 0..n.min(batch.len) {
                    let arrival = batch.arrival_ns[f];
                    let target = if dispatch {
                        flow_hash(&batch.frames[f]) as usize % self.workers
                    } else {
                        self.id
                    };
                    if target == self.id {
                        self.process(&mut batch.frames[f], port, queue, arrival);
                    } else {
                        self.hand_over(&mut batch.frames[f], target, port, queue, arrival);
                    }
                    // A frame waits for at most FLUSH_EVERY - 1 others.
                    if f % FLUSH_EVERY == FLUSH_EVERY - 1 && f + 1 < n {
                        self.flush_all()?;
                    }
                }
                self.flush_all()?;
            }
            self.flush_all()?;
            if self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            if work == 0 {
                if !self.shared.linger
                    && self.shared.active_rx.load(Ordering::Acquire) == 0
                    && self.shared.in_flight.load(Ordering::Acquire) == 0
                {
                    break;
                }
                idle = idle.saturating_add(1);
                // Between frames (so a reload does not wait for it): it
                // reads the epoch before its next frame.
                if idle < 64 {
                    std::thread::yield_now();
                } else if wait {
                    let _ = crate::port::sys::poll_in(&fds, Duration::from_millis(1));
                } else {
                    std::thread::sleep(Duration::from_micros(100));
                }
            } else {
                idle = 0;
            }
        }
        for t in &mut self.tx {
            t.flush().map_err(SwitchError::from)?;
        }
        Ok(())
    }

    /// Takes the published version and its runner (made at load), hands
    /// the old ones to the reloading thread to drop, acknowledges.
    #[cold]
    #[inline(never)]
    fn switch_version(&mut self) {
        let slot = &self.shared.slot;
        let next = slot.current();
        let runner = next.take_runner(self.id);
        // A port whose post program did not change keeps its runner.
        for (port, r) in self.post.iter_mut().enumerate() {
            let (old, new) = (self.ver.posts.get(port), next.posts.get(port));
            let same = match (old, new) {
                (Some(Some(a)), Some(Some(b))) => Arc::ptr_eq(a, b),
                (Some(None) | None, Some(None) | None) => true,
                _ => false,
            };
            if !same {
                *r = new.and_then(|p| p.as_ref()).map(|p| p.take(self.id, port));
            }
        }
        self.entry = next.entry;
        self.fault = next.fault;
        let n = next.generation;
        let old_runner = std::mem::replace(&mut self.runner, runner);
        let old = std::mem::replace(&mut self.ver, next);
        lock(&slot.retired).push((old_runner, old));
        slot.ack(self.id, n);
    }

    /// Processes the frames other workers handed over; returns how many.
    fn drain_inbox(&mut self) -> usize {
        let mut n: usize = 0;
        let shared = Arc::clone(&self.shared);
        while let Some(mut h) = shared.inboxes[self.id].pop() {
            self.process(&mut h.buf, h.port, h.queue, h.arrival_ns);
            let _ = shared.free.push(h.buf);
            shared.in_flight.fetch_sub(1, Ordering::AcqRel);
            n += 1;
        }
        n
    }

    /// Hands `frame` to worker `target` (its buffer swapped for a free
    /// one); while the target's inbox or the free list is exhausted,
    /// processes its own inbox (so two dispatching workers never wait on
    /// each other).
    fn hand_over(
        &mut self,
        frame: &mut Vec<u8>,
        target: usize,
        port: usize,
        queue: u32,
        arrival_ns: u64,
    ) {
        let shared = Arc::clone(&self.shared);
        let mut buf = loop {
            if let Some(b) = shared.free.pop() {
                break b;
            }
            if self.drain_inbox() == 0 {
                if shared.stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::yield_now();
            }
        };
        std::mem::swap(frame, &mut buf);
        let mut h = Handed {
            buf,
            port,
            queue,
            arrival_ns,
        };
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        loop {
            match shared.inboxes[target].push(h) {
                Ok(()) => break,
                Err(back) => {
                    h = back;
                    if self.drain_inbox() == 0 {
                        if shared.stop.load(Ordering::Relaxed) {
                            shared.in_flight.fetch_sub(1, Ordering::AcqRel);
                            let _ = shared.free.push(h.buf);
                            return;
                        }
                        std::thread::yield_now();
                    }
                }
            }
        }
        self.counters[self.id].handed_off.add(1);
    }

    /// Runs the chain on one frame (in place) and stages its outputs.
    fn process(&mut self, frame: &mut Vec<u8>, port: usize, queue: u32, arrival_ns: u64) {
        let c = &self.counters[self.id];
        let pc = &c.ports[port];
        pc.rx.add(1);
        if frame.len() < nfkit_vm::ctx::ETH_HLEN {
            pc.runt.add(1);
            return;
        }
        if frame.len() > FRAME_ROOM {
            pc.oversize.add(1);
            return;
        }
        self.clock.0.store(arrival_ns, Ordering::Relaxed);
        let md = XdpMd {
            packet: &[],
            meta: &[],
            ingress_ifindex: port as u32 + 1,
            rx_queue_index: queue,
            egress_ifindex: 0,
            headroom: XDP_HEADROOM,
            tailroom: 4096usize
                .saturating_sub(XDP_HEADROOM + 320)
                .saturating_sub(frame.len()),
        };
        // Busy only while the chain runs, on the version published now:
        // a worker preempted anywhere else holds no reload up.
        let slot = &self.shared.slot;
        if slot.enter(self.id) != self.ver.generation {
            self.switch_version();
        }
        self.ver.frames.per_worker[self.id].add(1);
        let out = self
            .runner
            .run_packet(self.entry, frame, PacketCtx::XdpWith(&md), &self.opts);
        self.shared.slot.leave(self.id, self.ver.generation);
        let (act, arg, faulted) = action::resolve(out.result.ok(), self.fault);
        let c = &self.counters[self.id];
        if faulted {
            c.faults.add(1);
        }
        c.actions[usize::from(act.code())].add(1);
        let nports = self.tx.len();
        match action::decide(act, arg, port, nports, &self.hosts) {
            Decision::Drop => {}
            Decision::Port(p) => self.emit(p, port, frame, arrival_ns),
            Decision::Flood => {
                for p in (0..nports).filter(|&p| p != port) {
                    self.emit(p, port, frame, arrival_ns);
                }
            }
            Decision::Controller(reason) => {
                if !self
                    .shared
                    .controller
                    .offer(reason, port as u32 + 1, arrival_ns, frame)
                {
                    c.drops.controller_full.add(1);
                }
            }
            Decision::NoHostPort => c.drops.no_host_port.add(1),
            Decision::NoSuchPort => c.drops.no_such_port.add(1),
        }
    }

    /// Stages a copy of `frame` for port `p` (sending the stage when full).
    fn emit(&mut self, p: usize, ingress: usize, frame: &[u8], arrival_ns: u64) {
        let st = &mut self.stage[p];
        let buf = &mut st.frames[st.len];
        buf.clear();
        buf.extend_from_slice(frame);
        if let Some(Some(post)) = self.post.get_mut(p) {
            let pass = post.run(buf, ingress, p, &self.opts);
            if let Some(Some(v)) = self.ver.posts.get(p) {
                v.frames.per_worker[self.id].add(1);
                if !pass {
                    v.dropped[self.id].add(1);
                }
            }
            if !pass {
                return;
            }
        }
        st.arrival_ns[st.len] = arrival_ns;
        st.len += 1;
        if st.len == BATCH {
            self.send(p);
        }
    }

    /// Sends port `p`'s stage through this worker's queue.
    fn send(&mut self, p: usize) {
        let st = &mut self.stage[p];
        let n = st.len;
        if n == 0 {
            return;
        }
        let empty = OutFrame {
            data: &[],
            arrival_ns: 0,
        };
        let mut out = [empty; BATCH];
        for (o, (f, &t)) in out
            .iter_mut()
            .zip(st.frames.iter().zip(&st.arrival_ns))
            .take(n)
        {
            *o = OutFrame {
                data: f,
                arrival_ns: t,
            };
        }
        let took = self.tx[p].send(&out[..n]).unwrap_or(0).min(n);
        if self.live && took > 0 {
            // Live: each frame's time from its receive ring to here.
            let now = crate::port::sys::now_ns();
            let h = &self.counters[self.id].latency;
            for &t in st.arrival_ns.iter().take(took) {
                h.record(now.saturating_sub(t), 1);
            }
        }
        let pc = &self.counters[self.id].ports[p];
        pc.tx.add(took as u64);
        pc.tx_dropped.add((n - took) as u64);
        st.len = 0;
    }

    /// Sends every non-empty stage and flushes those queues.
    fn flush_all(&mut self) -> Result<(), SwitchError> {
        for p in 0..self.stage.len() {
            if self.stage[p].len > 0 {
                self.send(p);
                self.tx[p].flush().map_err(SwitchError::from)?;
            }
        }
        Ok(())
    }
}

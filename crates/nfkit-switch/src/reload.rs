//! Hitless reloads: versions of the chain and the slot that publishes
//! them to the workers.
//!
//! A [`Version`] is a loaded script (its VM, JIT code, maps) with one VM
//! runner made ready for each worker, all built off the packet path.
//! [`Slot::publish`] stores it and bumps an epoch; each worker reads the
//! epoch once per loop iteration (an atomic load: no lock on the packet
//! path), and when it changed takes the new version and its runner
//! (a lock taken once per reload), then acknowledges the version it
//! runs. Each worker reads the epoch before every frame and marks itself
//! busy while it runs one: a worker between frames (polling, flushing,
//! idle, preempted) counts as switched, since it reads the epoch before
//! its next frame. [`Slot::wait`] waits until every worker switched or
//! is between frames: from then on no frame starts on the old version.

use crate::counters::Counter;
use nfkit_control::runner::ScriptVm;
use nfkit_vm::Runner;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One version of the chain: the loaded script and what workers take.
pub struct Version {
    /// 1 for the script the switch started with, then +1 per reload
    /// (`pre`'s version).
    pub number: u64,
    /// +1 per publish, whatever position changed (the slot's epoch).
    pub generation: u64,
    /// The ingress program (shared by versions that changed only a
    /// `post` program).
    pub script: Arc<ScriptVm>,
    /// The classifier's entry index.
    pub(crate) entry: usize,
    /// The fault action.
    pub(crate) fault: u64,
    /// One runner per worker, made at load; taken when the worker
    /// switches to this version.
    runners: Vec<Mutex<Option<Runner>>>,
    /// Frames each worker ran on this ingress program.
    pub(crate) frames: Arc<VersionFrames>,
    /// Each output port's `post` program (by port index): the script's
    /// own for every port, unless a `post:PORT` update replaced it.
    pub posts: Vec<Option<Arc<crate::pipeline::Post>>>,
}

impl std::ops::Deref for Version {
    type Target = ScriptVm;
    fn deref(&self) -> &ScriptVm {
        &self.script
    }
}

/// Frames run on one version, per worker (each written by its worker).
#[derive(Debug)]
pub struct VersionFrames {
    /// The position whose version this is (`pre`, `table:NAME`, `post`
    /// for a script's own post program, `post:PORT`).
    pub position: String,
    pub number: u64,
    pub per_worker: Vec<Counter>,
}

impl VersionFrames {
    /// Zeroed counters of `position`'s version `number`.
    pub fn new(position: &str, number: u64, workers: usize) -> Arc<VersionFrames> {
        Arc::new(VersionFrames {
            position: position.to_string(),
            number,
            per_worker: (0..workers).map(|_| Counter::default()).collect(),
        })
    }

    pub fn total(&self) -> u64 {
        self.per_worker.iter().map(Counter::get).sum()
    }
}

/// Frames one version ran (a row of [`crate::Stats::versions`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VersionTotals {
    /// `pre`, `table:NAME` (ingress programs), `post`, `post:PORT`.
    pub position: String,
    pub version: u64,
    pub frames: u64,
}

impl Version {
    /// A version of `script` for `workers` workers (their runners made
    /// now).
    pub(crate) fn new(
        number: u64,
        script: Arc<ScriptVm>,
        entry: usize,
        fault: u64,
        workers: usize,
    ) -> Version {
        let runners = (0..workers)
            .map(|_| Mutex::new(Some(script.vm.runner())))
            .collect();
        Version {
            number,
            generation: number,
            script,
            entry,
            fault,
            runners,
            frames: VersionFrames::new("pre", number, workers),
            posts: Vec::new(),
        }
    }

    /// The next generation of this version with port `port`'s post
    /// program replaced: the same ingress program and frame counters,
    /// new runners (made now, off the packet path).
    pub(crate) fn with_post(
        &self,
        port: usize,
        post: Arc<crate::pipeline::Post>,
        workers: usize,
    ) -> Version {
        let mut posts = self.posts.clone();
        if let Some(p) = posts.get_mut(port) {
            *p = Some(post);
        }
        Version {
            number: self.number,
            generation: self.generation + 1,
            script: Arc::clone(&self.script),
            entry: self.entry,
            fault: self.fault,
            runners: (0..workers)
                .map(|_| Mutex::new(Some(self.script.vm.runner())))
                .collect(),
            frames: Arc::clone(&self.frames),
            posts,
        }
    }

    /// Port `port`'s post program (index from 0), if any.
    pub fn post(&self, port: usize) -> Option<&crate::pipeline::Post> {
        self.posts.get(port).and_then(|p| p.as_deref())
    }

    /// Worker `id`'s runner (made at load; a new one if already taken).
    pub(crate) fn take_runner(&self, id: usize) -> Runner {
        self.runners
            .get(id)
            .and_then(|r| lock(r).take())
            .unwrap_or_else(|| self.script.vm.runner())
    }
}

/// What a reload did.
#[derive(Clone, Debug, Serialize)]
pub struct ReloadReport {
    /// The version now running.
    pub version: u64,
    /// The version it replaced.
    pub previous: u64,
    /// Loading it: VM checks, JIT, maps (off the packet path).
    #[serde(serialize_with = "micros")]
    pub load: Duration,
    /// From publishing it to every worker on it (or parked).
    #[serde(serialize_with = "micros")]
    pub switch: Duration,
    /// Workers in all.
    pub workers: usize,
    /// Workers that were idle (parked) and take it with their next frame.
    pub parked: usize,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

/// How publishing a version went (the reload lock held).
pub(crate) struct Published {
    /// When the new epoch was stored.
    pub at: Instant,
    /// Storing the version and its epoch.
    pub publish: Duration,
    /// Workers between frames at publication.
    pub parked: usize,
    /// From publication to no frame on the old version.
    pub switch: Duration,
    /// The `pre` version replaced.
    pub previous: u64,
}

/// A mutex's guard, whether or not a holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the running version is published and workers acknowledge it.
pub(crate) struct Slot {
    /// The generation of the version in `current`.
    epoch: AtomicU64,
    current: Mutex<Arc<Version>>,
    /// The generation each worker runs.
    acked: Vec<AtomicU64>,
    /// When each worker last switched (ns since `base`).
    acked_at: Vec<AtomicU64>,
    /// When each worker last finished a frame on a version already
    /// replaced (ns since `base`), and the epoch it saw then.
    left_at: Vec<AtomicU64>,
    left_epoch: Vec<AtomicU64>,
    /// When the current version was published (ns since `base`).
    published_at: AtomicU64,
    base: Instant,
    /// Workers between frames (polling, idle, ended): they read the
    /// epoch before any further frame.
    parked: Vec<AtomicBool>,
    /// Runners of versions left behind, dropped by the reloading thread
    /// (off the packet path).
    pub(crate) retired: Mutex<Vec<(Runner, Arc<Version>)>>,
    /// Every ingress version's frame counters, in order.
    pub(crate) history: Mutex<Vec<Arc<VersionFrames>>>,
    /// Every post program's frame counters, in order.
    pub(crate) post_history: Mutex<Vec<Arc<VersionFrames>>>,
}

impl Slot {
    pub(crate) fn new(first: Arc<Version>, workers: usize) -> Slot {
        let n = first.generation;
        let slot = Slot {
            epoch: AtomicU64::new(n),
            history: Mutex::new(vec![Arc::clone(&first.frames)]),
            post_history: Mutex::new(Vec::new()),
            current: Mutex::new(first),
            acked: (0..workers).map(|_| AtomicU64::new(n)).collect(),
            acked_at: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            left_at: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            left_epoch: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            published_at: AtomicU64::new(0),
            base: Instant::now(),
            parked: (0..workers).map(|_| AtomicBool::new(true)).collect(),
            retired: Mutex::new(Vec::new()),
        };
        slot.note_posts(&slot.current());
        slot
    }

    /// Adds the post programs of `v` not seen before to the history.
    fn note_posts(&self, v: &Version) {
        let mut h = lock(&self.post_history);
        for p in v.posts.iter().flatten() {
            if !h.iter().rev().any(|f| Arc::ptr_eq(f, &p.frames)) {
                h.push(Arc::clone(&p.frames));
            }
        }
    }

    /// The number of the published version (a worker's per-iteration
    /// check).
    #[inline]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The published version.
    pub(crate) fn current(&self) -> Arc<Version> {
        Arc::clone(&lock(&self.current))
    }

    /// Worker `id` runs version `n` now.
    pub(crate) fn ack(&self, id: usize, n: u64) {
        if let Some(t) = self.acked_at.get(id) {
            t.store(self.now_ns(), Ordering::SeqCst);
        }
        if let Some(a) = self.acked.get(id) {
            a.store(n, Ordering::SeqCst);
        }
    }

    /// Worker `id` parks (true: between frames, or ended) or wakes.
    pub(crate) fn park(&self, id: usize, parked: bool) {
        if let Some(p) = self.parked.get(id) {
            p.store(parked, Ordering::SeqCst);
        }
    }

    /// Worker `id` starts a frame: busy, then the epoch read (in this
    /// order, both sequentially consistent, so a publisher that saw it
    /// between frames knows it will see the new epoch).
    #[inline]
    pub(crate) fn enter(&self, id: usize) -> u64 {
        if let Some(p) = self.parked.get(id) {
            p.store(false, Ordering::SeqCst);
        }
        self.epoch.load(Ordering::SeqCst)
    }

    /// Worker `id` finished its frame, run on version `ran`; if that one
    /// was replaced meanwhile, it notes when (once per reload: the clock
    /// is read only then).
    #[inline]
    pub(crate) fn leave(&self, id: usize, ran: u64) {
        let e = self.epoch.load(Ordering::SeqCst);
        if e != ran {
            self.left_old(id, e);
        }
        if let Some(p) = self.parked.get(id) {
            p.store(true, Ordering::Release);
        }
    }

    #[cold]
    fn left_old(&self, id: usize, epoch: u64) {
        if let (Some(t), Some(e)) = (self.left_at.get(id), self.left_epoch.get(id)) {
            if e.load(Ordering::Relaxed) != epoch {
                t.store(self.now_ns(), Ordering::SeqCst);
                e.store(epoch, Ordering::SeqCst);
            }
        }
    }

    /// Nanoseconds since `base`.
    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Publishes `v`; gives the version it replaces (the caller drops
    /// it, off the packet path: workers still on it hold their own
    /// reference, which they retire to [`Slot::retired`]).
    pub(crate) fn publish(&self, v: Arc<Version>) -> Arc<Version> {
        let n = v.generation;
        {
            let mut h = lock(&self.history);
            if !h.last().is_some_and(|l| Arc::ptr_eq(l, &v.frames)) {
                h.push(Arc::clone(&v.frames));
            }
        }
        self.note_posts(&v);
        let old = std::mem::replace(&mut *lock(&self.current), v);
        self.published_at.store(self.now_ns(), Ordering::SeqCst);
        self.epoch.store(n, Ordering::SeqCst);
        old
    }

    /// Drops what workers left behind.
    pub(crate) fn sweep(&self) {
        let gone = std::mem::take(&mut *lock(&self.retired));
        drop(gone);
    }

    /// Waits until no worker runs a frame on an old version any more
    /// (or `give_up` says so). A worker that was between frames when `n`
    /// was published reads the epoch before its next frame: it switched
    /// then. One that was running a frame notes when that frame ended
    /// ([`Slot::leave`]). Gives how many workers were between frames and
    /// the time from publishing to the end of the last frame on the old
    /// version, as the workers took it (the waiter's own scheduling
    /// delays are not in it).
    pub(crate) fn wait(&self, n: u64, give_up: impl Fn() -> bool) -> (usize, Duration) {
        let from = self.published_at.load(Ordering::SeqCst);
        // None: still running a frame on the old version; Some(t): no
        // more frames on it from t on (ns since `base`).
        let mut done: Vec<Option<u64>> = vec![None; self.parked.len()];
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            for (w, d) in done.iter_mut().enumerate() {
                if d.is_some() {
                    continue;
                }
                // Between frames or on `n` first, then the record: a
                // worker notes the end of an old frame before it marks
                // itself between frames.
                let settled = self.parked[w].load(Ordering::SeqCst)
                    || self.acked[w].load(Ordering::SeqCst) == n;
                let left = (self.left_epoch[w].load(Ordering::SeqCst) == n)
                    .then(|| self.left_at[w].load(Ordering::SeqCst));
                *d = match (left, settled) {
                    (Some(t), _) => Some(t.max(from)),
                    (None, true) => Some(from),
                    (None, false) => None,
                };
            }
            if done.iter().all(Option::is_some) {
                let last = done.iter().flatten().copied().max().unwrap_or(from);
                let busy = (0..self.parked.len())
                    .filter(|&w| self.left_epoch[w].load(Ordering::SeqCst) == n)
                    .count();
                return (
                    self.parked.len() - busy,
                    Duration::from_nanos(last.saturating_sub(from)),
                );
            }
            spins += 1;
            if spins > 256 && (give_up() || start.elapsed() > Duration::from_secs(10)) {
                return (0, start.elapsed());
            }
            // Spin briefly, then sleep: with as many busy workers as
            // CPUs, a waiter that stays runnable (spinning or yielding)
            // takes the CPU of the very worker it waits for. The times
            // are the workers' own, so sleeping longer does not count.
            if spins < 256 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(10));
            }
        }
    }
}

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
    /// 1 for the script the switch started with, then +1 per reload.
    pub number: u64,
    pub script: ScriptVm,
    /// The classifier's entry index.
    pub(crate) entry: usize,
    /// The fault action.
    pub(crate) fault: u64,
    /// One runner per worker, made at load; taken when the worker
    /// switches to this version.
    runners: Vec<Mutex<Option<Runner>>>,
    /// Frames each worker ran on this version.
    pub(crate) frames: Arc<VersionFrames>,
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
    pub number: u64,
    pub per_worker: Vec<Counter>,
}

impl VersionFrames {
    pub fn total(&self) -> u64 {
        self.per_worker.iter().map(Counter::get).sum()
    }
}

/// Frames one version ran (a row of [`crate::Stats::versions`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VersionTotals {
    pub version: u64,
    pub frames: u64,
}

impl Version {
    /// A version of `script` for `workers` workers (their runners made
    /// now).
    pub(crate) fn new(
        number: u64,
        script: ScriptVm,
        entry: usize,
        fault: u64,
        workers: usize,
    ) -> Version {
        let runners = (0..workers)
            .map(|_| Mutex::new(Some(script.vm.runner())))
            .collect();
        Version {
            number,
            script,
            entry,
            fault,
            runners,
            frames: Arc::new(VersionFrames {
                number,
                per_worker: (0..workers).map(|_| Counter::default()).collect(),
            }),
        }
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

/// A mutex's guard, whether or not a holder panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the running version is published and workers acknowledge it.
pub(crate) struct Slot {
    /// The number of the version in `current`.
    epoch: AtomicU64,
    current: Mutex<Arc<Version>>,
    /// The version each worker runs.
    acked: Vec<AtomicU64>,
    /// When each worker last switched (ns since `base`).
    acked_at: Vec<AtomicU64>,
    base: Instant,
    /// Workers between frames (polling, idle, ended): they read the
    /// epoch before any further frame.
    parked: Vec<AtomicBool>,
    /// Runners of versions left behind, dropped by the reloading thread
    /// (off the packet path).
    pub(crate) retired: Mutex<Vec<(Runner, Arc<Version>)>>,
    /// Every version's frame counters, in order.
    pub(crate) history: Mutex<Vec<Arc<VersionFrames>>>,
}

impl Slot {
    pub(crate) fn new(first: Arc<Version>, workers: usize) -> Slot {
        let n = first.number;
        Slot {
            epoch: AtomicU64::new(n),
            history: Mutex::new(vec![Arc::clone(&first.frames)]),
            current: Mutex::new(first),
            acked: (0..workers).map(|_| AtomicU64::new(n)).collect(),
            acked_at: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            base: Instant::now(),
            parked: (0..workers).map(|_| AtomicBool::new(true)).collect(),
            retired: Mutex::new(Vec::new()),
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
            t.store(self.base.elapsed().as_nanos() as u64, Ordering::SeqCst);
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

    /// Worker `id` finished its frame.
    #[inline]
    pub(crate) fn leave(&self, id: usize) {
        if let Some(p) = self.parked.get(id) {
            p.store(true, Ordering::Release);
        }
    }

    /// Publishes `v`; gives the version it replaces (the caller drops
    /// it, off the packet path: workers still on it hold their own
    /// reference, which they retire to [`Slot::retired`]).
    pub(crate) fn publish(&self, v: Arc<Version>) -> Arc<Version> {
        let n = v.number;
        lock(&self.history).push(Arc::clone(&v.frames));
        let old = std::mem::replace(&mut *lock(&self.current), v);
        self.epoch.store(n, Ordering::SeqCst);
        old
    }

    /// Drops what workers left behind.
    pub(crate) fn sweep(&self) {
        let gone = std::mem::take(&mut *lock(&self.retired));
        drop(gone);
    }

    /// Waits until every worker acknowledged version `n` or is parked
    /// (or `give_up` says so); gives how many were parked and the time
    /// from `published` to the last worker's switch (taken by the
    /// workers themselves, so the waiter's own scheduling delay is not
    /// in it; parked workers count as switched at `published`).
    pub(crate) fn wait(
        &self,
        n: u64,
        published: Instant,
        give_up: impl Fn() -> bool,
    ) -> (usize, Duration) {
        let (parked, switched) = self.wait_all(n, give_up);
        let from = published.saturating_duration_since(self.base);
        let last = switched
            .iter()
            .filter_map(|&w| self.acked_at.get(w))
            .map(|t| Duration::from_nanos(t.load(Ordering::SeqCst)))
            .max()
            .unwrap_or(from);
        (parked, last.saturating_sub(from))
    }

    /// Waits as [`Slot::wait`] says; gives the parked count and the
    /// workers that switched.
    fn wait_all(&self, n: u64, give_up: impl Fn() -> bool) -> (usize, Vec<usize>) {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let mut parked = 0;
            let mut all = true;
            let mut switched = Vec::new();
            for (w, (a, p)) in self.acked.iter().zip(&self.parked).enumerate() {
                if a.load(Ordering::SeqCst) == n {
                    switched.push(w);
                    continue;
                }
                if p.load(Ordering::SeqCst) {
                    parked += 1;
                    continue;
                }
                all = false;
                break;
            }
            if all {
                return (parked, switched);
            }
            spins += 1;
            if spins > 256 && (give_up() || start.elapsed() > Duration::from_secs(10)) {
                return (parked, switched);
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

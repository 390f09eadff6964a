//! Configuration of a VM ([`VmConfig`]) and of one run ([`RunOptions`]),
//! plus the pinnable sources of time ([`Clock`]) and randomness ([`Rng`]).

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Which helper table (and entry conventions) programs are checked and run
/// against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// The Linux kernel's helpers, numbered and behaving as in the kernel,
    /// available per program type as the kernel allows them.
    Kernel,
    /// The bpf_conformance suite: helper 5 is its "unwind" helper (ends
    /// the program with r0 = its argument when that is 0, else returns
    /// it); r1 and r2 are set at entry (memory and its length).
    Conformance,
}

/// Which engine runs a VM's programs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// The interpreter: the reference, available everywhere.
    Interp,
    /// Native code from the JIT (x86-64), with the interpreter as the
    /// fallback for what it cannot compile.
    Jit,
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::best()
    }
}

impl Engine {
    /// The JIT where this build has one, else the interpreter.
    pub fn best() -> Engine {
        if cfg!(target_arch = "x86_64") {
            Engine::Jit
        } else {
            Engine::Interp
        }
    }

    /// `jit` or `interp`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Interp => "interp",
            Engine::Jit => "jit",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        match s {
            "jit" => Ok(Engine::Jit),
            "interp" | "interpreter" => Ok(Engine::Interp),
            _ => Err(format!("unknown engine '{s}' (expected jit or interp)")),
        }
    }
}

/// What runs one entry of a loaded VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineUse {
    /// The interpreter, as configured.
    Interp,
    /// Native code from the JIT.
    Jit,
    /// The JIT was asked for but cannot compile this entry: the
    /// interpreter runs it, for the reason given.
    Fallback(String),
}

impl EngineUse {
    /// The engine that actually runs.
    pub fn engine(&self) -> Engine {
        match self {
            EngineUse::Jit => Engine::Jit,
            _ => Engine::Interp,
        }
    }
}

impl std::fmt::Display for EngineUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineUse::Interp => f.write_str("interp"),
            EngineUse::Jit => f.write_str("jit"),
            EngineUse::Fallback(why) => write!(f, "interp (JIT fallback: {why})"),
        }
    }
}

/// Limits and behaviour of a VM, fixed when it is created.
#[derive(Clone)]
pub struct VmConfig {
    pub profile: Profile,
    /// The engine programs run on (default: the JIT where there is one;
    /// [`Engine::Jit`] compiles every entry at load; an entry the JIT cannot compile runs on the interpreter,
    /// and [`Vm::engine`](crate::Vm::engine) says why).
    pub engine: Engine,
    /// Enforce the kernel's limits: 512 bytes of stack summed over the
    /// frames of a call path (checked at load), at most 8 frames, at most
    /// 33 tail calls, and the verifier's refusal of division by a zero
    /// immediate and of recursion.
    pub kernel_compat: bool,
    /// Number of simulated CPUs (per-CPU maps hold this many values).
    pub ncpus: u32,
    /// Maximum number of call frames (8 in the kernel).
    pub max_frames: usize,
    /// Tail calls allowed per run (33 in the kernel; the next one falls
    /// through).
    pub max_tail_calls: u32,
    /// Default instruction budget of a run.
    pub budget: u64,
    /// Times a `may_goto` falls through in one frame before it jumps
    /// (the kernel's escape hatch for loops it cannot bound).
    pub may_goto_budget: u32,
    /// Where time comes from (`bpf_ktime_get_ns` and friends).
    pub clock: Arc<dyn Clock>,
    /// Where randomness comes from (`bpf_get_prandom_u32`).
    pub rng: Arc<dyn Rng>,
}

impl std::fmt::Debug for VmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmConfig")
            .field("profile", &self.profile)
            .field("engine", &self.engine)
            .field("kernel_compat", &self.kernel_compat)
            .field("ncpus", &self.ncpus)
            .field("max_frames", &self.max_frames)
            .field("max_tail_calls", &self.max_tail_calls)
            .field("budget", &self.budget)
            .field("may_goto_budget", &self.may_goto_budget)
            .finish()
    }
}

/// Maximum bytes of stack per frame.
pub const FRAME_SIZE: usize = 512;
/// The kernel's limit on call frames.
pub const KERNEL_MAX_FRAMES: usize = 8;
/// The kernel's limit on tail calls (`MAX_TAIL_CALL_CNT`).
pub const KERNEL_MAX_TAIL_CALLS: u32 = 33;
/// Default instruction budget of a run.
pub const DEFAULT_BUDGET: u64 = 10_000_000;
/// The kernel's limit on program size (`BPF_COMPLEXITY_LIMIT_INSNS`).
pub const MAX_INSNS: usize = 1_000_000;

impl Default for VmConfig {
    fn default() -> Self {
        VmConfig {
            profile: Profile::Kernel,
            engine: Engine::best(),
            kernel_compat: false,
            ncpus: 4,
            max_frames: KERNEL_MAX_FRAMES,
            max_tail_calls: KERNEL_MAX_TAIL_CALLS,
            budget: DEFAULT_BUDGET,
            may_goto_budget: 1 << 16,
            clock: Arc::new(RealClock::new()),
            rng: Arc::new(SeqRng::from_time()),
        }
    }
}

impl VmConfig {
    /// The kernel profile with every kernel limit enforced.
    pub fn kernel() -> VmConfig {
        VmConfig {
            kernel_compat: true,
            ..VmConfig::default()
        }
    }

    /// The same configuration on engine `engine`.
    pub fn with_engine(self, engine: Engine) -> VmConfig {
        VmConfig { engine, ..self }
    }

    /// The conformance suite's profile.
    pub fn conformance() -> VmConfig {
        VmConfig {
            profile: Profile::Conformance,
            ..VmConfig::default()
        }
    }
}

/// Options of one run.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The CPU the program runs on (selects per-CPU map values); must be
    /// below [`VmConfig::ncpus`].
    pub cpu: u32,
    /// Record every executed instruction with its register changes
    /// (traced runs use the interpreter).
    pub trace: bool,
    /// Runs on the interpreter even when the entry is compiled (for
    /// differential checks and timing both engines on one load).
    pub interp: bool,
    /// Instruction budget (default: [`VmConfig::budget`]).
    pub budget: Option<u64>,
    /// Overrides [`VmConfig::clock`] for this run.
    pub clock: Option<Arc<dyn Clock>>,
    /// Overrides [`VmConfig::rng`] for this run.
    pub rng: Option<Arc<dyn Rng>>,
    /// Devices, routes and neighbours `bpf_fib_lookup` consults; without
    /// them every lookup answers `BPF_FIB_LKUP_RET_NOT_FWDED`.
    pub fib: Option<Arc<crate::helpers::fib::FibTable>>,
    /// Tunnel metadata the packet arrived with (TC:
    /// `bpf_skb_get_tunnel_key`); without it the packet has none.
    pub tunnel_key: Option<crate::helpers::tunnel::TunnelKey>,
}

/// A source of time.
pub trait Clock: Send + Sync {
    /// `bpf_ktime_get_ns`: monotonic nanoseconds.
    fn now_ns(&self) -> u64;
    /// `bpf_ktime_get_boot_ns`: nanoseconds since boot (default: `now_ns`).
    fn boot_ns(&self) -> u64 {
        self.now_ns()
    }
}

/// A source of random numbers.
pub trait Rng: Send + Sync {
    /// `bpf_get_prandom_u32`.
    fn next_u32(&self) -> u32;
}

/// The host's monotonic clock.
#[derive(Debug)]
pub struct RealClock {
    start: Instant,
    base: u64,
}

impl RealClock {
    pub fn new() -> RealClock {
        // Start at a plausible uptime-like value rather than at zero.
        RealClock {
            start: Instant::now(),
            base: 1_000_000_000,
        }
    }
}

impl Default for RealClock {
    fn default() -> Self {
        RealClock::new()
    }
}

impl Clock for RealClock {
    fn now_ns(&self) -> u64 {
        self.base
            .wrapping_add(self.start.elapsed().as_nanos() as u64)
    }
}

/// A pinned clock: returns the value last set (tests set it per packet).
#[derive(Debug, Default)]
pub struct FixedClock(AtomicU64);

impl FixedClock {
    pub fn new(ns: u64) -> FixedClock {
        FixedClock(AtomicU64::new(ns))
    }
    pub fn set(&self, ns: u64) {
        self.0.store(ns, Ordering::Relaxed)
    }
}

impl Clock for FixedClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A xorshift64 sequence: reproducible for a given seed.
#[derive(Debug)]
pub struct SeqRng(AtomicU64);

impl SeqRng {
    pub fn new(seed: u64) -> SeqRng {
        SeqRng(AtomicU64::new(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        }))
    }
    /// Seeded from the wall clock.
    pub fn from_time() -> SeqRng {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        SeqRng::new(t)
    }
}

impl Rng for SeqRng {
    fn next_u32(&self) -> u32 {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let mut x = cur;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match self
                .0
                .compare_exchange_weak(cur, x, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return (x >> 32) as u32,
                Err(v) => cur = v,
            }
        }
    }
}

/// A pinned random number: always the same value.
#[derive(Debug)]
pub struct FixedRng(pub u32);

impl Rng for FixedRng {
    fn next_u32(&self) -> u32 {
        self.0
    }
}

//! The bag server: a UDP key-value bag (PUT adds to a key's value, GET
//! replies with it, DELETE removes it, STOP ends the run) with a limit
//! on its number of keys, and one of three filter modes: the chain
//! script as a kernel socket filter, the same check in Rust after
//! `recv`, or none. It records what the experiment needs: the receive
//! window (first to last datagram), its thread's CPU time, the
//! sequence numbers it received, the socket's and the filter's drop
//! counters.

use crate::error::{io, BagError};
use crate::filter::{Counters, KernelFilter, V2_KEY_LIMIT};
use crate::sys::{self, CpuTime};
use crate::wire::{Check, Command, Decision};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Where the server says what it does while running (filter swaps).
#[derive(Clone)]
pub struct Log(pub Arc<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Log")
    }
}

/// How often a watched script's modification time is looked at.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Where requests are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FilterMode {
    /// The chain script attached as a socket filter.
    Kernel,
    /// The same check in Rust after `recv`.
    User,
    /// No check: the server's parser ignores what it cannot parse.
    None,
}

impl FilterMode {
    pub fn name(&self) -> &'static str {
        match self {
            FilterMode::Kernel => "kernel",
            FilterMode::User => "user",
            FilterMode::None => "none",
        }
    }
}

impl std::str::FromStr for FilterMode {
    type Err = BagError;
    fn from_str(s: &str) -> Result<Self, BagError> {
        match s.to_ascii_lowercase().as_str() {
            "kernel" => Ok(FilterMode::Kernel),
            "user" => Ok(FilterMode::User),
            "none" => Ok(FilterMode::None),
            _ => Err(BagError::Config(format!(
                "unknown filter `{s}` (kernel, user, none)"
            ))),
        }
    }
}

/// Sequence numbers are tracked below this value (2 MiB of bits).
pub const SEQ_LIMIT: u64 = 1 << 24;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    pub mode: FilterMode,
    /// At most this many keys in the bag (a PUT of a new key beyond is
    /// refused).
    pub capacity: usize,
    /// The run ends this long after the last datagram (once one came).
    pub idle_timeout: Duration,
    /// ... or this long after start when nothing came (`None`: wait).
    pub start_timeout: Option<Duration>,
    /// User mode: the key limit of filter v2 from the start.
    pub key_limit: Option<u32>,
    /// Swap the filter (v1 <-> v2; the key limit in user mode) when this
    /// many datagrams have been received, for each value.
    pub swaps: Vec<u64>,
    /// `SO_RCVBUF` in bytes (`None`: the system's default).
    pub rcvbuf: Option<i32>,
    /// Pin the serving thread to this CPU.
    pub cpu: Option<usize>,
    /// Reply to GET.
    pub reply: bool,
    /// Kernel mode: a script file to watch; when its modification time
    /// changes it is compiled and attached in place of the current
    /// filter (a script that does not compile is reported, the current
    /// filter stays). Write the new version and rename it over the old.
    pub watch: Option<PathBuf>,
    /// Where to say what happens (swaps, refused scripts).
    pub log: Option<Log>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 12345)),
            mode: FilterMode::Kernel,
            capacity: 100_000,
            idle_timeout: Duration::from_secs(2),
            start_timeout: None,
            key_limit: None,
            swaps: Vec::new(),
            rcvbuf: None,
            cpu: None,
            reply: true,
            watch: None,
            log: None,
        }
    }
}

/// What a run of the server saw.
#[derive(Clone, Debug, Default)]
pub struct ServerReport {
    pub mode: Option<FilterMode>,
    /// Datagrams that reached user space (STOP included).
    pub received: u64,
    /// Requests processed (STOP excluded).
    pub valid: u64,
    /// Datagrams the user-space check refused (invalid, over the limit).
    pub user_invalid: u64,
    pub user_over_limit: u64,
    /// Datagrams the parser could not read (filter `none`).
    pub unparsed: u64,
    pub puts: u64,
    pub gets: u64,
    pub deletes: u64,
    /// PUTs of a new key refused because the bag was full.
    pub full: u64,
    /// Keys in the bag at the end.
    pub keys: usize,
    /// Did a STOP end the run (else the idle timeout)?
    pub stopped: bool,
    /// First to last datagram (STOP excluded).
    pub receive_time: Duration,
    /// CPU time of the serving thread over the run.
    pub cpu: CpuTime,
    /// Distinct sequence numbers (PUT values below [`SEQ_LIMIT`]).
    pub seqs: u64,
    /// Sequence numbers received more than once.
    pub dup_seqs: u64,
    /// The socket's drop counter at the end (filter drops and receive
    /// queue overflows).
    pub socket_drops: u64,
    /// The kernel filters' counters, summed (kernel mode).
    pub filter: Option<Counters>,
    /// Filter swaps done (`swaps` and watched-file changes).
    pub swaps: u32,
    /// Watched scripts that did not compile or load.
    pub swap_errors: u32,
    /// The network namespace's UDP `RcvbufErrors` since the bind
    /// (/proc/net/snmp): datagrams dropped for a full receive queue,
    /// by the kernel's own count (includes other sockets of the
    /// namespace, if any).
    pub rcvbuf_errors: Option<u64>,
}

/// The namespace's UDP `RcvbufErrors` (of the calling thread's netns).
fn udp_rcvbuf_errors() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/net/snmp").ok()?;
    let mut udp = s.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let i = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

impl ServerReport {
    /// Datagrams dropped for a full receive queue: the socket's drop
    /// counter less the filter's own drops.
    pub fn overflow_drops(&self) -> u64 {
        self.socket_drops
            .saturating_sub(self.filter.map_or(0, |c| c.dropped()))
    }
}

/// A set of sequence numbers, as bits.
#[derive(Default)]
struct SeqSet {
    bits: Vec<u64>,
    distinct: u64,
    dups: u64,
}

impl SeqSet {
    fn insert(&mut self, s: u64) {
        if s >= SEQ_LIMIT {
            return;
        }
        let (w, b) = ((s / 64) as usize, s % 64);
        if w >= self.bits.len() {
            self.bits.resize((w + 1).next_power_of_two().max(1024), 0);
        }
        if self.bits[w] & (1 << b) != 0 {
            self.dups += 1;
        } else {
            self.bits[w] |= 1 << b;
            self.distinct += 1;
        }
    }
}

/// A bound server, ready to run.
pub struct Server {
    cfg: ServeConfig,
    sock: UdpSocket,
    /// The filters (kernel mode): the one attached first, and v2 for swaps.
    v1: Option<Arc<KernelFilter>>,
    v2: Option<Arc<KernelFilter>>,
    /// Filters attached from the watched file, the latest last.
    watched: Vec<Arc<KernelFilter>>,
    bag: HashMap<u32, u64>,
    /// `RcvbufErrors` when the socket was bound.
    snmp0: Option<u64>,
}

impl Server {
    /// Binds `cfg.addr` and, in kernel mode, attaches `v1` (whose
    /// counters are reset, as are those of `v2`, the swap target).
    pub fn bind(
        cfg: ServeConfig,
        v1: Option<Arc<KernelFilter>>,
        v2: Option<Arc<KernelFilter>>,
    ) -> Result<Server, BagError> {
        let sock = UdpSocket::bind(cfg.addr).map_err(io(format!("bind {}", cfg.addr)))?;
        if let Some(b) = cfg.rcvbuf {
            sys::set_rcvbuf(sock.as_raw_fd(), b).map_err(io("SO_RCVBUF"))?;
        }
        if cfg.mode == FilterMode::Kernel {
            let f = v1
                .as_ref()
                .ok_or_else(|| BagError::Config("kernel mode needs a filter".into()))?;
            if !cfg.swaps.is_empty() && v2.is_none() {
                return Err(BagError::Config("swaps need a second filter".into()));
            }
            for f in v1.iter().chain(v2.iter()) {
                f.reset_counters()?;
            }
            f.attach(&sock)?;
        }
        Ok(Server {
            cfg,
            sock,
            v1,
            v2,
            watched: Vec::new(),
            bag: HashMap::new(),
            snmp0: udp_rcvbuf_errors(),
        })
    }

    /// The bound address (port 0 resolved).
    pub fn local_addr(&self) -> Result<SocketAddr, BagError> {
        self.sock.local_addr().map_err(io("local address"))
    }

    /// The server's socket (to attach or detach filters from outside).
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// One request: updates the bag, replies to GET.
    fn process(&mut self, c: Command, from: SocketAddr, rep: &mut ServerReport) {
        match c {
            Command::Put { key, value } => {
                rep.puts += 1;
                if self.bag.len() < self.cfg.capacity || self.bag.contains_key(&key) {
                    let v = self.bag.entry(key).or_insert(0);
                    *v = v.wrapping_add(value);
                } else {
                    rep.full += 1;
                }
            }
            Command::Get { key } => {
                rep.gets += 1;
                if self.cfg.reply {
                    let v = self.bag.get(&key).copied().unwrap_or(0);
                    // A lost reply is the client's business (UDP).
                    let _ = self.sock.send_to(v.to_string().as_bytes(), from);
                }
            }
            Command::Delete { key } => {
                rep.deletes += 1;
                self.bag.remove(&key);
            }
            Command::Stop => {}
        }
    }

    /// Serves until STOP or the idle timeout.
    pub fn run(&mut self) -> Result<ServerReport, BagError> {
        if let Some(cpu) = self.cfg.cpu {
            sys::pin_to_cpu(cpu).map_err(io(format!("pin to CPU {cpu}")))?;
        }
        let poll = Duration::from_millis(20).min(self.cfg.idle_timeout);
        self.sock
            .set_read_timeout(Some(poll))
            .map_err(io("read timeout"))?;
        let mut rep = ServerReport {
            mode: Some(self.cfg.mode),
            ..ServerReport::default()
        };
        let mut seqs = SeqSet::default();
        let mut check = Check {
            key_limit: self.cfg.key_limit,
        };
        let mut on_v2 = false;
        let mut next_swap = 0usize;
        let mtime = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let mut watch: Option<(PathBuf, Option<SystemTime>)> = match self.cfg.mode {
            FilterMode::Kernel => self.cfg.watch.clone().map(|p| {
                let t = mtime(&p);
                (p, t)
            }),
            _ => None,
        };
        let mut last_look = Instant::now();
        let mut buf = [0u8; 2048];
        let start = Instant::now();
        let cpu0 = CpuTime::thread();
        let mut first: Option<Instant> = None;
        let mut last = start;
        loop {
            match self.sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let now = Instant::now();
                    rep.received += 1;
                    let p = &buf[..n.min(buf.len())];
                    let keep = match self.cfg.mode {
                        FilterMode::User => match check.decide(p) {
                            Decision::Valid => true,
                            Decision::Invalid => {
                                rep.user_invalid += 1;
                                false
                            }
                            Decision::OverLimit => {
                                rep.user_over_limit += 1;
                                false
                            }
                        },
                        _ => true,
                    };
                    let mut stop = false;
                    if keep {
                        match Command::parse(p) {
                            Ok(Command::Stop) => stop = true,
                            Ok(c) => {
                                rep.valid += 1;
                                if let Command::Put { value, .. } = c {
                                    seqs.insert(value);
                                }
                                self.process(c, from, &mut rep);
                            }
                            Err(_) => rep.unparsed += 1,
                        }
                    }
                    if stop {
                        rep.stopped = true;
                        break;
                    }
                    first.get_or_insert(now);
                    last = now;
                    if next_swap < self.cfg.swaps.len() && rep.received >= self.cfg.swaps[next_swap]
                    {
                        next_swap += 1;
                        on_v2 = !on_v2;
                        self.swap(on_v2, &mut check)?;
                        rep.swaps += 1;
                    }
                    if rep.received.is_multiple_of(256) && last_look.elapsed() >= WATCH_EVERY {
                        last_look = Instant::now();
                        self.look(&mut watch, &mut rep)?;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if last_look.elapsed() >= WATCH_EVERY {
                        last_look = Instant::now();
                        self.look(&mut watch, &mut rep)?;
                    }
                    let idle = match first {
                        Some(_) => last.elapsed() >= self.cfg.idle_timeout,
                        None => self.cfg.start_timeout.is_some_and(|t| start.elapsed() >= t),
                    };
                    if idle {
                        break;
                    }
                }
                Err(e) => {
                    return Err(BagError::Io {
                        what: "recv".into(),
                        source: e,
                    })
                }
            }
        }
        rep.cpu = CpuTime::thread().since(&cpu0);
        rep.receive_time = first.map_or(Duration::ZERO, |f| last.saturating_duration_since(f));
        rep.seqs = seqs.distinct;
        rep.dup_seqs = seqs.dups;
        rep.keys = self.bag.len();
        rep.rcvbuf_errors = match (self.snmp0, udp_rcvbuf_errors()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        rep.socket_drops = sys::socket_drops(self.sock.as_raw_fd()).map_err(io("SO_MEMINFO"))?;
        if self.cfg.mode == FilterMode::Kernel {
            let mut c = Counters::default();
            for f in self
                .v1
                .iter()
                .chain(self.v2.iter())
                .chain(self.watched.iter())
            {
                c = c.add(&f.counters()?);
            }
            rep.filter = Some(c);
        }
        Ok(rep)
    }

    fn say(&self, msg: &str) {
        if let Some(Log(f)) = &self.cfg.log {
            f(msg);
        }
    }

    /// When the watched script changed: compiles and attaches it.
    fn look(
        &mut self,
        watch: &mut Option<(PathBuf, Option<SystemTime>)>,
        rep: &mut ServerReport,
    ) -> Result<(), BagError> {
        let Some((path, seen)) = watch else {
            return Ok(());
        };
        let now = std::fs::metadata(&*path).and_then(|m| m.modified()).ok();
        if now.is_none() || now == *seen {
            return Ok(());
        }
        *seen = now;
        match KernelFilter::from_file(path) {
            Ok(f) => {
                f.reset_counters()?;
                f.attach(&self.sock)?;
                self.watched.push(Arc::new(f));
                rep.swaps += 1;
                self.say(&format!(
                    "filter {} swapped in after {} datagrams",
                    path.display(),
                    rep.received
                ));
            }
            Err(e) => {
                rep.swap_errors += 1;
                self.say(&format!("filter not swapped, the current one stays: {e}"));
            }
        }
        Ok(())
    }

    /// Attaches v2 (`to_v2`) or v1 again; in user mode, sets or clears
    /// the key limit.
    fn swap(&mut self, to_v2: bool, check: &mut Check) -> Result<(), BagError> {
        match self.cfg.mode {
            FilterMode::Kernel => {
                let f = if to_v2 { &self.v2 } else { &self.v1 };
                let f = f
                    .as_ref()
                    .ok_or_else(|| BagError::Config("swap without a second filter".into()))?;
                f.attach(&self.sock)?;
            }
            FilterMode::User => {
                check.key_limit = if to_v2 { Some(V2_KEY_LIMIT) } else { None };
            }
            FilterMode::None => {}
        }
        Ok(())
    }
}

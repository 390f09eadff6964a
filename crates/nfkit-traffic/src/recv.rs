//! The receiver: counts the frames arriving on an interface, by source
//! address and, for stamped UDP frames, by stream and sequence number;
//! optionally logs the stamps in arrival order ([`RecvOptions::seq_log`]).
//! Two engines ([`RecvEngine`]), one report:
//! * packet: a raw packet socket (incoming frames only), every frame
//!   copied to user space; with [`RecvOptions::xdp_pass`], a pass-all
//!   XDP program on a veth without one, for live-engine senders;
//! * xdp: nfkit's counting program (`bpf/count.c`, see [`crate::xdp`])
//!   attached at the device's XDP hook (driver mode where the device has
//!   it), which counts in maps and drops the stamped frames it counted
//!   (other frames pass; [`RecvOptions::pass`] passes all); user space
//!   reads the maps every 20 ms and at the end. It tracks
//!   [`XDP_STREAMS`](crate::xdp::XDP_STREAMS) streams (frames of more
//!   are `untracked`) and sequence numbers below
//!   [`XDP_WINDOW`](crate::xdp::XDP_WINDOW) (others `out_of_range`);
//!   the sequence log comes through a ring buffer (records it had no
//!   room for are counted in `seq_log_lost`). It is detached when the
//!   receiver stops (and by the kernel if the process dies).

use crate::error::TrafficError;
use crate::frame::parse;
use crate::seq;
use crate::sys::{enter_netns, PacketSocket};
use crate::xdp::{self, CountTotals, Counter};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Sequence numbers above this are counted as `out_of_range` rather
/// than tracked (the bitmap of one stream stays under 32 MiB).
pub const MAX_SEQ: u64 = 1 << 28;

/// Which engine receives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecvEngine {
    /// A raw packet socket.
    #[default]
    Packet,
    /// nfkit's counting XDP program.
    Xdp,
}

/// Where and how long to receive.
#[derive(Clone, Debug, Default)]
pub struct RecvOptions {
    pub engine: RecvEngine,
    /// XDP engine: let the stamped frames through (default: dropped
    /// once counted).
    pub pass: bool,
    /// Packet engine: on a veth without an XDP program, attach
    /// `nfkit_pass` (every frame to the stack) while receiving, so that
    /// frames a live-engine sender on the peer redirects arrive instead
    /// of being dropped by the kernel (`nfkit recv` does; default off).
    pub xdp_pass: bool,
    pub dev: String,
    pub netns: Option<String>,
    /// Stop after this long (default: until [`Receiver::stop`] or `count`).
    pub duration: Option<Duration>,
    /// Stop after this many frames (the XDP engine counts that many and
    /// lets later ones pass uncounted until it stops, within 20 ms).
    pub count: Option<u64>,
    /// Write the stamps received to this file: a first line starting with
    /// `#`, then `STREAM SEQ` (decimal) per stamped frame in arrival order,
    /// duplicates included. Flushed when nothing arrives for 100 ms and
    /// when the receiver stops.
    pub seq_log: Option<PathBuf>,
}

/// The first line of a [`RecvOptions::seq_log`] file.
pub const SEQ_LOG_HEADER: &str =
    "# nfkit recv seq-log: <stream> <seq> per stamped frame, in arrival order";

/// Sequence accounting of one stream.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct StreamReport {
    pub stream: u32,
    /// Distinct sequence numbers received.
    pub received: u64,
    /// Sequence numbers below the highest received that never arrived
    /// (frames lost after the last one received cannot be seen).
    pub missing: u64,
    /// Frames whose sequence number had already arrived.
    pub duplicates: u64,
    /// Frames that arrived after one with a higher number.
    pub reordered: u64,
    pub highest: u64,
    pub out_of_range: u64,
}

/// What arrived.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RecvReport {
    pub frames: u64,
    pub bytes: u64,
    /// Frames by source IP address (`other` for non-IP frames).
    pub by_source: BTreeMap<String, u64>,
    /// IP frames without a sequence stamp.
    pub unstamped: u64,
    pub streams: Vec<StreamReport>,
    pub seconds: f64,
    /// Frames per second from the first frame to the last (0 with fewer
    /// than two; the XDP engine's clock has a few ms resolution).
    pub rate_pps: f64,
    /// The engine that received: `packet` or `xdp`.
    pub engine: String,
    /// XDP engine: stamped frames of streams beyond those it tracks.
    #[serde(skip_serializing_if = "is_zero")]
    pub untracked: u64,
    /// XDP engine: stamps the sequence log lost (ring buffer full).
    #[serde(skip_serializing_if = "is_zero")]
    pub seq_log_lost: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `frames` over `seconds` from the first to the last: (frames - 1) / s.
fn rate(frames: u64, seconds: f64) -> f64 {
    if frames < 2 || seconds <= 0.0 {
        0.0
    } else {
        (frames - 1) as f64 / seconds
    }
}

impl RecvReport {
    /// The report of the XDP engine's counts.
    fn from_counts(t: &CountTotals) -> RecvReport {
        let mut by_source = BTreeMap::new();
        for (a, n) in &t.sources {
            *by_source.entry(a.to_string()).or_default() += n;
        }
        if t.other > 0 {
            *by_source.entry("other".to_string()).or_default() += t.other;
        }
        let mut streams: Vec<StreamReport> = t
            .streams
            .iter()
            .map(|s| StreamReport {
                stream: s.stream,
                received: s.received,
                missing: s.highest1.saturating_sub(s.received),
                duplicates: s.duplicates,
                reordered: s.reordered,
                highest: s.highest1.saturating_sub(1),
                out_of_range: s.out_of_range,
            })
            .collect();
        streams.sort_by_key(|s| s.stream);
        RecvReport {
            frames: t.frames,
            bytes: t.bytes,
            by_source,
            unstamped: t.unstamped,
            streams,
            seconds: 0.0,
            rate_pps: rate(t.frames, t.last_ns.saturating_sub(t.first_ns) as f64 * 1e-9),
            engine: "xdp".into(),
            untracked: t.untracked,
            seq_log_lost: t.log_lost,
        }
    }
}

#[derive(Default)]
struct Stream {
    seen: Vec<u64>,
    report: StreamReport,
}

impl Stream {
    fn add(&mut self, n: u64) {
        let r = &mut self.report;
        if n >= MAX_SEQ {
            r.out_of_range += 1;
            return;
        }
        let (word, bit) = ((n / 64) as usize, n % 64);
        if self.seen.len() <= word {
            self.seen.resize(word + 1, 0);
        }
        let Some(w) = self.seen.get_mut(word) else {
            return;
        };
        if *w & (1 << bit) != 0 {
            r.duplicates += 1;
            return;
        }
        *w |= 1 << bit;
        if r.received > 0 && n < r.highest {
            r.reordered += 1;
        }
        r.received += 1;
        r.highest = if r.received == 1 { n } else { r.highest.max(n) };
        r.missing = r.highest + 1 - r.received;
    }
}

#[derive(Default)]
struct State {
    report: RecvReport,
    /// Arrival of the first and the latest frame (packet engine).
    first: Option<Instant>,
    last: Option<Instant>,
    streams: BTreeMap<u32, Stream>,
    /// The XDP engine's latest counts (the whole report).
    xdp: Option<RecvReport>,
}

impl State {
    /// Counts a frame; its stamp, if it has one.
    fn add(&mut self, frame: &[u8], len: usize) -> Option<(u32, u64)> {
        let r = &mut self.report;
        r.frames += 1;
        r.bytes += len as u64;
        match parse(frame) {
            Some(p) => {
                *r.by_source.entry(p.src.to_string()).or_default() += 1;
                let stamp = seq::read(p.udp_payload);
                match stamp {
                    Some((stream, n)) => self
                        .streams
                        .entry(stream)
                        .or_insert_with(|| Stream {
                            report: StreamReport {
                                stream,
                                ..StreamReport::default()
                            },
                            ..Stream::default()
                        })
                        .add(n),
                    None => r.unstamped += 1,
                }
                stamp
            }
            None => {
                *r.by_source.entry("other".into()).or_default() += 1;
                None
            }
        }
    }

    fn snapshot(&self, seconds: f64, engine: RecvEngine) -> RecvReport {
        let mut r = match (&self.xdp, engine) {
            (Some(x), _) => x.clone(),
            (None, RecvEngine::Xdp) => RecvReport {
                engine: "xdp".into(),
                ..RecvReport::default()
            },
            (None, RecvEngine::Packet) => {
                let mut r = self.report.clone();
                r.streams = self.streams.values().map(|s| s.report.clone()).collect();
                r.engine = "packet".into();
                if let (Some(f), Some(l)) = (self.first, self.last) {
                    r.rate_pps = rate(r.frames, (l - f).as_secs_f64());
                }
                r
            }
        };
        r.seconds = seconds;
        r
    }
}

/// A receiver running in its own thread (inside the namespace).
pub struct Receiver {
    engine: RecvEngine,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    start: Instant,
    thread: Option<JoinHandle<Result<(), TrafficError>>>,
}

impl Receiver {
    /// Starts receiving; returns once the socket is bound, so frames sent
    /// afterwards are counted.
    pub fn start(opts: &RecvOptions) -> Result<Receiver, TrafficError> {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let log = match &opts.seq_log {
            Some(path) => {
                let what = || format!("sequence log {}", path.display());
                let mut w =
                    BufWriter::new(File::create(path).map_err(|e| TrafficError::os(what(), e))?);
                writeln!(w, "{SEQ_LOG_HEADER}").map_err(|e| TrafficError::os(what(), e))?;
                Some(SeqLog {
                    w,
                    path: path.clone(),
                })
            }
            None => None,
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let (st, sp, o) = (state.clone(), stop.clone(), opts.clone());
        let thread = std::thread::Builder::new()
            .name("nfkit-recv".into())
            .spawn(move || {
                let mut log = log;
                let r = match o.engine {
                    RecvEngine::Packet => receive(&o, &st, &sp, ready_tx, log.as_mut()),
                    RecvEngine::Xdp => receive_xdp(&o, &st, &sp, ready_tx, log.as_mut()),
                };
                // Flushed however the loop ended; its error comes first.
                let flushed = log.as_mut().map_or(Ok(()), SeqLog::flush);
                r.and(flushed)
            })
            .map_err(|e| TrafficError::os("spawning the receiver thread", e))?;
        let start = Instant::now();
        let mut rx = Receiver {
            engine: opts.engine,
            state,
            stop,
            start,
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(rx),
            Ok(Err(e)) => {
                rx.thread.take().map(JoinHandle::join);
                Err(e)
            }
            Err(_) => match rx.thread.take().map(JoinHandle::join) {
                Some(Ok(Err(e))) => Err(e),
                _ => Err(TrafficError::Empty("the receiver thread stopped".into())),
            },
        }
    }

    /// Counts so far.
    pub fn snapshot(&self) -> RecvReport {
        let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.snapshot(self.start.elapsed().as_secs_f64(), self.engine)
    }

    /// Has the receiver stopped by itself (duration over, count reached)?
    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Asks the receiver to stop (it does within 100 ms).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for the receiver to stop by itself and returns the counts.
    pub fn wait(mut self) -> Result<RecvReport, TrafficError> {
        if let Some(t) = self.thread.take() {
            t.join()
                .map_err(|_| TrafficError::Empty("the receiver thread panicked".into()))??;
        }
        Ok(self.snapshot())
    }

    /// Stops the receiver and returns the counts.
    pub fn finish(self) -> Result<RecvReport, TrafficError> {
        self.stop();
        self.wait()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The open `seq_log` file.
struct SeqLog {
    w: BufWriter<File>,
    path: PathBuf,
}

impl SeqLog {
    fn write(&mut self, stream: u32, n: u64) -> Result<(), TrafficError> {
        writeln!(self.w, "{stream} {n}").map_err(|e| self.err(e))
    }

    fn flush(&mut self) -> Result<(), TrafficError> {
        self.w.flush().map_err(|e| self.err(e))
    }

    fn err(&self, e: std::io::Error) -> TrafficError {
        TrafficError::os(format!("sequence log {}", self.path.display()), e)
    }
}

fn receive(
    opts: &RecvOptions,
    state: &Mutex<State>,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), TrafficError>>,
    mut log: Option<&mut SeqLog>,
) -> Result<(), TrafficError> {
    let open = || -> Result<PacketSocket, TrafficError> {
        if let Some(ns) = &opts.netns {
            enter_netns(ns)
                .map_err(|e| TrafficError::os(format!("entering network namespace {ns}"), e))?;
        }
        PacketSocket::open(&opts.dev, true)
            .map_err(|e| TrafficError::os(format!("packet socket on {}", opts.dev), e))
    };
    let sock = match open() {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(());
        }
    };
    // Kept until the receiver stops (detached on drop).
    let _pass = if opts.xdp_pass
        && xdp::veth_without_xdp(&opts.dev, opts.netns.as_deref()).unwrap_or(false)
    {
        match xdp::attach_pass(&opts.dev, opts.netns.as_deref()) {
            Ok(a) => Some(a),
            Err(e) => {
                let _ = ready.send(Err(e));
                return Ok(());
            }
        }
    } else {
        None
    };
    let _ = ready.send(Ok(()));
    let start = Instant::now();
    let mut buf = vec![0u8; 65536];
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let left = match opts.duration {
            Some(d) => match d.checked_sub(start.elapsed()) {
                Some(l) if !l.is_zero() => l.min(Duration::from_millis(100)),
                _ => return Ok(()),
            },
            None => Duration::from_millis(100),
        };
        let got = sock
            .recv(&mut buf, left)
            .map_err(|e| TrafficError::os(format!("receiving on {}", opts.dev), e))?;
        let Some(len) = got else {
            // Quiet for a while: let readers of the log see it so far.
            if let Some(l) = log.as_deref_mut() {
                l.flush()?;
            }
            continue;
        };
        let frame = buf.get(..len.min(buf.len())).unwrap_or(&[]);
        let (stamp, done) = {
            let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            s.first.get_or_insert(now);
            s.last = Some(now);
            let stamp = s.add(frame, len);
            (stamp, opts.count.is_some_and(|c| s.report.frames >= c))
        };
        if let (Some(l), Some((stream, n))) = (log.as_deref_mut(), stamp) {
            l.write(stream, n)?;
        }
        if done {
            return Ok(());
        }
    }
}

/// The XDP engine: attaches the counter, reads its maps every 20 ms (and
/// drains the sequence log's ring buffer) until stopped, reads them a
/// last time, detaches.
fn receive_xdp(
    opts: &RecvOptions,
    state: &Mutex<State>,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), TrafficError>>,
    mut log: Option<&mut SeqLog>,
) -> Result<(), TrafficError> {
    let attach = || -> Result<Counter, TrafficError> {
        if let Some(ns) = &opts.netns {
            enter_netns(ns)
                .map_err(|e| TrafficError::os(format!("entering network namespace {ns}"), e))?;
        }
        let ifindex = crate::sys::ifindex(&opts.dev)
            .map_err(|e| TrafficError::os(format!("interface {}", opts.dev), e))?;
        Counter::attach(ifindex, opts.pass, log.is_some(), opts.count)
    };
    let counter = match attach() {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Ok(());
        }
    };
    let publish = |c: &Counter| -> Result<u64, TrafficError> {
        let r = RecvReport::from_counts(&c.read()?);
        let frames = r.frames;
        state.lock().unwrap_or_else(PoisonError::into_inner).xdp = Some(r);
        Ok(frames)
    };
    publish(&counter)?;
    let recs: std::rc::Rc<std::cell::RefCell<Vec<(u32, u64)>>> = Default::default();
    let seqlog = xdp::map(counter.object(), "seqlog")?;
    let ring = match log {
        Some(_) => {
            let mut b = libbpf_rs::RingBufferBuilder::new();
            let sink = recs.clone();
            b.add(&seqlog, move |d: &[u8]| {
                if let (Some(s), Some(n)) = (d.get(0..4), d.get(8..16)) {
                    let stream = u32::from_ne_bytes([s[0], s[1], s[2], s[3]]);
                    let mut q = [0u8; 8];
                    q.copy_from_slice(n);
                    sink.borrow_mut().push((stream, u64::from_ne_bytes(q)));
                }
                0
            })
            .map_err(|e| TrafficError::Bpf {
                what: "the sequence log's ring buffer".into(),
                cause: e.to_string(),
            })?;
            Some(b.build().map_err(|e| TrafficError::Bpf {
                what: "the sequence log's ring buffer".into(),
                cause: e.to_string(),
            })?)
        }
        None => None,
    };
    let _ = ready.send(Ok(()));
    // Writes the stamps the ring buffer gave; flushes the log when
    // there were none (quiet), so readers see it so far.
    let drain = |log: &mut Option<&mut SeqLog>| -> Result<(), TrafficError> {
        let got: Vec<(u32, u64)> = std::mem::take(&mut *recs.borrow_mut());
        if let Some(l) = log.as_deref_mut() {
            if got.is_empty() {
                l.flush()?;
            }
            for (stream, n) in got {
                l.write(stream, n)?;
            }
        }
        Ok(())
    };
    let start = Instant::now();
    let tick = Duration::from_millis(20);
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let left = match opts.duration {
            Some(d) => match d.checked_sub(start.elapsed()) {
                Some(l) if !l.is_zero() => l.min(tick),
                _ => break,
            },
            None => tick,
        };
        match &ring {
            Some(r) => {
                let _ = r.poll(left);
                drain(&mut log)?;
            }
            None => std::thread::sleep(left),
        }
        let frames = publish(&counter)?;
        if opts.count.is_some_and(|c| frames >= c) {
            break;
        }
    }
    if let Some(r) = &ring {
        let _ = r.consume();
        drain(&mut log)?;
    }
    publish(&counter)?;
    // Detach (the link) before the process goes on.
    drop(ring);
    drop(counter);
    Ok(())
}

/// Frames captured as they arrive (a raw packet socket, incoming only),
/// for tests that compare what was sent with what should have been.
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Vec<Vec<u8>>, TrafficError>>>,
}

impl Capture {
    /// Starts capturing on `dev` in `netns` (at most `max` frames);
    /// returns once the socket is bound.
    pub fn start(dev: &str, netns: Option<&str>, max: usize) -> Result<Capture, TrafficError> {
        let stop = Arc::new(AtomicBool::new(false));
        let (dev, ns, sp) = (dev.to_string(), netns.map(str::to_string), stop.clone());
        let (ready_tx, ready_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("nfkit-capture".into())
            .spawn(move || -> Result<Vec<Vec<u8>>, TrafficError> {
                let open = || -> Result<PacketSocket, TrafficError> {
                    if let Some(ns) = &ns {
                        enter_netns(ns).map_err(|e| {
                            TrafficError::os(format!("entering network namespace {ns}"), e)
                        })?;
                    }
                    PacketSocket::open(&dev, true)
                        .map_err(|e| TrafficError::os(format!("packet socket on {dev}"), e))
                };
                let sock = match open() {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(false);
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(true);
                let mut out = Vec::new();
                let mut buf = vec![0u8; 65536];
                while !sp.load(Ordering::Relaxed) && out.len() < max {
                    if let Some(n) = sock
                        .recv(&mut buf, Duration::from_millis(20))
                        .map_err(|e| TrafficError::os(format!("receiving on {dev}"), e))?
                    {
                        out.push(buf.get(..n.min(buf.len())).unwrap_or(&[]).to_vec());
                    }
                }
                Ok(out)
            })
            .map_err(|e| TrafficError::os("spawning the capture thread", e))?;
        let mut c = Capture {
            stop,
            thread: Some(thread),
        };
        if ready_rx.recv() != Ok(true) {
            return Err(c
                .take()?
                .err()
                .unwrap_or_else(|| TrafficError::Empty("the capture thread stopped".into())));
        }
        Ok(c)
    }

    fn take(&mut self) -> Result<Result<Vec<Vec<u8>>, TrafficError>, TrafficError> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| TrafficError::Empty("the capture thread panicked".into())),
            None => Ok(Ok(Vec::new())),
        }
    }

    /// Stops and returns the frames, in arrival order.
    pub fn finish(mut self) -> Result<Vec<Vec<u8>>, TrafficError> {
        self.stop.store(true, Ordering::Relaxed);
        self.take()?
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.take();
    }
}

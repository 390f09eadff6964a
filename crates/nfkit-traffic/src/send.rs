//! The sender: frames from a pcap or from flows, paced to a rate,
//! sent on an interface from a thread that first enters the requested
//! network namespace, by one of two engines ([`Engine`]):
//! * live: nfkit's XDP generator (`bpf/gen.c`, see [`crate::xdp`]) run
//!   with `BPF_PROG_TEST_RUN` in live-frame mode, in batches: the kernel
//!   builds and redirects the frames, no copy from user space per frame;
//! * packet: a raw AF_PACKET socket, one `send` per frame.
//!
//! Both send the same frames in the same order (what `--write` renders).
//! A veth whose peer has no XDP program in driver mode drops redirected
//! frames silently, so the live engine refuses such a device (the
//! default, [`Engine::Auto`], falls back to the packet engine with a
//! note), as it does when the kernel has no live-frame mode.
//!
//! Pacing is against the clock, in batches: frame `i` (from 0) is due
//! `(i + 1) / rate` seconds after the start; the sender sends every frame
//! due, then sleeps (timer slack 1 ns) until the next one is. A sender
//! that fell behind (a busy machine) catches up on at most
//! [`CATCH_UP`] of frames in one burst; beyond that it carries on from
//! now, and the report shows the rate achieved.

use crate::error::TrafficError;
use crate::flows::Flow;
use crate::frame::{build, Mac};
use crate::seq;
use crate::sys::{enter_netns, fine_timer_slack, PacketSocket};
use crate::xdp::{veth_peer_without_xdp, Generator, Template};
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to send.
#[derive(Clone, Debug)]
pub enum Source {
    /// Frames as they are (e.g. read from a pcap), in order.
    Frames(Vec<Vec<u8>>),
    /// Flows, round-robin by weight.
    Flows(Vec<Flow>),
}

impl Source {
    /// The frames of a pcap file.
    pub fn pcap(path: &Path) -> Result<Source, TrafficError> {
        let packets = nfkit_pcap::read_file(path)?;
        if packets.is_empty() {
            return Err(TrafficError::Empty(format!(
                "{} has no packets",
                path.display()
            )));
        }
        Ok(Source::Frames(
            packets.into_iter().map(|p| p.data).collect(),
        ))
    }
}

/// Which engine sends (the library's default: packet, as before the
/// live engine; `nfkit send`'s default: auto).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Engine {
    /// Live where it works (kernel, device, frames), packet otherwise
    /// (with a note in [`SendReport::notes`]).
    Auto,
    /// The XDP live-frame generator; an error where it cannot work.
    Live,
    /// A raw packet socket.
    #[default]
    Packet,
}

impl Engine {
    /// `auto`, `live` or `packet`.
    pub fn parse(s: &str) -> Option<Engine> {
        match s {
            "auto" => Some(Engine::Auto),
            "live" => Some(Engine::Live),
            "packet" => Some(Engine::Packet),
            _ => None,
        }
    }
}

/// How to send.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
    pub engine: Engine,
    pub dev: String,
    /// Network namespace (`ip netns` name) to send from.
    pub netns: Option<String>,
    /// Frames per second, paced against the clock (see the module
    /// doc); `None` sends as fast as the socket takes them.
    pub rate: Option<f64>,
    /// Frames to send; default: the pcap once, or one round of the flows
    /// (unlimited when `duration` is given).
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stamp a sequence number (see [`seq`]) into every UDP frame with
    /// room for one: 0, 1, 2, ... counting stamped frames only.
    pub seq: bool,
    /// Stream id of the stamps; default derived from the clock and pid.
    pub stream: Option<u32>,
    /// Set to stop early (e.g. on Ctrl-C).
    pub stop: Option<Arc<AtomicBool>>,
}

impl SendOptions {
    /// Whether `stop` asks the sender to stop now.
    fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

/// What the sender did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SendReport {
    pub sent: u64,
    pub bytes: u64,
    /// Frames that carried a sequence stamp (UDP with room for one).
    pub stamped: u64,
    pub stream: u32,
    /// Times the socket queue was full and the frame was retried.
    pub retries: u64,
    /// From the start to the end of sending.
    pub seconds: f64,
    /// Frames per second achieved: `sent` over the time from the start
    /// until the last frame left (0 when none did).
    pub achieved_pps: f64,
    /// The rate asked for (`None`: as fast as possible).
    pub target_pps: Option<f64>,
    /// Stopped early by `SendOptions::stop` (e.g. a signal).
    pub interrupted: bool,
    /// The engine that sent: `live` or `packet`.
    pub engine: String,
    /// Why the engine asked for was not used, and the like (for stderr).
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl SendReport {
    /// The report of a run just starting on `engine`.
    fn start(stream: u32, opts: &SendOptions, engine: &str) -> SendReport {
        SendReport {
            stream,
            target_pps: opts.rate,
            engine: engine.into(),
            ..SendReport::default()
        }
    }
}

impl SendReport {
    /// How far under the target the achieved rate fell, in percent, if
    /// by more than `tolerance_pct` and more than one frame (a run of a
    /// few frames is not judged by its last frame's delay).
    pub fn shortfall_pct(&self, tolerance_pct: f64) -> Option<f64> {
        let target = self.target_pps?;
        if self.sent == 0 || self.achieved_pps <= 0.0 {
            return None;
        }
        // Frames the target rate would have sent in the time these took.
        let expected = target * self.sent as f64 / self.achieved_pps;
        ((self.sent as f64) + 1.0 < expected * (1.0 - tolerance_pct / 100.0))
            .then(|| 100.0 * (1.0 - self.achieved_pps / target))
    }
}

/// The longest stall the paced sender makes up for with a burst.
pub const CATCH_UP: Duration = Duration::from_millis(20);

/// The longest single sleep, so a stop request is seen promptly.
const MAX_NAP: Duration = Duration::from_millis(50);

/// Frames at most between two looks at the clock (for `duration`).
const MAX_BATCH: u64 = 256;

/// Sends frames as `opts` says; returns when all are sent, the duration
/// is over or `opts.stop` is set.
pub fn send(source: &Source, opts: &SendOptions) -> Result<SendReport, TrafficError> {
    if let Some(r) = opts.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(TrafficError::Empty(format!(
                "rate {r} is not a positive number of frames per second"
            )));
        }
    }
    let source = source.clone();
    let opts = opts.clone();
    std::thread::Builder::new()
        .name("nfkit-send".into())
        .spawn(move || send_here(&source, &opts))
        .map_err(|e| TrafficError::os("spawning the sender thread", e))?
        .join()
        .map_err(|_| TrafficError::Empty("the sender thread panicked".into()))?
}

fn send_here(source: &Source, opts: &SendOptions) -> Result<SendReport, TrafficError> {
    if let Some(ns) = &opts.netns {
        enter_netns(ns)
            .map_err(|e| TrafficError::os(format!("entering network namespace {ns}"), e))?;
    }
    // Without it, each sleep overshoots by up to 50 µs: pacing stays
    // right on average (it is against the clock) but in coarser bursts.
    let _ = fine_timer_slack();
    let sock = PacketSocket::open(&opts.dev, false)
        .map_err(|e| TrafficError::os(format!("packet socket on {}", opts.dev), e))?;
    let own = sock
        .hwaddr(&opts.dev)
        .map_err(|e| TrafficError::os(format!("hardware address of {}", opts.dev), e))?;
    let (frames, schedule) = plan(source, Mac(own), opts.seq)?;
    let count = opts.count.unwrap_or(if opts.duration.is_some() {
        u64::MAX
    } else {
        schedule.len() as u64
    });
    let stream = opts.stream.unwrap_or_else(default_stream);
    let mut notes = Vec::new();
    if opts.engine != Engine::Packet {
        match live_generator(&frames, &schedule, opts, stream) {
            Ok((g, latency)) => {
                drop(sock);
                // Kept attached to loopback while sending, when it can be.
                let lo_free = !crate::xdp::has_xdp("lo", opts.netns.as_deref()).unwrap_or(true);
                let kept = lo_free
                    .then(|| crate::xdp::ifindex("lo").and_then(|lo| g.keep_dispatched(lo)))
                    .and_then(Result::ok);
                return send_live(&g, latency, kept.is_some(), opts, count, stream);
            }
            Err(e) if opts.engine == Engine::Live => return Err(e),
            Err(e) => notes.push(format!("sending with the packet engine: {e}")),
        }
    }
    let mut r = send_packets(&sock, &frames, &schedule, opts, count, stream)?;
    r.notes = notes;
    Ok(r)
}

/// The live generator for these frames on `opts.dev`, checked: the
/// device takes redirected frames, the kernel runs live frames.
fn live_generator(
    frames: &[Vec<u8>],
    schedule: &[u32],
    opts: &SendOptions,
    stream: u32,
) -> Result<(Generator, Duration), TrafficError> {
    if let Some((peer, ns)) = veth_peer_without_xdp(&opts.dev, opts.netns.as_deref())? {
        let at = ns.map(|n| format!(" --netns {n}")).unwrap_or_default();
        return Err(TrafficError::Live(format!(
            "{}'s veth peer {peer}{} has no XDP program in driver mode, so the kernel would drop \
             the frames redirected to it without a trace; attach one there (e.g. run \
             `nfkit recv --engine xdp --dev {peer}{at}`, or `nfkit recv` there, whose packet \
             engine attaches a pass-all program, or any native XDP program that passes frames) \
             or send with --engine packet",
            opts.dev,
            if at.is_empty() {
                String::new()
            } else {
                format!(" (namespace{})", at.trim_start_matches(" --netns"))
            }
        )));
    }
    let templates: Vec<Template> = frames
        .iter()
        .map(|f| template(f, opts.seq.then_some(stream)))
        .collect();
    let ifindex = crate::sys::ifindex(&opts.dev)
        .map_err(|e| TrafficError::os(format!("interface {}", opts.dev), e))?;
    let g = Generator::new(&templates, schedule, ifindex)?;
    // NETDEV_XDP_ACT_NDO_XMIT: the device transmits redirected frames.
    if g.target_features().is_none_or(|f| f & 4 == 0) {
        return Err(TrafficError::Live(format!(
            "{} does not take redirected frames (the kernel reports no XDP transmit, \
             ndo_xdp_xmit, for it; a veth has it while its peer has an XDP program); \
             send with --engine packet",
            opts.dev
        )));
    }
    let latency = g.probe()?;
    Ok((g, latency))
}

/// `frame` as a live template: stamped with `stream` and sequence 0
/// when numbered and it has room (UDP), with where the number goes.
fn template(frame: &[u8], stream: Option<u32>) -> Template {
    let mut t = Template {
        frame: frame.to_vec(),
        stamp_off: 0,
        csum_off: 0,
        csum: 0,
        keep: false,
    };
    let Some(stream) = stream else {
        return t;
    };
    let Some((udp, v6)) = crate::frame::udp_offset(frame) else {
        return t;
    };
    let old = frame
        .get(udp + 6..udp + 8)
        .map(|c| u16::from_be_bytes([c[0], c[1]]));
    if seq::stamp(&mut t.frame, stream, 0) {
        t.stamp_off = (udp + 8 + 8) as u32;
        t.csum_off = (udp + 6) as u32;
        t.csum = t
            .frame
            .get(udp + 6..udp + 8)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .unwrap_or(0);
        t.keep = old == Some(0) && !v6;
    }
    t
}

/// The shortest batch of a paced live run: about 1 ms of frames (a run
/// costs some 30 µs besides its frames).
fn live_min_batch(rate: f64) -> u64 {
    ((rate * 1e-3) as u64).clamp(1, 4096)
}

/// Frames per live test run at most (some 10 ms at full speed).
const LIVE_MAX_CALL: u64 = 32768;

/// Live test runs in flight at once (see [`send_live`]), unpaced and
/// paced: measured on the 2-core machine, 8 overlap the kernel's waits
/// best at full speed; when paced at up to 1 Mpps, more than 2 runs in
/// flight make each run slower (their waits grow) and the rate falls
/// short; above, more runs are needed to reach the rate.
const LIVE_WORKERS: usize = 8;
const LIVE_WORKERS_PACED: usize = 2;

/// The longest stall the live engine makes up for (it can burst at
/// several times the rate asked for).
const LIVE_CATCH_UP: Duration = Duration::from_secs(1);

/// What a live run that redirects frames is taken to cost until the
/// workers have measured it (ns): while the generator is not attached
/// anywhere (each run then waits for the kernel's XDP dispatcher), and
/// while it is.
const LIVE_CALL_GUESS_NS: u64 = 30_000_000;
const LIVE_CALL_FAST_GUESS_NS: u64 = 100_000;

/// Sends with the live generator. A live test run adds its program to
/// the kernel's XDP dispatcher before its first frame and removes it
/// after its last, each time waiting for an RCU grace period (some 25 ms
/// here), unless the program is attached to a device. So the sender
/// first attaches it to the namespace's loopback (`dispatched`; it
/// passes loopback's frames), and runs take tens of µs more than their
/// frames: one worker issues them. Where that attach fails (loopback
/// has an XDP program), runs are issued by [`LIVE_WORKERS`]
/// threads, all pinned to the CPU the sender started on: the
/// generator's counters (schedule position, sequence number) then move
/// one frame at a time on that CPU, and frames leave in sequence
/// order. The pacer (this thread) hands out batches as they fall due,
/// each at least `rate × grace / workers` frames so that the workers
/// keep up; the report's time runs until the generator has made the
/// last frame.
fn send_live(
    g: &Generator,
    latency: Duration,
    dispatched: bool,
    opts: &SendOptions,
    count: u64,
    stream: u32,
) -> Result<SendReport, TrafficError> {
    use std::sync::atomic::{AtomicU64, AtomicUsize};
    use std::sync::{mpsc, Mutex};
    let stopped = || opts.stopped();
    let mut report = SendReport::start(stream, opts, "live");
    let runner = g.runner()?;
    let cpu = crate::sys::current_cpu().unwrap_or(0);
    let (jobs_tx, jobs_rx) = mpsc::channel::<u64>();
    let jobs_rx = Mutex::new(jobs_rx);
    let busy = AtomicUsize::new(0);
    let failed: Mutex<Option<TrafficError>> = Mutex::new(None);
    // Paced: two runs in flight up to 1 Mpps, one more per 500 kpps
    // above, up to the unpaced number.
    let (max_call, workers) = match opts.rate {
        _ if dispatched => (LIVE_MAX_CALL, 1),
        Some(r) => (
            LIVE_MAX_CALL,
            ((r / 500e3) as usize).clamp(LIVE_WORKERS_PACED, LIVE_WORKERS),
        ),
        None => (LIVE_MAX_CALL, LIVE_WORKERS),
    };
    // How long a run takes (ns, a moving average): first a guess, then
    // what the workers see.
    let guess = if dispatched {
        (latency.as_nanos() as u64).max(LIVE_CALL_FAST_GUESS_NS)
    } else {
        (latency.as_nanos() as u64).max(LIVE_CALL_GUESS_NS)
    };
    let call_ns = AtomicU64::new(guess);
    // The smallest batch that keeps the workers ahead of the rate, with
    // a margin: rate × call time × 1.5 / workers.
    let min_batch = |rate: f64| -> u64 {
        let call = call_ns.load(Ordering::Relaxed) as f64 * 1e-9;
        let cover = (rate * call * 1.5 / workers as f64).ceil() as u64;
        live_min_batch(rate).max(cover).min(max_call)
    };
    let mut shift = 0.0f64;
    let mut asked = 0u64;
    let mut last = Duration::ZERO;
    // When the first frames came out, and how many: a live run's frames
    // leave some 25 ms after it starts (its setup waits for the kernel),
    // so the rate achieved is measured from there to the last frame.
    let mut first: Option<(Duration, u64)> = None;
    // The window of a long pcap that is loaded (see below).
    let mut window = 0usize;
    let start = Instant::now();
    std::thread::scope(|scope| -> Result<(), TrafficError> {
        for i in 0..workers {
            let (runner, jobs_rx, busy, failed, call_ns) =
                (&runner, &jobs_rx, &busy, &failed, &call_ns);
            std::thread::Builder::new()
                .name(format!("nfkit-live{i}"))
                .spawn_scoped(scope, move || {
                    let _ = crate::sys::pin_to_cpu(cpu);
                    loop {
                        let job = jobs_rx
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .recv();
                        let Ok(n) = job else { return };
                        let t0 = Instant::now();
                        let r = runner.run(n as u32, 0);
                        let took = t0.elapsed().as_nanos() as u64;
                        let avg = call_ns.load(Ordering::Relaxed);
                        call_ns.store((avg * 7 + took) / 8, Ordering::Relaxed);
                        if let Err(e) = r {
                            let mut f = failed
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                            f.get_or_insert(e);
                        }
                        busy.fetch_sub(1, Ordering::SeqCst);
                    }
                })
                .map_err(|e| TrafficError::os("spawning a live sender thread", e))?;
        }
        let has_failed = || {
            failed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .is_some()
        };
        while asked < count && !has_failed() {
            if stopped() {
                report.interrupted = true;
                break;
            }
            if first.is_none() && asked > 0 {
                let made = g.counters()?.frames;
                if made > 0 {
                    first = Some((start.elapsed(), made));
                }
            }
            let now = start.elapsed();
            let left = match opts.duration {
                Some(d) => match d.checked_sub(now) {
                    Some(l) if !l.is_zero() => l,
                    _ => break,
                },
                None => Duration::MAX,
            };
            if busy.load(Ordering::SeqCst) >= workers {
                std::thread::sleep(Duration::from_micros(100).min(left));
                continue;
            }
            let mut n = (count - asked).min(max_call);
            // A long pcap: the window of the frames `asked` is at, loaded
            // once the runs before it are done; runs end at its end.
            if let Some((total, per)) = g.windows() {
                let at = (asked % total as u64) as usize;
                let w = at / per;
                if w != window {
                    if busy.load(Ordering::SeqCst) > 0 {
                        std::thread::sleep(Duration::from_micros(50));
                        continue;
                    }
                    g.load_window(w * per)?;
                    window = w;
                }
                let end = ((w + 1) * per).min(total);
                n = n.min((end - at) as u64);
            }
            if let Some(rate) = opts.rate {
                let t = now.as_secs_f64() - shift;
                let due = (t * rate).max(0.0).floor() as u64;
                let want = min_batch(rate).min(count - asked);
                if due < asked + want {
                    let next = (asked + want) as f64 / rate - t;
                    // Short naps until the first frames are out (see below).
                    let most = if first.is_none() && asked > 0 {
                        Duration::from_micros(200)
                    } else {
                        MAX_NAP
                    };
                    let nap = Duration::from_secs_f64(next.clamp(0.0, most.as_secs_f64()));
                    std::thread::sleep(nap.min(left));
                    continue;
                }
                let max_lag = ((rate * LIVE_CATCH_UP.as_secs_f64()) as u64).max(want);
                let mut lag = due - asked;
                if lag > max_lag {
                    shift += (lag - max_lag) as f64 / rate;
                    lag = max_lag;
                }
                n = n.min(lag);
            }
            busy.fetch_add(1, Ordering::SeqCst);
            if jobs_tx.send(n).is_err() {
                busy.fetch_sub(1, Ordering::SeqCst);
                break;
            }
            asked += n;
        }
        drop(jobs_tx);
        // The time of the last frame: when the generator's count
        // reaches what was asked (the last runs then still wait for
        // their teardown).
        loop {
            let made = g.counters()?.frames;
            if first.is_none() && made > 0 {
                first = Some((start.elapsed(), made));
            }
            if made >= asked || busy.load(Ordering::SeqCst) == 0 {
                last = start.elapsed();
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    })?;
    if let Some(e) = failed
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(e);
    }
    report.seconds = start.elapsed().as_secs_f64();
    let c = g.counters()?;
    report.sent = c.frames;
    report.bytes = c.bytes;
    report.stamped = c.stamped;
    if c.frames != asked {
        report.notes.push(format!(
            "the generator made {} frames of the {asked} asked for",
            c.frames
        ));
    }
    report.achieved_pps = match first {
        Some((t1, c1)) if c1 < report.sent && last > t1 => {
            (report.sent - c1) as f64 / (last - t1).as_secs_f64()
        }
        _ if report.sent > 0 && !last.is_zero() => report.sent as f64 / last.as_secs_f64(),
        _ => 0.0,
    };
    Ok(report)
}

fn send_packets(
    sock: &PacketSocket,
    frames: &[Vec<u8>],
    schedule: &[u32],
    opts: &SendOptions,
    count: u64,
    stream: u32,
) -> Result<SendReport, TrafficError> {
    let stopped = || opts.stopped();
    let mut report = SendReport::start(stream, opts, "packet");
    // How far (seconds) the schedule moved after stalls longer than
    // CATCH_UP.
    let mut shift = 0.0f64;
    let mut buf = Vec::new();
    let mut last = Duration::ZERO;
    let start = Instant::now();
    'run: while report.sent < count {
        if stopped() {
            report.interrupted = true;
            break;
        }
        let now = start.elapsed();
        let left = match opts.duration {
            Some(d) => match d.checked_sub(now) {
                Some(l) if !l.is_zero() => l,
                _ => break,
            },
            None => Duration::MAX,
        };
        let mut batch = (count - report.sent).min(MAX_BATCH);
        if let Some(rate) = opts.rate {
            let t = now.as_secs_f64() - shift;
            let due = (t * rate).max(0.0).floor() as u64;
            if due <= report.sent {
                let next = (report.sent + 1) as f64 / rate - t;
                let nap = Duration::from_secs_f64(next.clamp(0.0, MAX_NAP.as_secs_f64()));
                std::thread::sleep(nap.min(left));
                continue;
            }
            // The largest lag made up for, in frames.
            let max_lag = ((rate * CATCH_UP.as_secs_f64()) as u64).max(1);
            let mut lag = due - report.sent;
            if lag > max_lag {
                shift += (lag - max_lag) as f64 / rate;
                lag = max_lag;
            }
            batch = batch.min(lag);
        }
        for _ in 0..batch {
            if stopped() {
                report.interrupted = true;
                break 'run;
            }
            let Some(frame) = schedule
                .get((report.sent % schedule.len() as u64) as usize)
                .and_then(|i| frames.get(*i as usize))
            else {
                break 'run;
            };
            buf.clear();
            buf.extend_from_slice(frame);
            let stamped = opts.seq && seq::stamp(&mut buf, stream, report.stamped);
            loop {
                match sock.send(&buf) {
                    Ok(true) => break,
                    Ok(false) if stopped() => {
                        report.interrupted = true;
                        break 'run;
                    }
                    Ok(false) => {
                        report.retries += 1;
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    Err(e) => return Err(TrafficError::os(format!("sending on {}", opts.dev), e)),
                }
            }
            report.sent += 1;
            report.bytes += buf.len() as u64;
            report.stamped += u64::from(stamped);
        }
        last = start.elapsed();
    }
    report.seconds = start.elapsed().as_secs_f64();
    if report.sent > 0 && !last.is_zero() {
        report.achieved_pps = report.sent as f64 / last.as_secs_f64();
    }
    Ok(report)
}

/// The distinct frames of `source` (one per flow, source MAC `own`
/// unless the flow names one; or the pcap's frames) and one round of
/// the order they are sent in (flows repeated by weight), as indices.
fn plan(
    source: &Source,
    own: Mac,
    stamped: bool,
) -> Result<(Vec<Vec<u8>>, Vec<u32>), TrafficError> {
    let (frames, schedule) = match source {
        Source::Frames(f) => (f.clone(), (0..f.len() as u32).collect()),
        Source::Flows(flows) => {
            let mut frames = Vec::new();
            let mut schedule = Vec::new();
            for (i, flow) in flows.iter().enumerate() {
                let mut spec = flow.spec.clone();
                if !flow.src_mac_given {
                    spec.src_mac = own;
                }
                if stamped && spec.payload.len() < seq::STAMP_LEN {
                    return Err(TrafficError::Frame(format!(
                        "flow {} -> {}: --seq needs len={} or more",
                        spec.src,
                        spec.dst,
                        seq::STAMP_LEN
                    )));
                }
                frames.push(build(&spec)?);
                schedule.extend(std::iter::repeat_n(i as u32, flow.weight as usize));
            }
            (frames, schedule)
        }
    };
    if frames.is_empty() || schedule.is_empty() {
        return Err(TrafficError::Empty("no frames".into()));
    }
    Ok((frames, schedule))
}

/// The MAC address frames built without an interface come from.
pub const RENDER_MAC: Mac = Mac([0x02, 0, 0, 0, 0, 0x01]);

/// What [`send`] would send, as packets with the times it would send them
/// (nanoseconds, starting at `start_ns`; `opts.rate` frames per second,
/// default 1000) instead of sending: for pcaps the VM runs. `opts.dev`
/// and `opts.netns` are not used; flows come from [`RENDER_MAC`] unless
/// they name a source MAC. Needs `opts.count` or `opts.duration`.
pub fn render(
    source: &Source,
    opts: &SendOptions,
    start_ns: u64,
) -> Result<Vec<nfkit_pcap::Packet>, TrafficError> {
    let (frames, schedule) = plan(source, RENDER_MAC, opts.seq)?;
    let rate = opts.rate.unwrap_or(1000.0);
    if !(rate.is_finite() && rate > 0.0) {
        return Err(TrafficError::Empty(format!(
            "rate {rate} is not a positive number of frames per second"
        )));
    }
    let by_duration = opts
        .duration
        .map(|d| (d.as_secs_f64() * rate).ceil() as u64);
    let count = match (opts.count, by_duration) {
        (Some(c), Some(d)) => c.min(d),
        (Some(c), None) => c,
        (None, Some(d)) => d,
        (None, None) => schedule.len() as u64,
    };
    if count > 10_000_000 {
        return Err(TrafficError::Empty(format!(
            "{count} frames is more than a pcap of 10 million"
        )));
    }
    let stream = opts.stream.unwrap_or_else(default_stream);
    let mut out = Vec::with_capacity(count as usize);
    let mut stamped = 0u64;
    for i in 0..count {
        let Some(frame) = schedule
            .get((i % schedule.len() as u64) as usize)
            .and_then(|f| frames.get(*f as usize))
        else {
            break;
        };
        let mut data = frame.clone();
        if opts.seq && seq::stamp(&mut data, stream, stamped) {
            stamped += 1;
        }
        let ts = start_ns.saturating_add((i as f64 * 1e9 / rate) as u64);
        out.push(nfkit_pcap::Packet::new(ts, data));
    }
    Ok(out)
}

fn default_stream() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
        .unwrap_or(0);
    t ^ std::process::id().rotate_left(16)
}

/// A packet socket kept open to send frames one at a time, for callers
/// that act between frames (tests that pin a clock per packet). Opening
/// and closing a packet socket per frame costs an RCU grace period on
/// close; this keeps one. Opened inside `netns` by a short-lived thread
/// (the socket stays in that namespace), usable from any thread.
pub struct FrameSender {
    sock: PacketSocket,
    dev: String,
}

impl FrameSender {
    /// Opens a sending socket on `dev` in namespace `netns` (here when `None`).
    pub fn open(dev: &str, netns: Option<&str>) -> Result<FrameSender, TrafficError> {
        let (d, ns) = (dev.to_string(), netns.map(str::to_string));
        let sock = std::thread::Builder::new()
            .name("nfkit-send-open".into())
            .spawn(move || {
                if let Some(ns) = &ns {
                    enter_netns(ns).map_err(|e| {
                        TrafficError::os(format!("entering network namespace {ns}"), e)
                    })?;
                }
                PacketSocket::open(&d, false)
                    .map_err(|e| TrafficError::os(format!("packet socket on {d}"), e))
            })
            .map_err(|e| TrafficError::os("spawning the sender thread", e))?
            .join()
            .map_err(|_| TrafficError::Empty("the sender thread panicked".into()))??;
        Ok(FrameSender {
            sock,
            dev: dev.to_string(),
        })
    }

    /// Sends one frame as it is (waiting while the socket queue is full).
    pub fn send(&self, frame: &[u8]) -> Result<(), TrafficError> {
        loop {
            match self.sock.send(frame) {
                Ok(true) => return Ok(()),
                Ok(false) => std::thread::sleep(Duration::from_micros(50)),
                Err(e) => return Err(TrafficError::os(format!("sending on {}", self.dev), e)),
            }
        }
    }
}

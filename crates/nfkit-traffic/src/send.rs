//! The sender: frames from a pcap or from flows, paced to a rate,
//! written to an interface with a raw packet socket from a thread that
//! first enters the requested network namespace.
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

/// How to send.
#[derive(Clone, Debug, Default)]
pub struct SendOptions {
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
    let frames = expand(source, Mac(own), opts.seq)?;
    let count = opts.count.unwrap_or(if opts.duration.is_some() {
        u64::MAX
    } else {
        frames.len() as u64
    });
    let stream = opts.stream.unwrap_or_else(default_stream);
    let stopped = || {
        opts.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    };
    let mut report = SendReport {
        stream,
        target_pps: opts.rate,
        ..SendReport::default()
    };
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
            let Some(frame) = frames.get((report.sent % frames.len() as u64) as usize) else {
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

/// The frames of one round of `source` (flows repeated by weight, their
/// source MAC `own` unless the flow names one).
fn expand(source: &Source, own: Mac, stamped: bool) -> Result<Vec<Vec<u8>>, TrafficError> {
    let frames = match source {
        Source::Frames(f) => f.clone(),
        Source::Flows(flows) => {
            let mut out = Vec::new();
            for flow in flows {
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
                let frame = build(&spec)?;
                for _ in 0..flow.weight {
                    out.push(frame.clone());
                }
            }
            out
        }
    };
    if frames.is_empty() {
        return Err(TrafficError::Empty("no frames".into()));
    }
    Ok(frames)
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
    let frames = expand(source, RENDER_MAC, opts.seq)?;
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
        (None, None) => frames.len() as u64,
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
        let Some(frame) = frames.get((i % frames.len() as u64) as usize) else {
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

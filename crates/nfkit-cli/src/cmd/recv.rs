//! `nfkit recv --dev IFACE [--netns NS] [--duration S] [--count N]
//! [--every S] [--json] [--engine packet|xdp] [--pass]`: counts the
//! frames arriving on an interface (packet: a raw packet socket,
//! incoming frames only; xdp: nfkit's counting XDP program on the
//! device, which drops the stamped frames it counted unless `--pass`,
//! for multi-Mpps traffic; the same report): by source IP address and,
//! for frames `nfkit send --seq` stamped, per stream the sequence
//! numbers received, missing, duplicated and reordered. The packet
//! engine attaches a pass-all XDP program to a veth that has no XDP
//! program while it runs, so that `nfkit send --engine live` on the peer
//! reaches it (`--no-xdp-pass` leaves the device alone). `--every` prints running
//! totals (one line, or one JSON object, per interval). `--seq-log FILE`
//! writes the stamps as they arrive: a `#` header line, then `STREAM SEQ`
//! per stamped frame (duplicates included), flushed on stop.
//!
//! SIGINT or SIGTERM stops receiving early; the report is printed (JSON:
//! `"interrupted": true`) and the exit status is 0.

use anyhow::{bail, Context as _};
use nfkit_traffic::{stop_on_signals, Receiver, RecvEngine, RecvOptions, RecvReport};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Interface to receive on.
    #[arg(long, value_name = "IFACE")]
    pub dev: String,
    /// Network namespace (`ip netns` name) to receive in.
    #[arg(long, value_name = "NS")]
    pub netns: Option<String>,
    /// How long to receive, in seconds.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    pub duration: f64,
    /// Stop after N frames.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Print running totals every S seconds.
    #[arg(long, value_name = "S")]
    pub every: Option<f64>,
    /// Print as JSON (one object per line).
    #[arg(long)]
    pub json: bool,
    /// Write `STREAM SEQ` per stamped frame received, in arrival order,
    /// after a `#` header line.
    #[arg(long, value_name = "FILE")]
    pub seq_log: Option<PathBuf>,
    /// packet: a raw packet socket (every frame copied to user space);
    /// xdp: a counting XDP program on the device (counts in the kernel,
    /// for multi-Mpps traffic; drops the stamped frames it counted).
    #[arg(long, value_name = "ENGINE", default_value = "packet", value_parser = ["packet", "xdp"])]
    pub engine: String,
    /// With --engine xdp: pass the stamped frames on instead of dropping them.
    #[arg(long)]
    pub pass: bool,
    /// With --engine packet: do not attach nfkit's pass-all XDP program
    /// to a veth that has none (it lets a live-engine sender's frames in;
    /// without it the kernel drops them).
    #[arg(long)]
    pub no_xdp_pass: bool,
}

fn seconds(what: &str, s: f64) -> anyhow::Result<Duration> {
    if !(s.is_finite() && s > 0.0 && s < 1e9) {
        bail!("{what} {s}: want a positive number of seconds");
    }
    Ok(Duration::from_secs_f64(s))
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let duration = seconds("--duration", a.duration)?;
    let every = a.every.map(|s| seconds("--every", s)).transpose()?;
    let signal = stop_on_signals()?;
    let engine = if a.engine == "xdp" {
        RecvEngine::Xdp
    } else {
        RecvEngine::Packet
    };
    let rx = Receiver::start(&RecvOptions {
        engine,
        pass: a.pass,
        xdp_pass: !a.no_xdp_pass,
        dev: a.dev.clone(),
        netns: a.netns.clone(),
        duration: Some(duration),
        count: a.count,
        seq_log: a.seq_log.clone(),
    })
    .with_context(|| format!("receiving on {}", a.dev))?;
    let start = Instant::now();
    let mut next = every;
    let mut interrupted = false;
    while !rx.finished() {
        if signal.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if let Some(n) = next.as_mut() {
            if start.elapsed() >= *n && !rx.finished() {
                print_report(&rx.snapshot(), a.json, true, false)?;
                *n += every.unwrap_or(Duration::MAX);
            }
        }
    }
    let r = rx.finish()?;
    print_report(&r, a.json, false, interrupted)?;
    Ok(ExitCode::SUCCESS)
}

fn print_report(
    r: &RecvReport,
    json: bool,
    running: bool,
    interrupted: bool,
) -> anyhow::Result<()> {
    if json {
        let mut v = serde_json::to_value(r)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("final".into(), (!running).into());
            o.insert("interrupted".into(), interrupted.into());
        }
        println!("{}", serde_json::to_string(&v)?);
        return Ok(());
    }
    if running {
        let srcs: Vec<String> = r
            .by_source
            .iter()
            .map(|(s, n)| format!("{s}={n}"))
            .collect();
        println!(
            "{:6.1}s  {} frames  {}",
            r.seconds,
            r.frames,
            srcs.join(" ")
        );
        return Ok(());
    }
    println!(
        "received {} frames ({} bytes) in {:.1} s ({:.0} frames/s while they came), {} engine{}",
        r.frames,
        r.bytes,
        r.seconds,
        r.rate_pps,
        r.engine,
        if interrupted {
            ", stopped by a signal"
        } else {
            ""
        }
    );
    for (src, n) in &r.by_source {
        println!("  from {src:<40} {n}");
    }
    if r.unstamped > 0 {
        println!("  without sequence stamp: {}", r.unstamped);
    }
    if r.untracked > 0 {
        println!(
            "  stamped, of streams beyond those tracked: {}",
            r.untracked
        );
    }
    if r.seq_log_lost > 0 {
        println!(
            "  stamps missing from the sequence log (ring buffer full): {}",
            r.seq_log_lost
        );
    }
    for s in &r.streams {
        println!(
            "  stream {}: received {}, missing {}, duplicates {}, reordered {} (highest {})",
            s.stream, s.received, s.missing, s.duplicates, s.reordered, s.highest
        );
    }
    Ok(())
}

//! `nfkit recv --dev IFACE [--netns NS] [--duration S] [--count N]
//! [--every S] [--json]`: counts the frames arriving on an interface
//! (raw packet socket, incoming frames only): by source IP address and,
//! for frames `nfkit send --seq` stamped, per stream the sequence
//! numbers received, missing and duplicated. `--every` prints running
//! totals (one line, or one JSON object, per interval).

use anyhow::{bail, Context as _};
use nfkit_traffic::{Receiver, RecvOptions, RecvReport};
use std::process::ExitCode;
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
    let rx = Receiver::start(&RecvOptions {
        dev: a.dev.clone(),
        netns: a.netns.clone(),
        duration: Some(duration),
        count: a.count,
    })
    .with_context(|| format!("receiving on {}", a.dev))?;
    if let Some(every) = every {
        let start = Instant::now();
        let mut next = every;
        while !rx.finished() {
            std::thread::sleep(Duration::from_millis(20));
            if start.elapsed() >= next && !rx.finished() {
                print_report(&rx.snapshot(), a.json, true)?;
                next += every;
            }
        }
    }
    let r = rx.wait()?;
    print_report(&r, a.json, false)?;
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &RecvReport, json: bool, running: bool) -> anyhow::Result<()> {
    if json {
        let mut v = serde_json::to_value(r)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("final".into(), (!running).into());
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
        "received {} frames ({} bytes) in {:.1} s",
        r.frames, r.bytes, r.seconds
    );
    for (src, n) in &r.by_source {
        println!("  from {src:<40} {n}");
    }
    if r.unstamped > 0 {
        println!("  without sequence stamp: {}", r.unstamped);
    }
    for s in &r.streams {
        println!(
            "  stream {}: received {}, missing {}, duplicates {}, reordered {} (highest {})",
            s.stream, s.received, s.missing, s.duplicates, s.reordered, s.highest
        );
    }
    Ok(())
}

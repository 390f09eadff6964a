//! `nfkit send --dev IFACE [--netns NS] (--pcap FILE | --flows SPEC)
//! [--rate PPS] [--count N] [--duration S] [--seq] [--engine
//! auto|live|packet] [--json]`: sends raw Ethernet frames on an
//! interface, optionally from inside a network namespace: by nfkit's XDP
//! live-frame generator (`live`) or an AF_PACKET socket (`packet`);
//! `auto`, the default, is live where the kernel and device allow it
//! and packet otherwise, with a note on stderr. `--seq` stamps a sequence number into every UDP
//! payload for `nfkit recv` to account. The flow format is described in
//! `nfkit_traffic::flows`. `--write FILE [--at S] [--append]` writes the
//! frames to a pcap instead, timed as they would be sent (from second S;
//! merged by time with FILE's packets with --append), for `nfkit run`.
//!
//! `--rate` is paced against the clock; the report gives the rate
//! achieved (`achieved_pps`, `target_pps` in JSON, and `engine`) and
//! stderr gets a warning when it is more than 2 % under the target. SIGINT or SIGTERM
//! stops sending; the report is printed (`interrupted`) and the exit
//! status is 0.

use anyhow::{bail, Context as _};
use nfkit_traffic::send::render;
use nfkit_traffic::send::Source;
use nfkit_traffic::{parse_flows, send, stop_on_signals, Engine, SendOptions, SendReport};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Interface to send on.
    #[arg(long, value_name = "IFACE", required_unless_present = "write")]
    pub dev: Option<String>,
    /// Network namespace (`ip netns` name) to send from.
    #[arg(long, value_name = "NS")]
    pub netns: Option<String>,
    /// Frames to send, in order (classic pcap, Ethernet).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "flows",
        required_unless_present = "flows"
    )]
    pub pcap: Option<PathBuf>,
    /// Flows to send round-robin: `proto=udp,src=A,dst=B,sport=P,dport=Q,len=N,weight=W;...`
    /// Keys: proto (udp|tcp), src, dst, sport, dport, len (payload bytes,
    /// default 32), ttl (TTL / hop limit), tos (ToS byte / IPv6 traffic
    /// class) or dscp (0-63, tos = dscp<<2), payload (hex:DEADBEEF or
    /// text:GET /, repeated to fill len; --seq overwrites bytes 0-15),
    /// flags (TCP), smac, dmac, weight.
    #[arg(long, value_name = "SPEC")]
    pub flows: Option<String>,
    /// Frames per second, paced against the clock (default: as fast as
    /// possible); warns when the rate achieved is over 2 % under it.
    #[arg(long, value_name = "PPS")]
    pub rate: Option<f64>,
    /// Frames to send (default: the pcap once / one round of the flows;
    /// no limit with --duration).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after S seconds.
    #[arg(long, value_name = "S")]
    pub duration: Option<f64>,
    /// Stamp a sequence number into every UDP payload.
    #[arg(long)]
    pub seq: bool,
    /// Stream id of the sequence stamps (default: random).
    #[arg(long, value_name = "ID")]
    pub stream: Option<u32>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// live: nfkit's XDP generator in live-frame test runs (the target
    /// must take redirected frames: a veth's peer needs an XDP program
    /// in driver mode); packet: an AF_PACKET socket; auto: live where it
    /// works, else packet with a note.
    #[arg(long, value_name = "ENGINE", default_value = "auto", value_parser = ["auto", "live", "packet"])]
    pub engine: String,
    /// Write the frames to this pcap (timed by --rate) instead of sending.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dev", "netns"])]
    pub write: Option<PathBuf>,
    /// With --write: the first frame's time, in seconds.
    #[arg(long, value_name = "S", default_value_t = 0.0, requires = "write")]
    pub at: f64,
    /// With --write: merge with the packets already in FILE (by time).
    #[arg(long, requires = "write")]
    pub append: bool,
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let source = match (&a.pcap, &a.flows) {
        (Some(p), _) => Source::pcap(p)?,
        (None, Some(f)) => Source::Flows(parse_flows(f)?),
        (None, None) => bail!("give --pcap FILE or --flows SPEC"),
    };
    let duration = match a.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            bail!("--duration {s}: want a positive number of seconds")
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let engine = Engine::parse(&a.engine)
        .ok_or_else(|| anyhow::anyhow!("--engine {}: want live, packet or auto", a.engine))?;
    let mut opts = SendOptions {
        engine,
        dev: a.dev.clone().unwrap_or_default(),
        netns: a.netns.clone(),
        rate: a.rate,
        count: a.count,
        duration,
        seq: a.seq,
        stream: a.stream,
        stop: None,
    };
    if let Some(path) = &a.write {
        return write(&a, &source, &opts, path);
    }
    opts.stop = Some(stop_on_signals()?);
    let r = send(&source, &opts).with_context(|| format!("sending on {}", opts.dev))?;
    for n in &r.notes {
        eprintln!("note: {n}");
    }
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print_report(&r, a.seq);
    }
    if let (Some(short), Some(target)) = (r.shortfall_pct(UNDER_TARGET_PCT), r.target_pps) {
        eprintln!(
            "warning: sent at {:.0} pps, {short:.0} % under the target {target} pps",
            r.achieved_pps
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Achieved rates this far under `--rate` (percent) draw a warning.
const UNDER_TARGET_PCT: f64 = 2.0;

fn print_report(r: &SendReport, seq: bool) {
    print!(
        "sent {} frames ({} bytes) in {:.3} s ({:.0} frames/s",
        r.sent, r.bytes, r.seconds, r.achieved_pps
    );
    if let Some(t) = r.target_pps {
        print!(", target {t}");
    }
    print!(", {} engine)", r.engine);
    if seq {
        print!(", {} stamped in stream {}", r.stamped, r.stream);
    }
    if r.interrupted {
        print!(", stopped by a signal");
    }
    println!();
}

fn write(a: &Args, source: &Source, opts: &SendOptions, path: &Path) -> anyhow::Result<ExitCode> {
    if !(a.at.is_finite() && (0.0..1e9).contains(&a.at)) {
        bail!("--at {}: want a number of seconds, 0 or more", a.at);
    }
    let mut packets = render(source, opts, (a.at * 1e9) as u64)?;
    let added = packets.len();
    if a.append && path.exists() {
        let mut old = nfkit_pcap::read_file(path).map_err(super::pcap_error(path))?;
        old.append(&mut packets);
        packets = old;
        // Stable: packets of the same time keep their order.
        packets.sort_by_key(|p| p.ts_ns);
    }
    nfkit_pcap::write_file(path, &packets).map_err(super::pcap_error(path))?;
    println!(
        "wrote {added} frames to {} ({} in all)",
        path.display(),
        packets.len()
    );
    Ok(ExitCode::SUCCESS)
}

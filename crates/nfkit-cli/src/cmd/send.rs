//! `nfkit send --dev IFACE [--netns NS] (--pcap FILE | --flows SPEC)
//! [--rate PPS] [--count N] [--duration S] [--seq] [--json]`: sends raw
//! Ethernet frames on an interface (AF_PACKET), optionally from inside a
//! network namespace. `--seq` stamps a sequence number into every UDP
//! payload for `nfkit recv` to account. The flow format is described in
//! `nfkit_traffic::flows`.

use anyhow::{bail, Context as _};
use nfkit_traffic::send::Source;
use nfkit_traffic::{parse_flows, send, SendOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Interface to send on.
    #[arg(long, value_name = "IFACE")]
    pub dev: String,
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
    /// (keys: proto src dst sport dport len ttl flags smac dmac weight).
    #[arg(long, value_name = "SPEC")]
    pub flows: Option<String>,
    /// Frames per second (default: as fast as possible).
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
    let opts = SendOptions {
        dev: a.dev.clone(),
        netns: a.netns.clone(),
        rate: a.rate,
        count: a.count,
        duration,
        seq: a.seq,
        stream: a.stream,
        stop: None,
    };
    let r = send(&source, &opts).with_context(|| format!("sending on {}", a.dev))?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        let pps = if r.seconds > 0.0 {
            r.sent as f64 / r.seconds
        } else {
            0.0
        };
        print!(
            "sent {} frames ({} bytes) in {:.3} s ({pps:.0} frames/s)",
            r.sent, r.bytes, r.seconds
        );
        if a.seq {
            print!(", {} stamped in stream {}", r.stamped, r.stream);
        }
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

//! `nfkit bag`: the bag-server experiment (nfkit-bag, docs/bag.md):
//! `serve`, `client`, `experiment`.

use anyhow::{Context, Result};
use nfkit_bag::client::{self, Behaviour, ClientConfig};
use nfkit_bag::experiment::{self, ExperimentConfig};
use nfkit_bag::filter::{KernelFilter, FILTER_V1, FILTER_V2};
use nfkit_bag::server::{FilterMode, Log, ServeConfig, Server, ServerReport};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run the bag server (UDP) until a STOP request.
    Serve(ServeArgs),
    /// Send requests as one of the seed's client behaviours.
    Client(ClientArgs),
    /// Run the kernel-vs-user experiment: CSV, SVG plots, report.md.
    Experiment(ExperimentArgs),
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:12345")]
    addr: SocketAddr,
    /// Where requests are checked: kernel (socket filter), user, none.
    #[arg(long, default_value = "kernel")]
    filter: FilterMode,
    /// The filter script (default: the built-in examples/bag/filter.py).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// The second filter, swapped in at `--swap-after` (default: the
    /// built-in examples/bag/filter_v2.py).
    #[arg(long, value_name = "FILE")]
    filter_v2: Option<PathBuf>,
    /// Swap filter v1 <-> v2 once this many datagrams have arrived
    /// (repeatable: each swaps again). User mode toggles the key limit.
    #[arg(long, value_name = "N")]
    swap_after: Vec<u64>,
    /// Watch the `--script` file: when it changes (write the new version
    /// and rename it over), compile it and attach it in place of the
    /// running filter, without a restart.
    #[arg(long, requires = "script")]
    watch: bool,
    /// At most this many keys in the bag.
    #[arg(long, default_value_t = 100_000)]
    capacity: usize,
    /// User mode: refuse keys at or above N from the start (v2's check).
    #[arg(long, value_name = "N")]
    key_limit: Option<u32>,
    /// Receive buffer of the socket in bytes.
    #[arg(long, value_name = "BYTES")]
    rcvbuf: Option<i32>,
    /// Pin the server to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Also stop after this many seconds without a datagram (0: never).
    #[arg(long, default_value_t = 0.0)]
    idle_timeout: f64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ClientArgs {
    /// thor, odin, loki, njord, sylvie, sif, frey, frigg (any case).
    behaviour: Behaviour,
    /// Datagrams to send (STOP excluded).
    #[arg(long, short = 'n')]
    packets: Option<u64>,
    /// Frey, Frigg: share of invalid datagrams, 0..100.
    #[arg(long, short = 'p', default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100))]
    invalid_percent: u32,
    /// Datagrams per second (default: as fast as possible).
    #[arg(long)]
    rate: Option<u64>,
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:12345")]
    addr: SocketAddr,
    /// PUT keys are seq % KEYS.
    #[arg(long, default_value_t = 1000)]
    keys: u32,
    /// Do not send STOP at the end.
    #[arg(long)]
    no_stop: bool,
    /// Pin the client to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Wait this many milliseconds for GET replies.
    #[arg(long, default_value_t = 0)]
    wait_replies: u64,
}

#[derive(clap::Args)]
pub struct ExperimentArgs {
    /// Output directory (runs.csv, summary.csv, *.svg, report.md).
    #[arg(long)]
    out: PathBuf,
    /// Repetitions per point and mode (default 10; 20 with --full).
    #[arg(long)]
    reps: Option<usize>,
    /// The full sweep (10^6 datagrams, 20 repetitions): long.
    #[arg(long)]
    full: bool,
    /// A tiny sweep (2 repetitions, small counts) to try the pipeline.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Receive buffer of the server socket in bytes (default 4 MiB; 0:
    /// the system's default).
    #[arg(long, value_name = "BYTES")]
    rcvbuf: Option<i32>,
}

pub fn run(c: Command) -> Result<ExitCode> {
    match c {
        Command::Serve(a) => serve(a),
        Command::Client(a) => client(a),
        Command::Experiment(a) => experiment(a),
    }
}

fn load(path: &Option<PathBuf>, builtin: (&str, &str)) -> Result<Arc<KernelFilter>> {
    let f = match path {
        Some(p) => KernelFilter::from_file(p)?,
        None => KernelFilter::compile(builtin.0, builtin.1)?,
    };
    Ok(Arc::new(f))
}

fn serve(a: ServeArgs) -> Result<ExitCode> {
    let (v1, v2) = if a.filter == FilterMode::Kernel {
        let v1 = load(&a.script, ("filter.py", FILTER_V1))?;
        let v2 = if a.swap_after.is_empty() {
            None
        } else {
            Some(load(&a.filter_v2, ("filter_v2.py", FILTER_V2))?)
        };
        (Some(v1), v2)
    } else {
        (None, None)
    };
    let cfg = ServeConfig {
        addr: a.addr,
        mode: a.filter,
        capacity: a.capacity,
        idle_timeout: if a.idle_timeout > 0.0 {
            Duration::from_secs_f64(a.idle_timeout)
        } else {
            Duration::MAX
        },
        start_timeout: None,
        key_limit: a.key_limit,
        swaps: a.swap_after,
        rcvbuf: a.rcvbuf,
        cpu: a.cpu,
        reply: true,
        watch: if a.watch { a.script.clone() } else { None },
        log: Some(Log(Arc::new(|m: &str| eprintln!("{m}")))),
    };
    let mut srv = Server::bind(cfg, v1, v2)?;
    eprintln!(
        "bag server on {} (filter {})",
        srv.local_addr()?,
        a.filter.name()
    );
    let r = srv.run()?;
    if a.json {
        println!("{}", report_json(&r));
    } else {
        print_report(&r);
    }
    Ok(ExitCode::SUCCESS)
}

fn report_json(r: &ServerReport) -> serde_json::Value {
    let f = r.filter.map(
        |c| serde_json::json!({"valid": c.valid, "invalid": c.invalid, "over_limit": c.over_limit}),
    );
    serde_json::json!({
        "mode": r.mode.map(|m| m.name()),
        "received": r.received,
        "valid": r.valid,
        "user_invalid": r.user_invalid,
        "user_over_limit": r.user_over_limit,
        "unparsed": r.unparsed,
        "puts": r.puts, "gets": r.gets, "deletes": r.deletes,
        "full": r.full,
        "keys": r.keys,
        "stopped": r.stopped,
        "receive_s": r.receive_time.as_secs_f64(),
        "cpu_user_s": r.cpu.user.as_secs_f64(),
        "cpu_sys_s": r.cpu.sys.as_secs_f64(),
        "seqs": r.seqs,
        "dup_seqs": r.dup_seqs,
        "socket_drops": r.socket_drops,
        "overflow_drops": r.overflow_drops(),
        "filter": f,
        "swaps": r.swaps,
        "swap_errors": r.swap_errors,
    })
}

fn print_report(r: &ServerReport) {
    println!(
        "received {} datagrams ({} requests: {} PUT, {} GET, {} DELETE; {} PUT refused, bag full); {} keys",
        r.received, r.valid, r.puts, r.gets, r.deletes, r.full, r.keys
    );
    if r.user_invalid + r.user_over_limit + r.unparsed > 0 {
        println!(
            "refused in user space: {} invalid, {} over the key limit, {} unparsed",
            r.user_invalid, r.user_over_limit, r.unparsed
        );
    }
    if let Some(c) = r.filter {
        println!(
            "kernel filter: {} valid, {} invalid, {} over the key limit ({} swaps, {} refused scripts)",
            c.valid, c.invalid, c.over_limit, r.swaps, r.swap_errors
        );
    }
    println!(
        "socket drops {} ({} for a full queue); sequence numbers {} distinct, {} repeated",
        r.socket_drops,
        r.overflow_drops(),
        r.seqs,
        r.dup_seqs
    );
    println!(
        "receive time {:.6} s; CPU user {:.6} s, system {:.6} s; ended by {}",
        r.receive_time.as_secs_f64(),
        r.cpu.user.as_secs_f64(),
        r.cpu.sys.as_secs_f64(),
        if r.stopped { "STOP" } else { "idle timeout" }
    );
}

fn client(a: ClientArgs) -> Result<ExitCode> {
    let cfg = ClientConfig {
        packets: a.packets,
        invalid_percent: a.invalid_percent,
        rate: a.rate,
        keys: a.keys,
        stop: !a.no_stop,
        cpu: a.cpu,
        reply_wait: Duration::from_millis(a.wait_replies),
        ..ClientConfig::new(a.addr, a.behaviour)
    };
    let r = client::run(&cfg)?;
    let secs = r.elapsed.as_secs_f64();
    println!(
        "{}: sent {} valid ({} PUT{}) and {} invalid datagrams in {:.6} s ({:.0}/s); {} send errors; {} replies",
        a.behaviour.name(),
        r.valid,
        r.puts,
        if r.puts > 0 {
            format!(", sequence numbers 0 to {}", r.puts - 1)
        } else {
            String::new()
        },
        r.invalid,
        secs,
        if secs > 0.0 { (r.valid + r.invalid) as f64 / secs } else { 0.0 },
        r.send_errors,
        r.replies
    );
    Ok(ExitCode::SUCCESS)
}

fn experiment(a: ExperimentArgs) -> Result<ExitCode> {
    let mut cfg = if a.full {
        ExperimentConfig::full(a.out.clone())
    } else {
        ExperimentConfig::reduced(a.out.clone())
    };
    if a.quick {
        cfg.reps = 2;
        cfg.packets = vec![100, 1000, 10_000];
        cfg.share_packets = 10_000;
        cfg.paced_packets = 5_000;
        cfg.rates = vec![100_000, 0];
        cfg.rate_packets = 10_000;
    }
    if let Some(r) = a.reps {
        cfg.reps = r.max(1);
    }
    if let Some(b) = a.rcvbuf {
        cfg.rcvbuf = (b > 0).then_some(b);
    }
    let n = cfg.points().len() * cfg.modes.len() * cfg.reps;
    eprintln!(
        "bag experiment: {} points x {} modes x {} repetitions = {n} runs",
        cfg.points().len(),
        cfg.modes.len(),
        cfg.reps
    );
    experiment::run(&cfg, &mut |line| eprintln!("  {line}"))
        .with_context(|| format!("experiment into {}", a.out.display()))?;
    for f in [
        "report.md",
        "runs.csv",
        "summary.csv",
        "main.svg",
        "packets.svg",
        "rate.svg",
        "loss.svg",
    ] {
        println!("{}", a.out.join(f).display());
    }
    Ok(ExitCode::SUCCESS)
}

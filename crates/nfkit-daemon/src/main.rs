//! `nfkitd [--config FILE] [--socket PATH] [--listen tcp:ADDR]`: nfkit's control-plane
//! daemon (see docs/daemon.md). Runs in the foreground; `nfkit daemon
//! start` runs it in the background.

use clap::Parser;
use nfkit_daemon::Config;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "nfkitd",
    version,
    about = "nfkit's control-plane daemon (gRPC on a Unix socket)"
)]
struct Args {
    /// The TOML config (default: built-in defaults, root = admin).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The socket to serve on (overrides the config).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (overrides the config).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// Also serve on TCP, with mutual TLS only (the config's [tls]
    /// certificates): tcp:ADDR:PORT.
    #[arg(long, value_name = "tcp:ADDR")]
    listen: Option<String>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let mut cfg = Config::resolve(a.config.as_deref(), a.socket, a.metrics)?;
    if let Some(l) = &a.listen {
        cfg.listen(l)?;
    }
    Ok(nfkit_daemon::server::run(cfg)?)
}

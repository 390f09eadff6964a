//! `nfkit daemon start|stop|status`: nfkitd in the background; and how
//! the other commands find it. `deploy` (scripts and objects), `status`,
//! `undeploy`, `map`, `nf list|show|add` and `top` go through nfkitd when `--daemon PATH` or
//! `NFKIT_DAEMON=PATH` names its socket, or when the default socket
//! (`$NFKIT_RUN_DIR/nfkitd.sock`, else `/run/nfkit/nfkitd.sock`)
//! answers — not when `NFKIT_PIN_ROOT` or `NFKIT_STATE_DIR` point at
//! other deployments without `NFKIT_RUN_DIR`; `NFKIT_DAEMON=off` makes
//! them work directly. Either way
//! they print the same.

use anyhow::{anyhow, bail, Context as _};
use nfkit_daemon::proto::daemon_service_client::DaemonServiceClient;
use nfkit_daemon::proto::GetInfoRequest;
use nfkit_daemon::{Client, Config};
use serde_json::json;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

/// `--daemon PATH`, flattened into the commands that can use nfkitd.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DaemonArg {
    /// Go through the nfkitd listening on this socket (also
    /// NFKIT_DAEMON; `NFKIT_DAEMON=off`: never).
    #[arg(long = "daemon", value_name = "SOCKET")]
    pub socket: Option<PathBuf>,
}

impl DaemonArg {
    /// The daemon to go through, if any: the one named (which must
    /// answer), else the default socket's if it answers.
    pub fn client(&self) -> anyhow::Result<Option<Client>> {
        let named = match (&self.socket, std::env::var_os("NFKIT_DAEMON")) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(v)) if matches!(v.to_str(), Some("off" | "none" | "0" | "")) => {
                return Ok(None)
            }
            (None, Some(v)) => Some(PathBuf::from(v)),
            (None, None) => None,
        };
        if let Some(p) = named {
            return Ok(Some(Client::connect(&p)?));
        }
        // A command pointed at other pins or state (NFKIT_PIN_ROOT,
        // NFKIT_STATE_DIR: tests, demos) is not sent to the host's daemon,
        // which manages its own; NFKIT_RUN_DIR names the daemon to use then.
        let private = ["NFKIT_PIN_ROOT", "NFKIT_STATE_DIR"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if private && std::env::var_os("NFKIT_RUN_DIR").is_none() {
            return Ok(None);
        }
        let def = nfkit_daemon::config::default_socket();
        if std::os::unix::net::UnixStream::connect(&def).is_err() {
            return Ok(None);
        }
        Ok(Client::connect(&def).ok())
    }
}

/// A daemon's error as the direct path would tell it; a script's
/// diagnostics are printed as they are and give `None` (exit 1).
pub fn status_error(s: tonic::Status) -> anyhow::Error {
    anyhow!("{}", s.message())
}

/// Is `s` a script's rendered diagnostics (see nfkit_daemon::convert)?
pub fn is_script_error(s: &tonic::Status) -> bool {
    s.metadata()
        .get(nfkit_daemon::convert::SCRIPT_ERROR)
        .is_some()
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// Start nfkitd in the background and wait until it answers.
    Start(StartArgs),
    /// Stop nfkitd (deployments stay and keep forwarding).
    Stop(SocketArgs),
    /// Is nfkitd running: version, pid, uptime, your role, what it adopted.
    Status(StatusArgs),
    /// Run the daemon in the foreground (what nfkitd runs).
    Run(RunArgs),
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// nfkitd's TOML config (docs/daemon.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The socket (overrides the config).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(clap::Args)]
pub struct StartArgs {
    /// nfkitd's TOML config (docs/daemon.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The socket (default: the config's, else $NFKIT_RUN_DIR/nfkitd.sock).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Run this nfkitd program (default: this nfkit's `daemon run`, the
    /// same code and version).
    #[arg(long, value_name = "PATH")]
    nfkitd: Option<PathBuf>,
    /// Its log (default: nfkitd.log in the run directory).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(clap::Args)]
pub struct SocketArgs {
    /// The daemon's socket (default: $NFKIT_DAEMON, else the default socket).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    socket: SocketArgs,
    #[arg(long)]
    json: bool,
}

impl SocketArgs {
    fn path(&self) -> PathBuf {
        self.socket
            .clone()
            .or_else(|| {
                std::env::var_os("NFKIT_DAEMON")
                    .filter(|v| !matches!(v.to_str(), Some("off" | "none" | "0" | "")))
                    .map(PathBuf::from)
            })
            .unwrap_or_else(nfkit_daemon::config::default_socket)
    }
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Start(a) => start(a),
        Command::Stop(a) => stop(a),
        Command::Status(a) => status(a),
        Command::Run(a) => {
            let cfg = Config::resolve(a.config.as_deref(), a.socket, a.metrics)?;
            nfkit_daemon::server::run(cfg)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The daemon to run: `--nfkitd PATH`, else this program's `daemon run`.
fn daemon_command(given: Option<PathBuf>) -> anyhow::Result<std::process::Command> {
    Ok(match given {
        Some(p) => std::process::Command::new(p),
        None => {
            let me = std::env::current_exe().context("finding this program")?;
            let mut c = std::process::Command::new(me);
            c.args(["daemon", "run"]);
            c
        }
    })
}

fn answers(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

fn start(a: StartArgs) -> anyhow::Result<ExitCode> {
    let cfg = match &a.config {
        Some(p) => Config::load(p)?,
        None => Config::from_env(),
    };
    let socket = a.socket.clone().unwrap_or(cfg.socket.clone());
    if answers(&socket) {
        bail!("nfkitd is running already at {}", socket.display());
    }
    std::fs::create_dir_all(&cfg.run_dir)
        .with_context(|| format!("creating {}", cfg.run_dir.display()))?;
    let log = a.log.unwrap_or_else(|| cfg.run_dir.join("nfkitd.log"));
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .with_context(|| format!("opening {}", log.display()))?;
    let mut cmd = daemon_command(a.nfkitd)?;
    if let Some(c) = &a.config {
        cmd.arg("--config").arg(c);
    }
    cmd.arg("--socket").arg(&socket);
    if let Some(m) = a.metrics {
        cmd.arg("--metrics").arg(m.to_string());
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(logf.try_clone()?)
        .stderr(logf)
        .process_group(0)
        .spawn()
        .context("starting nfkitd")?;
    let t0 = Instant::now();
    while !answers(&socket) {
        if let Some(st) = child.try_wait()? {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(5).collect();
            bail!(
                "nfkitd exited ({st}) before answering; {}:\n{}",
                log.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        if t0.elapsed() > Duration::from_secs(30) {
            bail!(
                "nfkitd (pid {}) did not answer at {} within 30 s; see {}",
                child.id(),
                socket.display(),
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "nfkitd started: pid {} on {} (log {})",
        child.id(),
        socket.display(),
        log.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn stop(a: SocketArgs) -> anyhow::Result<ExitCode> {
    let socket = a.path();
    let c = Client::connect(&socket)?;
    let mut d = DaemonServiceClient::new(c.channel());
    let pid = c
        .block_on(d.get_info(GetInfoRequest {}))
        .map_err(status_error)?
        .into_inner()
        .pid;
    c.block_on(d.shutdown(nfkit_daemon::proto::ShutdownRequest {}))
        .map_err(status_error)?;
    drop(d);
    drop(c);
    let t0 = Instant::now();
    while answers(&socket) || Path::new(&format!("/proc/{pid}")).exists() {
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("nfkitd (pid {pid}) is still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("nfkitd stopped (pid {pid}); deployments stay");
    Ok(ExitCode::SUCCESS)
}

fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let socket = a.socket.path();
    if !answers(&socket) {
        if a.json {
            println!("{}", json!({"running": false, "socket": socket}));
        } else {
            println!("nfkitd is not running at {}", socket.display());
        }
        return Ok(ExitCode::from(3));
    }
    let c = Client::connect(&socket)?;
    let i = c
        .block_on(DaemonServiceClient::new(c.channel()).get_info(GetInfoRequest {}))
        .map_err(status_error)?
        .into_inner();
    let who = i.caller.unwrap_or_default();
    if a.json {
        let adopted: Vec<_> = i
            .adopted
            .iter()
            .map(|x| json!({"dev": x.dev, "attach": x.attach, "outcome": x.outcome, "detail": x.detail}))
            .collect();
        let v = json!({
            "running": true, "socket": i.socket, "version": i.version, "pid": i.pid,
            "uptime_s": i.uptime_s,
            "caller": {"uid": who.uid, "gid": who.gid, "pid": who.pid, "role": who.role},
            "adopted": adopted,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "nfkitd {} running: pid {} on {}, up {} s; you are uid {} ({})",
        i.version, i.pid, i.socket, i.uptime_s, who.uid, who.role
    );
    for x in &i.adopted {
        println!(
            "  at start: {} {}: {}: {}",
            x.dev, x.attach, x.outcome, x.detail
        );
    }
    Ok(ExitCode::SUCCESS)
}

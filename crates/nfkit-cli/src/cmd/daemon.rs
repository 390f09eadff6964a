//! `nfkit daemon start|stop|status|reload|certs`: nfkitd in the background; and how
//! the other commands find it. `deploy` (scripts and objects), `status`,
//! `undeploy`, `map`, `nf list|show|add` and `top` go through nfkitd when `--daemon PATH` or
//! `NFKIT_DAEMON=PATH` names its socket, or when the default socket
//! (`$NFKIT_RUN_DIR/nfkitd.sock`, else `/run/nfkit/nfkitd.sock`)
//! answers — not when `NFKIT_PIN_ROOT` or `NFKIT_STATE_DIR` point at
//! other deployments without `NFKIT_RUN_DIR`; `NFKIT_DAEMON=off` makes
//! them work directly. `--daemon https://HOST:PORT` (or `tcp:HOST:PORT`)
//! reaches nfkitd over TCP with mutual TLS: `--ca` (the CA of the
//! server's certificate), `--cert` and `--key` (the client's), also
//! NFKIT_DAEMON_CA, NFKIT_DAEMON_CERT, NFKIT_DAEMON_KEY. Either way
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

/// `--daemon PATH|https://ADDR` and the TLS files, flattened into the
/// commands that can use nfkitd.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DaemonArg {
    /// Go through the nfkitd listening on this socket, or at
    /// https://HOST:PORT with mutual TLS (also NFKIT_DAEMON;
    /// `NFKIT_DAEMON=off`: never).
    #[arg(long = "daemon", value_name = "SOCKET|https://ADDR")]
    pub socket: Option<PathBuf>,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// A TLS client's files (for `--daemon https://ADDR`).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// TLS: the client certificate, PEM (also NFKIT_DAEMON_CERT).
    #[arg(long = "cert", id = "daemon_cert", value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// TLS: its private key, PEM (also NFKIT_DAEMON_KEY).
    #[arg(long = "key", id = "daemon_key", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// TLS: the CA that signed nfkitd's certificate, PEM (also NFKIT_DAEMON_CA).
    #[arg(long = "ca", id = "daemon_ca", value_name = "FILE")]
    pub ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The files given, else the environment's.
    pub fn files(&self) -> nfkit_daemon::client::TlsFiles {
        let or_env = |v: &Option<PathBuf>, var: &str| {
            v.clone()
                .or_else(|| std::env::var_os(var).map(PathBuf::from))
                .filter(|p| !p.as_os_str().is_empty())
        };
        nfkit_daemon::client::TlsFiles {
            ca: or_env(&self.ca, "NFKIT_DAEMON_CA"),
            cert: or_env(&self.cert, "NFKIT_DAEMON_CERT"),
            key: or_env(&self.key, "NFKIT_DAEMON_KEY"),
        }
    }
}

/// Where `named` (a `--daemon` value or NFKIT_DAEMON) says nfkitd is.
pub fn target(named: &Path, tls: &TlsArgs) -> nfkit_daemon::client::Target {
    nfkit_daemon::client::Target::parse(&named.to_string_lossy(), tls.files())
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
            return Ok(Some(Client::connect_to(&target(&p, &self.tls))?));
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
    /// Make a test CA, a server certificate and client certificates for
    /// nfkitd's TCP listener (mutual TLS); or revoke a client's (--revoke).
    Certs(CertsArgs),
    /// Make nfkitd read its config's roles and TLS files (certificates,
    /// CRL) again, as on SIGHUP; open connections and deployments stay.
    Reload(StatusArgs),
}

#[derive(clap::Args)]
pub struct CertsArgs {
    /// The directory to write into (created; files are never overwritten).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Client certificates to make, by name (their subject CN, which
    /// `[roles] names` maps to a role): NAME,NAME,...
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    clients: Vec<String>,
    /// More names or IP addresses for the server certificate (beside
    /// localhost, 127.0.0.1 and ::1).
    #[arg(long = "server-name", value_delimiter = ',', value_name = "NAME,...")]
    server_names: Vec<String>,
    /// Revoke client NAME's certificate (NAME.crt in --out): ca.crl
    /// then lists it, signed by ca.key; nfkitd refuses it once reloaded
    /// (`nfkit daemon reload`).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["clients", "server_names"])]
    revoke: Option<String>,
    /// Days the certificates (or the CRL) are valid.
    #[arg(long, default_value_t = 365)]
    days: u32,
    #[arg(long)]
    json: bool,
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
    /// Also serve on TCP with mutual TLS (the config's [tls] files): tcp:ADDR:PORT.
    #[arg(long, value_name = "tcp:ADDR")]
    listen: Option<String>,
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
    /// Also serve on TCP with mutual TLS (the config's [tls] files): tcp:ADDR:PORT.
    #[arg(long, value_name = "tcp:ADDR")]
    listen: Option<String>,
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
    #[command(flatten)]
    tls: TlsArgs,
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
        Command::Certs(a) => certs(a),
        Command::Reload(a) => reload(a),
        Command::Run(a) => {
            let mut cfg = Config::resolve(a.config.as_deref(), a.socket, a.metrics)?;
            if let Some(l) = &a.listen {
                cfg.listen(l)?;
            }
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
    if let Some(l) = &a.listen {
        cmd.arg("--listen").arg(l);
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
    let tgt = target(&socket, &a.tls);
    let tls = matches!(tgt, nfkit_daemon::client::Target::Tls { .. });
    if !tls && !answers(&socket) {
        if a.json {
            println!("{}", json!({"running": false, "socket": socket}));
        } else {
            println!("nfkitd is not running at {}", socket.display());
        }
        return Ok(ExitCode::from(3));
    }
    let c = Client::connect_to(&tgt)?;
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
            "caller": if who.address.is_empty() {
                json!({"uid": who.uid, "gid": who.gid, "pid": who.pid, "role": who.role})
            } else {
                json!({"address": who.address, "names": who.names, "role": who.role})
            },
            "adopted": adopted,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let you = if who.address.is_empty() {
        format!("uid {}", who.uid)
    } else {
        format!(
            "certificate {} from {}",
            who.names.first().map_or("-", String::as_str),
            who.address
        )
    };
    println!(
        "nfkitd {} running: pid {} on {}, up {} s; you are {you} ({})",
        i.version, i.pid, i.socket, i.uptime_s, who.role
    );
    for x in &i.adopted {
        println!(
            "  at start: {} {}: {}: {}",
            x.dev, x.attach, x.outcome, x.detail
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn reload(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let socket = a.socket.path();
    let c = Client::connect_to(&target(&socket, &a.tls))?;
    let r = c
        .block_on(
            DaemonServiceClient::new(c.channel()).reload(nfkit_daemon::proto::ReloadRequest {}),
        )
        .map_err(status_error)?
        .into_inner();
    if a.json {
        let v = json!({"config": r.config, "tls_files": r.tls_files, "revoked": r.revoked});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if r.tls_files.is_empty() {
        println!("nfkitd reloaded roles from {}", r.config);
    } else {
        println!(
            "nfkitd reloaded roles and TLS from {} ({}; {} revoked)",
            r.config,
            r.tls_files.join(", "),
            r.revoked
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn certs(a: CertsArgs) -> anyhow::Result<ExitCode> {
    if let Some(name) = &a.revoke {
        let r = nfkit_daemon::certs::revoke(&a.out, name, a.days)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&r)?);
        } else if r.already {
            println!(
                "client {name} (serial {}) is already revoked in {} ({} listed)",
                r.serial,
                r.crl.display(),
                r.listed
            );
        } else {
            println!(
                "client {name} (serial {}) revoked: {} lists {} (nfkitd's [tls] crl; \
                 then `nfkit daemon reload`)",
                r.serial,
                r.crl.display(),
                r.listed
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let w = nfkit_daemon::certs::write_set(&a.out, &a.server_names, &a.clients, a.days)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&w)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("CA:     {} (its key: ca.key, mode 0600)", w.ca.display());
    println!(
        "CRL:    {} (none revoked; nfkitd's [tls] crl)",
        w.crl.display()
    );
    println!(
        "server: {} {} (for nfkitd's [tls] cert, key; client_ca = ca.crt)",
        w.server_cert.display(),
        w.server_key.display()
    );
    for (name, crt, key) in &w.clients {
        println!(
            "client {name}: {} {} (nfkit --cert, --key, --ca ca.crt; [roles] names = [\"{name}\"])",
            crt.display(),
            key.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

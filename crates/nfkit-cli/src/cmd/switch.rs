//! `nfkit switch run --name NAME --port SPEC... SCRIPT [--workers N]
//! [--engine jit|interp] [--host PORT] [--controller OUT.pcap] [--no-pin]
//! [--json]`: runs the chain script (compiled for the `switch` hook,
//! whatever its `attach` says) on the ports in the foreground
//! (nfkit-switch, docs/switch.md). Ports are numbered from 1 in `--port`
//! order (`REDIRECT(n)` sends out of port n). While it runs, a line of
//! per-port and per-verdict rates goes to standard error every second
//! (when it is a terminal); it stops on Ctrl-C (SIGINT/SIGTERM) or when
//! every pcap input is done, closes every port (pcap outputs are written
//! then) and prints the final report: per port rx/tx/drops, verdicts per
//! action and per chain, faults, runts, controller frames per reason
//! (`--json`: as JSON).
//!
//! While it runs it serves a control socket (`switch_ctl`):
//! `nfkit switch status [NAME] [--json]`, `nfkit switch reload NAME
//! SCRIPT [--json]` (a hitless reload, compiled in the switch's
//! process) and `nfkit switch stop NAME` talk to it.
//!
//! `nfkit switch start --name NAME --port SPEC... SCRIPT` runs it in the
//! background instead (its log in the run directory) and returns once
//! its control socket answers. `start`, `status`, `reload` and `stop` go
//! through nfkitd when one runs (as `deploy` does; `--daemon`,
//! NFKIT_DAEMON): the daemon then starts, records and adopts the switch
//! (a switch keeps forwarding when the daemon stops), and they print
//! what they print directly.
//!
//! With `--key FILE` the switch takes authenticated updates only
//! (docs/update.md): `nfkit switch update --switch NAME|ADDR --position
//! pre SCRIPT --key FILE [--version N]` signs one and sends it over the
//! control socket or, with `--update-listen udp:ADDR|tcp:ADDR`, over
//! the network; `nfkit switch keygen FILE` makes a key file.

use super::switch_ctl;
use anyhow::{anyhow, bail, Context};
use nfkit_abi::verdict::Action;
use nfkit_abi::Hook;
use nfkit_pcap::Packet;
use nfkit_switch::controller::Recent;
use nfkit_switch::port::{any, PortSpec};
use nfkit_switch::{Stats, Switch, SwitchConfig, UpdateAuth};
use nfkit_update::message::CodeFormat;
use nfkit_update::{Body, Key, KeyRing, Message, Position};
use nfkit_vm::Engine;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run a chain script on ports in the foreground (Ctrl-C stops it).
    Run(RunArgs),
    /// Start a switch in the background (through nfkitd when one runs,
    /// which records and adopts it); returns once it answers.
    Start(StartArgs),
    /// Show running switches (all of them without NAME): ports, verdicts,
    /// version, uptime.
    Status(StatusArgs),
    /// Swap a running switch's chain for SCRIPT without losing a frame.
    Reload(ReloadArgs),
    /// Stop a running switch (it prints its final report and exits).
    Stop(StopArgs),
    /// Dump a map of a running switch's chain (its running version).
    Map(MapArgs),
    /// Print the frames a running switch's chain sends to the controller
    /// (CONTROLLER(reason)): port, reason, length, first bytes.
    Trace(TraceArgs),
    /// Send a signed update (new code, or a map entry) to a switch
    /// started with --key.
    Update(UpdateArgs),
    /// Make a key file for updates (mode 0600), or add a key to one.
    Keygen(KeygenArgs),
    /// Have a running switch read its key file again (key rotation).
    Rekey(RekeyArgs),
}

#[derive(clap::Args)]
pub struct TraceArgs {
    name: String,
    /// Stop after N frames (exit 1 if the switch stops first).
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Begin with the frames the switch still keeps (its latest 4096),
    /// not only those that come from now on.
    #[arg(long)]
    all: bool,
    /// One JSON object per frame and line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(clap::Args)]
pub struct RekeyArgs {
    name: String,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(clap::Args)]
pub struct UpdateArgs {
    /// The switch: its NAME (its control socket), or udp:HOST:PORT or
    /// tcp:HOST:PORT (its --update-listen address).
    #[arg(long = "switch", value_name = "NAME|ADDR")]
    switch: String,
    /// The position: pre, table:NAME (entries, or the code its actions
    /// call) or post:PORT (that port's post program).
    #[arg(long, default_value = "pre")]
    position: Position,
    /// The new code: a chain script (compiled here first to check it;
    /// the switch compiles it again for its hook), or a chain object
    /// FILE.o (`nfkit compile --hook switch -o`: the switch only checks,
    /// loads and publishes it).
    script: Option<PathBuf>,
    /// Set an entry instead: MAP KEY VALUE (key and value as hex bytes).
    #[arg(long = "set", num_args = 3, value_names = ["MAP", "KEY", "VALUE"])]
    set: Option<Vec<String>>,
    /// Delete an entry instead: MAP KEY (hex bytes).
    #[arg(long = "delete", num_args = 2, value_names = ["MAP", "KEY"])]
    delete: Option<Vec<String>>,
    /// The key file (it must not be readable by group or others).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The key to sign with (default: the highest id in the file).
    #[arg(long = "key-id", value_name = "ID")]
    key_id: Option<u32>,
    /// The new version (above the running one; default: the running one
    /// + 1, asked of a switch given by NAME).
    #[arg(long, value_name = "N")]
    version: Option<u64>,
    /// The switch id the update is for (default: NAME; needed with an
    /// address).
    #[arg(long, value_name = "NAME")]
    target: Option<String>,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
    #[arg(long)]
    json: bool,
    /// Go through the nfkitd listening on this socket, or at
    /// https://HOST:PORT (also NFKIT_DAEMON; its TLS files from
    /// NFKIT_DAEMON_CERT/KEY/CA, `--key` being the update key). A switch
    /// given by NAME is reached through nfkitd when one runs; the
    /// message is signed here, and nfkitd forwards it as it is.
    #[arg(long = "daemon", value_name = "SOCKET|https://ADDR")]
    daemon: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct KeygenArgs {
    /// The key file to make (refused if it exists, unless --add).
    file: PathBuf,
    /// The new key's id (default: 1, or with --add the highest + 1).
    #[arg(long, value_name = "ID")]
    id: Option<u32>,
    /// Add a key to an existing file (rotation).
    #[arg(long)]
    add: bool,
}

#[derive(clap::Args)]
pub struct MapArgs {
    name: String,
    /// The map (a script's or an NF's).
    map: String,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The switch (default: every switch in the run directory).
    name: Option<String>,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(clap::Args)]
pub struct ReloadArgs {
    name: String,
    /// The new chain script (compiled by the switch).
    script: PathBuf,
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(clap::Args)]
pub struct StopArgs {
    name: String,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

#[derive(clap::Args)]
pub struct StartArgs {
    /// The switch's name.
    #[arg(long)]
    name: String,
    /// A port, as `switch run --port` takes it (numbered from 1).
    #[arg(long = "port", value_name = "SPEC", required = true)]
    ports: Vec<String>,
    /// The chain script.
    script: PathBuf,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    workers: u32,
    /// The VM's engine: `jit` or `interp` (default: the best there is).
    #[arg(long, value_name = "jit|interp")]
    engine: Option<String>,
    /// Host ports, as `switch run --host` takes them.
    #[arg(long, value_name = "PORT")]
    host: Vec<String>,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// The named network namespace of the ports (`ip netns`).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
    /// Take authenticated updates only (`nfkit switch update`), signed
    /// with a key of this file, which must not be readable by group or
    /// others (as `switch run --key`; through nfkitd, a file on its host).
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    #[arg(long)]
    json: bool,
    /// Go through the nfkitd listening on this socket, or at
    /// https://HOST:PORT (also NFKIT_DAEMON; its TLS files from
    /// NFKIT_DAEMON_CERT/KEY/CA, `--key` being the update key, as in
    /// `switch update`).
    #[arg(long = "daemon", value_name = "SOCKET|https://ADDR")]
    daemon: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// The switch's name (shown in its reports).
    #[arg(long)]
    name: String,
    /// A port: IFACE (AF_XDP), IFACE:afxdp, IFACE:afpacket, NAME:tap,
    /// NAME:pcap=IN.pcap[,out=OUT.pcap] or NAME:pcap,out=OUT.pcap.
    /// Numbered from 1 in the order given.
    #[arg(long = "port", value_name = "SPEC", required = true)]
    ports: Vec<PortSpec>,
    /// The chain script.
    script: PathBuf,
    /// Worker threads, pinned to CPUs round robin.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The VM's engine: `jit` (the default where there is one) or `interp`.
    #[arg(long, value_name = "jit|interp", value_parser = super::parse_engine)]
    engine: Option<Engine>,
    /// The host port, by name or number, where PASS and HOST go (default:
    /// the first TAP port; without one they are dropped and counted).
    /// Repeated: host queues in order, HOST(q) out of the q-th (from 0;
    /// PASS and a queue that does not exist: the first).
    #[arg(long, value_name = "PORT")]
    host: Vec<String>,
    /// Write the frames chains send to the controller (CONTROLLER(reason))
    /// to this pcap (without it they are counted and discarded).
    #[arg(long, value_name = "OUT.pcap")]
    controller: Option<PathBuf>,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    no_pin: bool,
    /// The workers' nice value (e.g. -10: favoured by the scheduler, so
    /// a busy worker is preempted less; below 0 needs CAP_SYS_NICE).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    nice: Option<i32>,
    /// The final report as JSON.
    #[arg(long)]
    json: bool,
    /// Keep running when every pcap input is done (until Ctrl-C or
    /// `nfkit switch stop`).
    #[arg(long)]
    linger: bool,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
    /// Take authenticated updates (`nfkit switch update`) signed with a
    /// key of this file, which must not be readable by group or others;
    /// plain reloads are then refused.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Also take updates on this address (needs --key; repeatable).
    #[arg(long = "update-listen", value_name = "udp:ADDR|tcp:ADDR")]
    update_listen: Vec<switch_ctl::UpdateAddr>,
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    match c {
        Command::Run(a) => run_switch(a),
        Command::Start(a) => start(a),
        Command::Status(a) => status(a),
        Command::Reload(a) => reload(a),
        Command::Stop(a) => stop(a),
        Command::Map(a) => map(a),
        Command::Update(a) => update(a),
        Command::Keygen(a) => keygen(a),
        Command::Rekey(a) => rekey(a),
        Command::Trace(a) => {
            super::switch_trace::trace(a.daemon.client()?.as_ref(), a.name, a.count, a.all, a.json)
        }
    }
}

/// The port index `--host` names (a name, or a number from 1).
fn host_index(host: &str, specs: &[PortSpec]) -> anyhow::Result<usize> {
    if let Some(i) = specs.iter().position(|s| s.name() == host) {
        return Ok(i);
    }
    match host.parse::<usize>() {
        Ok(n) if n >= 1 && n <= specs.len() => Ok(n - 1),
        _ => Err(anyhow!(
            "--host {host}: no such port (names: {}; or a number 1..={})",
            specs
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", "),
            specs.len()
        )),
    }
}

fn run_switch(a: RunArgs) -> anyhow::Result<ExitCode> {
    let shown = a.script.display().to_string();
    let source = std::fs::read_to_string(&a.script).with_context(|| format!("reading {shown}"))?;
    let Some(compiled) =
        super::compile::compile_with(&shown, &source, &a.nf_path, Some(Hook::Switch))?
    else {
        return Ok(ExitCode::from(1));
    };
    let hosts = a
        .host
        .iter()
        .map(|h| host_index(h, &a.ports))
        .collect::<anyhow::Result<Vec<usize>>>()?;
    let workers = a.workers.max(1);
    let auth = match &a.key {
        Some(path) => Some(UpdateAuth {
            switch_id: a.name.clone(),
            keys: KeyRing::load(path).map_err(|e| anyhow!("switch {}: {e}", a.name))?,
        }),
        None if !a.update_listen.is_empty() => {
            bail!("switch {}: --update-listen needs --key FILE", a.name)
        }
        None => None,
    };
    let stop = nfkit_traffic::stop_on_signals()?;
    let (req_tx, requests) = std::sync::mpsc::channel();
    let server = switch_ctl::Server::start(&a.name, req_tx.clone())?;
    let mut listeners = Vec::new();
    for addr in &a.update_listen {
        let l = switch_ctl::Listener::start(&a.name, addr, req_tx.clone())?;
        eprintln!("switch {}: taking updates on {}", a.name, l.local);
        listeners.push(l);
    }
    drop(req_tx);
    let ports = any::open_all(&a.ports, workers).map_err(|e| anyhow!("switch {}: {e}", a.name))?;
    let cfg = SwitchConfig {
        workers,
        engine: a.engine.unwrap_or_else(Engine::best),
        pin: !a.no_pin,
        nice: a.nice,
        host_port: hosts.first().copied(),
        host_queues: hosts.iter().skip(1).copied().collect(),
        linger: a.linger,
        auth,
        ..SwitchConfig::default()
    };
    let sw =
        Switch::start(&compiled, ports, &cfg).map_err(|e| anyhow!("switch {}: {e}", a.name))?;
    let engine = sw.script().engine();
    let pinned: Vec<Option<usize>> = sw.pinned().to_vec();
    let ctl = sw.controller();
    let mut ctl_frames: Vec<Packet> = Vec::new();
    let mut ctl_count: u64 = 0;
    let mut reasons: BTreeMap<u32, u64> = BTreeMap::new();
    let mut recent = Recent::new(TRACE_KEPT);
    let live = std::io::stderr().is_terminal() && !a.json;
    let start = Instant::now();
    let mut last = sw.stats();
    let mut last_t = start;
    while !sw.is_done() {
        let next = match requests.recv_timeout(Duration::from_millis(100)) {
            Ok(p) => Some(p),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(100));
                None
            }
        };
        if let Some(p) = next {
            let answer = answer(&p, &sw, &a, start, &recent);
            let _ = p.reply.send(answer);
        }
        ctl_count += drain(
            &ctl,
            a.controller.is_some(),
            &mut ctl_frames,
            &mut reasons,
            &mut recent,
        );
        if stop.load(Ordering::Relaxed) {
            sw.stop();
        }
        if live && last_t.elapsed() >= Duration::from_secs(1) {
            let now = sw.stats();
            let dt = last_t.elapsed().as_secs_f64();
            eprintln!("{}", rates(&a.name, start.elapsed(), &last, &now, dt));
            last = now;
            last_t = Instant::now();
        }
    }
    // Requests that come now are told the switch is stopping (no wait
    // for an answer), and the control thread ends once the answers it
    // is writing are out.
    drop(requests);
    drop(server);
    drop(listeners);
    let (stats, port_stats) = sw.finish().map_err(|e| anyhow!("switch {}: {e}", a.name))?;
    ctl_count += drain(
        &ctl,
        a.controller.is_some(),
        &mut ctl_frames,
        &mut reasons,
        &mut recent,
    );
    if let Some(path) = &a.controller {
        nfkit_pcap::write_file(path, &ctl_frames).map_err(super::pcap_error(path))?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    if a.json {
        let mut v = stats.json();
        v["name"] = a.name.clone().into();
        v["workers"] = workers.into();
        v["pinned"] = serde_json::to_value(&pinned)?;
        v["engine"] = engine.engine().name().into();
        v["controller_frames"] = ctl_count.into();
        v["controller_reasons"] = reasons
            .iter()
            .map(|(r, n)| (r.to_string(), serde_json::Value::from(*n)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        v["port_dropped"] = port_stats
            .iter()
            .map(|p| serde_json::json!({"rx_dropped": p.rx_dropped, "tx_dropped": p.tx_dropped}))
            .collect::<Vec<_>>()
            .into();
        v["seconds"] = elapsed.into();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("switch {}: {} workers, {:.2} s", a.name, workers, elapsed);
        print!("{}", stats.text());
        let by_reason: Vec<String> = reasons
            .iter()
            .map(|(r, n)| format!("reason {r}: {n}"))
            .collect();
        if by_reason.is_empty() {
            println!("controller frames: {ctl_count}");
        } else {
            println!("controller frames: {ctl_count} ({})", by_reason.join(", "));
        }
        println!("engine: {engine}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The answer to one control request.
fn answer(
    p: &switch_ctl::Pending,
    sw: &Switch,
    a: &RunArgs,
    start: Instant,
    recent: &Recent,
) -> serde_json::Value {
    use serde_json::json;
    let req = &p.req;
    match req["op"].as_str() {
        Some("status") => {
            let mut v = sw.stats().json();
            v["name"] = a.name.clone().into();
            v["pid"] = std::process::id().into();
            v["workers"] = a.workers.max(1).into();
            v["uptime_s"] = start.elapsed().as_secs_f64().into();
            v["script"] = a.script.display().to_string().into();
            v["engine"] = sw.script().engine().engine().name().into();
            v["latency"] = serde_json::to_value(sw.latency()).unwrap_or_default();
            v["update_listen"] = a
                .update_listen
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .into();
            json!({"ok": true, "status": v})
        }
        Some("update") => {
            let Some(bytes) = req["message"].as_str().and_then(nfkit_update::hex::decode) else {
                return json!({"ok": false, "error": "update: no \"message\" (hex bytes)"});
            };
            let compile = |name: &str, source: &str| compile_source(name, source, &a.nf_path);
            match sw.update(&bytes, &p.source, p.received, &compile) {
                Ok(r) => json!({"ok": true, "update": r}),
                Err(e) => {
                    eprintln!(
                        "switch {}: update from {} refused ({}): {e}",
                        a.name,
                        p.source,
                        e.reason()
                    );
                    json!({"ok": false, "reason": e.reason(), "error": e.to_string()})
                }
            }
        }
        Some("rekey") => {
            let Some(path) = &a.key else {
                return json!({"ok": false, "error": "this switch has no key file (--key)"});
            };
            match KeyRing::load(path) {
                Ok(keys) => {
                    let ids = keys.ids();
                    sw.set_update_keys(keys);
                    eprintln!(
                        "switch {}: keys read again from {} (ids {ids:?})",
                        a.name,
                        path.display()
                    );
                    json!({"ok": true, "ids": ids})
                }
                Err(e) => json!({"ok": false, "error": format!("{e}; the previous keys stay")}),
            }
        }
        Some("reload") if sw.takes_updates() => {
            let e = sw.refuse_unauthenticated(&format!("{} (plain reload)", p.source));
            eprintln!(
                "switch {}: reload from {} refused ({}): this switch takes authenticated updates only",
                a.name,
                p.source,
                e.reason()
            );
            json!({"ok": false, "reason": e.reason(), "error": format!(
                "{e}: this switch takes authenticated updates only (nfkit switch update --key FILE)"
            )})
        }
        Some("reload") => {
            let Some(path) = req["script"].as_str() else {
                return json!({"ok": false, "error": "reload: no \"script\""});
            };
            let name = req["name"].as_str().unwrap_or(path);
            match compile_reload(path, name, &a.nf_path) {
                Err(e) => {
                    sw.count_reload_failure();
                    json!({"ok": false, "error": e})
                }
                Ok(c) => match sw.reload(&c) {
                    Ok(r) => json!({"ok": true, "reload": r}),
                    Err(e) => json!({"ok": false, "error": e.to_string()}),
                },
            }
        }
        Some("stop") => {
            sw.stop();
            json!({"ok": true})
        }
        Some("trace") => {
            let from = req["from"].as_u64().unwrap_or_else(|| {
                if req["all"] == true {
                    recent.oldest_seq()
                } else {
                    recent.next_seq()
                }
            });
            let max = req["max"].as_u64().unwrap_or(256).min(4096) as usize;
            let (frames, missed) = recent.since(from, max);
            let next = frames
                .last()
                .map_or(from.max(recent.oldest_seq()), |f| f.seq + 1);
            json!({"ok": true, "next": next, "missed": missed, "frames": frames})
        }
        Some(op) if op.starts_with("map_") => {
            super::map::map_switch::answer(op, req, sw, &p.source, &a.name)
        }
        _ => json!({"ok": false, "error": format!("unknown request {req}")}),
    }
}

/// Compiles a reload's script at `path` (named `name` in messages) for
/// the switch hook; the error as text.
fn compile_reload(
    path: &str,
    name: &str,
    nf_path: &[String],
) -> Result<nfkit_lang::Compiled, String> {
    let source = std::fs::read_to_string(path).map_err(|e| format!("reading {name}: {e}"))?;
    compile_source(name, &source, nf_path)
}

/// Compiles an update's script `source` (named `name`) for the switch
/// hook; the error as text.
fn compile_source(
    name: &str,
    source: &str,
    nf_path: &[String],
) -> Result<nfkit_lang::Compiled, String> {
    let opts = nfkit_lang::Options {
        search: nfkit_nf::SearchPath::from_env(nf_path),
        hook: Some(Hook::Switch),
    };
    nfkit_lang::compile(name, source, &opts).map_err(|e| e.to_string())
}

/// `nfkit switch status [NAME]`: each switch's status answer (or why
/// there is none), directly or from nfkitd.
fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let found: Vec<(String, PathBuf, Result<serde_json::Value, String>)> =
        match a.daemon.client()? {
            Some(c) => {
                use nfkit_daemon::proto::{
                    switch_service_client::SwitchServiceClient, ListSwitchesRequest,
                };
                let list = c
                    .block_on(SwitchServiceClient::new(c.channel()).list_switches(
                        ListSwitchesRequest {
                            name: a.name.clone().unwrap_or_default(),
                        },
                    ))
                    .map_err(super::daemon::status_error)?
                    .into_inner()
                    .switches;
                let mut out: Vec<_> = list
                    .into_iter()
                    .map(|sw| {
                        let st = serde_json::from_str(&sw.status_json)
                            .map_err(|_| "not running".to_string());
                        (sw.name, PathBuf::from(sw.socket), st)
                    })
                    .collect();
                if let (Some(n), true) = (&a.name, out.is_empty()) {
                    out.push((
                        n.clone(),
                        switch_ctl::socket_path(n)?,
                        Err("not running".into()),
                    ));
                }
                out
            }
            None => {
                let names: Vec<(String, PathBuf)> = match &a.name {
                    Some(n) => vec![(n.clone(), switch_ctl::socket_path(n)?)],
                    None => switch_ctl::list(),
                };
                names
                    .into_iter()
                    .map(|(name, path)| {
                        let st = match switch_ctl::request_at(
                            &name,
                            &path,
                            &serde_json::json!({"op": "status"}),
                        ) {
                            Ok(v) if v["ok"] == true => Ok(v["status"].clone()),
                            Ok(v) => Err(v["error"].as_str().unwrap_or("refused").to_string()),
                            Err(_) => Err("not running".to_string()),
                        };
                        (name, path, st)
                    })
                    .collect()
            }
        };
    let mut all = Vec::new();
    let mut failed = false;
    for (name, path, st) in found {
        match st {
            Ok(v) => all.push(v),
            Err(e) if e == "not running" && a.name.is_some() => bail!(
                "switch {name}: not running (no answer on its control socket {}); is it running?",
                path.display()
            ),
            Err(e) if e == "not running" => eprintln!(
                "switch {name}: not running (stale socket {})",
                path.display()
            ),
            Err(e) => {
                failed = true;
                eprintln!("switch {name}: \"{e}\"");
            }
        }
    }
    if a.json {
        let v = match &a.name {
            Some(_) => all.first().cloned().unwrap_or_default(),
            None => all.into(),
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if all.is_empty() && a.name.is_none() {
        println!(
            "no switch running (run directory {})",
            switch_ctl::run_dir().display()
        );
    } else {
        for v in &all {
            print!("{}", status_text(v));
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A status answer as text.
fn status_text(v: &serde_json::Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "switch {}: pid {}, {} workers, version {} ({} reloads, {} refused), up {:.1} s, engine {}",
        v["name"].as_str().unwrap_or("?"),
        v["pid"],
        v["workers"],
        v["version"],
        v["reloads"],
        v["reload_failures"],
        v["uptime_s"].as_f64().unwrap_or(0.0),
        v["engine"].as_str().unwrap_or("?"),
    );
    for p in v["ports"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "  port {} {} ({}): rx {}, tx {}, tx_dropped {}",
            p["port"],
            p["name"].as_str().unwrap_or("?"),
            p["spec"].as_str().unwrap_or("?"),
            p["rx"],
            p["tx"],
            p["tx_dropped"]
        );
    }
    let u = &v["updates"];
    if u["enabled"] == true {
        let reasons: Vec<String> = u["reasons"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let _ = writeln!(
            s,
            "  updates: {} applied, {} refused{}; pre at version {}{}",
            u["applied"],
            u["refused"],
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            },
            u["positions"]["pre"],
            match v["update_listen"].as_array() {
                Some(l) if !l.is_empty() => format!(
                    "; listening on {}",
                    l.iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                _ => String::new(),
            }
        );
    }
    let lat = &v["latency"];
    if lat["frames"].as_u64().unwrap_or(0) > 0 {
        let us = |k: &str| lat[k].as_f64().unwrap_or(0.0) / 1e3;
        let _ = writeln!(
            s,
            "  latency (receive ring to transmit ring, {} frames): p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            lat["frames"],
            us("p50_ns"),
            us("p99_ns"),
            us("max_ns")
        );
    }
    let verdicts: Vec<String> = v["verdicts"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, n)| n.as_u64().unwrap_or(0) > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        s,
        "  verdicts: {}",
        if verdicts.is_empty() {
            "none".into()
        } else {
            verdicts.join(", ")
        }
    );
    s
}

/// `nfkit switch reload NAME SCRIPT`.
fn reload(a: ReloadArgs) -> anyhow::Result<ExitCode> {
    let script = std::fs::canonicalize(&a.script)
        .with_context(|| format!("switch {}: script {}", a.name, a.script.display()))?;
    let v = match a.daemon.client()? {
        Some(c) => reload_via(&c, &a.name, &script)?,
        None => {
            let req = serde_json::json!({"op": "reload", "script": script.display().to_string()});
            switch_ctl::request(&a.name, &req)?
        }
    };
    if v["ok"] != true {
        let err = v["error"].as_str().unwrap_or("refused");
        if a.json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        eprintln!(
            "switch {}: reload of {} refused; still running the previous version:
{err}",
            a.name,
            script.display()
        );
        return Ok(ExitCode::from(1));
    }
    let r = &v["reload"];
    if a.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        let parked = r["parked"].as_u64().unwrap_or(0);
        println!(
            "switched to version {} in {:.1} µs (all {} workers{}; loaded in {:.0} µs)",
            r["version"],
            r["switch"].as_f64().unwrap_or(0.0),
            r["workers"],
            if parked > 0 {
                format!(", {parked} idle")
            } else {
                String::new()
            },
            r["load"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `nfkit switch map NAME MAP`.
fn map(a: MapArgs) -> anyhow::Result<ExitCode> {
    let v = super::switch_via::request(
        a.daemon.client()?.as_ref(),
        &a.name,
        &serde_json::json!({"op": "map_dump", "map": a.map}),
    )?;
    if v["ok"] != true {
        eprintln!(
            "switch {}: {}",
            a.name,
            v["error"].as_str().unwrap_or("refused")
        );
        return Ok(ExitCode::from(1));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v["rows"])?);
    } else {
        for r in v["rows"].as_array().into_iter().flatten() {
            println!("{}", r["text"].as_str().unwrap_or_default());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `nfkit switch stop NAME`: asks it to stop and waits until its socket
/// is gone.
fn stop(a: StopArgs) -> anyhow::Result<ExitCode> {
    if let Some(c) = a.daemon.client()? {
        use nfkit_daemon::proto::{
            switch_service_client::SwitchServiceClient, UndeploySwitchRequest,
        };
        c.block_on(
            SwitchServiceClient::new(c.channel()).undeploy_switch(UndeploySwitchRequest {
                name: a.name.clone(),
            }),
        )
        .map_err(super::daemon::status_error)?;
        println!("switch {} stopped", a.name);
        return Ok(ExitCode::SUCCESS);
    }
    let path = switch_ctl::socket_path(&a.name)?;
    let v = switch_ctl::request(&a.name, &serde_json::json!({"op": "stop"}))?;
    if v["ok"] != true {
        bail!("switch {}: stop refused: {}", a.name, v["error"]);
    }
    let t = Instant::now();
    while path.exists() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if path.exists() {
        bail!(
            "switch {}: asked to stop, but its socket {} is still there after 30 s",
            a.name,
            path.display()
        );
    }
    println!("switch {} stopped", a.name);
    Ok(ExitCode::SUCCESS)
}

/// `nfkit switch reload` through nfkitd: the switch's answer as the
/// control socket gives it (`ok`, `reload` or `error`).
fn reload_via(
    c: &nfkit_daemon::Client,
    name: &str,
    script: &std::path::Path,
) -> anyhow::Result<serde_json::Value> {
    use nfkit_daemon::proto::{switch_service_client::SwitchServiceClient, RedeploySwitchRequest};
    let shown = script.display().to_string();
    let source = std::fs::read_to_string(script)
        .with_context(|| format!("switch {name}: script {shown}"))?;
    let r = c.block_on(SwitchServiceClient::new(c.channel()).redeploy_switch(
        RedeploySwitchRequest {
            name: name.to_string(),
            script: Some(inline(&shown, source)),
        },
    ));
    Ok(match r {
        Ok(r) => {
            let rep: serde_json::Value = serde_json::from_str(&r.into_inner().reload_json)
                .context("nfkitd's reload report")?;
            serde_json::json!({"ok": true, "reload": rep})
        }
        Err(s) if s.code() == tonic::Code::FailedPrecondition => {
            serde_json::json!({"ok": false, "error": s.message()})
        }
        Err(s) => return Err(super::daemon::status_error(s)),
    })
}

/// A script sent inline, named by its path on this machine.
fn inline(shown: &str, source: String) -> nfkit_daemon::proto::ScriptSource {
    use nfkit_daemon::proto::{script_source::Kind, InlineScript, ScriptSource};
    ScriptSource {
        kind: Some(Kind::Inline(InlineScript {
            file: shown.to_string(),
            source,
            source_path: shown.to_string(),
        })),
    }
}

/// `nfkit switch start`: the switch in the background, by nfkitd when
/// one runs, else by this program (its log beside its socket).
fn start(a: StartArgs) -> anyhow::Result<ExitCode> {
    let script = std::fs::canonicalize(&a.script)
        .with_context(|| format!("switch {}: script {}", a.name, a.script.display()))?;
    let shown = script.display().to_string();
    let key = match &a.key {
        Some(k) => Some(
            std::fs::canonicalize(k)
                .with_context(|| format!("switch {}: key file {}", a.name, k.display()))?,
        ),
        None => None,
    };
    let daemon = super::daemon::DaemonArg {
        socket: a.daemon.clone(),
        tls: Default::default(),
    };
    let (pid, socket) = match daemon.client()? {
        Some(c) => {
            use nfkit_daemon::proto::{
                switch_service_client::SwitchServiceClient, DeploySwitchRequest,
            };
            let source =
                std::fs::read_to_string(&script).with_context(|| format!("reading {shown}"))?;
            let r = c
                .block_on(
                    SwitchServiceClient::new(c.channel()).deploy_switch(DeploySwitchRequest {
                        name: a.name.clone(),
                        ports: a.ports.clone(),
                        script: Some(inline(&shown, source)),
                        workers: a.workers,
                        engine: a.engine.clone().unwrap_or_default(),
                        host: a.host.clone(),
                        no_pin: a.no_pin,
                        netns: a.netns.clone().unwrap_or_default(),
                        key_file: key
                            .as_ref()
                            .map(|k| k.display().to_string())
                            .unwrap_or_default(),
                    }),
                )
                .map_err(super::daemon::status_error)?
                .into_inner();
            let d = r.deployment.unwrap_or_default();
            (d.pid, PathBuf::from(d.socket))
        }
        None => {
            let dir = switch_ctl::run_dir();
            let socket = switch_ctl::socket_path(&a.name)?;
            let rec = nfkit_daemon::switches::SwitchRecord {
                name: a.name.clone(),
                ports: a.ports.clone(),
                netns: a.netns.clone().unwrap_or_default(),
                workers: a.workers,
                engine: a.engine.clone().unwrap_or_default(),
                host: a.host.clone(),
                no_pin: a.no_pin,
                script: script.clone(),
                key: key.clone(),
                ..Default::default()
            };
            let me = std::env::current_exe().context("finding this program")?;
            let log = dir.join(format!("{}.log", a.name));
            let (pid, _) = nfkit_daemon::switches::start(
                &rec,
                &nfkit_daemon::switches::Start {
                    program: &me,
                    switch_dir: &dir,
                    log: &log,
                    nf_path: &a.nf_path,
                },
            )
            .map_err(|e| anyhow!("{e}"))?;
            (pid, socket)
        }
    };
    if a.json {
        let v = serde_json::json!({"name": a.name, "pid": pid, "socket": socket, "script": shown});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "switch {} started: pid {pid}, control socket {}",
            a.name,
            socket.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Controller frames kept for `nfkit switch trace` readers.
const TRACE_KEPT: usize = 4096;

/// Takes the controller's frames, counting them per reason, keeping
/// their heads for traces (and the frames when `keep`).
fn drain(
    ctl: &nfkit_switch::controller::Controller,
    keep: bool,
    out: &mut Vec<Packet>,
    reasons: &mut BTreeMap<u32, u64>,
    recent: &mut Recent,
) -> u64 {
    ctl.drain(|f| {
        *reasons.entry(f.reason).or_default() += 1;
        recent.push(f);
        if keep {
            out.push(Packet::new(f.arrival_ns, f.data.clone()));
        }
    }) as u64
}

/// One line of rates since the last one.
fn rates(name: &str, t: Duration, a: &Stats, b: &Stats, dt: f64) -> String {
    let per = |x: u64, y: u64| (y.saturating_sub(x) as f64 / dt.max(1e-3)).round() as u64;
    let mut parts = vec![format!("{name} {:>5.1}s", t.as_secs_f64())];
    for (p, q) in a.ports.iter().zip(&b.ports) {
        parts.push(format!(
            "{} rx {}/s tx {}/s",
            q.name,
            per(p.rx, q.rx),
            per(p.tx, q.tx)
        ));
    }
    let acts: Vec<String> = Action::ALL
        .iter()
        .map(|&act| (act, per(a.action(act), b.action(act))))
        .filter(|(_, r)| *r > 0)
        .map(|(act, r)| format!("{act} {r}/s"))
        .collect();
    if !acts.is_empty() {
        parts.push(acts.join(" "));
    }
    parts.join(" | ")
}

/// `nfkit switch update`: signs an update and sends it.
fn update(a: UpdateArgs) -> anyhow::Result<ExitCode> {
    let keys = KeyRing::load(&a.key)?;
    let key: &Key = match a.key_id {
        Some(id) => keys
            .get(id)
            .ok_or_else(|| anyhow!("key file {}: no key id {id}", a.key.display()))?,
        None => keys
            .newest()
            .ok_or_else(|| anyhow!("key file {}: no keys", a.key.display()))?,
    };
    let remote: Option<switch_ctl::UpdateAddr> =
        if a.switch.starts_with("udp:") || a.switch.starts_with("tcp:") {
            Some(
                a.switch
                    .parse()
                    .map_err(|e: String| anyhow!("--switch {e}"))?,
            )
        } else {
            None
        };
    // A switch by NAME is reached through nfkitd when one runs.
    let daemon = match &remote {
        Some(_) => None,
        None => super::daemon::DaemonArg {
            socket: a.daemon.clone(),
            tls: Default::default(),
        }
        .client()?,
    };
    let target = match (&a.target, &remote) {
        (Some(t), _) => t.clone(),
        (None, None) => a.switch.clone(),
        (None, Some(addr)) => bail!(
            "--switch {addr}: give the switch's name with --target NAME (updates name their switch)"
        ),
    };
    let hex = |what: &str, t: &str| {
        nfkit_update::hex::decode(t).ok_or_else(|| anyhow!("{what} `{t}`: expected hex bytes"))
    };
    let body = match (&a.script, &a.set, &a.delete) {
        (Some(path), None, None) if path.extension().is_some_and(|e| e == "o") => {
            let shown = path.display().to_string();
            let bytes = std::fs::read(path).with_context(|| format!("reading {shown}"))?;
            // Checked here as the switch will read it (it loads it for
            // its hook without compiling).
            let o = nfkit_lang::chain_object::read(&bytes, &shown)?;
            if o.hook != Hook::Switch {
                bail!(
                    "{shown}: compiled for hook {}, the switch runs hook `switch` \
                     (nfkit compile --hook switch)",
                    o.hook
                );
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(shown);
            Body::Code {
                format: CodeFormat::Object,
                name,
                bytes,
            }
        }
        (Some(path), None, None) => {
            let shown = path.display().to_string();
            let source =
                std::fs::read_to_string(path).with_context(|| format!("reading {shown}"))?;
            if super::compile::compile_with(&shown, &source, &a.nf_path, Some(Hook::Switch))?
                .is_none()
            {
                return Ok(ExitCode::from(1));
            }
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(shown);
            Body::Code {
                format: CodeFormat::ChainScript,
                name,
                bytes: source.into_bytes(),
            }
        }
        (None, Some(set), None) => Body::EntrySet {
            map: set[0].clone(),
            key: hex("key", &set[1])?,
            value: hex("value", &set[2])?,
        },
        (None, None, Some(del)) => Body::EntryDelete {
            map: del[0].clone(),
            key: hex("key", &del[1])?,
        },
        _ => bail!("give one of SCRIPT, --set MAP KEY VALUE or --delete MAP KEY"),
    };
    let version = match (a.version, &remote) {
        (Some(v), _) => v,
        (None, Some(addr)) => {
            bail!("--switch {addr}: give the new version with --version N (above the running one)")
        }
        (None, None) => {
            let v = super::switch_via::request(
                daemon.as_ref(),
                &a.switch,
                &serde_json::json!({"op": "status"}),
            )?;
            let st = &v["status"];
            let running = st["updates"]["positions"][a.position.to_string()]
                .as_u64()
                .or_else(|| st["version"].as_u64())
                .unwrap_or(0);
            running + 1
        }
    };
    let msg = Message::new(&target, a.position.clone(), version, body)?.seal(key)?;
    let v = match &remote {
        Some(addr) => switch_ctl::send_update(addr, &msg)?,
        None => super::switch_via::request(
            daemon.as_ref(),
            &a.switch,
            &serde_json::json!({"op": "update", "message": nfkit_update::hex::encode(&msg)}),
        )?,
    };
    if v["ok"] != true {
        if a.json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        eprintln!(
            "switch {}: update to version {version} at {} refused; still running the previous version: {}",
            a.switch,
            a.position,
            v["error"].as_str().unwrap_or("refused")
        );
        return Ok(ExitCode::from(1));
    }
    let r = &v["update"];
    if a.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        let us = |k: &str| r[k].as_f64().unwrap_or(0.0);
        println!(
            "switch {}: {} now at version {} ({}, key {}; received -> all {} workers in {:.1} µs: \
             verify {:.1} µs, load {:.0} µs, switch {:.1} µs)",
            a.switch,
            a.position,
            r["version"],
            r["kind"].as_str().unwrap_or("?"),
            r["key_id"],
            r["workers"],
            us("total"),
            us("verify"),
            us("load"),
            us("switch"),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `nfkit switch keygen FILE [--id N] [--add]`.
fn keygen(a: KeygenArgs) -> anyhow::Result<ExitCode> {
    let path = &a.file;
    if a.add {
        let ring = KeyRing::load(path)?;
        let id = match a.id {
            Some(id) => id,
            None => ring
                .ids()
                .last()
                .copied()
                .unwrap_or(0)
                .checked_add(1)
                .ok_or_else(|| anyhow!("key file {}: no key id left", path.display()))?,
        };
        if ring.get(id).is_some() {
            bail!("key file {}: key id {id} exists", path.display());
        }
        let mut keys: Vec<Key> = ring
            .ids()
            .iter()
            .filter_map(|i| ring.get(*i).cloned())
            .collect();
        keys.push(Key::generate(id)?);
        let tmp = path.with_extension("new");
        let _ = std::fs::remove_file(&tmp);
        KeyRing::new(keys).write_new(&tmp)?;
        std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
        println!("key {id} added to {}", path.display());
    } else {
        let id = a.id.unwrap_or(1);
        KeyRing::new([Key::generate(id)?]).write_new(path)?;
        println!("key {id} written to {} (mode 0600)", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `nfkit switch rekey NAME`: the switch reads its key file again.
fn rekey(a: RekeyArgs) -> anyhow::Result<ExitCode> {
    let v = super::switch_via::request(
        a.daemon.client()?.as_ref(),
        &a.name,
        &serde_json::json!({"op": "rekey"}),
    )?;
    if v["ok"] != true {
        eprintln!(
            "switch {}: {}",
            a.name,
            v["error"].as_str().unwrap_or("refused")
        );
        return Ok(ExitCode::from(1));
    }
    println!("switch {}: key ids now {}", a.name, v["ids"]);
    Ok(ExitCode::SUCCESS)
}

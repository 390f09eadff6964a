//! Starting and stopping the daemon: refuse when another one answers on
//! the socket, adopt what is pinned and recorded, bind the socket with
//! the configured permissions (and the TCP address with mutual TLS when
//! configured, see [`crate::tls`]), serve until SIGTERM, SIGINT or the
//! Shutdown RPC, remove the socket. Deployments stay: they are pinned.

use crate::audit::AuditLog;
use crate::chains::Store;
use crate::config::Config;
use crate::error::DaemonError;
use crate::proto::{
    chain_service_server::ChainServiceServer, daemon_service_server::DaemonServiceServer,
    deployment_service_server::DeploymentServiceServer, map_service_server::MapServiceServer,
    nf_service_server::NfServiceServer, stats_service_server::StatsServiceServer,
    switch_service_server::SwitchServiceServer,
};
use crate::records::{adopt, Adopted};
use crate::service::{chain, daemon, deployment, map, nf, stats, switch, Daemon};
use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;
use std::time::Instant;

/// Room above `max_request_bytes` for tonic's own limit: requests up to
/// it reach the handlers, which refuse (and audit) the ones too large.
const DECODE_SLACK: usize = 64 << 10;

/// How long a change under way may take to finish when the daemon stops.
const CHANGE_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long open connections may go on after the daemon is told to stop.
const GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Finds what the previous daemon left (see [`adopt`]).
fn adopt_state(cfg: &Config) -> Result<(crate::records::Records, Vec<Adopted>), DaemonError> {
    let finish = |i: &crate::records::Intent| {
        std::thread::scope(|s| {
            s.spawn(|| {
                let r = Daemon::run_intent(&cfg.paths, &cfg.nf_path, i)
                    .map(|d| d.outcome.deployment)
                    .map_err(|e| e.to_string());
                if let Some(o) = &i.object {
                    let _ = std::fs::remove_file(&o.path);
                }
                r
            })
            .join()
            .unwrap_or_else(|_| Err("the deploy thread panicked".into()))
        })
    };
    adopt(&cfg.run_dir, &cfg.paths, &finish)
}

/// Is something answering on `path`?
fn answers(path: &std::path::Path) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

/// The services, each with the request size limit.
fn router(
    d: &Arc<Daemon>,
    limit: usize,
) -> tonic::transport::server::Router<
    tower::layer::util::Stack<crate::gate::GateLayer, tower::layer::util::Identity>,
> {
    tonic::transport::Server::builder()
        .layer(crate::gate::GateLayer(d.clone()))
        .add_service(NfServiceServer::new(nf::Nfs(d.clone())).max_decoding_message_size(limit))
        .add_service(
            ChainServiceServer::new(chain::Chains(d.clone())).max_decoding_message_size(limit),
        )
        .add_service(
            DeploymentServiceServer::new(deployment::Deployments(d.clone()))
                .max_decoding_message_size(limit),
        )
        .add_service(MapServiceServer::new(map::Maps(d.clone())).max_decoding_message_size(limit))
        .add_service(
            StatsServiceServer::new(stats::Stats(d.clone())).max_decoding_message_size(limit),
        )
        .add_service(
            DaemonServiceServer::new(daemon::DaemonInfo(d.clone()))
                .max_decoding_message_size(limit),
        )
        .add_service(
            SwitchServiceServer::new(switch::Switches(d.clone())).max_decoding_message_size(limit),
        )
}

/// Serves until told to stop; `ready` is called once the socket (and
/// the TCP address, given to it) accept.
pub async fn serve(
    cfg: Config,
    ready: impl FnOnce(&[Adopted], Option<std::net::SocketAddr>),
) -> Result<(), DaemonError> {
    let io = |what: &'static str, path: &std::path::Path| {
        let path = path.to_path_buf();
        move |e| DaemonError::Io {
            what,
            path,
            cause: e,
        }
    };
    if answers(&cfg.socket) {
        return Err(DaemonError::Running(cfg.socket.clone()));
    }
    // Certificates are read first: a bad one stops the start here.
    let tls = match cfg.tls.listen {
        Some(_) => Some(crate::tls::ServerTls::new(&cfg.tls)?),
        None => None,
    };
    // A socket left by a daemon that was killed; anything else there is
    // not ours to remove (bind then fails and says so).
    use std::os::unix::fs::FileTypeExt as _;
    if std::fs::symlink_metadata(&cfg.socket).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(&cfg.socket);
    }
    if let Some(dir) = cfg.socket.parent() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
    }
    std::fs::create_dir_all(&cfg.run_dir).map_err(io("create", &cfg.run_dir))?;
    // NF objects registered through the daemon come first on its path.
    let mut cfg = cfg;
    let nf_dir = crate::service::nf::nf_dir(&cfg);
    std::fs::create_dir_all(&nf_dir).map_err(io("create", &nf_dir))?;
    cfg.nf_path.insert(0, nf_dir.display().to_string());
    let audit = AuditLog::open(&cfg.audit_log)?;
    let cfg2 = cfg.clone();
    let (records, mut adopted) = tokio::task::spawn_blocking(move || adopt_state(&cfg2))
        .await
        .map_err(|e| DaemonError::Serve(e.to_string()))??;
    let (run_dir, switch_dir) = (cfg.run_dir.clone(), cfg.switch_dir.clone());
    let (switches, found) =
        tokio::task::spawn_blocking(move || crate::switches::adopt(&run_dir, &switch_dir))
            .await
            .map_err(|e| DaemonError::Serve(e.to_string()))??;
    adopted.extend(found);
    let listener = tokio::net::UnixListener::bind(&cfg.socket).map_err(io("bind", &cfg.socket))?;
    std::fs::set_permissions(
        &cfg.socket,
        std::fs::Permissions::from_mode(cfg.socket_mode),
    )
    .map_err(io("set permissions of", &cfg.socket))?;
    let (tx, mut rx) = tokio::sync::watch::channel(false);
    let limit = cfg.max_request_bytes + DECODE_SLACK;
    let socket = cfg.socket.clone();
    let metrics = Arc::new(crate::metrics::Metrics::new(
        cfg.paths.clone(),
        cfg.switch_dir.clone(),
    ));
    if let Some(addr) = cfg.metrics {
        crate::metrics::serve(addr, metrics.clone()).await?;
    }
    let d = Arc::new(Daemon {
        stats: crate::stats_hub::StatsHub::new(metrics.stats_reads.clone()),
        live: crate::reload::Live::new(cfg.roles.clone(), tls),
        metrics,
        maps: Default::default(),
        chains: Store::new(&cfg.data_dir),
        cfg,
        audit,
        records: tokio::sync::Mutex::new(records),
        switches: tokio::sync::Mutex::new(switches),
        adopted,
        started: Instant::now(),
        shutdown: tx,
    });
    let tcp = match (d.live.tls(), d.cfg.tls.listen) {
        (Some(_), Some(addr)) => Some(crate::tls::listen(addr, d.clone()).await?),
        _ => None,
    };
    spawn_reload_on_sighup(d.clone());
    ready(&d.adopted, tcp.as_ref().map(|t| t.0));
    // SIGTERM, SIGINT or the Shutdown RPC stop accepting; connections
    // still open (a stats stream) get GRACE to finish.
    let (fired_tx, fired_rx) = tokio::sync::watch::channel(false);
    let mut grace_rx = fired_rx.clone();
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let sigterm = async {
            match term.as_mut() {
                Some(t) => {
                    t.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = rx.wait_for(|s| *s) => {}
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm => {}
        }
        let _ = fired_tx.send(true);
    });
    let stop = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let grace = async move {
        let _ = grace_rx.wait_for(|s| *s).await;
        tokio::time::sleep(GRACE).await;
    };
    let unix = router(&d, limit).serve_with_incoming_shutdown(
        tokio_stream::wrappers::UnixListenerStream::new(listener),
        stop(fired_rx.clone()),
    );
    let tcp = async {
        match tcp {
            Some((_, incoming)) => {
                router(&d, limit)
                    .serve_with_incoming_shutdown(incoming, stop(fired_rx.clone()))
                    .await
            }
            None => Ok(()),
        }
    };
    let res = async {
        let (u, t) = tokio::join!(unix, tcp);
        u.and(t)
    };
    let res = tokio::select! {
        r = res => r,
        () = grace => Ok(()),
    };
    let _ = std::fs::remove_file(&socket);
    // A deploy or undeploy under way finishes (and is recorded) first.
    let _ = tokio::time::timeout(CHANGE_WAIT, d.records.lock()).await;
    let _ = tokio::time::timeout(CHANGE_WAIT, d.switches.lock()).await;
    res.map_err(|e| DaemonError::Serve(e.to_string()))
}

/// Reloads roles and TLS material on each SIGHUP ([`crate::reload`]),
/// saying on stderr and in the audit log what was read or why nothing
/// was.
fn spawn_reload_on_sighup(d: Arc<Daemon>) {
    let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        eprintln!("nfkitd: SIGHUP cannot be caught here: reload with `nfkit daemon reload`");
        return;
    };
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let res = d.live.reload(&d.cfg);
            match &res {
                Ok(r) => eprintln!("nfkitd: SIGHUP: reloaded {}", r.describe()),
                Err(e) => eprintln!(
                    "nfkitd: SIGHUP: reload refused, the previous roles and TLS stay in force: {e}"
                ),
            }
            d.audit_reload(None, "SIGHUP", &res);
        }
    });
}

/// Runs the daemon on a runtime of its own until it stops, telling on
/// stderr what it adopted and where it serves (`nfkitd`, `nfkit daemon run`).
pub fn run(cfg: Config) -> Result<(), DaemonError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| DaemonError::Serve(format!("starting the runtime: {e}")))?;
    let socket = cfg.socket.clone();
    rt.block_on(serve(cfg, |adopted, tcp| {
        for n in adopted {
            eprintln!(
                "nfkitd: {} {}: {}: {}",
                n.dev, n.attach, n.outcome, n.detail
            );
        }
        eprintln!("nfkitd: serving on {}", socket.display());
        if let Some(a) = tcp {
            eprintln!("nfkitd: serving on tcp:{a} (mutual TLS)");
        }
    }))?;
    eprintln!("nfkitd: stopped");
    Ok(())
}

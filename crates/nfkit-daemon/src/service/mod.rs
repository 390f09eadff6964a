//! The gRPC services, one module per resource, on one shared [`Daemon`]:
//! every handler starts with [`Daemon::begin`] (who, which role, request
//! size) and ends with [`Call::done`] (the audit record).

pub mod chain;
pub mod daemon;
pub mod deployment;
pub mod map;
pub mod nf;
pub mod stats;
pub mod switch;

use crate::audit::{now_ms, AuditLog, Record};
use crate::auth::{identify, Identity, Rpc};
use crate::chains::Store;
use crate::config::Config;
use crate::records::{Adopted, Records};
use std::time::Instant;
use tonic::{Code, Request, Response, Status};

/// What every service shares.
pub struct Daemon {
    pub cfg: Config,
    pub audit: AuditLog,
    pub chains: Store,
    /// The daemon's records; held across a whole deploy or undeploy, so
    /// changes to deployments happen one at a time.
    pub records: tokio::sync::Mutex<Records>,
    /// The switches the daemon started ([`crate::switches`]); held
    /// across a whole switch deploy, redeploy or undeploy.
    pub switches: tokio::sync::Mutex<crate::switches::SwitchRecords>,
    /// What the start found ([`crate::records::adopt`]).
    pub adopted: Vec<Adopted>,
    pub started: Instant,
    /// Set to stop serving.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
    /// Maps opened by earlier requests.
    pub maps: std::sync::Arc<crate::map_cache::MapCache>,
    /// Counter snapshots shared by every stats stream.
    pub stats: crate::stats_hub::StatsHub,
    /// The roles and TLS material in force (a reload replaces them).
    pub live: crate::reload::Live,
}

/// One request being served.
pub struct Call<'a> {
    d: &'a Daemon,
    rpc: Rpc,
    pub who: Identity,
}

impl Daemon {
    /// Identifies the caller, checks its role and the request's size;
    /// a refusal is audited and returned.
    pub fn begin<T: prost::Message>(&self, req: &Request<T>, rpc: Rpc) -> Result<Call<'_>, Status> {
        if let Some(r) = req.extensions().get::<crate::gate::Reached>() {
            r.mark();
        }
        let who = identify(req, &self.live.roles());
        let refuse = |st: Status| {
            self.record(rpc, who.as_ref(), "", "", &Err::<(), _>(st.clone()));
            st
        };
        let Some(id) = who.clone() else {
            return Err(refuse(Status::unauthenticated(
                "no peer credentials: nfkitd serves clients on its Unix socket or over mutual TLS",
            )));
        };
        if let Some(why) = id.unauthenticated() {
            return Err(refuse(Status::unauthenticated(why)));
        }
        let Some(role) = id.role else {
            let who = match &id.peer {
                crate::auth::Peer::Unix { uid, gid, .. } => format!("uid {uid} gid {gid}"),
                crate::auth::Peer::Tls { .. } => id.name(),
            };
            return Err(refuse(Status::permission_denied(format!(
                "{who} has no role in nfkitd's config (roles: admin, deploy, read_only)"
            ))));
        };
        if role < rpc.needs {
            return Err(refuse(Status::permission_denied(format!(
                "{} needs role {}; {} has role {}",
                rpc.name,
                rpc.needs.name(),
                id.name(),
                role.name()
            ))));
        }
        let size = req.get_ref().encoded_len();
        if size > self.cfg.max_request_bytes {
            return Err(refuse(Status::invalid_argument(format!(
                "request of {size} bytes: nfkitd takes at most {} (max_request_bytes)",
                self.cfg.max_request_bytes
            ))));
        }
        Ok(Call {
            d: self,
            rpc,
            who: id,
        })
    }

    /// Audits a result when the RPC changes something or was refused.
    fn record<R>(
        &self,
        rpc: Rpc,
        who: Option<&Identity>,
        target: &str,
        digest: &str,
        res: &Result<R, Status>,
    ) {
        let (result, code, message) = match res {
            Ok(_) => ("ok", Code::Ok, ""),
            Err(s) if refused(s.code()) => ("refused", s.code(), s.message()),
            Err(s) => ("failed", s.code(), s.message()),
        };
        self.metrics.request(rpc.name, code_name(code));
        if !rpc.changes && result != "refused" {
            return;
        }
        self.audit.write(&Record {
            ts_ms: now_ms(),
            who: who.cloned(),
            rpc: rpc.name,
            target,
            digest,
            result,
            code: code_name(code),
            message,
        });
    }
}

impl Daemon {
    /// Audits a reload (`by`: the Reload RPC's caller; `None`: SIGHUP).
    pub fn audit_reload(
        &self,
        by: Option<&Identity>,
        via: &str,
        res: &Result<crate::reload::Reloaded, crate::error::DaemonError>,
    ) {
        let (result, code, message) = match res {
            Ok(r) => ("ok", Code::Ok, r.describe()),
            Err(e) => (
                "failed",
                Code::FailedPrecondition,
                format!("reload refused, the previous roles and TLS stay in force: {e}"),
            ),
        };
        self.metrics
            .request(crate::auth::rpc::RELOAD.name, code_name(code));
        self.audit.write(&Record {
            ts_ms: now_ms(),
            who: by.cloned(),
            rpc: crate::auth::rpc::RELOAD.name,
            target: via,
            digest: "",
            result,
            code: code_name(code),
            message: &message,
        });
    }
}

impl Call<'_> {
    /// The reply, audited.
    pub fn done<R>(
        &self,
        target: &str,
        digest: &str,
        res: Result<R, Status>,
    ) -> Result<Response<R>, Status> {
        self.d
            .record(self.rpc, Some(&self.who), target, digest, &res);
        res.map(Response::new)
    }

    /// `uid 0 (admin)`, `certificate ci (deploy)`.
    pub fn by(&self) -> String {
        format!(
            "{} ({})",
            self.who.name(),
            self.who.role.map_or("no role", |r| r.name())
        )
    }
}

/// Codes that mean the request was refused rather than failed.
pub fn refused(c: Code) -> bool {
    matches!(
        c,
        Code::InvalidArgument | Code::PermissionDenied | Code::Unauthenticated
    )
}

/// `PERMISSION_DENIED`, as gRPC names the codes.
pub fn code_name(c: Code) -> &'static str {
    match c {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Runs `f` on a thread of the blocking pool (map reads, status).
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("the operation's thread failed: {e}")))
}

/// Runs `f` on a thread of its own, which ends with it: deploys may
/// enter a network namespace, which a thread cannot leave.
pub async fn own_thread<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Status> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("nfkitd-deploy".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| Status::internal(format!("starting a thread: {e}")))?;
    rx.await
        .map_err(|_| Status::internal("the operation's thread failed"))
}

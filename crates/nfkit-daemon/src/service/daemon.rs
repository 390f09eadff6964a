//! DaemonService: who the daemon is and what it found; stopping it;
//! reloading its roles and TLS material.

use super::Daemon;
use crate::auth::rpc;
use crate::proto;
use crate::proto::daemon_service_server::DaemonService;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service.
pub struct DaemonInfo(pub Arc<Daemon>);

#[tonic::async_trait]
impl DaemonService for DaemonInfo {
    async fn get_info(
        &self,
        req: Request<proto::GetInfoRequest>,
    ) -> Result<Response<proto::DaemonInfo>, Status> {
        let call = self.0.begin(&req, rpc::GET_INFO)?;
        let d = &self.0;
        let w = &call.who;
        let (uid, gid, pid, address, names) = match &w.peer {
            crate::auth::Peer::Unix { uid, gid, pid } => (*uid, *gid, *pid, String::new(), vec![]),
            crate::auth::Peer::Tls { addr, names, .. } => {
                (0, 0, 0, addr.to_string(), names.clone())
            }
        };
        let info = proto::DaemonInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_s: d.started.elapsed().as_secs(),
            caller: Some(proto::Identity {
                uid,
                gid,
                pid,
                role: w.role.map_or("", |r| r.name()).to_string(),
                address,
                names,
            }),
            socket: d.cfg.socket.display().to_string(),
            adopted: d
                .adopted
                .iter()
                .map(|a| proto::Adopted {
                    dev: a.dev.clone(),
                    attach: a.attach.clone(),
                    outcome: a.outcome.clone(),
                    detail: a.detail.clone(),
                })
                .collect(),
        };
        call.done("", "", Ok(info))
    }

    async fn shutdown(
        &self,
        req: Request<proto::ShutdownRequest>,
    ) -> Result<Response<proto::ShutdownResponse>, Status> {
        let call = self.0.begin(&req, rpc::SHUTDOWN)?;
        let tx = self.0.shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let _ = tx.send(true);
        });
        call.done("nfkitd", "", Ok(proto::ShutdownResponse {}))
    }

    async fn reload(
        &self,
        req: Request<proto::ReloadRequest>,
    ) -> Result<Response<proto::ReloadResponse>, Status> {
        let call = self.0.begin(&req, rpc::RELOAD)?;
        let d = self.0.clone();
        let res = super::blocking(move || d.live.reload(&d.cfg)).await?;
        // Audited here (not by `done`): the message says what was read.
        self.0.audit_reload(Some(&call.who), "rpc", &res);
        match res {
            Ok(r) => Ok(Response::new(proto::ReloadResponse {
                config: r.config.display().to_string(),
                tls_files: r
                    .tls_files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect(),
                revoked: u32::try_from(r.revoked).unwrap_or(u32::MAX),
            })),
            Err(e) => Err(Status::failed_precondition(format!(
                "reload refused, the previous roles and TLS stay in force: {e}"
            ))),
        }
    }
}

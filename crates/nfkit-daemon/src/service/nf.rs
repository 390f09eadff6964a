//! NfService: the NF catalogue (built in, and the NF path of the config).

use super::{blocking, Daemon};
use crate::auth::rpc;
use crate::proto;
use crate::proto::nf_service_server::NfService;
use nfkit_nf::{NfDoc, NfKind, SearchPath};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service.
pub struct Nfs(pub Arc<Daemon>);

/// An NF's catalogue entry.
pub fn nf(d: &NfDoc) -> proto::Nf {
    proto::Nf {
        module: d.module.clone(),
        name: d.name.clone(),
        symbol: d.symbol.clone(),
        kind: match d.kind {
            NfKind::Nf => "nf",
            NfKind::Classifier => "classifier",
        }
        .to_string(),
        hooks: d.hooks.iter().map(|h| h.name().to_string()).collect(),
        args: d
            .args
            .iter()
            .map(|a| proto::NfArg {
                name: a.name.clone(),
                doc: a.doc.clone(),
            })
            .collect(),
        returns: d.returns.clone(),
        maps: d.maps.clone(),
        origin: d.origin.clone(),
        doc: d.doc.clone(),
        json: serde_json::to_string(d).unwrap_or_default(),
    }
}

#[tonic::async_trait]
impl NfService for Nfs {
    async fn list_nfs(
        &self,
        req: Request<proto::ListNfsRequest>,
    ) -> Result<Response<proto::ListNfsResponse>, Status> {
        let call = self.0.begin(&req, rpc::LIST_NFS)?;
        let path = SearchPath::from_env(&self.0.cfg.nf_path);
        let res = blocking(move || path.list_all(true))
            .await
            .and_then(|r| r.map_err(|e| Status::failed_precondition(e.to_string())))
            .map(|all| proto::ListNfsResponse {
                nfs: all.iter().map(nf).collect(),
                text: crate::nf_text::list(&all),
                json: serde_json::to_string_pretty(&all).unwrap_or_default(),
            });
        call.done("", "", res)
    }

    async fn show_nf(
        &self,
        req: Request<proto::ShowNfRequest>,
    ) -> Result<Response<proto::ShowNfResponse>, Status> {
        let call = self.0.begin(&req, rpc::SHOW_NF)?;
        let r = req.into_inner();
        let path = SearchPath::from_env(&self.0.cfg.nf_path);
        let res = async {
            let name = crate::validate::label("name", &r.name)?;
            let hook = crate::validate::label("hook", &r.hook)?;
            let hook = (!hook.is_empty()).then_some(hook);
            blocking(move || {
                crate::nf_text::show(&path, &name, hook.as_deref())
                    .map(|(d, text)| proto::ShowNfResponse {
                        nf: Some(nf(&d)),
                        text,
                    })
                    .map_err(|e| Status::not_found(format!("{e:#}")))
            })
            .await?
        }
        .await;
        call.done("", "", res)
    }

    async fn register_nf(
        &self,
        req: Request<proto::RegisterNfRequest>,
    ) -> Result<Response<proto::RegisterNfResponse>, Status> {
        let call = self.0.begin(&req, rpc::REGISTER_NF)?;
        let r = req.into_inner();
        let mut target = format!("nf {}", r.module);
        let digest = crate::files::digest(&r.object);
        let dir = self.0.nf_dir();
        let res = async {
            let file = crate::validate::label("file", &r.file)?;
            let file = if file.is_empty() {
                format!("{}.o", r.module)
            } else {
                file
            };
            let hook = match crate::validate::label("hook", &r.hook)?.as_str() {
                "" => None,
                h => Some(
                    h.parse::<nfkit_nf::Hook>()
                        .map_err(|e| Status::invalid_argument(format!("hook: {e}")))?,
                ),
            };
            if let Some(h) = hook {
                target = format!("nf {} {}", r.module, h.name());
            }
            crate::nf_store::module_name(&r.module)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let source = (!r.source.is_empty()).then_some(r.source);
            if let Some(s) = &source {
                crate::validate::source(s)?;
            }
            let module = r.module;
            let object = r.object;
            let added = blocking(move || {
                crate::nf_store::add(&dir, &module, hook, &object, source.as_deref(), &file)
            })
            .await?
            .map_err(|e| match e {
                crate::nf_store::AddError::Io(m) => Status::internal(m),
                e => Status::invalid_argument(e.to_string()),
            })?;
            let path = added.path.display().to_string();
            let names: Vec<String> = added.nfs.iter().map(|d| d.name.clone()).collect();
            Ok(proto::RegisterNfResponse {
                nfs: added.nfs.iter().map(nf).collect(),
                text: crate::nf_store::Added::text(&added.module, &path, added.unchanged, &names),
                path,
                digest: added.digest,
                unchanged: added.unchanged,
            })
        }
        .await;
        call.done(&target, &digest, res)
    }
}

impl Daemon {
    /// Where RegisterNf keeps objects: first on the daemon's NF path.
    pub fn nf_dir(&self) -> std::path::PathBuf {
        nf_dir(&self.cfg)
    }
}

/// `<data_dir>/nf`.
pub fn nf_dir(cfg: &crate::config::Config) -> std::path::PathBuf {
    cfg.data_dir.join("nf")
}

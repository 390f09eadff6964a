//! ChainService: register scripts as versions with digests, list and
//! get them, check scripts (compile, diagnostics; nothing changes).

use super::{blocking, Daemon};
use crate::auth::rpc;
use crate::chains::Version;
use crate::convert::diagnostics;
use crate::proto::chain_service_server::ChainService;
use crate::proto::{self, CheckResult};
use crate::validate;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service.
pub struct Chains(pub Arc<Daemon>);

fn version(v: Version) -> proto::ChainVersion {
    proto::ChainVersion {
        name: v.name,
        version: v.version,
        digest: v.digest,
        registered_at: v.registered_at,
        size: v.size,
        registered_by: v.registered_by,
    }
}

impl Daemon {
    /// Compiles `source` (named `file`) for `hook` and says what came out.
    pub async fn check(
        &self,
        file: String,
        source: String,
        hook: Option<nfkit_abi::Hook>,
    ) -> Result<CheckResult, Status> {
        let search = nfkit_nf::SearchPath::from_env(&self.cfg.nf_path);
        let digest = crate::files::digest(source.as_bytes());
        blocking(
            move || match nfkit_control::deploy::compile(&file, &source, &search, hook) {
                Ok(c) => CheckResult {
                    ok: true,
                    diagnostics: diagnostics(&c.warnings),
                    rendered: nfkit_lang::diag::render(&c.warnings),
                    digest,
                    hook: c.hook.name().to_string(),
                    chains: c.program.chain_names(),
                    maps: c.program.maps.iter().map(|m| m.name.clone()).collect(),
                },
                Err(nfkit_control::ControlError::Script(d)) => CheckResult {
                    ok: false,
                    diagnostics: diagnostics(std::slice::from_ref(&*d)),
                    rendered: d.to_string(),
                    digest,
                    ..Default::default()
                },
                Err(e) => CheckResult {
                    ok: false,
                    rendered: format!("error: {e}\n"),
                    digest,
                    ..Default::default()
                },
            },
        )
        .await
    }
}

#[tonic::async_trait]
impl ChainService for Chains {
    async fn register_chain(
        &self,
        req: Request<proto::RegisterChainRequest>,
    ) -> Result<Response<proto::RegisterChainResponse>, Status> {
        let call = self.0.begin(&req, rpc::REGISTER_CHAIN)?;
        let r = req.into_inner();
        let mut target = String::new();
        let digest = crate::files::digest(r.source.as_bytes());
        let res = async {
            let name = validate::chain_name(&r.name)?;
            validate::source(&r.source)?;
            target = format!("chain {name}");
            let check = self.0.check(name.clone(), r.source.clone(), None).await?;
            if !check.ok {
                let mut s = Status::invalid_argument(check.rendered.clone());
                s.metadata_mut().insert(
                    crate::convert::SCRIPT_ERROR,
                    tonic::metadata::MetadataValue::from_static("1"),
                );
                return Err(s);
            }
            let _guard = self.0.records.lock().await;
            let (v, unchanged) = self
                .0
                .chains
                .register(&name, &r.source, &call.by())
                .map_err(|e| Status::internal(e.to_string()))?;
            target = format!("chain {name}@v{}", v.version);
            Ok(proto::RegisterChainResponse {
                version: Some(version(v)),
                unchanged,
                check: Some(check),
            })
        }
        .await;
        call.done(&target, &digest, res)
    }

    async fn list_chains(
        &self,
        req: Request<proto::ListChainsRequest>,
    ) -> Result<Response<proto::ListChainsResponse>, Status> {
        let call = self.0.begin(&req, rpc::LIST_CHAINS)?;
        let r = req.into_inner();
        let res = (|| {
            let name = match r.name.as_str() {
                "" => None,
                n => Some(validate::chain_name(n)?),
            };
            let vs = self
                .0
                .chains
                .list(name.as_deref())
                .map_err(|e| Status::internal(e.to_string()))?;
            Ok(proto::ListChainsResponse {
                versions: vs.into_iter().map(version).collect(),
            })
        })();
        call.done("", "", res)
    }

    async fn get_chain(
        &self,
        req: Request<proto::GetChainRequest>,
    ) -> Result<Response<proto::GetChainResponse>, Status> {
        let call = self.0.begin(&req, rpc::GET_CHAIN)?;
        let r = req.into_inner();
        let res = (|| {
            let c = r
                .chain
                .ok_or_else(|| Status::invalid_argument("chain: a chain reference is needed"))?;
            let name = validate::chain_name(&c.name)?;
            let (v, source) = self
                .0
                .chains
                .get(&name, c.version)
                .map_err(|e| Status::internal(e.to_string()))?
                .ok_or_else(|| {
                    Status::not_found(format!("no chain `{name}` version {}", c.version))
                })?;
            Ok(proto::GetChainResponse {
                version: Some(version(v)),
                source,
            })
        })();
        call.done("", "", res)
    }

    async fn check_chain(
        &self,
        req: Request<proto::CheckChainRequest>,
    ) -> Result<Response<CheckResult>, Status> {
        let call = self.0.begin(&req, rpc::CHECK_CHAIN)?;
        let r = req.into_inner();
        let res = async {
            let hook = validate::attach("attach", r.attach)?.map(nfkit_abi::AttachPoint::hook);
            let s = self.0.script(r.script)?;
            self.0.check(s.file, s.source, hook).await
        }
        .await;
        call.done("", "", res)
    }
}

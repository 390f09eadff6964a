//! DeploymentService: deploy, redeploy, undeploy and list, through
//! nfkit-control, one change at a time, each recorded before and after.

use super::{blocking, own_thread, Call, Daemon};
use crate::auth::rpc;
use crate::convert::{self, control_error, kernel_error};
use crate::proto::deployment_service_server::DeploymentService;
use crate::proto::{self, script_source::Kind};
use crate::records::{Intent, Record, Records};
use crate::validate;
use nfkit_abi::AttachPoint;
use nfkit_control::deploy::{deploy_script, DeploySpec, Mode};
use nfkit_control::deploy_object as deploy_object_with;
use nfkit_kernel::deploy::{self as kdeploy, Deployment};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service.
pub struct Deployments(pub Arc<Daemon>);

/// A script to deploy, resolved.
pub struct Script {
    pub file: String,
    pub source: String,
    pub source_path: String,
    pub chain: String,
    pub chain_version: u32,
    pub digest: String,
    /// An eBPF object instead of a script: its bytes, entry, type.
    pub object: Option<(Vec<u8>, String, Option<String>)>,
}

impl Daemon {
    /// The script a request names: a registered chain or inline text.
    pub fn script(&self, s: Option<proto::ScriptSource>) -> Result<Script, Status> {
        match s.and_then(|s| s.kind) {
            None => Err(Status::invalid_argument(
                "script: give a registered chain (name, version) or an inline script",
            )),
            Some(Kind::Chain(c)) => {
                let name = validate::chain_name(&c.name)?;
                let (v, source) = self
                    .chains
                    .get(&name, c.version)
                    .map_err(|e| Status::internal(e.to_string()))?
                    .ok_or_else(|| {
                        Status::not_found(match c.version {
                            0 => format!("no chain `{name}` is registered"),
                            n => format!("chain `{name}` has no version {n}"),
                        })
                    })?;
                let file = format!("{name}@v{}", v.version);
                Ok(Script {
                    source_path: format!("chain:{file}"),
                    file,
                    source,
                    chain: name,
                    chain_version: v.version,
                    digest: v.digest,
                    object: None,
                })
            }
            Some(Kind::Inline(i)) => {
                validate::source(&i.source)?;
                let file = validate::label("script.inline.file", &i.file)?;
                let file = if file.is_empty() {
                    "inline".to_string()
                } else {
                    file
                };
                let path = validate::label("script.inline.source_path", &i.source_path)?;
                Ok(Script {
                    source_path: if path.is_empty() { file.clone() } else { path },
                    digest: crate::files::digest(i.source.as_bytes()),
                    file,
                    source: i.source,
                    chain: String::new(),
                    chain_version: 0,
                    object: None,
                })
            }
            Some(Kind::Object(o)) => {
                if !o.elf.starts_with(b"\x7fELF") {
                    return Err(Status::invalid_argument(
                        "script.object.elf: not an ELF object",
                    ));
                }
                let file = validate::label("script.object.file", &o.file)?;
                let file = if file.is_empty() {
                    "object.o".to_string()
                } else {
                    file
                };
                let entry = validate::label("script.object.entry", &o.entry)?;
                let prog_type = match o.prog_type.as_str() {
                    "" => None,
                    t @ ("xdp" | "tc" | "socket") => Some(t.to_string()),
                    t => {
                        return Err(Status::invalid_argument(format!(
                            "script.object.prog_type: {t:?} is not xdp, tc or socket"
                        )))
                    }
                };
                let path = validate::label("script.object.source_path", &o.source_path)?;
                Ok(Script {
                    source_path: if path.is_empty() { file.clone() } else { path },
                    digest: crate::files::digest(&o.elf),
                    file,
                    source: String::new(),
                    chain: String::new(),
                    chain_version: 0,
                    object: Some((o.elf, entry, prog_type)),
                })
            }
        }
    }

    /// Deploys `intent` (on a thread of its own) and returns what the
    /// deployer said.
    pub fn run_intent(
        paths: &kdeploy::Paths,
        nf_path: &[String],
        i: &Intent,
    ) -> Result<nfkit_control::Deployed, nfkit_control::ControlError> {
        let attach = i
            .attach
            .as_deref()
            .and_then(|a| a.parse::<AttachPoint>().ok());
        if let Some(o) = &i.object {
            return deploy_object(paths, i, o, attach);
        }
        let spec = DeploySpec {
            file: &i.file,
            source: &i.source,
            source_path: &i.source_path,
            dev: i.dev.as_deref(),
            netns: i.netns.as_deref(),
            attach,
            mode: if i.mode == "dynamic" {
                Mode::Dynamic
            } else {
                Mode::Static
            },
            search: nfkit_nf::SearchPath::from_env(nf_path),
            post_devs: &i.post_devs,
        };
        deploy_script(paths, &spec)
    }

    /// Removes the object an intent kept, once it is deployed or not.
    fn drop_object(i: &Intent) {
        if let Some(o) = &i.object {
            let _ = std::fs::remove_file(&o.path);
        }
    }

    async fn deploy(
        &self,
        r: proto::DeployRequest,
        must_exist: bool,
        target: &mut String,
        digest: &mut String,
    ) -> Result<proto::DeployResponse, Status> {
        let dev = validate::dev(&r.dev, !must_exist)?;
        let netns = validate::netns(&r.netns)?;
        let attach = validate::attach("attach", r.attach)?;
        let mode = validate::mode(r.mode)?;
        let post_devs = validate::post_devs(&r.post_devs)?;
        let script = self.script(r.script)?;
        if script.object.is_some() && !post_devs.is_empty() {
            return Err(Status::invalid_argument(
                "post_devs: only a script's pipeline has a post stage, not an eBPF object",
            ));
        }
        *target = format!(
            "{} {}",
            dev.as_deref().unwrap_or("(script's attach)"),
            attach.map_or("(script's hook)", |a| a.name())
        );
        digest.clone_from(&script.digest);
        let mut records = self.records.lock().await;
        let paths = self.cfg.paths.clone();
        let st = blocking(move || kdeploy::status(&paths))
            .await?
            .map_err(kernel_error)?;
        if must_exist {
            let there = st.iter().any(|s| {
                Some(&s.deployment.dev) == dev.as_ref()
                    && attach.is_none_or(|a| a == s.deployment.hook)
            });
            if !there {
                return Err(Status::failed_precondition(format!(
                    "nothing deployed on {target} to redeploy over (Deploy deploys anew)"
                )));
            }
        }
        let intent = Intent {
            file: script.file,
            source: script.source,
            source_path: script.source_path,
            dev,
            netns,
            attach: attach.map(|a| a.name().to_string()),
            mode: mode.name().to_string(),
            chain: script.chain,
            chain_version: script.chain_version,
            digest: script.digest.clone(),
            object: None,
            post_devs,
            before: st
                .iter()
                .map(|s| {
                    let d = &s.deployment;
                    (d.dev.clone(), d.hook.name().to_string(), d.generation)
                })
                .collect(),
        };
        let run_dir = self.cfg.run_dir.clone();
        let mut intent = intent;
        if let Some((elf, entry, prog_type)) = script.object {
            // The object is kept where a restart finds it (see records).
            let path = run_dir
                .join("objects")
                .join(format!("{}.o", intent.digest.trim_start_matches("sha256:")));
            crate::files::write_atomic(&path, &elf).map_err(|e| Status::internal(e.to_string()))?;
            intent.object = Some(crate::records::ObjectIntent {
                path,
                entry,
                prog_type,
            });
        }
        records.pending = Some(intent.clone());
        save(&records, &run_dir)?;
        let (paths, nf_path) = (self.cfg.paths.clone(), self.cfg.nf_path.clone());
        let i2 = intent.clone();
        let res = own_thread(move || Daemon::run_intent(&paths, &nf_path, &i2)).await;
        records.pending = None;
        Daemon::drop_object(&intent);
        let done = match res {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                save(&records, &run_dir)?;
                return Err(control_error(e));
            }
            Err(e) => {
                save(&records, &run_dir)?;
                return Err(e);
            }
        };
        self.metrics.deployed(&done.outcome);
        let d = &done.outcome.deployment;
        *target = format!("{} {}", d.dev, d.hook.name());
        let rec = Record {
            dev: d.dev.clone(),
            attach: d.hook.name().to_string(),
            chain: intent.chain.clone(),
            chain_version: intent.chain_version,
            digest: intent.digest.clone(),
            generation: d.generation,
            prog_id: d.prog_id,
        };
        records.put(rec.clone());
        save(&records, &run_dir)?;
        let o = &done.outcome;
        Ok(proto::DeployResponse {
            deployment: Some(convert::deployment(d, true, Some(&rec))),
            swapped: o.swapped,
            reused_maps: o.reused_maps.clone(),
            load_us: o.load_time.as_micros() as u64,
            switch_us: o.switch_time.as_micros() as u64,
            warnings: convert::diagnostics(&done.warnings),
            warnings_rendered: nfkit_lang::diag::render(&done.warnings),
            notes: done.notes.clone(),
            posts: done
                .posts
                .iter()
                .map(|p| convert::deployment(&p.deployment, true, None))
                .collect(),
        })
    }

    async fn undeploy(
        &self,
        r: proto::UndeployRequest,
        target: &mut String,
    ) -> Result<proto::UndeployResponse, Status> {
        let dev = validate::dev(&r.dev, true)?;
        *target = dev.clone().unwrap_or_else(|| "(everything)".into());
        let mut records = self.records.lock().await;
        let paths = self.cfg.paths.clone();
        let d2 = dev.clone();
        let gone: Vec<Deployment> =
            own_thread(move || nfkit_control::status::undeploy(&paths, d2.as_deref()))
                .await?
                .map_err(control_error)?;
        let removed = gone
            .iter()
            .map(|d| convert::deployment(d, false, records.find(&d.dev, d.hook.name())))
            .collect();
        records.deployments.retain(|r| {
            !gone
                .iter()
                .any(|d| d.dev == r.dev && d.hook.name() == r.attach)
        });
        save(&records, &self.cfg.run_dir)?;
        Ok(proto::UndeployResponse { removed })
    }

    /// Every deployment with counters and the daemon's records.
    pub async fn list(&self) -> Result<Vec<proto::Deployment>, Status> {
        let paths = self.cfg.paths.clone();
        let st = blocking(move || {
            let mut st = nfkit_control::status::status(&paths)?;
            fold_offloaded(&paths, &mut st);
            Ok(st)
        })
        .await?
        .map_err(control_error)?;
        let records = self.records.lock().await.clone();
        Ok(st
            .iter()
            .map(|s| {
                let d = &s.status.deployment;
                convert::deployment_status(s, records.find(&d.dev, d.hook.name()))
            })
            .collect())
    }
}

/// Adds to each deployment's counters what its offloaded flower rules
/// decided (`nfkit offload`'s rule packets folded into the verdict
/// counters the program would have counted them in). A failure to read
/// them leaves the counters as they are (logged).
fn fold_offloaded(
    paths: &nfkit_kernel::deploy::Paths,
    st: &mut [nfkit_control::status::DeploymentStatus],
) {
    let file = nfkit_offload::record::state_file_beside(&paths.state_file);
    for ds in st.iter_mut() {
        let d = &ds.status.deployment;
        let add = nfkit_kernel::netns::in_netns(d.netns.as_deref(), || {
            Ok(nfkit_offload::fold::installed_verdict_additions(
                &file,
                &d.dev,
                d.netns.as_deref(),
            ))
        });
        let add = match add {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                eprintln!("nfkitd: {}: offloaded rules' counts not read: {e}", d.dev);
                continue;
            }
            Err(e) => {
                eprintln!("nfkitd: {}: offloaded rules' counts not read: {e}", d.dev);
                continue;
            }
        };
        for (chain, column, packets) in nfkit_offload::fold::by_chain(&add, &d.chains) {
            let pos = match ds.verdicts.iter().position(|c| c.chain == chain) {
                Some(p) => p,
                None => {
                    ds.verdicts.push(nfkit_kernel::stats::ChainCounters {
                        chain,
                        counts: Default::default(),
                    });
                    ds.verdicts.len() - 1
                }
            };
            let n = ds.verdicts[pos].counts.entry(column).or_default();
            *n = n.wrapping_add(packets);
        }
    }
}

fn save(r: &Records, run_dir: &std::path::Path) -> Result<(), Status> {
    r.save(run_dir)
        .map_err(|e| Status::internal(format!("recording the deployment: {e}")))
}

impl Deployments {
    async fn deploy_as(
        &self,
        req: Request<proto::DeployRequest>,
        must_exist: bool,
    ) -> Result<Response<proto::DeployResponse>, Status> {
        let which = if must_exist {
            rpc::REDEPLOY
        } else {
            rpc::DEPLOY
        };
        let call: Call<'_> = self.0.begin(&req, which)?;
        let (mut target, mut digest) = (String::new(), String::new());
        let res = self
            .0
            .deploy(req.into_inner(), must_exist, &mut target, &mut digest)
            .await;
        call.done(&target, &digest, res)
    }
}

#[tonic::async_trait]
impl DeploymentService for Deployments {
    async fn deploy(
        &self,
        req: Request<proto::DeployRequest>,
    ) -> Result<Response<proto::DeployResponse>, Status> {
        self.deploy_as(req, false).await
    }

    async fn redeploy(
        &self,
        req: Request<proto::DeployRequest>,
    ) -> Result<Response<proto::DeployResponse>, Status> {
        self.deploy_as(req, true).await
    }

    async fn undeploy(
        &self,
        req: Request<proto::UndeployRequest>,
    ) -> Result<Response<proto::UndeployResponse>, Status> {
        let call = self.0.begin(&req, rpc::UNDEPLOY)?;
        let mut target = String::new();
        let res = self.0.undeploy(req.into_inner(), &mut target).await;
        call.done(&target, "", res)
    }

    async fn list_deployments(
        &self,
        req: Request<proto::ListDeploymentsRequest>,
    ) -> Result<Response<proto::ListDeploymentsResponse>, Status> {
        let call = self.0.begin(&req, rpc::LIST_DEPLOYMENTS)?;
        let res = async {
            Ok(proto::ListDeploymentsResponse {
                deployments: self.0.list().await?,
                switches: self.0.switch_list(None).await?,
            })
        }
        .await;
        call.done("", "", res)
    }
}

/// Deploys the eBPF object of intent `i` as it is.
fn deploy_object(
    paths: &kdeploy::Paths,
    i: &Intent,
    o: &crate::records::ObjectIntent,
    attach: Option<AttachPoint>,
) -> Result<nfkit_control::Deployed, nfkit_control::ControlError> {
    use nfkit_control::ControlError;
    use nfkit_object::ProgType;
    let kernel = |e: nfkit_kernel::KernelError| ControlError::Kernel {
        file: i.file.clone(),
        cause: Box::new(e),
    };
    let bytes = std::fs::read(&o.path).map_err(|cause| {
        kernel(nfkit_kernel::KernelError::File {
            what: "read the object kept in",
            path: o.path.clone(),
            cause,
        })
    })?;
    let ty = o.prog_type.as_deref().map(|t| match t {
        "tc" => ProgType::SchedCls,
        "socket" => ProgType::SocketFilter,
        _ => ProgType::Xdp,
    });
    let image = nfkit_object::Image::from_elf_as(&bytes, &i.file, ty).map_err(|e| {
        kernel(nfkit_kernel::KernelError::Image {
            entry: o.entry.clone(),
            msg: e.to_string(),
        })
    })?;
    let entry = if o.entry.is_empty() {
        match &image.entries[..] {
            [one] => one.name.clone(),
            _ => {
                return Err(ControlError::NoProgram {
                    file: i.file.clone(),
                    name: format!(
                        "(none named; the object has {}: name one)",
                        image.entries.len()
                    ),
                })
            }
        }
    } else {
        image
            .entries
            .iter()
            .find(|e| e.name == o.entry)
            .or_else(|| image.entries.iter().find(|e| e.section == o.entry))
            .map_or_else(|| o.entry.clone(), |e| e.name.clone())
    };
    let Some(dev) = i.dev.as_deref() else {
        return Err(ControlError::NoDevice(i.file.clone()));
    };
    deploy_object_with(
        paths,
        &nfkit_control::ObjectSpec {
            file: &i.file,
            image: &image,
            entry: &entry,
            source_path: &i.source_path,
            dev,
            netns: i.netns.as_deref(),
            attach,
        },
    )
}

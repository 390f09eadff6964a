//! SwitchService: software switches as processes of their own
//! ([`crate::switches`]): deploy starts one, redeploy is its hitless
//! reload, undeploy stops it; one change at a time, each recorded.

use super::{blocking, Call, Daemon};
use crate::auth::rpc;
use crate::proto::switch_service_server::SwitchService;
use crate::proto::{self, script_source::Kind};
use crate::switches::{self, SwitchRecord, SwitchRecords};
use crate::validate;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// The service.
pub struct Switches(pub Arc<Daemon>);

/// Most ports and host ports of one switch; most workers.
const MAX_PORTS: usize = 64;
const MAX_WORKERS: u32 = 64;

/// A switch name: what `nfkit switch` takes, in a file name.
fn name(s: &str) -> Result<String, Status> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s != "nfkitd"
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(s.to_string())
    } else {
        Err(Status::invalid_argument(format!(
            "name: {s:?} is not a switch name ([A-Za-z0-9_.-], 1 to 64 characters, not starting with `.`, not `nfkitd`)"
        )))
    }
}

/// Port specs or host ports: at most [`MAX_PORTS`] labels.
fn list(field: &str, v: &[String], needed: bool) -> Result<Vec<String>, Status> {
    if needed && v.is_empty() {
        return Err(Status::invalid_argument(format!(
            "{field}: at least one is needed"
        )));
    }
    if v.len() > MAX_PORTS {
        return Err(Status::invalid_argument(format!(
            "{field}: {} given, at most {MAX_PORTS}",
            v.len()
        )));
    }
    v.iter()
        .map(|p| {
            let p = validate::label(field, p)?;
            if p.is_empty() || p.starts_with('-') {
                return Err(Status::invalid_argument(format!(
                    "{field}: {p:?} is not a port"
                )));
            }
            Ok(p)
        })
        .collect()
}

/// A switch's update key file, checked as the switch checks it
/// (`nfkit_update::KeyRing::load`): an absolute path to a regular file
/// that group and others may not access, holding keys. A file that is
/// not a key file is refused without quoting it (it may be anyone's).
fn key_file(k: &str) -> Result<PathBuf, Status> {
    let p = PathBuf::from(k);
    if !p.is_absolute() {
        return Err(Status::invalid_argument(format!(
            "key_file: {k:?} is not an absolute path (a file on nfkitd's host)"
        )));
    }
    match nfkit_update::KeyRing::load(&p) {
        Ok(_) => Ok(p),
        Err(nfkit_update::KeyError::Syntax { .. } | nfkit_update::KeyError::Duplicate { .. }) => {
            Err(Status::invalid_argument(format!(
                "key_file: {k} is not a key file (`nfkit switch keygen FILE` makes one)"
            )))
        }
        Err(e) => Err(Status::invalid_argument(format!("key_file: {e}"))),
    }
}

fn now_s() -> u64 {
    crate::audit::now_ms() / 1000
}

impl Daemon {
    fn switch_file(&self, name: &str, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        switches::home(&self.cfg.run_dir, name).join(format!("{}.py", &hex[..hex.len().min(16)]))
    }

    /// A script to run on a switch (no eBPF objects there), written
    /// where the switch reads it.
    fn switch_script(
        &self,
        name: &str,
        s: Option<proto::ScriptSource>,
    ) -> Result<(super::deployment::Script, PathBuf), Status> {
        if matches!(
            s.as_ref().and_then(|s| s.kind.as_ref()),
            Some(Kind::Object(_))
        ) {
            return Err(Status::invalid_argument(
                "script.object: a switch runs chain scripts, not eBPF objects",
            ));
        }
        let script = self.script(s)?;
        let path = self.switch_file(name, &script.digest);
        crate::files::write_atomic(&path, script.source.as_bytes())
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok((script, path))
    }

    /// What the API says of switch `name`: its record and status.
    fn switch_view(
        dir: &Path,
        name: &str,
        rec: Option<&SwitchRecord>,
        st: Result<Value, String>,
    ) -> proto::SwitchDeployment {
        let (running, st) = match st {
            Ok(v) => (true, v),
            Err(_) => (false, Value::Null),
        };
        let r = rec.cloned().unwrap_or_default();
        proto::SwitchDeployment {
            name: name.to_string(),
            pid: st["pid"].as_u64().map_or(r.pid, |p| p as u32),
            ports: if r.ports.is_empty() {
                st["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["spec"].as_str().map(str::to_string))
                    .collect()
            } else {
                r.ports
            },
            netns: r.netns,
            source: if r.source.is_empty() {
                st["script"].as_str().unwrap_or_default().to_string()
            } else {
                r.source
            },
            chain: r.chain,
            chain_version: r.chain_version,
            digest: r.digest,
            version: st["version"].as_u64().unwrap_or(r.version),
            running,
            managed: rec.is_some(),
            verdicts: switches::counters(&st),
            status_json: if running {
                st.to_string()
            } else {
                String::new()
            },
            socket: switches::socket(dir, name).display().to_string(),
            deployed_at: r.deployed_at,
        }
    }

    /// Every switch: the recorded ones and those answering in the
    /// switch directory (only `only` when given).
    pub async fn switch_list(
        &self,
        only: Option<String>,
    ) -> Result<Vec<proto::SwitchDeployment>, Status> {
        let recs = self.switches.lock().await.clone();
        let dir = self.cfg.switch_dir.clone();
        blocking(move || {
            let mut names = switches::names(&dir);
            names.extend(recs.switches.iter().map(|r| r.name.clone()));
            names.sort();
            names.dedup();
            names
                .into_iter()
                .filter(|n| only.as_ref().is_none_or(|o| o == n))
                .map(|n| {
                    let st = switches::status(&dir, &n);
                    Daemon::switch_view(&dir, &n, recs.find(&n), st)
                })
                .collect()
        })
        .await
    }

    async fn deploy_switch(
        &self,
        r: proto::DeploySwitchRequest,
        target: &mut String,
        digest: &mut String,
    ) -> Result<proto::DeploySwitchResponse, Status> {
        let name = name(&r.name)?;
        *target = format!("switch {name}");
        let ports = list("ports", &r.ports, true)?;
        let host = list("host", &r.host, false)?;
        let netns = validate::netns(&r.netns)?.unwrap_or_default();
        if r.workers > MAX_WORKERS {
            return Err(Status::invalid_argument(format!(
                "workers: {}, at most {MAX_WORKERS}",
                r.workers
            )));
        }
        let engine = match r.engine.as_str() {
            e @ ("" | "jit" | "interp") => e.to_string(),
            e => {
                return Err(Status::invalid_argument(format!(
                    "engine: {e:?} is not jit or interp"
                )))
            }
        };
        let key = match r.key_file.as_str() {
            "" => None,
            k => Some(key_file(k)?),
        };
        let mut recs = self.switches.lock().await;
        let dir = self.cfg.switch_dir.clone();
        if switches::answers(&switches::socket(&dir, &name)) {
            return Err(Status::already_exists(format!(
                "switch {name} is running already (RedeploySwitch swaps its chain)"
            )));
        }
        let (script, path) = self.switch_script(&name, r.script)?;
        digest.clone_from(&script.digest);
        let mut rec = SwitchRecord {
            name: name.clone(),
            pid: 0,
            ports,
            netns,
            workers: r.workers.max(1),
            engine,
            host,
            no_pin: r.no_pin,
            key,
            source: script.source_path.clone(),
            script: path,
            chain: script.chain.clone(),
            chain_version: script.chain_version,
            digest: script.digest.clone(),
            version: 1,
            deployed_at: now_s(),
        };
        let (program, run_dir, nf_path) = (
            self.cfg.nfkit.clone(),
            self.cfg.run_dir.clone(),
            self.cfg.nf_path.clone(),
        );
        let r2 = rec.clone();
        let d2 = dir.clone();
        let started = blocking(move || {
            let log = switches::home(&run_dir, &r2.name).join("switch.log");
            let res = switches::start(
                &r2,
                &switches::Start {
                    program: &program,
                    switch_dir: &d2,
                    log: &log,
                    nf_path: &nf_path,
                },
            );
            if res.is_err() {
                let _ = std::fs::remove_dir_all(switches::home(&run_dir, &r2.name));
            }
            res
        })
        .await?;
        let (pid, took) = started.map_err(Status::failed_precondition)?;
        rec.pid = pid;
        self.metrics.switch_deployed(took, None);
        recs.put(rec.clone());
        save(&recs, &self.cfg.run_dir)?;
        let n2 = name.clone();
        let st = blocking(move || switches::status(&dir, &n2)).await?;
        Ok(proto::DeploySwitchResponse {
            deployment: Some(Daemon::switch_view(
                &self.cfg.switch_dir,
                &name,
                Some(&rec),
                st,
            )),
            start_us: took.as_micros() as u64,
        })
    }

    async fn redeploy_switch(
        &self,
        r: proto::RedeploySwitchRequest,
        target: &mut String,
        digest: &mut String,
    ) -> Result<proto::RedeploySwitchResponse, Status> {
        let name = name(&r.name)?;
        *target = format!("switch {name}");
        let mut recs = self.switches.lock().await;
        let dir = self.cfg.switch_dir.clone();
        let sock = switches::socket(&dir, &name);
        if !switches::answers(&sock) {
            return Err(Status::not_found(format!(
                "switch {name}: cannot reach its control socket {}; is it running?",
                sock.display()
            )));
        }
        let (script, path) = self.switch_script(&name, r.script)?;
        digest.clone_from(&script.digest);
        let req = json!({
            "op": "reload",
            "script": path.display().to_string(),
            "name": script.source_path,
        });
        let answer = blocking(move || switches::request(&sock, &req, Duration::from_secs(120)))
            .await?
            .map_err(|e| Status::unavailable(format!("switch {name}: {e}")))?;
        let old = recs.find(&name).cloned();
        if answer["ok"] != true {
            if old.as_ref().is_none_or(|o| o.script != path) {
                let _ = std::fs::remove_file(&path);
            }
            let msg = answer["error"].as_str().unwrap_or("refused").to_string();
            return Err(Status::failed_precondition(msg));
        }
        let rep = &answer["reload"];
        let us = |k: &str| rep[k].as_f64().unwrap_or(0.0);
        self.metrics.switch_deployed(
            Duration::from_secs_f64(us("load") / 1e6),
            Some(Duration::from_secs_f64(us("switch") / 1e6)),
        );
        let version = rep["version"].as_u64().unwrap_or(0);
        let rec = old.clone().map(|mut o| {
            if o.script != path {
                let _ = std::fs::remove_file(&o.script);
            }
            o.script = path;
            o.source = script.source_path.clone();
            o.chain = script.chain.clone();
            o.chain_version = script.chain_version;
            o.digest = script.digest.clone();
            o.version = version;
            o.deployed_at = now_s();
            o
        });
        if let Some(rec) = &rec {
            recs.put(rec.clone());
            save(&recs, &self.cfg.run_dir)?;
        } else {
            // Not the daemon's: nothing of it is kept.
            let _ = std::fs::remove_dir_all(switches::home(&self.cfg.run_dir, &name));
        }
        let n2 = name.clone();
        let st = blocking(move || switches::status(&dir, &n2)).await?;
        Ok(proto::RedeploySwitchResponse {
            deployment: Some(Daemon::switch_view(
                &self.cfg.switch_dir,
                &name,
                rec.as_ref(),
                st,
            )),
            reload_json: rep.to_string(),
            switch_us: us("switch") as u64,
            load_us: us("load") as u64,
        })
    }

    async fn undeploy_switch(
        &self,
        r: proto::UndeploySwitchRequest,
        target: &mut String,
    ) -> Result<proto::UndeploySwitchResponse, Status> {
        let name = name(&r.name)?;
        *target = format!("switch {name}");
        let mut recs = self.switches.lock().await;
        let dir = self.cfg.switch_dir.clone();
        let rec = recs.find(&name).cloned();
        let sock = switches::socket(&dir, &name);
        if rec.is_none() && !switches::answers(&sock) {
            return Err(Status::not_found(format!(
                "switch {name}: cannot reach its control socket {}; is it running?",
                sock.display()
            )));
        }
        let (n2, d2, r2) = (name.clone(), dir.clone(), self.cfg.run_dir.clone());
        let pid = rec.as_ref().map_or(0, |r| r.pid);
        let (st, stopped) = blocking(move || {
            let st = switches::status(&d2, &n2);
            let stopped = switches::stop(&d2, &n2, pid);
            if stopped.is_ok() {
                switches::clean(&r2, &d2, &n2);
            }
            (st, stopped)
        })
        .await?;
        stopped.map_err(|e| Status::internal(format!("switch {name}: {e}")))?;
        let removed = Daemon::switch_view(&dir, &name, rec.as_ref(), st);
        if recs.remove(&name).is_some() {
            save(&recs, &self.cfg.run_dir)?;
        }
        Ok(proto::UndeploySwitchResponse {
            removed: Some(proto::SwitchDeployment {
                running: false,
                ..removed
            }),
        })
    }
}

/// The control-socket ops each forwarding RPC takes.
const QUERY_OPS: &[&str] = &["status", "map_list", "map_dump", "map_get", "trace"];
const CHANGE_OPS: &[&str] = &["map_set", "map_delete", "update"];

/// A control-socket request for `ops`: a JSON object with one of them as
/// its `op`; (request, op).
fn control_request(json: &str, ops: &[&str]) -> Result<(Value, String), Status> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Status::invalid_argument(format!("request_json: not JSON ({e})")))?;
    let op = match v.get("op").and_then(Value::as_str) {
        Some(op) if v.is_object() && ops.contains(&op) => op.to_string(),
        _ => {
            return Err(Status::invalid_argument(format!(
                "request_json: a JSON object with `op` one of {} is needed",
                ops.join(", ")
            )))
        }
    };
    Ok((v, op))
}

impl Daemon {
    /// Sends `req` to switch `name`'s control socket; its answer.
    async fn control(&self, name: &str, req: Value) -> Result<Value, Status> {
        let sock = switches::socket(&self.cfg.switch_dir, name);
        if !switches::answers(&sock) {
            return Err(Status::not_found(format!(
                "switch {name}: cannot reach its control socket {}; is it running?",
                sock.display()
            )));
        }
        let n = name.to_string();
        blocking(move || switches::request(&sock, &req, Duration::from_secs(120)))
            .await?
            .map_err(|e| Status::unavailable(format!("switch {n}: {e}")))
    }
}

/// The audited outcome of a forwarded change: a refusal by the switch
/// (`ok` false) is a failure.
fn outcome(res: &Result<Value, Status>) -> Result<(), Status> {
    match res {
        Ok(v) if v["ok"] == true => Ok(()),
        Ok(v) => Err(Status::failed_precondition(
            v["error"]
                .as_str()
                .unwrap_or("refused by the switch")
                .to_string(),
        )),
        Err(s) => Err(s.clone()),
    }
}

fn answer(v: Value) -> proto::SwitchControlResponse {
    proto::SwitchControlResponse {
        answer_json: v.to_string(),
    }
}

fn save(r: &SwitchRecords, run_dir: &Path) -> Result<(), Status> {
    r.save(run_dir)
        .map_err(|e| Status::internal(format!("recording the switch: {e}")))
}

#[tonic::async_trait]
impl SwitchService for Switches {
    async fn deploy_switch(
        &self,
        req: Request<proto::DeploySwitchRequest>,
    ) -> Result<Response<proto::DeploySwitchResponse>, Status> {
        let call: Call<'_> = self.0.begin(&req, rpc::DEPLOY_SWITCH)?;
        let (mut target, mut digest) = (String::new(), String::new());
        let res = self
            .0
            .deploy_switch(req.into_inner(), &mut target, &mut digest)
            .await;
        call.done(&target, &digest, res)
    }

    async fn redeploy_switch(
        &self,
        req: Request<proto::RedeploySwitchRequest>,
    ) -> Result<Response<proto::RedeploySwitchResponse>, Status> {
        let call: Call<'_> = self.0.begin(&req, rpc::REDEPLOY_SWITCH)?;
        let (mut target, mut digest) = (String::new(), String::new());
        let res = self
            .0
            .redeploy_switch(req.into_inner(), &mut target, &mut digest)
            .await;
        call.done(&target, &digest, res)
    }

    async fn undeploy_switch(
        &self,
        req: Request<proto::UndeploySwitchRequest>,
    ) -> Result<Response<proto::UndeploySwitchResponse>, Status> {
        let call = self.0.begin(&req, rpc::UNDEPLOY_SWITCH)?;
        let mut target = String::new();
        let res = self.0.undeploy_switch(req.into_inner(), &mut target).await;
        call.done(&target, "", res)
    }

    async fn list_switches(
        &self,
        req: Request<proto::ListSwitchesRequest>,
    ) -> Result<Response<proto::ListSwitchesResponse>, Status> {
        let call = self.0.begin(&req, rpc::LIST_SWITCHES)?;
        let r = req.get_ref();
        let res = async {
            let only = match r.name.as_str() {
                "" => None,
                n => Some(name(n)?),
            };
            self.0
                .switch_list(only)
                .await
                .map(|switches| proto::ListSwitchesResponse { switches })
        }
        .await;
        call.done("", "", res)
    }

    async fn query_switch(
        &self,
        req: Request<proto::SwitchControlRequest>,
    ) -> Result<Response<proto::SwitchControlResponse>, Status> {
        let call = self.0.begin(&req, rpc::QUERY_SWITCH)?;
        let r = req.into_inner();
        let res = async {
            let n = name(&r.name)?;
            let (v, _) = control_request(&r.request_json, QUERY_OPS)?;
            self.0.control(&n, v).await.map(answer)
        }
        .await;
        call.done("", "", res)
    }

    async fn change_switch(
        &self,
        req: Request<proto::SwitchControlRequest>,
    ) -> Result<Response<proto::SwitchControlResponse>, Status> {
        let call = self.0.begin(&req, rpc::CHANGE_SWITCH)?;
        let r = req.into_inner();
        let mut target = String::new();
        let mut digest = String::new();
        let res = async {
            let n = name(&r.name)?;
            let (v, op) = control_request(&r.request_json, CHANGE_OPS)?;
            target = match v["map"].as_str() {
                Some(m) => format!("switch {n} {op} {m}"),
                None => format!("switch {n} {op}"),
            };
            // The signed message (update) or the request, as sent.
            digest = match v["message"].as_str() {
                Some(m) => crate::files::digest(m.as_bytes()),
                None => crate::files::digest(r.request_json.as_bytes()),
            };
            let _one_change_at_a_time = self.0.switches.lock().await;
            self.0.control(&n, v).await
        }
        .await;
        let audited = outcome(&res);
        let _ = call.done(&target, &digest, audited);
        res.map(|v| Response::new(answer(v)))
    }

    async fn rekey_switch(
        &self,
        req: Request<proto::RekeySwitchRequest>,
    ) -> Result<Response<proto::SwitchControlResponse>, Status> {
        let call = self.0.begin(&req, rpc::REKEY_SWITCH)?;
        let r = req.into_inner();
        let mut target = String::new();
        let res = async {
            let n = name(&r.name)?;
            target = format!("switch {n} rekey");
            let _one_change_at_a_time = self.0.switches.lock().await;
            self.0.control(&n, json!({"op": "rekey"})).await
        }
        .await;
        let audited = outcome(&res);
        let _ = call.done(&target, "", audited);
        res.map(|v| Response::new(answer(v)))
    }
}

//! Software switches the daemon deploys. Each one is `nfkit switch run`
//! in a process group of its own, with its control socket in the switch
//! directory (`$NFKIT_RUN_DIR`, else `/run/nfkit/switch`: where `nfkit
//! switch` finds it directly too), its script and log in
//! `<run_dir>/switches/NAME/`, and a record in `<run_dir>/switches.json`
//! (written atomically). The daemon reaches a switch only through its
//! control socket, so a switch keeps forwarding while no daemon runs;
//! at start, [`adopt`] keeps the records whose switch still answers and
//! reports and cleans those that are gone.

use crate::error::DaemonError;
use crate::files::{read_json, write_json};
use crate::records::Adopted;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// How long a switch may take to answer on its socket after its start,
/// and to be gone after it was asked to stop.
const WAIT: Duration = Duration::from_secs(30);

/// One switch the daemon started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchRecord {
    pub name: String,
    pub pid: u32,
    pub ports: Vec<String>,
    #[serde(default)]
    pub netns: String,
    pub workers: u32,
    #[serde(default)]
    pub engine: String,
    #[serde(default)]
    pub host: Vec<String>,
    #[serde(default)]
    pub no_pin: bool,
    /// The update key file (`switch run --key`); `None`: plain reloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    /// The script as the client named it.
    pub source: String,
    /// The copy the switch runs (in the switch's directory).
    pub script: PathBuf,
    #[serde(default)]
    pub chain: String,
    #[serde(default)]
    pub chain_version: u32,
    pub digest: String,
    /// The switch's version of its chain when last seen.
    pub version: u64,
    /// Unix seconds.
    pub deployed_at: u64,
}

/// The records file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SwitchRecords {
    pub switches: Vec<SwitchRecord>,
}

impl SwitchRecords {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join("switches.json")
    }

    pub fn load(run_dir: &Path) -> Result<SwitchRecords, DaemonError> {
        Ok(read_json(&SwitchRecords::path(run_dir))?.unwrap_or_default())
    }

    pub fn save(&self, run_dir: &Path) -> Result<(), DaemonError> {
        write_json(&SwitchRecords::path(run_dir), self)
    }

    pub fn find(&self, name: &str) -> Option<&SwitchRecord> {
        self.switches.iter().find(|s| s.name == name)
    }

    /// Puts `r` in place of the record of its name.
    pub fn put(&mut self, r: SwitchRecord) {
        self.switches.retain(|x| x.name != r.name);
        self.switches.push(r);
        self.switches.sort_by(|a, b| a.name.cmp(&b.name));
    }

    pub fn remove(&mut self, name: &str) -> Option<SwitchRecord> {
        let i = self.switches.iter().position(|s| s.name == name)?;
        Some(self.switches.remove(i))
    }
}

/// The directory of a switch's script and log.
pub fn home(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join("switches").join(name)
}

/// Switch `name`'s control socket in `dir`.
pub fn socket(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.sock"))
}

/// The switch names whose sockets are in `dir` (not the daemon's own).
pub fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            let n = p.file_name()?.to_str()?.strip_suffix(".sock")?.to_string();
            (n != "nfkitd").then_some(n)
        })
        .collect();
    out.sort();
    out
}

/// Does something answer on `path`?
pub fn answers(path: &Path) -> bool {
    UnixStream::connect(path).is_ok()
}

/// Is process `pid` there (and not a zombie)?
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}

/// One request on a switch's control socket (one JSON line each way);
/// the error as text.
pub fn request(path: &Path, req: &Value, timeout: Duration) -> Result<Value, String> {
    let s = UnixStream::connect(path)
        .map_err(|e| format!("cannot reach its control socket {} ({e})", path.display()))?;
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let mut w = &s;
    writeln!(w, "{req}").map_err(|e| format!("writing to {}: {e}", path.display()))?;
    let mut line = String::new();
    BufReader::new((&s).take(16 << 20))
        .read_line(&mut line)
        .map_err(|e| format!("reading from {}: {e}", path.display()))?;
    serde_json::from_str(&line).map_err(|e| format!("bad answer from {}: {e}", path.display()))
}

/// A switch's status answer (`{"op":"status"}`).
pub fn status(dir: &Path, name: &str) -> Result<Value, String> {
    let v = request(
        &socket(dir, name),
        &serde_json::json!({"op": "status"}),
        Duration::from_secs(10),
    )?;
    if v["ok"] == true {
        Ok(v["status"].clone())
    } else {
        Err(v["error"].as_str().unwrap_or("refused").to_string())
    }
}

/// The program that runs switches: `nfkit` beside this program, else
/// this program when it is `nfkit` itself (`nfkit daemon run`), else
/// `nfkit` on the PATH.
pub fn program() -> PathBuf {
    let me = std::env::current_exe().ok();
    if let Some(me) = &me {
        if me.file_name().is_some_and(|n| n == "nfkit") {
            return me.clone();
        }
        if let Some(sib) = me.parent().map(|d| d.join("nfkit")) {
            if sib.is_file() {
                return sib;
            }
        }
    }
    PathBuf::from("nfkit")
}

/// What starting a switch needs beside its record.
pub struct Start<'a> {
    pub program: &'a Path,
    pub switch_dir: &'a Path,
    pub log: &'a Path,
    pub nf_path: &'a [String],
}

/// Starts `r`'s switch on `r.script` and waits until its control socket
/// answers; its pid and how long that took. The error has the end of
/// its log (a script that does not compile, a port that cannot open).
pub fn start(r: &SwitchRecord, s: &Start<'_>) -> Result<(u32, Duration), String> {
    let path = socket(s.switch_dir, &r.name);
    if answers(&path) {
        return Err(format!(
            "switch {} is already running (control socket {})",
            r.name,
            path.display()
        ));
    }
    if let Some(dir) = s.log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let log = std::fs::File::create(s.log)
        .map_err(|e| format!("creating its log {}: {e}", s.log.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("its log {}: {e}", s.log.display()))?;
    let mut cmd = if r.netns.is_empty() {
        std::process::Command::new(s.program)
    } else {
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", &r.netns]).arg(s.program);
        c
    };
    cmd.args(["switch", "run", "--name", &r.name, "--json"]);
    for p in &r.ports {
        cmd.arg("--port").arg(p);
    }
    cmd.arg("--workers").arg(r.workers.max(1).to_string());
    if !r.engine.is_empty() {
        cmd.arg("--engine").arg(&r.engine);
    }
    for h in &r.host {
        cmd.arg("--host").arg(h);
    }
    if r.no_pin {
        cmd.arg("--no-pin");
    }
    if let Some(k) = &r.key {
        cmd.arg("--key").arg(k);
    }
    for d in s.nf_path {
        cmd.arg("--nf-path").arg(d);
    }
    cmd.arg(&r.script)
        .env("NFKIT_RUN_DIR", s.switch_dir)
        .env_remove("NFKIT_DAEMON")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .process_group(0);
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", s.program.display()))?;
    let tail = |log: &Path| {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(12).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    while !answers(&path) {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!(
                "switch {} exited ({st}) before answering:\n{}",
                r.name,
                tail(s.log)
            ));
        }
        if t0.elapsed() > WAIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "switch {} did not answer on {} within {} s (stopped):\n{}",
                r.name,
                path.display(),
                WAIT.as_secs(),
                tail(s.log)
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = t0.elapsed();
    let pid = child.id();
    // Reaped when it exits; a daemon that stops first leaves it running.
    let _ = std::thread::Builder::new()
        .name("nfkitd-switch-reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
    Ok((pid, took))
}

/// Asks switch `name` to stop and waits until its socket and its
/// process (`pid`, 0: unknown) are gone.
pub fn stop(dir: &Path, name: &str, pid: u32) -> Result<(), String> {
    let path = socket(dir, name);
    if answers(&path) {
        let v = request(
            &path,
            &serde_json::json!({"op": "stop"}),
            Duration::from_secs(10),
        )?;
        if v["ok"] != true {
            return Err(format!("stop refused: {}", v["error"]));
        }
    }
    let t0 = Instant::now();
    while path.exists() || (pid != 0 && alive(pid)) {
        if t0.elapsed() > WAIT {
            return Err(format!(
                "asked to stop, but after {} s its socket {} or its process {pid} is still there",
                WAIT.as_secs(),
                path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Per-chain, per-verdict counters of a status answer, as the API gives
/// them.
pub fn counters(status: &Value) -> Vec<crate::proto::ChainCounters> {
    status["chains"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let counts: std::collections::HashMap<String, u64> = c["counts"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, n)| Some((k.clone(), n.as_u64()?)))
                .filter(|(_, n)| *n > 0)
                .collect();
            crate::proto::ChainCounters {
                chain: c["chain"].as_str().unwrap_or_default().to_string(),
                faults: counts.get("FAULT").copied().unwrap_or(0),
                counts,
            }
        })
        .collect()
}

/// Removes what the daemon kept of switch `name` (its script and log)
/// and a socket file nothing answers on.
pub fn clean(run_dir: &Path, switch_dir: &Path, name: &str) {
    let _ = std::fs::remove_dir_all(home(run_dir, name));
    let path = socket(switch_dir, name);
    use std::os::unix::fs::FileTypeExt as _;
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) && !answers(&path)
    {
        let _ = std::fs::remove_file(&path);
    }
}

/// Brings the switch records in line with what answers: a recorded
/// switch whose socket answers is adopted (its pid and version as it
/// says), one that does not is reported `lost` and cleaned, a switch
/// answering without a record is reported `unrecorded` (listed, not
/// managed). Saves the records.
pub fn adopt(
    run_dir: &Path,
    switch_dir: &Path,
) -> Result<(SwitchRecords, Vec<Adopted>), DaemonError> {
    let mut rec = SwitchRecords::load(run_dir)?;
    let mut notes = Vec::new();
    let mut kept = SwitchRecords::default();
    for mut r in std::mem::take(&mut rec.switches) {
        match status(switch_dir, &r.name) {
            Ok(st) => {
                let pid = st["pid"].as_u64().unwrap_or(0) as u32;
                let version = st["version"].as_u64().unwrap_or(0);
                let mut detail = format!(
                    "switch pid {pid}, version {version}, {}{}",
                    r.source,
                    if r.chain.is_empty() {
                        String::new()
                    } else {
                        format!(" chain {}@{}", r.chain, r.chain_version)
                    }
                );
                if version != r.version {
                    detail.push_str(&format!(
                        " (recorded version {}: a redeploy was under way; the switch runs version {version})",
                        r.version
                    ));
                }
                (r.pid, r.version) = (pid, version);
                notes.push(Adopted {
                    dev: r.name.clone(),
                    attach: "switch".into(),
                    outcome: "adopted".into(),
                    detail,
                });
                kept.put(r);
            }
            Err(e) => {
                let why = if alive(r.pid) {
                    format!("its process {} runs but does not answer ({e})", r.pid)
                } else {
                    format!("its process {} is gone", r.pid)
                };
                clean(run_dir, switch_dir, &r.name);
                notes.push(Adopted {
                    dev: r.name.clone(),
                    attach: "switch".into(),
                    outcome: "lost".into(),
                    detail: format!("{why}; its record and files were removed"),
                });
            }
        }
    }
    for n in names(switch_dir) {
        if kept.find(&n).is_none() && answers(&socket(switch_dir, &n)) {
            notes.push(Adopted {
                dev: n.clone(),
                attach: "switch".into(),
                outcome: "unrecorded".into(),
                detail:
                    "a switch the daemon did not start: listed, reloaded and stopped on request"
                        .into(),
            });
        }
    }
    kept.save(run_dir)?;
    Ok((kept, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_by_name_and_sorted() {
        let mut r = SwitchRecords::default();
        let rec = |n: &str, pid| SwitchRecord {
            name: n.into(),
            pid,
            ..SwitchRecord::default()
        };
        r.put(rec("b", 1));
        r.put(rec("a", 2));
        r.put(rec("b", 3));
        assert_eq!(
            r.switches
                .iter()
                .map(|s| (s.name.as_str(), s.pid))
                .collect::<Vec<_>>(),
            vec![("a", 2), ("b", 3)]
        );
        assert_eq!(r.remove("a").map(|s| s.pid), Some(2));
        assert!(r.find("a").is_none());
    }

    #[test]
    fn counters_come_from_the_status_chains() {
        let st = serde_json::json!({"chains": [
            {"chain": "main", "counts": {"REDIRECT": 5, "DROP": 0, "FAULT": 2}}
        ]});
        let c = counters(&st);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].chain, "main");
        assert_eq!(c[0].counts.get("REDIRECT"), Some(&5));
        assert!(!c[0].counts.contains_key("DROP"));
        assert_eq!(c[0].faults, 2);
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX - 1));
    }
}

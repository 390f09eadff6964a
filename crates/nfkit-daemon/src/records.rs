//! What the daemon records of its deployments (`<run_dir>/deployments.json`,
//! written atomically): which chain version and digest runs where, and
//! the deploy in progress (an intent written before the kernel is
//! touched). At start, [`adopt`] compares them with nfkit's pins and
//! state file and says what it found of each deployment.

use crate::error::DaemonError;
use crate::files::{read_json, write_json};
use nfkit_kernel::deploy::{self as kdeploy, Paths};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One deployment as the daemon knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub dev: String,
    /// `xdp`, `xdp-generic`, `tc-ingress`, `tc-egress`.
    pub attach: String,
    /// The chain version deployed (empty: inline or not deployed by the daemon).
    #[serde(default)]
    pub chain: String,
    #[serde(default)]
    pub chain_version: u32,
    /// `sha256:<hex>` of the deployed source (empty: unknown).
    #[serde(default)]
    pub digest: String,
    /// nfkit's generation and program when the daemon last saw it.
    pub generation: u32,
    pub prog_id: u32,
}

/// A deploy the daemon started: enough to finish it after a crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub file: String,
    pub source: String,
    pub source_path: String,
    pub dev: Option<String>,
    pub netns: Option<String>,
    pub attach: Option<String>,
    /// `static` or `dynamic`.
    pub mode: String,
    pub chain: String,
    pub chain_version: u32,
    pub digest: String,
    /// (dev, attach, generation) of every deployment before it.
    pub before: Vec<(String, String, u32)>,
    /// An eBPF object deployed as it is, instead of a script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectIntent>,
    /// A pipeline's output devices (`post` at their TC egress).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_devs: Vec<String>,
}

/// The object of an [`Intent`]: kept in the run directory until done.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectIntent {
    /// The copy the daemon deploys from.
    pub path: PathBuf,
    /// The program, by function or section name (empty: the only one).
    pub entry: String,
    /// `xdp`, `tc` or `socket`: the type of untyped sections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prog_type: Option<String>,
}

/// The records file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Records {
    pub deployments: Vec<Record>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Intent>,
}

impl Records {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join("deployments.json")
    }

    pub fn load(run_dir: &Path) -> Result<Records, DaemonError> {
        Ok(read_json(&Records::path(run_dir))?.unwrap_or_default())
    }

    pub fn save(&self, run_dir: &Path) -> Result<(), DaemonError> {
        write_json(&Records::path(run_dir), self)
    }

    /// The record of `dev`/`attach`.
    pub fn find(&self, dev: &str, attach: &str) -> Option<&Record> {
        self.deployments
            .iter()
            .find(|r| r.dev == dev && r.attach == attach)
    }

    /// Puts `r` in place of the record of its dev/attach.
    pub fn put(&mut self, r: Record) {
        self.deployments
            .retain(|x| !(x.dev == r.dev && x.attach == r.attach));
        self.deployments.push(r);
        self.deployments
            .sort_by(|a, b| (&a.dev, &a.attach).cmp(&(&b.dev, &b.attach)));
    }
}

/// What [`adopt`] found of one deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Adopted {
    pub dev: String,
    pub attach: String,
    /// `adopted`, `detached`, `unrecorded`, `lost`, `finished`, `rolled back`.
    pub outcome: String,
    pub detail: String,
}

/// Redeploys an interrupted deploy's intent (the daemon's deploy path).
pub type Finisher<'a> = &'a dyn Fn(&Intent) -> Result<kdeploy::Deployment, String>;

/// Brings the records in line with what is pinned and recorded by nfkit:
/// finishes or rolls back an interrupted deploy, adopts what runs, drops
/// what is gone. Saves the records; returns them and what was found.
pub fn adopt(
    run_dir: &Path,
    paths: &Paths,
    finish: Finisher<'_>,
) -> Result<(Records, Vec<Adopted>), DaemonError> {
    let mut rec = Records::load(run_dir)?;
    let mut notes = Vec::new();
    let status = |paths: &Paths| {
        kdeploy::status(paths)
            .map_err(|e| DaemonError::Serve(format!("reading nfkit's state: {e}")))
    };
    let mut st = status(paths)?;
    if let Some(intent) = rec.pending.take() {
        let changed = st.iter().find(|s| {
            let d = &s.deployment;
            !intent
                .before
                .iter()
                .any(|(dev, at, g)| *dev == d.dev && at == d.hook.name() && *g == d.generation)
        });
        let torn = st
            .iter()
            .find(|s| s.attached && s.live_prog_id != s.deployment.prog_id);
        let target = intent.dev.clone().unwrap_or_default();
        if let Some(s) = changed.filter(|_| torn.is_none()) {
            let d = &s.deployment;
            rec.put(Record {
                dev: d.dev.clone(),
                attach: d.hook.name().to_string(),
                chain: intent.chain.clone(),
                chain_version: intent.chain_version,
                digest: intent.digest.clone(),
                generation: d.generation,
                prog_id: d.prog_id,
            });
            notes.push(Adopted {
                dev: d.dev.clone(),
                attach: d.hook.name().to_string(),
                outcome: "finished".into(),
                detail: format!(
                    "the interrupted deploy of {} ({}) had completed: generation {}",
                    intent.file, intent.digest, d.generation
                ),
            });
        } else if let Some(s) = torn {
            // The link runs a program nfkit's state does not name: the
            // crash came between the link update and the state write.
            // Deploying again makes program, pins and state agree.
            let d = &s.deployment;
            let (outcome, detail) = match finish(&intent) {
                Ok(n) => {
                    rec.put(Record {
                        dev: n.dev.clone(),
                        attach: n.hook.name().to_string(),
                        chain: intent.chain.clone(),
                        chain_version: intent.chain_version,
                        digest: intent.digest.clone(),
                        generation: n.generation,
                        prog_id: n.prog_id,
                    });
                    (
                        "finished",
                        format!(
                            "link ran prog {} but the state said {}: {} deployed again (generation {})",
                            s.live_prog_id, d.prog_id, intent.file, n.generation
                        ),
                    )
                }
                Err(e) => (
                    "detached",
                    format!("finishing the interrupted deploy failed: {e}"),
                ),
            };
            notes.push(Adopted {
                dev: d.dev.clone(),
                attach: d.hook.name().to_string(),
                outcome: outcome.into(),
                detail,
            });
            st = status(paths)?;
        } else {
            notes.push(Adopted {
                dev: target,
                attach: intent.attach.clone().unwrap_or_default(),
                outcome: "rolled back".into(),
                detail: format!(
                    "the interrupted deploy of {} ({}) had not switched anything: the previous version runs",
                    intent.file, intent.digest
                ),
            });
        }
    }
    let mut kept = Vec::new();
    for s in &st {
        let d = &s.deployment;
        let at = d.hook.name();
        let known = rec.find(&d.dev, at).cloned();
        let (outcome, r) = match known {
            Some(r) if r.generation == d.generation => (
                if s.attached { "adopted" } else { "detached" },
                Record {
                    prog_id: d.prog_id,
                    ..r
                },
            ),
            _ => (
                if s.attached { "unrecorded" } else { "detached" },
                Record {
                    dev: d.dev.clone(),
                    attach: at.to_string(),
                    generation: d.generation,
                    prog_id: d.prog_id,
                    ..Record::default()
                },
            ),
        };
        notes.push(Adopted {
            dev: d.dev.clone(),
            attach: at.to_string(),
            outcome: outcome.into(),
            detail: format!(
                "{} generation {} prog {}{}",
                d.source,
                d.generation,
                s.live_prog_id,
                if r.chain.is_empty() {
                    String::new()
                } else {
                    format!(" chain {}@{}", r.chain, r.chain_version)
                }
            ),
        });
        kept.push(r);
    }
    for r in &rec.deployments {
        if !kept.iter().any(|k| k.dev == r.dev && k.attach == r.attach) {
            notes.push(Adopted {
                dev: r.dev.clone(),
                attach: r.attach.clone(),
                outcome: "lost".into(),
                detail: "recorded by the daemon, but nfkit's state no longer has it".into(),
            });
        }
    }
    rec.deployments = Vec::new();
    for k in kept {
        rec.put(k);
    }
    rec.save(run_dir)?;
    Ok((rec, notes))
}

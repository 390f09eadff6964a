//! What nfkit remembers of its deployments: where pins and the state
//! file live ([`Paths`]), and the JSON state file itself ([`State`]: one
//! [`Deployment`] per device and hook, with its [`MapRecord`]s). Attach
//! points are recorded by name (`xdp-generic`), so the file reads the
//! same whatever the enum looks like.

use crate::error::KernelError;
use nfkit_abi::AttachPoint;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where nfkit keeps its pins and its state file.
#[derive(Clone, Debug)]
pub struct Paths {
    /// bpffs directory holding one directory per device.
    pub pin_root: PathBuf,
    /// The JSON state file.
    pub state_file: PathBuf,
}

impl Paths {
    /// The defaults (`/sys/fs/bpf/nfkit`, `/run/nfkit/state.json`),
    /// overridden by `NFKIT_PIN_ROOT` and `NFKIT_STATE_DIR` (tests use
    /// their own, so they never touch a real deployment).
    pub fn from_env() -> Paths {
        let pin_root = std::env::var_os("NFKIT_PIN_ROOT")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(crate::PIN_DIR));
        let dir = std::env::var_os("NFKIT_STATE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/run/nfkit"));
        Paths {
            pin_root,
            state_file: dir.join("state.json"),
        }
    }

    /// Makes sure the pin root exists (mounting bpffs for the default).
    pub(crate) fn prepare(&self) -> Result<(), KernelError> {
        if self.pin_root == Path::new(crate::PIN_DIR) {
            let mnt = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
            let private = mnt("self").is_some() && mnt("self") != mnt("1");
            if private && !crate::bpffs::is_bpffs(Path::new(crate::BPFFS)) {
                return Err(KernelError::Bpffs {
                    path: crate::BPFFS.into(),
                    msg: "not bpffs in this mount namespace (ip netns exec?): pins made \
                          here would vanish with this process; run from the host with \
                          --netns NAME, or set NFKIT_PIN_ROOT to a bpffs mount the host sees"
                        .into(),
                });
            }
            crate::ensure_bpffs()?;
        }
        std::fs::create_dir_all(&self.pin_root).map_err(|e| KernelError::File {
            what: "create",
            path: self.pin_root.clone(),
            cause: e,
        })
    }
}

/// A pinned map of a deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapRecord {
    pub name: String,
    pub pin: PathBuf,
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    /// BTF names of the key and value types, when known (`u16`, `u32`, ...).
    pub key_type: Option<String>,
    pub value_type: Option<String>,
    /// Typed descriptions of key and value for display and parsing
    /// (nfkit-control's `maps::ValueType`, JSON text), set by whoever
    /// deploys; absent in older state files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_desc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_desc: Option<String>,
}

/// How a deployment is composed (recorded as `static` / `dynamic`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeployMode {
    /// One program: classifier, chains and NFs linked together.
    Static,
    /// NFs loaded once, chain segments switched through `nfkit_progs`.
    Dynamic,
}

impl std::fmt::Display for DeployMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeployMode::Static => "static",
            DeployMode::Dynamic => "dynamic",
        })
    }
}

/// One deployment, as the state file records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    pub dev: String,
    /// The named network namespace of `dev` (`ip netns`), if not ours.
    #[serde(default)]
    pub netns: Option<String>,
    pub ifindex: u32,
    #[serde(with = "attach_point_name")]
    pub hook: AttachPoint,
    pub mode: DeployMode,
    /// The script (or object) deployed.
    pub source: String,
    /// The entry program's name.
    pub entry: String,
    /// The deployment's directory on bpffs.
    pub pin_dir: PathBuf,
    pub link_id: u32,
    pub prog_id: u32,
    /// How many times this device/hook was deployed (1 = first).
    pub generation: u32,
    /// Unix time of the last deploy, in seconds.
    pub deployed_at: u64,
    pub maps: Vec<MapRecord>,
    /// How it is attached (bpf_link, or a clsact filter for TC hooks).
    #[serde(default)]
    pub attach: crate::tc::Attach,
    /// Dynamic mode: what sits in `nfkit_progs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<crate::dynamic::DynRecord>,
    /// The script's chains by chain id (statistics slot - 1), as the
    /// deploy request named them; names for `status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chains: Vec<String>,
    /// A pipeline's `post` program: the ingress deployment it belongs to
    /// (`DEV/HOOK`), whose maps it uses and with which it goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_of: Option<String>,
}

impl Deployment {
    /// `DEV/HOOK`, how a `post` deployment names its ingress one.
    pub fn key(&self) -> String {
        format!("{}/{}", self.dev, self.hook.name())
    }

    /// The pinned bpf_link of the deployment.
    pub(crate) fn link_pin(&self) -> PathBuf {
        self.pin_dir.join("link")
    }
}

/// The state file: every deployment nfkit made.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub deployments: Vec<Deployment>,
}

impl State {
    /// Reads the state file (empty when it does not exist).
    pub fn load(paths: &Paths) -> Result<State, KernelError> {
        let f = &paths.state_file;
        match std::fs::read_to_string(f) {
            Ok(s) => serde_json::from_str(&s).map_err(|source| KernelError::StateFile {
                path: f.clone(),
                cause: source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
            Err(source) => Err(KernelError::File {
                what: "read state file",
                path: f.clone(),
                cause: source,
            }),
        }
    }

    /// Writes the state file atomically (temporary file, rename); an
    /// empty state removes the file.
    pub fn save(&self, paths: &Paths) -> Result<(), KernelError> {
        let f = &paths.state_file;
        let err = |source: std::io::Error| KernelError::File {
            what: "write state file",
            path: f.clone(),
            cause: source,
        };
        if self.deployments.is_empty() {
            return match std::fs::remove_file(f) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
                _ => Ok(()),
            };
        }
        if let Some(dir) = f.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = f.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|source| KernelError::StateFile {
            path: f.clone(),
            cause: source,
        })?;
        std::fs::write(&tmp, text + "\n").map_err(err)?;
        std::fs::rename(&tmp, f).map_err(err)
    }

    /// The deployment on `dev`/`hook`, if any.
    pub fn find(&self, dev: &str, hook: AttachPoint) -> Option<&Deployment> {
        self.deployments
            .iter()
            .find(|d| d.dev == dev && d.hook == hook)
    }
}

/// The state file records an attach point by its name (`xdp-generic`).
mod attach_point_name {
    use super::AttachPoint;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(a: &AttachPoint, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(a.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AttachPoint, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_file_round_trips_and_empty_state_removes_it() {
        let dir = std::env::temp_dir().join(format!("nfkit-state-{}", std::process::id()));
        let paths = Paths {
            pin_root: dir.join("bpf"),
            state_file: dir.join("s").join("state.json"),
        };
        assert!(State::load(&paths).is_ok_and(|s| s.deployments.is_empty()));
        let d = Deployment {
            dev: "veth0".into(),
            netns: None,
            ifindex: 7,
            hook: AttachPoint::TcEgress,
            mode: DeployMode::Static,
            source: "x.py".into(),
            entry: "every_packet".into(),
            pin_dir: dir.join("bpf/veth0/tc_egress"),
            link_id: 3,
            prog_id: 40,
            generation: 2,
            deployed_at: 1,
            maps: vec![],
            attach: crate::tc::Attach::Clsact {
                handle: 1,
                priority: 49152,
                qdisc_created: true,
            },
            dynamic: Some(crate::dynamic::DynRecord {
                classifier: "dyn_every_packet".into(),
                bank: 1,
                nfs: vec![crate::dynamic::DynNf {
                    symbol: "nf_count".into(),
                    entry: "dyn_count".into(),
                    slot: 64,
                    prog_id: 99,
                }],
                segments: vec![("c0s0_x".into(), 0), ("c0s1_x".into(), 640)],
            }),
            chains: vec!["count".into()],
            post_of: None,
        };
        let st = State {
            deployments: vec![d.clone()],
        };
        st.save(&paths).expect("save");
        let back = State::load(&paths).expect("load");
        assert_eq!(back.deployments, vec![d]);
        assert!(back.find("veth0", AttachPoint::TcEgress).is_some());
        assert!(back.find("veth0", AttachPoint::TcIngress).is_none());
        State::default().save(&paths).expect("save empty");
        assert!(!paths.state_file.exists());
        std::fs::write(&paths.state_file, "{not json").expect("write");
        let e = State::load(&paths).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("state file")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

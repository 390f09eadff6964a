//! What `nfkit offload` installed, kept in a JSON state file next to
//! nfkit's deployment state: for `offload status` and `offload remove`.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The state file cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {cause}")]
    Io {
        path: std::path::PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: {cause}")]
    Json {
        path: std::path::PathBuf,
        cause: serde_json::Error,
    },
}

/// One offload: rules at the ingress of one device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub dev: String,
    #[serde(default)]
    pub netns: Option<String>,
    pub ifindex: u32,
    /// The script or object offloaded, and its entry.
    pub source: String,
    pub entry: String,
    /// `skip_sw`, `skip_hw` or empty.
    pub skip: String,
    /// The priorities of the installed rules.
    pub prios: Vec<u32>,
    /// nfkit added the clsact qdisc (remove deletes it when empty).
    pub qdisc_created: bool,
    /// Unix time of the install, in seconds.
    pub installed_at: u64,
    /// Paths of the analysis, paths whose verdict the rules carry, and
    /// paths left to the program.
    pub paths: usize,
    pub offloaded: usize,
    pub fallbacks: usize,
    /// Where map contents came from (`pinned maps` or `initial state`).
    pub maps_from: String,
    /// The rules as `tc` lines.
    pub tc_lines: Vec<String>,
    /// Per rule (as `prios`), the program's counter additions it stands
    /// for: its packets times these are folded into the program's
    /// counters ([`crate::fold`]).
    #[serde(default)]
    pub counts: Vec<Vec<crate::Count>>,
}

/// The offload state file beside nfkit's state file `state_file`
/// (`offload.json` in its directory).
pub fn state_file_beside(state_file: &Path) -> std::path::PathBuf {
    state_file
        .parent()
        .map(|d| d.join("offload.json"))
        .unwrap_or_else(|| std::path::PathBuf::from("/run/nfkit/offload.json"))
}

/// The offload state file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OffloadState {
    pub installs: Vec<Installed>,
}

impl OffloadState {
    /// Reads `path` (empty when it does not exist).
    pub fn load(path: &Path) -> Result<OffloadState, RecordError> {
        match std::fs::read_to_string(path) {
            Ok(s) => serde_json::from_str(&s).map_err(|cause| RecordError::Json {
                path: path.to_path_buf(),
                cause,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(OffloadState::default()),
            Err(cause) => Err(RecordError::Io {
                path: path.to_path_buf(),
                cause,
            }),
        }
    }

    /// Writes `path` (atomically: a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |cause| RecordError::Io { path: p, cause }
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|cause| RecordError::Json {
            path: path.to_path_buf(),
            cause,
        })?;
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))
    }

    /// The install on `dev` (in `netns`), if any.
    pub fn find(&self, dev: &str, netns: Option<&str>) -> Option<usize> {
        self.installs
            .iter()
            .position(|i| i.dev == dev && i.netns.as_deref() == netns)
    }
}

//! Authenticated live updates (docs/update.md): a switch started with
//! keys ([`UpdateAuth`]) takes update messages (crate `nfkit-update`)
//! through [`crate::Switch::update`]. Each is verified first (signature,
//! target, nonce, version: [`nfkit_update::Verifier`]); a refused one is
//! counted per reason and logged, and the running version goes on
//! untouched. A code update for `pre` (or `table:NAME`: the ingress
//! code its actions call, keeping the table's maps) is compiled and
//! loaded off the packet path and published as the hitless reload does
//! ([`crate::reload`]); one for `post:PORT` replaces that port's post
//! program alone; each is counted per version. An entry update writes
//! or deletes one entry of a map of the running version.

use nfkit_update::verify::REASONS;
use nfkit_update::{KeyRing, Refusal, Verifier};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// The switch's identity and keys for updates.
#[derive(Clone, Debug)]
pub struct UpdateAuth {
    /// The target id updates must name (the switch's name).
    pub switch_id: String,
    pub keys: KeyRing,
}

/// Why an update did not apply (the running version goes on).
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("this switch takes no updates (it was started without a key file)")]
    NotEnabled,
    #[error("refused, {0}")]
    Refused(#[from] Refusal),
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("rejected (authentic, but it does not apply): {0}")]
    Rejected(String),
}

/// Reasons beyond the verifier's, in [`UpdateError::index`] order after
/// [`REASONS`].
const MORE: [&str; 3] = ["unsupported", "rejected", "not_enabled"];

impl UpdateError {
    fn index(&self) -> usize {
        match self {
            UpdateError::Refused(r) => r.index(),
            UpdateError::Unsupported(_) => REASONS.len(),
            UpdateError::Rejected(_) => REASONS.len() + 1,
            UpdateError::NotEnabled => REASONS.len() + 2,
        }
    }

    /// Its short name (`forged`, `replayed`, `rejected`, ...).
    pub fn reason(&self) -> &'static str {
        let i = self.index();
        REASONS
            .get(i)
            .copied()
            .unwrap_or_else(|| MORE[i - REASONS.len()])
    }
}

/// What an applied update did, and how long it took.
#[derive(Clone, Debug, Serialize)]
pub struct UpdateReport {
    /// `pre`, `table:NAME`, `post:PORT`.
    pub position: String,
    /// `code`, `entry_set`, `entry_delete`.
    pub kind: &'static str,
    /// The position's version now, and before.
    pub version: u64,
    pub previous: u64,
    pub key_id: u32,
    /// Checking the message (parse, MAC, digest, state).
    #[serde(serialize_with = "micros")]
    pub verify: Duration,
    /// Compiling and loading new code (VM checks, JIT, maps), or writing
    /// the entry.
    #[serde(serialize_with = "micros")]
    pub load: Duration,
    /// From publishing new code to every worker on it (0 for entries).
    #[serde(serialize_with = "micros")]
    pub switch: Duration,
    /// From the message received to every worker on the new version
    /// (or the entry written).
    #[serde(serialize_with = "micros")]
    pub total: Duration,
    pub workers: usize,
    pub parked: usize,
    /// Where `load` and `total` went, stage by stage (code updates).
    pub stages: Stages,
    /// It was applied at a real-time priority
    /// ([`crate::Switch::set_update_priority`]).
    pub realtime: bool,
}

/// The stages of a code update after verification (µs in JSON). With
/// `verify` before them and `switch` after, they make up `total`.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stages {
    /// Reading the code: compiling a script, or parsing a chain object
    /// (ELF and manifest) and linking its image.
    #[serde(serialize_with = "micros")]
    pub decode: Duration,
    /// The VM's checks and translation of the new program.
    #[serde(serialize_with = "micros")]
    pub check: Duration,
    /// Its maps: made, or shared with the running version.
    #[serde(serialize_with = "micros")]
    pub maps: Duration,
    /// Its JIT compilation.
    #[serde(serialize_with = "micros")]
    pub jit: Duration,
    /// The rest of loading: control-plane writes, clock configuration,
    /// a runner per worker, the post program, the version built.
    #[serde(serialize_with = "micros")]
    pub prepare: Duration,
    /// Storing the version and its epoch.
    #[serde(serialize_with = "micros")]
    pub publish: Duration,
}

/// What applying a verified update did.
pub(crate) struct Applied {
    pub load: Duration,
    pub switch: Duration,
    pub parked: usize,
    /// When every worker ran the new version (or the entry was written).
    pub done: Instant,
    pub stages: Stages,
}

fn micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

/// One refused update in the log.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RefusalRecord {
    /// Milliseconds since the switch started.
    pub at_ms: u64,
    /// Where it came from (`control socket`, `udp 127.0.0.1:4000`, ...).
    pub source: String,
    pub reason: &'static str,
    pub detail: String,
}

/// The update counters of [`crate::Stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpdateTotals {
    /// The switch takes updates (it has keys).
    pub enabled: bool,
    pub applied: u64,
    pub refused: u64,
    /// Refusals per reason (those that happened).
    pub reasons: BTreeMap<String, u64>,
    /// Each position's version (`pre`: the running code's; `table:NAME`
    /// and `post:PORT` once updated).
    pub positions: BTreeMap<String, u64>,
}

/// Refusals kept in the log (the oldest go first).
pub const LOG_KEPT: usize = 1024;

/// A switch's update state: the verifier, the counters, the log.
pub(crate) struct UpdateState {
    pub(crate) verifier: Verifier,
    applied: u64,
    refused: [u64; REASONS.len() + MORE.len()],
    log: VecDeque<RefusalRecord>,
    started: Instant,
}

impl UpdateState {
    pub(crate) fn new(auth: &UpdateAuth, first: u64) -> UpdateState {
        let mut verifier = Verifier::new(&auth.switch_id, auth.keys.clone());
        verifier.set_current(nfkit_update::Position::Pre, first);
        UpdateState {
            verifier,
            applied: 0,
            refused: [0; REASONS.len() + MORE.len()],
            log: VecDeque::new(),
            started: Instant::now(),
        }
    }

    /// Counts and logs a refusal.
    pub(crate) fn refuse(&mut self, source: &str, e: &UpdateError) {
        if let Some(c) = self.refused.get_mut(e.index()) {
            *c += 1;
        }
        if self.log.len() >= LOG_KEPT {
            self.log.pop_front();
        }
        self.log.push_back(RefusalRecord {
            at_ms: self.started.elapsed().as_millis() as u64,
            source: source.to_string(),
            reason: e.reason(),
            detail: e.to_string(),
        });
    }

    pub(crate) fn applied(&mut self) {
        self.applied += 1;
    }

    pub(crate) fn log(&self) -> Vec<RefusalRecord> {
        self.log.iter().cloned().collect()
    }

    pub(crate) fn totals(&self, pre: u64) -> UpdateTotals {
        let names = REASONS.iter().chain(MORE.iter());
        let mut positions: BTreeMap<String, u64> = self
            .verifier
            .versions()
            .map(|(p, v)| (p.to_string(), v))
            .collect();
        positions.insert(
            "pre".to_string(),
            pre.max(self.verifier.current(&nfkit_update::Position::Pre)),
        );
        UpdateTotals {
            enabled: true,
            applied: self.applied,
            refused: self.refused.iter().sum(),
            reasons: names
                .zip(self.refused)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (r.to_string(), n))
                .collect(),
            positions,
        }
    }
}

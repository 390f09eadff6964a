//! The verifier: a switch's update state (current version per position,
//! nonces of accepted updates) and the checks every message passes
//! before anything in it is used. [`Verifier::check`] changes nothing:
//! a refused message leaves the state as it was; the caller applies an
//! accepted one and then records it with [`Verifier::accept`].

use crate::key::KeyRing;
use crate::message::{parse, Body, Message, NONCE_LEN};
use crate::position::Position;
use std::collections::{BTreeMap, HashSet, VecDeque};

/// Why an update was refused. Checked in this order: structure
/// (truncated, malformed), signature (unauthenticated, unknown key,
/// forged, digest), body, then the switch's state (wrong target,
/// replayed, downgrade): nothing a message says is believed before its
/// MAC is checked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("truncated: {got} bytes, the message needs {need}")]
    Truncated { need: usize, got: usize },
    #[error("malformed: {0}")]
    Malformed(String),
    #[error("unauthenticated: the message is not signed (key id 0)")]
    Unauthenticated,
    #[error("unknown key id {0}")]
    UnknownKey(u32),
    #[error("forged: the MAC does not match (key id {0})")]
    Forged(u32),
    #[error("forged: the payload does not match its signed digest")]
    Digest,
    #[error("bad payload: {0}")]
    BadBody(String),
    #[error("wrong target: the update is for switch `{got}`, this is `{expected}`")]
    WrongTarget { got: String, expected: String },
    #[error("replayed: this message (its nonce) was applied before")]
    Replayed,
    #[error(
        "out of order or downgrade: version {got} at {position}, which runs version {current}"
    )]
    Downgrade {
        position: Position,
        current: u64,
        got: u64,
    },
}

/// Every refusal's short name, in [`Refusal::index`] order.
pub const REASONS: [&str; 10] = [
    "truncated",
    "malformed",
    "unauthenticated",
    "unknown_key",
    "forged",
    "digest",
    "bad_payload",
    "wrong_target",
    "replayed",
    "downgrade",
];

impl Refusal {
    /// Its index in [`REASONS`] (for counters).
    pub fn index(&self) -> usize {
        match self {
            Refusal::Truncated { .. } => 0,
            Refusal::Malformed(_) => 1,
            Refusal::Unauthenticated => 2,
            Refusal::UnknownKey(_) => 3,
            Refusal::Forged(_) => 4,
            Refusal::Digest => 5,
            Refusal::BadBody(_) => 6,
            Refusal::WrongTarget { .. } => 7,
            Refusal::Replayed => 8,
            Refusal::Downgrade { .. } => 9,
        }
    }

    /// Its short name (`forged`, `replayed`, ...).
    pub fn reason(&self) -> &'static str {
        REASONS[self.index()]
    }
}

/// An authenticated update, checked against the switch's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub key_id: u32,
    pub message: Message,
}

/// How many nonces of accepted updates are remembered (older ones are
/// forgotten; their messages are refused as downgrades anyway, since
/// versions only go up).
pub const NONCES_KEPT: usize = 1 << 16;

/// A switch's update state and keys.
#[derive(Debug)]
pub struct Verifier {
    target: String,
    keys: KeyRing,
    versions: BTreeMap<Position, u64>,
    seen: HashSet<[u8; NONCE_LEN]>,
    order: VecDeque<[u8; NONCE_LEN]>,
}

impl Verifier {
    /// The verifier of switch `target` taking updates signed with `keys`
    /// (every position at version 0 until [`Verifier::set_current`]).
    pub fn new(target: &str, keys: KeyRing) -> Verifier {
        Verifier {
            target: target.to_string(),
            keys,
            versions: BTreeMap::new(),
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// The switch id updates must name.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The version running at `p` (0: none yet).
    pub fn current(&self, p: &Position) -> u64 {
        self.versions.get(p).copied().unwrap_or(0)
    }

    /// Every position updated so far (or set) and its version.
    pub fn versions(&self) -> impl Iterator<Item = (&Position, u64)> + '_ {
        self.versions.iter().map(|(p, v)| (p, *v))
    }

    /// Sets the version running at `p` (the switch's first version).
    pub fn set_current(&mut self, p: Position, version: u64) {
        self.versions.insert(p, version);
    }

    /// Replaces the keys (rotation); versions and nonces stay.
    pub fn set_keys(&mut self, keys: KeyRing) {
        self.keys = keys;
    }

    /// Checks `bytes` (see [`Refusal`] for the order); changes nothing.
    pub fn check(&self, bytes: &[u8]) -> Result<Verified, Refusal> {
        let p = parse(bytes)?;
        if p.key_id == 0 {
            return Err(Refusal::Unauthenticated);
        }
        let key = self
            .keys
            .get(p.key_id)
            .ok_or(Refusal::UnknownKey(p.key_id))?;
        // blake3::Hash compares in constant time.
        if key.mac(p.signed) != blake3::Hash::from(p.mac) {
            return Err(Refusal::Forged(p.key_id));
        }
        if blake3::hash(p.payload) != blake3::Hash::from(p.digest) {
            return Err(Refusal::Digest);
        }
        let body: Body = Body::decode(p.kind, p.payload)?;
        if p.target != self.target {
            return Err(Refusal::WrongTarget {
                got: p.target.to_string(),
                expected: self.target.clone(),
            });
        }
        if self.seen.contains(&p.nonce) {
            return Err(Refusal::Replayed);
        }
        let current = self.current(&p.position);
        if p.version <= current {
            return Err(Refusal::Downgrade {
                position: p.position,
                current,
                got: p.version,
            });
        }
        Ok(Verified {
            key_id: p.key_id,
            message: Message {
                target: p.target.to_string(),
                position: p.position,
                version: p.version,
                nonce: p.nonce,
                body,
            },
        })
    }

    /// Records an applied update: its position runs its version now, its
    /// nonce is spent.
    pub fn accept(&mut self, v: &Verified) {
        let m = &v.message;
        self.versions.insert(m.position.clone(), m.version);
        if self.seen.insert(m.nonce) {
            self.order.push_back(m.nonce);
        }
        while self.order.len() > NONCES_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }
}

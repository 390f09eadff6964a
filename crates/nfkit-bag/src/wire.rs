//! The bag server's wire format (the seed's, made exact): an ASCII
//! command followed directly by little-endian binary arguments, one
//! command per datagram, no trailing bytes.
//!
//! | command | payload | bytes |
//! |---|---|---|
//! | `PUT` | `"PUT"` u32 key, u64 value (added to the key's value) | 15 |
//! | `GET` | `"GET"` u32 key (the server replies) | 7 |
//! | `DELETE` | `"DELETE"` u32 key | 10 |
//! | `STOP` | `"STOP"` (ends the run) | 4 |
//!
//! The sequence number that makes loss countable lives in the value of
//! a PUT (docs/bag.md): the measuring clients send `PUT key=seq % keys,
//! value=seq`, so the validity rules stay the seed's.

use crate::error::WireError;

/// Payload lengths of the commands.
pub const PUT_LEN: usize = 15;
pub const GET_LEN: usize = 7;
pub const DELETE_LEN: usize = 10;
pub const STOP_LEN: usize = 4;

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Put { key: u32, value: u64 },
    Get { key: u32 },
    Delete { key: u32 },
    Stop,
}

fn le_u32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

impl Command {
    /// Parses one datagram's payload, exactly: the command's bytes and
    /// its total length, nothing after.
    pub fn parse(p: &[u8]) -> Result<Command, WireError> {
        let (name, want) = if p.starts_with(b"PUT") {
            ("PUT", PUT_LEN)
        } else if p.starts_with(b"GET") {
            ("GET", GET_LEN)
        } else if p.starts_with(b"DELETE") {
            ("DELETE", DELETE_LEN)
        } else if p.starts_with(b"STOP") {
            ("STOP", STOP_LEN)
        } else {
            return Err(if p.iter().take(6).any(|b| !b.is_ascii()) {
                WireError::NotAscii
            } else {
                WireError::Unknown
            });
        };
        if p.len() != want {
            return Err(WireError::Length {
                command: name,
                len: p.len(),
                want,
            });
        }
        Ok(match name {
            "PUT" => Command::Put {
                key: le_u32(&p[3..]),
                value: le_u64(&p[7..]),
            },
            "GET" => Command::Get {
                key: le_u32(&p[3..]),
            },
            "DELETE" => Command::Delete {
                key: le_u32(&p[6..]),
            },
            _ => Command::Stop,
        })
    }

    /// The command's key, if it has one.
    pub fn key(&self) -> Option<u32> {
        match *self {
            Command::Put { key, .. } | Command::Get { key } | Command::Delete { key } => Some(key),
            Command::Stop => None,
        }
    }

    /// Appends the command's bytes to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match *self {
            Command::Put { key, value } => {
                out.extend_from_slice(b"PUT");
                out.extend_from_slice(&key.to_le_bytes());
                out.extend_from_slice(&value.to_le_bytes());
            }
            Command::Get { key } => {
                out.extend_from_slice(b"GET");
                out.extend_from_slice(&key.to_le_bytes());
            }
            Command::Delete { key } => {
                out.extend_from_slice(b"DELETE");
                out.extend_from_slice(&key.to_le_bytes());
            }
            Command::Stop => out.extend_from_slice(b"STOP"),
        }
    }

    /// The command's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(PUT_LEN);
        self.encode_into(&mut v);
        v
    }
}

/// The invalid request of the measuring clients: `"BAD"` and 12 bytes,
/// as long as a PUT, so that valid and invalid datagrams cost the same
/// to move (a confound of the seed's experiment, where BAD was shorter).
pub fn bad(seq: u64) -> [u8; PUT_LEN] {
    let mut b = [0u8; PUT_LEN];
    b[..3].copy_from_slice(b"BAD");
    b[3..7].copy_from_slice(&(seq as u32).to_le_bytes());
    b[7..].copy_from_slice(&seq.to_le_bytes());
    b
}

/// The validity check, the user-space twin of `examples/bag/filter.py`
/// (and of `filter_v2.py` with a key limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Keys at or above this are rejected (filter v2); `None`: no limit.
    pub key_limit: Option<u32>,
}

/// What the check decides for one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Valid,
    Invalid,
    /// Well-formed, but its key is at or above the limit (v2).
    OverLimit,
}

impl Check {
    /// Decides for `payload`.
    pub fn decide(&self, payload: &[u8]) -> Decision {
        match Command::parse(payload) {
            Err(_) => Decision::Invalid,
            Ok(c) => match (c.key(), self.key_limit) {
                (Some(k), Some(lim)) if k >= lim => Decision::OverLimit,
                _ => Decision::Valid,
            },
        }
    }

    /// Is `payload` kept?
    pub fn keeps(&self, payload: &[u8]) -> bool {
        self.decide(payload) == Decision::Valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_round_trips() {
        for c in [
            Command::Put {
                key: 7,
                value: 0x0102_0304_0506_0708,
            },
            Command::Put {
                key: u32::MAX,
                value: u64::MAX,
            },
            Command::Get { key: 0xdead_beef },
            Command::Delete { key: 1 },
            Command::Stop,
        ] {
            let b = c.encode();
            assert_eq!(Command::parse(&b), Ok(c), "{b:?}");
        }
    }

    #[test]
    fn layout_is_the_seeds() {
        let b = Command::Put { key: 1, value: 2 }.encode();
        assert_eq!(b, b"PUT\x01\0\0\0\x02\0\0\0\0\0\0\0");
        assert_eq!(
            Command::Get { key: 0x0403_0201 }.encode(),
            b"GET\x01\x02\x03\x04"
        );
        assert_eq!(Command::Delete { key: 9 }.encode(), b"DELETE\x09\0\0\0");
        assert_eq!(Command::Stop.encode(), b"STOP");
    }

    #[test]
    fn short_and_long_are_refused() {
        for c in [
            Command::Put { key: 1, value: 2 },
            Command::Get { key: 1 },
            Command::Delete { key: 1 },
            Command::Stop,
        ] {
            let b = c.encode();
            // Cut anywhere: refused (a length error, or an unknown
            // command once the command's own bytes are cut).
            for cut in 0..b.len() {
                assert!(Command::parse(&b[..cut]).is_err(), "{:?}", &b[..cut]);
            }
            let mut long = b.clone();
            long.push(0);
            assert!(
                matches!(Command::parse(&long), Err(WireError::Length { .. })),
                "{long:?}"
            );
        }
        // The seed's cheat, PUTT with a full key and value: one byte too long.
        assert!(Command::parse(b"PUTT\0\0\0\0\0\0\0\0\0\0\0\0").is_err());
        assert!(Command::parse(b"PUT").is_err());
    }

    #[test]
    fn unknown_empty_and_non_ascii_are_refused() {
        assert_eq!(Command::parse(b""), Err(WireError::Unknown));
        assert_eq!(Command::parse(b"BAD\0\0\0\0"), Err(WireError::Unknown));
        assert_eq!(Command::parse(b"put\x01\0\0\0"), Err(WireError::Unknown));
        assert_eq!(Command::parse(b"PU"), Err(WireError::Unknown));
        assert_eq!(
            Command::parse("GÉT\x01\0\0\0".as_bytes()),
            Err(WireError::NotAscii)
        );
        assert_eq!(Command::parse(b"\xff\xfe"), Err(WireError::NotAscii));
        assert_eq!(Command::parse(&bad(3)), Err(WireError::Unknown));
        assert_eq!(bad(3).len(), PUT_LEN);
    }

    #[test]
    fn check_with_a_key_limit() {
        let c = Check {
            key_limit: Some(1000),
        };
        assert_eq!(
            c.decide(&Command::Get { key: 999 }.encode()),
            Decision::Valid
        );
        assert_eq!(
            c.decide(&Command::Get { key: 1000 }.encode()),
            Decision::OverLimit
        );
        assert_eq!(
            c.decide(&Command::Delete { key: 5000 }.encode()),
            Decision::OverLimit
        );
        assert_eq!(c.decide(&Command::Stop.encode()), Decision::Valid);
        assert_eq!(c.decide(b"STOPX"), Decision::Invalid);
        assert!(Check::default().keeps(&Command::Get { key: 5000 }.encode()));
    }
}

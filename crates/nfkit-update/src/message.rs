//! The update message: a versioned binary format (docs/update.md).
//!
//! ```text
//! offset  size  field
//!  0       4    magic "NFKU"
//!  4       1    format (1)
//!  5       1    kind: 1 code, 2 entry set, 3 entry delete
//!  6       1    position: 1 pre, 2 table, 3 post
//!  7       1    flags (0)
//!  8       4    key id (u32 LE; 0: unsigned)
//! 12       8    version (u64 LE)
//! 20      16    nonce
//! 36       2    target length T (u16 LE, 1..=255)
//! 38       2    position name length P (u16 LE, 0..=255; 0 for pre)
//! 40       4    payload length L (u32 LE, at most 16 MiB)
//! 44       T    target switch id (UTF-8)
//! 44+T     P    position name (UTF-8)
//! 44+T+P  32    BLAKE3 digest of the payload
//! 76+T+P  32    MAC: keyed BLAKE3 (the key) over bytes 0..76+T+P
//! 108+T+P  L    payload (the [`Body`])
//! ```
//!
//! The MAC covers every field (the payload through its digest). All
//! integers are little endian.

use crate::key::Key;
use crate::position::Position;
use crate::verify::Refusal;

pub const MAGIC: [u8; 4] = *b"NFKU";
/// The format this crate writes and reads.
pub const FORMAT: u8 = 1;
pub const NONCE_LEN: usize = 16;
/// Bytes before the target id.
pub const HEADER_LEN: usize = 44;
/// The digest's and the MAC's length.
pub const HASH_LEN: usize = 32;
/// The largest payload.
pub const MAX_PAYLOAD: usize = 16 << 20;
/// The longest target id and position name.
pub const MAX_NAME: usize = 255;

/// What code a code update carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeFormat {
    /// A chain script's source (the switch compiles it for its hook).
    ChainScript = 1,
    /// A chain object: the eBPF ELF object `nfkit compile -o` writes,
    /// with the script's manifest (the switch loads it without
    /// compiling).
    Object = 2,
}

impl CodeFormat {
    fn from_code(c: u8) -> Option<CodeFormat> {
        match c {
            1 => Some(CodeFormat::ChainScript),
            2 => Some(CodeFormat::Object),
            _ => None,
        }
    }
}

/// What an update does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// New code for the position (`name`: its file name, for messages).
    Code {
        format: CodeFormat,
        name: String,
        bytes: Vec<u8>,
    },
    /// Sets `key` to `value` in a map (or a table) of the position.
    EntrySet {
        map: String,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Deletes `key` from a map (or a table) of the position.
    EntryDelete { map: String, key: Vec<u8> },
}

impl Body {
    /// The kind's code in the header.
    pub fn kind(&self) -> u8 {
        match self {
            Body::Code { .. } => 1,
            Body::EntrySet { .. } => 2,
            Body::EntryDelete { .. } => 3,
        }
    }

    /// A short name of the kind (`code`, `entry_set`, `entry_delete`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Body::Code { .. } => "code",
            Body::EntrySet { .. } => "entry_set",
            Body::EntryDelete { .. } => "entry_delete",
        }
    }

    /// The payload bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        match self {
            Body::Code {
                format,
                name,
                bytes,
            } => {
                p.push(*format as u8);
                put_name16(&mut p, name);
                p.extend_from_slice(bytes);
            }
            Body::EntrySet { map, key, value } => {
                put_name16(&mut p, map);
                p.extend_from_slice(&(key.len() as u32).to_le_bytes());
                p.extend_from_slice(key);
                p.extend_from_slice(value);
            }
            Body::EntryDelete { map, key } => {
                put_name16(&mut p, map);
                p.extend_from_slice(key);
            }
        }
        p
    }

    /// The body of kind `kind` in `payload`.
    pub fn decode(kind: u8, payload: &[u8]) -> Result<Body, Refusal> {
        let bad = |why: &str| Refusal::BadBody(why.to_string());
        let mut r = Reader(payload);
        match kind {
            1 => {
                let format = r.u8().ok_or_else(|| bad("no code format"))?;
                let format = CodeFormat::from_code(format)
                    .ok_or_else(|| bad(&format!("unknown code format {format}")))?;
                let name = r.name16().ok_or_else(|| bad("bad code name"))?;
                Ok(Body::Code {
                    format,
                    name,
                    bytes: r.0.to_vec(),
                })
            }
            2 => {
                let map = r.name16().ok_or_else(|| bad("bad map name"))?;
                let n = r.u32().ok_or_else(|| bad("no key length"))? as usize;
                let key = r
                    .take(n)
                    .ok_or_else(|| bad("key longer than the payload"))?;
                Ok(Body::EntrySet {
                    map,
                    key: key.to_vec(),
                    value: r.0.to_vec(),
                })
            }
            3 => {
                let map = r.name16().ok_or_else(|| bad("bad map name"))?;
                Ok(Body::EntryDelete {
                    map,
                    key: r.0.to_vec(),
                })
            }
            k => Err(Refusal::Malformed(format!("unknown kind {k}"))),
        }
    }
}

fn put_name16(p: &mut Vec<u8>, name: &str) {
    let n = name.len().min(usize::from(u16::MAX));
    p.extend_from_slice(&(n as u16).to_le_bytes());
    p.extend_from_slice(&name.as_bytes()[..n]);
}

/// Reads fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn name16(&mut self) -> Option<String> {
        let n = usize::from(self.u16()?);
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
}

/// An update: where it goes, its version and what it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The switch it is for (its name).
    pub target: String,
    pub position: Position,
    /// Must be above the position's current version.
    pub version: u64,
    /// Random, never reused: a message seen once is refused again.
    pub nonce: [u8; NONCE_LEN],
    pub body: Body,
}

/// Why a message could not be written.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("target switch id must be 1 to {MAX_NAME} bytes (got {0})")]
    Target(usize),
    #[error("position name must be at most {MAX_NAME} bytes (got {0})")]
    PositionName(usize),
    #[error("payload of {0} bytes is over the limit of {MAX_PAYLOAD}")]
    Payload(usize),
    #[error("no random nonce from the system: {0}")]
    Random(String),
}

impl Message {
    /// A message with a fresh random nonce.
    pub fn new(
        target: &str,
        position: Position,
        version: u64,
        body: Body,
    ) -> Result<Message, EncodeError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::getrandom(&mut nonce).map_err(|e| EncodeError::Random(e.to_string()))?;
        Ok(Message {
            target: target.to_string(),
            position,
            version,
            nonce,
            body,
        })
    }

    /// The message signed with `key`: the bytes to send.
    pub fn seal(&self, key: &Key) -> Result<Vec<u8>, EncodeError> {
        let (mut out, signed) = self.encode(key.id)?;
        let mac = key.mac(&out[..signed]);
        out[signed..signed + HASH_LEN].copy_from_slice(mac.as_bytes());
        Ok(out)
    }

    /// The message with key id 0 and no MAC (zeros): what an
    /// unauthenticated sender would send.
    pub fn unsigned(&self) -> Result<Vec<u8>, EncodeError> {
        Ok(self.encode(0)?.0)
    }

    /// The bytes with a zero MAC, and where the MAC goes.
    fn encode(&self, key_id: u32) -> Result<(Vec<u8>, usize), EncodeError> {
        let target = self.target.as_bytes();
        let pname = self.position.name().as_bytes();
        if target.is_empty() || target.len() > MAX_NAME {
            return Err(EncodeError::Target(target.len()));
        }
        if pname.len() > MAX_NAME {
            return Err(EncodeError::PositionName(pname.len()));
        }
        let payload = self.body.encode();
        if payload.len() > MAX_PAYLOAD {
            return Err(EncodeError::Payload(payload.len()));
        }
        let mut out = Vec::with_capacity(
            HEADER_LEN + target.len() + pname.len() + 2 * HASH_LEN + payload.len(),
        );
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&[FORMAT, self.body.kind(), self.position.code(), 0]);
        out.extend_from_slice(&key_id.to_le_bytes());
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&(target.len() as u16).to_le_bytes());
        out.extend_from_slice(&(pname.len() as u16).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(target);
        out.extend_from_slice(pname);
        out.extend_from_slice(blake3::hash(&payload).as_bytes());
        let signed = out.len();
        out.extend_from_slice(&[0u8; HASH_LEN]);
        out.extend_from_slice(&payload);
        Ok((out, signed))
    }
}

/// A message's fields as read, before it is authenticated: nothing in
/// it is to be trusted until [`crate::Verifier::check`] says so.
#[derive(Clone, Debug)]
pub struct Parsed<'a> {
    pub kind: u8,
    pub position: Position,
    pub key_id: u32,
    pub version: u64,
    pub nonce: [u8; NONCE_LEN],
    pub target: &'a str,
    pub digest: [u8; HASH_LEN],
    pub mac: [u8; HASH_LEN],
    /// The bytes the MAC covers.
    pub signed: &'a [u8],
    pub payload: &'a [u8],
}

/// Reads the structure of a message: refuses anything shorter than its
/// lengths say ([`Refusal::Truncated`]), longer, or with an unknown
/// magic, format, kind, position or flag ([`Refusal::Malformed`]).
pub fn parse(bytes: &[u8]) -> Result<Parsed<'_>, Refusal> {
    let malformed = |why: String| Refusal::Malformed(why);
    if bytes.len() >= 4 && bytes[..4] != MAGIC {
        return Err(malformed("not an update message (bad magic)".into()));
    }
    if bytes.len() < HEADER_LEN {
        return Err(Refusal::Truncated {
            need: HEADER_LEN,
            got: bytes.len(),
        });
    }
    let mut r = Reader(&bytes[4..HEADER_LEN]);
    let (format, kind, pcode, flags) = (
        r.u8().unwrap_or_default(),
        r.u8().unwrap_or_default(),
        r.u8().unwrap_or_default(),
        r.u8().unwrap_or_default(),
    );
    if format != FORMAT {
        return Err(malformed(format!(
            "message format {format}, this switch reads format {FORMAT}"
        )));
    }
    if !(1..=3).contains(&kind) {
        return Err(malformed(format!("unknown kind {kind}")));
    }
    if flags != 0 {
        return Err(malformed(format!("unknown flags {flags:#04x}")));
    }
    let key_id = r.u32().unwrap_or_default();
    let version =
        u64::from(r.u32().unwrap_or_default()) | u64::from(r.u32().unwrap_or_default()) << 32;
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(r.take(NONCE_LEN).unwrap_or(&[0; NONCE_LEN]));
    let tlen = usize::from(r.u16().unwrap_or_default());
    let plen = usize::from(r.u16().unwrap_or_default());
    let llen = r.u32().unwrap_or_default() as usize;
    if tlen == 0 || tlen > MAX_NAME {
        return Err(malformed(format!("target length {tlen} (1..={MAX_NAME})")));
    }
    if plen > MAX_NAME {
        return Err(malformed(format!(
            "position name length {plen} (at most {MAX_NAME})"
        )));
    }
    if llen > MAX_PAYLOAD {
        return Err(malformed(format!(
            "payload length {llen} (at most {MAX_PAYLOAD})"
        )));
    }
    let signed_len = HEADER_LEN + tlen + plen + HASH_LEN;
    let total = signed_len + HASH_LEN + llen;
    if bytes.len() < total {
        return Err(Refusal::Truncated {
            need: total,
            got: bytes.len(),
        });
    }
    if bytes.len() > total {
        return Err(malformed(format!(
            "{} bytes after the message's {total}",
            bytes.len() - total
        )));
    }
    let mut r = Reader(&bytes[HEADER_LEN..]);
    let target = r
        .take(tlen)
        .and_then(|t| std::str::from_utf8(t).ok())
        .ok_or_else(|| malformed("target id is not UTF-8".into()))?;
    let pname = r
        .take(plen)
        .and_then(|t| std::str::from_utf8(t).ok())
        .ok_or_else(|| malformed("position name is not UTF-8".into()))?;
    let position = Position::from_parts(pcode, pname)
        .ok_or_else(|| malformed(format!("unknown position {pcode} `{pname}`")))?;
    let mut digest = [0u8; HASH_LEN];
    digest.copy_from_slice(r.take(HASH_LEN).unwrap_or(&[0; HASH_LEN]));
    let mut mac = [0u8; HASH_LEN];
    mac.copy_from_slice(r.take(HASH_LEN).unwrap_or(&[0; HASH_LEN]));
    Ok(Parsed {
        kind,
        position,
        key_id,
        version,
        nonce,
        target,
        digest,
        mac,
        signed: &bytes[..signed_len],
        payload: r.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(body: Body) -> Message {
        Message {
            target: "sw0".into(),
            position: Position::Pre,
            version: 7,
            nonce: [9; NONCE_LEN],
            body,
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let key = Key::new(5, [1; 32]).expect("key");
        let m = msg(Body::Code {
            format: CodeFormat::ChainScript,
            name: "a.py".into(),
            bytes: b"x = 1\n".to_vec(),
        });
        let b = m.seal(&key).expect("seal");
        assert_eq!(&b[..4], b"NFKU");
        assert_eq!(&b[4..8], &[1, 1, 1, 0]);
        assert_eq!(&b[8..12], &5u32.to_le_bytes());
        assert_eq!(&b[12..20], &7u64.to_le_bytes());
        assert_eq!(&b[20..36], &[9; 16]);
        assert_eq!(&b[36..38], &3u16.to_le_bytes());
        assert_eq!(&b[38..40], &0u16.to_le_bytes());
        let payload = m.body.encode();
        assert_eq!(&b[40..44], &(payload.len() as u32).to_le_bytes());
        assert_eq!(&b[44..47], b"sw0");
        assert_eq!(&b[47..79], blake3::hash(&payload).as_bytes());
        assert_eq!(&b[79..111], key.mac(&b[..79]).as_bytes());
        assert_eq!(&b[111..], &payload[..]);
        let p = parse(&b).expect("parse");
        assert_eq!(p.target, "sw0");
        assert_eq!(p.version, 7);
        assert_eq!(Body::decode(p.kind, p.payload).expect("body"), m.body);
    }

    #[test]
    fn every_body_round_trips() {
        for body in [
            Body::Code {
                format: CodeFormat::Object,
                name: String::new(),
                bytes: vec![0x7f, b'E'],
            },
            Body::EntrySet {
                map: "acl".into(),
                key: vec![1, 2, 3, 4],
                value: vec![5; 8],
            },
            Body::EntryDelete {
                map: "acl".into(),
                key: vec![],
            },
        ] {
            assert_eq!(
                Body::decode(body.kind(), &body.encode()).expect("decode"),
                body
            );
        }
        assert!(matches!(
            Body::decode(1, &[9]),
            Err(Refusal::BadBody(e)) if e.contains("code format 9")
        ));
        assert!(matches!(
            Body::decode(2, &[1, 0, b'm', 200, 0, 0, 0, 1]),
            Err(Refusal::BadBody(_))
        ));
    }

    #[test]
    fn structure_is_checked() {
        let key = Key::new(1, [2; 32]).expect("key");
        let mut m = msg(Body::EntryDelete {
            map: "m".into(),
            key: vec![1],
        });
        m.position = Position::Table("acl".into());
        let b = m.seal(&key).expect("seal");
        assert_eq!(parse(&b).expect("parse").position, m.position);
        for cut in [0, 3, 10, 43, 44, b.len() - 1] {
            assert!(
                matches!(parse(&b[..cut]), Err(Refusal::Truncated { .. })),
                "cut at {cut}"
            );
        }
        let mut long = b.clone();
        long.push(0);
        assert!(matches!(parse(&long), Err(Refusal::Malformed(_))));
        for (at, v) in [(0, b'X'), (4, 2), (5, 4), (6, 9), (7, 1)] {
            let mut bad = b.clone();
            bad[at] = v;
            assert!(
                matches!(parse(&bad), Err(Refusal::Malformed(_))),
                "byte {at} = {v}"
            );
        }
        assert!(matches!(
            msg(Body::EntryDelete {
                map: String::new(),
                key: vec![]
            })
            .with_target("")
            .seal(&key),
            Err(EncodeError::Target(0))
        ));
    }

    impl Message {
        fn with_target(mut self, t: &str) -> Message {
            self.target = t.into();
            self
        }
    }
}

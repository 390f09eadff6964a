//! The `--flows` format: flows separated by `;`, each a comma-separated
//! list of `key=value`:
//!
//! ```text
//! proto=udp,src=198.18.1.1,dst=198.18.2.2,sport=1000,dport=53,len=64,weight=2;
//! proto=tcp,flags=syn,src=2001:db8::1,dst=2001:db8::2,dport=80,dscp=46,ttl=3;
//! src=198.18.1.1,dst=198.18.2.2,len=20,payload=text:GET /
//! ```
//!
//! Keys: `proto` (`udp`, default, or `tcp`), `src`, `dst` (required, same
//! family), `sport`, `dport` (default 1024 and 9), `len` (payload bytes,
//! default 32, at least 16 with `--seq`), `ttl` (IPv4 TTL or IPv6 hop
//! limit, 0-255, default 64), `tos` (the whole IPv4 type-of-service byte
//! or IPv6 traffic class, 0-255, default 0) or `dscp` (0-63, sets `tos`
//! to `dscp << 2`; not both), `payload` (`hex:DEADBEEF` bytes or
//! `text:GET /` UTF-8 text, repeated and cut to fill `len` bytes; default
//! zeros; text cannot hold `,` or `;` and its ends are trimmed), `flags`
//! (TCP: `syn`, `ack`, `synack`, `rst`, `fin`, or a number; default
//! `syn`), `smac`, `dmac` (default: the sending interface's address and
//! broadcast), `weight` (frames of this flow per round, default 1).
//! Numbers for `tos`, `dscp`, `ttl` and `flags` may be written `0x..`.
//!
//! With `--seq`, the sequence stamp replaces the first 16 bytes of a UDP
//! payload (see [`seq`](crate::seq)); a payload pattern shows from byte
//! 16 on (its bytes stay where the pattern put them).
//!
//! Errors name the flow (from 1) and the key.

use crate::error::TrafficError;
use crate::frame::{FrameSpec, Mac, Proto};
use std::net::IpAddr;

/// One flow: its frame (source MAC left `None` when the sender should
/// use the interface's own) and how many frames it sends per round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    pub spec: FrameSpec,
    /// `smac=` was given.
    pub src_mac_given: bool,
    pub weight: u32,
}

/// Parses a `--flows` text.
pub fn parse_flows(text: &str) -> Result<Vec<Flow>, TrafficError> {
    let mut flows = Vec::new();
    for (i, part) in text
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .enumerate()
    {
        flows.push(parse_one(part).map_err(|msg| TrafficError::Spec {
            flow: i + 1,
            text: part.to_string(),
            msg,
        })?);
    }
    if flows.is_empty() {
        return Err(TrafficError::Empty("the flow list is empty".into()));
    }
    Ok(flows)
}

/// A byte in decimal or `0x` hex.
fn byte(v: &str) -> Option<u8> {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The bytes of a `payload=` pattern (`hex:..` or `text:..`), not empty.
fn pattern(v: &str) -> Result<Vec<u8>, String> {
    let bytes = if let Some(h) = v.strip_prefix("hex:") {
        let h: String = h.chars().filter(|c| !c.is_whitespace()).collect();
        let h = h
            .strip_prefix("0x")
            .or_else(|| h.strip_prefix("0X"))
            .unwrap_or(&h);
        let pairs = h.as_bytes().chunks_exact(2);
        if !pairs.remainder().is_empty() {
            return Err("hex pattern of an odd number of digits".into());
        }
        pairs
            .map(|d| {
                std::str::from_utf8(d)
                    .ok()
                    .and_then(|d| u8::from_str_radix(d, 16).ok())
                    .ok_or_else(|| format!("`{}` is not a hex byte", String::from_utf8_lossy(d)))
            })
            .collect::<Result<Vec<u8>, String>>()?
    } else if let Some(t) = v.strip_prefix("text:") {
        t.as_bytes().to_vec()
    } else {
        return Err("a payload pattern is hex:BYTES or text:TEXT".into());
    };
    if bytes.is_empty() {
        return Err("empty payload pattern".into());
    }
    Ok(bytes)
}

fn parse_one(text: &str) -> Result<Flow, String> {
    let (mut proto, mut flags) = ("udp".to_string(), 0x02u8);
    let (mut src, mut dst): (Option<IpAddr>, Option<IpAddr>) = (None, None);
    let (mut sport, mut dport, mut len, mut ttl, mut weight) = (1024u16, 9u16, 32usize, 64u8, 1u32);
    let (mut smac, mut dmac) = (None, Mac::BROADCAST);
    let (mut tos, mut dscp, mut fill): (Option<u8>, Option<u8>, Option<Vec<u8>>) =
        (None, None, None);
    for kv in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("`{kv}` is not key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        let bad = |what: &str| format!("{k}=`{v}`: {what}");
        match k {
            "proto" => match v {
                "udp" | "tcp" => proto = v.to_string(),
                _ => return Err(bad("protocol is udp or tcp")),
            },
            "src" => src = Some(v.parse().map_err(|_| bad("not an IP address"))?),
            "dst" => dst = Some(v.parse().map_err(|_| bad("not an IP address"))?),
            "sport" => sport = v.parse().map_err(|_| bad("not a port (0-65535)"))?,
            "dport" => dport = v.parse().map_err(|_| bad("not a port (0-65535)"))?,
            "len" => {
                len = v.parse().map_err(|_| bad("not a length"))?;
                if len > 9000 {
                    return Err(bad("payload longer than 9000 bytes"));
                }
            }
            "ttl" => ttl = byte(v).ok_or_else(|| bad("not a TTL or hop limit (0-255)"))?,
            "tos" => tos = Some(byte(v).ok_or_else(|| bad("not a ToS byte (0-255)"))?),
            "dscp" => {
                dscp = Some(
                    byte(v)
                        .filter(|d| *d <= 63)
                        .ok_or_else(|| bad("not a DSCP (0-63)"))?,
                )
            }
            "payload" => fill = Some(pattern(v).map_err(|e| bad(&e))?),
            "weight" => {
                weight = v.parse().map_err(|_| bad("not a weight"))?;
                if weight == 0 || weight > 1_000_000 {
                    return Err(bad("weight is 1..1000000"));
                }
            }
            "flags" => {
                flags = match v {
                    "syn" => 0x02,
                    "ack" => 0x10,
                    "synack" => 0x12,
                    "rst" => 0x04,
                    "fin" => 0x11,
                    n => byte(n).ok_or_else(|| bad("TCP flags: syn, ack, synack, rst, fin or a number"))?,
                }
            }
            "smac" => smac = Some(v.parse::<Mac>().map_err(|e| bad(&e))?),
            "dmac" => dmac = v.parse::<Mac>().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown key `{k}` (proto, src, dst, sport, dport, len, ttl, tos, dscp, payload, flags, smac, dmac, weight)")),
        }
    }
    let src = src.ok_or("src= is required")?;
    let dst = dst.ok_or("dst= is required")?;
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(format!("src {src} and dst {dst} are of different families"));
    }
    let tos = match (tos, dscp) {
        (Some(_), Some(_)) => return Err("tos= and dscp= both given (dscp=N is tos=N<<2)".into()),
        (Some(t), None) => t,
        (None, Some(d)) => d << 2,
        (None, None) => 0,
    };
    let payload = match fill {
        Some(p) => p.iter().copied().cycle().take(len).collect(),
        None => vec![0u8; len],
    };
    let proto = if proto == "tcp" {
        Proto::Tcp { flags }
    } else {
        Proto::Udp
    };
    Ok(Flow {
        spec: FrameSpec {
            src_mac: smac.unwrap_or(Mac([0; 6])),
            dst_mac: dmac,
            src,
            dst,
            proto,
            sport,
            dport,
            ttl,
            tos,
            payload,
        },
        src_mac_given: smac.is_some(),
        weight,
    })
}

//! The `--flows` format: flows separated by `;`, each a comma-separated
//! list of `key=value`:
//!
//! ```text
//! proto=udp,src=198.18.1.1,dst=198.18.2.2,sport=1000,dport=53,len=64,weight=2;
//! proto=tcp,flags=syn,src=2001:db8::1,dst=2001:db8::2,dport=80
//! ```
//!
//! Keys: `proto` (`udp`, default, or `tcp`), `src`, `dst` (required, same
//! family), `sport`, `dport` (default 1024 and 9), `len` (payload bytes,
//! default 32, at least 16 with `--seq`), `ttl` (64), `flags` (TCP:
//! `syn`, `ack`, `synack`, `rst`, `fin`, or a number; default `syn`),
//! `smac`, `dmac` (default: the sending interface's address and
//! broadcast), `weight` (frames of this flow per round, default 1).

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

fn parse_one(text: &str) -> Result<Flow, String> {
    let (mut proto, mut flags) = ("udp".to_string(), 0x02u8);
    let (mut src, mut dst): (Option<IpAddr>, Option<IpAddr>) = (None, None);
    let (mut sport, mut dport, mut len, mut ttl, mut weight) = (1024u16, 9u16, 32usize, 64u8, 1u32);
    let (mut smac, mut dmac) = (None, Mac::BROADCAST);
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
            "ttl" => ttl = v.parse().map_err(|_| bad("not a TTL (0-255)"))?,
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
                    n => n.parse().map_err(|_| bad("TCP flags: syn, ack, synack, rst, fin or a number"))?,
                }
            }
            "smac" => smac = Some(v.parse::<Mac>().map_err(|e| bad(&e))?),
            "dmac" => dmac = v.parse::<Mac>().map_err(|e| bad(&e))?,
            _ => return Err(format!("unknown key `{k}` (proto, src, dst, sport, dport, len, ttl, flags, smac, dmac, weight)")),
        }
    }
    let src = src.ok_or("src= is required")?;
    let dst = dst.ok_or("dst= is required")?;
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(format!("src {src} and dst {dst} are of different families"));
    }
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
            payload: vec![0u8; len],
        },
        src_mac_given: smac.is_some(),
        weight,
    })
}

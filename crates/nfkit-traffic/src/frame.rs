//! Ethernet frames carrying UDP or TCP over IPv4 or IPv6, with correct
//! IP, UDP and TCP checksums, and the reverse: the few fields a receiver
//! counts by.

use crate::error::TrafficError;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

pub const ETH_HLEN: usize = 14;
pub const ETH_P_IPV4: u16 = 0x0800;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
const IPV4_HLEN: usize = 20;
const IPV6_HLEN: usize = 40;
const UDP_HLEN: usize = 8;
const TCP_HLEN: usize = 20;

/// An Ethernet address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    pub const BROADCAST: Mac = Mac([0xff; 6]);
}

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for Mac {
    type Err = String;
    fn from_str(s: &str) -> Result<Mac, String> {
        let mut out = [0u8; 6];
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(format!(
                "`{s}` is not a MAC address (six hex bytes with ':')"
            ));
        }
        for (o, p) in out.iter_mut().zip(parts) {
            *o = u8::from_str_radix(p, 16)
                .map_err(|_| format!("`{s}` is not a MAC address (bad byte `{p}`)"))?;
        }
        Ok(Mac(out))
    }
}

/// Transport protocol of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Udp,
    /// TCP with these flags (e.g. 0x02 SYN, 0x10 ACK).
    Tcp {
        flags: u8,
    },
}

/// Everything a frame is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    pub src_mac: Mac,
    pub dst_mac: Mac,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: Proto,
    pub sport: u16,
    pub dport: u16,
    /// IPv4 TTL, IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 type-of-service byte, IPv6 traffic class (DSCP << 2 | ECN).
    pub tos: u8,
    /// Transport payload (after the UDP or TCP header).
    pub payload: Vec<u8>,
}

/// Builds the frame `spec` describes: Ethernet, IPv4 (no options, DF
/// clear, id 0) or IPv6 (no extension headers), then UDP or TCP (no
/// options, sequence 1, window 65535), all checksums filled in.
pub fn build(spec: &FrameSpec) -> Result<Vec<u8>, TrafficError> {
    let l4_len = match spec.proto {
        Proto::Udp => UDP_HLEN,
        Proto::Tcp { .. } => TCP_HLEN,
    } + spec.payload.len();
    let mut l4 = Vec::with_capacity(l4_len);
    let l4_len16 = u16::try_from(l4_len).map_err(|_| {
        TrafficError::Frame(format!(
            "payload of {} bytes is too large",
            spec.payload.len()
        ))
    })?;
    match spec.proto {
        Proto::Udp => {
            l4.extend_from_slice(&spec.sport.to_be_bytes());
            l4.extend_from_slice(&spec.dport.to_be_bytes());
            l4.extend_from_slice(&l4_len16.to_be_bytes());
            l4.extend_from_slice(&[0, 0]);
        }
        Proto::Tcp { flags } => {
            l4.extend_from_slice(&spec.sport.to_be_bytes());
            l4.extend_from_slice(&spec.dport.to_be_bytes());
            l4.extend_from_slice(&1u32.to_be_bytes()); // sequence
            let ack: u32 = if flags & 0x10 != 0 { 1 } else { 0 };
            l4.extend_from_slice(&ack.to_be_bytes());
            l4.push(((TCP_HLEN / 4) as u8) << 4);
            l4.push(flags);
            l4.extend_from_slice(&0xffffu16.to_be_bytes()); // window
            l4.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        }
    }
    l4.extend_from_slice(&spec.payload);

    let proto_num = match spec.proto {
        Proto::Udp => IPPROTO_UDP,
        Proto::Tcp { .. } => IPPROTO_TCP,
    };
    let mut frame = Vec::with_capacity(ETH_HLEN + IPV6_HLEN + l4.len());
    frame.extend_from_slice(&spec.dst_mac.0);
    frame.extend_from_slice(&spec.src_mac.0);
    let csum = match (spec.src, spec.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = u16::try_from(IPV4_HLEN + l4.len())
                .map_err(|_| TrafficError::Frame("IPv4 packet longer than 65535 bytes".into()))?;
            frame.extend_from_slice(&ETH_P_IPV4.to_be_bytes());
            let mut ip = [0u8; IPV4_HLEN];
            ip[0] = 0x45;
            ip[1] = spec.tos;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[8] = spec.ttl;
            ip[9] = proto_num;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            let c = checksum(&[&ip]);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            frame.extend_from_slice(&ip);
            let mut pseudo = [0u8; 12];
            pseudo[0..4].copy_from_slice(&s.octets());
            pseudo[4..8].copy_from_slice(&d.octets());
            pseudo[9] = proto_num;
            pseudo[10..12].copy_from_slice(&l4_len16.to_be_bytes());
            checksum(&[&pseudo, &l4])
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            frame.extend_from_slice(&ETH_P_IPV6.to_be_bytes());
            let mut ip = [0u8; IPV6_HLEN];
            // Version 6, traffic class across bytes 0-1, flow label 0.
            ip[0] = 0x60 | (spec.tos >> 4);
            ip[1] = (spec.tos & 0x0f) << 4;
            ip[4..6].copy_from_slice(&l4_len16.to_be_bytes());
            ip[6] = proto_num;
            ip[7] = spec.ttl;
            ip[8..24].copy_from_slice(&s.octets());
            ip[24..40].copy_from_slice(&d.octets());
            frame.extend_from_slice(&ip);
            let mut pseudo = [0u8; 40];
            pseudo[0..16].copy_from_slice(&s.octets());
            pseudo[16..32].copy_from_slice(&d.octets());
            pseudo[32..36].copy_from_slice(&(l4_len as u32).to_be_bytes());
            pseudo[39] = proto_num;
            checksum(&[&pseudo, &l4])
        }
        _ => {
            return Err(TrafficError::Frame(format!(
                "source {} and destination {} are of different address families",
                spec.src, spec.dst
            )))
        }
    };
    // UDP sends an all-zero checksum as 0xffff (zero means "none").
    let csum = match (spec.proto, csum) {
        (Proto::Udp, 0) => 0xffff,
        (_, c) => c,
    };
    let at = match spec.proto {
        Proto::Udp => 6,
        Proto::Tcp { .. } => 16,
    };
    if let Some(slot) = l4.get_mut(at..at + 2) {
        slot.copy_from_slice(&csum.to_be_bytes());
    }
    frame.extend_from_slice(&l4);
    Ok(frame)
}

/// The Internet checksum (RFC 1071) of the concatenation of `parts`
/// (each part but the last of even length).
pub fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        let mut chunks = part.chunks_exact(2);
        for c in &mut chunks {
            sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u64::from(*last) << 8;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The fields of a frame a receiver counts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol number.
    pub proto: u8,
    /// UDP payload (empty for other protocols or truncated frames).
    pub udp_payload: &'a [u8],
}

/// Parses an Ethernet frame carrying IPv4 or IPv6 (one 802.1Q tag
/// allowed); `None` for anything else or a truncated header.
pub fn parse(frame: &[u8]) -> Option<Parsed<'_>> {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    off += 2;
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(off + 2)?, *frame.get(off + 3)?]);
        off += 4;
    }
    let (src, dst, proto, l4) = match ethertype {
        ETH_P_IPV4 => {
            let ip = frame.get(off..off + IPV4_HLEN)?;
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let s: [u8; 4] = ip[12..16].try_into().ok()?;
            let d: [u8; 4] = ip[16..20].try_into().ok()?;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let end = (off + total).min(frame.len());
            let l4 = frame.get(off + ihl..end).unwrap_or(&[]);
            (IpAddr::from(s), IpAddr::from(d), ip[9], l4)
        }
        ETH_P_IPV6 => {
            let ip = frame.get(off..off + IPV6_HLEN)?;
            let s: [u8; 16] = ip[8..24].try_into().ok()?;
            let d: [u8; 16] = ip[24..40].try_into().ok()?;
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            let start = off + IPV6_HLEN;
            let end = (start + plen).min(frame.len());
            let l4 = frame.get(start..end).unwrap_or(&[]);
            (IpAddr::from(s), IpAddr::from(d), ip[6], l4)
        }
        _ => return None,
    };
    let udp_payload = if proto == IPPROTO_UDP {
        l4.get(UDP_HLEN..).unwrap_or(&[])
    } else {
        &[]
    };
    Some(Parsed {
        src,
        dst,
        proto,
        udp_payload,
    })
}

/// Where the UDP header starts in `frame` (IPv4 without or with options,
/// IPv6 without extension headers); `None` if the frame is not UDP.
pub(crate) fn udp_offset(frame: &[u8]) -> Option<(usize, bool)> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    match ethertype {
        ETH_P_IPV4 => {
            let vihl = *frame.get(ETH_HLEN)?;
            (*frame.get(ETH_HLEN + 9)? == IPPROTO_UDP)
                .then_some((ETH_HLEN + usize::from(vihl & 0x0f) * 4, false))
        }
        ETH_P_IPV6 => {
            (*frame.get(ETH_HLEN + 6)? == IPPROTO_UDP).then_some((ETH_HLEN + IPV6_HLEN, true))
        }
        _ => None,
    }
}

//! Tunnel metadata of a socket buffer (`bpf_skb_set_tunnel_key`,
//! `bpf_skb_get_tunnel_key`), kept as the kernel keeps it in the skb's
//! metadata dst (`struct ip_tunnel_info`): `src`/`dst` of the outer
//! header. A packet received from a tunnel device carries it (the run's
//! [`RunOptions::tunnel_key`](crate::RunOptions::tunnel_key)); a program
//! sets it for the tunnel device it redirects to. `get` reports `src` as
//! `remote` and `dst` as `local`, whichever way the key came, as the
//! kernel does.

#![forbid(unsafe_code)]

use std::fmt;
use std::net::IpAddr;

/// `struct ip_tunnel_info` as far as the helpers see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunnelKey {
    /// Set by the program (transmit metadata) rather than received.
    pub tx: bool,
    pub id: u64,
    /// Outer source address (a received packet's remote end).
    pub src: IpAddr,
    /// Outer destination address.
    pub dst: IpAddr,
    pub tos: u8,
    pub ttl: u8,
    /// IPv6 flow label.
    pub label: u32,
    /// `TUNNEL_*` flags (`TUNNEL_CSUM` = 1, `TUNNEL_KEY` = 4,
    /// `TUNNEL_SEQ` = 8, `TUNNEL_DONT_FRAGMENT` = 0x100, `TUNNEL_NOCACHE`
    /// = 0x2000).
    pub flags: u16,
    /// Tunnel options (`bpf_skb_set_tunnel_opt`), at most 255 bytes.
    pub options: Vec<u8>,
}

impl TunnelKey {
    /// Received metadata: a packet from `remote` to `local` with key `id`
    /// (flags `TUNNEL_KEY`).
    pub fn received(id: u64, remote: IpAddr, local: IpAddr) -> TunnelKey {
        TunnelKey {
            tx: false,
            id,
            src: remote,
            dst: local,
            tos: 0,
            ttl: 64,
            label: 0,
            flags: TUNNEL_KEY,
            options: Vec::new(),
        }
    }

    /// Reads `id=5,remote=198.18.0.2,local=198.18.0.1[,tos=N][,ttl=N]
    /// [,label=N]` (the form `--tunnel-key` takes).
    pub fn parse(s: &str) -> Result<TunnelKey, String> {
        let (mut id, mut remote, mut local) = (None, None, None);
        let (mut tos, mut ttl, mut label) = (0u8, 64u8, 0u32);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` is not KEY=VALUE"))?;
            let num = |v: &str| -> Result<u64, String> {
                let r = match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16),
                    None => v.parse(),
                };
                r.map_err(|_| format!("`{v}` is not a number"))
            };
            let addr = |v: &str| -> Result<IpAddr, String> {
                v.parse().map_err(|_| format!("`{v}` is not an address"))
            };
            match k {
                "id" => id = Some(num(v)?),
                "remote" => remote = Some(addr(v)?),
                "local" => local = Some(addr(v)?),
                "tos" => tos = num(v)? as u8,
                "ttl" => ttl = num(v)? as u8,
                "label" => label = num(v)? as u32 & 0xfffff,
                other => return Err(format!("unknown tunnel key field `{other}`")),
            }
        }
        let remote = remote.ok_or("a tunnel key needs remote=ADDRESS")?;
        let local = local.unwrap_or(if remote.is_ipv6() {
            IpAddr::from([0u16; 8])
        } else {
            IpAddr::from([0u8; 4])
        });
        if remote.is_ipv6() != local.is_ipv6() {
            return Err("remote and local are of different families".into());
        }
        let mut k = TunnelKey::received(id.unwrap_or(0), remote, local);
        k.tos = tos;
        k.ttl = ttl;
        k.label = label;
        Ok(k)
    }

    pub fn is_ipv6(&self) -> bool {
        self.src.is_ipv6()
    }
}

impl fmt::Display for TunnelKey {
    /// `set: id 5 remote 198.18.0.2 local 198.18.0.1 tos 0 ttl 64 flags 0x2005`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (remote, local) = if self.tx {
            (self.dst, self.src)
        } else {
            (self.src, self.dst)
        };
        write!(
            f,
            "{}: id {} remote {remote} local {local} tos {} ttl {}",
            if self.tx { "set" } else { "received" },
            self.id,
            self.tos,
            self.ttl
        )?;
        if self.is_ipv6() {
            write!(f, " label {:#x}", self.label)?;
        }
        write!(f, " flags {:#x}", self.flags)?;
        if !self.options.is_empty() {
            f.write_str(" options ")?;
            for b in &self.options {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}

pub const TUNNEL_CSUM: u16 = 0x1;
pub const TUNNEL_KEY: u16 = 0x4;
pub const TUNNEL_SEQ: u16 = 0x8;
pub const TUNNEL_DONT_FRAGMENT: u16 = 0x100;
pub const TUNNEL_NOCACHE: u16 = 0x2000;
/// `TUNNEL_OPTIONS_PRESENT`: the Geneve, VXLAN, ERSPAN and GTP option bits.
pub const TUNNEL_OPTIONS_PRESENT: u16 = 0x0800 | 0x1000 | 0x4000 | 0x8000;
/// `IP_TUNNEL_OPTS_MAX`.
const OPTS_MAX: usize = 255;
const ENOENT: i64 = 2;
const ENOMEM: i64 = 12;

/// Size of `struct bpf_tunnel_key`.
pub const KEY_SIZE: usize = 44;
/// The older, shorter layouts the kernel still accepts: up to
/// `remote_ipv6[1]`, `tunnel_ext`, `tunnel_label`, `local_ipv6`.
const COMPAT_SIZES: [usize; 4] = [8, 22, 24, 28];

/// A key size `bpf_skb_set_tunnel_key` accepts.
pub fn valid_size(size: u64) -> bool {
    size == KEY_SIZE as u64 || COMPAT_SIZES.iter().any(|&c| c as u64 == size)
}

const F_TUNINFO_IPV6: u64 = 1;
const F_ZERO_CSUM_TX: u64 = 1 << 1;
const F_DONT_FRAGMENT: u64 = 1 << 2;
const F_SEQ_NUMBER: u64 = 1 << 3;
const F_NO_TUNNEL_KEY: u64 = 1 << 4;
/// `BPF_F_TUNINFO_FLAGS` (get only; same bit as `NO_TUNNEL_KEY`).
const F_TUNINFO_FLAGS: u64 = 1 << 4;

const EINVAL: i64 = 22;
const EPROTO: i64 = 71;

fn put_addr(b: &mut [u8], at: usize, a: IpAddr) {
    match a {
        // `remote_ipv4` / `local_ipv4` are host-order words.
        IpAddr::V4(v) => b[at..at + 4].copy_from_slice(&u32::from(v).to_le_bytes()),
        IpAddr::V6(v) => b[at..at + 16].copy_from_slice(&v.octets()),
    }
}

fn get_addr(b: &[u8], at: usize, v6: bool) -> IpAddr {
    if v6 {
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[at..at + 16]);
        IpAddr::from(o)
    } else {
        let w = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        IpAddr::from(w.to_be_bytes())
    }
}

/// `bpf_skb_get_tunnel_key(skb, key, size, flags)`: the bytes to write
/// (`size` of them: the key, or zeros on failure) and the return value.
pub fn get(info: Option<&TunnelKey>, size: usize, flags: u64) -> (Vec<u8>, i64) {
    let fail = |e: i64| (vec![0u8; size], -e);
    let Some(info) = info else {
        return fail(EINVAL);
    };
    if flags & !(F_TUNINFO_IPV6 | F_TUNINFO_FLAGS) != 0 {
        return fail(EINVAL);
    }
    let want_v6 = flags & F_TUNINFO_IPV6 != 0;
    if info.is_ipv6() != want_v6 {
        return fail(EPROTO);
    }
    if size != KEY_SIZE {
        let ok = COMPAT_SIZES.contains(&size) && (size != 8 || !info.is_ipv6());
        if !ok {
            return fail(EINVAL);
        }
    }
    let mut k = [0u8; KEY_SIZE];
    k[0..4].copy_from_slice(&(info.id as u32).to_le_bytes());
    k[20] = info.tos;
    k[21] = info.ttl;
    if flags & F_TUNINFO_FLAGS != 0 {
        k[22..24].copy_from_slice(&info.flags.to_be_bytes());
    }
    put_addr(&mut k, 4, info.src);
    put_addr(&mut k, 28, info.dst);
    if want_v6 {
        k[24..28].copy_from_slice(&info.label.to_le_bytes());
    }
    (k[..size].to_vec(), 0)
}

/// `bpf_skb_set_tunnel_key(skb, key, size, flags)` on the key bytes read
/// from the program (`from.len()` = size): the new metadata, or the
/// negative errno.
pub fn set(from: &[u8], flags: u64) -> Result<TunnelKey, i64> {
    if flags & !(F_TUNINFO_IPV6 | F_ZERO_CSUM_TX | F_DONT_FRAGMENT | F_SEQ_NUMBER | F_NO_TUNNEL_KEY)
        != 0
    {
        return Err(-EINVAL);
    }
    if from.len() != KEY_SIZE && !COMPAT_SIZES.contains(&from.len()) {
        return Err(-EINVAL);
    }
    let mut k = [0u8; KEY_SIZE];
    k[..from.len()].copy_from_slice(from);
    let v6 = flags & F_TUNINFO_IPV6 != 0;
    let label = u32::from_le_bytes([k[24], k[25], k[26], k[27]]);
    let ext = u16::from_le_bytes([k[22], k[23]]);
    if (!v6 && label != 0) || ext != 0 {
        return Err(-EINVAL);
    }
    let mut tf = TUNNEL_NOCACHE;
    if flags & F_DONT_FRAGMENT != 0 {
        tf |= TUNNEL_DONT_FRAGMENT;
    }
    if flags & F_ZERO_CSUM_TX == 0 {
        tf |= TUNNEL_CSUM;
    }
    if flags & F_SEQ_NUMBER != 0 {
        tf |= TUNNEL_SEQ;
    }
    if flags & F_NO_TUNNEL_KEY == 0 {
        tf |= TUNNEL_KEY;
    }
    Ok(TunnelKey {
        tx: true,
        id: u64::from(u32::from_le_bytes([k[0], k[1], k[2], k[3]])),
        // The key's remote end is the outer destination.
        dst: get_addr(&k, 4, v6),
        src: get_addr(&k, 28, v6),
        tos: k[20],
        ttl: k[21],
        label: if v6 { label & 0xfffff } else { 0 },
        flags: tf,
        options: Vec::new(),
    })
}

/// `bpf_skb_set_tunnel_opt(skb, opt, size)` on metadata `info`: only on
/// metadata this run's program set, whole 4-byte words, at most 255
/// bytes.
pub fn set_opt(info: Option<&mut TunnelKey>, opt: &[u8]) -> i64 {
    let Some(info) = info.filter(|k| k.tx) else {
        return -EINVAL;
    };
    if !opt.len().is_multiple_of(4) {
        return -EINVAL;
    }
    if opt.len() > OPTS_MAX {
        return -ENOMEM;
    }
    info.options = opt.to_vec();
    if !opt.is_empty() {
        info.flags |= TUNNEL_OPTIONS_PRESENT;
    }
    0
}

/// `bpf_skb_get_tunnel_opt(skb, opt, size)`: the bytes to write (`size`
/// of them) and the return value (the options' length, or an errno).
pub fn get_opt(info: Option<&TunnelKey>, size: usize) -> (Vec<u8>, i64) {
    let mut out = vec![0u8; size];
    let Some(info) = info.filter(|k| k.flags & TUNNEL_OPTIONS_PRESENT != 0) else {
        return (out, -ENOENT);
    };
    if size < info.options.len() {
        return (out, -ENOMEM);
    }
    out[..info.options.len()].copy_from_slice(&info.options);
    (out, info.options.len() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_then_get_swaps_ends_as_the_kernel_does() {
        let mut k = [0u8; KEY_SIZE];
        k[0..4].copy_from_slice(&7u32.to_le_bytes());
        k[4..8].copy_from_slice(&0xc612_0002u32.to_le_bytes());
        k[28..32].copy_from_slice(&0xc612_0001u32.to_le_bytes());
        k[21] = 9;
        let info = set(&k, 0).expect("set");
        assert_eq!(info.dst, "198.18.0.2".parse::<IpAddr>().expect("ip"));
        let (out, rc) = get(Some(&info), KEY_SIZE, F_TUNINFO_FLAGS);
        assert_eq!(rc, 0);
        assert_eq!(&out[4..8], &0xc612_0001u32.to_le_bytes());
        assert_eq!(&out[28..32], &0xc612_0002u32.to_le_bytes());
        assert_eq!(out[21], 9);
        assert_eq!(&out[22..24], &0x2005u16.to_be_bytes());
    }

    #[test]
    fn options_only_on_metadata_the_program_set() {
        let mut rx = TunnelKey::parse("id=1,remote=198.18.0.2").expect("parse");
        assert_eq!(set_opt(Some(&mut rx), &[1, 2, 3, 4]), -EINVAL);
        assert_eq!(get_opt(Some(&rx), 8), (vec![0; 8], -ENOENT));
        let mut tx = set(&[0u8; KEY_SIZE], 0).expect("set");
        assert_eq!(set_opt(Some(&mut tx), &[1, 2, 3]), -EINVAL);
        assert_eq!(set_opt(Some(&mut tx), &[7; 256]), -ENOMEM);
        assert_eq!(set_opt(Some(&mut tx), &[1, 2, 3, 4]), 0);
        assert_eq!(tx.flags & TUNNEL_OPTIONS_PRESENT, TUNNEL_OPTIONS_PRESENT);
        assert_eq!(get_opt(Some(&tx), 2), (vec![0; 2], -ENOMEM));
        assert_eq!(get_opt(Some(&tx), 6), (vec![1, 2, 3, 4, 0, 0], 4));
    }

    #[test]
    fn errors() {
        assert_eq!(get(None, KEY_SIZE, 0), (vec![0; KEY_SIZE], -EINVAL));
        let info = TunnelKey::parse("id=1,remote=198.18.0.2").expect("parse");
        assert_eq!(get(Some(&info), KEY_SIZE, 1).1, -EPROTO);
        assert_eq!(get(Some(&info), 30, 0).1, -EINVAL);
        assert_eq!(get(Some(&info), 24, 0).1, 0);
        let mut k = [0u8; KEY_SIZE];
        k[24] = 1;
        assert_eq!(set(&k, 0), Err(-EINVAL));
        assert!(set(&k, 1).is_ok());
        assert_eq!(set(&k[..30], 1), Err(-EINVAL));
        assert_eq!(set(&[0u8; KEY_SIZE], 1 << 5), Err(-EINVAL));
    }
}

//! What a run knows of the network around the program and what it
//! records of it: the route table `bpf_fib_lookup` uses, the socket
//! buffer's tunnel metadata, records of `bpf_perf_event_output`, and
//! whether `bpf_skb_adjust_room` already encapsulated the packet.

#![forbid(unsafe_code)]

use super::fib::{self, FibTable, Lookup};
use super::tunnel::{self, TunnelKey};
use super::{neg, E2BIG, EFAULT, EINVAL};
use crate::ctx::CtxState;
use crate::interp::{Machine, Step};
use nfkit_object::MapType;
use std::fmt;

/// One `bpf_perf_event_output` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfEvent {
    /// Index of the `perf_event_array` in the Image's map table.
    pub map: usize,
    pub map_name: String,
    /// The CPU whose ring received it.
    pub cpu: u32,
    /// The bytes the program passed.
    pub data: Vec<u8>,
    /// Packet bytes appended (the flags' `BPF_F_CTXLEN_MASK` part).
    pub packet: Vec<u8>,
}

impl fmt::Display for PerfEvent {
    /// `events cpu 1: 0102 + 14 packet bytes 0011...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cpu {}: ", self.map_name, self.cpu)?;
        for b in &self.data {
            write!(f, "{b:02x}")?;
        }
        if !self.packet.is_empty() {
            write!(f, " + {} packet bytes ", self.packet.len())?;
            for b in &self.packet {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// One `bpf_clone_redirect`: a copy of the packet as it was at the call,
/// sent to device `ifindex` (its ingress with `BPF_F_INGRESS`, else out
/// of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloneRedirect {
    pub ifindex: u32,
    pub ingress: bool,
    /// The frame from its MAC header.
    pub packet: Vec<u8>,
}

impl fmt::Display for CloneRedirect {
    /// `clone to ifindex 3 (egress), 60 bytes`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = if self.ingress { "ingress" } else { "egress" };
        write!(
            f,
            "clone to ifindex {} ({dir}), {} bytes",
            self.ifindex,
            self.packet.len()
        )
    }
}

/// The network state of one run.
pub(crate) struct NetRun {
    /// From the run's options (a reference count only when given).
    pub fib: Option<std::sync::Arc<FibTable>>,
    pub tunnel: Option<TunnelKey>,
    pub perf: Vec<PerfEvent>,
    pub clones: Vec<CloneRedirect>,
    /// `skb->encapsulation`: set by an encapsulating `adjust_room`.
    pub encapsulated: bool,
    /// Bytes from the MAC to the network header (`skb->mac_len`).
    pub mac_len: usize,
    /// `CHECKSUM_UNNECESSARY` with this `csum_level`, or `None` for
    /// `CHECKSUM_NONE` (how a packet starts).
    pub csum_unnecessary: Option<u8>,
}

impl NetRun {
    /// A run's state: `fib` and `tunnel` from its options.
    pub fn new(fib: Option<std::sync::Arc<FibTable>>, tunnel: Option<TunnelKey>) -> NetRun {
        NetRun {
            fib,
            tunnel,
            perf: Vec::new(),
            clones: Vec::new(),
            encapsulated: false,
            mac_len: super::ETH_HLEN,
            csum_unnecessary: None,
        }
    }
}

/// `BPF_F_INDEX_MASK` / `BPF_F_CURRENT_CPU`.
const INDEX_MASK: u64 = 0xffff_ffff;
/// `BPF_F_CTXLEN_MASK`: packet bytes to append, in bits 32..52.
const CTXLEN_MASK: u64 = 0xfffff << 32;
const ENOENT: i64 = 2;
const MAX_RECORD: u64 = 0xffff;
const EOPNOTSUPP: i64 = 95;

impl Machine {
    /// `bpf_perf_event_output(ctx, map, flags, data, size)`: a record for
    /// the CPU the flags name (every CPU's ring is open; one of another
    /// CPU than the running one refuses, as the kernel's per-CPU events
    /// do).
    pub(super) fn perf_event_output(
        &mut self,
        map: u64,
        flags: u64,
        data: u64,
        size: u64,
        cur: usize,
    ) -> Step<u64> {
        let name = "perf_event_output";
        let m = self.map_arg(map, cur, name)?;
        if m.spec.map_type != MapType::PerfEventArray {
            return self.herr(
                cur,
                name,
                format!("map {} is not a perf_event_array", m.name()),
            );
        }
        // The verifier bounds `size`; a perf record holds at most 64 KiB.
        if size > MAX_RECORD {
            return self.herr(cur, name, format!("size {size} is beyond a perf record"));
        }
        let bytes = self.read_arg(data, size as usize, cur, name)?;
        if flags & !(CTXLEN_MASK | INDEX_MASK) != 0 {
            return Ok(neg(EINVAL));
        }
        let ctx_len = ((flags & CTXLEN_MASK) >> 32) as usize;
        // XDP: the whole buffer; skb: skb->len (from the MAC header for TC).
        let (from, avail) = if self.is_xdp() {
            (self.pkt.data, self.pkt.data_end - self.pkt.data)
        } else {
            let base = if self.prog_type == nfkit_object::ProgType::SocketFilter {
                self.pkt.data
            } else {
                self.mac
            };
            (base, self.pkt.data_end.saturating_sub(base))
        };
        if ctx_len > avail {
            return Ok(neg(EFAULT));
        }
        let mut index = flags & INDEX_MASK;
        if index == INDEX_MASK {
            index = u64::from(self.cpu);
        }
        let entries = match m.spec.max_entries {
            0 => self.vm.config.ncpus,
            n => n,
        };
        if index >= u64::from(entries) {
            return Ok(neg(E2BIG));
        }
        if index >= u64::from(self.vm.config.ncpus) {
            return Ok(neg(ENOENT));
        }
        if index != u64::from(self.cpu) {
            return Ok(neg(EOPNOTSUPP));
        }
        let mut packet = vec![0u8; ctx_len];
        if let Some(buf) = self.packet_buf() {
            let _ = buf.read(from, &mut packet);
        }
        self.net.perf.push(PerfEvent {
            map: m.index,
            map_name: m.name().to_string(),
            cpu: index as u32,
            data: bytes,
            packet,
        });
        Ok(0)
    }

    /// `bpf_clone_redirect(skb, ifindex, flags)`: a copy of the packet
    /// as it is now goes to `ifindex`; the program goes on with the
    /// original. Flags other than `BPF_F_INGRESS` and ifindex 0 are
    /// `-EINVAL`, as in the kernel; with no device list the VM cannot tell
    /// other missing devices (the kernel: `-EINVAL`).
    pub(super) fn clone_redirect(&mut self, ifindex: u64, flags: u64) -> u64 {
        const BPF_F_INGRESS: u64 = 1;
        let ifindex = ifindex as u32;
        if flags & !BPF_F_INGRESS != 0 || ifindex == 0 {
            return neg(EINVAL);
        }
        let from = self.mac;
        let mut packet = vec![0u8; self.pkt.data_end.saturating_sub(from)];
        if let Some(buf) = self.packet_buf() {
            let _ = buf.read(from, &mut packet);
        }
        self.net.clones.push(CloneRedirect {
            ifindex,
            ingress: flags & BPF_F_INGRESS != 0,
            packet,
        });
        0
    }

    /// `bpf_fib_lookup(ctx, params, plen, flags)`.
    pub(super) fn fib_lookup(
        &mut self,
        params: u64,
        plen: u64,
        flags: u64,
        cur: usize,
    ) -> Step<u64> {
        let name = "fib_lookup";
        if (plen as u32 as i32) < fib::PARAMS_SIZE as i32 {
            return Ok(neg(EINVAL));
        }
        if flags as u32 & !fib::flag::ALL != 0 {
            return Ok(neg(EINVAL));
        }
        let bytes = self.read_arg(params, fib::PARAMS_SIZE, cur, name)?;
        let mut p = [0u8; fib::PARAMS_SIZE];
        p.copy_from_slice(&bytes);
        // No table given: nothing is forwarded.
        let Some(table) = self.net.fib.clone() else {
            return Ok(fib::ret::NOT_FWDED);
        };
        let skb_len = match &self.ctx {
            CtxState::Skb(_) => Some(self.pkt.data_end.saturating_sub(self.mac)),
            _ => None,
        };
        let r = match fib::lookup(&table, &mut p, flags as u32, skb_len) {
            Ok(r) => r,
            Err(why) => return self.herr(cur, name, why),
        };
        self.write_arg(params, &p, cur, name)?;
        Ok(match r {
            Lookup::Code(c) => c,
            Lookup::Errno(e) => neg(e),
        })
    }

    /// `bpf_skb_get_tunnel_key(skb, key, size, flags)`.
    pub(super) fn get_tunnel_key(
        &mut self,
        to: u64,
        size: u64,
        flags: u64,
        cur: usize,
    ) -> Step<u64> {
        // The verifier bounds `size` by the buffer; a key is 44 bytes.
        if size > 4096 {
            let why = format!("key size {size}");
            return self.herr(cur, "skb_get_tunnel_key", why);
        }
        let (bytes, rc) = tunnel::get(self.net.tunnel.as_ref(), size as usize, flags);
        self.write_arg(to, &bytes, cur, "skb_get_tunnel_key")?;
        Ok(rc as u64)
    }

    /// `bpf_check_mtu(ctx, ifindex, &mtu_len, len_diff, flags)`: whether
    /// the packet (or `mtu_len` bytes of L3, when non-zero), changed by
    /// `len_diff`, fits the device's MTU plus its 14-byte header; the
    /// MTU goes to `*mtu_len`. Devices come from the run's table;
    /// ifindex 0 is the packet's own device (MTU 1500 when the table does
    /// not name it or there is none).
    pub(super) fn check_mtu(
        &mut self,
        ifindex: u64,
        mtu_at: u64,
        len_diff: u64,
        flags: u64,
        cur: usize,
    ) -> Step<u64> {
        const FRAG_NEEDED: u64 = 1;
        const SEGS: u64 = 1;
        const HARD_HEADER: i64 = 14;
        let name = "check_mtu";
        let b = self.read_arg(mtu_at, 4, cur, name)?;
        let mtu_len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let (ifindex, len_diff) = (ifindex as u32, i64::from(len_diff as i32));
        let xdp = self.is_xdp();
        let (own, pkt_len) = match &self.ctx {
            CtxState::Skb(s) => (s.ifindex, self.pkt.data_end.saturating_sub(self.mac)),
            CtxState::Xdp {
                ingress_ifindex, ..
            } => (*ingress_ifindex, self.pkt.data_end - self.pkt.data),
            CtxState::None => (0, 0),
        };
        let bad_flags = if xdp {
            flags != 0
        } else {
            flags & !SEGS != 0 || (flags & SEGS != 0 && (len_diff != 0 || mtu_len != 0))
        };
        let dev_mtu = |i: u32| -> Option<u32> {
            match self.net.fib.as_deref().and_then(|t| t.link(i)) {
                Some(l) => Some(l.mtu),
                None if i == own || i == 0 => Some(1500),
                None => None,
            }
        };
        // Errors leave `*mtu_len` as it was.
        if bad_flags {
            return Ok(neg(EINVAL));
        }
        let Some(mtu) = dev_mtu(if ifindex == 0 { own } else { ifindex }) else {
            return Ok(neg(19)); // ENODEV
        };
        let len = if mtu_len != 0 {
            i64::from(mtu_len) + HARD_HEADER
        } else {
            pkt_len as i64
        };
        let fits = len + len_diff <= i64::from(mtu) + HARD_HEADER;
        self.write_arg(mtu_at, &mtu.to_le_bytes(), cur, name)?;
        Ok(if fits { 0 } else { FRAG_NEEDED })
    }

    /// `bpf_skb_get_tunnel_opt(skb, opt, size)`.
    pub(super) fn get_tunnel_opt(&mut self, to: u64, size: u64, cur: usize) -> Step<u64> {
        if size > 4096 {
            let why = format!("option size {size}");
            return self.herr(cur, "skb_get_tunnel_opt", why);
        }
        let (bytes, rc) = tunnel::get_opt(self.net.tunnel.as_ref(), size as usize);
        self.write_arg(to, &bytes, cur, "skb_get_tunnel_opt")?;
        Ok(rc as u64)
    }

    /// `bpf_skb_set_tunnel_opt(skb, opt, size)`.
    pub(super) fn set_tunnel_opt(&mut self, from: u64, size: u64, cur: usize) -> Step<u64> {
        if size > 4096 {
            return Ok(neg(12)); // ENOMEM: beyond IP_TUNNEL_OPTS_MAX
        }
        let bytes = self.read_arg(from, size as usize, cur, "skb_set_tunnel_opt")?;
        Ok(tunnel::set_opt(self.net.tunnel.as_mut(), &bytes) as u64)
    }

    /// `bpf_skb_set_tunnel_key(skb, key, size, flags)`.
    pub(super) fn set_tunnel_key(
        &mut self,
        from: u64,
        size: u64,
        flags: u64,
        cur: usize,
    ) -> Step<u64> {
        if !tunnel::valid_size(size) {
            return Ok(neg(EINVAL));
        }
        let bytes = self.read_arg(from, size as usize, cur, "skb_set_tunnel_key")?;
        Ok(match tunnel::set(&bytes, flags) {
            Ok(k) => {
                self.net.tunnel = Some(k);
                0
            }
            Err(e) => e as u64,
        })
    }
}

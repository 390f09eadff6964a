//! Shared by the behaviour tests: packet builders (Ethernet, VLAN, IPv4
//! with a correct header checksum, IPv6, TCP, UDP), an independent IPv4
//! checksum check, and [`Harness`]: one NF linked with the caller and
//! loaded into the VM, with the pinned clock of abi.md 7.
#![allow(dead_code)]

use nfkit_nf::{caller, Hook, SearchPath};
use nfkit_vm::{Context, Map, RunOptions, RunResult, Runner, SkBuff, Vm, VmConfig, XdpMd};
use std::sync::Arc;

pub const TCP: u8 = 6;
pub const UDP: u8 = 17;
pub const ICMP: u8 = 1;
pub const SYN: u8 = 0x02;
pub const ACK: u8 = 0x10;
pub const FIN: u8 = 0x01;
pub const RST: u8 = 0x04;

/// Verdict encodings (abi.md 1).
pub fn verdict(action: u64, arg: u32) -> u64 {
    (1 << 63) | (action << 32) | arg as u64
}
pub const ABORTED: u64 = 1 << 63;
pub const DROP: u64 = (1 << 63) | (1 << 32);
pub const PASS: u64 = (1 << 63) | (2 << 32);
pub const TX: u64 = (1 << 63) | (3 << 32);
pub fn redirect(ifindex: u32) -> u64 {
    verdict(4, ifindex)
}
pub const FAULT: u64 = u64::MAX;

/// One's complement sum of 16-bit big-endian words (independent of the
/// NF code: the textbook RFC 1071 loop).
pub fn ones_sum(bytes: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for w in bytes.chunks(2) {
        let hi = w[0] as u32;
        let lo = w.get(1).copied().unwrap_or(0) as u32;
        s += (hi << 8) | lo;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// The IPv4 header checksum of `hdr` computed from scratch (field zeroed).
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut h = hdr.to_vec();
    h[10] = 0;
    h[11] = 0;
    !ones_sum(&h)
}

/// Whether the IPv4 header at `l3` of `frame` has a valid checksum.
pub fn ipv4_checksum_ok(frame: &[u8], l3: usize) -> bool {
    let ihl = (frame[l3] & 0x0f) as usize * 4;
    let hdr = &frame[l3..l3 + ihl];
    u16::from_be_bytes([hdr[10], hdr[11]]) == ipv4_checksum(hdr)
}

pub fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&1000u32.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t
}

pub fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 16];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&16u16.to_be_bytes());
    u[8..].copy_from_slice(b"payload!");
    u
}

pub fn eth(ethertype: u16) -> Vec<u8> {
    let mut e = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa];
    e.extend_from_slice(&ethertype.to_be_bytes());
    e
}

/// An IPv4 header (20 bytes, valid checksum) for an L4 payload of `l4_len`.
pub fn ipv4_hdr(src: [u8; 4], dst: [u8; 4], proto: u8, tos: u8, ttl: u8, l4_len: usize) -> Vec<u8> {
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    h[6] = 0x40; // DF
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let c = ipv4_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h
}

/// Ethernet + IPv4 + `l4`.
pub fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    v4_full(src, dst, proto, 0, 64, l4)
}

pub fn v4_full(src: [u8; 4], dst: [u8; 4], proto: u8, tos: u8, ttl: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = eth(0x0800);
    p.extend(ipv4_hdr(src, dst, proto, tos, ttl, l4.len()));
    p.extend_from_slice(l4);
    p
}

/// Ethernet + IPv6 (traffic class `tc`, flow label 0x12345) + `l4`.
pub fn v6_full(src: [u8; 16], dst: [u8; 16], next: u8, tc: u8, hop: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = eth(0x86dd);
    let vtf: u32 = (6 << 28) | ((tc as u32) << 20) | 0x12345;
    p.extend_from_slice(&vtf.to_be_bytes());
    p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    p.push(next);
    p.push(hop);
    p.extend_from_slice(&src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(l4);
    p
}

pub fn v6(src: [u8; 16], dst: [u8; 16], next: u8, l4: &[u8]) -> Vec<u8> {
    v6_full(src, dst, next, 0, 64, l4)
}

/// 2001:db8::`last`.
pub fn a6(last: u16) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[14..16].copy_from_slice(&last.to_be_bytes());
    a
}

/// The 16-byte map key of an IPv4 address (::ffff:a.b.c.d).
pub fn mapped(a: [u8; 4]) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[10] = 0xff;
    k[11] = 0xff;
    k[12..].copy_from_slice(&a);
    k
}

/// A non-IP frame (ARP).
pub fn arp() -> Vec<u8> {
    let mut p = eth(0x0806);
    p.extend_from_slice(&[0u8; 28]);
    p
}

/// Inserts an 802.1Q tag with VLAN id `vid` after the MAC addresses.
pub fn vlan(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut p = frame[..12].to_vec();
    p.extend_from_slice(&0x8100u16.to_be_bytes());
    p.extend_from_slice(&vid.to_be_bytes());
    p.extend_from_slice(&frame[12..]);
    p
}

pub fn le64(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

pub fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

/// One NF linked with the caller, loaded in a kernel-compatible VM with 4 CPUs.
pub struct Harness {
    pub vm: Vm,
    pub hook: Hook,
    pub ingress: u32,
}

impl Harness {
    /// XDP and TC: both caller entries. Socket: only `nfkit_call`.
    pub fn new(module: &str, name: &str, hook: Hook) -> Harness {
        let entries: &[&str] = match hook {
            Hook::Xdp | Hook::Tc => &[caller::CALL_ENTRY, caller::CALL_ACT_ENTRY],
            _ => &[caller::CALL_ENTRY],
        };
        let image = caller::caller_image_with(&SearchPath::embedded(), module, name, hook, entries)
            .unwrap_or_else(|e| panic!("{module}.{name} ({hook}): {e}"));
        let vm = Vm::new(&image, VmConfig::kernel())
            .unwrap_or_else(|e| panic!("{module}.{name} ({hook}) does not load in the VM: {e}"));
        let h = Harness {
            vm,
            hook,
            ingress: 1,
        };
        h.set_clock(0);
        h
    }

    pub fn xdp(module: &str, name: &str) -> Harness {
        Harness::new(module, name, Hook::Xdp)
    }

    pub fn map(&self, name: &str) -> &Arc<Map> {
        self.vm.map(name).unwrap_or_else(|| panic!("no map {name}"))
    }

    /// Pins nf_now() to `now_ns` (and nf_rand()'s seed) in nfkit_config.
    pub fn set_clock(&self, now_ns: u64) {
        let cfg = nfkit_abi::NfConfig {
            rand_seed: 7,
            ..nfkit_abi::NfConfig::default()
        }
        .pinned_at(now_ns)
        .to_bytes();
        self.map("nfkit_config")
            .update(&0u32.to_le_bytes(), &cfg, 0)
            .expect("nfkit_config");
    }

    pub fn run_with(
        &self,
        runner: &mut Runner,
        entry: &str,
        cpu: u32,
        pkt: &[u8],
        args: [u64; 4],
    ) -> RunResult {
        self.map(caller::CALL_ARGS_MAP)
            .prog_update(&0u32.to_le_bytes(), &caller::encode_args(args), 0, cpu)
            .expect("call args");
        let ctx = match self.hook {
            Hook::Xdp | Hook::Switch => {
                let mut x = XdpMd::new(pkt);
                x.ingress_ifindex = self.ingress;
                Context::Xdp(x)
            }
            Hook::Tc | Hook::Socket => {
                let mut s = SkBuff::new(pkt);
                s.ingress_ifindex = self.ingress;
                Context::Skb(s)
            }
        };
        let opts = RunOptions {
            cpu,
            ..RunOptions::default()
        };
        runner.run(entry, ctx, &opts)
    }

    /// Runs the NF on `pkt` on `cpu`: (result, packet afterwards).
    pub fn call_on(
        &self,
        runner: &mut Runner,
        cpu: u32,
        pkt: &[u8],
        args: [u64; 4],
    ) -> (u64, Vec<u8>) {
        let r = self.run_with(runner, caller::CALL_ENTRY, cpu, pkt, args);
        match r.result {
            Ok(v) => (v, r.packet),
            Err(e) => panic!("run failed: {e}"),
        }
    }

    /// Runs the NF on `pkt` (CPU 0): its 64-bit result.
    pub fn call(&self, pkt: &[u8], args: [u64; 4]) -> u64 {
        self.call_pkt(pkt, args).0
    }

    /// Runs the NF on `pkt` (CPU 0): result and packet afterwards.
    pub fn call_pkt(&self, pkt: &[u8], args: [u64; 4]) -> (u64, Vec<u8>) {
        let mut runner = self.vm.runner();
        self.call_on(&mut runner, 0, pkt, args)
    }

    /// Runs the caller's `nfkit_call_act` entry: the hook's return code.
    pub fn act(&self, pkt: &[u8], args: [u64; 4]) -> RunResult {
        let mut runner = self.vm.runner();
        self.run_with(&mut runner, caller::CALL_ACT_ENTRY, 0, pkt, args)
    }

    /// The result the caller stored for CPU `cpu` (as the kernel would read it).
    pub fn stored_result(&self, cpu: u32) -> u64 {
        let v = self
            .map(caller::CALL_ARGS_MAP)
            .lookup_cpu(&0u32.to_le_bytes(), cpu)
            .expect("lookup")
            .expect("entry");
        u64_at(&v, 32)
    }
}

pub fn args1(a: u64) -> [u64; 4] {
    [a, 0, 0, 0]
}
pub fn args2(a: u64, b: u64) -> [u64; 4] {
    [a, b, 0, 0]
}
pub const NOARGS: [u64; 4] = [0; 4];

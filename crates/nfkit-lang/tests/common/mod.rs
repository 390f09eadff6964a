//! Shared by the tests: packet builders and compile-and-run helpers.
#![allow(dead_code)]

use nfkit_lang::runner::{Outcome, ScriptVm};
use nfkit_lang::{compile, Compiled, Options};

pub const XDP_ABORTED: u64 = 0;
pub const XDP_DROP: u64 = 1;
pub const XDP_PASS: u64 = 2;
pub const XDP_TX: u64 = 3;
pub const XDP_REDIRECT: u64 = 4;

/// An Ethernet + IPv4 + UDP frame (valid IPv4 checksum), `payload` after
/// the UDP header.
pub fn udp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    tos: u8,
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let tot = 20 + 8 + payload.len();
    let mut ip = vec![0x45, tos];
    ip.extend_from_slice(&(tot as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, ttl, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// The IPv4 header checksum of `h` (its checksum field taken as is).
pub fn checksum(h: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for w in h.chunks(2) {
        s += ((w[0] as u32) << 8) | *w.get(1).unwrap_or(&0) as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

pub fn build(src: &str) -> Compiled {
    match compile("test.py", src, &Options::default()) {
        Ok(c) => c,
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

pub fn load(src: &str) -> (Compiled, ScriptVm) {
    let c = build(src);
    let vm = match ScriptVm::new(&c) {
        Ok(v) => v,
        Err(e) => panic!("load failed: {e}\n{}", nfkit_lang::listing::listing(&c)),
    };
    (c, vm)
}

pub fn run(vm: &mut ScriptVm, frame: &[u8]) -> Outcome {
    run_at(vm, frame, 1_000_000_000)
}

pub fn run_at(vm: &mut ScriptVm, frame: &[u8], now: u64) -> Outcome {
    let (o, _) = vm.run(frame, now, false).expect("run");
    assert!(o.error.is_none(), "VM error: {:?}", o.error);
    o
}

/// Map contents as (key, value) pairs.
pub fn map(c: &Compiled, vm: &ScriptVm, name: &str) -> Vec<(u64, u64)> {
    vm.maps(&c.program)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .unwrap_or_default()
}

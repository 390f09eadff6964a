//! Programs and packets the VM benches share (`interp` and `engines`):
//! eBPF assembly run unchanged by every engine except for how a program
//! finds the packet (`{CTX}`: nfkit's `xdp_md` or rbpf's metadata buffer).
//! Each bench uses part of them.
#![allow(dead_code)]

use nfkit_isa::asm::{assemble, Syntax};

/// The parser; `{CTX}` becomes the two context loads of each engine.
pub const PARSER: &str = "
    {CTX}
    r0 = 2
    r4 = r2
    r4 += 14
    if r4 > r3 goto out
    r5 = *(u16 *)(r2 + 12)
    if r5 != 8 goto out
    r4 = r2
    r4 += 34
    if r4 > r3 goto out
    r5 = *(u8 *)(r2 + 23)
    if r5 == 17 goto l4
    if r5 != 6 goto out
l4:
    r5 = *(u8 *)(r2 + 14)
    r5 &= 15
    r5 <<= 2
    r4 = r2
    r4 += 14
    r4 += r5
    r6 = r4
    r6 += 4
    if r6 > r3 goto out
    r5 = *(u16 *)(r4 + 2)
    r5 = be16 r5
    if r5 == 22 goto drop
    if r5 == 23 goto drop
    if r5 == 445 goto drop
    if r5 == 3389 goto drop
    goto out
drop:
    r0 = 1
out:
    exit
";
pub const NFKIT_CTX: &str = "r2 = *(u32 *)(r1 + 0)\n    r3 = *(u32 *)(r1 + 4)";
pub const RBPF_CTX: &str = "r2 = *(u64 *)(r1 + 0)\n    r3 = *(u64 *)(r1 + 8)";

/// `r0 = 2; exit`: the fixed cost of one run.
pub const EXIT_ONLY: &str = "r0 = 2\nexit";

pub const ALU_LOOP: &str = "
    r0 = 0x12345678
    r1 = 1000
loop:
    r2 = r0
    r2 <<= 13
    r0 ^= r2
    r2 = r0
    r2 >>= 7
    r0 ^= r2
    r2 = r0
    r2 <<= 17
    r0 ^= r2
    r0 += r1
    r1 += -1
    if r1 != 0 goto loop
    exit
";

pub const MEM_SUM: &str = "
    r0 = 0
    r3 = r1
    r4 = 512
loop:
    r5 = *(u16 *)(r3 + 0)
    r0 += r5
    *(u64 *)(r10 - 8) = r0
    r6 = *(u64 *)(r10 - 8)
    *(u16 *)(r10 - 16) = r5
    r3 += 2
    r4 += -1
    if r4 != 0 goto loop
    r1 = r0
    r1 >>= 16
    r0 &= 0xffff
    r0 += r1
    exit
";

/// Assembles a bench program (llvm syntax); a bench program that does not
/// assemble is a bug in the bench.
pub fn asm(text: &str) -> Vec<nfkit_isa::Insn> {
    assemble(text, Some(Syntax::Llvm)).unwrap_or_else(|e| panic!("bench program: {e}\n{text}"))
}

/// A UDP frame of `len` bytes to destination port `dport`.
pub fn udp_frame(len: usize, dport: u16) -> Vec<u8> {
    ip_frame(len, 17, dport)
}

/// An IPv4 frame of `len` bytes, protocol `proto` (6 TCP, 17 UDP), from
/// 198.18.0.1 port 1234 to 198.18.0.2 port `dport` (the two ports sit
/// at the same offsets in both headers).
pub fn ip_frame(len: usize, proto: u8, dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12] = 0x08;
    f[14] = 0x45;
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

/// The parser's packets: UDP frames of growing length to ports, half of
/// them dropped.
pub fn parser_packets() -> Vec<Vec<u8>> {
    [53u16, 22, 80, 3389, 443, 445, 123, 23]
        .iter()
        .enumerate()
        .map(|(i, &p)| udp_frame(60 + 100 * i, p))
        .collect()
}

/// Load-heavy loop: the 16-bit one's-complement sum of the whole packet,
/// four words per round while eight bytes remain (each round checked
/// against `data_end`, so a checker can prove the loads in bounds), then
/// word by word.
pub const PKT_SUM: &str = "
    {CTX}
    r0 = 0
quad:
    r4 = r2
    r4 += 8
    if r4 > r3 goto single
    r5 = *(u16 *)(r2 + 0)
    r0 += r5
    r5 = *(u16 *)(r2 + 2)
    r0 += r5
    r5 = *(u16 *)(r2 + 4)
    r0 += r5
    r5 = *(u16 *)(r2 + 6)
    r0 += r5
    r2 = r4
    goto quad
single:
    r4 = r2
    r4 += 2
    if r4 > r3 goto fold
    r5 = *(u16 *)(r2 + 0)
    r0 += r5
    r2 = r4
    goto single
fold:
    r1 = r0
    r1 >>= 16
    r0 &= 0xffff
    r0 += r1
    exit
";

/// `n` calls of helper `id` (r1 = the previous result), r0 at the end:
/// the cost of calling helpers, for engines that have no maps.
pub fn helper_calls(n: usize, id: u32) -> String {
    let mut s = String::from("r0 = 0\n");
    for _ in 0..n {
        s.push_str(&format!("r1 = r0\ncall {id}\n"));
    }
    s.push_str("exit\n");
    s
}

/// The parse benchmark's packets: TCP and UDP frames of growing length
/// to ports, half of them dropped.
pub fn parse_packets() -> Vec<Vec<u8>> {
    [53u16, 22, 80, 3389, 443, 445, 123, 23]
        .iter()
        .enumerate()
        .map(|(i, &p)| ip_frame(60 + 100 * i, if i % 2 == 0 { 6 } else { 17 }, p))
        .collect()
}

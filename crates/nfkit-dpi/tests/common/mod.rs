//! Shared by the nfkit-dpi tests: the `regex` crate as the reference
//! for every scan (the first match: the smallest end over every
//! pattern, the lowest pattern among those).
#![allow(dead_code)]

use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::Match;
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use regex::bytes::{Regex, RegexBuilder};

/// The patterns as byte regexes (no Unicode, as the DFA compiles them).
pub fn reference(pats: &[&str], ci: bool) -> Vec<Regex> {
    pats.iter()
        .map(|p| {
            RegexBuilder::new(p)
                .unicode(false)
                .case_insensitive(ci)
                .build()
                .expect("reference regex")
        })
        .collect()
}

/// The first match in the first `limit` bytes by the `regex` crate.
pub fn first_match(res: &[Regex], payload: &[u8], limit: usize) -> Option<Match> {
    let n = payload.len().min(limit);
    res.iter()
        .enumerate()
        .filter_map(|(i, r)| r.shortest_match(payload).map(|end| (end, i)))
        .filter(|&(end, _)| end <= n)
        .min()
        .map(|(end, pattern)| Match { pattern, end })
}

/// The NF's result for the whole payload: [`first_match`] as
/// `Match::to_result` encodes it, 0 for none.
pub fn expected(res: &[Regex], payload: &[u8]) -> u64 {
    first_match(res, payload, usize::MAX).map_or(0, Match::to_result)
}

/// Strings each pattern of a set matches (by set name), to splice in.
pub fn samples(set: &str) -> Vec<&'static [u8]> {
    match set {
        "sqli" => vec![
            b"UNION SELECT",
            b"union/**/all/**/select",
            b"UnIoN%20SeLeCt",
            b" or 1=1",
            b"'OR+'1'%3d'1",
            b" or 'a'='a",
            b";drop ",
            b"%3bDELETE+",
            b"'--",
            b"%27%23",
            b"sleep(",
            b"WAITFOR DELAY '",
        ],
        "bittorrent" => vec![
            b"\x13BitTorrent protocol",
            b"d1:ad2:id20:",
            b"d1:rd2:id20:",
            b"d1:eli2017",
            b"1:y1:qe",
            b"1:y1:re",
        ],
        "protocols" => vec![
            b"GET / HTTP/1.1\r\n",
            b"POST /api/v1 HTTP/1.0\r\n",
            b"HTTP/1.1 404 ",
            b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03",
            b"SSH-2.0-",
            b"SSH-1.99-",
        ],
        "tls_sni" => vec![SNI_HELLO, b"\x16\x03\x03\x00\x40\x01"],
        _ => Vec::new(),
    }
}

/// A ClientHello up to its server_name "a.io".
pub const SNI_HELLO: &[u8] = b"\x16\x03\x01\x00\x40\x01\x00\x00\x3c\x03\x03\
    \x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\
    \x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\x11\
    \x00\x00\x02\x13\x01\x01\x00\x00\x0d\x00\x00\x00\x09\x00\x07\x00\x00\x04a.io";

/// Most payload bytes (a UDP payload in a 1500-byte IPv4 packet).
pub const MAX: usize = 1472;

pub fn filler(g: &mut Gen, alphabet: &[u8], n: usize, out: &mut Vec<u8>) {
    let uniform = g.index(2) == 0;
    for _ in 0..n {
        out.push(if uniform {
            g.next() as u8
        } else {
            alphabet[g.index(alphabet.len())]
        });
    }
}

pub fn payload(g: &mut Gen, samples: &[&[u8]], alphabet: &[u8]) -> Vec<u8> {
    payload_upto(g, samples, alphabet, MAX)
}

pub fn payload_upto(g: &mut Gen, samples: &[&[u8]], alphabet: &[u8], max: usize) -> Vec<u8> {
    let mut p = Vec::new();
    let len = [g.index(16), g.index(200), g.index(max)][g.index(3)];
    match g.index(4) {
        0 => filler(g, alphabet, len, &mut p),
        kind => {
            let s = samples[g.index(samples.len())];
            let mut s = s.to_vec();
            if g.index(3) == 0 {
                // Flip the case of a letter (case-insensitive patterns
                // still match; the others must not).
                let i = g.index(s.len());
                s[i] ^= if s[i].is_ascii_alphabetic() { 0x20 } else { 0 };
            }
            let room = max - s.len();
            let before = match kind {
                1 => 0,
                2 => g.index(len.min(room) + 1),
                _ => len.min(room),
            };
            filler(g, alphabet, before, &mut p);
            p.extend_from_slice(&s);
            if kind != 3 {
                let after = g.index((max - p.len()).min(300) + 1);
                filler(g, alphabet, after, &mut p);
            }
        }
    }
    p
}

/// An IPv4 frame from 198.18.0.1:40000 to 198.18.0.2:80 carrying
/// `payload` over TCP (PSH|ACK) or UDP.
pub fn frame(payload: Vec<u8>, tcp: bool) -> Vec<u8> {
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src: "198.18.0.1".parse().expect("ip"),
        dst: "198.18.0.2".parse().expect("ip"),
        proto: if tcp {
            Proto::Tcp { flags: 0x18 }
        } else {
            Proto::Udp
        },
        sport: 40000,
        dport: 80,
        ttl: 64,
        tos: 0,
        payload,
    })
    .expect("frame")
}

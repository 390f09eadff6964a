//! The acceptance differential of issue 20: for every catalogue set,
//! random payloads (uniform bytes, bytes from the patterns' alphabet,
//! and payloads with a sample of each pattern at a random offset, at the
//! start or at the end) through the `dpi` NF in the VM and, as root, in
//! the kernel (`BPF_PROG_TEST_RUN`); the answer must be the `regex`
//! crate's first match on the same bytes.
//!
//! 100,000 payloads per set by default (a few seconds in all);
//! `NFKIT_DPI_CASES` sets another count.

use nfkit_corpus::clang::BpfBuild;
use nfkit_dpi::{catalogue, compile, Dfa, Match, Options, Tables};
use nfkit_object::Image;
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};
use regex::bytes::{Regex, RegexBuilder};
use std::path::PathBuf;

fn cases_per_set() -> usize {
    std::env::var("NFKIT_DPI_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn probe() -> Image {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let obj = BpfBuild::new(root.join("crates/nfkit-dpi/tests/progs/dpi_probe.c"))
        .include(root.join("nf/include"))
        .include(root.join("nf"))
        .define("NF_HOOK_XDP".to_string())
        .bytes()
        .expect("clang builds the probe");
    Image::from_elf(&obj, "dpi_probe.o").expect("image")
}

/// Strings each pattern of a set matches (by set name), to splice in.
fn samples(set: &str) -> Vec<&'static [u8]> {
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
        _ => Vec::new(),
    }
}

struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Most payload bytes (a UDP payload in a 1500-byte IPv4 packet).
const MAX: usize = 1472;

fn filler(g: &mut Gen, alphabet: &[u8], n: usize, out: &mut Vec<u8>) {
    let uniform = g.below(2) == 0;
    for _ in 0..n {
        out.push(if uniform {
            g.next() as u8
        } else {
            alphabet[g.below(alphabet.len())]
        });
    }
}

fn payload(g: &mut Gen, samples: &[&[u8]], alphabet: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    let len = [g.below(16), g.below(200), g.below(MAX)][g.below(3)];
    match g.below(4) {
        0 => filler(g, alphabet, len, &mut p),
        kind => {
            let s = samples[g.below(samples.len())];
            let mut s = s.to_vec();
            if g.below(3) == 0 {
                // Flip the case of a letter (case-insensitive patterns
                // still match; the others must not).
                let i = g.below(s.len());
                s[i] ^= if s[i].is_ascii_alphabetic() { 0x20 } else { 0 };
            }
            let room = MAX - s.len();
            let before = match kind {
                1 => 0,
                2 => g.below(len.min(room) + 1),
                _ => len.min(room),
            };
            filler(g, alphabet, before, &mut p);
            p.extend_from_slice(&s);
            if kind != 3 {
                let after = g.below((MAX - p.len()).min(300) + 1);
                filler(g, alphabet, after, &mut p);
            }
        }
    }
    p
}

fn reference(set: &catalogue::Set) -> Vec<Regex> {
    set.patterns
        .iter()
        .map(|p| {
            RegexBuilder::new(p)
                .unicode(false)
                .build()
                .expect("reference regex")
        })
        .collect()
}

/// The `regex` crate's first match: the smallest end over every
/// pattern, the lowest pattern among those.
fn expected(res: &[Regex], payload: &[u8]) -> u64 {
    res.iter()
        .enumerate()
        .filter_map(|(i, r)| r.shortest_match(payload).map(|end| (end, i)))
        .min()
        .map_or(0, |(end, pattern)| Match { pattern, end }.to_result())
}

fn frame(payload: Vec<u8>) -> Vec<u8> {
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src: "198.18.0.1".parse().expect("ip"),
        dst: "198.18.0.2".parse().expect("ip"),
        proto: Proto::Udp,
        sport: 40000,
        dport: 80,
        ttl: 64,
        tos: 0,
        payload,
    })
    .expect("frame")
}

struct Case {
    frame: Vec<u8>,
    want: u64,
}

/// The cases of catalogue set `set`, and how many match each pattern.
fn cases(set: &catalogue::Set, n: usize, seed: u64) -> (Vec<Case>, Vec<usize>) {
    let res = reference(set);
    let samples = samples(set.name);
    let mut alphabet: Vec<u8> = samples.iter().flat_map(|s| s.iter().copied()).collect();
    alphabet.extend_from_slice(b" +%'=;-");
    let mut g = Gen(seed);
    let mut per = vec![0usize; set.patterns.len()];
    let cases = (0..n)
        .map(|_| {
            let p = payload(&mut g, &samples, &alphabet);
            let want = expected(&res, &p);
            if let Some(m) = Match::from_result(want) {
                per[m.pattern] += 1;
            }
            Case {
                frame: frame(p),
                want,
            }
        })
        .collect();
    (cases, per)
}

fn sets() -> Vec<(&'static catalogue::Set, Dfa)> {
    catalogue::ALL
        .iter()
        .map(|s| {
            (
                s,
                compile(s.patterns, &Options::default()).expect("compiles"),
            )
        })
        .collect()
}

/// Arguments of the probe: set `set`, the NF's default limit (2048,
/// more than any payload here).
fn args(set: usize) -> [([u8; 4], [u8; 8]); 2] {
    [
        (0u32.to_ne_bytes(), (set as u64).to_ne_bytes()),
        (1u32.to_ne_bytes(), 0u64.to_ne_bytes()),
    ]
}

fn check_counts(name: &str, per: &[usize], n: usize) {
    eprintln!("set {name}: {n} payloads, matches per pattern {per:?}");
    for (i, &c) in per.iter().enumerate() {
        assert!(
            c * 200 >= n,
            "set {name}: pattern {i} matched only {c} of {n} payloads"
        );
    }
}

fn report(wrong: &[String], total: usize) {
    assert!(
        wrong.is_empty(),
        "{} disagreements of {total}; first ones:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}

#[test]
fn every_catalogue_set_in_the_vm_equals_the_regex_crate() {
    let n = cases_per_set();
    let sets = sets();
    let dfas: Vec<Dfa> = sets.iter().map(|(_, d)| d.clone()).collect();
    let t = Tables::build(&dfas).expect("tables");
    let vm = Vm::new(&probe(), VmConfig::kernel()).expect("VM load");
    let zero = 0u32.to_ne_bytes();
    let map = |m: &str| vm.map(m).expect("map");
    map("nf_dpi_next").update(&zero, &t.next, 0).expect("next");
    map("nf_dpi_accept")
        .update(&zero, &t.accept, 0)
        .expect("acc");
    for (i, e) in t.sets.iter().enumerate() {
        map("nf_dpi_sets")
            .update(&(i as u32).to_ne_bytes(), e, 0)
            .expect("set");
    }
    let mut wrong = Vec::new();
    for (si, (set, _)) in sets.iter().enumerate() {
        let (cases, per) = cases(set, n, 0x9e37_79b9_7f4a_7c15 ^ si as u64);
        check_counts(set.name, &per, n);
        for (k, v) in args(si) {
            map("probe_args").update(&k, &v, 0).expect("arg");
        }
        for (i, c) in cases.iter().enumerate() {
            let res = vm.run(
                "probe",
                Context::Xdp(XdpMd::new(&c.frame)),
                &RunOptions::default(),
            );
            let got = match &res.result {
                Err(e) => {
                    wrong.push(format!("{} case {i}: VM fault {e}", set.name));
                    continue;
                }
                Ok(_) => map("probe_out")
                    .lookup(&zero)
                    .expect("lookup")
                    .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64"))),
            };
            if got != Some(c.want) {
                wrong.push(format!(
                    "{} case {i}: VM {got:x?}, regex {:x}",
                    set.name, c.want
                ));
            }
        }
    }
    report(&wrong, n * sets.len());
}

#[test]
fn every_catalogue_set_in_the_kernel_equals_the_regex_crate() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let n = cases_per_set();
    let sets = sets();
    let dfas: Vec<Dfa> = sets.iter().map(|(_, d)| d.clone()).collect();
    let t = Tables::build(&dfas).expect("tables");
    let k = nfkit_kernel::load_image(&probe(), &nfkit_kernel::LoadOptions::default())
        .expect("the kernel verifies the dpi NF");
    let zero = 0u32.to_ne_bytes();
    let map = |m: &str| k.map(m).expect("map");
    map("nf_dpi_next").update(&zero, &t.next, 0).expect("next");
    map("nf_dpi_accept")
        .update(&zero, &t.accept, 0)
        .expect("acc");
    for (i, e) in t.sets.iter().enumerate() {
        map("nf_dpi_sets")
            .update(&(i as u32).to_ne_bytes(), e, 0)
            .expect("set");
    }
    let prog = k.prog("probe").expect("probe");
    let mut wrong = Vec::new();
    for (si, (set, _)) in sets.iter().enumerate() {
        let (cases, per) = cases(set, n, 0x9e37_79b9_7f4a_7c15 ^ si as u64);
        check_counts(set.name, &per, n);
        for (key, v) in args(si) {
            map("probe_args").update(&key, &v, 0).expect("arg");
        }
        for (i, c) in cases.iter().enumerate() {
            if let Err(e) = prog.test_run(&nfkit_kernel::TestRun::packet(&c.frame)) {
                wrong.push(format!("{} case {i}: kernel: {e}", set.name));
                continue;
            }
            let got = map("probe_out")
                .lookup(&zero)
                .expect("lookup")
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")));
            if got != Some(c.want) {
                wrong.push(format!(
                    "{} case {i}: kernel {got:x?}, regex {:x}",
                    set.name, c.want
                ));
            }
        }
    }
    report(&wrong, n * sets.len());
}

//! The catalogue's `dpi` NF (`nf/dpi.c`) against the reference scan
//! (`Dfa::scan`): two pattern sets in one table, random UDP and TCP
//! payloads (IPv4 and IPv6) with pattern pieces spliced in, several
//! limits; in the VM on both hooks, and through `BPF_PROG_TEST_RUN`
//! when run as root. The NF must give `Match::to_result` of the scan.

use nfkit_corpus::clang::BpfBuild;
use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::{compile, Dfa, Match, Options, Tables};
use nfkit_object::Image;
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use nfkit_vm::{Context, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use std::net::IpAddr;
use std::path::PathBuf;

const SQLI: &[&str] = &[r"(?i)union\s+select", r"(?i)or\s+1\s*=\s*1", r"'\s*--"];
const PROTOS: &[&str] = &[
    r"^\x13BitTorrent protocol",
    r"^SSH-2\.0-",
    r"d1:ad2:id20:",
    r"HTTP/1\.1$",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn probe(hook: &str) -> Image {
    let obj = BpfBuild::new(root().join("crates/nfkit-dpi/tests/progs/dpi_probe.c"))
        .include(root().join("nf/include"))
        .include(root().join("nf"))
        .define(format!("NF_HOOK_{hook}"))
        .bytes()
        .expect("clang builds the probe");
    Image::from_elf(&obj, "dpi_probe.o").expect("image")
}

fn payload(g: &mut Gen) -> Vec<u8> {
    const WORDS: &[&[u8]] = &[
        b"union",
        b" select",
        b"UNION",
        b"SeLeCt",
        b"  ",
        b"or ",
        b"1",
        b"=",
        b"' --",
        b"\x13BitTorrent protocol",
        b"SSH-2.0-",
        b"d1:ad2:id20:",
        b"HTTP/1.1",
        b"\t",
        b"x",
    ];
    let mut p = Vec::new();
    let parts = g.below(12);
    for _ in 0..parts {
        if g.below(4) == 0 {
            for _ in 0..g.below(80) {
                p.push(g.next() as u8);
            }
        } else {
            p.extend_from_slice(WORDS[g.below(WORDS.len() as u64) as usize]);
        }
    }
    p
}

fn frame(g: &mut Gen, payload: Vec<u8>) -> Vec<u8> {
    let v6 = g.below(3) == 0;
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    } else {
        ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
    };
    let proto = if g.below(2) == 0 {
        Proto::Udp
    } else {
        Proto::Tcp { flags: 0x18 }
    };
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src,
        dst,
        proto,
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
    set: u64,
    limit: u64,
    want: u64,
}

fn cases(sets: &[Dfa], n: usize) -> Vec<Case> {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    (0..n)
        .map(|_| {
            let p = payload(&mut g);
            let set = g.below(3); // set 2 was never filled: no match
            let limit = [0, 1, 7, 30, 64, 65, 200][g.below(7) as usize];
            let eff = if limit == 0 { 2048 } else { limit as usize };
            let want = sets
                .get(set as usize)
                .and_then(|d| d.scan(&p, eff))
                .map_or(0, Match::to_result);
            Case {
                frame: frame(&mut g, p),
                set,
                limit,
                want,
            }
        })
        .collect()
}

fn sets() -> (Vec<Dfa>, Tables) {
    let sets = vec![
        compile(SQLI, &Options::default()).expect("sqli"),
        compile(PROTOS, &Options::default()).expect("protos"),
    ];
    let tables = Tables::build(&sets).expect("tables");
    (sets, tables)
}

fn args(set: u64, limit: u64) -> [([u8; 4], [u8; 8]); 2] {
    [
        (0u32.to_ne_bytes(), set.to_ne_bytes()),
        (1u32.to_ne_bytes(), limit.to_ne_bytes()),
    ]
}

fn fill_vm(vm: &Vm, t: &Tables) {
    let zero = 0u32.to_ne_bytes();
    vm.map("nf_dpi_next")
        .expect("next")
        .update(&zero, &t.next, 0)
        .expect("next");
    vm.map("nf_dpi_accept")
        .expect("accept")
        .update(&zero, &t.accept, 0)
        .expect("accept");
    for (i, e) in t.sets.iter().enumerate() {
        vm.map("nf_dpi_sets")
            .expect("sets")
            .update(&(i as u32).to_ne_bytes(), e, 0)
            .expect("set");
    }
}

fn run_vm(hook: &str, cases: &[Case], t: &Tables) -> Vec<String> {
    let vm = Vm::new(&probe(hook), VmConfig::kernel()).expect("VM load");
    fill_vm(&vm, t);
    let mut wrong = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        for (k, v) in args(c.set, c.limit) {
            vm.map("probe_args")
                .expect("args")
                .update(&k, &v, 0)
                .expect("arg");
        }
        let ctx = if hook == "XDP" {
            Context::Xdp(XdpMd::new(&c.frame))
        } else {
            Context::Skb(SkBuff::new(&c.frame))
        };
        let res = vm.run("probe", ctx, &RunOptions::default());
        if let Err(e) = &res.result {
            wrong.push(format!("{hook} case {i}: VM fault {e}"));
            continue;
        }
        let got = vm
            .map("probe_out")
            .expect("out")
            .lookup(&0u32.to_ne_bytes())
            .expect("lookup")
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")));
        if got != Some(c.want) {
            wrong.push(format!(
                "{hook} case {i} (set {}, limit {}): VM {got:x?}, scan {:x}",
                c.set, c.limit, c.want
            ));
        }
    }
    wrong
}

#[test]
fn the_nf_gives_the_scan_in_the_vm() {
    let (sets, t) = sets();
    let cases = cases(&sets, 1500);
    let matched = cases.iter().filter(|c| c.want != 0).count();
    assert!(
        matched > 100 && matched < 1000,
        "{matched} of 1500 cases match"
    );
    let mut wrong = run_vm("XDP", &cases, &t);
    wrong.extend(run_vm("TC", &cases[..500], &t));
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_nf_gives_the_scan_in_the_kernel() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (sets, t) = sets();
    let cases = cases(&sets, 1500);
    let mut wrong = Vec::new();
    for hook in ["XDP", "TC"] {
        let k = nfkit_kernel::load_image(&probe(hook), &nfkit_kernel::LoadOptions::default())
            .expect("the kernel verifies the dpi NF");
        let zero = 0u32.to_ne_bytes();
        k.map("nf_dpi_next")
            .expect("next")
            .update(&zero, &t.next, 0)
            .expect("next");
        k.map("nf_dpi_accept")
            .expect("accept")
            .update(&zero, &t.accept, 0)
            .expect("accept");
        for (i, e) in t.sets.iter().enumerate() {
            k.map("nf_dpi_sets")
                .expect("sets")
                .update(&(i as u32).to_ne_bytes(), e, 0)
                .expect("set");
        }
        let prog = k.prog("probe").expect("probe");
        for (i, c) in cases.iter().enumerate() {
            for (key, v) in args(c.set, c.limit) {
                k.map("probe_args")
                    .expect("args")
                    .update(&key, &v, 0)
                    .expect("arg");
            }
            if let Err(e) = prog.test_run(&nfkit_kernel::TestRun::packet(&c.frame)) {
                wrong.push(format!("{hook} case {i}: kernel: {e}"));
                continue;
            }
            let got = k
                .map("probe_out")
                .expect("out")
                .lookup(&zero)
                .expect("lookup")
                .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("u64")));
            if got != Some(c.want) {
                wrong.push(format!(
                    "{hook} case {i} (set {}, limit {}): kernel {got:x?}, scan {:x}",
                    c.set, c.limit, c.want
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The transition tables are read-only to programs (`BPF_F_RDONLY_PROG`):
/// only the control plane writes them, so an NF bug cannot corrupt the
/// DFA another chain shares.
#[test]
fn the_tables_are_read_only_to_programs() {
    const BPF_F_RDONLY_PROG: u32 = 1 << 7;
    for hook in ["XDP", "TC"] {
        let image = probe(hook);
        for name in ["nf_dpi_next", "nf_dpi_accept", "nf_dpi_sets"] {
            let m = image
                .maps
                .iter()
                .find(|m| m.name == name)
                .unwrap_or_else(|| panic!("{hook}: map {name} declared"));
            assert_ne!(
                m.flags & BPF_F_RDONLY_PROG,
                0,
                "{hook}: {name} flags {:#x}",
                m.flags
            );
        }
    }
}

//! DPI in the kernel (root; skipped otherwise): ns per packet of the
//! catalogue's `dpi` NF through `BPF_PROG_TEST_RUN`, against payload
//! length (64 to 1460 bytes of text no pattern matches, so the whole
//! payload is scanned) and the number of patterns (1, the 6 of `sqli`,
//! the 15 of sqli + bittorrent + protocols). The table goes to
//! `target/nfkit-bench/dpi.md` and stdout. The baseline: the same one-pattern scan written by hand in C
//! (`tests/progs/dpi_hand.c`, a state machine over `bpf_loop` with the
//! same chunk loads; checked against the regex crate in
//! `tests/differential.rs`).

use nfkit_corpus::clang::BpfBuild;
use nfkit_dpi::catalogue::{BITTORRENT, PROTOCOLS, SQLI};
use nfkit_dpi::{compile, Options, Tables};
use nfkit_kernel::{load_image, LoadOptions, Loaded, TestRun};
use nfkit_object::Image;
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use std::path::PathBuf;

type Res<T> = Result<T, String>;

const LENGTHS: [usize; 4] = [64, 256, 1024, 1460];
const REPEAT: u32 = 2000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load(src: &str) -> Res<Loaded> {
    let b = BpfBuild::new(root().join(src))
        .include(root().join("nf/include"))
        .include(root().join("nf"))
        .define("NF_HOOK_XDP");
    let obj = b.bytes().map_err(|e| format!("{src}: {e}"))?;
    let image = Image::from_elf(&obj, src).map_err(|e| e.to_string())?;
    load_image(&image, &LoadOptions::default()).map_err(|e| format!("{src}: {e}"))
}

fn frame(len: usize) -> Res<Vec<u8>> {
    let text = b"The quick brown fox jumps over the lazy dog; selection of unions. ";
    let payload: Vec<u8> = text.iter().copied().cycle().take(len).collect();
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src: "198.18.0.1".parse().map_err(|_| "addr")?,
        dst: "198.18.0.2".parse().map_err(|_| "addr")?,
        proto: Proto::Udp,
        sport: 40000,
        dport: 80,
        ttl: 64,
        tos: 0,
        payload,
    })
    .map_err(|e| e.to_string())
}

/// Median over 5 test runs of `REPEAT` repetitions: ns per packet.
fn time(k: &Loaded, prog: &str, f: &[u8]) -> Res<f64> {
    let p = k.prog(prog).ok_or_else(|| format!("no program {prog}"))?;
    let mut ns = Vec::new();
    for _ in 0..5 {
        let out = p
            .test_run(&TestRun {
                repeat: REPEAT,
                ..TestRun::packet(f)
            })
            .map_err(|e| e.to_string())?;
        ns.push(f64::from(out.duration_ns));
    }
    ns.sort_by(f64::total_cmp);
    Ok(ns[2])
}

fn run() -> Res<String> {
    let probe = load("crates/nfkit-dpi/tests/progs/dpi_probe.c")?;
    let all: Vec<&str> = SQLI
        .patterns
        .iter()
        .chain(BITTORRENT.patterns)
        .chain(PROTOCOLS.patterns)
        .copied()
        .collect();
    let sets: [(&str, Vec<&str>); 3] = [
        ("1 (`(?i)union\\s+select`)", SQLI.patterns[..1].to_vec()),
        ("6 (`sqli`)", SQLI.patterns.to_vec()),
        ("15 (sqli, bittorrent, protocols as one)", all),
    ];
    let mut t =
        String::from("# DPI in the kernel (BPF_PROG_TEST_RUN, median of 5 x 2000 runs)\n\n");
    t.push_str("ns per packet; payloads no pattern matches (the whole payload scanned).\n\n");
    t.push_str("| scanner | patterns | DFA states |");
    for l in LENGTHS {
        t.push_str(&format!(" {l} B |"));
    }
    t.push_str(" ns per byte (1460 B) |\n|---|---|---|");
    t.push_str(&"---|".repeat(LENGTHS.len() + 1));
    t.push('\n');
    let frames: Vec<Vec<u8>> = LENGTHS.iter().map(|&l| frame(l)).collect::<Res<_>>()?;
    let zero = 0u32.to_ne_bytes();
    for (name, pats) in &sets {
        let dfa = compile(pats, &Options::default()).map_err(|e| e.to_string())?;
        let tables = Tables::build(std::slice::from_ref(&dfa)).map_err(|e| e.to_string())?;
        let m = |n: &str| probe.map(n).ok_or_else(|| format!("no map {n}"));
        m("nf_dpi_next")?
            .update(&zero, &tables.next, 0)
            .map_err(|e| e.to_string())?;
        m("nf_dpi_accept")?
            .update(&zero, &tables.accept, 0)
            .map_err(|e| e.to_string())?;
        m("nf_dpi_sets")?
            .update(&zero, &tables.sets[0], 0)
            .map_err(|e| e.to_string())?;
        for (k, v) in [(0u32, 0u64), (1, 0)] {
            m("probe_args")?
                .update(&k.to_ne_bytes(), &v.to_ne_bytes(), 0)
                .map_err(|e| e.to_string())?;
        }
        t.push_str(&format!("| nf.dpi.match | {name} | {} |", dfa.states()));
        let mut last = 0.0;
        for f in &frames {
            last = time(&probe, "probe", f)?;
            t.push_str(&format!(" {last:.0} |"));
        }
        t.push_str(&format!(" {:.2} |\n", last / 1460.0));
    }
    // The NF object `dpi compile sqli -o` writes (tables in .rodata),
    // loaded by plain libbpf: classifier, chain and counters included.
    let pats: Vec<String> = SQLI.patterns.iter().map(|p| p.to_string()).collect();
    let image = nfkit_lang::patterns::filter_image(
        &pats,
        nfkit_nf::Hook::Xdp,
        0,
        &nfkit_nf::SearchPath::embedded(),
    )
    .map_err(|e| e.to_string())?;
    let bytes = nfkit_object::write_object(&image).map_err(|e| e.to_string())?;
    let path = std::env::temp_dir().join(format!("nfkit-dpi-bench-{}.o", std::process::id()));
    std::fs::write(&path, &bytes).map_err(|e| e.to_string())?;
    let obj = nfkit_kernel::load_object_file(&path);
    let _ = std::fs::remove_file(&path);
    let obj = obj.map_err(|e| format!("libbpf: {e}"))?;
    let entry = image
        .entries
        .first()
        .map(|e| e.name.clone())
        .ok_or("the object has no program")?;
    let states = compile(SQLI.patterns, &Options::default())
        .map_err(|e| e.to_string())?
        .states();
    t.push_str(&format!(
        "| NF object (`dpi compile sqli -o`, libbpf) | 6 (`sqli`) | {states} |"
    ));
    let mut last = 0.0;
    for f in &frames {
        last = time(&obj, &entry, f)?;
        t.push_str(&format!(" {last:.0} |"));
    }
    t.push_str(&format!(" {:.2} |\n", last / 1460.0));
    let hand = load("crates/nfkit-dpi/tests/progs/dpi_hand.c")?;
    t.push_str("| hand-written C | 1 (`(?i)union\\s+select`) | - |");
    let mut last = 0.0;
    for f in &frames {
        last = time(&hand, "hand", f)?;
        t.push_str(&format!(" {last:.0} |"));
    }
    t.push_str(&format!(" {:.2} |\n", last / 1460.0));
    t.push_str("\nThe rows include nfkit's parse into the info block (`nf_enter`).\n");
    Ok(t)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !nfkit_kernel::is_root() {
        println!("dpi bench: skipped (needs root)");
        return;
    }
    match run() {
        Ok(t) => {
            nfkit_corpus::write_bench_report("dpi.md", &t);
            println!("{t}");
        }
        Err(e) => eprintln!("dpi bench failed: {e}"),
    }
}

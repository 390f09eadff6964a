//! Pattern sets in chain scripts and self-contained NF objects, against
//! the `regex` crate: `SET = Patterns([...])` + `match(SET)` compiled by
//! nfkit-lang (two sets in one script, several hooks), and the object
//! `nfkit dpi compile -o NF.o --hook H` writes
//! (`nfkit_lang::patterns::filter_image`), written to ELF and read back,
//! so that only what the object carries (tables as initial map
//! contents) makes it match. In the VM, and in the kernel
//! (`BPF_PROG_TEST_RUN`, verifier included) when run as root. Plus the
//! errors: a bad regex names the pattern and the script line, a blown
//! state budget names the pattern.

mod common;
use common::{expected, reference};
use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::catalogue;
use nfkit_nf::{Hook, SearchPath};
use nfkit_object::{Image, ProgType};
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use nfkit_vm::{Context, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use regex::bytes::Regex;

/// Payloads per test (each through every hook and engine).
const CASES: usize = 3000;

const SAMPLES: &[&[u8]] = &[
    b"UNION SELECT",
    b"union/**/all/**/select",
    b" or 1=1",
    b"'OR+'1'%3d'1",
    b" or 'a'='a",
    b";drop ",
    b"'--",
    b"sleep(",
    b"\x13BitTorrent protocol",
    b"d1:ad2:id20:",
    b"d1:eli2017",
    b"1:y1:qe",
];

/// Filler from the samples' bytes or uniform, a sample (its case
/// flipped now and then) at the start, inside or at the end.
fn payload(g: &mut Gen) -> Vec<u8> {
    let alphabet: Vec<u8> = SAMPLES.iter().flat_map(|s| s.iter().copied()).collect();
    let fill = |g: &mut Gen, n: usize, out: &mut Vec<u8>| {
        let uniform = g.index(2) == 0;
        for _ in 0..n {
            out.push(if uniform {
                g.next() as u8
            } else {
                alphabet[g.index(alphabet.len())]
            });
        }
    };
    let mut p = Vec::new();
    let len = [g.index(16), g.index(200), g.index(1400)][g.index(3)];
    let kind = g.index(4);
    if kind == 0 {
        fill(g, len, &mut p);
        return p;
    }
    let mut s = SAMPLES[g.index(SAMPLES.len())].to_vec();
    if g.index(3) == 0 {
        let i = g.index(s.len());
        s[i] ^= if s[i].is_ascii_alphabetic() { 0x20 } else { 0 };
    }
    let before = match kind {
        1 => 0,
        2 => g.index(len + 1),
        _ => len,
    };
    fill(g, before, &mut p);
    p.extend_from_slice(&s);
    if kind != 3 {
        let after = g.index(60);
        fill(g, after, &mut p);
    }
    p
}

fn frame(g: &mut Gen, payload: Vec<u8>) -> Vec<u8> {
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src: "198.18.0.1".parse().expect("ip"),
        dst: "198.18.0.2".parse().expect("ip"),
        proto: if g.index(2) == 0 {
            Proto::Udp
        } else {
            Proto::Tcp { flags: 0x18 }
        },
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
    payload_len: usize,
    /// Per set.
    want: Vec<u64>,
}

fn cases(sets: &[&[&str]], seed: u64) -> Vec<Case> {
    let res: Vec<Vec<Regex>> = sets.iter().map(|s| reference(s, false)).collect();
    let mut g = Gen(seed);
    (0..CASES)
        .map(|_| {
            let p = payload(&mut g);
            let want = res.iter().map(|r| expected(r, &p)).collect();
            Case {
                payload_len: p.len(),
                frame: frame(&mut g, p),
                want,
            }
        })
        .collect()
}

fn u64_of(v: Option<Vec<u8>>) -> Option<u64> {
    v.and_then(|v| {
        v.get(..8)
            .map(|b| u64::from_ne_bytes(b.try_into().expect("8")))
    })
}

fn vm_ctx(hook: Hook, f: &[u8]) -> Context<'_> {
    match hook {
        Hook::Xdp | Hook::Switch => Context::Xdp(XdpMd::new(f)),
        _ => Context::Skb(SkBuff::new(f)),
    }
}

fn report(wrong: &[String], what: &str) {
    assert!(
        wrong.is_empty(),
        "{what}: {} disagreements of {CASES}; first:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(10)].join("\n")
    );
}

fn script(hook: &str) -> String {
    let lit = |s: &[&str]| {
        s.iter()
            .map(|p| nfkit_lang::patterns::script_literal(p))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "from nf.classify import every_packet\n\
         from nf.dpi import match\n\
         SQLI = Patterns([{}])\n\
         P2P = Patterns([{}])\n\
         out = ArrayMap(u64, 2)\n\
         def scan() -> u64:\n    out[0] = match(SQLI)\n    out[1] = match(P2P, 2048)\n    return PASS\n\
         every_packet(scan)\n\
         attach(\"dpi0\", \"{hook}\")\n",
        lit(catalogue::SQLI.patterns),
        lit(catalogue::BITTORRENT.patterns)
    )
}

fn compile_script(hook: Hook, name: &str) -> nfkit_lang::Compiled {
    let opts = nfkit_lang::Options {
        search: SearchPath::embedded(),
        hook: Some(hook),
    };
    nfkit_lang::compile("dpi_script.py", &script(name), &opts).expect("the script compiles")
}

/// Control-plane writes a runner does (the classifier's configuration).
fn vm_with_config(c: &nfkit_lang::Compiled) -> Vm {
    let vm = Vm::new(&c.image, VmConfig::kernel()).expect("VM load");
    for (m, k, v) in c.control_plane() {
        vm.map(&m).expect("map").update(&k, &v, 0).expect("config");
    }
    vm
}

#[test]
fn a_script_with_two_pattern_sets_equals_the_regex_crate_in_the_vm() {
    let sets: [&[&str]; 2] = [catalogue::SQLI.patterns, catalogue::BITTORRENT.patterns];
    let cases = cases(&sets, 0x5eed_0001);
    for (hook, name) in [
        (Hook::Xdp, "xdp"),
        (Hook::Tc, "tc"),
        (Hook::Socket, "socket"),
        (Hook::Switch, "switch"),
    ] {
        let c = compile_script(hook, name);
        let entry = c.entry().expect("entry").to_string();
        let vm = vm_with_config(&c);
        let out = vm.map("out").expect("out");
        let mut wrong = Vec::new();
        let mut matched = [0usize; 2];
        for (i, k) in cases.iter().enumerate() {
            let r = vm.run(
                entry.as_str(),
                vm_ctx(hook, &k.frame),
                &RunOptions::default(),
            );
            if let Err(e) = r.result {
                wrong.push(format!("case {i}: {e}"));
                continue;
            }
            for (s, want) in k.want.iter().enumerate() {
                let got = u64_of(out.lookup(&(s as u32).to_ne_bytes()).expect("lookup"));
                matched[s] += (*want != 0) as usize;
                if got != Some(*want) {
                    wrong.push(format!(
                        "case {i} set {s} (payload {} bytes): VM {got:x?}, regex {want:x}",
                        k.payload_len
                    ));
                }
            }
        }
        report(&wrong, &format!("script at {name} in the VM"));
        assert!(
            matched.iter().all(|&m| m * 20 > CASES),
            "matches {matched:?}"
        );
    }
}

#[test]
fn a_script_with_two_pattern_sets_equals_the_regex_crate_in_the_kernel() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let sets: [&[&str]; 2] = [catalogue::SQLI.patterns, catalogue::BITTORRENT.patterns];
    let cases = cases(&sets, 0x5eed_0002);
    for (hook, name) in [
        (Hook::Xdp, "xdp"),
        (Hook::Tc, "tc"),
        (Hook::Socket, "socket"),
    ] {
        let c = compile_script(hook, name);
        let entry = c.entry().expect("entry").to_string();
        let k = nfkit_kernel::load_image(&c.image, &nfkit_kernel::LoadOptions::default())
            .unwrap_or_else(|e| panic!("the kernel loads the script at {name}: {e}"));
        for (m, key, v) in c.control_plane() {
            k.map(&m).expect("map").update(&key, &v, 0).expect("config");
        }
        let prog = k.prog(&entry).expect("entry");
        let out = k.map("out").expect("out");
        let mut wrong = Vec::new();
        for (i, kc) in cases.iter().enumerate() {
            if let Err(e) = prog.test_run(&nfkit_kernel::TestRun::packet(&kc.frame)) {
                wrong.push(format!("case {i}: {e}"));
                continue;
            }
            for (s, want) in kc.want.iter().enumerate() {
                let got = u64_of(out.lookup(&(s as u32).to_ne_bytes()).expect("lookup"));
                if got != Some(*want) {
                    wrong.push(format!("case {i} set {s}: kernel {got:x?}, regex {want:x}"));
                }
            }
        }
        report(&wrong, &format!("script at {name} in the kernel"));
    }
}

/// The object `dpi compile -o` writes for `hook`, read back.
fn filter_object(hook: Hook) -> Image {
    let pats: Vec<String> = catalogue::SQLI
        .patterns
        .iter()
        .map(|p| p.to_string())
        .collect();
    let image = nfkit_lang::patterns::filter_image(&pats, hook, 0, &SearchPath::embedded())
        .expect("filter image");
    let bytes = nfkit_object::write_object(&image).expect("write object");
    Image::from_elf(&bytes, "dpi_filter.o").expect("read object")
}

/// Whether a return value of `t` is the filter's drop.
fn dropped(t: ProgType, ret: u64) -> bool {
    match t {
        ProgType::Xdp => ret == 1,
        ProgType::SchedCls => ret == 2,
        _ => ret == 0,
    }
}

#[test]
fn the_nf_object_alone_equals_the_regex_crate_in_the_vm_and_the_kernel() {
    let sets: [&[&str]; 1] = [catalogue::SQLI.patterns];
    let cases = cases(&sets, 0x5eed_0003);
    for hook in [Hook::Xdp, Hook::Tc, Hook::Socket] {
        let img = filter_object(hook);
        let e = &img.entries[0];
        let (entry, t) = (e.name.clone(), e.prog_type);
        for name in [
            ".rodata.nf_dpi_next",
            ".rodata.nf_dpi_accept",
            ".rodata.nf_dpi_sets",
        ] {
            assert!(
                img.map(name).is_some_and(|(_, m)| m.data.is_some()
                    && matches!(
                        m.kind,
                        nfkit_object::MapKind::Global {
                            read_only: true,
                            ..
                        }
                    )),
                "the object carries the tables as read-only global data ({name})"
            );
        }
        // The VM, nothing written by the test.
        let vm = Vm::new(&img, VmConfig::kernel()).expect("VM load");
        let last = vm.map("dpi_last").expect("dpi_last");
        let mut wrong = Vec::new();
        for (i, c) in cases.iter().enumerate() {
            let r = vm.run(
                entry.as_str(),
                vm_ctx(hook, &c.frame),
                &RunOptions::default(),
            );
            let ret = match r.result {
                Ok(v) => v,
                Err(e) => {
                    wrong.push(format!("case {i}: {e}"));
                    continue;
                }
            };
            let got = u64_of(last.lookup(&0u32.to_ne_bytes()).expect("lookup"));
            if got != Some(c.want[0]) || dropped(t, ret) != (c.want[0] != 0) {
                wrong.push(format!(
                    "{hook:?} case {i}: VM {got:x?} (returned {ret}), regex {:x}",
                    c.want[0]
                ));
            }
        }
        report(&wrong, &format!("object {hook:?} in the VM"));
        if !nfkit_kernel::is_root() {
            eprintln!("kernel part skipped: needs root");
            continue;
        }
        let k = nfkit_kernel::load_image(&img, &nfkit_kernel::LoadOptions::default())
            .unwrap_or_else(|e| panic!("the kernel loads the {hook:?} object: {e}"));
        let prog = k.prog(&entry).expect("entry");
        let last = k.map("dpi_last").expect("dpi_last");
        for (i, c) in cases.iter().enumerate() {
            let ret = match prog.test_run(&nfkit_kernel::TestRun::packet(&c.frame)) {
                Ok(o) => o.retval as u64,
                Err(e) => {
                    wrong.push(format!("case {i}: {e}"));
                    continue;
                }
            };
            let got = u64_of(last.lookup(&0u32.to_ne_bytes()).expect("lookup"));
            if got != Some(c.want[0]) || dropped(t, ret) != (c.want[0] != 0) {
                wrong.push(format!(
                    "{hook:?} case {i}: kernel {got:x?} (returned {ret}), regex {:x}",
                    c.want[0]
                ));
            }
        }
        report(&wrong, &format!("object {hook:?} in the kernel"));
    }
}

fn script_error(body: &str) -> String {
    let src = format!(
        "from nf.classify import every_packet\nfrom nf.dpi import match\n{body}\n\
         def scan() -> u64:\n    if match(BAD) != 0:\n        return DROP\n    return PASS\n\
         every_packet(scan)\n"
    );
    match nfkit_lang::compile("bad.py", &src, &nfkit_lang::Options::default()) {
        Ok(_) => panic!("compiled: {body}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_patterns_are_refused_naming_the_pattern_and_the_line() {
    let e = script_error("BAD = Patterns([\"abc\",\n    \"(unclosed\"])");
    assert!(e.contains("bad.py:4"), "{e}");
    assert!(e.contains("pattern 1 `(unclosed`"), "{e}");
    let e = script_error("BAD = Patterns([\"ok\", \"(a|b)*a(a|b){12}\"], max_states=200)");
    assert!(e.contains("bad.py:3"), "{e}");
    assert!(e.contains("pattern 1") && e.contains("too large"), "{e}");
    let e = script_error("BAD = Patterns(file=\"no_such_patterns.txt\")");
    assert!(e.contains("cannot read pattern file"), "{e}");
    let e = script_error("BAD = Patterns([1])");
    assert!(e.contains("a pattern is a string"), "{e}");
}

/// `examples/dpi/filter.py` (a pattern file among its sets) on known
/// packets in the VM at every hook: what it drops and counts.
#[test]
fn the_example_drops_and_counts_what_it_should() {
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/dpi/filter.py");
    let src = std::fs::read_to_string(&path).expect("example");
    let mut g = Gen(7);
    // (payload, TCP, dport, dropped, hits entry)
    let cases: [(&[u8], u16, bool, Option<u32>); 6] = [
        (
            b"GET /?id=1 UNION  SELECT x HTTP/1.1\r\n",
            80,
            true,
            Some(0),
        ),
        (b"GET /?id=1 HTTP/1.1\r\n", 80, false, None),
        (b"GET /?q=union select HTTP/1.1", 8080, false, None),
        (b"\x13BitTorrent protocol....", 6881, true, Some(1)),
        (b"d1:ad2:id20:abcdefghij", 6881, true, Some(1)),
        (b"SSH-2.0-OpenSSH_9\r\n", 22, false, Some(2)),
    ];
    for (hook, name) in [
        (Hook::Xdp, "xdp"),
        (Hook::Tc, "tc"),
        (Hook::Switch, "switch"),
    ] {
        let opts = nfkit_lang::Options {
            search: SearchPath::embedded(),
            hook: Some(hook),
        };
        let c = nfkit_lang::compile(&path.display().to_string(), &src, &opts)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let entry = c.entry().expect("entry").to_string();
        let vm = vm_with_config(&c);
        let mut want_hits = [0u64; 4];
        for (p, dport, drop, hit) in cases {
            let mut f = frame(&mut g, p.to_vec());
            // Ethernet + IPv4 (20): the destination port at 36.
            f[36..38].copy_from_slice(&dport.to_be_bytes());
            let ret = vm
                .run(entry.as_str(), vm_ctx(hook, &f), &RunOptions::default())
                .result
                .expect("runs");
            let dropped = match hook {
                Hook::Tc => ret == 2,
                Hook::Xdp => ret == 1,
                _ => nfkit_abi::verdict::decode(ret)
                    .is_some_and(|(a, _)| a == nfkit_abi::verdict::Action::Drop),
            };
            assert_eq!(dropped, drop, "{name}: {:?}", String::from_utf8_lossy(p));
            if let Some(h) = hit {
                want_hits[h as usize] += 1;
            }
        }
        let hits = vm.map("hits").expect("hits");
        for (i, &w) in want_hits.iter().enumerate() {
            let got = u64_of(hits.lookup(&(i as u32).to_ne_bytes()).expect("lookup"));
            assert_eq!(got, Some(w), "{name}: hits[{i}]");
        }
    }
}

/// Runs `c` (entry `scan`, writing `out[0]` and `out[1]`) on every case
/// in the VM and, as root, in the kernel; the disagreements with the
/// `regex` crate.
fn out_disagreements(c: &nfkit_lang::Compiled, hook: Hook, cases: &[Case]) -> Vec<String> {
    let entry = c.entry().expect("entry").to_string();
    let vm = vm_with_config(c);
    let mut wrong = Vec::new();
    let check =
        |engine: &str, i: usize, k: &Case, got: [Option<u64>; 2], wrong: &mut Vec<String>| {
            for (s, want) in k.want.iter().enumerate() {
                if got[s] != Some(*want) {
                    wrong.push(format!(
                        "{engine} case {i} set {s}: {:x?}, regex {want:x}",
                        got[s]
                    ));
                }
            }
        };
    let out = vm.map("out").expect("out");
    for (i, k) in cases.iter().enumerate() {
        let r = vm.run(
            entry.as_str(),
            vm_ctx(hook, &k.frame),
            &RunOptions::default(),
        );
        if let Err(e) = r.result {
            wrong.push(format!("VM case {i}: {e}"));
            continue;
        }
        let got = [0u32, 1].map(|s| u64_of(out.lookup(&s.to_ne_bytes()).expect("lookup")));
        check("VM", i, k, got, &mut wrong);
    }
    if !nfkit_kernel::is_root() {
        eprintln!("kernel part skipped: needs root");
        return wrong;
    }
    let kl = nfkit_kernel::load_image(&c.image, &nfkit_kernel::LoadOptions::default())
        .unwrap_or_else(|e| panic!("the kernel loads the script: {e}"));
    for (m, key, v) in c.control_plane() {
        kl.map(&m)
            .expect("map")
            .update(&key, &v, 0)
            .expect("config");
    }
    let prog = kl.prog(&entry).expect("entry");
    let out = kl.map("out").expect("out");
    for (i, k) in cases.iter().enumerate() {
        if let Err(e) = prog.test_run(&nfkit_kernel::TestRun::packet(&k.frame)) {
            wrong.push(format!("kernel case {i}: {e}"));
            continue;
        }
        let got = [0u32, 1].map(|s| u64_of(out.lookup(&s.to_ne_bytes()).expect("lookup")));
        check("kernel", i, k, got, &mut wrong);
    }
    wrong
}

/// A library script (`lib/p2p.py`) with its own `Patterns` (set 0 in
/// the library, set 1 once imported after the script's own set): its
/// chain's `match` must scan with its set, the script's with the
/// script's.
#[test]
fn patterns_of_a_library_script_keep_their_own_set() {
    let dir = std::env::temp_dir().join(format!("nfkit-dpi-lib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("lib")).expect("dir");
    let lit = |s: &[&str]| {
        s.iter()
            .map(|p| nfkit_lang::patterns::script_literal(p))
            .collect::<Vec<_>>()
            .join(", ")
    };
    std::fs::write(
        dir.join("lib/p2p.py"),
        format!(
            "from nf.dpi import match\n\
             P2P = Patterns([{}])\n\
             def p2p() -> u64:\n    return match(P2P, 2048)\n",
            lit(catalogue::BITTORRENT.patterns)
        ),
    )
    .expect("lib");
    let main = format!(
        "from nf.classify import every_packet\n\
         from nf.dpi import match\n\
         from lib.p2p import p2p\n\
         SQLI = Patterns([{}])\n\
         out = ArrayMap(u64, 2)\n\
         def scan() -> u64:\n    out[0] = match(SQLI)\n    out[1] = p2p()\n    return PASS\n\
         every_packet(scan)\n",
        lit(catalogue::SQLI.patterns)
    );
    let path = dir.join("main.py");
    std::fs::write(&path, &main).expect("main");
    let opts = nfkit_lang::Options {
        search: SearchPath::embedded(),
        hook: Some(Hook::Xdp),
    };
    let c = nfkit_lang::compile(&path.display().to_string(), &main, &opts);
    let _ = std::fs::remove_dir_all(&dir);
    let c = c.unwrap_or_else(|e| panic!("the script compiles: {e}"));
    assert_eq!(c.program.patterns.len(), 2, "the library's set is merged");
    let sets: [&[&str]; 2] = [catalogue::SQLI.patterns, catalogue::BITTORRENT.patterns];
    let cases = cases(&sets, 0x5eed_0004);
    let matched: Vec<usize> = (0..2)
        .map(|s| cases.iter().filter(|k| k.want[s] != 0).count())
        .collect();
    assert!(
        matched.iter().all(|&m| m * 20 > CASES),
        "matches {matched:?}"
    );
    report(
        &out_disagreements(&c, Hook::Xdp, &cases),
        "a library's Patterns",
    );
}

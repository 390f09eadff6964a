//! Inlined static builds (docs/cost.md: classifier, dispatcher, chains
//! and NFs in one function) against the same scripts built with calls:
//! every example gives the same report (verdicts, per-chain counters,
//! every map, script's and NFs') and the same output packets on both VM
//! engines, and in the kernel the same return codes, packets and final
//! contents of every map but the info block (per-packet scratch, of which
//! the inlined build stores only the bytes its chain reads). The property test (prop.rs) compares the two
//! builds on its random scripts too.

mod common;
use common::*;
use nfkit_control::runner::run_capture_on;
use nfkit_lang::link::Inline;
use nfkit_lang::{compile_with, Compiled, Options};
use nfkit_vm::Engine;

fn build(name: &str, src: &str, inline: Inline) -> Compiled {
    compile_with(
        &format!("examples/{name}.py"),
        src,
        &Options::default(),
        inline,
    )
    .unwrap_or_else(|e| panic!("{name} ({inline:?}): {e}"))
}

#[test]
fn examples_inlined_and_with_calls_agree_in_the_vm() {
    for name in EXAMPLES {
        let (src, input) = example(name);
        let on = build(name, &src, Inline::On);
        let off = build(name, &src, Inline::Off);
        assert!(on.inline.as_ref().is_some_and(|r| r.calls_after == 0));
        for engine in [Engine::Interp, Engine::Jit] {
            let a = run_capture_on(&on, &input, false, engine).expect("inlined run");
            let b = run_capture_on(&off, &input, false, engine).expect("run with calls");
            assert_eq!(a.lines.len(), input.len());
            for (x, y) in a.lines.iter().zip(&b.lines) {
                assert_eq!(
                    (&x.chain, &x.verdict, x.code, x.redirect, &x.error),
                    (&y.chain, &y.verdict, y.code, y.redirect, &y.error),
                    "{name} on {engine}: packet {}",
                    x.index
                );
            }
            assert_eq!(a.text(false), b.text(false), "{name} on {engine}: report");
            assert_eq!(a.out, b.out, "{name} on {engine}: output packets");
        }
    }
}

/// What a kernel run leaves: (return code, packet) per packet, and every
/// map's entries (sorted; per-CPU values of every CPU).
type KernelRun = (Vec<(u64, Vec<u8>)>, Vec<(String, Vec<Vec<u8>>)>);

/// Loads `c` alone, runs every packet with the clock pinned to its
/// timestamp, then reads every map.
fn kernel_run_all(c: &Compiled, packets: &[(u64, Vec<u8>)]) -> KernelRun {
    let entry = c.entry().expect("entry");
    kernel_run_maps(&c.image, entry, &c.control_plane(), packets)
}

fn kernel_run_maps(
    image: &nfkit_object::Image,
    entry: &str,
    writes: &[(String, Vec<u8>, Vec<u8>)],
    packets: &[(u64, Vec<u8>)],
) -> KernelRun {
    use nfkit_kernel::{load_image, LoadOptions, TestRun};
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let loaded = load_image(image, &LoadOptions::default()).expect("loads");
    for (m, k, v) in writes {
        loaded.map(m).expect("map").update(k, v, 0).expect("write");
    }
    let prog = loaded.prog(entry).expect("prog");
    let cfg = loaded.map("nfkit_config").expect("nfkit_config");
    let mut out = Vec::new();
    for (ts, data) in packets {
        let old = cfg.lookup(&0u32.to_le_bytes()).expect("config");
        let v = old
            .as_deref()
            .and_then(nfkit_abi::NfConfig::from_bytes)
            .unwrap_or_default()
            .pinned_at(*ts)
            .to_bytes();
        cfg.update(&0u32.to_le_bytes(), &v, 0).expect("pin");
        let r = prog.test_run(&TestRun::packet(data)).expect("test run");
        out.push((r.retval as u64, r.data));
    }
    let mut maps = Vec::new();
    for m in loaded.maps() {
        let mut entries: Vec<Vec<u8>> = if m.is_percpu() {
            m.entries_percpu()
                .expect("entries")
                .into_iter()
                .map(|(k, vs)| [k, vs.concat()].concat())
                .collect()
        } else if m.map_type() == nfkit_object::MapType::ProgArray {
            continue;
        } else {
            m.entries()
                .expect("entries")
                .into_iter()
                .map(|(k, v)| [k, v].concat())
                .collect()
        };
        entries.sort();
        maps.push((m.name().to_string(), entries));
    }
    maps.sort();
    (out, maps)
}

#[test]
fn examples_inlined_and_with_calls_agree_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for name in EXAMPLES {
        let (src, input) = example(name);
        let on = build(name, &src, Inline::On);
        let off = build(name, &src, Inline::Off);
        let (codes_on, maps_on) = kernel_run_all(&on, &input);
        let (codes_off, maps_off) = kernel_run_all(&off, &input);
        assert_eq!(codes_on.len(), input.len());
        for (i, (a, b)) in codes_on.iter().zip(&codes_off).enumerate() {
            assert_eq!(a.0, b.0, "{name}: packet {} return code", i + 1);
            if (2..=4).contains(&a.0) {
                assert_eq!(a.1, b.1, "{name}: packet {}", i + 1);
            }
        }
        assert_eq!(
            maps_on.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            maps_off.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "{name}: maps"
        );
        for ((n, a), (_, b)) in maps_on.iter().zip(&maps_off) {
            // The info block is per-packet scratch (docs/abi.md 3): the
            // inlined build stores only the bytes its chain reads
            // (docs/cost.md), so what is left in it after the run differs.
            if n == "nfkit_pktinfo" {
                continue;
            }
            assert_eq!(a, b, "{name}: contents of map {n}");
        }
        // The run did something: some map holds entries.
        assert!(maps_on.iter().any(|(_, e)| !e.is_empty()), "{name}");
    }
}

/// A TC chain with `n` locals (8 bytes each) calling `set_ttl` twice,
/// ctx live across the first call.
fn big_chain(n: usize) -> String {
    let mut src = String::from(
        "from nf.mark import set_ttl\nfrom nf.classify import every_packet\n\ndef big() -> u64:\n",
    );
    for i in 0..n {
        src.push_str(&format!("    v{i}: u64 = Packet.read_u8({i})\n"));
    }
    src.push_str("    x: u64 = 0\n");
    for i in 0..n {
        src.push_str(&format!("    x = x + v{i}\n"));
    }
    src.push_str(
        "    set_ttl(x)\n    set_ttl(Packet.read_u8(0) + 1)\n    return PASS\n\nevery_packet(big)\nattach(\"eth0\", \"tc\")\n",
    );
    src
}

#[test]
fn a_call_kept_for_the_stack_limit_still_loads_and_runs() {
    let packets: Vec<(u64, Vec<u8>)> = (0..4u8)
        .map(|i| {
            (
                1_000_000_000 + u64::from(i),
                udp4(
                    [198, 18, 0, i],
                    [198, 18, 1, 2],
                    1000,
                    2000,
                    0,
                    64 - i,
                    &[7; 64],
                ),
            )
        })
        .collect();
    // The first frame size at which inlining set_ttl would pass 512
    // bytes: that call stays a call, the rest is inlined, and the program
    // (one frame fewer than the build with calls) fits the stack.
    let on = (30..64)
        .map_while(|n| compile_with("big.py", &big_chain(n), &Options::default(), Inline::On).ok())
        .find(|c| c.inline.as_ref().is_some_and(|r| !r.kept.is_empty()))
        .expect("a frame size that keeps a call");
    let report = on.inline.as_ref().expect("report");
    assert!(report.calls_after > 0 && report.calls_after < report.calls_before);
    let a = run_capture_on(&on, &packets, false, Engine::Interp).expect("interpreter");
    let b = run_capture_on(&on, &packets, false, Engine::Jit).expect("JIT");
    assert_eq!(a.text(false), b.text(false));
    assert_eq!(a.out, b.out);
    assert_eq!(a.out.len(), packets.len(), "every packet passes");
    for ((_, o), (_, p)) in a.out.iter().zip(&packets) {
        // set_ttl(first byte + 1): TTL (byte 22) = 0x02 + 1.
        assert_eq!(o[22], 3, "TTL rewritten");
        assert_ne!(o, p);
    }
    if is_root() {
        let (codes, _) = kernel_run_all(&on, &packets);
        let vm: Vec<(u64, Vec<u8>)> = a
            .lines
            .iter()
            .zip(&a.out)
            .map(|(l, (_, d))| (l.code, d.clone()))
            .collect();
        assert_eq!(codes, vm, "kernel return codes and packets");
    }
}

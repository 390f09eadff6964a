//! Dynamic mode (docs/abi.md §5): every example compiled into segments
//! that tail-call the NFs' dynamic entries gives, packet by packet, the
//! same verdicts, output packets, statistics and maps as the static
//! program in the VM, and the same verdicts in the kernel (the whole
//! dynamic Image loaded, `nfkit_progs` filled, `BPF_PROG_TEST_RUN` on the
//! dynamic classifier). Also: the compiler's limits of dynamic mode.

mod common;
use common::*;
use nfkit_control::runner::{run_capture, ScriptVm};
use nfkit_lang::{compile, compile_dynamic, CompileError, DynSlots, Options};

/// One example in one dynamic build: its name (with the build's), its
/// packets, the static build and the dynamic one.
struct Built {
    name: String,
    input: Vec<(u64, Vec<u8>)>,
    st: nfkit_lang::Compiled,
    dy: nfkit_lang::DynCompiled,
}

/// Every example in the default dynamic build and in the one through
/// the NFs' shared entries (`DynSlots::shared_entries`, kept for the
/// benchmarks), each beside its static build.
fn examples_in_both_builds() -> impl Iterator<Item = Built> {
    let shared = DynSlots {
        shared_entries: true,
        ..DynSlots::default()
    };
    let builds = [("", DynSlots::default()), (" (shared entries)", shared)];
    EXAMPLES.iter().flat_map(move |&example_name| {
        let (src, input) = example(example_name);
        let st = compile(example_name, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        builds.clone().map(|(build, slots)| {
            let name = format!("{example_name}{build}");
            let dy = compile_dynamic(example_name, &src, &Options::default(), &slots)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            Built {
                name,
                input: input.clone(),
                st: st.clone(),
                dy,
            }
        })
    })
}

#[test]
fn examples_run_the_same_in_dynamic_mode_in_the_vm() {
    for Built {
        name,
        input,
        st,
        dy,
    } in examples_in_both_builds()
    {
        let name = name.as_str();
        assert!(dy.entry.starts_with("dyn_"), "{name}: entry {}", dy.entry);
        // Every chain has a first segment at its chain id, one more per
        // NF call site; every NF a slot of its own.
        let segs = dy.segments();
        let chains = dy.program.dispatched().len();
        for id in 0..chains as u32 {
            assert!(segs.iter().any(|(_, s)| *s == id), "{name}: chain {id}");
        }
        let nfs = dy.nf_entries();
        let mut slots: Vec<u32> = nfs.iter().map(|n| n.2).collect();
        slots.extend(segs.iter().map(|s| s.1));
        let n = slots.len();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), n, "{name}: slots shared");

        let want = run_capture(&st, &input, false).expect("static run");
        let mut vm = ScriptVm::new_dynamic(&dy).expect("dynamic load");
        let mut out = Vec::new();
        for (i, (ts, data)) in input.iter().enumerate() {
            let (o, _) = vm.run(data, *ts, false).expect("run");
            assert_eq!(o.error, None, "{name}: packet {}", i + 1);
            let l = &want.lines[i];
            assert_eq!(o.code, l.code, "{name}: packet {} ({})", i + 1, l.verdict);
            assert_eq!(o.redirect, l.redirect, "{name}: packet {}", i + 1);
            if (2..=4).contains(&o.code) {
                out.push(o.packet.clone());
            }
        }
        let want_out: Vec<Vec<u8>> = want.out.iter().map(|(_, d)| d.clone()).collect();
        assert_eq!(out, want_out, "{name}: output packets");
        assert_eq!(vm.stats(), want.stats, "{name}: statistics");
        assert_eq!(vm.maps(&dy.program), want.maps, "{name}: maps");
    }
}

#[test]
fn examples_give_the_same_verdicts_in_the_kernel_in_dynamic_mode() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    for Built {
        name,
        input,
        st,
        dy,
    } in examples_in_both_builds()
    {
        let name = name.as_str();
        let want = run_capture(&st, &input, false).expect("static run");
        let k = kernel_run_image(&dy.image, &dy.entry, &dy.control_plane(), &input)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(k.len(), input.len());
        assert_kernel_matches(name, "kernel dynamic", &want, &k);
    }
}

#[test]
fn slots_of_loaded_nfs_are_kept_and_new_ones_are_free() {
    let (src, _) = example("ddos");
    let mut slots = DynSlots::default();
    slots.nfs.insert("nf_tb_dst".into(), 77);
    slots.nfs.insert("nf_unrelated".into(), 64);
    slots.seg_first = 640;
    slots.seg_end = 1024;
    let dy = compile_dynamic("ddos", &src, &Options::default(), &slots).expect("compile");
    assert_eq!(dy.nf_slots.get("nf_tb_dst"), Some(&77));
    for (sym, _, slot) in dy.nf_entries() {
        assert!((64..256).contains(&slot), "{sym} at {slot}");
        assert!(slot != 64, "{sym} took a slot in use");
    }
    for (seg, slot) in dy.segments() {
        assert!(slot == 0 || (640..1024).contains(&slot), "{seg} at {slot}");
    }
}

#[test]
fn too_many_nf_calls_for_tail_calls_is_an_error() {
    let src = "\
from nf.monitor import count
from nf.classify import every_packet

def many() -> u64:
    for i in range(40):
        count(1)
    return PASS

every_packet(many)
";
    // Static mode compiles it; dynamic mode names the chain, the count
    // and the limit.
    compile("many.py", src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let refused = |src: &str, slots: &DynSlots, calls: &str, limit: &str| match compile_dynamic(
        "many.py",
        src,
        &Options::default(),
        slots,
    ) {
        Err(CompileError::Gen { cause: source, .. }) => {
            let m = source.to_string();
            assert!(
                m.contains("'many'") && m.contains(calls) && m.contains(limit),
                "{m}"
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("{calls} compiled in dynamic mode"),
    };
    refused(src, &DynSlots::default(), "40 NF calls", "allow 32");
    // 32 calls fit: one tail call into the chain, one per NF call, 33
    // in all, the kernel's limit; in the kernel the chain runs to its
    // end (a 34th tail call would fail and fault).
    let ok = src.replace("range(40)", "range(32)");
    let dy = compile_dynamic("ok.py", &ok, &Options::default(), &DynSlots::default())
        .unwrap_or_else(|e| panic!("{e}"));
    refused(
        &src.replace("range(40)", "range(33)"),
        &DynSlots::default(),
        "33 NF calls",
        "allow 32",
    );
    // With the NFs' shared entries two tail calls per NF call: 16.
    let shared = DynSlots {
        shared_entries: true,
        ..DynSlots::default()
    };
    refused(
        &src.replace("range(40)", "range(17)"),
        &shared,
        "17 NF calls",
        "allow 16",
    );
    compile_dynamic(
        "ok.py",
        &src.replace("range(40)", "range(16)"),
        &Options::default(),
        &shared,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (_, input) = example("port_stats");
    let input: Vec<(u64, Vec<u8>)> = input.into_iter().take(3).collect();
    let mut vm = ScriptVm::new_dynamic(&dy).expect("dynamic load");
    for (ts, data) in &input {
        let (o, _) = vm.run(data, *ts, false).expect("run");
        assert_eq!((o.error, o.code), (None, 2), "32 NF calls in the VM");
    }
    if is_root() {
        let k = kernel_run_image(&dy.image, &dy.entry, &dy.control_plane(), &input)
            .unwrap_or_else(|e| panic!("{e}"));
        for (i, (code, _)) in k.iter().enumerate() {
            assert_eq!(*code, 2, "kernel packet {}: 32 NF calls", i + 1);
        }
    }
}

#[test]
fn bpf_loop_bodies_call_nfs_directly_in_dynamic_mode() {
    // 5000 NF calls per packet: far beyond 32 tail calls, but the loop
    // runs through bpf_loop, whose callback calls the NF directly; the
    // NF call before the loop is a tail call.
    let src = "\
from nf.parse import dst_port, l4_proto
from nf.classify import every_packet

total = ArrayMap(u64, 1)

def sum_ports() -> u64:
    p: u64 = l4_proto()
    s: u64 = 0
    for i in range(5000):
        s += dst_port()
    total[0] = s + p
    if s > 0:
        return DROP
    return PASS

every_packet(sum_ports)
";
    let opts = Options::default();
    let st = compile("loop.py", src, &opts).unwrap_or_else(|e| panic!("{e}"));
    let dy = compile_dynamic("loop.py", src, &opts, &DynSlots::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        dy.segments().len(),
        2,
        "one tail-called NF call: two segments"
    );
    let (_, input) = example("port_stats");
    let input: Vec<(u64, Vec<u8>)> = input.into_iter().take(6).collect();
    let want = run_capture(&st, &input, false).expect("static run");
    let mut vm = ScriptVm::new_dynamic(&dy).expect("dynamic load");
    for (i, (ts, data)) in input.iter().enumerate() {
        let (o, _) = vm.run(data, *ts, false).expect("run");
        assert_eq!(o.error, None);
        assert_eq!(o.code, want.lines[i].code, "packet {}", i + 1);
    }
    assert_eq!(vm.maps(&dy.program), want.maps);
    if is_root() {
        let k = kernel_run_image(&dy.image, &dy.entry, &dy.control_plane(), &input)
            .unwrap_or_else(|e| panic!("{e}"));
        for (i, (code, _)) in k.iter().enumerate() {
            assert_eq!(*code, want.lines[i].code, "kernel packet {}", i + 1);
        }
    }
}

#[test]
fn examples_at_tc_give_the_same_verdicts_static_and_dynamic_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let opts = Options {
        hook: Some(nfkit_nf::Hook::Tc),
        ..Options::default()
    };
    for name in EXAMPLES {
        let (src, input) = example(name);
        let st = compile(name, &src, &opts).unwrap_or_else(|e| panic!("{e}"));
        let want = kernel_run(&st, &input).unwrap_or_else(|e| panic!("{name}: {e}"));
        let dy = compile_dynamic(name, &src, &opts, &DynSlots::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = kernel_run_image(&dy.image, &dy.entry, &dy.control_plane(), &input)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}: verdicts and packets at tc");
    }
}

#[test]
fn frames_and_slots_that_do_not_fit_are_errors() {
    // 60 locals (480 bytes) live across an NF call: more than the call
    // frame's 56 slots.
    let mut src = String::from(
        "from nf.parse import dst_port\nfrom nf.classify import every_packet\n\ndef big() -> u64:\n",
    );
    for i in 0..60 {
        src.push_str(&format!("    x{i}: u64 = {i}\n"));
    }
    src.push_str("    y: u64 = dst_port()\n");
    let sum: Vec<String> = (0..60).map(|i| format!("x{i}")).collect();
    src.push_str(&format!(
        "    return y + {}\n\nevery_packet(big)\n",
        sum.join(" + ")
    ));
    let err = compile_dynamic("big.py", &src, &Options::default(), &DynSlots::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("chain 'big' (dynamic mode)") && err.contains("line 65"),
        "{err}"
    );

    let (ddos, _) = example("ddos");
    let full = DynSlots {
        seg_first: 300,
        seg_end: 300,
        ..DynSlots::default()
    };
    let err = compile_dynamic("ddos", &ddos, &Options::default(), &full)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("no free slot in nfkit_progs for a segment of chain 'mitigate'"),
        "{err}"
    );
    let no_nf = DynSlots {
        nf_first: 64,
        nf_end: 64,
        ..DynSlots::default()
    };
    let err = compile_dynamic("ddos", &ddos, &Options::default(), &no_nf)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("no free slot in nfkit_progs for NF nf_"),
        "{err}"
    );
}

/// The programs of a dynamic image by name: (insns, the first slot).
fn entry_code<'i>(image: &'i nfkit_object::Image, name: &str) -> Vec<(usize, &'i nfkit_isa::Insn)> {
    let Some(e) = image.entry(name) else {
        return Vec::new();
    };
    let f = &image.functions[e.function];
    let slots = nfkit_isa::slot_offsets(&image.insns);
    image
        .insns
        .iter()
        .enumerate()
        .filter(|(i, _)| (f.start..f.start + f.len).contains(&slots[*i]))
        .collect()
}

/// One tail call per NF call: segment k ends with a constant-key tail
/// call of segment k+1, which runs call site k's NF (inlined) and then
/// the chain on; no program is left for a call site alone, and no local
/// call is left anywhere.
#[test]
fn every_nf_call_runs_in_the_next_segment_and_every_tail_call_a_constant_key() {
    use nfkit_isa::{AluOp, CallKind, Insn, Operand, Reg, Width};
    for name in EXAMPLES {
        let (src, _) = example(name);
        let dy = compile_dynamic(name, &src, &Options::default(), &DynSlots::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let segs = dy.segments();
        // Names: c<id>s<k>_<chain>; no c<id>n<k>_<nf> (a call site's
        // own entry, the build before this one).
        assert!(
            segs.iter()
                .all(|(s, _)| !s.split('_').next().unwrap_or("").contains('n')),
            "{name}: a call site has a program of its own ({segs:?})"
        );
        let mut targets = std::collections::BTreeSet::new();
        let placed = |slot: i32| {
            dy.image
                .map_inits
                .iter()
                .find(|m| m.slot as i32 == slot)
                .map(|m| dy.image.entries[m.entry].name.clone())
        };
        for (seg, _) in &segs {
            let code = entry_code(&dy.image, seg);
            assert!(!code.is_empty(), "{name}: {seg} not in the image");
            for w in code.windows(2) {
                if let Insn::Call {
                    kind: CallKind::Helper,
                    imm: 12,
                } = w[1].1
                {
                    let key = match w[0].1 {
                        Insn::Alu {
                            width: Width::W64,
                            op: AluOp::Mov,
                            dst: Reg::R3,
                            src: Operand::Imm(k),
                        } => *k,
                        other => panic!("{name}: {seg}: tail call key from {other:?}"),
                    };
                    let to =
                        placed(key).unwrap_or_else(|| panic!("{name}: {seg}: slot {key} empty"));
                    assert!(
                        segs.iter()
                            .any(|(s, k)| *s == to && *k as i32 == key && s.contains("s")),
                        "{name}: {seg} tail-calls {to}, not a segment"
                    );
                    targets.insert(to);
                }
            }
            // The NF and nfkit_dyn_finish are inlined.
            assert!(
                !code.iter().any(|(_, x)| matches!(
                    x,
                    Insn::Call {
                        kind: CallKind::Local,
                        ..
                    }
                )),
                "{name}: {seg} keeps a call"
            );
        }
        for (seg, _) in segs
            .iter()
            .filter(|(s, _)| !s.split('_').next().unwrap_or("").ends_with("s0"))
        {
            assert!(targets.contains(seg), "{name}: no tail call reaches {seg}");
        }
    }
}

/// Helper calls to `bpf_map_lookup_elem` and stores outside the stack
/// (into maps, the info block, the packet) of entry `name`.
fn lookups_and_memory_stores(image: &nfkit_object::Image, name: &str) -> (usize, usize) {
    use nfkit_isa::{CallKind, Insn, Reg};
    let code = entry_code(image, name);
    let lookups = code
        .iter()
        .filter(|(_, i)| {
            matches!(
                i,
                Insn::Call {
                    kind: CallKind::Helper,
                    imm: 1
                }
            )
        })
        .count();
    let stores = code
        .iter()
        .filter(|(_, i)| match i {
            Insn::St { dst, .. } | Insn::Stx { dst, .. } | Insn::Atomic { dst, .. } => {
                *dst != Reg::FP
            }
            _ => false,
        })
        .count();
    (lookups, stores)
}

/// The passes after inlining that are sound per program
/// (`DynSlots::passes`, on by default: lookups once, dead registers and
/// stack stores) run on every program of a dynamic build: no program makes more map
/// lookups than without them, the DDoS chain's programs make fewer, and
/// not one store outside the stack goes (the info block is shared by
/// the programs of one packet: a store this program does not read back
/// may be read by the next); in the VM it gives the static build's
/// verdicts, statistics and maps.
#[test]
fn dynamic_programs_look_elements_up_once_and_keep_every_memory_store() {
    let mut fewer = 0;
    for name in EXAMPLES {
        let (src, _) = example(name);
        let on_slots = DynSlots {
            passes: true,
            ..DynSlots::default()
        };
        let on = compile_dynamic(name, &src, &Options::default(), &on_slots)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let off_slots = DynSlots {
            passes: false,
            ..DynSlots::default()
        };
        let off = compile_dynamic(name, &src, &Options::default(), &off_slots)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // In the VM the build with the passes gives what the static
        // build gives, packet by packet.
        let (_, input) = example(name);
        let st = compile(name, &src, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
        let want = run_capture(&st, &input, false).expect("static run");
        let mut vm = ScriptVm::new_dynamic(&on).expect("dynamic load");
        for (i, (ts, data)) in input.iter().enumerate() {
            let (o, _) = vm.run(data, *ts, false).expect("run");
            assert_eq!(o.error, None, "{name}: packet {}", i + 1);
            assert_eq!(o.code, want.lines[i].code, "{name}: packet {}", i + 1);
            assert_eq!(
                o.redirect,
                want.lines[i].redirect,
                "{name}: packet {}",
                i + 1
            );
        }
        assert_eq!(vm.stats(), want.stats, "{name}: statistics");
        assert_eq!(vm.maps(&on.program), want.maps, "{name}: maps");
        for e in &on.image.entries {
            let (l_on, s_on) = lookups_and_memory_stores(&on.image, &e.name);
            let (l_off, s_off) = lookups_and_memory_stores(&off.image, &e.name);
            assert!(
                l_on <= l_off,
                "{name}: {}: {l_on} lookups, {l_off} without the passes",
                e.name
            );
            assert_eq!(s_on, s_off, "{name}: {}: stores outside the stack", e.name);
            if name == "ddos" && l_on < l_off {
                fewer += 1;
            }
        }
    }
    assert!(fewer > 0, "no program of the DDoS chain lost a lookup");
}

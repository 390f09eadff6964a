//! Static-mode inlining (docs/cost.md): every example compiles into one
//! function per entry (classifier, dispatcher, chains and NFs inlined, no
//! call left), with its line info, and an inlined build keeps the
//! non-inlined build's maps and entries.

use nfkit_isa::{CallKind, Insn};
use nfkit_lang::link::Inline;
use nfkit_lang::{compile_with, Options};
use std::path::PathBuf;

fn examples() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).expect("examples/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "py") {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            out.push((name, std::fs::read_to_string(&p).expect("script")));
        }
    }
    out.sort();
    assert!(out.len() >= 5, "examples found: {}", out.len());
    out
}

fn local_calls(image: &nfkit_object::Image) -> usize {
    image
        .insns
        .iter()
        .filter(|i| {
            matches!(
                i,
                Insn::Call {
                    kind: CallKind::Local,
                    ..
                }
            )
        })
        .count()
}

#[test]
fn every_example_inlines_into_one_function_per_entry() {
    for (name, src) in examples() {
        let on = compile_with(&name, &src, &Options::default(), Inline::On)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let off = compile_with(&name, &src, &Options::default(), Inline::Off)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let report = on.inline.as_ref().expect("a report");
        assert!(off.inline.is_none());
        assert!(
            local_calls(&off.image) > 0,
            "{name}: the plain build makes calls"
        );
        assert_eq!(local_calls(&on.image), 0, "{name}: {report:#?}");
        assert_eq!(report.calls_after, 0);
        assert_eq!(report.calls_before, local_calls(&off.image));
        assert!(report.kept.is_empty(), "{name}: {:?}", report.kept);
        // The entry is one function; no chain or NF function is left
        // (`bpf_loop` callbacks stay functions: the helper calls them).
        let callbacks = on
            .image
            .functions
            .iter()
            .filter(|f| f.name.contains("__loop"))
            .count();
        assert_eq!(
            on.image.functions.len() - callbacks,
            on.image.entries.len(),
            "{name}"
        );
        assert_eq!(
            on.image.entries.iter().map(|e| &e.name).collect::<Vec<_>>(),
            off.image
                .entries
                .iter()
                .map(|e| &e.name)
                .collect::<Vec<_>>()
        );
        assert_eq!(on.image.maps, off.image.maps, "{name}: maps");
        // The info block and the configuration are looked up by the
        // classifier and again by the NFs: once is enough.
        println!("{name}: {} lookups removed", report.lookups_removed);
        println!(
            "{name}: {} info-block stores, {} stack stores, {} instructions removed as dead",
            report.dead_info_stores, report.dead_stack_stores, report.dead_removed
        );
        if name == "ddos.py" {
            assert!(report.lookups_removed >= 2, "{name}: {report:?}");
            // The chain's NFs never read rand_state, pkt_len, ifindex,
            // the offsets or tos/ttl: their stores went.
            assert!(report.dead_info_stores >= 5, "{name}: {report:?}");
            // The keys of the lookups done once are stored no more.
            assert!(report.dead_stack_stores >= 2, "{name}: {report:?}");
        }
        // The NFs were inlined into the chains that call them.
        for nf in &on.program.nfs {
            assert!(
                report.inlined.iter().any(|i| i.callee == nf.symbol),
                "{name}: {} not inlined: {report:#?}",
                nf.symbol
            );
        }
        // Line info: the script's lines and the NFs' C lines, sorted,
        // one per slot, each inside the program.
        let slots = on.image.slot_count();
        let li = &on.image.line_info;
        assert!(
            li.windows(2).all(|w| w[0].slot < w[1].slot),
            "{name}: line order"
        );
        assert!(li.iter().all(|l| l.slot < slots));
        assert!(
            li.iter().any(|l| l.file.ends_with(".py")),
            "{name}: script lines"
        );
        assert!(
            li.iter().any(|l| l.file.ends_with(".c")),
            "{name}: NF lines"
        );
    }
}

/// A chain with `n` locals (8 bytes each) that calls `set_ttl` twice.
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
    // ctx (r9) is live across the first call: its inlined body must
    // spill it, which costs the chain 8 more bytes than the calls do.
    src.push_str(
        "    set_ttl(x)\n    set_ttl(Packet.read_u8(0))\n    return PASS\n\nevery_packet(big)\nattach(\"eth0\", \"tc\")\n",
    );
    src
}

#[test]
fn a_stack_too_deep_for_one_frame_keeps_the_call_and_says_so() {
    // Grow the chain's frame until inlining set_ttl below it would pass
    // 512 bytes while the calls alone still fit.
    let mut seen = false;
    for n in 30..64 {
        let src = big_chain(n);
        let Ok(c) = compile_with("big.py", &src, &Options::default(), Inline::On) else {
            break;
        };
        let report = c.inline.as_ref().expect("report");
        let Some(k) = report.kept.first() else {
            assert!(c.warnings.is_empty());
            continue;
        };
        seen = true;
        assert!(k.reason.contains("bytes of stack"), "{k:?}");
        assert!(report.calls_after > 0);
        let w = c
            .warnings
            .iter()
            .find(|w| w.message.contains("stays a call"))
            .expect("a warning names the kept call");
        assert!(
            w.message.contains(&k.callee) && w.message.contains(&k.caller),
            "{w}"
        );
        // What is inlined still works: the kept call's caller is a
        // function of the image, called from the entry.
        assert!(c.image.functions.iter().any(|f| f.name == k.callee));
        break;
    }
    assert!(seen, "no frame size made inlining exceed the stack limit");
}

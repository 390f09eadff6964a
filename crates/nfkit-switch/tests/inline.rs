//! Switch builds inlined (docs/cost.md: classifier, dispatcher, chains and
//! NFs in one function, as for the kernel) against the same scripts built
//! with calls: every example gives, packet by packet in the VM, the same
//! return code, packet, error and counter, the same maps afterwards, and
//! in the switch (pcap ports, one worker) the same frames out of every
//! port, controller frames and counters.

mod common;
use common::*;
use nfkit_abi::Hook;
use nfkit_control::runner::ScriptVm;
use nfkit_lang::link::Inline;
use nfkit_lang::{compile_with, Compiled, Options};

fn build(name: &str, src: &str, inline: Inline) -> Compiled {
    let opts = Options {
        hook: Some(Hook::Switch),
        ..Options::default()
    };
    compile_with(name, src, &opts, inline).unwrap_or_else(|e| panic!("{name} ({inline:?}): {e}"))
}

#[test]
fn switch_builds_inlined_and_with_calls_agree() {
    for (name, path) in &example_scripts() {
        let src = std::fs::read_to_string(path).expect("read example");
        let on = build(name, &src, Inline::On);
        let off = build(name, &src, Inline::Off);
        let report = on.inline.as_ref().expect("an inline report");
        assert!(off.inline.is_none());
        assert!(report.calls_before > 0, "{name}: the plain build calls");
        assert_eq!(report.calls_after, 0, "{name}: {report:#?}");
        assert!(report.kept.is_empty(), "{name}: {:?}", report.kept);
        let packets = nfkit_pcap::read_file(path.with_extension("pcap")).expect("example pcap");
        // The VM, packet by packet, and the maps afterwards.
        let mut a = ScriptVm::new(&on).expect("load inlined");
        let mut b = ScriptVm::new(&off).expect("load with calls");
        let mut insns = (0u64, 0u64);
        for (i, p) in packets.iter().enumerate() {
            let (x, _) = a.run(&p.data, p.ts_ns, false).expect("inlined run");
            let (y, _) = b.run(&p.data, p.ts_ns, false).expect("run with calls");
            assert_eq!(
                (x.code, &x.error, &x.packet, x.redirect, x.stat),
                (y.code, &y.error, &y.packet, y.redirect, y.stat),
                "{name}: packet {i}"
            );
            insns.0 += x.insns;
            insns.1 += y.insns;
        }
        println!(
            "{name}: {} packets, instructions executed inlined {} / with calls {}",
            packets.len(),
            insns.0,
            insns.1
        );
        assert_eq!(a.stats(), b.stats(), "{name}: chain counters");
        assert_eq!(
            a.map_dumps().expect("dump"),
            b.map_dumps().expect("dump"),
            "{name}: maps"
        );
        // The switch itself.
        let dir = scratch(&format!("inline-{name}"));
        let (got_on, s_on) = run_switch(&on, &packets, 1, &dir);
        let (got_off, s_off) = run_switch(&off, &packets, 1, &dir);
        assert_eq!(got_on, got_off, "{name}: switch outputs");
        assert_eq!(s_on.actions, s_off.actions, "{name}: switch verdicts");
        assert_eq!(s_on.chains, s_off.chains, "{name}: switch chain counters");
        assert_eq!(s_on.faults, s_off.faults, "{name}: switch faults");
        std::fs::remove_dir_all(&dir).ok();
    }
}

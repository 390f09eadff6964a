//! Each example written by hand in C (`examples/c/NAME.c`, the baseline
//! of `make bench`) implements the same logic as the compiled script:
//! on the example's pcap, with the clock pinned to each packet's time,
//! both give the same verdict (return code and redirect target) and the
//! same packet afterwards, packet by packet, in the VM and (as root) in
//! the kernel through `BPF_PROG_TEST_RUN`.

#[path = "../benches/baseline/mod.rs"]
mod baseline;

use baseline::*;
use nfkit_control::runner::run_capture_on;
use nfkit_vm::Engine;

fn example(name: &'static str) -> Example {
    load_example(name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// On each engine of the VM.
#[test]
fn hand_c_gives_the_script_verdicts_in_the_vm() {
    for engine in [Engine::Jit, Engine::Interp] {
        for name in EXAMPLES {
            hand_c_agrees_in_the_vm(&example(name), engine);
        }
    }
}

fn hand_c_agrees_in_the_vm(ex: &Example, engine: Engine) {
    let name = format!("{} ({engine})", ex.name);
    // The reference: the script as `nfkit run` runs it.
    let script = run_capture_on(&ex.compiled, &ex.packets, false, engine).expect("nfkit run");
    let mut nfkit = VmProg::new_on(ex, Side::Nfkit, engine).expect("compiled in the VM");
    let mut hand = VmProg::new_on(ex, Side::HandC, engine).expect("hand C in the VM");
    let mut verdicts = std::collections::BTreeSet::new();
    for (i, (ts, frame)) in ex.packets.iter().enumerate() {
        let n = nfkit.run(frame, *ts).expect("run");
        let h = hand.run(frame, *ts).expect("run");
        let line = &script.lines[i];
        assert_eq!(n.code, line.code, "{name} packet {}: harness", i + 1);
        assert!(h.error.is_none(), "{name} packet {}: {:?}", i + 1, h.error);
        assert_eq!(
            (h.code, h.redirect),
            (line.code, line.redirect),
            "{name} packet {}: hand C / script ({})",
            i + 1,
            line.verdict
        );
        assert_eq!(h.packet, n.packet, "{name} packet {}: packet", i + 1);
        verdicts.insert(h.code);
    }
    // The pcaps exercise more than one path of each program.
    assert!(verdicts.len() >= 2, "{name}: only verdicts {verdicts:?}");
}

#[test]
fn hand_c_gives_the_script_verdicts_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    for name in EXAMPLES {
        let ex = example(name);
        let nfkit = KernelProg::load(&ex, Side::Nfkit).unwrap_or_else(|e| panic!("{e}"));
        let hand = KernelProg::load(&ex, Side::HandC).unwrap_or_else(|e| panic!("{e}"));
        let mut vm = VmProg::new(&ex, Side::HandC).expect("hand C in the VM");
        for (i, (ts, frame)) in ex.packets.iter().enumerate() {
            let n = nfkit.run(frame, *ts, 1).expect("test run");
            let h = hand.run(frame, *ts, 1).expect("test run");
            let v = vm.run(frame, *ts).expect("vm");
            assert_eq!(
                (h.retval, &h.packet),
                (n.retval, &n.packet),
                "{name} packet {}: hand C / compiled in the kernel",
                i + 1
            );
            assert_eq!(
                (h.retval as u64, &h.packet),
                (v.code, &v.packet),
                "{name} packet {}: kernel / VM",
                i + 1
            );
        }
    }
}

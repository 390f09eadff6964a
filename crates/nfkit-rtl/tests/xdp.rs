//! XDP programs on the RTL core against the VM: the context (r1 =
//! `struct xdp_md` in the metadata, packet pointers from 4-byte loads of
//! data/data_end, the packet after the kernel's headroom) gives the same
//! verdicts, packets and instruction counts as the VM on the example
//! captures and on 10,000 random frames, with a sample co-simulated by
//! trace; the same with the packet streaming in while the program runs
//! (packet accesses wait for their bytes: results equal, cycles grow by
//! exactly the waits).

mod common;

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_object::{Image, ProgType};
use nfkit_rtl::{Core, Ctx, Program, RunInput};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};

const REFLECT: &str = include_str!("progs/xdp_reflect.s");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");

fn load() -> (Vm, Core) {
    let insns = assemble(REFLECT, Some(Syntax::Llvm)).expect("assembles");
    let image = Image::from_insns("xdp_reflect", ProgType::Xdp, insns);
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let prog = Program::from_image(&image, 0).expect("within the subset");
    (vm, Core::new(prog).expect("RTL model built"))
}

/// Runs one frame on both; `Err` says how they differ.
fn check(vm: &Vm, core: &mut Core, frame: &[u8], trace: bool) -> Result<u64, String> {
    check_mode(vm, core, frame, trace, false)
}

fn check_mode(
    vm: &Vm,
    core: &mut Core,
    frame: &[u8],
    trace: bool,
    stream: bool,
) -> Result<u64, String> {
    let opts = RunOptions {
        trace,
        interp: trace,
        ..RunOptions::default()
    };
    let want = vm.run(0, Context::Xdp(XdpMd::new(frame)), &opts);
    let mut input = RunInput::new(frame);
    input.ctx = Ctx::Xdp {
        ingress_ifindex: 1,
        rx_queue_index: 0,
    };
    input.trace = trace;
    input.stream = stream;
    let got = core.run(&input).map_err(|e| e.to_string())?;
    let s = got.stalls;
    if got.cycles != got.retired + 3 + s.load_use + s.div + s.call + s.rx + s.flushes {
        return Err(format!("cycle accounting: {got:?}"));
    }
    if !stream && s.rx != 0 {
        return Err("waits for packet bytes without streaming".into());
    }
    common::compare_xdp(&want, &got)?;
    if trace {
        let slots: Vec<usize> = want.trace.iter().map(|s| s.slot).collect();
        if slots != got.trace {
            return Err("trace differs".into());
        }
    }
    got.result.map_err(|f| format!("RTL faulted: {f:?}"))
}

#[test]
fn example_captures_match_the_vm() {
    let (vm, mut core) = load();
    let mut n = 0;
    let mut verdicts = [0usize; 4];
    for entry in std::fs::read_dir(EXAMPLES).expect("examples/ exists") {
        let path = entry.expect("dir entry").path();
        let name = path.to_string_lossy().into_owned();
        if !name.ends_with(".pcap") || name.ends_with(".out.pcap") {
            continue;
        }
        for (i, p) in nfkit_pcap::read_file(&path)
            .expect("readable pcap")
            .iter()
            .enumerate()
        {
            let r0 = check(&vm, &mut core, &p.data, i % 10 == 0)
                .unwrap_or_else(|e| panic!("{name} packet {}: {e}", i + 1));
            verdicts[(r0 as usize).min(3)] += 1;
            n += 1;
        }
    }
    assert!(n > 100, "only {n} packets in the example captures");
    assert!(verdicts[3] > 0, "some frames reflected: {verdicts:?}");
}

#[test]
fn random_frames_match_the_vm() {
    let (vm, mut core) = load();
    let mut s: u64 = 0x22_5eed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut verdicts = [0usize; 4];
    for i in 0..10_000 {
        let len = 14 + (next() % 120) as usize;
        let mut frame: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if next() % 4 != 0 && len > 13 {
            frame[12] = 0x08;
            frame[13] = 0x00;
        }
        let r0 = check(&vm, &mut core, &frame, i % 100 == 0)
            .unwrap_or_else(|e| panic!("frame {i} ({len} bytes): {e}"));
        verdicts[(r0 as usize).min(3)] += 1;
    }
    assert!(
        verdicts[1] > 0 && verdicts[2] > 0 && verdicts[3] > 0,
        "every path taken: {verdicts:?}"
    );
}

#[test]
fn streamed_packets_match_the_vm_and_wait_only_for_their_bytes() {
    let (vm, mut core) = load();
    let mut waits = 0;
    for entry in std::fs::read_dir(EXAMPLES).expect("examples/ exists") {
        let path = entry.expect("dir entry").path();
        let name = path.to_string_lossy().into_owned();
        if !name.ends_with(".pcap") || name.ends_with(".out.pcap") {
            continue;
        }
        for (i, p) in nfkit_pcap::read_file(&path)
            .expect("readable pcap")
            .iter()
            .enumerate()
        {
            check_mode(&vm, &mut core, &p.data, i % 10 == 0, true)
                .unwrap_or_else(|e| panic!("{name} packet {}, streamed: {e}", i + 1));
            let mut input = RunInput::new(&p.data);
            input.ctx = Ctx::Xdp {
                ingress_ifindex: 1,
                rx_queue_index: 0,
            };
            input.stream = true;
            let streamed = core.run(&input).expect("runs");
            input.stream = false;
            let whole = core.run(&input).expect("runs");
            assert_eq!(streamed.retired, whole.retired);
            // The branch history table learns between the two runs, so
            // compare without the misprediction bubbles.
            assert_eq!(
                streamed.cycles - streamed.stalls.flushes,
                whole.cycles - whole.stalls.flushes + streamed.stalls.rx,
                "{name} packet {}: streaming costs exactly its waits",
                i + 1
            );
            waits += streamed.stalls.rx;
        }
    }
    // The reflector reads its headers after they have arrived; a program
    // that reads the end of the packet at once has to wait for it.
    assert_eq!(waits, 0, "headers arrive before the reflector reads them");
    let tail = "r2 = *(u32 *)(r1 + 0)\nr3 = *(u32 *)(r1 + 4)\nr4 = r2\nr4 += 200\n\
                if r4 > r3 goto short\nr0 = *(u8 *)(r2 + 199)\nexit\nshort:\nr0 = 2\nexit";
    let insns = assemble(tail, Some(Syntax::Llvm)).expect("assembles");
    let image = Image::from_insns("tail", ProgType::Xdp, insns);
    let tail_vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let mut tail_core = Core::new(Program::from_image(&image, 0).expect("subset")).expect("model");
    let frame: Vec<u8> = (0..256).map(|i| i as u8).collect();
    let r0 = check_mode(&tail_vm, &mut tail_core, &frame, true, true).expect("equal to the VM");
    assert_eq!(r0, 199);
    let mut input = RunInput::new(&frame);
    input.ctx = Ctx::Xdp {
        ingress_ifindex: 1,
        rx_queue_index: 0,
    };
    input.stream = true;
    let r = tail_core.run(&input).expect("runs");
    // Byte 199 is in the 25th row (one arrives a cycle); the load is in
    // EXE from cycle 6 on.
    assert_eq!(r.stalls.rx, 25 - 6, "waits for byte 199: {:?}", r.stalls);
    // Random frames, streamed.
    let mut s: u64 = 0x5eed_0022;
    for i in 0..2000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let len = 14 + (s % 300) as usize;
        let mut frame: Vec<u8> = (0..len).map(|k| (s >> (k % 56)) as u8 ^ k as u8).collect();
        frame[12] = 0x08;
        frame[13] = 0x00;
        check_mode(&vm, &mut core, &frame, i % 50 == 0, true)
            .unwrap_or_else(|e| panic!("streamed frame {i}: {e}"));
    }
}

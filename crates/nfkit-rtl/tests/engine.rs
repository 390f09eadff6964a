//! The engine FSM: a packet offered on the port side (length, port,
//! receive queue, timestamp) has its metadata written by the FSM, one row
//! a cycle, and runs with the packet streaming in; results, packet bytes,
//! instruction counts and actions equal the host-driven runs and the VM,
//! and the metadata a program reads is what the port gave.

mod common;

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_object::{Image, ProgType};
use nfkit_rtl::{ActionConfig, Core, Ctx, Decision, Program, RunInput, RunResult};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};

const REFLECT: &str = include_str!("progs/xdp_reflect.s");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
/// Cycles from the offer to the core's start: the FSM takes the packet,
/// then writes the eight metadata rows (the last with the start).
const FSM_CYCLES: u64 = 9;

fn core_of(asm: &str) -> (Image, Core) {
    let insns = assemble(asm, Some(Syntax::Llvm)).expect("assembles");
    let image = Image::from_insns("prog", ProgType::Xdp, insns);
    let prog = Program::from_image(&image, 0).expect("within the subset");
    (image, Core::new(prog).expect("RTL model built"))
}

fn run(core: &mut Core, frame: &[u8], port: u32, queue: u32, ts: u64, via_port: bool) -> RunResult {
    let mut input = RunInput::new(frame);
    input.ctx = Ctx::Xdp {
        ingress_ifindex: port,
        rx_queue_index: queue,
    };
    input.timestamp = ts;
    input.via_port = via_port;
    core.run(&input).expect("the model runs")
}

#[test]
fn packets_through_the_port_run_as_the_host_and_the_vm_run_them() {
    let (image, mut core) = core_of(REFLECT);
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    core.set_action(ActionConfig {
        hosts: vec![3],
        ..ActionConfig::default()
    })
    .expect("within the module");
    let mut n = 0;
    for name in ["ddos", "router", "port_stats"] {
        let packets = nfkit_pcap::read_file(format!("{EXAMPLES}/{name}.pcap")).expect("capture");
        for (i, p) in packets.iter().enumerate() {
            let port = 1 + (i % 4) as u32;
            let host = run(&mut core, &p.data, port, 0, p.ts_ns, false);
            let fsm = run(&mut core, &p.data, port, 0, p.ts_ns, true);
            let want = vm.run(
                0,
                Context::Xdp(XdpMd {
                    ingress_ifindex: port,
                    ..XdpMd::new(&p.data)
                }),
                &RunOptions::default(),
            );
            common::compare_xdp(&want, &fsm).unwrap_or_else(|e| panic!("{name} #{i}: {e}"));
            assert_eq!(fsm.result, host.result);
            assert_eq!(fsm.packet, host.packet);
            assert_eq!(fsm.retired, host.retired);
            assert_eq!(fsm.fsm_cycles, FSM_CYCLES);
            assert_eq!(host.fsm_cycles, 0);
            // The reflector's TX leaves by the ingress port; DROP drops;
            // PASS goes to the host queue's port.
            assert_eq!(fsm.action, host.action);
            let want_decision = match fsm.result {
                Ok(3) => Decision::Port((port - 1) as u8),
                Ok(2) => Decision::Port(3),
                _ => Decision::Drop,
            };
            assert_eq!(fsm.action.decision, want_decision, "{name} #{i}");
            n += 1;
        }
    }
    assert!(n > 50, "{n} packets");
}

#[test]
fn the_fsm_writes_the_metadata_the_port_gave() {
    // r0 = ingress_ifindex | rx_queue << 8 | len << 16 | (data_end - data) << 32,
    // plus the timestamp's low byte << 56.
    let asm = "r2 = *(u32 *)(r1 + 12)\nr3 = *(u32 *)(r1 + 16)\nr3 <<= 8\nr2 |= r3\nr3 = *(u32 *)(r1 + 40)\nr3 <<= 16\nr2 |= r3\nr4 = *(u32 *)(r1 + 0)\nr5 = *(u32 *)(r1 + 4)\nr5 -= r4\nr5 <<= 32\nr2 |= r5\nr3 = *(u8 *)(r1 + 32)\nr3 <<= 56\nr2 |= r3\nr0 = r2\nexit";
    let (_, mut core) = core_of(asm);
    for (len, port, queue, ts) in [
        (60usize, 1u32, 0u32, 0x1234u64),
        (1514, 4, 3, 0xab),
        (64, 200, 7, 0),
    ] {
        let frame = vec![0x5au8; len];
        let want = port as u64
            | (queue as u64) << 8
            | (len as u64) << 16
            | (len as u64) << 32
            | (ts & 0xff) << 56;
        let host = run(&mut core, &frame, port, queue, ts, false);
        let fsm = run(&mut core, &frame, port, queue, ts, true);
        assert_eq!(host.result, Ok(want), "host-written metadata");
        assert_eq!(fsm.result, Ok(want), "FSM-written metadata");
        assert_eq!(fsm.fsm_cycles, FSM_CYCLES);
    }
    // A port the engine cannot number, or a raw context, is refused.
    let mut input = RunInput::new(&[0u8; 64]);
    input.via_port = true;
    let e = core.run(&input).expect_err("refused");
    assert!(e.to_string().contains("XDP context"), "{e}");
    input.ctx = Ctx::Xdp {
        ingress_ifindex: 0,
        rx_queue_index: 0,
    };
    let e = core.run(&input).expect_err("refused");
    assert!(e.to_string().contains("ingress_ifindex 0"), "{e}");
}

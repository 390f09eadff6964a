//! The switch top (`rtl/ebpf_switch.sv`, 4 ports × 4 engines): every
//! packet's r0, instruction count and bytes equal the VM's, and it leaves
//! by the outputs the action module decided, exactly once each; the
//! demux deals round-robin; output arbitration loses and duplicates
//! nothing when engines finish for one port in the same cycle; FLOOD
//! reaches every port but the ingress; and instruction memory swaps under
//! a stream of packets lose none, every packet running wholly on one
//! version.

mod common;

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_isa::{AluOp, Insn, Operand, Reg, Size, Width};
use nfkit_object::{Image, ProgType};
use nfkit_rtl::switch::{ENGINES, PORTS};
use nfkit_rtl::{ActionConfig, Output, Program, Switch, SwitchRun};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};
use std::collections::BTreeMap;

const REFLECT: &str = include_str!("progs/xdp_reflect.s");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
/// A run's cycle budget for the whole switch.
const MAX_CYCLES: u64 = 2_000_000;

fn image_of(asm: &str) -> Image {
    let insns = assemble(asm, Some(Syntax::Llvm)).expect("assembles");
    Image::from_insns("prog", ProgType::Xdp, insns)
}

fn switch_of(image: &Image) -> Switch {
    let prog = Program::from_image(image, 0).expect("within the subset");
    Switch::new(prog).expect("switch model built")
}

/// Every copy that left, by packet id.
fn by_id(run: &SwitchRun) -> BTreeMap<u64, Vec<(Output, Vec<u8>)>> {
    let mut m: BTreeMap<u64, Vec<(Output, Vec<u8>)>> = BTreeMap::new();
    for o in &run.outputs {
        m.entry(o.id).or_default().push((o.output, o.bytes.clone()));
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

/// A program returning the verdict `action(arg)` after `work` filler
/// instructions.
fn verdict_prog(action: u64, arg: u64, work: usize) -> Image {
    let mut insns: Vec<Insn> = (0..work)
        .map(|_| Insn::Alu {
            width: Width::W64,
            op: AluOp::Add,
            dst: Reg::R5,
            src: Operand::Imm(1),
        })
        .collect();
    insns.push(Insn::lddw(Reg::R0, 1u64 << 63 | action << 32 | arg));
    insns.push(Insn::Exit);
    Image::from_insns("prog", ProgType::Xdp, insns)
}

#[test]
fn every_packet_equals_the_vm_across_four_ports_and_sixteen_engines() {
    let image = image_of(REFLECT);
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let mut sw = switch_of(&image);
    sw.set_action(ActionConfig {
        hosts: vec![3],
        nports: PORTS as u8,
        ..ActionConfig::default()
    })
    .expect("within the switch");
    let mut offered = Vec::new();
    for name in [
        "ddos",
        "router",
        "port_stats",
        "flow_limiter",
        "dscp_dispatch",
    ] {
        let packets = nfkit_pcap::read_file(format!("{EXAMPLES}/{name}.pcap")).expect("capture");
        for p in packets {
            let port = offered.len() % PORTS;
            let id = sw
                .offer(port, &p.data, p.ts_ns, 0)
                .expect("the switch takes it");
            offered.push((id, port, p.data));
        }
    }
    let run = sw.run(MAX_CYCLES).expect("every packet leaves");
    assert_eq!(run.packets.len(), offered.len(), "one run per packet");
    let outs = by_id(&run);
    let mut per_engine = [0usize; PORTS * ENGINES];
    for (pkt, (id, port, data)) in run.packets.iter().zip(&offered) {
        assert_eq!(pkt.id, *id);
        assert_eq!(pkt.port, *port);
        assert_eq!(pkt.engine / ENGINES, *port, "an engine of its own port");
        per_engine[pkt.engine] += 1;
        let want = vm.run(
            0,
            Context::Xdp(XdpMd {
                ingress_ifindex: *port as u32 + 1,
                ..XdpMd::new(data)
            }),
            &RunOptions::default(),
        );
        let r0 = *want.result.as_ref().expect("the VM runs it");
        assert_eq!(pkt.result, Ok(r0), "packet {id}");
        assert_eq!(pkt.retired, want.insns, "packet {id}");
        // TX leaves by the ingress port, PASS by the host queue's (3),
        // DROP by the discard tap; each copy is the VM's bytes.
        let dest = match r0 {
            3 => Output::Port(*port as u8),
            2 => Output::Port(3),
            _ => Output::Discard,
        };
        assert_eq!(pkt.outputs, vec![dest], "packet {id}");
        assert_eq!(
            outs.get(id).cloned().unwrap_or_default(),
            vec![(dest, want.packet.clone())],
            "packet {id}: one copy, the VM's bytes"
        );
    }
    assert_eq!(run.outputs.len(), offered.len(), "no copy lost or repeated");
    assert!(
        per_engine.iter().all(|&n| n > 0),
        "every engine ran packets: {per_engine:?}"
    );
}

#[test]
fn each_port_deals_its_packets_round_robin() {
    // Every run takes the same time, longer than a packet's arrival, so
    // the next idle engine is always the next in turn.
    let image = verdict_prog(3, 0, 60);
    let mut sw = switch_of(&image);
    sw.set_action(ActionConfig {
        verdicts: true,
        nports: PORTS as u8,
        ..ActionConfig::default()
    })
    .expect("within the switch");
    let frame = [0x11u8; 64];
    let mut ids = Vec::new();
    for i in 0..48 {
        ids.push((i % PORTS, sw.offer(i % PORTS, &frame, 0, 0).expect("taken")));
    }
    let run = sw.run(MAX_CYCLES).expect("every packet leaves");
    let mut nth = [0usize; PORTS];
    for (pkt, (port, id)) in run.packets.iter().zip(&ids) {
        assert_eq!(pkt.id, *id);
        assert_eq!(
            pkt.engine,
            port * ENGINES + nth[*port] % ENGINES,
            "packet {id}"
        );
        nth[*port] += 1;
        assert_eq!(pkt.outputs, vec![Output::Port(*port as u8)], "TX");
    }
    // Two engines per port: they alternate.
    sw.set_engines_per_port(2).expect("within the switch");
    let ids: Vec<u64> = (0..12)
        .map(|_| sw.offer(1, &frame, 0, 0).expect("taken"))
        .collect();
    let run = sw.run(MAX_CYCLES).expect("every packet leaves");
    let engines: Vec<usize> = run.packets.iter().map(|p| p.engine).collect();
    assert_eq!(run.packets.len(), ids.len());
    assert_eq!(
        engines,
        (0..12).map(|i| ENGINES + i % 2).collect::<Vec<_>>(),
        "engines 4 and 5 in turn"
    );
    assert!(sw.set_engines_per_port(0).is_err());
    assert!(sw.set_engines_per_port(ENGINES + 1).is_err());
}

#[test]
fn engines_finishing_together_for_one_port_lose_and_duplicate_nothing() {
    // REDIRECT(1): every packet of every port leaves by port 0. The same
    // length and the same work on every port: the four ports' engines
    // finish in the same cycles.
    let image = verdict_prog(4, 1, 20);
    let mut sw = switch_of(&image);
    sw.set_action(ActionConfig {
        verdicts: true,
        nports: PORTS as u8,
        ..ActionConfig::default()
    })
    .expect("within the switch");
    let mut want = BTreeMap::new();
    for i in 0..64u32 {
        let mut frame = vec![0u8; 72];
        frame[..4].copy_from_slice(&i.to_le_bytes());
        let port = i as usize % PORTS;
        let id = sw.offer(port, &frame, 0, 0).expect("taken");
        want.insert(id, frame);
    }
    let run = sw.run(MAX_CYCLES).expect("every packet leaves");
    let mut together: BTreeMap<u64, usize> = BTreeMap::new();
    for p in &run.packets {
        *together.entry(p.t_done).or_default() += 1;
        assert_eq!(p.outputs, vec![Output::Port(0)]);
    }
    assert!(
        together.values().any(|&n| n >= PORTS),
        "engines of every port finished in one cycle: {together:?}"
    );
    let outs = by_id(&run);
    assert_eq!(outs.len(), want.len(), "every packet left");
    for (id, frame) in &want {
        assert_eq!(
            outs[id],
            vec![(Output::Port(0), frame.clone())],
            "packet {id}: exactly one copy, its own bytes"
        );
    }
    // One packet at a time on the output: its 9 rows each.
    let mut last: Vec<u64> = run.outputs.iter().map(|o| o.cycle).collect();
    last.sort();
    assert!(last.windows(2).all(|w| w[1] >= w[0] + 9), "{last:?}");
}

#[test]
fn flood_reaches_every_port_but_the_ingress() {
    let image = verdict_prog(5, 0, 3);
    let mut sw = switch_of(&image);
    sw.set_action(ActionConfig {
        verdicts: true,
        nports: PORTS as u8,
        ..ActionConfig::default()
    })
    .expect("within the switch");
    let mut want = BTreeMap::new();
    for i in 0..40u32 {
        let frame: Vec<u8> = (0..(60 + i as usize * 7))
            .map(|b| (b as u32 * 3 + i) as u8)
            .collect();
        let port = (i as usize * 3) % PORTS;
        let id = sw.offer(port, &frame, 0, u64::from(i) * 5).expect("taken");
        want.insert(id, (port, frame));
    }
    let run = sw.run(MAX_CYCLES).expect("every packet leaves");
    let outs = by_id(&run);
    for (id, (port, frame)) in &want {
        let expect: Vec<(Output, Vec<u8>)> = (0..PORTS)
            .filter(|p| p != port)
            .map(|p| (Output::Port(p as u8), frame.clone()))
            .collect();
        assert_eq!(outs[id], expect, "packet {id} from port {port}");
    }
    assert_eq!(run.outputs.len(), want.len() * (PORTS - 1));
}

/// Version `k`: marks the packet's first four bytes with `k` around a
/// `k`-dependent run of filler instructions and returns `k` (its
/// instruction count tells the version too).
fn version(k: u8) -> Vec<Insn> {
    let mark = |off| Insn::St {
        size: Size::B,
        dst: Reg::R2,
        off,
        imm: i32::from(k),
    };
    let mut p = vec![
        Insn::Ldx {
            size: Size::W,
            dst: Reg::R2,
            src: Reg::R1,
            off: 0,
            signed: false,
        },
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R0,
            src: Operand::Imm(i32::from(k)),
        },
        mark(0),
    ];
    for _ in 0..(usize::from(k) * 13) % 50 {
        p.push(Insn::Alu {
            width: Width::W64,
            op: AluOp::Add,
            dst: Reg::R5,
            src: Operand::Reg(Reg::R0),
        });
    }
    p.extend([mark(1), mark(2), mark(3), Insn::Exit]);
    p
}

#[test]
fn swaps_under_a_stream_lose_no_packet_and_never_mix_versions() {
    let prog = |k: u8| Program::from_insns(&format!("v{k}"), &version(k)).expect("in the subset");
    let insns = |k: u8| version(k).len() as u64;
    let mut sw = Switch::new(prog(1)).expect("switch model built");
    let mut next: u8 = 2;
    let mut total = 0;
    let mut rounds_with_both = 0;
    let mut s = common::Rng(0x5a5a_0022);
    for round in 0..12 {
        let t0 = sw.now();
        let mut offered = 0;
        for i in 0..48u64 {
            let len = 40 + (s.next() % 200) as usize;
            let at = t0 + i * (2 + s.next() % 6);
            let frame = vec![0u8; len];
            sw.offer((s.next() % PORTS as u64) as usize, &frame, 0, at)
                .expect("taken");
            offered += 1;
        }
        // One to three new versions during the stream.
        let staged = 1 + round % 3;
        let first = next;
        for _ in 0..staged {
            sw.stage(prog(next)).expect("stageable");
            next += 1;
        }
        let (swaps0, _) = sw.swaps();
        let run = sw.run(MAX_CYCLES).expect("every packet leaves");
        assert_eq!(run.packets.len(), offered, "round {round}: none lost");
        assert_eq!(run.outputs.len(), offered, "round {round}: one copy each");
        assert_eq!(
            sw.swaps().0,
            swaps0 + staged as u64,
            "every version swapped in"
        );
        let outs = by_id(&run);
        let mut seen = std::collections::BTreeSet::new();
        let mut by_start: Vec<(u64, u8)> = Vec::new();
        for p in &run.packets {
            let k = match p.result {
                Ok(k) => k as u8,
                Err(f) => panic!("round {round}: packet {} faulted: {f}", p.id),
            };
            assert!(k >= first - 1 && k < next, "round {round}: version {k}");
            assert_eq!(p.retired, insns(k), "packet {}: all of version {k}", p.id);
            assert_eq!(
                u64::from(p.version),
                u64::from(k) % 2,
                "the memory half of {k}"
            );
            let bytes = &outs[&p.id][0].1;
            assert_eq!(&bytes[..4], &[k; 4], "packet {}: marked by {k} only", p.id);
            seen.insert(k);
            by_start.push((p.t_in, k));
        }
        // A packet handed over later never runs an older version.
        by_start.sort();
        assert!(
            by_start.windows(2).all(|w| w[0].1 <= w[1].1),
            "round {round}: versions in order of start"
        );
        if seen.len() > 1 {
            rounds_with_both += 1;
        }
        total += offered;
    }
    assert!(
        rounds_with_both >= 8,
        "swaps fell inside the streams: {rounds_with_both} of 12"
    );
    assert!(total >= 500);
}

#[test]
fn bad_ports_are_refused_by_name() {
    let mut sw = switch_of(&verdict_prog(1, 0, 0));
    let e = sw.offer(PORTS, &[0u8; 64], 0, 0).expect_err("refused");
    assert!(e.to_string().contains("input port 4"), "{e}");
    let e = sw
        .set_action(ActionConfig {
            nports: 8,
            ..ActionConfig::default()
        })
        .expect_err("refused");
    assert!(e.to_string().contains("the switch has 4 ports"), "{e}");
}

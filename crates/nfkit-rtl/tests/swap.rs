//! The double-buffered instruction memory under a packet stream: new
//! program versions are written into the inactive memory while packets
//! run (one slot per cycle, [`Core::stage`]) and swapped in between
//! packets. No packet is lost, every packet runs wholly on one version
//! (its r0, the bytes it wrote, its instruction count and its retired pcs
//! all belong to the same version), and each version takes over exactly
//! at the packet after the one its writing overlapped.

use nfkit_isa::{AluOp, Insn, Operand, Reg, Size, Width};
use nfkit_rtl::{Core, Program, RunInput};

/// Version `k`: marks the packet's first four bytes with `k` around a
/// `k`-dependent run of filler instructions, returns `k`.
fn version(k: u8) -> Vec<Insn> {
    let mark = |off| Insn::St {
        size: Size::B,
        dst: Reg::R1,
        off,
        imm: i32::from(k),
    };
    let mut p = vec![
        Insn::Alu {
            width: Width::W64,
            op: AluOp::Mov,
            dst: Reg::R0,
            src: Operand::Imm(i32::from(k)),
        },
        mark(0),
    ];
    for _ in 0..(usize::from(k) * 7) % 40 {
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
    let mut core = Core::new(prog(1)).expect("RTL model built");
    let mut active: u8 = 1;
    let mut next: u8 = 2;
    let mut expected_bit = None;
    let (mut swaps, mut packets) = (0, 0);
    let mut s: u64 = 0x5a5a_0022;
    for n in 0..2000u32 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let staging = s.is_multiple_of(6);
        if staging {
            core.stage(prog(next));
        }
        let pkt = [0u8; 8];
        let mut input = RunInput::new(&pkt);
        input.trace = n % 5 == 0;
        let r = core.run(&input).expect("runs");
        let len = version(active).len() as u64;
        assert_eq!(
            r.result,
            Ok(u64::from(active)),
            "packet {n}: r0 of version {active}"
        );
        assert_eq!(
            &r.packet[..4],
            &[active; 4],
            "packet {n}: every mark from version {active}"
        );
        assert_eq!(r.retired, len, "packet {n}: version {active}'s length");
        if input.trace {
            assert_eq!(
                r.trace,
                (0..len as usize).collect::<Vec<_>>(),
                "packet {n}: pcs"
            );
        }
        // The memory's version bit flips exactly at the swaps.
        if let Some(b) = expected_bit {
            assert_eq!(r.version, b, "packet {n}: instruction memory version");
        }
        expected_bit = Some(r.version ^ u8::from(staging));
        packets += 1;
        if staging {
            active = next;
            next = next % 200 + 1;
            swaps += 1;
        }
    }
    assert_eq!(packets, 2000);
    assert!(swaps > 200, "only {swaps} swaps");
}

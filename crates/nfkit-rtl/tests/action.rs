//! The engine's action module (`rtl/ebpf_action.sv`) against the software
//! switch's decoding (`nfkit_switch::action::{resolve, decide}`) of the
//! VM's r0: for verdicts of every action (and malformed ones, plain
//! values and faults), every ingress port and several host-queue and
//! fault-action settings, the same action, argument, fault count and
//! destination; and XDP return codes with `bpf_redirect` and a devmap
//! broadcast.

mod common;

use common::{image_with_maps, Rng};
use nfkit_abi::verdict::Action;
use nfkit_rtl::{ActionConfig, Core, Ctx, Decision, Program, RunInput};
use nfkit_switch::action::{decide, resolve, Decision as SwDecision};
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};

/// r0 is the packet's first 8 bytes; byte 8 set makes the run fault (a
/// load past the packet).
const VERDICT: &str = "r2 = *(u32 *)(r1 + 0)\nr0 = *(u64 *)(r2 + 0)\nr3 = *(u8 *)(r2 + 8)\nif r3 == 0 goto +1\nr0 = *(u8 *)(r2 + 4000)\nexit";

/// The switch's decision in the action module's terms (a flood is the
/// mask of every port but the ingress one).
fn expected(d: SwDecision, ingress: usize, nports: usize) -> Decision {
    match d {
        SwDecision::Drop => Decision::Drop,
        SwDecision::Port(p) => Decision::Port(p as u8),
        SwDecision::Flood => Decision::Flood(
            (0..nports)
                .filter(|&p| p != ingress)
                .fold(0, |m, p| m | 1 << p),
        ),
        SwDecision::Controller(r) => Decision::Controller(r),
        SwDecision::NoHostPort => Decision::NoHostPort,
        SwDecision::NoSuchPort => Decision::NoSuchPort,
    }
}

#[test]
fn verdicts_decide_as_the_switch_does() {
    let image = image_with_maps(VERDICT, &[]);
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let mut core = Core::new(Program::from_image(&image, 0).expect("within the subset"))
        .expect("RTL model built");
    let configs = [
        (4u8, vec![], Action::Drop.verdict(0)),
        (4, vec![3], Action::Pass.verdict(0)),
        (8, vec![7, 0, 5], Action::Controller.verdict(9)),
        (2, vec![1, 0, 1, 0], 0x1234),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut seen = [0u32; 8];
    let (mut faults, mut runs) = (0, 0);
    for (nports, hosts, fault_verdict) in configs {
        let cfg = ActionConfig {
            verdicts: true,
            nports,
            hosts: hosts.clone(),
            fault_verdict,
        };
        core.set_action(cfg).expect("within the module");
        let host_idx: Vec<usize> = hosts.iter().map(|&h| usize::from(h)).collect();
        for i in 0..600 {
            let r = rng.next();
            let code = r % 9; // 8: no action
            let arg = match (r >> 8) % 4 {
                0 => (r >> 16) % 3,
                1 => (r >> 16) % 10,
                2 => u64::from(nports) + 1,
                _ => (r >> 16) & 0xffff_ffff,
            };
            let mut v = 1 << 63 | code << 32 | arg;
            match (r >> 50) % 16 {
                0 => v = (r >> 1) & 0x7fff_ffff_ffff, // a plain value
                1 => v |= 1 << (40 + (r >> 56) % 23), // a malformed verdict
                _ => {}
            }
            let fault = (r >> 60).is_multiple_of(13);
            let mut frame = vec![0u8; 64];
            frame[..8].copy_from_slice(&v.to_le_bytes());
            frame[8] = u8::from(fault);
            let ingress = (i % usize::from(nports)) as u32;
            let want = vm.run(
                0,
                Context::Xdp(XdpMd {
                    ingress_ifindex: ingress + 1,
                    ..XdpMd::new(&frame)
                }),
                &RunOptions::default(),
            );
            let mut input = RunInput::new(&frame);
            input.ctx = Ctx::Xdp {
                ingress_ifindex: ingress + 1,
                rx_queue_index: 0,
            };
            let got = core.run(&input).expect("the model runs");
            assert_eq!(want.result.is_err(), got.result.is_err(), "fault on both");
            let (action, arg, counted) = resolve(want.result.ok(), fault_verdict);
            let d = decide(
                action,
                arg,
                ingress as usize,
                usize::from(nports),
                &host_idx,
            );
            let out = got.action;
            assert_eq!(
                (out.action, out.arg, out.fault),
                (action, arg, counted),
                "r0 {v:#x} fault {fault}"
            );
            assert_eq!(
                out.decision,
                expected(d, ingress as usize, usize::from(nports)),
                "r0 {v:#x} ({action} {arg}) in port {ingress}, hosts {hosts:?}"
            );
            seen[action.code() as usize] += 1;
            faults += u32::from(counted);
            runs += 1;
        }
    }
    assert!(seen.iter().all(|&n| n > 20), "every action taken: {seen:?}");
    assert!(faults > 50 && faults < runs / 3, "{faults} faults");
}

#[test]
fn xdp_codes_and_redirects_become_actions() {
    // Byte 0: the XDP code; byte 1: 1 = bpf_redirect(byte 2, 0) first.
    let asm = "r6 = *(u32 *)(r1 + 0)\nr7 = *(u8 *)(r6 + 0)\nr8 = *(u8 *)(r6 + 1)\nif r8 == 0 goto +3\nr1 = *(u8 *)(r6 + 2)\nr2 = 0\ncall 23\nr0 = r7\nexit";
    let image = image_with_maps(asm, &[]);
    let vm = Vm::new(&image, VmConfig::kernel()).expect("the VM loads it");
    let mut core = Core::new(Program::from_image(&image, 0).expect("within the subset"))
        .expect("RTL model built");
    core.set_action(ActionConfig {
        hosts: vec![3],
        ..ActionConfig::default()
    })
    .expect("within the module");
    for (code, redirect, port, action, decision) in [
        (0u8, 0u8, 0u8, Action::Aborted, Decision::Drop),
        (1, 0, 0, Action::Drop, Decision::Drop),
        (2, 0, 0, Action::Pass, Decision::Port(3)),
        (3, 0, 0, Action::Tx, Decision::Port(1)),
        (4, 1, 3, Action::Redirect, Decision::Port(2)),
        (4, 1, 9, Action::Redirect, Decision::NoSuchPort),
        (4, 0, 0, Action::Aborted, Decision::Drop),
        (7, 0, 0, Action::Aborted, Decision::Drop),
        (2, 1, 4, Action::Pass, Decision::Port(3)),
    ] {
        let mut frame = vec![0u8; 64];
        frame[..3].copy_from_slice(&[code, redirect, port]);
        let want = vm.run(
            0,
            Context::Xdp(XdpMd {
                ingress_ifindex: 2,
                ..XdpMd::new(&frame)
            }),
            &RunOptions::default(),
        );
        let mut input = RunInput::new(&frame);
        input.ctx = Ctx::Xdp {
            ingress_ifindex: 2,
            rx_queue_index: 0,
        };
        let got = core.run(&input).expect("the model runs");
        assert_eq!(want.result.ok(), got.result.ok(), "r0 equals the VM's");
        let out = got.action;
        assert_eq!(
            (out.action, out.decision, out.fault),
            (action, decision, false),
            "code {code} redirect {redirect} port {port}"
        );
    }
    // Too many ports or host queues are refused by name.
    let e = core
        .set_action(ActionConfig {
            nports: 9,
            ..ActionConfig::default()
        })
        .expect_err("refused");
    assert!(e.to_string().contains("9 ports"), "{e}");
    let e = core
        .set_action(ActionConfig {
            hosts: vec![0, 1, 2, 3, 4],
            ..ActionConfig::default()
        })
        .expect_err("refused");
    assert!(e.to_string().contains("5 host queues"), "{e}");
}

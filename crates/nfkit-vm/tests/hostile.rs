//! Hostile programs: many random and mutated programs, run on random
//! memory and packets. None may crash the process (a host memory access
//! outside VM memory would hit a guard page: SIGSEGV, a test failure),
//! run past its budget, or report a result without having stayed inside
//! its regions. The count is fixed so the run time stays bounded.

mod common;

use common::gen::*;
use nfkit_isa::RawInsn;
use nfkit_object::{Image, ProgType};
use nfkit_vm::{Context, RunErrorKind, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Programs generated in total (random + mutated); about 40% of them
/// pass the load-time checks and run.
const PROGRAMS: u32 = 200_000;
const BUDGET: u64 = 4_000;

/// Runs one program; panics (fails the test) only on a VM bug.
fn run_one(slots: &[RawInsn], data: &[u8], kind: u8, stats: &mut [u64; 3]) {
    let Ok(insns) = nfkit_isa::decode_program(slots) else {
        stats[0] += 1;
        return;
    };
    let t = match kind % 3 {
        0 => ProgType::Xdp,
        1 => ProgType::SchedCls,
        _ => ProgType::SocketFilter,
    };
    let mut img = Image::from_insns("p", t, insns);
    img.maps = maps();
    // The kernel profile's load-time analyses (bounds included) end on
    // every program, with a verdict and no panic.
    let _ = Vm::new(
        &img,
        VmConfig {
            budget: BUDGET,
            ..VmConfig::kernel()
        },
    );
    let config = VmConfig {
        budget: BUDGET,
        ..VmConfig::default()
    };
    let vm = match Vm::new(&img, config) {
        Ok(vm) => vm,
        Err(e) => {
            stats[1] += 1;
            if std::env::var("HOSTILE_DEBUG").is_ok() {
                eprintln!("REJ {:?}", e.rule());
            }
            return;
        }
    };
    if let Some(m) = vm.map("jmp") {
        let _ = m.update(&0u32.to_le_bytes(), &0u32.to_le_bytes(), 0);
    }
    stats[2] += 1;
    let ctx = match t {
        ProgType::Xdp => Context::Xdp(XdpMd::new(data)),
        _ => Context::Skb(SkBuff::new(data)),
    };
    let res = vm.run(
        0,
        ctx,
        &RunOptions {
            cpu: (kind as u32) % 4,
            ..Default::default()
        },
    );
    assert!(
        res.insns <= BUDGET + 1,
        "ran past the budget: {}",
        res.insns
    );
    if let Err(e) = &res.result {
        if let RunErrorKind::Budget { limit } = e.kind {
            assert_eq!(limit, BUDGET);
        }
    }
    // The raw form too (memory = the packet bytes).
    let vm2 = Vm::new(
        &img,
        VmConfig {
            budget: BUDGET,
            ..VmConfig::conformance()
        },
    );
    if let Ok(vm2) = vm2 {
        let res = vm2.run(0, Context::Raw(data), &RunOptions::default());
        assert!(res.insns <= BUDGET + 1);
        assert_eq!(res.packet.len(), data.len(), "raw memory keeps its size");
    }
}

#[test]
fn random_programs_never_escape() {
    let mut runner = TestRunner::new(Config {
        cases: PROGRAMS / 2,
        failure_persistence: None,
        ..Config::default()
    });
    let stats = std::cell::RefCell::new([0u64; 3]);
    // Mostly structured programs (most of them load and run), some raw
    // slot soups (most of them exercise the load-time checks).
    let program = prop_oneof![
        3 => structured_program(),
        1 => prop::collection::vec(slot_strategy(), 1..24).prop_map(decoding_slots),
    ];
    let strat = (program, packet_strategy(), any::<u8>());
    runner
        .run(&strat, |(mut slots, data, kind)| {
            // End with exit most of the time so more programs load.
            if kind & 1 == 0 {
                slots.push(RawInsn {
                    code: 0x95,
                    ..RawInsn::default()
                });
            }
            run_one(&slots, &data, kind, &mut stats.borrow_mut());
            Ok(())
        })
        .expect("no VM failure");
    let stats = stats.into_inner();
    eprintln!(
        "random: {} undecodable, {} rejected, {} ran",
        stats[0], stats[1], stats[2]
    );
    assert!(stats[2] > 10_000, "too few random programs ran: {stats:?}");
}

#[test]
fn mutated_programs_never_escape() {
    let seeds: Vec<Vec<RawInsn>> = seeds().iter().map(|s| raw(s)).collect();
    let mut runner = TestRunner::new(Config {
        cases: PROGRAMS / 2,
        failure_persistence: None,
        ..Config::default()
    });
    let stats = std::cell::RefCell::new([0u64; 3]);
    let strat = (
        0..seeds.len(),
        mutations_strategy(),
        packet_strategy(),
        any::<u8>(),
    );
    runner
        .run(&strat, |(s, muts, data, kind)| {
            let mut slots = seeds[s].clone();
            mutate(&mut slots, muts);
            run_one(&slots, &data, kind, &mut stats.borrow_mut());
            Ok(())
        })
        .expect("no VM failure");
    let stats = stats.into_inner();
    eprintln!(
        "mutated: {} undecodable, {} rejected, {} ran",
        stats[0], stats[1], stats[2]
    );
    assert!(stats[2] > 5000, "too few mutated programs ran: {stats:?}");
}

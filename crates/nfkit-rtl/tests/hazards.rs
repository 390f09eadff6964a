//! Directed tests of the pipeline's hazard unit: every forwarding path
//! (EX/MEM -> EXE, MEM/WB -> EXE, WB -> ID write-through), the load-use
//! stall, the branch flush, the divider and call stalls, faults. Each
//! program's result must equal the VM's and its counters must show the
//! hazard (and only it): cycles = retired + 3 (fill) + stalls + 1 per
//! mispredicted conditional jump (the branch history table's 2-bit
//! counters start weakly not-taken on a fresh core).

mod common;

use common::{
    compare, core_for, image_with_maps, rtl_run, rtl_run_mode, rtl_run_xdp, vm_load, vm_redirect,
    vm_run, vm_run_xdp,
};
use nfkit_isa::asm::{assemble, Syntax};
use nfkit_rtl::{FaultKind, RunInput, RunResult};

const MEM: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];

/// Runs `asm` (llvm syntax) on both, checks they agree, and returns the
/// RTL's result.
fn both(asm: &str) -> RunResult {
    let insns = assemble(asm, Some(Syntax::Llvm)).expect("assembles");
    let vm = vm_load(&insns).expect("the VM loads it");
    let want = vm_run(&vm, &MEM, true);
    let mut core = core_for(&insns);
    let got = rtl_run(&mut core, &MEM, true);
    compare(&want, &got).expect("RTL equals the VM");
    assert_eq!(want.trace, got.trace, "retired pcs equal the VM's trace");
    let s = got.stalls;
    assert_eq!(
        got.cycles,
        got.retired + 3 + s.load_use + s.div + s.call + s.rx + s.flushes,
        "cycle accounting of {asm}: {got:?}"
    );
    got
}

#[test]
fn ex_to_ex_forwarding() {
    let r = both("r1 = 5\nr1 += 3\nr1 *= r1\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(64));
    assert_eq!(r.stalls.load_use, 0);
    assert_eq!(r.cycles, 5 + 3, "back-to-back dependencies cost nothing");
}

#[test]
fn mem_to_ex_forwarding() {
    let r = both("r1 = 5\nr2 = 7\nr1 += 1\nr2 -= r1\nr0 = r2\nexit");
    assert_eq!(r.result, Ok(1));
    assert_eq!(r.cycles, 6 + 3);
}

#[test]
fn wb_to_id_write_through() {
    let r = both("r1 = 9\nr2 = 1\nr3 = 2\nr0 = r1\nr0 += r3\nexit");
    assert_eq!(r.result, Ok(11));
    assert_eq!(r.cycles, 6 + 3);
}

#[test]
fn forwarding_into_branches_and_stores() {
    let r = both(
        "r2 = 3\nif r2 == 3 goto +1\nr0 = 99\nr3 = r10\nr3 += -8\n*(u64 *)(r3 + 0) = r2\nr0 = *(u64 *)(r10 - 8)\nexit",
    );
    assert_eq!(r.result, Ok(3));
    assert_eq!(r.stalls.flushes, 1);
}

#[test]
fn load_use_stall() {
    let r = both("r0 = *(u8 *)(r1 + 3)\nr0 += 1\nexit");
    assert_eq!(r.result, Ok(5));
    assert_eq!(r.stalls.load_use, 1);
    // A store of the loaded value waits too.
    let r = both("r2 = *(u32 *)(r1 + 0)\n*(u32 *)(r1 + 4) = r2\nr0 = *(u64 *)(r1 + 0)\nexit");
    assert_eq!(r.result, Ok(0x0403_0201_0403_0201));
    assert_eq!(r.stalls.load_use, 1);
    assert_eq!(&r.packet[..8], &[1, 2, 3, 4, 1, 2, 3, 4]);
}

#[test]
fn load_then_independent_then_use_needs_no_stall() {
    let r = both("r2 = *(u16 *)(r1 + 1)\nr3 = 1\nr0 = r2\nr0 += r3\nexit");
    assert_eq!(r.result, Ok(0x0302 + 1));
    assert_eq!(
        r.stalls.load_use, 0,
        "MEM/WB -> EXE forwards the loaded value"
    );
}

#[test]
fn taken_branch_flushes_one_slot_not_taken_none() {
    let taken = both("r0 = 1\nif r0 != 0 goto +2\nr0 = 7\nr0 = 8\nexit");
    assert_eq!(taken.result, Ok(1));
    assert_eq!(taken.stalls.flushes, 1);
    assert_eq!(taken.retired, 3);
    let not_taken = both("r0 = 1\nif r0 == 0 goto +2\nr0 = 7\nr0 += 8\nexit");
    assert_eq!(not_taken.result, Ok(15));
    assert_eq!(not_taken.stalls.flushes, 0);
    // A loop's jump: taken three times, then not. Mispredicted the first
    // time (weakly not-taken), predicted taken from then on, mispredicted
    // again when it falls through.
    let back = both("r0 = 0\nr1 = 4\nr0 += r1\nr1 += -1\nif r1 != 0 goto -3\nexit");
    assert_eq!(back.result, Ok(10));
    assert_eq!(back.stalls.flushes, 2);
    // Unconditional jumps (`ja`, `gotol`) are taken in ID: no bubble, and
    // they still retire.
    let ja = both("r0 = 1\ngoto +1\nr0 = 7\nr0 += 2\nexit");
    assert_eq!(ja.result, Ok(3));
    assert_eq!((ja.stalls.flushes, ja.retired), (0, 4));
    assert_eq!(ja.cycles, 4 + 3);
    let back = both("r0 = 0\nr1 = 3\ngoto +2\nr0 += r1\nr1 += -1\nif r1 != 0 goto -3\nexit");
    assert_eq!(back.result, Ok(6));
    assert_eq!(
        back.stalls.flushes, 2,
        "the conditional jump's two mispredictions only"
    );
}

/// A conditional jump predicted taken fetches its target from ID; when it
/// falls through after all, the target instruction (in ID) is flushed:
/// a load there that would fault, a store that would clobber the result
/// and a call that would overwrite r0 all leave no trace.
#[test]
fn a_mispredicted_jump_flushes_its_target_without_effects() {
    // The third load would read past the 16-byte packet.
    let load =
        both("r2 = 2\nr3 = r1\nr0 = *(u64 *)(r3 + 0)\nr3 += 8\nr2 += -1\nif r2 != 0 goto -4\nexit");
    assert_eq!(
        load.result,
        Ok(u64::from_le_bytes(MEM[8..16].try_into().unwrap()))
    );
    assert_eq!(load.stalls.flushes, 2);
    // The shadow store would write 0 over the last iteration's 1.
    let store = both(
        "r1 = 3\n*(u64 *)(r10 - 8) = r1\nr1 += -1\nif r1 != 0 goto -3\nr0 = *(u64 *)(r10 - 8)\nexit",
    );
    assert_eq!(store.result, Ok(1));
    assert_eq!(store.stalls.flushes, 2);
    // The shadow call would set r0 to the time.
    let call = both("r6 = 2\ncall 5\nr0 = r6\nr6 += -1\nif r6 != 0 goto -4\nexit");
    assert_eq!(call.result, Ok(1));
    assert_eq!(call.stalls.flushes, 2);
    assert_eq!(
        call.stalls.call,
        2 * 2,
        "two calls ran, the shadow's did not"
    );
}

/// A jump on a just-loaded value waits one cycle in ID (load-use) and is
/// then predicted from there: the stall and the prediction both count.
#[test]
fn a_predicted_jump_on_a_loaded_value_stalls_then_redirects() {
    let r =
        both("r0 = 0\nr3 = r1\nr0 += 1\nr3 += 1\nr2 = *(u8 *)(r3 - 1)\nif r2 < 4 goto -4\nexit");
    assert_eq!(r.result, Ok(4));
    assert_eq!(r.stalls.load_use, 4);
    assert_eq!(r.stalls.flushes, 2);
}

/// A mispredicted jump in EXE overrides the prediction of the jump behind
/// it in ID: the second jump (trained taken) is flushed, not followed.
#[test]
fn a_mispredict_in_exe_wins_over_a_prediction_in_id() {
    let r = both(
        "r0 = 0\nr2 = 3\nr0 += 1\nr2 += -1\nif r2 == 0 goto +1\nif r2 != 0 goto -4\nr0 += 100\nexit",
    );
    assert_eq!(r.result, Ok(103));
    assert_eq!(r.stalls.flushes, 2);
}

#[test]
fn divider_stalls_and_forwards() {
    // 100 / 7: a 7-bit dividend over a 3-bit divisor has 5 quotient bits
    // to find, two a cycle: the start cycle and 3 more.
    let r = both("r1 = 100\nr2 = 7\nr1 /= r2\nr0 = r1\nr0 *= 10\nexit");
    assert_eq!(r.result, Ok(140));
    assert_eq!(r.stalls.div, 4, "{:?}", r.stalls);
    // All 64 quotient bits: 32 cycles of two steps and the start.
    let r = both("r1 = -1\nr1 /= 1\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(u64::MAX));
    assert_eq!(r.stalls.div, 33, "{:?}", r.stalls);
    // A dividend below the divisor: answered at the start.
    let r = both("r1 = 3\nr2 = 7\nr1 %= r2\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(3));
    assert_eq!(r.stalls.div, 1, "{:?}", r.stalls);
    let r = both("w1 = -7\nw1 s%= 3\nw0 = w1\nexit");
    assert_eq!(r.result, Ok(0xffff_ffff), "-7 s% 3 = -1 (truncating)");
    let r = both("r1 = 5\nr0 = 0\nr1 %= r0\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(5), "modulo by zero keeps the dividend");
    assert_eq!(r.stalls.div, 1, "{:?}", r.stalls);
    let r = both("r1 = 5\nr0 = 0\nr1 /= r0\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(0), "division by zero is 0");
    // INT_MIN / -1 is INT_MIN, its remainder 0, in both widths.
    let r = both("r1 = 0x8000000000000000 ll\nr1 s/= -1\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(1 << 63));
    let r = both("r1 = 0x8000000000000000 ll\nr1 s%= -1\nr0 = r1\nexit");
    assert_eq!(r.result, Ok(0));
    let r = both("w1 = -2147483648\nw1 s/= -1\nw0 = w1\nexit");
    assert_eq!(r.result, Ok(0x8000_0000));
    let r = both("r1 = -1000000007\nr2 = 13\nr1 s/= r2\nr3 = -1000000007\nr3 s%= r2\nr0 = r1\nr0 ^= r3\nexit");
    assert_eq!(r.result, Ok((-76923077i64 ^ -6i64) as u64));
}

#[test]
fn lddw_and_byte_swaps() {
    let r = both("r0 = 0x1122334455667788 ll\nr0 = be32 r0\nexit");
    assert_eq!(r.result, Ok(0x8877_6655));
    let r = both("r0 = 0x1122334455667788 ll\nr0 = bswap64 r0\nexit");
    assert_eq!(r.result, Ok(0x8877_6655_4433_2211));
}

#[test]
fn call_stalls_and_forwards_r0() {
    let insns = assemble("r6 = 1\ncall 5\nr0 += r6\nexit", Some(Syntax::Llvm)).expect("assembles");
    let mut core = core_for(&insns);
    let mut input = RunInput::new(&MEM);
    input.timestamp = 1_000_000;
    let r = core.run(&input).expect("runs");
    assert_eq!(r.result, Ok(1_000_001));
    let s = r.stalls;
    assert_eq!(
        (s.call, s.load_use),
        (CALL_5, 0),
        "the call waits only for the coprocessor: {s:?}"
    );
    assert_eq!(
        r.cycles,
        r.retired + 3 + s.load_use + s.div + s.call + s.rx + s.flushes
    );
}

/// Cycles a call of helper 5 or 23 waits in EXE for the coprocessor (it
/// latches the call, takes its fixed latency and answers through a
/// register).
const CALL_5: u64 = 2;

#[test]
fn call_takes_its_arguments_from_the_forwarding_network() {
    // r2 from EX/MEM (the register file still holds 9: flags that would
    // abort), r1 from MEM/WB; the VM agrees on r0 and the port.
    let image = image_with_maps("r2 = 9\nr1 = 3\nr2 = 0\ncall 23\nexit", &[]);
    let vm = nfkit_vm::Vm::new(&image, nfkit_vm::VmConfig::kernel()).expect("the VM loads it");
    let prog = nfkit_rtl::Program::from_image(&image, 0).expect("within the subset");
    let mut core = nfkit_rtl::Core::new(prog).expect("RTL model built");
    let (want, redirect) = vm_run_xdp(&vm, &[0; 64]);
    let r = rtl_run_xdp(&mut core, &[0; 64]);
    compare(&want, &r).expect("r0 equals the VM's");
    assert_eq!(r.result, Ok(4), "XDP_REDIRECT");
    assert_eq!(r.out_port, Some(3));
    assert_eq!(redirect.and_then(vm_redirect), r.redirect);
    let s = r.stalls;
    assert_eq!((s.call, s.load_use), (CALL_5, 0), "{s:?}");
    assert_eq!(r.cycles, r.retired + 3 + s.call);
    // A load into an argument right before the call holds it one cycle
    // (a load-use stall); one instruction between them, none.
    for (asm, stall) in [
        (
            "r6 = *(u32 *)(r1 + 0)\nr1 = 3\nr2 = *(u8 *)(r6 + 1)\ncall 23\nexit",
            1,
        ),
        (
            "r6 = *(u32 *)(r1 + 0)\nr7 = 3\nr2 = *(u8 *)(r6 + 1)\nr1 = r7\ncall 23\nexit",
            0,
        ),
    ] {
        let image = image_with_maps(asm, &[]);
        let vm = nfkit_vm::Vm::new(&image, nfkit_vm::VmConfig::kernel()).expect("VM loads it");
        let prog = nfkit_rtl::Program::from_image(&image, 0).expect("within the subset");
        let mut core = nfkit_rtl::Core::new(prog).expect("RTL model built");
        for flags in [0u8, 1] {
            let mut f = [0u8; 64];
            f[1] = flags;
            let (want, _) = vm_run_xdp(&vm, &f);
            let r = rtl_run_xdp(&mut core, &f);
            compare(&want, &r).expect("r0 equals the VM's");
            assert_eq!(r.result, Ok(if flags == 0 { 4 } else { 0 }), "{asm}");
            assert_eq!(r.stalls.load_use, stall, "{asm}: {:?}", r.stalls);
            let s = r.stalls;
            assert_eq!(r.cycles, r.retired + 3 + s.load_use + s.call + s.flushes);
        }
    }
}

#[test]
fn out_of_window_access_faults_precisely() {
    // The first store lands, the faulting load stops the run, the store
    // after it does not happen.
    let src = "*(u8 *)(r1 + 0) = 42\nr0 = *(u8 *)(r1 + 16)\n*(u8 *)(r1 + 1) = 43\nexit";
    let insns = assemble(src, Some(Syntax::Llvm)).expect("assembles");
    let vm = vm_load(&insns).expect("the VM loads it");
    let want = vm_run(&vm, &MEM, false);
    assert!(want.r0.is_none(), "the VM faults too");
    let mut core = core_for(&insns);
    let r = rtl_run(&mut core, &MEM, false);
    let fault = r.result.expect_err("faults");
    assert_eq!(fault.kind, FaultKind::Memory);
    assert_eq!(fault.pc, 1);
    assert_eq!(r.packet[0], 42);
    assert_eq!(r.packet[1], 2);
}

#[test]
fn atomics_read_modify_write_in_mem() {
    // Every operation on the packet, both widths; the memory afterwards is
    // compared with the VM's by `both`.
    let r = both(
        "r2 = 0x10\nlock *(u64 *)(r1 + 0) += r2\nr3 = 0xff\nlock *(u32 *)(r1 + 8) |= w3\nr4 = 0xf0\nlock *(u64 *)(r1 + 0) &= r4\nr5 = 0x55\nlock *(u32 *)(r1 + 12) ^= w5\nr0 = *(u64 *)(r1 + 0)\nexit",
    );
    assert_eq!(r.result, Ok(0x10));
    assert_eq!(&r.packet[8..16], &[0xff, 10, 11, 12, 13 ^ 0x55, 14, 15, 16]);
    // A fetch is a load for the hazard unit: its user waits one cycle.
    let r = both("r2 = 1\nr2 = atomic_fetch_add((u64 *)(r1 + 0), r2)\nr0 = r2\nexit");
    assert_eq!(r.result, Ok(0x0807_0605_0403_0201));
    assert_eq!(r.stalls.load_use, 1);
    assert_eq!(r.packet[0], 2);
    // A 32-bit fetch zero-extends; back-to-back atomics on one word see
    // each other's writes (the data memory's bypass), and so does a load.
    let r = both(
        "r2 = -1\nw2 = atomic_fetch_xor((u32 *)(r1 + 4), w2)\nr3 = 1\nr3 = atomic_fetch_or((u32 *)(r1 + 4), w3)\nr0 = *(u32 *)(r1 + 4)\nr0 <<= 32\nr0 |= r3\nexit",
    );
    assert_eq!(r.result, Ok(0xf7f8_f9fb_f7f8_f9fa));
    // xchg and cmpxchg (a match, then a mismatch); cmpxchg takes r0 from
    // the forwarding network (here MEM/WB, then EX/MEM) without waiting.
    let r = both(
        "r2 = 77\nr2 = xchg_64(r1 + 8, r2)\nr0 = 77\nr3 = 5\nr0 = cmpxchg_64(r1 + 8, r0, r3)\nr4 = r0\nr0 = 1\nw0 = cmpxchg32_32(r1 + 8, w0, w2)\nr0 += r4\nr0 += r2\nexit",
    );
    assert_eq!(r.result, Ok(5 + 77 + 0x100f_0e0d_0c0b_0a09));
    assert_eq!(r.stalls.call, 0, "cmpxchg does not drain: {:?}", r.stalls);
    // Atomics on map values and the stack work the same way; unaligned
    // ones fault on both.
    let r = both("r2 = 3\n*(u64 *)(r10 - 8) = r2\nlock *(u64 *)(r10 - 8) += r2\nr0 = *(u64 *)(r10 - 8)\nexit");
    assert_eq!(r.result, Ok(6));
    let src = "r2 = 1\nlock *(u32 *)(r1 + 2) += w2\nr0 = 0\nexit";
    let insns = assemble(src, Some(Syntax::Llvm)).expect("assembles");
    let vm = vm_load(&insns).expect("the VM loads it");
    let want = vm_run(&vm, &MEM, false);
    assert!(want.r0.is_none(), "the VM faults on an unaligned atomic");
    let mut core = core_for(&insns);
    let r = rtl_run(&mut core, &MEM, false);
    let fault = r.result.expect_err("faults");
    assert_eq!(fault.kind, FaultKind::Memory);
    assert_eq!(fault.pc, 1);
}

#[test]
fn a_waiting_access_keeps_its_forwarded_operands() {
    // The store waits in EXE for packet byte 127 to stream in while the
    // instructions that made its address (EX/MEM) and value (MEM/WB)
    // leave the pipeline: it must still store their values.
    let mem: Vec<u8> = (0..128).collect();
    let src = "r2 = 0x55\nr3 = r1\nr3 += 112\n*(u64 *)(r3 + 8) = r2\nr0 = *(u64 *)(r3 + 8)\nexit";
    let insns = assemble(src, Some(Syntax::Llvm)).expect("assembles");
    let vm = vm_load(&insns).expect("the VM loads it");
    let want = vm_run(&vm, &mem, true);
    let mut core = core_for(&insns);
    let got = rtl_run_mode(&mut core, &mem, true, true);
    compare(&want, &got).expect("RTL equals the VM");
    assert_eq!(got.result, Ok(0x55));
    assert!(got.stalls.rx > 5, "the store waited: {:?}", got.stalls);
    let s = got.stalls;
    assert_eq!(got.cycles, got.retired + 3 + s.load_use + s.rx + s.flushes);
}

//! The run on the caller's packet buffer (`Runner::run_packet`, issue 14
//! item 3): the same results as `Runner::run`, no allocation per run
//! after warm-up (counted by this binary's global allocator), and no
//! byte one run writes (stack, headroom) readable in the next even
//! though runs clear only what the program can reach.

mod common;

use common::*;
use nfkit_isa::asm::{assemble, Syntax};
use nfkit_isa::{Insn, Size};
use nfkit_object::{Image, ProgType};
use nfkit_vm::{Context, PacketCtx, RunOptions, Runner, SkBuff, Vm, VmConfig, XdpMd};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting this thread's allocations.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counter is a
// const-initialised thread-local (no allocation to reach it).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

fn asm(text: &str) -> Vec<Insn> {
    assemble(text, Some(Syntax::Llvm)).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn runner(t: ProgType, insns: Vec<Insn>) -> Runner {
    Vm::new(&Image::from_insns("p", t, insns), VmConfig::kernel())
        .expect("loads")
        .runner()
}

/// Ethernet/IPv4/UDP parse with a bounds check; XDP_DROP for port 22.
const PARSE: &str = "
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
    r0 = 2
    r4 = r2
    r4 += 38
    if r4 > r3 goto out
    r5 = *(u16 *)(r2 + 36)
    r5 = be16 r5
    if r5 != 22 goto out
    r0 = 1
out:
    exit
";

/// Swaps the MAC addresses (writes the packet), XDP_TX.
const SWAP: &str = "
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
    r0 = 0
    r4 = r2
    r4 += 12
    if r4 > r3 goto out
    r4 = *(u32 *)(r2 + 0)
    r5 = *(u32 *)(r2 + 6)
    *(u32 *)(r2 + 0) = r5
    *(u32 *)(r2 + 6) = r4
    r4 = *(u16 *)(r2 + 4)
    r5 = *(u16 *)(r2 + 10)
    *(u16 *)(r2 + 4) = r5
    *(u16 *)(r2 + 10) = r4
    r0 = 3
out:
    exit
";

/// Pushes 4 bytes at the front (`bpf_xdp_adjust_head(ctx, -4)`) and
/// writes them.
const PUSH: &str = "
    r6 = r1
    r2 = -4
    call 44
    r0 = 0
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r4 = r2
    r4 += 4
    if r4 > r3 goto out
    *(u32 *)(r2 + 0) = 0x04030201
    r0 = 2
out:
    exit
";

/// TC: sets the mark, TC_ACT_OK.
const MARK: &str = "
    *(u32 *)(r1 + 8) = 77
    r0 = 0
    exit
";

fn frame(dport: u16) -> Vec<u8> {
    let mut f = udp_frame(60);
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

#[test]
fn run_packet_gives_what_run_gives() {
    let cases: [(&str, ProgType, &str); 5] = [
        ("parse", ProgType::Xdp, PARSE),
        ("swap", ProgType::Xdp, SWAP),
        ("push", ProgType::Xdp, PUSH),
        ("mark", ProgType::SchedCls, MARK),
        ("socket", ProgType::SocketFilter, "r0 = 64\nexit"),
    ];
    for (name, t, text) in cases {
        let mut a = runner(t, asm(text));
        let mut b = runner(t, asm(text));
        for dport in [22u16, 80, 22] {
            let input = frame(dport);
            let (ctx, pctx) = match t {
                ProgType::Xdp => (Context::Xdp(XdpMd::new(&input)), PacketCtx::Xdp),
                _ => (Context::Skb(SkBuff::new(&input)), PacketCtx::Skb),
            };
            let full = a.run(0usize, ctx, &RunOptions::default());
            let mut buf = input.clone();
            let out = b.run_packet(0usize, &mut buf, pctx, &RunOptions::default());
            assert_eq!(out.r0(), full.r0(), "{name}");
            assert!(out.r0().is_some(), "{name}: {:?}", out.result);
            assert_eq!(buf, full.packet, "{name}: packet");
            assert_eq!(out.head_delta, full.head_delta, "{name}");
            assert_eq!(out.skb, full.skb, "{name}");
            assert_eq!(out.redirect, full.redirect, "{name}");
            assert_eq!(out.insns, full.insns, "{name}");
            // Stores through any pointer but r10 count (MARK's is to
            // the context).
            let writes = matches!(name, "swap" | "push" | "mark");
            assert_eq!(out.packet_written, writes, "{name}");
        }
    }
}

#[test]
fn runs_on_the_callers_buffer_allocate_nothing() {
    let cases: [(ProgType, &str, PacketCtx); 4] = [
        (ProgType::Xdp, PARSE, PacketCtx::Xdp),
        (ProgType::Xdp, SWAP, PacketCtx::Xdp),
        (ProgType::SchedCls, MARK, PacketCtx::Skb),
        (ProgType::SocketFilter, "r0 = 64\nexit", PacketCtx::Skb),
    ];
    for (t, text, pctx) in cases {
        let mut run = runner(t, asm(text));
        let mut buf = frame(22);
        let opts = RunOptions::default();
        // Warm-up: the runner sizes its buffers.
        let first = run.run_packet(0usize, &mut buf, pctx, &opts);
        assert!(first.r0().is_some(), "{text}: {:?}", first.result);
        let before = allocs();
        for _ in 0..100 {
            let out = run.run_packet(0usize, &mut buf, pctx, &opts);
            assert_eq!(out.r0(), first.r0());
        }
        assert_eq!(
            allocs() - before,
            0,
            "{t:?} {text}: allocations in 100 runs"
        );
    }
    // The counter does count (the test above could not pass vacuously).
    let before = allocs();
    let mut run = runner(ProgType::Xdp, asm(PARSE));
    let f = frame(22);
    let _ = run.run(0usize, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
    assert!(allocs() > before);
}

/// r0 = the 8 bytes at `fp - depth` as the run found them, then writes
/// a marker there: a second run returns 0 only if the first run's
/// marker was cleared.
fn stack_residue(depth: i16, escape: bool) -> Vec<Insn> {
    if escape {
        vec![
            movr(2, 10),
            alu64(nfkit_isa::AluOp::Add, 2, -(depth as i32)),
            ldx(Size::DW, 0, 2, 0),
            st(Size::DW, 2, 0, 0x5a5a),
            exit(),
        ]
    } else {
        vec![
            ldx(Size::DW, 0, 10, -depth),
            st(Size::DW, 10, -depth, 0x5a5a),
            exit(),
        ]
    }
}

#[test]
fn no_stack_byte_survives_into_the_next_run() {
    for escape in [false, true] {
        for depth in [8i16, 256, 512] {
            let mut run = runner(ProgType::Xdp, stack_residue(depth, escape));
            let mut buf = frame(80);
            for i in 0..3 {
                let out = run.run_packet(0usize, &mut buf, PacketCtx::Xdp, &RunOptions::default());
                assert_eq!(out.r0(), Some(0), "depth {depth} escape {escape} run {i}");
                let f = frame(80);
                let full = run.run(0usize, Context::Xdp(XdpMd::new(&f)), &RunOptions::default());
                assert_eq!(full.r0(), Some(0), "depth {depth} escape {escape} run {i}");
            }
        }
    }
}

#[test]
fn no_callee_frame_byte_survives_into_the_next_run() {
    // main: call f; exit.  f: r0 = *(fp-512); *(fp-512) = marker; exit.
    let insns = vec![
        call_local(1),
        exit(),
        ldx(Size::DW, 0, 10, -512),
        st(Size::DW, 10, -512, 0x77),
        exit(),
    ];
    let mut run = runner(ProgType::Xdp, insns);
    let mut buf = frame(80);
    for i in 0..3 {
        let out = run.run_packet(0usize, &mut buf, PacketCtx::Xdp, &RunOptions::default());
        assert_eq!(out.r0(), Some(0), "run {i}");
    }
}

#[test]
fn no_headroom_byte_survives_into_the_next_run() {
    // Grows the packet by 8 at the front, returns the 8 bytes found
    // there, then writes a marker over them.
    let text = "
        r6 = r1
        r2 = -8
        call 44
        r0 = 99
        r2 = *(u32 *)(r6 + 0)
        r3 = *(u32 *)(r6 + 4)
        r4 = r2
        r4 += 8
        if r4 > r3 goto out
        r0 = *(u64 *)(r2 + 0)
        *(u64 *)(r2 + 0) = r3
    out:
        exit
    ";
    let mut run = runner(ProgType::Xdp, asm(text));
    for i in 0..3 {
        let mut buf = frame(80);
        let out = run.run_packet(0usize, &mut buf, PacketCtx::Xdp, &RunOptions::default());
        assert_eq!(out.r0(), Some(0), "run {i}");
        assert_eq!(out.head_delta, -8);
        assert_eq!(buf.len(), 68, "the pushed bytes are in the caller's buffer");
    }
}

#[test]
fn a_read_only_program_leaves_the_buffer_alone() {
    let mut run = runner(ProgType::Xdp, asm(PARSE));
    let mut buf = frame(22);
    let (ptr, cap) = (buf.as_ptr(), buf.capacity());
    let out = run.run_packet(0usize, &mut buf, PacketCtx::Xdp, &RunOptions::default());
    assert_eq!(out.r0(), Some(1));
    assert!(!out.packet_written);
    assert_eq!((buf.as_ptr(), buf.capacity()), (ptr, cap));
    assert_eq!(buf, frame(22));
    // A program that may store to the packet: written back, here
    // unchanged (the frame is too short for the swap).
    let mut run = runner(ProgType::Xdp, asm(SWAP));
    let mut short = vec![7u8; 8];
    let out = run.run_packet(0usize, &mut short, PacketCtx::Xdp, &RunOptions::default());
    assert_eq!(out.r0(), Some(0));
    assert!(out.packet_written);
    assert_eq!(short, vec![7u8; 8]);
}

#[test]
fn the_context_template_and_metadata_come_through() {
    // r0 = ingress_ifindex (xdp_md offset 12).
    let mut run = runner(ProgType::Xdp, asm("r0 = *(u32 *)(r1 + 12)\nexit"));
    let meta = [1u8, 2, 3, 4];
    let mut md = XdpMd::new(&[]);
    md.ingress_ifindex = 7;
    md.meta = &meta;
    md.tailroom = 64;
    let mut buf = frame(80);
    let out = run.run_packet(
        0usize,
        &mut buf,
        PacketCtx::XdpWith(&md),
        &RunOptions::default(),
    );
    assert_eq!(out.r0(), Some(7));
    let mut got = Vec::new();
    run.meta(&mut got);
    assert_eq!(got, meta);
}

/// Reads every `xdp_md` field the checker proves (`data`, `data_end`,
/// `data_meta`, `ingress_ifindex`, `rx_queue_index`), before and after a
/// helper call (which invalidates the JIT's table of them), and mixes
/// them into r0 with the packet length and its first and last byte.
const FIELDS: &str = "
    r6 = r1
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r4 = *(u32 *)(r6 + 8)
    r5 = *(u32 *)(r6 + 12)
    r7 = *(u32 *)(r6 + 16)
    r0 = r3
    r0 -= r2
    r8 = r2
    r8 -= r4
    r0 <<= 8
    r0 += r8
    r0 <<= 8
    r0 += r5
    r0 <<= 8
    r0 += r7
    r4 = r2
    r4 += 1
    if r4 > r3 goto out
    r5 = *(u8 *)(r2 + 0)
    r0 <<= 8
    r0 += r5
    r9 = r0
    call 7
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r5 = *(u32 *)(r6 + 12)
    r0 = r9
    r0 += r5
    r4 = r3
    r4 += -1
    if r4 < r2 goto out
    r5 = *(u8 *)(r4 + 0)
    r0 <<= 8
    r0 += r5
out:
    exit
";

/// One runner, one after the other: frames of several sizes with
/// several `xdp_md`s (fast runs), a run with metadata and raw memory
/// (general runs) in between; each run gives what a fresh `Vm::run` gives,
/// on the JIT and on the interpreter alike.
#[test]
fn fast_runs_give_what_fresh_runs_give() {
    for engine in [nfkit_vm::Engine::Jit, nfkit_vm::Engine::Interp] {
        let config = VmConfig::kernel().with_engine(engine);
        let image = Image::from_insns("p", ProgType::Xdp, asm(FIELDS));
        let vm = Vm::new(&image, config).expect("loads");
        let interp = VmConfig::kernel().with_engine(nfkit_vm::Engine::Interp);
        let reference = Vm::new(&image, interp).expect("loads");
        if engine == nfkit_vm::Engine::Jit && cfg!(target_arch = "x86_64") {
            assert_eq!(vm.engine(0usize), Some(&nfkit_vm::EngineUse::Jit));
        }
        let mut run = vm.runner();
        let opts = RunOptions::default();
        let meta = [9u8, 8, 7, 6];
        for (i, len) in [60usize, 1500, 14, 60, 900, 3000, 60]
            .into_iter()
            .enumerate()
        {
            let input: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
            let md = XdpMd {
                ingress_ifindex: 3 + i as u32,
                rx_queue_index: i as u32,
                headroom: 128 + 32 * i,
                ..XdpMd::new(&input)
            };
            let with_meta = XdpMd {
                meta: &meta,
                ..md.clone()
            };
            for m in [&md, &with_meta, &md] {
                let fresh = reference.run(0usize, Context::Xdp(m.clone()), &opts);
                let mut buf = input.clone();
                let out = run.run_packet(0usize, &mut buf, PacketCtx::XdpWith(m), &opts);
                assert_eq!(out.r0(), fresh.r0(), "{engine:?} len {len}");
                assert!(out.r0().is_some(), "{engine:?}: {:?}", out.result);
                assert_eq!(out.insns, fresh.insns, "{engine:?} len {len}");
                assert_eq!(buf, input, "{engine:?}: the packet is unchanged");
            }
            // A context of another kind in between (the interpreter
            // runs it: the JIT's proofs assume the entry's own context).
            let mut raw = input.clone();
            let r = run.run_packet(0usize, &mut raw, PacketCtx::Raw, &opts);
            let fresh = reference.run(0usize, Context::Raw(&input), &opts);
            assert_eq!(r.result.is_ok(), fresh.result.is_ok(), "{engine:?} raw");
            assert_eq!(r.r0(), fresh.r0(), "{engine:?} raw");
        }
    }
}

/// Clock, random numbers, CPU, map update/lookup/delete (hash, array)
/// and a map-value access that faults when a random offset takes it past
/// the value: what the JIT calls directly on the fast path.
fn helper_program() -> Vec<Insn> {
    use nfkit_isa::{AluOp, Cond};
    use nfkit_vm::helpers::table::id;
    let key = |b: u8| vec![movr(b, 10), alu64(AluOp::Add, b, -4)];
    let mut p = vec![
        call(id::KTIME_GET_NS),
        movr(7, 0),
        call(id::GET_PRANDOM_U32),
        movr(8, 0),
        call(id::GET_SMP_PROCESSOR_ID),
        alu64r(AluOp::Add, 7, 0),
        movr(1, 8),
        alu64(AluOp::And, 1, 3),
        stx(Size::W, 10, 1, -4),
        stx(Size::DW, 10, 7, -24),
        stx(Size::DW, 10, 8, -16),
        map_ptr(1, 0),
    ];
    p.extend(key(2));
    p.extend([movr(3, 10), alu64(AluOp::Add, 3, -24), mov(4, 0)]);
    p.extend([call(id::MAP_UPDATE_ELEM), movr(9, 0), map_ptr(1, 0)]);
    p.extend(key(2));
    p.extend([
        call(id::MAP_LOOKUP_ELEM),
        jmp(Cond::Eq, 0, 0, 2),
        ldx(Size::DW, 1, 0, 8),
        alu64r(AluOp::Add, 9, 1),
        movr(1, 8),
        alu64(AluOp::And, 1, 4),
        // Over the delete: lddw takes two slots.
        jmp(Cond::Eq, 1, 0, 6),
        map_ptr(1, 0),
    ]);
    p.extend(key(2));
    p.extend([call(id::MAP_DELETE_ELEM), alu64r(AluOp::Add, 9, 0)]);
    p.extend([
        movr(1, 8),
        alu64(AluOp::Rsh, 1, 3),
        alu64(AluOp::And, 1, 7),
        stx(Size::W, 10, 1, -4),
        map_ptr(1, 1),
    ]);
    p.extend(key(2));
    p.extend([
        call(id::MAP_LOOKUP_ELEM),
        jmp(Cond::Eq, 0, 0, 6),
        movr(1, 8),
        alu64(AluOp::Rsh, 1, 6),
        alu64(AluOp::And, 1, 15),
        alu64r(AluOp::Add, 0, 1),
        ldx(Size::DW, 1, 0, 0),
        alu64r(AluOp::Add, 9, 1),
        movr(0, 9),
        exit(),
    ]);
    p
}

/// The helper program through the fast path of one runner, run after
/// run (the maps carry over), on both engines: each run gives what the
/// same run on a fresh interpreter VM gives (r0 or the fault and where,
/// instructions, the maps afterwards), with the same clock and random
/// numbers.
#[test]
fn fast_runs_with_helpers_give_what_fresh_runs_give() {
    use std::sync::Arc;
    let mut image = Image::from_insns("p", ProgType::Xdp, helper_program());
    image.maps = common::gen::maps();
    for engine in [nfkit_vm::Engine::Jit, nfkit_vm::Engine::Interp] {
        let vm = Vm::new(&image, VmConfig::kernel().with_engine(engine)).expect("loads");
        let interp = VmConfig::kernel().with_engine(nfkit_vm::Engine::Interp);
        let reference = Vm::new(&image, interp).expect("loads");
        if engine == nfkit_vm::Engine::Jit && cfg!(target_arch = "x86_64") {
            assert_eq!(vm.engine(0usize), Some(&nfkit_vm::EngineUse::Jit));
        }
        let mut run = vm.runner();
        let input = frame(80);
        let (mut faults, mut oks) = (0, 0);
        for i in 0..200u64 {
            let opts = |seed: u64| RunOptions {
                clock: Some(Arc::new(nfkit_vm::FixedClock::new(1_000 + 77 * seed))),
                rng: Some(Arc::new(nfkit_vm::SeqRng::new(seed * 0x9e37_79b9 + 1))),
                ..RunOptions::default()
            };
            let fresh = reference.run(0usize, Context::Xdp(XdpMd::new(&input)), &opts(i));
            let mut buf = input.clone();
            let out = run.run_packet(0usize, &mut buf, PacketCtx::Xdp, &opts(i));
            assert_eq!(out.r0(), fresh.r0(), "{engine:?} run {i}");
            assert_eq!(
                format!("{:?}", out.result),
                format!("{:?}", fresh.result),
                "{engine:?} run {i}"
            );
            assert_eq!(out.insns, fresh.insns, "{engine:?} run {i}");
            for name in ["h", "a"] {
                let (a, b) = (
                    vm.map(name).expect("map"),
                    reference.map(name).expect("map"),
                );
                let (mut x, mut y) = (a.entries(), b.entries());
                x.sort();
                y.sort();
                assert_eq!(x, y, "{engine:?} run {i}: map {name}");
            }
            match out.result {
                Ok(_) => oks += 1,
                Err(_) => faults += 1,
            }
        }
        // Both endings happen (the comparison covers faults too).
        assert!(
            oks > 0 && faults > 0,
            "{engine:?}: {oks} ok, {faults} faults"
        );
    }
}

/// Sums the first 32 bytes of the packet (or fewer) in a loop: calls
/// nothing, but jumps back (the lean run copies the frame in).
const LOOP_SUM: &str = "
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
    r0 = 0
    r5 = 0
again:
    r4 = r2
    r4 += 1
    if r4 > r3 goto out
    r6 = *(u8 *)(r2 + 0)
    r0 += r6
    r2 += 1
    r5 += 1
    if r5 < 32 goto again
out:
    exit
";

/// Straight programs that reach for bytes around the packet: `r2` is
/// `data` or `data_end` moved by `off`, then a load or store of `size`
/// bytes there, with or without a bounds check that covers the first 8
/// bytes only (the checker proves those, the rest is checked inline).
fn hostile_programs() -> Vec<String> {
    let mut out = Vec::new();
    let offs = [
        -4096i64,
        -257,
        -129,
        -64,
        -9,
        -8,
        -1,
        0,
        1,
        7,
        8,
        13,
        59,
        60,
        61,
        4096,
        1 << 20,
    ];
    for base in ["r2 = *(u32 *)(r1 + 0)", "r2 = *(u32 *)(r1 + 4)"] {
        for off in offs {
            for size in ["u8", "u16", "u32", "u64"] {
                for (i, access) in [
                    format!("r0 = *({size} *)(r2 + 0)\nr0 &= 0xff"),
                    format!("*({size} *)(r2 + 0) = 0x55"),
                ]
                .iter()
                .enumerate()
                {
                    out.push(format!(
                        "{base}\nr3 = *(u32 *)(r1 + 4)\nr0 = 2\nr4 = {off}\nr2 += r4\n{access}\nr0 += {i}\nexit\n"
                    ));
                }
            }
        }
        for off in ["- 8", "- 1", "+ 0", "+ 1", "+ 4", "+ 8", "+ 64", "+ 4000"] {
            out.push(format!(
                "{base}\nr3 = *(u32 *)(r1 + 4)\nr0 = 2\nr4 = r2\nr4 += 8\nif r4 > r3 goto out\n\
                 *(u64 *)(r2 {off}) = r3\nr0 = *(u64 *)(r2 {off})\nr0 &= 0xff\nout:\nexit\n"
            ));
        }
    }
    out
}

/// The lean run of programs that call nothing (`run_packet`'s fast path;
/// on the JIT, straight ones run on the caller's buffer in place): for
/// each program and engine, frames of several sizes and headrooms, each
/// run equal to a fresh interpreter run (r0 or the fault with its slot,
/// location and kind; the instruction count; the packet afterwards); a
/// budget that stops runs early; and none writes a byte of the caller's
/// allocation past the frame (the spare capacity keeps its pattern).
/// Hostile programs reach before, after and far from the frame.
#[test]
fn lean_runs_give_what_fresh_runs_give() {
    let mut texts: Vec<String> = [PARSE, SWAP, LOOP_SUM]
        .iter()
        .map(|s| s.to_string())
        .collect();
    texts.push(FIELDS.replace("call 7\n", ""));
    texts.extend(hostile_programs());
    let (mut loaded, mut faults, mut written) = (0usize, 0usize, 0usize);
    for text in &texts {
        let image = Image::from_insns("p", ProgType::Xdp, asm(text));
        let interp = VmConfig::kernel().with_engine(nfkit_vm::Engine::Interp);
        let Ok(reference) = Vm::new(&image, interp) else {
            continue;
        };
        loaded += 1;
        for engine in [nfkit_vm::Engine::Jit, nfkit_vm::Engine::Interp] {
            let vm = Vm::new(&image, VmConfig::kernel().with_engine(engine)).expect("loads");
            let mut run = vm.runner();
            for (i, len) in [60usize, 14, 0, 1500, 61, 60].into_iter().enumerate() {
                let input: Vec<u8> = (0..len).map(|k| (k * 13 + i) as u8).collect();
                let md = XdpMd {
                    ingress_ifindex: 2 + i as u32,
                    headroom: 192 + 64 * (i % 3),
                    ..XdpMd::new(&input)
                };
                for budget in [None, Some(4)] {
                    let opts = RunOptions {
                        budget,
                        ..RunOptions::default()
                    };
                    let fresh = reference.run(0usize, Context::Xdp(md.clone()), &opts);
                    let mut buf = framed(&input);
                    let out = run.run_packet(0usize, &mut buf, PacketCtx::XdpWith(&md), &opts);
                    let what = format!("{engine:?} len {len} budget {budget:?}\n{text}");
                    assert_eq!(out.result, fresh.result, "{what}");
                    assert_eq!(out.insns, fresh.insns, "{what}");
                    assert_eq!(buf, fresh.packet, "{what}");
                    assert_eq!(out.head_delta, 0, "{what}");
                    if !out.packet_written {
                        assert_eq!(buf, input, "{what}: unwritten, unchanged");
                    }
                    faults += usize::from(out.result.is_err());
                    written += usize::from(buf != input);
                    let intact = spare_intact(&mut buf, len);
                    assert!(intact, "{what}: a byte past the frame changed");
                }
            }
        }
    }
    // The programs must have been run, faulted and written for real.
    assert!(
        loaded * 10 >= texts.len() * 8,
        "{loaded} of {} loaded",
        texts.len()
    );
    assert!(
        faults > 100 && written > 50,
        "{faults} faults, {written} writes"
    );
}

/// Looks a value up in array `a` (4 values of 16 bytes) or per-CPU array
/// `pa` (2 of 8) with a key, an offset and a selector from the frame,
/// then stores and loads at the value's pointer plus the offset (past
/// the value's edge for some offsets: a fault), or returns the pointer.
/// `known`: each map has a call of its own, the map loaded just before
/// it in the same block (the JIT computes such lookups inline); else one
/// call for both, reached from either map's `lddw` (the glue's lookup).
fn array_program(known: bool) -> Vec<Insn> {
    use nfkit_isa::{AluOp, Cond};
    use nfkit_vm::helpers::table::id;
    let mut p = vec![
        movr(6, 1),
        ldx(Size::W, 2, 6, 0),
        ldx(Size::W, 3, 6, 4),
        movr(4, 2),
        alu64(AluOp::Add, 4, 8),
        jmpr(Cond::Gt, 4, 3, if known { 32 } else { 29 }),
        ldx(Size::B, 7, 2, 0),
        ldx(Size::B, 8, 2, 1),
        ldx(Size::B, 9, 2, 2),
        stx(Size::W, 10, 7, -4),
        movr(1, 9),
        alu64(AluOp::And, 1, 1),
    ];
    if known {
        p.extend([
            jmp(Cond::Ne, 1, 0, 6),
            map_ptr(1, 1),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            call(id::MAP_LOOKUP_ELEM),
            ja(5),
            map_ptr(1, 2),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            call(id::MAP_LOOKUP_ELEM),
        ]);
    } else {
        p.extend([
            jmp(Cond::Ne, 1, 0, 3),
            map_ptr(1, 1),
            ja(2),
            map_ptr(1, 2),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            call(id::MAP_LOOKUP_ELEM),
        ]);
    }
    p.extend([
        jmp(Cond::Ne, 0, 0, 2),
        mov(0, 100),
        exit(),
        alu64r(AluOp::Add, 0, 8),
        movr(1, 9),
        alu64(AluOp::And, 1, 2),
        jmp(Cond::Eq, 1, 0, 1),
        st(Size::W, 0, 0, 0x1122_3344),
        movr(1, 9),
        alu64(AluOp::And, 1, 4),
        jmp(Cond::Eq, 1, 0, 1),
        exit(),
        ldx(Size::W, 0, 0, 0),
        exit(),
        mov(0, 1),
        exit(),
    ]);
    p
}

/// Array lookups (plain and per-CPU: the values' static regions) through
/// one runner's fast path on both engines, on CPUs that change now and
/// then: each run gives what a fresh interpreter run gives (r0, pointers
/// included, or the fault and where; instructions; both arrays'
/// contents, every CPU's slots), keys in and out of range, accesses at
/// and past the values' edges.
#[test]
fn array_lookups_give_what_fresh_runs_give() {
    for known in [true, false] {
        array_lookups_agree(known);
    }
}

fn array_lookups_agree(known: bool) {
    let mut image = Image::from_insns("p", ProgType::Xdp, array_program(known));
    image.maps = common::gen::maps();
    let config = |engine| {
        let mut c = VmConfig::kernel().with_engine(engine);
        c.ncpus = 2;
        c
    };
    for engine in [nfkit_vm::Engine::Jit, nfkit_vm::Engine::Interp] {
        let vm = Vm::new(&image, config(engine)).expect("loads");
        let reference = Vm::new(&image, config(nfkit_vm::Engine::Interp)).expect("loads");
        if engine == nfkit_vm::Engine::Jit && cfg!(target_arch = "x86_64") {
            assert_eq!(vm.engine(0usize), Some(&nfkit_vm::EngineUse::Jit));
        }
        let mut run = vm.runner();
        let (mut faults, mut oks, mut misses) = (0, 0, 0);
        for i in 0..400u32 {
            let mut input = frame(80);
            input[0] = (i % 6) as u8;
            input[1] = ((i / 6) % 18) as u8;
            input[2] = (i % 8) as u8 ^ ((i / 48) % 8) as u8;
            let opts = RunOptions {
                cpu: (i / 5) % 2,
                ..RunOptions::default()
            };
            let fresh = reference.run(0usize, Context::Xdp(XdpMd::new(&input)), &opts);
            let mut buf = input.clone();
            let out = run.run_packet(0usize, &mut buf, PacketCtx::Xdp, &opts);
            assert_eq!(
                format!("{:?}", out.result),
                format!("{:?}", fresh.result),
                "{engine:?} known {known} run {i}"
            );
            assert_eq!(out.insns, fresh.insns, "{engine:?} known {known} run {i}");
            for name in ["a", "pa"] {
                let (a, b) = (
                    vm.map(name).expect("map"),
                    reference.map(name).expect("map"),
                );
                let (mut x, mut y) = (a.entries(), b.entries());
                x.sort();
                y.sort();
                assert_eq!(x, y, "{engine:?} run {i}: map {name}");
            }
            match out.result {
                Ok(100) => misses += 1,
                Ok(_) => oks += 1,
                Err(_) => faults += 1,
            }
        }
        assert!(
            oks > 0 && faults > 0 && misses > 0,
            "{engine:?}: {oks} ok, {faults} faults, {misses} keys out of range"
        );
        // Something was stored in each CPU's slots of the per-CPU array.
        let pa = vm.map("pa").expect("map");
        for cpu in 0..2 {
            let written = (0..2u32).any(|k| {
                let v = pa.lookup_cpu(&k.to_le_bytes(), cpu);
                v.ok().flatten().is_some_and(|v| v.iter().any(|&b| b != 0))
            });
            assert!(written, "{engine:?}: nothing stored on CPU {cpu}");
        }
    }
}

/// Writes the packet in place, then has `bpf_csum_diff` read it (a
/// helper reading packet memory: the packet must have moved into the
/// runner's buffer with the write), then writes it again after the call.
const CSUM: &str = "
    r6 = r1
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r0 = 1
    r4 = r2
    r4 += 16
    if r4 > r3 goto out
    *(u8 *)(r2 + 0) = 0x77
    r1 = r2
    r2 = 8
    r3 = 0
    r4 = 0
    r5 = 0
    call 28
    r7 = r0
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r4 = r2
    r4 += 16
    if r4 > r3 goto out
    *(u32 *)(r2 + 4) = r7
    r0 = 3
out:
    exit
";

/// `bpf_xdp_store_bytes` from the stack into the packet (or `-EFAULT`
/// past its end), then a native load of what it wrote.
const STORE_BYTES: &str = "
    r6 = r1
    r2 = 0x0a0b0c0d
    *(u32 *)(r10 - 4) = r2
    r1 = r6
    r2 = 2
    r3 = r10
    r3 += -4
    r4 = 4
    call 190
    r7 = r0
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r0 = 2
    r4 = r2
    r4 += 8
    if r4 > r3 goto out
    r0 = *(u32 *)(r2 + 2)
    r0 += r7
out:
    exit
";

/// The clock (a helper that touches no memory: the run stays on the
/// caller's buffer) written into the packet; with `redirect`, then
/// `bpf_redirect(3, 0)`.
fn clock_program(redirect: bool) -> String {
    let tail = if redirect {
        "r1 = 3\nr2 = 0\ncall 23\n"
    } else {
        "r0 = 3\n"
    };
    format!(
        "r6 = r1\ncall 5\nr7 = r0\nr2 = *(u32 *)(r6 + 0)\nr3 = *(u32 *)(r6 + 4)\nr0 = 2\n\
         r4 = r2\nr4 += 8\nif r4 > r3 goto out\n*(u64 *)(r2 + 0) = r7\n{tail}out:\nexit\n"
    )
}

/// Map helpers whose keys and values are packet bytes: a hash update
/// keyed by bytes 26..30 with bytes 18..34 as the value, a lookup keyed
/// by the packet whose value goes back into the packet, and an array
/// lookup (computed inline by the JIT) keyed by a word the program wrote
/// into the packet just before (`0x1234 ll` marks the maps' handles:
/// hash `h`, then array `a`).
const MAPS: &str = "
    r6 = r1
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r0 = 2
    r4 = r2
    r4 += 40
    if r4 > r3 goto out
    r1 = 0x1234 ll
    r3 = r2
    r3 += 18
    r2 += 26
    r4 = 0
    call 2
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r4 = r2
    r4 += 40
    if r4 > r3 goto out
    r1 = 0x1234 ll
    r2 += 26
    call 1
    r7 = 0
    if r0 == 0 goto skip
    r7 = *(u64 *)(r0 + 8)
skip:
    r2 = *(u32 *)(r6 + 0)
    r3 = *(u32 *)(r6 + 4)
    r4 = r2
    r4 += 40
    if r4 > r3 goto out
    *(u64 *)(r2 + 0) = r7
    r5 = *(u8 *)(r2 + 14)
    r5 &= 7
    *(u32 *)(r2 + 36) = r5
    r1 = 0x1235 ll
    r2 += 36
    call 1
    if r0 == 0 goto none
    r0 = *(u32 *)(r0 + 0)
    r0 += 1
    exit
none:
    r0 = 9
out:
    exit
";

/// `text` assembled, its `0x1234 ll` / `0x1235 ll` loads turned into
/// the handles of maps 0 and 1.
fn with_maps(text: &str) -> Vec<Insn> {
    asm(text)
        .into_iter()
        .map(|i| match i {
            Insn::Lddw { dst, imm, .. } if imm == 0x1234 || imm == 0x1235 => {
                map_ptr(dst.num(), imm - 0x1234)
            }
            other => other,
        })
        .collect()
}

/// The direct run of programs that call helpers (`run_packet`'s fast
/// path; on the JIT on the caller's buffer in place until a helper that
/// reaches program memory moves the packet into the runner's buffer):
/// helpers that read the packet, write it, move its head, redirect, read
/// the clock, and map helpers keyed by packet bytes; frames of several
/// sizes and headrooms, budgets that stop runs early, run after run on
/// one runner (the maps carry over). Each run gives what a fresh
/// interpreter run gives (r0 or the fault, instructions, the packet, the
/// head's move, the redirect, the maps), and no byte of the caller's
/// allocation past the frame changes.
#[test]
fn direct_runs_with_helpers_give_what_fresh_runs_give() {
    use std::sync::Arc;
    let mut progs: Vec<(String, Vec<Insn>)> = [PUSH, CSUM, STORE_BYTES]
        .iter()
        .map(|t| (t.to_string(), asm(t)))
        .collect();
    for r in [false, true] {
        let t = clock_program(r);
        progs.push((t.clone(), asm(&t)));
    }
    progs.push((MAPS.to_string(), with_maps(MAPS)));
    let (mut moved, mut redirected, mut faults, mut written, mut hits) = (0, 0, 0, 0, 0);
    for (text, insns) in &progs {
        let mut image = Image::from_insns("p", ProgType::Xdp, insns.clone());
        image.maps = common::gen::maps();
        for engine in [nfkit_vm::Engine::Jit, nfkit_vm::Engine::Interp] {
            let interp = VmConfig::kernel().with_engine(nfkit_vm::Engine::Interp);
            let reference = Vm::new(&image, interp).expect("loads");
            let vm = Vm::new(&image, VmConfig::kernel().with_engine(engine)).expect("loads");
            if engine == nfkit_vm::Engine::Jit && cfg!(target_arch = "x86_64") {
                assert_eq!(vm.engine(0usize), Some(&nfkit_vm::EngineUse::Jit), "{text}");
            }
            let mut run = vm.runner();
            let clock = Arc::new(nfkit_vm::FixedClock::new(0x1122_3344_5566));
            for round in 0..3 {
                for (i, len) in [60usize, 14, 0, 1500, 61, 40, 39].into_iter().enumerate() {
                    let input: Vec<u8> = (0..len).map(|k| (k * 13 + i + round) as u8).collect();
                    let md = XdpMd {
                        ingress_ifindex: 2 + i as u32,
                        headroom: 192 + 64 * (i % 3),
                        ..XdpMd::new(&input)
                    };
                    for budget in [None, Some(4), Some(13)] {
                        let opts = RunOptions {
                            budget,
                            clock: Some(Arc::clone(&clock) as Arc<dyn nfkit_vm::Clock>),
                            ..RunOptions::default()
                        };
                        let fresh = reference.run(0usize, Context::Xdp(md.clone()), &opts);
                        let mut buf = framed(&input);
                        let out = run.run_packet(0usize, &mut buf, PacketCtx::XdpWith(&md), &opts);
                        let what = format!("{engine:?} len {len} budget {budget:?}\n{text}");
                        assert_eq!(out.result, fresh.result, "{what}");
                        assert_eq!(out.insns, fresh.insns, "{what}");
                        assert_eq!(buf, fresh.packet, "{what}");
                        assert_eq!(out.head_delta, fresh.head_delta, "{what}");
                        assert_eq!(out.redirect, fresh.redirect, "{what}");
                        if !out.packet_written {
                            assert_eq!(buf, input, "{what}: unwritten, unchanged");
                        }
                        for name in ["h", "a"] {
                            let (a, b) = (vm.map(name).expect("map"), reference.map(name));
                            let (mut x, mut y) = (a.entries(), b.expect("map").entries());
                            x.sort();
                            y.sort();
                            assert_eq!(x, y, "{what}: map {name}");
                        }
                        moved += usize::from(out.head_delta != 0);
                        redirected += usize::from(out.redirect.is_some());
                        faults += usize::from(out.result.is_err());
                        written += usize::from(buf != input);
                        hits += usize::from(matches!(out.result, Ok(v) if v != 2 && v != 9));
                        let intact = spare_intact(&mut buf, len);
                        assert!(intact, "{what}: a byte past the frame changed");
                    }
                }
            }
        }
    }
    // Every kind of ending and effect happened for real.
    assert!(
        moved > 10 && redirected > 10 && faults > 10 && written > 50 && hits > 10,
        "{moved} moved, {redirected} redirected, {faults} faults, {written} written, {hits} hits"
    );
}

/// Room past the frame in the caller's buffers of the in-place tests.
const SPARE: usize = 4096;

/// `input` in a buffer whose spare capacity holds [`SPARE`] bytes of
/// 0xa5: a run in place must leave them as they are.
fn framed(input: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(input.len() + SPARE);
    buf.extend_from_slice(input);
    buf.resize(input.len() + SPARE, 0xa5);
    buf.truncate(input.len());
    buf
}

/// Whether the pattern [`framed`] put past a `len`-byte frame is intact,
/// from the end of the packet as it is now (a pushed head makes it
/// longer) to the end of the pattern.
fn spare_intact(buf: &mut Vec<u8>, len: usize) -> bool {
    let rest = (len + SPARE).saturating_sub(buf.len());
    let spare = &buf.spare_capacity_mut()[..rest];
    // SAFETY: these bytes were written (0xa5) before the truncation;
    // nothing may have written them since.
    spare.iter().all(|b| unsafe { b.assume_init() } == 0xa5)
}

/// Reads a context field with a one-byte load on long frames only: the
/// JIT leaves such loads to the interpreter's code (a glue call that
/// succeeds), so the run cannot leave its runner armed.
const NARROW_ON_LONG: &str = "
    r2 = *(u32 *)(r1 + 0)
    r3 = *(u32 *)(r1 + 4)
    r0 = 2
    r4 = r2
    r4 += 100
    if r4 > r3 goto out
    r0 = *(u8 *)(r1 + 12)
    r0 += 1000
out:
    exit
";

/// Runs of one shape in a row, where the runner is armed by a clean
/// run and the next runs skip the machine's reset (`vm::fast::Armed`),
/// broken up by everything that must disarm it: another frame shape
/// (ingress, headroom), other options (budget, CPU, trace, the
/// interpreter on a JIT runner), the general API (`Runner::run`), faults (hostile
/// programs on short frames), budget hand-offs and glue calls that
/// succeed; on both engines. Every run equals a fresh interpreter run
/// (r0 or the fault, the count, the packet), writes nothing past the
/// frame, and the armed path demonstrably ran.
#[test]
fn armed_runs_give_what_fresh_runs_give() {
    let mut texts: Vec<(String, VmConfig)> = [PARSE, SWAP, LOOP_SUM]
        .iter()
        .map(|s| (s.to_string(), VmConfig::kernel()))
        .collect();
    texts.push((FIELDS.replace("call 7\n", ""), VmConfig::kernel()));
    texts.push((NARROW_ON_LONG.to_string(), VmConfig::default()));
    texts.extend(
        hostile_programs()
            .into_iter()
            .step_by(3)
            .map(|t| (t, VmConfig::kernel())),
    );
    let lens = [60usize, 60, 14, 1500, 0, 61, 60, 1500, 1, 60, 200, 38];
    let (mut armed_runs, mut loaded, mut faults, mut glued_ok) = (0usize, 0usize, 0usize, 0usize);
    for (text, config) in &texts {
        let image = Image::from_insns("p", ProgType::Xdp, asm(text));
        let Ok(reference) = Vm::new(&image, config.clone().with_engine(nfkit_vm::Engine::Interp))
        else {
            continue;
        };
        loaded += 1;
        for engine in [nfkit_vm::Engine::Jit, nfkit_vm::Engine::Interp] {
            let vm = Vm::new(&image, config.clone().with_engine(engine)).expect("loads");
            let mut run = vm.runner();
            for step in 0..60usize {
                let len = lens[step % lens.len()];
                let input: Vec<u8> = (0..len).map(|k| (k * 11 + step) as u8).collect();
                let base = XdpMd::new(&input);
                let md = match step % 17 {
                    5 => XdpMd {
                        ingress_ifindex: 9,
                        ..base
                    },
                    11 => XdpMd {
                        headroom: 320,
                        ..base
                    },
                    _ => base,
                };
                let opts = match step % 13 {
                    3 => RunOptions {
                        budget: Some(5),
                        ..RunOptions::default()
                    },
                    6 => RunOptions {
                        cpu: 1,
                        ..RunOptions::default()
                    },
                    8 => RunOptions {
                        interp: true,
                        ..RunOptions::default()
                    },
                    10 => RunOptions {
                        trace: true,
                        ..RunOptions::default()
                    },
                    _ => RunOptions::default(),
                };
                let what = format!("{engine:?} step {step} len {len}\n{text}");
                let fresh = reference.run(0usize, Context::Xdp(md.clone()), &opts);
                if step % 19 == 7 {
                    // The general API in between.
                    let r = run.run(0usize, Context::Xdp(md.clone()), &opts);
                    assert_eq!(r.result, fresh.result, "{what} (run)");
                    assert!(!run.armed(), "{what}: the general run leaves no arm");
                    continue;
                }
                let was_armed = run.armed();
                let mut buf = framed(&input);
                let out = run.run_packet(0usize, &mut buf, PacketCtx::XdpWith(&md), &opts);
                assert_eq!(out.result, fresh.result, "{what}");
                assert_eq!(out.insns, fresh.insns, "{what}");
                assert_eq!(buf, fresh.packet, "{what}");
                assert_eq!(out.head_delta, 0, "{what}");
                assert!(
                    spare_intact(&mut buf, len),
                    "{what}: a byte past the frame changed"
                );
                if !out.packet_written {
                    assert_eq!(buf, input, "{what}: unwritten, unchanged");
                }
                let plain = step % 13 == 0 || ![3, 6, 8, 10].contains(&(step % 13));
                let same_md = ![5, 11].contains(&(step % 17));
                armed_runs += usize::from(was_armed && plain && same_md);
                faults += usize::from(out.result.is_err());
                glued_ok += usize::from(out.r0().is_some_and(|r| r >= 1000));
                if out.result.is_err() || opts.trace {
                    assert!(!run.armed(), "{what}: armed after a fault or a traced run");
                }
            }
        }
    }
    assert!(
        loaded * 10 >= texts.len() * 8,
        "{loaded} of {} loaded",
        texts.len()
    );
    if cfg!(target_arch = "x86_64") {
        assert!(armed_runs > 1000, "{armed_runs} armed runs");
        assert!(
            glued_ok > 5,
            "{glued_ok} runs through the glue that ended well"
        );
    }
    assert!(faults > 100, "{faults} faults");
}

//! JIT ≡ interpreter, as a property: many random and mutated programs
//! are each loaded once with [`Engine::Jit`] (the conformance profile on
//! raw memory, and the kernel profile as XDP with packets and maps) and
//! run twice on identical fresh inputs, compiled and with
//! [`RunOptions::interp`]. Both runs must give the same result (r0,
//! memory or packet afterwards, maps, redirect), the same fault (kind and
//! slot; budget faults by kind only), or the program must be refused the
//! same way by both engines.
//!
//! Seeds are fixed; `NFKIT_PROP_SEED=<u64>` replaces them (to reproduce
//! or to explore). A failure prints the seed, the shrunk program's
//! disassembly and its input.

mod common;

use common::gen::*;
use common::{alu64, call, ldx, map_ptr, map_value, mov, movr, st, stx};
use nfkit_isa::{AluOp, AtomicOp, ByteOrder, CallKind, Insn, LddwKind, RawInsn, Size, Width};
use nfkit_object::{Image, ProgType};
use nfkit_vm::helpers::table::id;
use nfkit_vm::{
    Context, Engine, EngineUse, FixedClock, LoadError, PacketCtx, RunErrorKind, RunOptions,
    RunResult, SeqRng, Vm, VmConfig, XdpMd,
};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Programs that decode, per test (two tests: more than 100,000 per
/// `cargo test`; the cases that do not decode come on top).
const PROGRAMS: u64 = 55_000;
/// Instruction budget of a run: loops end quickly.
const BUDGET: u64 = 3_000;
/// The reason the placeholder JIT gives for every entry.
const NOT_BUILT: &str = "the JIT is not built yet";
/// Most shrinking steps spent on a failure.
const SHRINK_STEPS: u32 = 2_000;

/// One generated case: the program's slots, the packet or memory, and a
/// byte choosing the CPU and the clock.
type Case = (Vec<RawInsn>, Vec<u8>, u8);

/// The seed of a test: fixed, or `NFKIT_PROP_SEED` when set.
fn seed(fixed: u64) -> u64 {
    std::env::var("NFKIT_PROP_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(fixed)
}

fn runner(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed ^ (i as u64).wrapping_mul(0x9e37_79b9)).to_le_bytes());
    }
    TestRunner::new_with_rng(
        Config {
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// Mostly valid programs with an input.
fn generated() -> impl Strategy<Value = Case> {
    (generated_programs(), packet_strategy(), any::<u8>())
}

/// Mutated programs with an input.
fn mutated() -> impl Strategy<Value = Case> {
    (mutated_programs(), packet_strategy(), any::<u8>())
}

/// How a run ended, in the terms both engines must agree on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    Ok(u64),
    Fault { kind: &'static str, slot: usize },
    Budget,
}

/// Everything one run changed, compared between the engines.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    verdict: Verdict,
    /// Memory, maps and the rest afterwards (not for budget faults: the
    /// engines may stop at different instructions).
    after: Option<After>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct After {
    packet: Vec<u8>,
    meta: Vec<u8>,
    head_delta: i64,
    redirect: Option<nfkit_vm::Redirect>,
    printk: Vec<String>,
    maps: Vec<MapState>,
}

/// A map's entries sorted by key, or a ring buffer's records.
type MapState = Vec<(Vec<u8>, Vec<u8>)>;

fn kind_name(k: &RunErrorKind) -> &'static str {
    match k {
        RunErrorKind::Access { .. } => "access",
        RunErrorKind::Context { .. } => "context",
        RunErrorKind::Budget { .. } => "budget",
        RunErrorKind::CallDepth { .. } => "call depth",
        RunErrorKind::Helper { .. } => "helper",
        RunErrorKind::BadCallx { .. } => "callx",
        RunErrorKind::Atomic { .. } => "atomic",
        RunErrorKind::Setup(_) => "setup",
    }
}

/// The maps' contents (draining ring buffers).
fn map_states(vm: &Vm) -> Vec<MapState> {
    vm.maps()
        .iter()
        .map(|m| match m.ringbuf_consume() {
            Ok(records) => records.into_iter().map(|r| (Vec::new(), r)).collect(),
            Err(_) => {
                let mut e = m.entries();
                e.sort();
                e
            }
        })
        .collect()
}

/// Puts the maps back to `states` (as [`map_states`] took them).
fn restore_maps(vm: &Vm, states: &[MapState]) {
    for (m, state) in vm.maps().iter().zip(states) {
        if m.ringbuf_consume().is_ok() {
            continue;
        }
        let keep: BTreeSet<&Vec<u8>> = state.iter().map(|(k, _)| k).collect();
        for k in m.keys() {
            if !keep.contains(&k) {
                let _ = m.delete(&k);
            }
        }
        for (k, v) in state {
            let _ = m.update(k, v, 0);
        }
    }
}

fn outcome(vm: &Vm, res: &RunResult) -> Outcome {
    let verdict = match &res.result {
        Ok(v) => Verdict::Ok(*v),
        Err(e) if matches!(e.kind, RunErrorKind::Budget { .. }) => Verdict::Budget,
        Err(e) => Verdict::Fault {
            kind: kind_name(&e.kind),
            slot: e.slot,
        },
    };
    let after = (verdict != Verdict::Budget).then(|| After {
        packet: res.packet.clone(),
        meta: res.meta.clone(),
        head_delta: res.head_delta,
        redirect: res.redirect.clone(),
        printk: res.printk.clone(),
        maps: map_states(vm),
    });
    Outcome { verdict, after }
}

/// Counts of one test, printed at its end.
#[derive(Default)]
struct Stats {
    undecodable: u64,
    refused: u64,
    /// Refusals by profile and rule.
    refusals: BTreeMap<String, u64>,
    accepted: u64,
    jit: u64,
    interp: u64,
    fallbacks: BTreeMap<String, u64>,
    verdicts: BTreeMap<&'static str, u64>,
    features: BTreeMap<&'static str, u64>,
    /// Kernel-profile programs that call nothing, also run through
    /// `Runner::run_packet`'s lean run on both engines.
    lean: u64,
    /// Of those runs (one per engine), the ones that then ran armed.
    armed: u64,
}

/// The profiles a case is loaded in.
#[derive(Clone, Copy, Debug)]
enum Setup {
    Conformance,
    KernelXdp,
}

fn config(setup: Setup, engine: Engine) -> VmConfig {
    let base = match setup {
        Setup::Conformance => VmConfig::conformance(),
        Setup::KernelXdp => VmConfig::kernel(),
    };
    VmConfig {
        budget: BUDGET,
        clock: Arc::new(FixedClock::new(1_000_000)),
        rng: Arc::new(SeqRng::new(7)),
        ..base
    }
    .with_engine(engine)
}

/// Loads `img` in `setup` on the JIT and runs it on both engines.
/// `Err` describes a disagreement.
fn check_setup(
    img: &Image,
    setup: Setup,
    data: &[u8],
    kind: u8,
    stats: &mut Stats,
) -> Result<(), String> {
    let vm = match Vm::new(img, config(setup, Engine::Jit)) {
        Ok(vm) => vm,
        Err(e) => {
            stats.refused += 1;
            let rule = e
                .rule()
                .map_or_else(|| "other".to_string(), |r| r.to_string());
            *stats
                .refusals
                .entry(format!("{setup:?}: {rule}"))
                .or_default() += 1;
            let interp: Result<Vm, LoadError> = Vm::new(img, config(setup, Engine::Interp));
            return match interp {
                Err(i) if i == e => Ok(()),
                Err(i) => Err(format!(
                    "{setup:?}: refused differently: jit {e} / interp {i}"
                )),
                Ok(_) => Err(format!(
                    "{setup:?}: the JIT load refuses ({e}), the interpreter's accepts"
                )),
            };
        }
    };
    stats.accepted += 1;
    let use_ = vm.engine(0).cloned();
    match &use_ {
        Some(EngineUse::Jit) => stats.jit += 1,
        Some(EngineUse::Fallback(why)) => *stats.fallbacks.entry(why.clone()).or_default() += 1,
        Some(EngineUse::Interp) | None => {
            stats.interp += 1;
            return Err(format!(
                "{setup:?}: engine jit configured, entry says {use_:?}"
            ));
        }
    }
    for f in features(img) {
        *stats.features.entry(f).or_default() += 1;
    }
    if let Some(m) = vm.map("h") {
        let _ = m.update(&1u32.to_le_bytes(), &[0x11; 16], 0);
    }
    if let Some(m) = vm.map("a") {
        let _ = m.update(&2u32.to_le_bytes(), &[0x22; 16], 0);
    }
    if let Some(m) = vm.map("jmp") {
        let _ = m.update(&0u32.to_le_bytes(), &0u32.to_le_bytes(), 0);
    }
    let initial = map_states(&vm);
    let run = |interp: bool| {
        let opts = RunOptions {
            cpu: u32::from(kind) % 4,
            interp,
            clock: Some(Arc::new(FixedClock::new(1_000_000 + u64::from(kind)))),
            rng: Some(Arc::new(SeqRng::new(
                (u64::from(kind) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ))),
            ..RunOptions::default()
        };
        let ctx = match setup {
            Setup::Conformance => Context::Raw(data),
            Setup::KernelXdp => Context::Xdp(XdpMd::new(data)),
        };
        let res = vm.run(0, ctx, &opts);
        let out = outcome(&vm, &res);
        restore_maps(&vm, &initial);
        (res.engine, out, res.insns, opts)
    };
    let (jit_engine, jit, _, _) = run(false);
    let (interp_engine, interp, insns, interp_opts) = run(true);
    if matches!(setup, Setup::KernelXdp) && calls_nothing(img) {
        stats.lean += 1;
        for on_interp in [false, true] {
            let opts = RunOptions {
                interp: on_interp,
                ..interp_opts.clone()
            };
            let (runs, armed) = run_packet_warm(&vm, data, &opts, &initial);
            stats.armed += u64::from(armed);
            for (path, (out, fast_insns)) in ["lean", "armed or lean"].iter().zip(runs) {
                if out != interp {
                    return Err(format!(
                        "{setup:?}: the fast path ({path}: the program calls nothing; interp \
                         {on_interp}) disagrees with a fresh interpreter run\n  fast:   {out:?}\n  \
                         interp: {interp:?}"
                    ));
                }
                if out.verdict != Verdict::Budget && fast_insns != insns {
                    return Err(format!(
                        "{setup:?}: the fast path ({path}, interp {on_interp}) ran {fast_insns} \
                         instructions, a fresh interpreter run {insns}"
                    ));
                }
            }
        }
    }
    let expected = use_.map_or(Engine::Interp, |u| u.engine());
    if jit_engine != expected || interp_engine != Engine::Interp {
        return Err(format!(
            "{setup:?}: runs report engines {jit_engine} and {interp_engine}, expected {expected} and interp"
        ));
    }
    let name = match &jit.verdict {
        Verdict::Ok(_) => "ok",
        Verdict::Budget => "budget",
        Verdict::Fault { kind, .. } => kind,
    };
    *stats.verdicts.entry(name).or_default() += 1;
    if jit != interp {
        return Err(format!(
            "{setup:?}: engines disagree\n  jit:    {jit:?}\n  interp: {interp:?}"
        ));
    }
    Ok(())
}

/// True if no instruction of `img` calls anything or loads through
/// `LD_ABS`/`LD_IND` (the VM's lean run on `Runner::run_packet`).
fn calls_nothing(img: &Image) -> bool {
    img.insns.iter().all(|i| {
        !matches!(
            i,
            Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. }
        )
    })
}

/// The outcome of `Runner::run_packet` on a copy of `data` the second
/// time on one runner (the first run sets the runner up on the general
/// path, the second takes the fast one), maps put back to `initial`
/// after each; and its instruction count.
fn run_packet_warm(
    vm: &Vm,
    data: &[u8],
    opts: &RunOptions,
    initial: &[MapState],
) -> (Vec<(Outcome, u64)>, bool) {
    let mut runner = vm.runner();
    let mut warm = data.to_vec();
    let _ = runner.run_packet(0usize, &mut warm, PacketCtx::Xdp, opts);
    restore_maps(vm, initial);
    let mut runs = Vec::new();
    let mut armed = false;
    for _ in 0..2 {
        // The second run finds the runner armed when the first ended
        // clean (`vm::fast::Armed`).
        armed = runner.armed();
        let mut packet = data.to_vec();
        let out = runner.run_packet(0usize, &mut packet, PacketCtx::Xdp, opts);
        let verdict = match &out.result {
            Ok(v) => Verdict::Ok(*v),
            Err(e) if matches!(e.kind, RunErrorKind::Budget { .. }) => Verdict::Budget,
            Err(e) => Verdict::Fault {
                kind: kind_name(&e.kind),
                slot: e.slot,
            },
        };
        let mut meta = Vec::new();
        runner.meta(&mut meta);
        let after = (verdict != Verdict::Budget).then(|| After {
            packet,
            meta,
            head_delta: out.head_delta,
            redirect: out.redirect.clone(),
            printk: runner.printk().to_vec(),
            maps: map_states(vm),
        });
        restore_maps(vm, initial);
        runs.push((Outcome { verdict, after }, out.insns));
    }
    (runs, armed)
}

/// Runs one case in both setups.
fn check_case(case: &Case, stats: &mut Stats) -> Result<(), String> {
    let (slots, data, kind) = case;
    let insns = match nfkit_isa::decode_program(slots) {
        Ok(i) => i,
        Err(e) => {
            stats.undecodable += 1;
            let kind = format!("{:?}", e.kind);
            let kind = kind
                .split([' ', '{'])
                .next()
                .unwrap_or_default()
                .to_string();
            *stats.refusals.entry(format!("decode: {kind}")).or_default() += 1;
            return Ok(());
        }
    };
    let mut img = Image::from_insns("p", ProgType::Xdp, helper_free(&insns));
    img.maps = maps();
    check_setup(&img, Setup::Conformance, data, *kind, stats)?;
    img.insns = insns;
    check_setup(&img, Setup::KernelXdp, data, *kind, stats)
}

/// The ISA features an accepted program contains (coverage of the
/// generators).
fn features(img: &Image) -> BTreeSet<&'static str> {
    let mut f = BTreeSet::new();
    for i in &img.insns {
        f.insert(match i {
            Insn::Alu {
                op: AluOp::SDiv | AluOp::SMod,
                ..
            } => "sdiv/smod",
            Insn::Alu {
                op: AluOp::Div | AluOp::Mod,
                ..
            } => "div/mod",
            Insn::Alu {
                op: AluOp::MovSx(_),
                ..
            } => "movsx",
            Insn::Alu {
                op: AluOp::Lsh | AluOp::Rsh | AluOp::Arsh,
                ..
            } => "shift",
            Insn::Alu {
                width: Width::W32, ..
            } => "alu32",
            Insn::Alu { .. } => "alu64",
            Insn::Endian {
                order: ByteOrder::Swap,
                ..
            } => "bswap",
            Insn::Endian { .. } => "endian",
            Insn::Ldx { signed: true, .. } => "ldxsx",
            Insn::Ldx { .. } => "ldx",
            Insn::St { .. } | Insn::Stx { .. } => "store",
            Insn::Atomic {
                op: AtomicOp::CmpXchg,
                ..
            } => "cmpxchg",
            Insn::Atomic {
                op: AtomicOp::Xchg, ..
            } => "xchg",
            Insn::Atomic { .. } => "atomic rmw",
            Insn::Lddw {
                kind: LddwKind::MapIdx | LddwKind::MapIdxValue,
                ..
            } => "lddw map",
            Insn::Lddw {
                kind: LddwKind::Func,
                ..
            } => "lddw func",
            Insn::Lddw { .. } => "lddw",
            Insn::Jmp {
                width: Width::W32, ..
            } => "jmp32",
            Insn::Jmp { .. } => "jmp",
            Insn::Gotol { .. } => "gotol",
            Insn::Call {
                kind: CallKind::Local,
                ..
            } => "local call",
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } => match *imm {
                id::MAP_LOOKUP_ELEM => "map lookup",
                id::MAP_UPDATE_ELEM => "map update",
                id::KTIME_GET_NS => "ktime",
                id::GET_PRANDOM_U32 => "prandom",
                id::TAIL_CALL => "tail call",
                id::LOOP => "bpf_loop",
                _ => "other helper",
            },
            _ => "other",
        });
        if let Insn::Ldx {
            size: Size::DW | Size::W | Size::H | Size::B,
            ..
        } = i
        {
            f.insert("load");
        }
    }
    f
}

/// Shrinks a failing case as far as it keeps failing.
fn shrink<T: ValueTree<Value = Case>>(tree: &mut T, mut failure: (Case, String)) -> (Case, String) {
    let mut steps = 0;
    if !tree.simplify() {
        return failure;
    }
    while steps < SHRINK_STEPS {
        steps += 1;
        let case = tree.current();
        match check_case(&case, &mut Stats::default()) {
            Err(why) => {
                failure = (case, why);
                if !tree.simplify() {
                    break;
                }
            }
            Ok(()) => {
                if !tree.complicate() {
                    break;
                }
            }
        }
    }
    failure
}

fn describe(case: &Case) -> String {
    let (slots, data, kind) = case;
    let opts = nfkit_isa::DisasmOptions::default();
    let text = match nfkit_isa::decode_program(slots) {
        Ok(insns) if helper_free(&insns) != insns => format!(
            "{}\n(the conformance profile runs it with helper calls but 5, legacy loads and callx as moves:)\n{}",
            nfkit_isa::disassemble(&insns, &opts),
            nfkit_isa::disassemble(&helper_free(&insns), &opts)
        ),
        Ok(insns) => nfkit_isa::disassemble(&insns, &opts),
        Err(e) => format!("(does not decode: {e:?})"),
    };
    let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "program:\n{text}\ndata ({} bytes): {hex}\nkind byte: {kind}",
        data.len()
    )
}

/// Runs `PROGRAMS` cases of `strategy`, fails on the first
/// disagreement (shrunk), and checks the engine counts.
fn run_property(
    name: &str,
    fixed_seed: u64,
    min_accepted_pct: u64,
    strategy: impl Strategy<Value = Case>,
) -> Stats {
    let seed = seed(fixed_seed);
    let mut runner = runner(seed);
    let mut stats = Stats::default();
    let mut n = 0u64;
    while n - stats.undecodable < PROGRAMS {
        n += 1;
        let mut tree = match strategy.new_tree(&mut runner) {
            Ok(t) => t,
            Err(e) => panic!("{name}: cannot generate a case: {e}"),
        };
        let case = tree.current();
        if let Err(why) = check_case(&case, &mut stats) {
            let (small, why_small) = shrink(&mut tree, (case.clone(), why.clone()));
            panic!(
                "{name}: case {n} with NFKIT_PROP_SEED={seed}: {why}\n{}\n\nshrunk: {why_small}\n{}",
                describe(&case),
                describe(&small)
            );
        }
    }
    eprintln!(
        "{name} (seed {seed}): {PROGRAMS} programs, and {} that do not decode; loads: {} refused, {} accepted; \
         engines: {} jit, {} interp, fallbacks {:?}; verdicts {:?}; {} calling nothing also run \
         through run_packet's lean run, then armed in {} of {} runs (both engines)",
        stats.undecodable,
        stats.refused,
        stats.accepted,
        stats.jit,
        stats.interp,
        stats.fallbacks,
        stats.verdicts,
        stats.lean,
        stats.armed,
        2 * stats.lean
    );
    // Clean call-free runs arm their runner: the armed path must be
    // exercised by a good share of them.
    assert!(
        stats.lean == 0 || stats.armed * 10 >= stats.lean,
        "{name}: only {} of {} call-free runs found their runner armed",
        stats.armed,
        2 * stats.lean
    );
    eprintln!("{name}: features of accepted programs {:?}", stats.features);
    eprintln!("{name}: refusals {:?}", stats.refusals);
    // Programs must mostly exercise the engines, not the load-time checks.
    assert!(
        stats.accepted * 100 >= (stats.accepted + stats.refused) * min_accepted_pct,
        "{name}: too few programs accepted: {} of {}",
        stats.accepted,
        stats.accepted + stats.refused
    );
    // Once the JIT exists, it must compile nearly everything accepted.
    if stats.fallbacks.contains_key(NOT_BUILT) {
        eprintln!("{name}: the JIT is not built yet: the compiled-share check is skipped");
    } else {
        assert!(
            stats.jit * 10 >= stats.accepted * 9,
            "{name}: only {} of {} accepted programs were JIT-compiled; fallbacks {:?}",
            stats.jit,
            stats.accepted,
            stats.fallbacks
        );
    }
    stats
}

#[test]
fn generated_programs_agree_on_both_engines() {
    let stats = run_property("generated", 0x6a17_e901, 50, generated());
    let missing: Vec<&str> = [
        "alu32",
        "alu64",
        "div/mod",
        "sdiv/smod",
        "movsx",
        "shift",
        "bswap",
        "endian",
        "ldx",
        "ldxsx",
        "store",
        "atomic rmw",
        "xchg",
        "cmpxchg",
        "lddw",
        "lddw map",
        "lddw func",
        "jmp",
        "jmp32",
        "gotol",
        "local call",
        "map lookup",
        "map update",
        "ktime",
        "prandom",
        "tail call",
        "bpf_loop",
    ]
    .into_iter()
    .filter(|f| !stats.features.contains_key(f))
    .collect();
    assert!(missing.is_empty(), "no accepted program has {missing:?}");
    let faults: Vec<&str> = ["ok", "access", "budget", "call depth", "context", "atomic"]
        .into_iter()
        .filter(|v| !stats.verdicts.contains_key(v))
        .collect();
    assert!(faults.is_empty(), "no run ended with {faults:?}");
}

#[test]
fn mutated_programs_agree_on_both_engines() {
    let stats = run_property("mutated", 0x0b1f_11a5, 20, mutated());
    assert!(
        stats.verdicts.contains_key("ok"),
        "no mutated program ran to its end"
    );
}

/// The harness itself: runs that change maps are undone before the
/// other engine's run, and a changed map or result is seen.
#[test]
fn runs_are_undone_and_differences_seen() {
    // Writes r0 = prandom into hash key 3 and array key 0.
    let body = vec![
        call(id::GET_PRANDOM_U32),
        stx(Size::DW, 10, 0, -24),
        stx(Size::DW, 10, 0, -16),
        st(Size::W, 10, -4, 3),
        map_ptr(1, 0),
        movr(2, 10),
        alu64(AluOp::Add, 2, -4),
        movr(3, 10),
        alu64(AluOp::Add, 3, -24),
        mov(4, 0),
        call(id::MAP_UPDATE_ELEM),
        map_value(1, 1, 8),
        ldx(Size::DW, 0, 10, -16),
        stx(Size::DW, 1, 0, 0),
    ];
    let mut img = Image::from_insns(
        "p",
        ProgType::Xdp,
        nfkit_isa::decode_program(&assemble(body, vec![])).expect("decodes"),
    );
    img.maps = maps();
    let vm = Vm::new(&img, config(Setup::KernelXdp, Engine::Jit)).expect("loads");
    let initial = map_states(&vm);
    let frame = common::udp_frame(60);
    let run = |seed: u64| {
        let opts = RunOptions {
            rng: Some(Arc::new(SeqRng::new(seed))),
            ..RunOptions::default()
        };
        let res = vm.run(0, Context::Xdp(XdpMd::new(&frame)), &opts);
        let out = outcome(&vm, &res);
        restore_maps(&vm, &initial);
        out
    };
    let a = run(0x1234_5678_9abc);
    assert_ne!(
        a.after.as_ref().map(|x| &x.maps),
        Some(&initial),
        "the run changed the maps"
    );
    assert_eq!(map_states(&vm), initial, "the maps are back as they were");
    assert_eq!(
        run(0x1234_5678_9abc),
        a,
        "the same inputs give the same outcome"
    );
    assert_ne!(
        run(0xdead_beef_cafe),
        a,
        "another random number gives another outcome"
    );
    let mut stats = Stats::default();
    let case: Case = (assemble(vec![mov(0, 2)], vec![]), frame.clone(), 0);
    check_case(&case, &mut stats).expect("agrees");
    assert_eq!((stats.accepted, stats.refused), (2, 0));
}

//! Interpreter speed: nfkit's VM against the `rbpf` crate's interpreter on
//! the same programs and packets, per packet and per executed
//! instruction.
//!
//! Programs (in `benches/common`, shared with the `engines` bench;
//! assembled by nfkit-isa, run unchanged by both engines except for how
//! the parser finds the packet):
//! * `parser`: an XDP-style Ethernet/IPv4/UDP-TCP parser that drops four
//!   destination ports (like `corpus/xdp_port_filter`, without maps);
//!   nfkit runs it on an `xdp_md` context (32-bit `data`/`data_end` loads),
//!   rbpf on its metadata-buffer form (64-bit loads of the same fields).
//! * `alu_loop`: 1000 rounds of xorshift mixing (ALU and a backward jump).
//! * `mem_sum`: 16-bit one's-complement sum of a 1024-byte buffer with a
//!   stack round trip per word (loads and stores).
//! * `exit_only`: `r0 = 2; exit` on a 64-byte XDP frame: the fixed cost
//!   of one run (context and packet set up, result collected).
//!
//! nfkit runs each program two ways: `nfkit` is `Runner::run` (a full
//! `RunResult`, the packet copied out into fresh `Vec`s), `inplace` is
//! `Runner::run_packet` on the caller's buffer (no allocation, the
//! packet written back only when the program may have changed it).
//!
//! nfkit also runs the clang-built `corpus/xdp_port_filter` (maps and
//! helpers, which rbpf lacks). After criterion's own report the run
//! prints a summary table: ns per packet for both, their ratio, and ns
//! per executed instruction.

use criterion::{black_box, Criterion};
use nfkit_object::{Image, ProgType};
use nfkit_vm::{Context, PacketCtx, RunOptions, Runner, Vm, VmConfig, XdpMd};
use std::time::{Duration, Instant};

mod common;

use common::*;

/// The options of every timed run (made once, as a caller would).
static OPTS: std::sync::LazyLock<RunOptions> = std::sync::LazyLock::new(RunOptions::default);

/// How one engine runs one program on one packet.
enum Engine<'a> {
    Nfkit {
        runner: Runner,
        xdp: bool,
    },
    /// `run_packet` on the engine's own copies of the case's packets,
    /// taken in turn (the caller's mutable buffers).
    NfkitPkt {
        runner: Runner,
        xdp: bool,
        bufs: Vec<Vec<u8>>,
        next: usize,
    },
    Rbpf {
        vm: rbpf::EbpfVmMbuff<'a>,
        mbuff: bool,
    },
}

impl Engine<'_> {
    fn run(&mut self, packet: &[u8]) -> u64 {
        match self {
            Engine::Nfkit { runner, xdp } => {
                let ctx = if *xdp {
                    Context::Xdp(XdpMd::new(packet))
                } else {
                    Context::Raw(packet)
                };
                runner.run(0usize, ctx, &OPTS).r0().unwrap_or(u64::MAX)
            }
            Engine::NfkitPkt {
                runner,
                xdp,
                bufs,
                next,
            } => {
                let ctx = if *xdp { PacketCtx::Xdp } else { PacketCtx::Raw };
                let i = *next;
                *next = (i + 1) % bufs.len();
                let buf = &mut bufs[i];
                debug_assert_eq!(buf.len(), packet.len());
                runner
                    .run_packet(0usize, buf, ctx, &OPTS)
                    .r0()
                    .unwrap_or(u64::MAX)
            }
            Engine::Rbpf { vm, mbuff } => {
                let mut meta = [0u8; 16];
                if *mbuff {
                    let start = packet.as_ptr() as u64;
                    meta[..8].copy_from_slice(&start.to_le_bytes());
                    meta[8..].copy_from_slice(&(start + packet.len() as u64).to_le_bytes());
                    vm.execute_program(packet, &meta).unwrap_or(u64::MAX)
                } else {
                    vm.execute_program(packet, &[]).unwrap_or(u64::MAX)
                }
            }
        }
    }
}

fn nfkit_vm(insns: Vec<nfkit_isa::Insn>, t: ProgType) -> Runner {
    let config = VmConfig {
        budget: u64::MAX,
        ..VmConfig::default()
    };
    Vm::new(&Image::from_insns("bench", t, insns), config)
        .expect("nfkit loads the bench program")
        .runner()
}

/// One benchmark: a program, its packets, and the engines that run it.
struct Case<'a> {
    name: &'static str,
    packets: Vec<Vec<u8>>,
    nfkit: Engine<'a>,
    /// nfkit's `run_packet` (made from `nfkit` by `with_pkt`).
    pkt: Option<Engine<'a>>,
    rbpf: Option<Engine<'a>>,
    /// Instructions nfkit executes per pass over `packets`.
    insns: u64,
}

/// Mean ns per packet of `engine` over `packets`, best of several
/// batches of about 50 ms.
fn time_per_packet(engine: &mut Engine, packets: &[Vec<u8>]) -> f64 {
    let mut reps = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..reps {
            for p in packets {
                black_box(engine.run(black_box(p)));
            }
        }
        if t.elapsed() > Duration::from_millis(50) {
            break;
        }
        reps *= 2;
    }
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..reps {
            for p in packets {
                black_box(engine.run(black_box(p)));
            }
        }
        let ns = t.elapsed().as_nanos() as f64 / (reps * packets.len() as u64) as f64;
        best = best.min(ns);
    }
    best
}

/// Leaks `v`: rbpf's VM borrows its program for the whole run.
fn leak(v: Vec<u8>) -> &'static [u8] {
    Box::leak(v.into_boxed_slice())
}

/// rbpf's interpreter on `bytes`.
fn rbpf_vm(bytes: &'static [u8]) -> rbpf::EbpfVmMbuff<'static> {
    rbpf::EbpfVmMbuff::new(Some(bytes)).expect("rbpf loads")
}

/// The three assembled programs, each for both engines.
fn asm_cases() -> Vec<Case<'static>> {
    let parser_nfkit = asm(&PARSER.replace("{CTX}", NFKIT_CTX));
    let parser_rbpf = nfkit_isa::encode_bytes(&asm(&PARSER.replace("{CTX}", RBPF_CTX)));
    let alu = asm(ALU_LOOP);
    let alu_bytes = nfkit_isa::encode_bytes(&alu);
    let mem = asm(MEM_SUM);
    let mem_bytes = nfkit_isa::encode_bytes(&mem);
    let mem_packets: Vec<Vec<u8>> = (0..4)
        .map(|k| (0..1024).map(|i| (i * 7 + k) as u8).collect())
        .collect();
    vec![
        Case {
            name: "parser",
            packets: parser_packets(),
            nfkit: Engine::Nfkit {
                runner: nfkit_vm(parser_nfkit, ProgType::Xdp),
                xdp: true,
            },
            rbpf: Some(Engine::Rbpf {
                vm: rbpf_vm(leak(parser_rbpf)),
                mbuff: true,
            }),
            insns: 0,
            pkt: None,
        },
        Case {
            name: "exit_only",
            packets: vec![vec![0u8; 64]],
            nfkit: Engine::Nfkit {
                runner: nfkit_vm(asm(EXIT_ONLY), ProgType::Xdp),
                xdp: true,
            },
            rbpf: Some(Engine::Rbpf {
                vm: rbpf_vm(leak(nfkit_isa::encode_bytes(&asm(EXIT_ONLY)))),
                mbuff: false,
            }),
            insns: 0,
            pkt: None,
        },
        Case {
            name: "alu_loop",
            packets: vec![vec![0u8; 64]],
            nfkit: Engine::Nfkit {
                runner: nfkit_vm(alu, ProgType::Unspec),
                xdp: false,
            },
            rbpf: Some(Engine::Rbpf {
                vm: rbpf_vm(leak(alu_bytes)),
                mbuff: false,
            }),
            insns: 0,
            pkt: None,
        },
        Case {
            name: "mem_sum",
            packets: mem_packets,
            nfkit: Engine::Nfkit {
                runner: nfkit_vm(mem, ProgType::Unspec),
                xdp: false,
            },
            rbpf: Some(Engine::Rbpf {
                vm: rbpf_vm(leak(mem_bytes)),
                mbuff: false,
            }),
            insns: 0,
            pkt: None,
        },
    ]
}

/// The clang-built `corpus/xdp_port_filter` on nfkit only (its map
/// filled with the four blocked ports), if the corpus has it.
fn corpus_case() -> Option<Case<'static>> {
    let e = nfkit_corpus::get("xdp_port_filter")?;
    let image = Image::from_elf(e.object, e.name).expect("corpus object links");
    let vm = Vm::new(&image, VmConfig::kernel()).expect("corpus program loads");
    let blocked = vm.map("blocked_ports").expect("map");
    for port in [22u16, 23, 445, 3389] {
        blocked
            .update(&port.to_be_bytes(), &0u64.to_le_bytes(), 0)
            .expect("insert");
    }
    Some(Case {
        name: "xdp_port_filter.o",
        packets: parser_packets(),
        nfkit: Engine::Nfkit {
            runner: vm.runner(),
            xdp: true,
        },
        rbpf: None,
        insns: 0,
        pkt: None,
    })
}

/// Adds the `run_packet` engine to every case: a second runner of the
/// same VM, with its own copies of the packets.
fn with_pkt(cases: &mut [Case]) {
    for case in cases {
        if let Engine::Nfkit { runner, xdp } = &case.nfkit {
            case.pkt = Some(Engine::NfkitPkt {
                runner: runner.vm().runner(),
                xdp: *xdp,
                bufs: case.packets.clone(),
                next: 0,
            });
        }
    }
}

/// Both engines must agree before their speed means anything; counts the
/// instructions nfkit executes into `case.insns`.
fn check_and_count(cases: &mut [Case]) {
    for case in cases {
        for p in &case.packets {
            let ours = case.nfkit.run(p);
            assert_ne!(ours, u64::MAX, "{}: nfkit failed", case.name);
            if let Some(r) = &mut case.rbpf {
                assert_eq!(ours, r.run(p), "{}: engines disagree", case.name);
            }
            if let Some(r) = &mut case.pkt {
                assert_eq!(ours, r.run(p), "{}: run_packet disagrees", case.name);
            }
            if let Engine::Nfkit { runner, xdp } = &mut case.nfkit {
                let ctx = if *xdp {
                    Context::Xdp(XdpMd::new(p))
                } else {
                    Context::Raw(p)
                };
                case.insns += runner.run(0usize, ctx, &RunOptions::default()).insns;
            }
        }
    }
}

/// Instruction-count mode for before/after comparisons on a loaded
/// machine (`valgrind --tool=cachegrind`): NFKIT_BENCH_PASSES=N runs N
/// passes of the cases matching NFKIT_BENCH_ONLY (`case/engine`
/// substring) and nothing else. False if NFKIT_BENCH_PASSES is not set.
fn passes_mode(cases: &mut [Case]) -> bool {
    let Ok(n) = std::env::var("NFKIT_BENCH_PASSES") else {
        return false;
    };
    let n: u64 = n.parse().expect("NFKIT_BENCH_PASSES is a number");
    let only = std::env::var("NFKIT_BENCH_ONLY").unwrap_or_default();
    for case in cases {
        let packets = &case.packets;
        if format!("{}/nfkit", case.name).contains(&only) {
            for _ in 0..n {
                for p in packets {
                    black_box(case.nfkit.run(black_box(p)));
                }
            }
        }
        if let Some(r) = &mut case.pkt {
            if format!("{}/inplace", case.name).contains(&only) {
                for _ in 0..n {
                    for p in packets {
                        black_box(r.run(black_box(p)));
                    }
                }
            }
        }
        if let Some(r) = &mut case.rbpf {
            if format!("{}/rbpf", case.name).contains(&only) {
                for _ in 0..n {
                    for p in packets {
                        black_box(r.run(black_box(p)));
                    }
                }
            }
        }
    }
    true
}

/// Criterion: one group per case, `nfkit` and `rbpf` in it.
fn run_criterion(cases: &mut [Case]) {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    for case in cases {
        let mut g = c.benchmark_group(case.name);
        let packets = &case.packets;
        g.bench_function("nfkit", |b| {
            b.iter(|| {
                for p in packets {
                    black_box(case.nfkit.run(black_box(p)));
                }
            })
        });
        if let Some(r) = &mut case.pkt {
            g.bench_function("inplace", |b| {
                b.iter(|| {
                    for p in packets {
                        black_box(r.run(black_box(p)));
                    }
                })
            });
        }
        if let Some(r) = &mut case.rbpf {
            g.bench_function("rbpf", |b| {
                b.iter(|| {
                    for p in packets {
                        black_box(r.run(black_box(p)));
                    }
                })
            });
        }
        g.finish();
    }
    c.final_summary();
}

/// The summary table: ns per packet of nfkit (`run` and `run_packet`)
/// and rbpf, rbpf's time over nfkit's, and ns per executed instruction.
fn print_summary(cases: &mut [Case]) {
    println!();
    println!("nfkit vs rbpf interpreter, per packet (best of 7 batches of about 50 ms)");
    println!(
        "{:<18} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "program",
        "insns",
        "run ns",
        "pkt ns",
        "rbpf ns",
        "rbpf/run",
        "rbpf/pkt",
        "pkt ns/i",
        "rbpf ns/i"
    );
    for case in cases {
        let n = case.packets.len() as f64;
        let insns = case.insns as f64 / n;
        let ours = time_per_packet(&mut case.nfkit, &case.packets);
        let pkt = case
            .pkt
            .as_mut()
            .map_or(ours, |e| time_per_packet(e, &case.packets));
        let theirs = case
            .rbpf
            .as_mut()
            .map(|r| time_per_packet(r, &case.packets));
        let cell = |v: Option<f64>, prec: usize| {
            v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
        };
        println!(
            "{:<18} {:>8.1} {:>10.1} {:>10.1} {:>10} {:>10} {:>10} {:>10.2} {:>10}",
            case.name,
            insns,
            ours,
            pkt,
            cell(theirs, 1),
            cell(theirs.map(|t| t / ours), 2),
            cell(theirs.map(|t| t / pkt), 2),
            pkt / insns,
            cell(theirs.map(|t| t / insns), 2),
        );
    }
}

fn main() {
    let mut cases = asm_cases();
    cases.extend(corpus_case());
    with_pkt(&mut cases);
    check_and_count(&mut cases);
    if passes_mode(&mut cases) {
        return;
    }
    run_criterion(&mut cases);
    print_summary(&mut cases);
}

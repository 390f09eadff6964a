//! `make rtl-bench` (also part of `make bench`): the RTL core's figures,
//! measured on the Verilated model. Per workload: packets (or programs),
//! cycles per packet, CPI, stall cycles by cause, taken-branch flushes,
//! and packets per second per engine at eBPFlow's published clock
//! (166.67 MHz; this core's own clock is not estimated yet). With
//! `NFKIT_RTL_SYNTH=1` (what `make rtl-bench` sets) also one engine's
//! resources from Yosys `synth_xilinx` beside eBPFlow's. The table is
//! printed and written to `target/nfkit-bench/rtl.md`.

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_isa::{CallKind, Insn};
use nfkit_object::{Image, ProgType};
use nfkit_rtl::{Core, Ctx, Program, RunInput, RunResult};
use std::fmt::Write as _;

const REFLECT: &str = include_str!("../tests/progs/xdp_reflect.s");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/bpf_conformance/tests"
);
const OUT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/nfkit-bench");
/// eBPFlow's maximum frequency on the NetFPGA SUME (Virtex-7 690T).
const EBPFLOW_MHZ: f64 = 166.67;

#[derive(Default)]
struct Sum {
    runs: u64,
    cycles: u64,
    retired: u64,
    load_use: u64,
    div: u64,
    call: u64,
    rx: u64,
    flushes: u64,
}

impl Sum {
    fn add(&mut self, r: &RunResult) {
        self.runs += 1;
        self.cycles += r.cycles;
        self.retired += r.retired;
        self.load_use += r.stalls.load_use;
        self.div += r.stalls.div;
        self.call += r.stalls.call;
        self.rx += r.stalls.rx;
        self.flushes += r.stalls.flushes;
    }
    fn row(&self, name: &str) -> String {
        let per = self.cycles as f64 / self.runs.max(1) as f64;
        format!(
            "| {name} | {} | {:.1} | {:.3} | {} | {} | {} | {} | {} | {:.2} |",
            self.runs,
            per,
            self.cycles as f64 / self.retired.max(1) as f64,
            self.load_use,
            self.div,
            self.call,
            self.rx,
            self.flushes,
            EBPFLOW_MHZ / per
        )
    }
}

fn reflector_rows(out: &mut String) {
    let insns = assemble(REFLECT, Some(Syntax::Llvm)).expect("reflector assembles");
    let image = Image::from_insns("xdp_reflect", ProgType::Xdp, insns);
    let prog = Program::from_image(&image, 0).expect("reflector within the subset");
    let mut core = match Core::new(prog) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(out, "| xdp_reflect | {e} | | | | | | | | |");
            return;
        }
    };
    let mut names: Vec<_> = std::fs::read_dir(EXAMPLES)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.retain(|p: &std::path::PathBuf| {
        let s = p.to_string_lossy();
        s.ends_with(".pcap") && !s.ends_with(".out.pcap")
    });
    names.sort();
    let (mut all, mut streamed) = (Sum::default(), Sum::default());
    for path in names {
        let Ok(packets) = nfkit_pcap::read_file(&path) else {
            continue;
        };
        let mut sum = Sum::default();
        for p in &packets {
            let mut input = RunInput::new(&p.data);
            input.ctx = Ctx::Xdp {
                ingress_ifindex: 1,
                rx_queue_index: 0,
            };
            input.timestamp = p.ts_ns;
            if let Ok(r) = core.run(&input) {
                sum.add(&r);
                all.add(&r);
            }
            input.stream = true;
            if let Ok(r) = core.run(&input) {
                streamed.add(&r);
            }
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(out, "{}", sum.row(&format!("xdp_reflect on {stem}.pcap")));
    }
    let _ = writeln!(out, "{}", all.row("xdp_reflect, all captures"));
    let _ = writeln!(
        out,
        "{}",
        streamed.row("xdp_reflect, all captures, packets streamed in")
    );
}

fn conformance_rows(out: &mut String) {
    let Ok(dir) = std::fs::read_dir(SUITE) else {
        return;
    };
    let mut files: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let (mut with_div, mut without_div) = (Sum::default(), Sum::default());
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let (mut asm, mut mem, mut section) = (String::new(), Vec::new(), "");
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("-- ") {
                section = if name.trim() == "asm" {
                    "asm"
                } else if name.trim() == "mem" {
                    "mem"
                } else {
                    ""
                };
                continue;
            }
            match section {
                "asm" => {
                    asm.push_str(line);
                    asm.push('\n');
                }
                "mem" => mem.extend(
                    line.split_whitespace()
                        .filter_map(|t| u8::from_str_radix(t, 16).ok()),
                ),
                _ => {}
            }
        }
        let Ok(insns) = assemble(&asm, Some(Syntax::Conformance)) else {
            continue;
        };
        if insns.iter().any(|i| {
            matches!(
                i,
                Insn::Call {
                    kind: CallKind::Helper,
                    ..
                }
            )
        }) {
            continue;
        }
        let Ok(prog) = Program::from_insns("c", &insns) else {
            continue;
        };
        let Ok(mut core) = Core::new(prog) else {
            return;
        };
        let mut input = RunInput::new(&mem);
        input.max_cycles = 100_000;
        let Ok(r) = core.run(&input) else { continue };
        if r.result.is_err() {
            continue;
        }
        if r.stalls.div > 0 {
            with_div.add(&r);
        } else {
            without_div.add(&r);
        }
    }
    let _ = writeln!(
        out,
        "{}",
        without_div.row("conformance programs without division")
    );
    let _ = writeln!(
        out,
        "{}",
        with_div.row("conformance programs with division")
    );
}

fn synth_rows(out: &mut String) {
    let _ = writeln!(out, "\nOne engine, Yosys `synth_xilinx` (7-series), beside eBPFlow (whole NetFPGA SUME design, Virtex-7 690T):\n");
    match nfkit_rtl::synth::synth_xilinx() {
        Ok(r) => {
            let _ = writeln!(out, "| resource | nfkit engine | eBPFlow (published) |");
            let _ = writeln!(out, "|---|---|---|");
            let _ = writeln!(
                out,
                "| LUTs | {} | 20.71% of slices (~22,400 slices) |",
                r.luts()
            );
            let _ = writeln!(
                out,
                "| flip-flops | {} | 11.35% of registers (~98,300) |",
                r.ffs()
            );
            let _ = writeln!(out, "| block RAM (36 Kb) | {} | n/a |", r.bram36());
            let _ = writeln!(out, "| DSP48 | {} | n/a |", r.dsps());
            let _ = writeln!(
                out,
                "| clock | not estimated (no open 7-series P&R) | 166.67 MHz |"
            );
        }
        Err(e) => {
            let _ = writeln!(out, "synthesis not run: {e}");
        }
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing
    // special: either way run once, quickly.
    let mut out = String::new();
    let _ = writeln!(out, "## RTL core (nfkit-rtl, Verilator model)\n");
    let _ = writeln!(
        out,
        "| workload | runs | cycles/run | CPI | load-use stalls | divide stalls | call stalls | packet waits | taken branches | Mpps/engine at {EBPFLOW_MHZ} MHz |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    reflector_rows(&mut out);
    conformance_rows(&mut out);
    if std::env::var_os("NFKIT_RTL_SYNTH").is_some_and(|v| v != "0") {
        synth_rows(&mut out);
    }
    print!("{out}");
    if std::fs::create_dir_all(OUT).is_ok() {
        let _ = std::fs::write(format!("{OUT}/rtl.md"), &out);
    }
}

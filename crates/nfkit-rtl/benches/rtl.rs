//! `make rtl-bench` (also part of `make bench`): the RTL core's figures,
//! measured on the Verilated model. Per workload: packets (or programs),
//! cycles per packet, CPI, stall cycles by cause, mispredicted-branch
//! bubbles, and packets per second per engine at eBPFlow's published
//! clock (166.67 MHz). With `NFKIT_RTL_SYNTH=1` (what `make rtl-bench`
//! sets) also one engine's resources and clock estimate from Yosys
//! `synth_xilinx` + `sta` beside eBPFlow's, and packets per second per
//! engine at that estimated clock. Then the
//! coprocessor's cycles per map operation by map kind and key size,
//! beside eBPFlow's (lookup 13, update 19-33). The tables are printed and
//! written to `target/nfkit-bench/rtl.md`.

#[path = "../tests/common/catalogue.rs"]
mod catalogue;

use nfkit_isa::asm::{assemble, Syntax};
use nfkit_isa::{CallKind, Insn};
use nfkit_object::{Image, MapKind, MapSpec, MapType, ProgType};
use nfkit_rtl::{Core, Ctx, Program, RunInput, RunResult};
use std::fmt::Write as _;

const REFLECT: &str = include_str!("../tests/progs/xdp_reflect.s");
const MAPS: &str = include_str!("../tests/progs/maps.s");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/bpf_conformance/tests"
);
/// eBPFlow's maximum frequency on the NetFPGA SUME (Virtex-7 690T).
const EBPFLOW_MHZ: f64 = 166.67;
/// This engine's estimated clock (MHz), when synthesis ran.
static OUR_MHZ: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

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
    fn merge(&mut self, o: &Sum) {
        self.runs += o.runs;
        self.cycles += o.cycles;
        self.retired += o.retired;
        self.load_use += o.load_use;
        self.div += o.div;
        self.call += o.call;
        self.rx += o.rx;
        self.flushes += o.flushes;
    }
    fn row(&self, name: &str) -> String {
        let per = self.cycles as f64 / self.runs.max(1) as f64;
        format!(
            "| {name} | {} | {:.1} | {:.3} | {} | {} | {} | {} | {} | {:.2} | {} |",
            self.runs,
            per,
            self.cycles as f64 / self.retired.max(1) as f64,
            self.load_use,
            self.div,
            self.call,
            self.rx,
            self.flushes,
            EBPFLOW_MHZ / per,
            OUR_MHZ
                .get()
                .map_or("n/a".to_string(), |mhz| format!("{:.2}", mhz / per))
        )
    }
}

fn reflector_rows(out: &mut String) {
    let insns = assemble(REFLECT, Some(Syntax::Llvm)).expect("reflector assembles");
    let image = Image::from_insns("xdp_reflect", ProgType::Xdp, insns);
    let prog = Program::from_image(&image, 0).expect("reflector within the subset");
    for stream in [false, true] {
        let label = if stream {
            "xdp_reflect, all captures, packets streamed in"
        } else {
            "xdp_reflect"
        };
        capture_rows(out, label, &prog, !stream, stream);
    }
}

/// The example captures (not the `.out.pcap` files), sorted.
fn captures() -> Vec<std::path::PathBuf> {
    let mut names: Vec<_> = std::fs::read_dir(EXAMPLES)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.retain(|p: &std::path::PathBuf| {
        let s = p.to_string_lossy();
        s.ends_with(".pcap") && !s.ends_with(".out.pcap")
    });
    names.sort();
    names
}

/// Rows of one program on the example captures, a fresh engine per
/// capture and the packets streamed in when `stream`: a row per capture
/// when `per_capture`, then the total (`{label}, all captures`, or
/// `label` itself when streamed); the total's sums. Runs that fault are
/// left out.
fn capture_rows(
    out: &mut String,
    label: &str,
    prog: &Program,
    per_capture: bool,
    stream: bool,
) -> Option<Sum> {
    let mut all = Sum::default();
    for path in captures() {
        let Ok(packets) = nfkit_pcap::read_file(&path) else {
            continue;
        };
        let mut core = match Core::new(prog.clone()) {
            Ok(c) => c,
            Err(e) => {
                let _ = writeln!(out, "| {label} | {e} | | | | | | | | |");
                return None;
            }
        };
        let mut sum = Sum::default();
        for p in &packets {
            let mut input = RunInput::new(&p.data);
            input.ctx = Ctx::Xdp {
                ingress_ifindex: 1,
                rx_queue_index: 0,
            };
            input.timestamp = p.ts_ns;
            input.stream = stream;
            if let Ok(r) = core.run(&input) {
                if r.result.is_ok() {
                    sum.add(&r);
                    all.add(&r);
                }
            }
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if per_capture {
            let _ = writeln!(out, "{}", sum.row(&format!("{label} on {stem}.pcap")));
        }
    }
    let total = if stream {
        label.to_string()
    } else {
        format!("{label}, all captures")
    };
    let _ = writeln!(out, "{}", all.row(&total));
    Some(all)
}

/// The DDoS chain (`examples/ddos.py`, static XDP build) on each example
/// capture, a fresh engine per capture (tables sized to 128 lines); then
/// each catalogue NF in a one-NF static chain on all captures.
fn chain_rows(out: &mut String) {
    let src = match std::fs::read_to_string(format!("{EXAMPLES}/ddos.py")) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(out, "| ddos.py | {e} | | | | | | | | |");
            return;
        }
    };
    script_rows(out, "ddos.py chain", &src, true);
    let mut nfs = Sum::default();
    for &(module, func, args, verdict) in catalogue::NFS {
        let src = catalogue::nf_script(module, func, args, verdict);
        if let Some(sum) = script_rows(out, &format!("NF {module}.{func}"), &src, false) {
            nfs.merge(&sum);
        }
    }
    let _ = writeln!(
        out,
        "{}",
        nfs.row(&format!(
            "the {} catalogue NFs, all captures",
            catalogue::NFS.len()
        ))
    );
}

/// Rows of one script on the example captures (`per_capture`: a row
/// each, else only the total); the total's sums.
fn script_rows(out: &mut String, label: &str, src: &str, per_capture: bool) -> Option<Sum> {
    let compiled = match nfkit_lang::compile("chain.py", src, &nfkit_lang::Options::default()) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(out, "| {label} | {e} | | | | | | | | |");
            return None;
        }
    };
    let name = compiled.entry().unwrap_or_default().to_string();
    let image = compiled.image;
    let entry = image.entries.iter().position(|e| e.name == name)?;
    let prog = match Program::from_image_sized(&image, entry, Some(128)) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(out, "| {label} | {e} | | | | | | | | |");
            return None;
        }
    };
    capture_rows(out, label, &prog, per_capture, false)
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

/// The map program of the tests (byte 0 the operation, byte 1 the map,
/// bytes 8.. the key, 32.. the value) on its four maps: cycles of each
/// operation, averaged over 64 keys.
fn map_rows(out: &mut String, workloads: &mut String) {
    let maps: [(&str, MapType, u32, u32); 4] = [
        (
            "exact match, 16-byte key, 24-byte value",
            MapType::Hash,
            16,
            24,
        ),
        ("LPM, 16-byte data, 8-byte value", MapType::LpmTrie, 20, 8),
        ("array, 16-byte value", MapType::Array, 4, 16),
        (
            "LPM, 4-byte data (IPv4), 8-byte value",
            MapType::LpmTrie,
            8,
            8,
        ),
    ];
    let Ok(insns) = assemble(MAPS, Some(Syntax::Llvm)) else {
        return;
    };
    let mut image = Image::from_insns("maps", ProgType::Xdp, insns);
    image.maps = maps
        .iter()
        .map(|&(name, map_type, key_size, value_size)| MapSpec {
            name: name.to_string(),
            kind: MapKind::Declared,
            map_type,
            key_size,
            value_size,
            max_entries: 128,
            flags: u32::from(map_type == MapType::LpmTrie),
            key_type_id: None,
            value_type_id: None,
            data: None,
            pin_by_name: false,
            inner: None,
        })
        .collect();
    let Ok(prog) = Program::from_image(&image, 0) else {
        return;
    };
    let Ok(mut core) = Core::new(prog) else {
        return;
    };
    let _ = writeln!(
        out,
        "\nCoprocessor cycles per map operation (request to answer; the call waits one cycle more in EXE, for the registered answer), beside eBPFlow (8-byte keys, 32 lines):\n"
    );
    let _ = writeln!(
        out,
        "| map | lookup (hit) | lookup (miss) | update (insert) | update (overwrite) | delete |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let mut all = Sum::default();
    for (m, (name, t, ..)) in maps.iter().enumerate() {
        // op, per op: (cycles, ops)
        let mut acc = [(0u64, 0u64); 5];
        let mut run = |op: u8, k: u32, slot: usize, acc: &mut [(u64, u64); 5]| {
            let mut p = vec![0u8; 64];
            p[0] = op;
            p[1] = m as u8;
            if *t == MapType::LpmTrie {
                p[8..12].copy_from_slice(&24u32.to_le_bytes());
                p[12..16].copy_from_slice(&(k << 8).to_be_bytes());
            } else {
                p[8..12].copy_from_slice(&k.to_le_bytes());
            }
            let mut input = RunInput::new(&p);
            input.ctx = Ctx::Xdp {
                ingress_ifindex: 1,
                rx_queue_index: 0,
            };
            if let Ok(r) = core.run(&input) {
                let i = op as usize;
                acc[slot].0 += r.map_cycles[i];
                acc[slot].1 += r.map_ops[i];
                all.add(&r);
            }
        };
        for k in 0..64 {
            run(0, 1000 + k, 1, &mut acc); // miss
            run(1, k, 2, &mut acc); // insert (arrays: write)
            run(1, k, 3, &mut acc); // overwrite
            run(0, k, 0, &mut acc); // hit
            if *t != MapType::Array {
                run(2, k, 4, &mut acc);
            }
        }
        let cell = |(c, n): (u64, u64)| {
            if n == 0 {
                "n/a".to_string()
            } else {
                format!("{:.1}", c as f64 / n as f64)
            }
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} |",
            cell(acc[0]),
            cell(acc[1]),
            cell(acc[2]),
            cell(acc[3]),
            cell(acc[4])
        );
    }
    let _ = writeln!(
        out,
        "| eBPFlow (published) | 13 | 13 | 19-33 | 19-33 | n/a |"
    );
    let _ = writeln!(workloads, "{}", all.row("map calls (tests/progs/maps.s)"));
}

fn synth_rows(
    out: &mut String,
    synth: &Result<nfkit_rtl::synth::SynthReport, nfkit_rtl::RtlError>,
) {
    let _ = writeln!(out, "\nOne engine, Yosys `synth_xilinx` (7-series), beside eBPFlow (whole NetFPGA SUME design, Virtex-7 690T):\n");
    match synth {
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
            match &r.timing {
                Some(t) => {
                    let _ = writeln!(
                        out,
                        "| clock | {:.1} MHz estimated ({:.2} ns: {:.2} ns of cells on the critical path + {} nets x {:.1} ns; {:.1} MHz with ideal wires) | 166.67 MHz (placed and routed) |",
                        t.clock_mhz(),
                        t.period_ps() as f64 / 1000.0,
                        t.logic_ps as f64 / 1000.0,
                        t.nets,
                        nfkit_rtl::synth::NET_PS as f64 / 1000.0,
                        t.logic_only_mhz()
                    );
                    let _ = writeln!(out, "\nCritical path: {}\n", t.cells.join(" > "));
                    let _ = writeln!(out, "Method: {}", nfkit_rtl::synth::CLOCK_METHOD);
                }
                None => {
                    let _ = writeln!(
                        out,
                        "| clock | not estimated (sta gave no path) | 166.67 MHz |"
                    );
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "synthesis not run: {e}");
        }
    }
}

/// The switch top on the reflector: every capture's packets offered at
/// once, spread over `ports` ports with `engines` engines each; packets
/// per switch cycle (FSM, run and output passes included) and the rate
/// at eBPFlow's clock.
fn switch_rows(out: &mut String) {
    use nfkit_rtl::switch::{Switch, PORTS};
    let insns = assemble(REFLECT, Some(Syntax::Llvm)).expect("reflector assembles");
    let image = Image::from_insns("xdp_reflect", ProgType::Xdp, insns);
    let prog = Program::from_image(&image, 0).expect("reflector within the subset");
    let packets: Vec<Vec<u8>> = captures()
        .iter()
        .filter_map(|c| nfkit_pcap::read_file(c).ok())
        .flatten()
        .map(|p| p.data)
        .collect();
    let _ = writeln!(
        out,
        "\n| switch top, xdp_reflect on all captures | packets | switch cycles | packets/cycle | Mpps at {EBPFLOW_MHZ} MHz |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (ports, engines) in [(1, 1), (1, 4), (PORTS, 1), (PORTS, 4)] {
        let Ok(mut sw) = Switch::new(prog.clone()) else {
            let _ = writeln!(out, "| (no switch model) | | | | |");
            return;
        };
        sw.set_engines_per_port(engines).expect("engines per port");
        for (i, p) in packets.iter().enumerate() {
            sw.offer(i % ports, p, 0, 0).expect("the switch takes it");
        }
        let run = sw.run(100_000_000).expect("every packet leaves");
        let ppc = run.packets.len() as f64 / run.cycles.max(1) as f64;
        let _ = writeln!(
            out,
            "| {ports} port(s) × {engines} engine(s) | {} | {} | {ppc:.4} | {:.2} |",
            run.packets.len(),
            run.cycles,
            ppc * EBPFLOW_MHZ
        );
    }
}

/// The switch top on the DDoS chain (maps shared by the engines, tables
/// sized to 128 lines) over examples/ddos.pcap: packets per switch cycle
/// and what the engines waited for the shared coprocessor (call stall
/// cycles per packet; one engine: the coprocessor's own cycles only) and
/// the shared value memory.
fn switch_map_rows(out: &mut String) {
    use nfkit_rtl::switch::{Switch, PORTS};
    let Ok(src) = std::fs::read_to_string(format!("{EXAMPLES}/ddos.py")) else {
        return;
    };
    let Ok(c) = nfkit_lang::compile("ddos.py", &src, &nfkit_lang::Options::default()) else {
        return;
    };
    let Some(entry) = c
        .entry()
        .and_then(|n| c.image.entries.iter().position(|e| e.name == n))
    else {
        return;
    };
    let Ok(prog) = Program::from_image_sized(&c.image, entry, Some(128)) else {
        return;
    };
    let Ok(packets) = nfkit_pcap::read_file(format!("{EXAMPLES}/ddos.pcap")) else {
        return;
    };
    let _ = writeln!(
        out,
        "\n| switch top, ddos.py chain (shared maps) on ddos.pcap | packets | switch cycles | packets/cycle | Mpps at {EBPFLOW_MHZ} MHz | cycles/packet on its engine | call stalls/packet | value-port waits/packet | PASS / DROP / REDIRECT |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for (ports, engines) in [(1, 1), (1, 4), (PORTS, 1), (PORTS, 4)] {
        let Ok(mut sw) = Switch::new(prog.clone()) else {
            let _ = writeln!(out, "| (no switch model) | | | | | | | | |");
            return;
        };
        sw.set_engines_per_port(engines).expect("engines per port");
        for (i, p) in packets.iter().enumerate() {
            sw.offer(i % ports, &p.data, p.ts_ns, 0)
                .expect("the switch takes it");
        }
        let run = sw.run(100_000_000).expect("every packet leaves");
        let n = run.packets.len().max(1) as f64;
        let ppc = run.packets.len() as f64 / run.cycles.max(1) as f64;
        let cyc: u64 = run.packets.iter().map(|p| p.cycles).sum();
        let stall: u64 = run.packets.iter().map(|p| p.stalls.call).sum();
        let vwait: u64 = run.packets.iter().map(|p| p.stalls.values).sum();
        let mut v = [0u64; 5];
        for p in &run.packets {
            if let Ok(r0) = p.result {
                v[(r0 as u32 as usize).min(4)] += 1;
            }
        }
        let _ = writeln!(
            out,
            "| {ports} port(s) × {engines} engine(s) | {} | {} | {ppc:.4} | {:.2} | {:.1} | {:.1} | {:.1} | {} / {} / {} |",
            run.packets.len(),
            run.cycles,
            ppc * EBPFLOW_MHZ,
            cyc as f64 / n,
            stall as f64 / n,
            vwait as f64 / n,
            v[2],
            v[1],
            v[4]
        );
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing
    // special: either way run once, quickly.
    let mut out = String::new();
    let synth = std::env::var_os("NFKIT_RTL_SYNTH")
        .is_some_and(|v| v != "0")
        .then(nfkit_rtl::synth::synth_with_clock);
    if let Some(mhz) = synth
        .as_ref()
        .and_then(|s| s.as_ref().ok())
        .and_then(|r| r.timing.as_ref())
        .map(|t| t.clock_mhz())
    {
        let _ = OUR_MHZ.set(mhz);
    }
    let ours = OUR_MHZ
        .get()
        .map_or("the estimated clock (synthesis not run)".to_string(), |m| {
            format!("the estimated {m:.1} MHz")
        });
    let _ = writeln!(out, "## RTL core (nfkit-rtl, Verilator model)\n");
    let _ = writeln!(
        out,
        "| workload | runs | cycles/run | CPI | load-use stalls | divide stalls | call stalls | packet waits | branch bubbles (mispredicted) | Mpps/engine at {EBPFLOW_MHZ} MHz | Mpps/engine at {ours} |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    reflector_rows(&mut out);
    chain_rows(&mut out);
    conformance_rows(&mut out);
    let mut map_table = String::new();
    map_rows(&mut map_table, &mut out);
    out.push_str(&map_table);
    switch_rows(&mut out);
    switch_map_rows(&mut out);
    if let Some(synth) = &synth {
        synth_rows(&mut out, synth);
    }
    print!("{out}");
    nfkit_corpus::write_bench_report("rtl.md", &out);
}

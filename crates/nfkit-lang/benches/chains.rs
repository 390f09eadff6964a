//! Chain-language speed: compile time of each example script (parse,
//! check, generate, link with its NFs and classifier) and, in the VM, the
//! time and instruction count per packet of each compiled example on its
//! own pcap. A summary table follows criterion's report.

use criterion::{black_box, Criterion};
use nfkit_lang::runner::ScriptVm;
use nfkit_lang::{compile, Options};
use std::path::Path;
use std::time::Instant;

const EXAMPLES: [&str; 5] = [
    "ddos",
    "dscp_dispatch",
    "flow_limiter",
    "tcp_options",
    "port_stats",
];

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut c = Criterion::default().configure_from_args();
    let mut rows = Vec::new();
    for name in EXAMPLES {
        let Ok(src) = std::fs::read_to_string(dir.join(format!("{name}.py"))) else {
            continue;
        };
        let Ok(pk) = nfkit_pcap::read_file(dir.join(format!("{name}.pcap"))) else {
            continue;
        };
        let opts = Options::default();
        c.bench_function(&format!("compile/{name}"), |b| {
            b.iter(|| compile(name, black_box(&src), &opts).map(|c| c.image.insns.len()))
        });
        let Ok(compiled) = compile(name, &src, &opts) else {
            continue;
        };
        // Per packet: the whole pcap once per iteration, fresh maps each time.
        let t0 = Instant::now();
        let mut runs = 0u64;
        let mut insns = 0u64;
        while t0.elapsed().as_millis() < 500 {
            let Ok(mut vm) = ScriptVm::new(&compiled) else {
                break;
            };
            for p in &pk {
                if let Ok((o, _)) = vm.run(&p.data, p.ts_ns, false) {
                    insns += o.insns;
                }
                runs += 1;
            }
        }
        let per_pkt = t0.elapsed().as_nanos() as f64 / runs.max(1) as f64;
        let t1 = Instant::now();
        for _ in 0..20 {
            let _ = black_box(compile(name, &src, &opts));
        }
        let compile_us = t1.elapsed().as_micros() as f64 / 20.0;
        rows.push((
            name,
            src.lines().count(),
            compile_us,
            per_pkt,
            insns as f64 / runs.max(1) as f64,
        ));
    }
    c.final_summary();
    println!(
        "\n{:<15} {:>6} {:>12} {:>14} {:>12}",
        "example", "lines", "compile us", "VM ns/packet", "insns/packet"
    );
    for (n, l, cu, ns, i) in rows {
        println!("{n:<15} {l:>6} {cu:>12.0} {ns:>14.0} {i:>12.1}");
    }
}

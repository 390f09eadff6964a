//! Swap time of authenticated updates (`make bench`; issue 17 item 5):
//! signed code updates alternating two chain scripts sent to a switch
//! while numbered frames flow, with one worker, two workers on two
//! queues and two workers dispatching from one queue, workers at the
//! default nice value and at nice -10, the code sent as source (the
//! switch compiles it) and as a chain object (it only loads it). Per
//! row: the time from publishing the new version to every worker on it
//! (`switch`), from the message received to every worker on it
//! (`total`, the goal: p99 ≤ 20 µs), frames lost (must be 0), and for
//! object updates each stage (verify, decode, check, maps, JIT,
//! prepare, publish, switch). The table goes to standard output and
//! `target/nfkit-bench/switch-swap.md`. NFKIT_BENCH_QUICK=1: fewer
//! updates; NFKIT_SWAP_PRIORITY=N: updates applied at SCHED_FIFO N (0:
//! at the bench thread's own priority; default 1); NFKIT_SWAP_OBJECTS=N:
//! only the object rows, N updates each (the stage-level bench, also
//! what a profiler runs).

use nfkit_lang::Compiled;
use nfkit_switch::port::{Batch, OpenPort, OutFrame, PortError, PortStats, RxQueue, TxQueue};
use nfkit_switch::{Switch, SwitchConfig, UpdateAuth};
use nfkit_update::message::CodeFormat;
use nfkit_update::{Body, Key, KeyRing, Message, Position};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn script(mark: char) -> String {
    format!(
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   Packet.write_u8(46, u8({}))\n\
         \x20   return TX\n\
         every_packet(main)\n",
        mark as u32
    )
}

fn compile(name: &str, source: &str) -> Result<Compiled, String> {
    let opts = nfkit_lang::Options {
        hook: Some(nfkit_abi::Hook::Switch),
        ..nfkit_lang::Options::default()
    };
    nfkit_lang::compile(name, source, &opts).map_err(|e| e.to_string())
}

/// A UDP frame whose payload starts with its number.
fn frame(n: u32) -> [u8; 60] {
    let mut f = [0u8; 60];
    f[12] = 0x08; // IPv4
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17; // UDP
    f[26..30].copy_from_slice(&[10, 1, (n >> 8) as u8, n as u8]);
    f[30..34].copy_from_slice(&[10, 2, 0, 1]);
    f[34..36].copy_from_slice(&(1000 + (n % 7) as u16).to_be_bytes());
    f[36..38].copy_from_slice(&53u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f[42..46].copy_from_slice(&n.to_le_bytes());
    f
}

/// `rate` numbered frames per ms while `on`.
struct Source {
    next: Arc<AtomicU32>,
    on: Arc<AtomicBool>,
    start: Instant,
    rate: u64,
}

impl RxQueue for Source {
    fn recv(&mut self, batch: &mut Batch, _timeout: Duration) -> Result<usize, PortError> {
        batch.len = 0;
        while batch.len < 8 {
            let n = self.next.load(Ordering::SeqCst);
            let due = self.start.elapsed().as_micros() as u64 * self.rate / 1000;
            if !self.on.load(Ordering::SeqCst) || u64::from(n) >= due {
                break;
            }
            if self
                .next
                .compare_exchange(n, n + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                continue;
            }
            let b = &mut batch.frames[batch.len];
            b.clear();
            b.extend_from_slice(&frame(n));
            batch.arrival_ns[batch.len] = 0;
            batch.len += 1;
        }
        Ok(batch.len)
    }
}

/// Counts frames sent.
struct Count(Arc<AtomicU64>);

impl TxQueue for Count {
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError> {
        self.0.fetch_add(frames.len() as u64, Ordering::Relaxed);
        Ok(frames.len())
    }
}

/// Stage names, in the order they happen (µs series in [`Row::stages`]).
const STAGES: [&str; 9] = [
    "verify", "decode", "check", "maps", "jit", "prepare", "publish", "switch", "total",
];

struct Row {
    label: String,
    /// `source` or `object`.
    code: &'static str,
    /// One sorted series per [`STAGES`] entry.
    stages: Vec<Vec<f64>>,
    frames: u64,
    lost: u64,
}

impl Row {
    fn stage(&self, name: &str) -> &[f64] {
        STAGES
            .iter()
            .position(|s| *s == name)
            .map(|i| self.stages[i].as_slice())
            .unwrap_or(&[])
    }
}

/// How code updates carry the code.
#[derive(Clone, Copy, PartialEq)]
enum Carry {
    /// The script's source (the switch compiles it).
    Source,
    /// A chain object (`nfkit compile -o`; the switch only loads it).
    Object,
}

fn object(mark: char) -> Vec<u8> {
    let c = compile(&format!("{mark}.py"), &script(mark)).expect("compile");
    nfkit_lang::chain_object::write(&c, &nfkit_lang::Options::default()).expect("object")
}

fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[(((v.len() - 1) as f64) * p).round() as usize]
}

fn run(
    carry: Carry,
    workers: usize,
    queues: usize,
    nice: Option<i32>,
    rate: u64,
    updates: usize,
) -> Row {
    let next = Arc::new(AtomicU32::new(0));
    let on = Arc::new(AtomicBool::new(true));
    let sent = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let port = OpenPort {
        spec: "live:afpacket".parse().expect("spec"),
        ifindex: 1,
        rx: (0..queues)
            .map(|_| {
                Box::new(Source {
                    next: Arc::clone(&next),
                    on: Arc::clone(&on),
                    start,
                    rate,
                }) as Box<dyn RxQueue>
            })
            .collect(),
        tx: (0..workers)
            .map(|_| Box::new(Count(Arc::clone(&sent))) as Box<dyn TxQueue>)
            .collect(),
        close: Some(Box::new(|| Ok(PortStats::default()))),
    };
    let key = Key::new(1, [7; 32]).expect("key");
    let cfg = SwitchConfig {
        workers,
        pin: false,
        nice,
        auth: Some(UpdateAuth {
            switch_id: "sw0".into(),
            keys: KeyRing::new([key.clone()]),
        }),
        ..SwitchConfig::default()
    };
    let first = compile("A.py", &script('A')).expect("compile");
    let sw = Switch::start(&first, vec![port], &cfg).expect("start");
    // NFKIT_SWAP_PRIORITY=0: updates applied at the bench thread's own
    // priority (default: SCHED_FIFO 1 where allowed).
    if let Some(p) = std::env::var("NFKIT_SWAP_PRIORITY")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        sw.set_update_priority(p);
    }
    let objects = [object('B'), object('A')];
    let mut stages: Vec<Vec<f64>> = vec![Vec::with_capacity(updates); STAGES.len()];
    for i in 0..updates {
        let mark = if i % 2 == 0 { 'B' } else { 'A' };
        let body = match carry {
            Carry::Source => Body::Code {
                format: CodeFormat::ChainScript,
                name: format!("{mark}.py"),
                bytes: script(mark).into_bytes(),
            },
            Carry::Object => Body::Code {
                format: CodeFormat::Object,
                name: format!("{mark}.o"),
                bytes: objects[i % 2].clone(),
            },
        };
        let m = Message::new("sw0", Position::Pre, i as u64 + 2, body)
            .expect("message")
            .seal(&key)
            .expect("seal");
        let r = sw
            .update(&m, "bench", Instant::now(), &compile)
            .expect("update");
        let st = r.stages;
        let times = [
            r.verify, st.decode, st.check, st.maps, st.jit, st.prepare, st.publish, r.switch,
            r.total,
        ];
        for (series, t) in stages.iter_mut().zip(times) {
            series.push(t.as_secs_f64() * 1e6);
        }
    }
    on.store(false, Ordering::SeqCst);
    let given = u64::from(next.load(Ordering::SeqCst));
    let t = Instant::now();
    while sent.load(Ordering::Relaxed) < given && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    sw.stop();
    drop(sw.finish());
    for v in &mut stages {
        v.sort_by(f64::total_cmp);
    }
    Row {
        code: match carry {
            Carry::Source => "source",
            Carry::Object => "object",
        },
        label: format!(
            "{workers} worker{}, {queues} rx queue{}{}, nice {}",
            if workers > 1 { "s" } else { "" },
            if queues > 1 { "s" } else { "" },
            if queues < workers { " (dispatch)" } else { "" },
            nice.map(|n| n.to_string()).unwrap_or_else(|| "0".into())
        ),
        stages,
        frames: given,
        lost: given.saturating_sub(sent.load(Ordering::Relaxed)),
    }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` does not.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let quick = std::env::var_os("NFKIT_BENCH_QUICK").is_some();
    let objects_only: Option<usize> = std::env::var("NFKIT_SWAP_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok());
    let updates = objects_only.unwrap_or(if quick { 100 } else { 500 });
    let rate = 200; // frames per ms: 0.2 Mpps through the switch
    let mut rows = Vec::new();
    for nice in [None, Some(-10)] {
        for (w, q) in [(1, 1), (2, 2), (2, 1)] {
            for carry in [Carry::Source, Carry::Object] {
                if objects_only.is_some() && carry == Carry::Source {
                    continue;
                }
                rows.push(run(carry, w, q, nice, rate, updates));
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Switch: authenticated update swap time\n\n{updates} signed code updates per row \
         under {rate} numbered frames per ms, code sent as source (compiled by the switch) or \
         as a chain object (only loaded); µs. `total` is message received → every worker on \
         the new version (goal: p99 ≤ 20 µs); `switch` is publish → no frame on the old \
         version. Load average at the end: {}\n\n| configuration | code | switch p50 | \
         switch p99 | switch max | total p50 | total p99 | total max | frames | lost |\n\
         |---|---|---|---|---|---|---|---|---|---|",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for r in &rows {
        let (sw, tot) = (r.stage("switch"), r.stage("total"));
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} | {} | {} |",
            r.label,
            r.code,
            pct(sw, 0.5),
            pct(sw, 0.99),
            pct(sw, 1.0),
            pct(tot, 0.5),
            pct(tot, 0.99),
            pct(tot, 1.0),
            r.frames,
            r.lost
        );
    }
    let _ = writeln!(
        md,
        "\nStages of the object rows, p50 / p99 (µs; `decode` is the ELF and manifest read \
         and the image linked, `check` the VM's checks, `maps` its maps, `jit` native code, \
         `prepare` control-plane writes, runners and the version built, `publish` the store \
         of the version and its epoch):\n\n| configuration | {} |\n|---|{}",
        STAGES.join(" | "),
        "---|".repeat(STAGES.len())
    );
    for r in rows.iter().filter(|r| r.code == "object") {
        let cells: Vec<String> = r
            .stages
            .iter()
            .map(|v| format!("{:.1} / {:.1}", pct(v, 0.5), pct(v, 0.99)))
            .collect();
        let _ = writeln!(md, "| {} | {} |", r.label, cells.join(" | "));
    }
    let source_p50 = |r: &Row| pct(r.stage("total"), 0.5).max(0.1);
    let _ = writeln!(
        md,
        "\ntotal p50, object relative to source: {}",
        rows.chunks(2)
            .filter(|c| c.len() == 2 && c[0].code != c[1].code)
            .map(|c| format!(
                "{}: {:.2}x",
                c[0].label,
                source_p50(&c[1]) / source_p50(&c[0])
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    print!("{md}");
    if objects_only.is_none() {
        nfkit_corpus::write_bench_report("switch-swap.md", &md);
    }
}

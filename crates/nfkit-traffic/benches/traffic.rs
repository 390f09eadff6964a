//! Traffic benchmarks (root; skipped otherwise), one table written to
//! `target/nfkit-bench/traffic.md` and printed:
//! * `send` at full speed per engine, 64-byte and 1514-byte frames
//!   (1500-byte IP packets), into nfkit's XDP counter on the veth peer,
//!   with the live/packet ratio; a 256-frame pcap replayed by the live
//!   engine;
//! * rate accuracy of both engines at 10 kpps, 100 kpps, 1 Mpps and 3 Mpps
//!   (2 s each);
//! * receiver capacity: the live sender at full speed into each
//!   receiver engine (frames counted per second of sending);
//! * kernel forwarding on a three-namespace testbed (sender -> DUT
//!   veth-to-veth -> receiver), measured with the live sender at full
//!   speed into nfkit's XDP counter: native XDP_REDIRECT through a devmap
//!   (`bpf/fwd.c`) and the kernel's IP forwarding (`nfkit_pass` on the
//!   DUT's ingress veth, for the live sender to reach it). Offered and
//!   delivered Mpps, and delivered packets per CPU-second of softirq
//!   time (`/proc/stat`, all CPUs: the DUT's veth NAPI and the
//!   receiver's XDP, both in softirq) and, for XDP, the forwarding
//!   program's own run time (`run_time_ns`).
//!
//! * the switch (issue 16) on the same testbed: `nfkit switch` with
//!   AF_XDP ports on the DUT's two veths and one worker, running a
//!   pass-through chain (every frame to port 2) and the DDoS example
//!   (its PASS to port 2; the single-destination flood is soon
//!   blacklisted, so it measures the chain's drop path), with offered,
//!   processed and delivered Mpps and packets per CPU-second of the
//!   worker thread (`/proc/self/task/*/stat`) and of softirq; and the
//!   switch's per-frame latency p50/p99 (receive ring to transmit ring,
//!   `Switch::latency`), unpaced and paced at 0.3 Mpps.
//!
//! Sender, dataplane and receiver share the machine's two cores, and
//! other work on the machine moves these figures by tens of percent.

use nfkit_kernel::is_root;
use nfkit_kernel::testbed::{Netns, Veth};
use nfkit_traffic::send::Source;
use nfkit_traffic::xdp::{self, attach_pass, enable_run_time_stats, Attached, FWD_OBJECT};
use nfkit_traffic::{
    parse_flows, send, Engine, Receiver, RecvEngine, RecvOptions, RecvReport, SendOptions,
    SendReport,
};
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

fn addr(cidr: &Option<String>) -> String {
    cidr.as_deref()
        .and_then(|c| c.split('/').next())
        .unwrap_or("")
        .to_string()
}

fn mac(ns: &Netns, dev: &str) -> Res<String> {
    let out = ns
        .ip(&["-j", "link", "show", "dev", dev])
        .map_err(err("ip link"))?;
    let v: serde_json::Value = serde_json::from_str(&out).map_err(err("ip -j"))?;
    v[0]["address"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no address of {dev}"))
}

/// Softirq seconds of all CPUs so far (`/proc/stat`, USER_HZ = 100).
fn softirq_s() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(7))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |j| j / 100.0)
}

fn opts(engine: Engine, end: &nfkit_kernel::testbed::VethEnd) -> SendOptions {
    SendOptions {
        engine,
        dev: end.dev.clone(),
        netns: end.netns.clone(),
        seq: true,
        stream: Some(7),
        ..SendOptions::default()
    }
}

fn receiver(engine: RecvEngine, end: &nfkit_kernel::testbed::VethEnd) -> Res<Receiver> {
    Receiver::start(&RecvOptions {
        engine,
        dev: end.dev.clone(),
        netns: end.netns.clone(),
        ..RecvOptions::default()
    })
    .map_err(err("receiver"))
}

/// Waits until `rx` stops counting (200 ms quiet), then stops it.
fn settle(rx: Receiver) -> Res<RecvReport> {
    let (mut last, mut since) = (u64::MAX, Instant::now());
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        let f = rx.snapshot().frames;
        if f != last {
            (last, since) = (f, Instant::now());
        } else if since.elapsed() > Duration::from_millis(200) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    rx.finish().map_err(err("receiver"))
}

fn stamped(r: &RecvReport) -> u64 {
    r.streams.iter().map(|s| s.received).sum()
}

/// Two namespaces and a veth; the peer end (`b`) counts with nfkit's
/// XDP counter or a packet socket.
struct Pair {
    veth: Veth,
    _b: Netns,
    _a: Netns,
}

fn pair(net: u8) -> Res<Pair> {
    let a = Netns::new("tba").map_err(err("netns"))?;
    let b = Netns::new("tbb").map_err(err("netns"))?;
    let veth = Veth::new(
        Some(&a),
        Some(&format!("198.18.{net}.1/24")),
        Some(&b),
        Some(&format!("198.18.{net}.2/24")),
    )
    .map_err(err("veth"))?;
    Ok(Pair { veth, _b: b, _a: a })
}

fn mpps(x: f64) -> String {
    format!("{:.2}", x / 1e6)
}

fn send_speed(t: &mut String, p: &Pair) -> Res<()> {
    let (a, b) = (addr(&p.veth.a.addr), addr(&p.veth.b.addr));
    t.push_str("## send at full speed (into nfkit's XDP counter on the veth peer)\n\n");
    t.push_str("| frame | live Mpps | packet Mpps | live / packet | delivered (live, packet) |\n|---|---|---|---|---|\n");
    for (label, len, n_live, n_packet) in [
        ("64 B", 18usize, 5_000_000u64, 1_000_000u64),
        ("1514 B", 1472, 2_000_000, 500_000),
    ] {
        let flows = Source::Flows(
            parse_flows(&format!("src={a},dst={b},len={len}")).map_err(err("flows"))?,
        );
        let mut rates = Vec::new();
        let mut got = Vec::new();
        for (engine, n) in [(Engine::Live, n_live), (Engine::Packet, n_packet)] {
            let rx = receiver(RecvEngine::Xdp, &p.veth.b)?;
            let r = send(
                &flows,
                &SendOptions {
                    count: Some(n),
                    ..opts(engine, &p.veth.a)
                },
            )
            .map_err(err("send"))?;
            let rep = settle(rx)?;
            rates.push(r.achieved_pps);
            got.push(format!(
                "{:.1} %",
                100.0 * stamped(&rep) as f64 / r.sent.max(1) as f64
            ));
        }
        t.push_str(&format!(
            "| {label} | {} | {} | {:.1}× | {} |\n",
            mpps(rates[0]),
            mpps(rates[1]),
            rates[0] / rates[1].max(1.0),
            got.join(", ")
        ));
    }
    // A pcap: 256 distinct frames replayed in order.
    let frames: Vec<Vec<u8>> = (0..256u32)
        .map(|i| {
            nfkit_traffic::build(&nfkit_traffic::FrameSpec {
                src_mac: nfkit_traffic::Mac([2, 0, 0, 0, 0, 1]),
                dst_mac: nfkit_traffic::Mac::BROADCAST,
                src: a.parse().map_err(err("addr"))?,
                dst: b.parse().map_err(err("addr"))?,
                proto: nfkit_traffic::Proto::Udp,
                sport: 1000 + i as u16,
                dport: 9,
                ttl: 64,
                tos: 0,
                payload: vec![0; 18 + (i as usize % 64)],
            })
            .map_err(err("frame"))
        })
        .collect::<Res<_>>()?;
    let rx = receiver(RecvEngine::Xdp, &p.veth.b)?;
    let r = send(
        &Source::Frames(frames),
        &SendOptions {
            count: Some(2_000_000),
            ..opts(Engine::Live, &p.veth.a)
        },
    )
    .map_err(err("send"))?;
    settle(rx)?;
    t.push_str(&format!(
        "\npcap replay (256 frames of 60-123 bytes, in order), live engine: {} Mpps\n\n",
        mpps(r.achieved_pps)
    ));
    Ok(())
}

fn rate_accuracy(t: &mut String, p: &Pair) -> Res<()> {
    let (a, b) = (addr(&p.veth.a.addr), addr(&p.veth.b.addr));
    let flows =
        Source::Flows(parse_flows(&format!("src={a},dst={b},len=18")).map_err(err("flows"))?);
    t.push_str("## rate accuracy (2 s per run, 64-byte frames)\n\n");
    t.push_str("| target pps | live achieved | live error | packet achieved | packet error |\n|---|---|---|---|---|\n");
    for rate in [10_000.0f64, 100_000.0, 1_000_000.0, 3_000_000.0] {
        let mut row = format!("| {rate:.0} |");
        for engine in [Engine::Live, Engine::Packet] {
            let rx = receiver(RecvEngine::Xdp, &p.veth.b)?;
            let r: SendReport = send(
                &flows,
                &SendOptions {
                    rate: Some(rate),
                    count: Some((rate * 2.0) as u64),
                    ..opts(engine, &p.veth.a)
                },
            )
            .map_err(err("send"))?;
            settle(rx)?;
            row.push_str(&format!(
                " {:.0} | {:+.2} % |",
                r.achieved_pps,
                100.0 * (r.achieved_pps / rate - 1.0)
            ));
        }
        t.push_str(&row);
        t.push('\n');
    }
    t.push('\n');
    Ok(())
}

fn receiver_capacity(t: &mut String, p: &Pair) -> Res<()> {
    let (a, b) = (addr(&p.veth.a.addr), addr(&p.veth.b.addr));
    let flows =
        Source::Flows(parse_flows(&format!("src={a},dst={b},len=18")).map_err(err("flows"))?);
    t.push_str("## receiver capacity (live sender at full speed, 64-byte frames)\n\n");
    t.push_str("| receiver | offered Mpps | counted Mpps | counted |\n|---|---|---|---|\n");
    for engine in [RecvEngine::Xdp, RecvEngine::Packet] {
        let _pass = (engine == RecvEngine::Packet)
            .then(|| attach_pass(&p.veth.b.dev, p.veth.b.netns.as_deref()))
            .transpose()
            .map_err(err("pass program"))?;
        let rx = receiver(engine, &p.veth.b)?;
        let r = send(
            &flows,
            &SendOptions {
                count: Some(3_000_000),
                ..opts(Engine::Live, &p.veth.a)
            },
        )
        .map_err(err("send"))?;
        let rep = settle(rx)?;
        let n = stamped(&rep);
        let secs = r.sent as f64 / r.achieved_pps.max(1.0);
        t.push_str(&format!(
            "| {} | {} | {} | {:.1} % |\n",
            if engine == RecvEngine::Xdp {
                "xdp"
            } else {
                "packet"
            },
            mpps(r.achieved_pps),
            mpps(n as f64 / secs),
            100.0 * n as f64 / r.sent.max(1) as f64
        ));
    }
    t.push('\n');
    Ok(())
}

/// sender ns -- s0|d0 -- DUT ns -- d1|r0 -- receiver ns.
struct Three {
    left: Veth,
    right: Veth,
    dut: Netns,
    _rcv: Netns,
    _snd: Netns,
}

fn three() -> Res<Three> {
    let snd = Netns::new("fsnd").map_err(err("netns"))?;
    let dut = Netns::new("fdut").map_err(err("netns"))?;
    let rcv = Netns::new("frcv").map_err(err("netns"))?;
    let left = Veth::new(
        Some(&snd),
        Some("198.18.60.1/24"),
        Some(&dut),
        Some("198.18.60.254/24"),
    )
    .map_err(err("veth"))?;
    let right = Veth::new(
        Some(&dut),
        Some("198.18.61.254/24"),
        Some(&rcv),
        Some("198.18.61.1/24"),
    )
    .map_err(err("veth"))?;
    Ok(Three {
        left,
        right,
        dut,
        _rcv: rcv,
        _snd: snd,
    })
}

fn forwarding(t: &mut String) -> Res<()> {
    let bed = three()?;
    let d0_mac = mac(&bed.dut, &bed.left.b.dev)?;
    let d1_mac = mac(&bed.dut, &bed.right.a.dev)?;
    let rcv_ns = bed.right.b.netns.clone().unwrap_or_default();
    let r0_mac = {
        let out = nfkit_kernel::testbed::end_ip(
            &bed.right.b,
            &["-j", "link", "show", "dev", &bed.right.b.dev],
        )
        .map_err(err("ip link"))?;
        let v: serde_json::Value = serde_json::from_str(&out).map_err(err("ip -j"))?;
        v[0]["address"].as_str().unwrap_or("").to_string()
    };
    let flows = Source::Flows(
        parse_flows(&format!(
            "src=198.18.60.1,dst=198.18.61.1,dmac={d0_mac},len=18"
        ))
        .map_err(err("flows"))?,
    );
    t.push_str(
        "## kernel forwarding, sender -> DUT (veth -> veth) -> receiver, 64-byte frames\n\n",
    );
    t.push_str("| dataplane | offered Mpps | delivered Mpps | delivered | softirq CPU-s | Mpkt per softirq CPU-s | program ns/pkt |\n|---|---|---|---|---|---|---|\n");
    let _ = rcv_ns;
    let dmac = parse_mac(&d0_mac)?;
    // End-to-end latency rows (probe_latency) and the kernel's XDP
    // figure per softirq CPU-second, for the ratios.
    let mut e2e = String::new();
    let mut kernel_xdp = 0.0f64;
    for kind in ["XDP_REDIRECT (devmap, native)", "IP forwarding"] {
        let xdp_fwd = kind.starts_with("XDP");
        let dut_ns = bed.dut.name().to_string();
        let out_dev = bed.right.a.dev.clone();
        let (dm, sm) = (parse_mac(&r0_mac)?, parse_mac(&d1_mac)?);
        let prog: Attached = if xdp_fwd {
            Attached::new_with(
                FWD_OBJECT,
                "nfkit_fwd",
                &bed.left.b.dev,
                Some(&dut_ns),
                move |obj| {
                    use libbpf_rs::{MapCore, MapFlags};
                    let idx = xdp::ifindex(&out_dev)?;
                    let bpf = |e: libbpf_rs::Error| nfkit_traffic::TrafficError::Bpf {
                        what: "fwd maps".into(),
                        cause: e.to_string(),
                    };
                    xdp::map(obj, "out")?
                        .update(&0u32.to_ne_bytes(), &idx.to_ne_bytes(), MapFlags::ANY)
                        .map_err(bpf)?;
                    let mut cfg = dm.to_vec();
                    cfg.extend(sm);
                    xdp::map(obj, "fwdcfg")?
                        .update(&0u32.to_ne_bytes(), &cfg, MapFlags::ANY)
                        .map_err(bpf)?;
                    Ok(())
                },
            )
            .map_err(err("attach fwd"))?
        } else {
            bed.dut
                .exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])
                .map_err(err("sysctl"))?;
            let _ = bed.dut.ip(&[
                "neigh",
                "replace",
                "198.18.61.1",
                "lladdr",
                &r0_mac,
                "dev",
                &bed.right.a.dev,
            ]);
            attach_pass(&bed.left.b.dev, Some(&dut_ns)).map_err(err("pass"))?
        };
        let rx = receiver(RecvEngine::Xdp, &bed.right.b)?;
        let stats = enable_run_time_stats().ok();
        let before = prog.run_stats(if xdp_fwd { "nfkit_fwd" } else { "nfkit_pass" });
        let s0 = softirq_s();
        let r = send(
            &flows,
            &SendOptions {
                count: Some(if xdp_fwd { 4_000_000 } else { 2_000_000 }),
                ..opts(Engine::Live, &bed.left.a)
            },
        )
        .map_err(err("send"))?;
        let rep = settle(rx)?;
        let s1 = softirq_s();
        let after = prog.run_stats(if xdp_fwd { "nfkit_fwd" } else { "nfkit_pass" });
        drop(stats);
        let (k, p50, p99) = probe_latency(&bed, dmac, PROBES, PROBE_GAP)?;
        e2e.push_str(&format!(
            "| kernel {kind} | {k} | {} | {} |\n",
            us(p50),
            us(p99)
        ));
        let n = stamped(&rep);
        let secs = r.sent as f64 / r.achieved_pps.max(1.0);
        let soft = s1 - s0;
        let prog_ns = match (before, after) {
            (Some((t0, c0)), Some((t1, c1))) if c1 > c0 => {
                format!("{:.0}", (t1 - t0) as f64 / (c1 - c0) as f64)
            }
            _ => "-".into(),
        };
        if xdp_fwd && soft > 0.0 {
            kernel_xdp = n as f64 / soft;
        }
        t.push_str(&format!(
            "| {kind} | {} | {} | {:.1} % | {:.2} | {} | {prog_ns} |\n",
            mpps(r.achieved_pps),
            mpps(n as f64 / secs),
            100.0 * n as f64 / r.sent.max(1) as f64,
            soft,
            if soft > 0.0 {
                mpps(n as f64 / soft)
            } else {
                "-".into()
            },
        ));
        drop(prog);
    }
    let mut lat = String::new();
    let mut ratios = String::new();
    for (name, script, host, rate) in [
        ("pass-through", PASS_THROUGH, None, None),
        ("pass-through", PASS_THROUGH, None, Some(300_000.0)),
        ("DDoS example", DDOS, Some(1), None),
        ("DDoS example", DDOS, Some(1), Some(300_000.0)),
    ] {
        let probe = (rate.is_none() && script == PASS_THROUGH).then_some(dmac);
        let (worker, total) = switch_row(
            t, &mut lat, &mut e2e, &bed, &flows, name, script, host, rate, probe,
        )?;
        if kernel_xdp > 0.0 {
            ratios.push_str(&format!(
                "| {name}{} | {:.2}× | {:.2}× |\n",
                rate.map_or(", unpaced".into(), |r| format!(
                    ", paced at {} Mpps",
                    mpps(r)
                )),
                worker / kernel_xdp,
                total / kernel_xdp,
            ));
        }
    }
    t.push_str("\n### switch against kernel XDP_REDIRECT, packets per CPU-second\n\n| switch row | worker CPU only | worker + softirq CPU |\n|---|---|---|\n");
    t.push_str(&ratios);
    t.push_str("\nThe kernel's packets per softirq CPU-second (the DUT's veth NAPI with its XDP program, and the receiver's XDP counter) against the switch's per worker CPU-second (its thread's user + system time: the chain, the copies, and the copy-mode AF_XDP transmit, which runs in the worker's sendto) and per worker + softirq CPU-second (adding the DUT's veth NAPI with the redirect into the AF_XDP socket and its copy, and the receiver's XDP counter, as the kernel's figure counts them). The second is the fair comparison (issue 16's goal: at least 0.8×).\n");
    t.push_str("\n### end-to-end latency, sender to receiver (stamped frames)\n\n| dataplane | probes received | p50 µs | p99 µs |\n|---|---|---|---|\n");
    t.push_str(&e2e);
    t.push_str(&format!("\n{PROBES} UDP frames, one every {} µs, each carrying its CLOCK_MONOTONIC send time (read just before sendto on a packet socket in the sender's namespace), timed by a packet socket on the receiver's veth (just after recv); nothing else flows. The same path for every dataplane: sender's kernel, veth, the dataplane, veth, receiver's kernel.\n", PROBE_GAP.as_micros()));
    t.push_str("\nSwitch rows: one worker on AF_XDP ports (copy mode on veth); `processed` counts the frames the worker ran the chain on; per CPU-second of the worker thread (its user + system time, polling included) and of softirq (the veths' NAPI, the AF_XDP copies and the receiver's XDP counter).\n");
    t.push_str("Softirq time is the whole machine's: the DUT's veth NAPI (and its program) and the receiver's XDP counter.\n");
    t.push_str("Program ns/pkt: `nfkit_fwd` for XDP_REDIRECT; `nfkit_pass` on the DUT's ingress veth (it lets the live sender's frames in) for IP forwarding.\n\n");
    t.push_str("### switch latency per frame, receive ring to transmit ring\n\n| switch row | frames timed | p50 µs | p99 µs | max µs |\n|---|---|---|---|---|\n");
    t.push_str(&lat);
    t.push_str("\nMeasured inside the switch for every frame it sent: from the worker taking the frame's batch off the ingress port's AF_XDP receive ring (the frame's arrival time, CLOCK_MONOTONIC) to the worker putting it on the egress port's transmit ring (one clock read per sent batch): the chain's run, the copy and the batching, not the kernel's veth and AF_XDP copy before and after. Buckets of 1/8 of a power of two (values known within 12.5 %, upper bounds shown). Unpaced rows are overloaded (frames wait in the receive ring before being taken, which this does not count, and in batches); the paced rows are the per-frame figure. The kernel's comparable figure is the XDP program's run time per packet above (`program ns/pkt`, from BPF run-time stats); the kernel path has no hook between its receive and its transmit to time here.\n\n");
    Ok(())
}

/// Every frame from port 1 goes out of port 2.
const PASS_THROUGH: &str = r#"
from nf.classify import every_packet

def forward() -> u64:
    return REDIRECT(2)

every_packet(forward)
attach("sw0", "switch")
"#;

/// The DDoS example as it is (compiled for the switch).
const DDOS: &str = include_str!("../../../examples/ddos.py");

/// CPU seconds (user + system) of this process's threads named
/// `prefix*`, from `/proc/self/task/*/stat`.
fn thread_cpu_s(prefix: &str) -> f64 {
    let tick = 100.0; // USER_HZ
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut ticks = 0u64;
    for e in dir.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if !comm.trim().starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: state is 3,
        // utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| {
            f.get(n - 3)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(14) + field(15);
    }
    ticks as f64 / tick
}

/// The switch on the DUT's veths (AF_XDP, one worker) running `script`
/// while the live sender offers frames; one table row.
#[allow(clippy::too_many_arguments)]
fn switch_row(
    t: &mut String,
    lat: &mut String,
    e2e: &mut String,
    bed: &Three,
    flows: &Source,
    name: &str,
    script: &str,
    host: Option<usize>,
    rate: Option<f64>,
    probe: Option<[u8; 6]>,
) -> Res<(f64, f64)> {
    use nfkit_switch::port::{any::open_all, PortSpec};
    use nfkit_switch::{Switch, SwitchConfig};
    let lang = nfkit_lang::Options {
        hook: Some(nfkit_abi::Hook::Switch),
        ..nfkit_lang::Options::default()
    };
    let compiled = nfkit_lang::compile(name, script, &lang).map_err(err("compile"))?;
    let specs: Vec<PortSpec> = [&bed.left.b.dev, &bed.right.a.dev]
        .iter()
        .map(|d| format!("{d}:afxdp").parse())
        .collect::<Result<_, _>>()
        .map_err(err("port spec"))?;
    let dut = bed.dut.name().to_string();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let (up_tx, up_rx) = std::sync::mpsc::channel::<Res<()>>();
    // The switch lives in a thread inside the DUT's namespace (its
    // workers inherit it).
    type Done = (
        nfkit_switch::Stats,
        f64,
        nfkit_switch::latency::LatencySummary,
    );
    let sw = std::thread::spawn(move || -> Res<Done> {
        let started = (|| {
            nfkit_kernel::netns::enter_netns(&dut).map_err(err("enter DUT netns"))?;
            let ports = open_all(&specs, 1).map_err(err("switch ports"))?;
            let cfg = SwitchConfig {
                workers: 1,
                host_port: host,
                ..SwitchConfig::default()
            };
            Switch::start(&compiled, ports, &cfg).map_err(err("switch"))
        })();
        let sw = match started {
            Ok(sw) => {
                let _ = up_tx.send(Ok(()));
                sw
            }
            Err(e) => {
                let _ = up_tx.send(Err(e.clone()));
                return Err(e);
            }
        };
        let _ = stop_rx.recv();
        let cpu = thread_cpu_s("nfkit-sw");
        sw.stop();
        let latency = sw.latency();
        let (stats, _) = sw.finish().map_err(err("switch finish"))?;
        Ok((stats, cpu, latency))
    });
    up_rx.recv().map_err(err("switch thread"))??;
    // AF_XDP sockets and the veths settle.
    std::thread::sleep(Duration::from_millis(300));
    let rx = receiver(RecvEngine::Xdp, &bed.right.b)?;
    let cpu0 = thread_cpu_s("nfkit-sw");
    let s0 = softirq_s();
    let r = send(
        flows,
        &SendOptions {
            count: Some(if rate.is_some() { 600_000 } else { 2_000_000 }),
            rate,
            ..opts(Engine::Live, &bed.left.a)
        },
    )
    .map_err(err("send"))?;
    std::thread::sleep(Duration::from_millis(200));
    let s1 = softirq_s();
    let rep = settle(rx)?;
    let cpu_mid = thread_cpu_s("nfkit-sw");
    if let Some(dmac) = probe {
        let (k, p50, p99) = probe_latency(bed, dmac, PROBES, PROBE_GAP)?;
        e2e.push_str(&format!(
            "| switch, {name} (1 worker, AF_XDP) | {k} | {} | {} |\n",
            us(p50),
            us(p99)
        ));
    }
    let _ = stop_tx.send(());
    let (stats, cpu1, latency) = sw
        .join()
        .map_err(|_| "switch thread panicked".to_string())??;
    let secs = r.sent as f64 / r.achieved_pps.max(1.0);
    let processed = stats.ports.first().map_or(0, |p| p.rx);
    let delivered = stamped(&rep);
    let _ = cpu1;
    let worker = cpu_mid - cpu0;
    let soft = s1 - s0;
    let per = |n: u64, s: f64| {
        if s > 0.0 {
            mpps(n as f64 / s)
        } else {
            "-".into()
        }
    };
    t.push_str(&format!(
        "| switch, {name} (1 worker, AF_XDP{}) | {} | {} processed, {} delivered | {:.1} % | worker {worker:.2}, softirq {soft:.2} | {} per worker CPU-s, {} per worker + softirq CPU-s | - |\n",
        rate.map_or(String::new(), |r| format!(", paced at {} Mpps", mpps(r))),
        mpps(r.achieved_pps),
        mpps(processed as f64 / secs),
        mpps(delivered as f64 / secs),
        100.0 * delivered as f64 / r.sent.max(1) as f64,
        per(processed, worker),
        per(processed, worker + soft),
    ));
    lat.push_str(&format!(
        "| {name}{} | {} | {} | {} | {} |\n",
        rate.map_or(", unpaced".into(), |r| format!(
            ", paced at {} Mpps",
            mpps(r)
        )),
        latency.frames,
        us(latency.p50_ns),
        us(latency.p99_ns),
        us(latency.max_ns),
    ));
    let rate_of = |cpu: f64| {
        if cpu > 0.0 {
            processed as f64 / cpu
        } else {
            0.0
        }
    };
    Ok((rate_of(worker), rate_of(worker + soft)))
}

/// Probe frames per latency row, and the time between two.
const PROBES: usize = 5000;
const PROBE_GAP: Duration = Duration::from_micros(200);

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// End-to-end latency probe: `n` stamped UDP frames, one every `gap`,
/// from a packet socket on the sender's veth to a packet socket on the
/// receiver's veth (nfkit's pass program on it, so XDP frames reach the
/// stack). Each frame carries its `CLOCK_MONOTONIC` send time, read just
/// before `sendto`; the receiver subtracts it from its own reading just
/// after `recv`. Both dataplanes are measured the same way: the figure
/// holds the sender's and receiver's kernel paths, the veths and the
/// dataplane between them. Gives (frames received, p50 ns, p99 ns).
fn probe_latency(bed: &Three, dmac: [u8; 6], n: usize, gap: Duration) -> Res<(usize, u64, u64)> {
    const MAGIC: &[u8; 8] = b"NFKITLAT";
    let _pass = attach_pass(&bed.right.b.dev, bed.right.b.netns.as_deref()).map_err(err("pass"))?;
    let rcv_ns = bed.right.b.netns.clone().unwrap_or_default();
    let snd_ns = bed.left.a.netns.clone().unwrap_or_default();
    let (rdev, sdev) = (bed.right.b.dev.clone(), bed.left.a.dev.clone());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Res<()>>();
    let rx = std::thread::spawn(move || -> Res<Vec<u64>> {
        let sock = (|| {
            nfkit_kernel::netns::enter_netns(&rcv_ns).map_err(err("receiver netns"))?;
            packet_socket(&rdev, Some(Duration::from_millis(300)))
        })();
        let sock = match sock {
            Ok(s) => {
                let _ = ready_tx.send(Ok(()));
                s
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e.clone()));
                return Err(e);
            }
        };
        let mut lat = Vec::with_capacity(n);
        let mut buf = [0u8; 2048];
        let mut quiet = 0;
        while lat.len() < n && quiet < 3 {
            // SAFETY: `buf` is writable for its length.
            let got = unsafe { libc::recv(sock.0, buf.as_mut_ptr().cast(), buf.len(), 0) };
            let now = mono_ns();
            if got < 0 {
                quiet += 1;
                continue;
            }
            quiet = 0;
            let f = &buf[..got as usize];
            if f.len() >= 58 && &f[42..50] == MAGIC {
                let t = u64::from_ne_bytes(f[50..58].try_into().unwrap_or([0; 8]));
                lat.push(now.saturating_sub(t));
            }
        }
        Ok(lat)
    });
    ready_rx.recv().map_err(err("probe receiver"))??;
    let src: std::net::Ipv4Addr = [198, 18, 60, 1].into();
    let dst: std::net::Ipv4Addr = [198, 18, 61, 1].into();
    let mut frame = nfkit_traffic::build(&nfkit_traffic::FrameSpec {
        src_mac: nfkit_traffic::Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: nfkit_traffic::Mac(dmac),
        src: src.into(),
        dst: dst.into(),
        proto: nfkit_traffic::Proto::Udp,
        sport: 4000,
        dport: 4001,
        ttl: 64,
        tos: 0,
        payload: vec![0; 18],
    })
    .map_err(err("frame"))?;
    frame[42..50].copy_from_slice(MAGIC);
    let tx = std::thread::spawn(move || -> Res<()> {
        nfkit_kernel::netns::enter_netns(&snd_ns).map_err(err("sender netns"))?;
        let sock = packet_socket(&sdev, None)?;
        for _ in 0..n {
            let t = mono_ns();
            frame[50..58].copy_from_slice(&t.to_ne_bytes());
            // SAFETY: `frame` is readable for its length.
            unsafe { libc::send(sock.0, frame.as_ptr().cast(), frame.len(), 0) };
            std::thread::sleep(gap);
        }
        Ok(())
    });
    tx.join()
        .map_err(|_| "probe sender panicked".to_string())??;
    let mut lat = rx
        .join()
        .map_err(|_| "probe receiver panicked".to_string())??;
    lat.sort_unstable();
    let at = |q: f64| {
        lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    Ok((lat.len(), at(0.5), at(0.99)))
}

/// A packet socket's descriptor, closed on drop.
struct Fd(i32);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.0) };
    }
}

/// `CLOCK_MONOTONIC` in ns.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a local timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An AF_PACKET raw socket bound to `dev` (all protocols), with a
/// receive timeout.
fn packet_socket(dev: &str, timeout: Option<Duration>) -> Res<Fd> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
    if fd < 0 {
        return Err(format!(
            "packet socket: {}",
            std::io::Error::last_os_error()
        ));
    }
    let fd = Fd(fd);
    let idx = xdp::ifindex(dev).map_err(err("ifindex"))?;
    // SAFETY: sockaddr_ll is plain old data.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = proto;
    sa.sll_ifindex = idx as i32;
    // SAFETY: `sa` is a valid sockaddr_ll of the given size.
    let r = unsafe {
        libc::bind(
            fd.0,
            (&sa as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if r < 0 {
        return Err(format!("bind {dev}: {}", std::io::Error::last_os_error()));
    }
    if let Some(t) = timeout {
        let tv = libc::timeval {
            tv_sec: t.as_secs() as _,
            tv_usec: t.subsec_micros() as _,
        };
        // SAFETY: `tv` is a valid timeval.
        unsafe {
            libc::setsockopt(
                fd.0,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
    }
    Ok(fd)
}

fn parse_mac(s: &str) -> Res<[u8; 6]> {
    s.parse::<nfkit_traffic::Mac>()
        .map(|m| m.0)
        .map_err(|e| e.to_string())
}

fn run() -> Res<String> {
    let mut t = String::from("# nfkit traffic benchmarks\n\n");
    // NFKIT_TRAFFIC_ONLY=forwarding: only the forwarding and switch rows.
    let only_fwd = std::env::var("NFKIT_TRAFFIC_ONLY").is_ok_and(|v| v == "forwarding");
    if !only_fwd {
        let p = pair(62)?;
        // Warm up (the first live runs after a veth comes up can be slower).
        std::thread::sleep(Duration::from_millis(300));
        send_speed(&mut t, &p)?;
        rate_accuracy(&mut t, &p)?;
        receiver_capacity(&mut t, &p)?;
        drop(p);
    }
    forwarding(&mut t)?;
    Ok(t)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !is_root() {
        println!("traffic bench: skipped (needs root)");
        return;
    }
    match run() {
        Ok(table) => {
            nfkit_corpus::write_bench_report("traffic.md", &table);
            println!("{table}");
        }
        Err(e) => eprintln!("traffic bench failed: {e}"),
    }
}

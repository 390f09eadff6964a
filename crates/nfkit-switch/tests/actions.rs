//! Actions: a script returning each action sends frames to the right
//! pcap outputs, the controller channel and the counters; `Packet.in_port`
//! is the input port's number; bad input (runts, oversize frames, a
//! faulting chain, a run the VM ends) is counted and the switch keeps
//! forwarding.

mod common;
use common::*;
use nfkit_abi::verdict::Action;
use nfkit_pcap::Packet;
use nfkit_switch::port::{any, PortSpec};
use nfkit_switch::{Switch, SwitchConfig};

/// The first UDP payload byte picks the verdict.
const BY_BYTE: &str = r#"
from nf.classify import every_packet

def main() -> u64:
    k: u8 = Packet.read_u8(42)
    if k == 0:
        return DROP
    if k == 1:
        return PASS
    if k == 2:
        return TX
    if k == 3:
        return REDIRECT(3)
    if k == 4:
        return FLOOD
    if k == 5:
        return CONTROLLER(77)
    if k == 6:
        return HOST(2)
    if k == 7:
        return ABORTED
    if k == 8:
        return REDIRECT(99)
    if k == 9:
        x: u32 = Packet.read_u32(1000)
        return REDIRECT(x)
    return 12345

every_packet(main)
attach("sw0", "switch")
"#;

fn frame(k: u8) -> Vec<u8> {
    udp4(
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1,
        2,
        0,
        64,
        &[k, 0xee, 0xee, 0xee],
    )
}

#[test]
fn each_action_goes_where_the_table_says() {
    let c = compile_switch("by_byte.py", BY_BYTE);
    let packets: Vec<Packet> = (0..=10u8)
        .map(|k| Packet::new(1_000 + u64::from(k), frame(k)))
        .collect();
    let dir = scratch("actions");
    let (out, stats) = run_switch(&c, &packets, 1, &dir);
    let frames = |p: usize| -> Vec<u8> { out.ports[p].iter().map(|(_, d)| d[42]).collect() };
    // Port 1 (ingress): TX. Port 3: REDIRECT(3) and FLOOD. Other ports
    // but the host: FLOOD. Host port (8): PASS, HOST, FLOOD, the value
    // (default action PASS).
    assert_eq!(frames(0), vec![2]);
    assert_eq!(frames(2), vec![3, 4]);
    for p in [1, 3, 4, 5, 6] {
        assert_eq!(frames(p), vec![4], "port {}", p + 1);
    }
    assert_eq!(frames(HOST), vec![1, 4, 6, 10]);
    assert_eq!(out.controller, vec![(77, frame(5))]);
    // Counters.
    assert_eq!(stats.action(Action::Drop), 2, "DROP and the fault's DROP");
    assert_eq!(stats.action(Action::Pass), 2, "PASS and the value");
    assert_eq!(stats.action(Action::Tx), 1);
    assert_eq!(stats.action(Action::Redirect), 2);
    assert_eq!(stats.action(Action::Flood), 1);
    assert_eq!(stats.action(Action::Controller), 1);
    assert_eq!(stats.action(Action::Host), 1);
    assert_eq!(stats.action(Action::Aborted), 1);
    assert_eq!(stats.no_such_port, 1);
    assert_eq!(stats.no_host_port, 0);
    assert_eq!(stats.ports[0].rx, 11);
    assert_eq!(stats.ports[0].tx, 1);
    assert_eq!(stats.ports[2].tx, 2);
    assert_eq!(stats.ports[HOST].tx, 4);
    let main = stats
        .chains
        .iter()
        .find(|c| c.chain == "main")
        .expect("main");
    assert!(main.counts.contains(&("FAULT".to_string(), 1)), "{main:?}");
    assert!(main.counts.contains(&("VALUE".to_string(), 1)), "{main:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Runs `c` on `inputs` (port i + 1 reads inputs[i]) with `outputs`
/// ports in all, no host port; gives each port's output bytes.
fn run_ports(
    c: &nfkit_lang::Compiled,
    inputs: &[Vec<Packet>],
    outputs: usize,
    workers: usize,
    name: &str,
) -> (Vec<Vec<Vec<u8>>>, nfkit_switch::Stats) {
    let cfg = SwitchConfig {
        workers,
        pin: false,
        ..SwitchConfig::default()
    };
    run_ports_with(c, inputs, outputs, &cfg, name)
}

/// [`run_ports`] with the switch configured by `cfg`.
fn run_ports_with(
    c: &nfkit_lang::Compiled,
    inputs: &[Vec<Packet>],
    outputs: usize,
    cfg: &SwitchConfig,
    name: &str,
) -> (Vec<Vec<Vec<u8>>>, nfkit_switch::Stats) {
    let workers = cfg.workers;
    let dir = scratch(name);
    let specs: Vec<PortSpec> = (0..outputs)
        .map(|i| {
            let out = dir.join(format!("out{i}.pcap"));
            match inputs.get(i) {
                Some(pk) => {
                    let inp = dir.join(format!("in{i}.pcap"));
                    nfkit_pcap::write_file(&inp, pk).expect("input");
                    format!("p{i}:pcap={},out={}", inp.display(), out.display())
                }
                None => format!("p{i}:pcap,out={}", out.display()),
            }
            .parse()
            .expect("spec")
        })
        .collect();
    let ports = any::open_all(&specs, workers).expect("open");
    let sw = Switch::start(c, ports, cfg).expect("start");
    let (stats, _) = sw
        .run_to_end(std::time::Duration::from_millis(1))
        .expect("run");
    let outs = (0..outputs)
        .map(|i| {
            nfkit_pcap::read_file(dir.join(format!("out{i}.pcap")))
                .expect("output")
                .into_iter()
                .map(|p| p.data)
                .collect()
        })
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    (outs, stats)
}

#[test]
fn in_port_is_the_input_port_number() {
    let c = compile_switch(
        "next.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n    return REDIRECT(Packet.in_port + 1)\n\
         every_packet(main)\n",
    );
    let a: Vec<Packet> = (0..5).map(|i| Packet::new(i, frame(1))).collect();
    let b: Vec<Packet> = (0..3).map(|i| Packet::new(i, frame(2))).collect();
    for workers in [1, 2] {
        let (outs, stats) = run_ports(&c, &[a.clone(), b.clone()], 3, workers, "inport");
        assert!(outs[0].is_empty());
        assert_eq!(outs[1].len(), 5, "{workers} workers");
        assert!(outs[1].iter().all(|f| f[42] == 1));
        assert_eq!(outs[2].len(), 3);
        assert!(outs[2].iter().all(|f| f[42] == 2));
        assert_eq!(stats.ports[0].rx, 5);
        assert_eq!(stats.ports[1].rx, 3);
    }
}

#[test]
fn pass_without_a_host_port_is_counted() {
    let c = compile_switch(
        "pass.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n    return PASS\n\
         every_packet(main)\n",
    );
    let a: Vec<Packet> = (0..4).map(|i| Packet::new(i, frame(1))).collect();
    let (outs, stats) = run_ports(&c, &[a], 2, 1, "nohost");
    assert!(outs.iter().all(|o| o.is_empty()));
    assert_eq!(stats.no_host_port, 4);
    assert_eq!(stats.action(Action::Pass), 4);
}

#[test]
fn bad_input_is_counted_and_forwarding_goes_on() {
    // Frames whose byte 42 is 9 read offset 1000: a fault (DROP).
    let c = compile_switch(
        "bad.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   if Packet.read_u8(42) == 9:\n\
         \x20       return REDIRECT(Packet.read_u32(1000))\n\
         \x20   return REDIRECT(2)\n\
         every_packet(main)\n",
    );
    let mut big = frame(1);
    big.resize(3000, 0x55);
    let input = vec![
        Packet::new(1, frame(1)),
        Packet::new(2, vec![0xff; 10]),
        Packet::new(3, frame(9)),
        Packet::new(4, big),
        Packet::new(5, Vec::new()),
        Packet::new(6, frame(9)),
        Packet::new(7, frame(1)),
        Packet::new(8, vec![0x01; 13]),
        Packet::new(9, frame(1)),
    ];
    for workers in [1, 2] {
        let (outs, stats) = run_ports(&c, std::slice::from_ref(&input), 2, workers, "bad");
        assert_eq!(outs[1].len(), 3, "the good frames went on");
        let p = &stats.ports[0];
        assert_eq!((p.rx, p.runt, p.oversize), (9, 3, 1));
        assert_eq!(stats.action(Action::Redirect), 3);
        assert_eq!(stats.action(Action::Drop), 2, "the faults' action");
        let main = stats
            .chains
            .iter()
            .find(|c| c.chain == "main")
            .expect("main");
        assert!(main.counts.contains(&("FAULT".to_string(), 2)), "{main:?}");
    }
}

#[test]
fn scripts_for_other_hooks_are_refused() {
    let opts = nfkit_lang::Options::default();
    let c = nfkit_lang::compile(
        "x.py",
        "from nf.classify import every_packet\ndef main() -> u64:\n    return PASS\nevery_packet(main)\n",
        &opts,
    )
    .expect("compile");
    let e = match Switch::start(&c, Vec::new(), &SwitchConfig::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("an XDP build ran in the switch"),
    };
    assert!(e.contains("hook xdp"), "{e}");
}

/// A receive queue that fails at once.
struct Broken;

impl nfkit_switch::port::RxQueue for Broken {
    fn recv(
        &mut self,
        _batch: &mut nfkit_switch::port::Batch,
        _timeout: std::time::Duration,
    ) -> Result<usize, nfkit_switch::port::PortError> {
        Err(nfkit_switch::port::PortError::Other {
            port: "broken".into(),
            why: "device gone".into(),
        })
    }
}

/// A transmit queue that takes everything and keeps nothing.
struct Sink;

impl nfkit_switch::port::TxQueue for Sink {
    fn send(
        &mut self,
        frames: &[nfkit_switch::port::OutFrame<'_>],
    ) -> Result<usize, nfkit_switch::port::PortError> {
        Ok(frames.len())
    }
}

#[test]
fn a_port_error_stops_every_worker() {
    let c = compile_switch(
        "tx.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n    return TX\n\
         every_packet(main)\n",
    );
    let dir = scratch("broken");
    let inp = dir.join("in.pcap");
    let many: Vec<Packet> = (0..20_000).map(|i| Packet::new(i, frame(1))).collect();
    nfkit_pcap::write_file(&inp, &many).expect("input");
    let spec: PortSpec = format!("p:pcap={}", inp.display()).parse().expect("spec");
    let workers = 2;
    let mut ports = any::open_all(&[spec], workers).expect("open");
    ports.push(nfkit_switch::port::OpenPort {
        spec: "broken:tap".parse().expect("spec"),
        ifindex: 0,
        rx: vec![Box::new(Broken)],
        tx: (0..workers)
            .map(|_| Box::new(Sink) as Box<dyn nfkit_switch::port::TxQueue>)
            .collect(),
        close: None,
    });
    let cfg = SwitchConfig {
        workers,
        pin: false,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&c, ports, &cfg).expect("start");
    let e = sw
        .run_to_end(std::time::Duration::from_millis(1))
        .expect_err("the port's error");
    assert!(e.to_string().contains("device gone"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn per_cpu_maps_are_per_worker() {
    let c = compile_switch(
        "percpu.py",
        "from nf.classify import every_packet\n\
         seen = PercpuArrayMap(u64, 1)\n\
         def main() -> u64:\n\
         \x20   seen[0] += 1\n\
         \x20   return DROP\n\
         every_packet(main)\n",
    );
    let dir = scratch("percpu");
    let inp = dir.join("in.pcap");
    // Many flows, so both workers get some.
    let pk: Vec<Packet> = (0..400u32)
        .map(|i| {
            let f = udp4(
                [10, 0, (i >> 8) as u8, i as u8],
                [10, 0, 0, 2],
                1,
                2,
                0,
                64,
                &[0; 4],
            );
            Packet::new(u64::from(i), f)
        })
        .collect();
    nfkit_pcap::write_file(&inp, &pk).expect("input");
    let spec: PortSpec = format!("p:pcap={}", inp.display()).parse().expect("spec");
    let ports = any::open_all(&[spec], 2).expect("open");
    let cfg = SwitchConfig {
        workers: 2,
        pin: false,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&c, ports, &cfg).expect("start");
    while !sw.is_done() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let script = sw.script();
    let m = script.vm.map("seen").expect("map seen");
    let v = m
        .lookup(&0u32.to_le_bytes())
        .expect("lookup")
        .expect("entry");
    let per_cpu: Vec<u64> = v
        .chunks(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    assert_eq!(per_cpu.len(), 2, "one CPU slot per worker");
    assert_eq!(per_cpu.iter().sum::<u64>(), 400);
    assert!(per_cpu.iter().all(|&n| n > 0), "{per_cpu:?}");
    let (stats, _) = sw.finish().expect("finish");
    assert_eq!(stats.handed_off, per_cpu[1]);
    std::fs::remove_dir_all(&dir).ok();
}

/// A receive queue that never finishes (like a live port): it gives
/// `left` frames, then nothing.
struct Endless {
    left: usize,
}

impl nfkit_switch::port::RxQueue for Endless {
    fn recv(
        &mut self,
        batch: &mut nfkit_switch::port::Batch,
        _timeout: std::time::Duration,
    ) -> Result<usize, nfkit_switch::port::PortError> {
        batch.len = 0;
        while self.left > 0 && batch.len < nfkit_switch::port::BATCH {
            let f = &mut batch.frames[batch.len];
            f.clear();
            f.extend_from_slice(&frame(1));
            batch.arrival_ns[batch.len] = 0;
            batch.len += 1;
            self.left -= 1;
        }
        Ok(batch.len)
    }
}

#[test]
fn a_live_switch_runs_until_stopped_and_closes_its_ports() {
    let c = compile_switch(
        "tx.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n    return TX\n\
         every_packet(main)\n",
    );
    let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&closed);
    let workers = 2;
    let port = nfkit_switch::port::OpenPort {
        spec: "live:afpacket".parse().expect("spec"),
        ifindex: 5,
        rx: (0..workers)
            .map(|_| Box::new(Endless { left: 100 }) as Box<dyn nfkit_switch::port::RxQueue>)
            .collect(),
        tx: (0..workers)
            .map(|_| Box::new(Sink) as Box<dyn nfkit_switch::port::TxQueue>)
            .collect(),
        close: Some(Box::new(move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(nfkit_switch::port::PortStats::default())
        })),
    };
    let cfg = SwitchConfig {
        workers,
        pin: false,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&c, vec![port], &cfg).expect("start");
    assert!(!sw.replay());
    // Every frame is processed, and the switch still runs.
    while sw.stats().ports[0].tx < 200 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(!sw.is_done());
    sw.stop();
    let (stats, _) = sw.finish().expect("finish");
    assert_eq!(stats.ports[0].rx, 200);
    assert_eq!(stats.action(Action::Tx), 200);
    assert_eq!(stats.handed_off, 0, "one queue per worker: no dispatch");
    assert!(
        closed.load(std::sync::atomic::Ordering::SeqCst),
        "the port was closed"
    );
}

#[test]
fn a_run_the_vm_ends_is_a_fault_and_forwarding_goes_on() {
    // Byte 42 == 9: a loop far beyond the VM's instruction budget.
    let c = compile_switch(
        "budget.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   x: u64 = 0\n\
         \x20   if Packet.read_u8(42) == 9:\n\
         \x20       for i in range(8000000):\n\
         \x20           x += i\n\
         \x20   return REDIRECT(2 + (x & 0))\n\
         every_packet(main)\n",
    );
    let input = vec![
        Packet::new(1, frame(1)),
        Packet::new(2, frame(9)),
        Packet::new(3, frame(1)),
    ];
    let (outs, stats) = run_ports(&c, &[input], 2, 1, "budget");
    assert_eq!(outs[1].len(), 2, "the good frames went on");
    assert_eq!(stats.faults, 1);
    assert_eq!(stats.action(Action::Drop), 1, "the fault action");
    assert_eq!(stats.action(Action::Redirect), 2);
}

#[test]
fn host_queues_take_host_verdicts_by_queue() {
    // Byte 42 is the queue: HOST(q); 200 is PASS.
    let c = compile_switch(
        "hostq.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   q: u8 = Packet.read_u8(42)\n\
         \x20   if q == 200:\n\
         \x20       return PASS\n\
         \x20   return HOST(q)\n\
         every_packet(main)\n",
    );
    let ks = [0u8, 1, 2, 3, 9, 200, 1, 2];
    let a: Vec<Packet> = ks
        .iter()
        .enumerate()
        .map(|(i, &k)| Packet::new(i as u64, frame(k)))
        .collect();
    for workers in [1, 2] {
        // Ports 2, 3, 4 are host queues 0, 1, 2.
        let cfg = SwitchConfig {
            workers,
            pin: false,
            host_port: Some(1),
            host_queues: vec![2, 3],
            ..SwitchConfig::default()
        };
        let (outs, stats) = run_ports_with(&c, std::slice::from_ref(&a), 4, &cfg, "hostq");
        let tags = |p: usize| {
            let mut t: Vec<u8> = outs[p].iter().map(|f| f[42]).collect();
            t.sort();
            t
        };
        assert!(outs[0].is_empty());
        // Queue 0: HOST(0), HOST(3) and HOST(9) (no such queue), PASS.
        assert_eq!(tags(1), vec![0, 3, 9, 200], "{workers} workers");
        assert_eq!(tags(2), vec![1, 1]);
        assert_eq!(tags(3), vec![2, 2]);
        assert_eq!(stats.action(Action::Host), 7);
        assert_eq!(stats.action(Action::Pass), 1);
        assert_eq!(stats.no_host_port, 0);
    }
    // A host queue that is no port is refused at start.
    let cfg = SwitchConfig {
        host_queues: vec![7],
        pin: false,
        ..SwitchConfig::default()
    };
    let dir = scratch("hostq-bad");
    let spec: PortSpec = format!("p:pcap,out={}", dir.join("o.pcap").display())
        .parse()
        .expect("spec");
    let ports = any::open_all(&[spec], 1).expect("open");
    let e = Switch::start(&c, ports, &cfg).err().expect("refused");
    assert!(e.to_string().contains("host queue on port 8"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn packet_arrival_is_the_frames_time() {
    // The arrival time goes into the frame at byte 42 (big-endian u64).
    let c = compile_switch(
        "arrival.py",
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   t: u64 = Packet.arrival\n\
         \x20   Packet.write_u64(42, t)\n\
         \x20   return REDIRECT(2)\n\
         every_packet(main)\n",
    );
    let times = [
        5u64,
        1_000_000_007,
        1_700_000_000_123_456_789,
        1_700_000_001_000_000_000,
    ];
    let long = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[0; 16]);
    let a: Vec<Packet> = times
        .iter()
        .map(|&t| Packet::new(t, long.clone()))
        .collect();
    // nfkit run gives the record time too.
    let (want, _) = expected(&c, &a);
    let stamp = |f: &[u8]| u64::from_be_bytes(f[42..50].try_into().expect("8 bytes"));
    let from_vm: Vec<u64> = want.ports[1].iter().map(|(_, f)| stamp(f)).collect();
    assert_eq!(from_vm, times);
    for workers in [1, 2] {
        let (outs, _) = run_ports(&c, std::slice::from_ref(&a), 2, workers, "arrival");
        let mut got: Vec<u64> = outs[1].iter().map(|f| stamp(f)).collect();
        got.sort();
        assert_eq!(got, times, "{workers} workers");
    }
}

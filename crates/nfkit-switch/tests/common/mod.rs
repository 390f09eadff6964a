//! Shared by the switch's tests: compiling for the switch hook, what
//! `nfkit run` (ScriptVm) gives per packet, and a switch run on pcap
//! ports with every port's output read back.

#![allow(dead_code)]

pub mod numbered;

use nfkit_abi::verdict::Action;
use nfkit_abi::Hook;
use nfkit_control::runner::ScriptVm;
use nfkit_lang::{Compiled, Options};
use nfkit_pcap::Packet;
use nfkit_switch::action::{self, Decision};
use nfkit_switch::port::{any, PortSpec};
use nfkit_switch::{Stats, Switch, SwitchConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every chain example (`examples/*.py`, sorted) with its path; at
/// least five, so a moved directory cannot make a test pass empty.
pub fn example_scripts() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("examples/")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.ends_with(".py"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    names
        .into_iter()
        .map(|n| {
            let path = dir.join(&n);
            (n, path)
        })
        .collect()
}

/// Ports of a test switch: port 1 reads the input and writes; ports
/// 2..=7 only write; port 8 (the last) is the host port.
pub const PORTS: usize = 8;
pub const HOST: usize = PORTS - 1;

/// Compiles `source` for the switch hook (whatever its `attach` says);
/// the compiler's error as text.
pub fn try_compile_switch(name: &str, source: &str) -> Result<Compiled, String> {
    let opts = Options {
        hook: Some(Hook::Switch),
        ..Options::default()
    };
    nfkit_lang::compile(name, source, &opts).map_err(|e| e.to_string())
}

/// [`try_compile_switch`] for sources that must compile.
pub fn compile_switch(name: &str, source: &str) -> Compiled {
    match try_compile_switch(name, source) {
        Ok(c) => c,
        Err(e) => panic!("{name}: {e}\n{source}"),
    }
}

/// What one run gives: per port (index from 0) the frames sent out of
/// it, in order, and the controller's frames (reason, bytes).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    pub ports: Vec<Vec<(u64, Vec<u8>)>>,
    pub controller: Vec<(u32, Vec<u8>)>,
}

impl Outputs {
    fn new() -> Outputs {
        Outputs {
            ports: vec![Vec::new(); PORTS],
            controller: Vec::new(),
        }
    }

    /// The same outputs with each port's frames (and the controller's)
    /// sorted: for runs whose order across flows may differ.
    pub fn sorted(mut self) -> Outputs {
        for p in &mut self.ports {
            p.sort();
        }
        self.controller.sort();
        self
    }
}

/// What `nfkit run` gives (the script in the VM, packet by packet, on
/// input port 1), turned into switch outputs by the documented table.
pub fn expected(c: &Compiled, packets: &[Packet]) -> (Outputs, Vec<(Action, u32)>) {
    let mut vm = ScriptVm::new(c).expect("load");
    let mut out = Outputs::new();
    let mut verdicts = Vec::new();
    let drop = Action::Drop.verdict(0);
    for p in packets {
        if p.data.len() < 14 || p.data.len() > nfkit_switch::port::FRAME_ROOM {
            continue;
        }
        let (o, _) = vm.run(&p.data, p.ts_ns, false).expect("run");
        let r0 = o.error.is_none().then_some(o.code);
        let (act, arg, _) = action::resolve(r0, drop);
        verdicts.push((act, arg));
        match action::decide(act, arg, 0, PORTS, &[HOST]) {
            Decision::Port(q) => out.ports[q].push((p.ts_ns, o.packet.clone())),
            Decision::Flood => {
                for q in 1..PORTS {
                    out.ports[q].push((p.ts_ns, o.packet.clone()));
                }
            }
            Decision::Controller(r) => out.controller.push((r, o.packet.clone())),
            Decision::Drop | Decision::NoHostPort | Decision::NoSuchPort => {}
        }
    }
    (out, verdicts)
}

/// A scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nfkit-switch-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Runs `c` in the switch with `workers` workers on pcap ports (input
/// `packets` on port 1, the host port last) until the input is done.
pub fn run_switch(
    c: &Compiled,
    packets: &[Packet],
    workers: usize,
    dir: &Path,
) -> (Outputs, Stats) {
    run_switch_on(c, packets, workers, dir, nfkit_vm::Engine::best())
}

/// PORTS pcap ports writing `outN.pcap` in `dir`; port 1 also reads
/// `input`.
pub fn pcap_ports(dir: &Path, input: &Path) -> Vec<PortSpec> {
    (0..PORTS)
        .map(|i| {
            let out = dir.join(format!("out{}.pcap", i + 1));
            let text = if i == 0 {
                format!("p1:pcap={},out={}", input.display(), out.display())
            } else {
                format!("p{}:pcap,out={}", i + 1, out.display())
            };
            text.parse().expect("spec")
        })
        .collect()
}

/// [`run_switch`] on the VM engine `engine`.
pub fn run_switch_on(
    c: &Compiled,
    packets: &[Packet],
    workers: usize,
    dir: &Path,
    engine: nfkit_vm::Engine,
) -> (Outputs, Stats) {
    let input = dir.join("in.pcap");
    nfkit_pcap::write_file(&input, packets).expect("write input");
    let specs = pcap_ports(dir, &input);
    let ports = any::open_all(&specs, workers).expect("open ports");
    let cfg = SwitchConfig {
        workers,
        pin: false,
        host_port: Some(HOST),
        engine,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(c, ports, &cfg).expect("start");
    let ctl = sw.controller();
    let mut out = Outputs::new();
    while !sw.is_done() {
        ctl.drain(|f| out.controller.push((f.reason, f.data.clone())));
        std::thread::sleep(Duration::from_millis(1));
    }
    let (stats, _) = sw.finish().expect("finish");
    ctl.drain(|f| out.controller.push((f.reason, f.data.clone())));
    for i in 0..PORTS {
        let f = dir.join(format!("out{}.pcap", i + 1));
        out.ports[i] = nfkit_pcap::read_file(&f)
            .expect("read output")
            .into_iter()
            .map(|p| (p.ts_ns, p.data))
            .collect();
    }
    (out, stats)
}

/// An Ethernet + IPv4 + UDP frame.
pub fn udp4(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    tos: u8,
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let tot = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, tos];
    ip.extend_from_slice(&tot.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0, 0, ttl, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let cs = !(sum as u16);
    ip[10..12].copy_from_slice(&cs.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// `n` varied packets from `seed`: UDP frames of several flows, sizes,
/// ToS and TTL values, 1 ms apart.
pub fn packets(seed: u64, n: usize) -> Vec<Packet> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            let r = next();
            let payload: Vec<u8> = (0..(r % 90) as usize)
                .map(|k| (r >> (k % 56)) as u8)
                .collect();
            let f = udp4(
                [198, 18, 0, (r >> 8) as u8 % 6],
                [198, 18, 1, (r >> 16) as u8 % 3],
                1000 + (r >> 24) as u16 % 4,
                [53, 80, 443, 9000][(r >> 32) as usize % 4],
                [0, 46 << 2, 34 << 2, 8 << 2][(r >> 40) as usize % 4],
                (r >> 48) as u8 % 4,
                &payload,
            );
            Packet::new(1_000_000_000 + i as u64 * 1_000_000, f)
        })
        .collect()
}

//! Differential: every example (compiled for the switch hook) and random
//! chain scripts give, per packet, the same verdict (action and
//! argument), output port and output bytes in the switch (pcap ports,
//! one worker: same order and times too) as `nfkit run` (ScriptVm) on
//! the same capture; with two workers the same multiset per port, for
//! scripts whose verdicts do not depend on state shared across flows.

mod common;
use common::*;
use nfkit_abi::verdict::Action;
use nfkit_corpus::Xorshift;

/// The action counts of a list of verdicts, by action code.
fn counts(v: &[(Action, u32)]) -> [u64; 8] {
    let mut c = [0u64; 8];
    for (a, _) in v {
        c[usize::from(a.code())] += 1;
    }
    c
}

fn stats_counts(s: &nfkit_switch::Stats) -> [u64; 8] {
    let mut c = [0u64; 8];
    for a in Action::ALL {
        c[usize::from(a.code())] = s.action(a);
    }
    c
}

#[test]
fn examples_match_nfkit_run() {
    // Verdicts that depend only on the packet: two workers give the
    // same multiset per port.
    let stateless = ["dscp_dispatch.py", "tcp_options.py"];
    for (name, path) in &example_scripts() {
        let source = std::fs::read_to_string(path).expect("read example");
        let c = compile_switch(name, &source);
        let pcap = path.with_extension("pcap");
        let packets = nfkit_pcap::read_file(&pcap).expect("example pcap");
        let (want, verdicts) = expected(&c, &packets);
        let dir = scratch(&format!("ex-{name}"));
        let (got, stats) = run_switch(&c, &packets, 1, &dir);
        assert_eq!(got, want, "{name}: one worker");
        let (interp, _) = run_switch_on(&c, &packets, 1, &dir, nfkit_vm::Engine::Interp);
        assert_eq!(interp, want, "{name}: one worker, interpreter");
        assert_eq!(stats_counts(&stats), counts(&verdicts), "{name}: verdicts");
        assert_eq!(stats.ports[0].rx, packets.len() as u64, "{name}");
        if stateless.contains(&name.as_str()) {
            let (got2, stats2) = run_switch(&c, &packets, 2, &dir);
            assert_eq!(got2.sorted(), want.sorted(), "{name}: two workers");
            assert_eq!(
                stats_counts(&stats2),
                counts(&verdicts),
                "{name}: two workers"
            );
            // One pcap queue, two workers: frames were dispatched.
            assert!(stats2.handed_off > 0, "{name}: no frame was handed over");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A small random script generator: expressions over packet bytes and
/// the metadata (`Packet.in_port`, `Packet.queue`, `Packet.len`, info
/// block fields, an NF), packet writes, map counters (written, never
/// read: verdicts depend only on the packet), and every verdict,
/// REDIRECT to ports that exist and ones that do not, and reads that
/// fault on short packets.
struct Gen(Xorshift, usize);

impl Gen {
    fn pick(&mut self, n: usize) -> usize {
        self.0.index(n)
    }
    fn leaf(&mut self) -> String {
        match self.pick(9) {
            0 => format!(
                "u64({})",
                [0u64, 1, 2, 3, 7, 255, 1000, 65535][self.pick(8)]
            ),
            1 => "u64(Packet.in_port)".into(),
            2 => "u64(Packet.queue)".into(),
            3 => "u64(Packet.len)".into(),
            4 => [
                "u64(Packet.dport)",
                "u64(Packet.tos)",
                "u64(Packet.ttl)",
                "u64(Packet.l4_proto)",
            ][self.pick(4)]
            .into(),
            5 => "dst_port()".into(),
            6 => {
                // Mostly inside the frame; sometimes beyond short ones (a fault).
                let off = if self.pick(8) == 0 {
                    60 + self.pick(100)
                } else {
                    self.pick(40)
                };
                format!("u64(Packet.read_u{}({off}))", [8, 16, 32][self.pick(3)])
            }
            _ if self.1 > 0 => format!("v{}", self.pick(self.1)),
            _ => "u64(3)".into(),
        }
    }
    fn expr(&mut self, d: usize) -> String {
        if d == 0 || self.pick(3) == 0 {
            return self.leaf();
        }
        let op = ["+", "-", "*", "&", "|", "^", "//", "%", ">>"][self.pick(9)];
        let (a, b) = (self.expr(d - 1), self.expr(d - 1));
        if op == ">>" {
            return format!("({a} >> ({b} & 7))");
        }
        format!("({a} {op} {b})")
    }
    fn verdict(&mut self) -> String {
        match self.pick(12) {
            0 => "DROP".into(),
            1 => "PASS".into(),
            2 => "TX".into(),
            3 => "FLOOD".into(),
            4 => "ABORTED".into(),
            5 => format!("REDIRECT({})", self.pick(10)),
            6 => format!("REDIRECT(u32(({}) % 9))", self.expr(1)),
            7 => format!("CONTROLLER(u32(({}) & 255))", self.expr(1)),
            8 => format!("HOST({})", self.pick(4)),
            9 => format!("REDIRECT(Packet.in_port + {})", self.pick(3)),
            _ => self.expr(1),
        }
    }
    fn script(&mut self) -> String {
        let mut s = String::from(
            "from nf.classify import every_packet\nfrom nf.parse import dst_port\n\
             hits = ArrayMap(u64, 8)\n\ndef main() -> u64:\n",
        );
        self.1 = 0;
        for k in 0..3 {
            let e = self.expr(2);
            s.push_str(&format!("    v{k}: u64 = {e}\n"));
            self.1 = k + 1;
        }
        for _ in 0..2 + self.pick(4) {
            match self.pick(4) {
                0 => {
                    let e = self.expr(1);
                    s.push_str(&format!("    hits[{}] += {e}\n", self.pick(8)));
                }
                1 => {
                    let e = self.expr(1);
                    s.push_str(&format!(
                        "    Packet.write_u8({}, u8({e}))\n",
                        self.pick(42)
                    ));
                }
                _ => {
                    let (a, b) = (self.expr(1), self.expr(1));
                    let op = ["==", "!=", "<", ">=", ">"][self.pick(5)];
                    let v = self.verdict();
                    s.push_str(&format!("    if {a} {op} {b}:\n        return {v}\n"));
                }
            }
        }
        let v = self.verdict();
        s.push_str(&format!("    return {v}\n\nevery_packet(main)\n"));
        s
    }
}

#[test]
fn random_scripts_match_nfkit_run() {
    let dir = scratch("random");
    let mut g = Gen(Xorshift(0x5eed_5eed_1234_5678), 0);
    let mut seen = [0u64; 8];
    let mut faults = 0;
    // NFKIT_SWITCH_SCRIPTS=N runs more (the default keeps the test short).
    let n: usize = std::env::var("NFKIT_SWITCH_SCRIPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    for i in 0..n {
        let source = g.script();
        let c = compile_switch(&format!("random{i}.py"), &source);
        let mut packets = packets(g.0.next(), 40);
        // A few short frames (reads beyond them fault).
        packets.push(nfkit_pcap::Packet::new(2_000_000_000, vec![0xaa; 20]));
        let (want, verdicts) = expected(&c, &packets);
        let (got, stats) = run_switch(&c, &packets, 1, &dir);
        assert_eq!(got, want, "script {i}, one worker:\n{source}");
        assert_eq!(
            stats_counts(&stats),
            counts(&verdicts),
            "script {i}:\n{source}"
        );
        if i % 4 == 0 {
            let (got2, _) = run_switch(&c, &packets, 2, &dir);
            assert_eq!(
                got2.sorted(),
                want.sorted(),
                "script {i}, two workers:\n{source}"
            );
        }
        for (k, n) in counts(&verdicts).iter().enumerate() {
            seen[k] += n;
        }
        faults += stats
            .chains
            .iter()
            .flat_map(|c| &c.counts)
            .filter(|(n, _)| n == "FAULT")
            .count();
    }
    // The generator reached every action and some faults.
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    assert!(faults > 0);
    std::fs::remove_dir_all(&dir).ok();
}

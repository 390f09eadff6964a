//! `nfkit offload check SCRIPT|OBJ --dev IFACE --peer PEER [--netns NS]
//! [--pcap FILE]... [--random N]`: the rules checked on the running
//! kernel's flower. The rules go on IFACE's ingress (`skip_hw`) with a
//! last catch-all rule that only counts; every frame is sent from PEER
//! (the other end of a veth) and the rule whose counter moved says what
//! flower did with it. "Flower, then the program (`BPF_PROG_TEST_RUN`)
//! for what it passes on" must decide like the program alone, frame by
//! frame, and the rule that matched must be the model's. Needs a kernel
//! with cls_flower (the qemu guest of `make test-offload`).

use anyhow::{anyhow, bail};
use nfkit_kernel::netns::in_netns;
use nfkit_kernel::{load_image, LoadOptions, TestRun};
use nfkit_offload::flower;
use nfkit_offload::rules::{Rule, RuleAction};
use nfkit_offload::{analyse, generate, Limits, Pattern, RulesOptions, Tc};
use serde_json::json;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The chain script or eBPF ELF object.
    source: PathBuf,
    /// The device whose ingress gets the rules.
    #[arg(long, value_name = "IFACE")]
    dev: String,
    /// The other end of IFACE's veth: frames are sent from here.
    #[arg(long, value_name = "PEER")]
    peer: String,
    #[arg(long, value_name = "NS")]
    netns: Option<String>,
    /// Frames to send (pcap files).
    #[arg(long = "pcap", value_name = "FILE")]
    pcaps: Vec<PathBuf>,
    /// And this many random frames, biased toward the program's paths.
    #[arg(long, default_value_t = 0)]
    random: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, value_name = "N")]
    max_rules: Option<usize>,
    #[arg(long)]
    json: bool,
    #[arg(long, value_name = "NAME")]
    section: Option<String>,
    #[arg(long = "type", value_enum)]
    prog_type: Option<super::RunType>,
    /// A map entry set before the analysis and in both loaded
    /// instances: `MAP:KEY:VALUE`, key and value in hex (repeatable).
    #[arg(long = "map-set", value_name = "MAP:KEY:VALUE")]
    map_set: Vec<String>,
}

/// `MAP:KEY:VALUE` with hex key and value.
fn parse_map_set(s: &str) -> anyhow::Result<(String, Vec<u8>, Vec<u8>)> {
    let mut it = s.splitn(3, ':');
    let (Some(m), Some(k), Some(v)) = (it.next(), it.next(), it.next()) else {
        bail!("--map-set {s}: expected MAP:KEY:VALUE (hex key and value)");
    };
    let hex = |x: &str, what: &str| -> anyhow::Result<Vec<u8>> {
        if !x.len().is_multiple_of(2) {
            bail!("--map-set {s}: the {what} has an odd number of hex digits");
        }
        (0..x.len())
            .step_by(2)
            .map(|i| {
                u8::from_str_radix(&x[i..i + 2], 16)
                    .map_err(|_| anyhow!("--map-set {s}: the {what} is not hex at digit {}", i + 1))
            })
            .collect()
    };
    Ok((m.to_string(), hex(k, "key")?, hex(v, "value")?))
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A random UDP/TCP frame over IPv4 or IPv6, often with one path's
/// required bits imposed, sometimes a bit flipped or the frame cut.
fn random_frame(rng: &mut Rng, patterns: &[&Pattern]) -> anyhow::Result<Vec<u8>> {
    use nfkit_traffic::{build, FrameSpec, Mac, Proto};
    use std::net::{IpAddr, Ipv4Addr};
    let ports = [7u16, 22, 23, 53, 80, 999, 1000, 1500, 1999, 2000, 443];
    let port = |rng: &mut Rng| {
        if rng.below(10) < 7 {
            ports[rng.below(ports.len() as u64) as usize]
        } else {
            rng.next() as u16
        }
    };
    let proto = if rng.below(2) == 0 {
        Proto::Udp
    } else {
        Proto::Tcp {
            flags: rng.next() as u8,
        }
    };
    let (src, dst) = if rng.below(4) == 0 {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&0x2001_0db8u32.to_be_bytes());
        a[15] = rng.next() as u8;
        let mut b = a;
        b[15] = rng.next() as u8;
        (IpAddr::from(a), IpAddr::from(b))
    } else {
        let x = rng.next();
        (
            IpAddr::V4(Ipv4Addr::new(10, (x >> 8) as u8 % 4, 0, x as u8)),
            IpAddr::V4(Ipv4Addr::new(198, 18, (x >> 16) as u8 % 4, (x >> 24) as u8)),
        )
    };
    let spec = FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, rng.next() as u8]),
        dst_mac: Mac([2, 0, 0, 0, 1, rng.next() as u8]),
        src,
        dst,
        proto,
        sport: port(rng),
        dport: port(rng),
        ttl: [0u8, 1, 2, 64, 255][rng.below(5) as usize],
        tos: [0u8, 46 << 2, rng.next() as u8][rng.below(3) as usize],
        payload: vec![0xab; rng.below(24) as usize],
    };
    let mut f = build(&spec).map_err(|e| anyhow!("random frame: {e}"))?;
    if rng.below(10) < 7 && !patterns.is_empty() {
        let p = patterns[rng.below(patterns.len() as u64) as usize];
        for (pos, v) in p.bits() {
            let (byte, bit) = ((pos / 8) as usize, pos % 8);
            if let Some(b) = f.get_mut(byte) {
                *b = (*b & !(1 << bit)) | (u8::from(v) << bit);
            }
        }
    }
    if rng.below(3) == 0 {
        let pos = rng.below(f.len().min(64) as u64 * 8) as usize;
        f[pos / 8] ^= 1 << (pos % 8);
    }
    match rng.below(20) {
        0 => {
            let n = rng.below(f.len() as u64 - 13) as usize + 14;
            f.truncate(n);
        }
        1 => {
            // Cut inside the L4 header, after the ports (IPv4 without
            // options, IPv6): where flower's dissector reads the ports
            // but the program's paths need the whole header.
            let l4 = if f.get(12..14) == Some(&[0x86, 0xdd]) {
                54
            } else {
                34
            };
            let tcp = matches!(spec.proto, Proto::Tcp { .. });
            let n = l4 + 4 + rng.below(if tcp { 16 } else { 4 }) as usize;
            f.truncate(n);
        }
        _ => {}
    }
    Ok(f)
}

/// XDP return code of a decision.
fn code(a: RuleAction) -> u32 {
    match a {
        RuleAction::Drop => 1,
        RuleAction::Pass => 2,
        RuleAction::Tx => 3,
        RuleAction::Redirect(_) => 4,
    }
}

/// Packets per priority, summed over the filters there (a rule with the
/// total-length check is several u32 nodes).
fn counts(tc: &mut Tc, ifindex: u32) -> anyhow::Result<HashMap<u32, u64>> {
    let mut out = HashMap::new();
    for f in tc.filters(ifindex)? {
        let n = flower::decode(f.protocol, &f.options, ifindex)
            .ok()
            .and_then(|d| d.packets)
            .unwrap_or(0);
        *out.entry(f.prio).or_insert(0) += n;
    }
    Ok(out)
}

pub fn run(a: CheckArgs) -> anyhow::Result<ExitCode> {
    let netns = a.netns.clone();
    let r = in_netns(netns.as_deref(), || Ok(check(&a)))?;
    r
}

fn check(a: &CheckArgs) -> anyhow::Result<ExitCode> {
    let shown = a.source.display().to_string();
    let Some(prog) =
        super::offload::load_program(&a.source, a.section.as_deref(), a.prog_type, &[])?
    else {
        return Ok(ExitCode::from(1));
    };
    // The analysis sees the initial state, as the loaded programs do.
    let vm = prog.initial_vm(&shown)?;
    let sets = a
        .map_set
        .iter()
        .map(|x| parse_map_set(x))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (m, k, v) in &sets {
        vm.map(m)
            .ok_or_else(|| anyhow!("{shown}: no map {m}"))?
            .update(k, v, 0)
            .map_err(|e| anyhow!("{shown}: map {m}: {e:?}"))?;
    }
    let t0 = Instant::now();
    let analysis = analyse(&prog.image, &prog.entry, &vm, &Limits::default())
        .map_err(|e| anyhow!("{shown}: {e}"))?;
    let rules = generate(
        &analysis,
        &RulesOptions {
            max_rules: a.max_rules,
        },
    );
    let gen_us = t0.elapsed().as_micros() as u64;
    // Two kernel instances: one sees every frame, one what flower passes.
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let writes = prog
        .compiled
        .as_ref()
        .map(|c| c.control_plane())
        .unwrap_or_default();
    let load = || -> anyhow::Result<nfkit_kernel::Loaded> {
        let l = load_image(
            &prog.image,
            &LoadOptions {
                entries: Some(vec![prog.entry.clone()]),
                ..LoadOptions::default()
            },
        )
        .map_err(|e| anyhow!("{shown}: {e}"))?;
        for (m, k, v) in writes.iter().chain(&sets) {
            let map = l.map(m).ok_or_else(|| anyhow!("no map {m}"))?;
            map.update(k, v, 0)?;
        }
        Ok(l)
    };
    let (alone, software) = (load()?, load()?);
    let run_of = |l: &nfkit_kernel::Loaded, ts: u64, f: &[u8]| -> anyhow::Result<(u32, Vec<u8>)> {
        if let Some(cfg) = l.map("nfkit_config") {
            pin_clock(&cfg, ts)?;
        }
        let p = l
            .prog(&prog.entry)
            .ok_or_else(|| anyhow!("{shown}: {} not loaded", prog.entry))?;
        let out = p.test_run(&TestRun::packet(f))?;
        Ok((out.retval, out.data))
    };
    // Frames: the pcaps', then random ones; at least 14 bytes (no
    // shorter frame reaches a filter) and at most the MTU.
    // Each with a time: the pcap's (each file after the last), then 1 ms
    // apart; the programs' clock is pinned to it (nfkit_config).
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut now = 0u64;
    for p in &a.pcaps {
        let pk = nfkit_pcap::read_file(p).map_err(super::pcap_error(p))?;
        let base = now;
        for p in pk {
            now = base + p.ts_ns;
            frames.push((now, p.data));
        }
        now += 1_000_000_000;
    }
    let patterns: Vec<&Pattern> = analysis.paths.iter().map(|p| &p.pattern).collect();
    let mut rng = Rng(a.seed | 1);
    for _ in 0..a.random {
        now += 1_000_000;
        frames.push((now, random_frame(&mut rng, &patterns)?));
    }
    frames.retain(|(_, f)| f.len() >= 14 && f.len() <= 1514);
    // The rules, and a catch-all that counts what none matched.
    let mut tc = Tc::open()?;
    let ifindex = tc.ifindex(&a.dev)?;
    let created = tc.ensure_clsact(ifindex)?;
    let last = rules.rules.len() as u32 + 1;
    let catch_all = Rule {
        prio: last,
        pattern: Pattern::any(),
        action: RuleAction::Pass,
        paths: Vec::new(),
        ranges: Vec::new(),
        counts: Vec::new(),
        u32_filter: false,
        rewrite: None,
    };
    let cleanup = |tc: &mut Tc| {
        for p in 1..=last {
            let _ = tc.delete_prio(ifindex, p);
        }
        if created {
            let _ = tc.delete_clsact(ifindex);
        }
    };
    let t1 = Instant::now();
    for r in rules.rules.iter().chain(std::iter::once(&catch_all)) {
        let f = flower::encode(r, flower::SKIP_HW, ifindex).map_err(|e| anyhow!("{e}"));
        if let Err(e) = f.and_then(|f| Ok(tc.add_flower(ifindex, &f)?)) {
            cleanup(&mut tc);
            return Err(e);
        }
    }
    let install_us = t1.elapsed().as_micros() as u64;
    let result = send_all(
        a, &mut tc, ifindex, &rules, last, &frames, &alone, &software, &run_of,
    );
    cleanup(&mut tc);
    let s = result?;
    let ok = s.disagreements.is_empty()
        && s.model_mismatches.is_empty()
        && s.byte_mismatches.is_empty()
        && s.lost == 0;
    let summary = json!({
        "source": shown, "entry": prog.entry, "dev": a.dev,
        "paths": rules.paths, "offloaded": rules.offloaded, "rules": rules.rules.len(),
        "generation_us": gen_us, "install_us": install_us,
        "frames": frames.len(), "by_rules": s.by_rules, "lost": s.lost,
        "disagreements": s.disagreements.len(), "model_mismatches": s.model_mismatches.len(),
        "first_disagreements": s.disagreements.iter().take(5).collect::<Vec<_>>(),
        "first_model_mismatches": s.model_mismatches.iter().take(5).collect::<Vec<_>>(),
        "outside_assumptions": s.outside,
        "outside_disagreements": s.outside_disagreements.len(),
        "outside_model_mismatches": s.outside_mismatches.len(),
        "first_outside": s.outside_disagreements.iter().chain(&s.outside_mismatches).take(5).collect::<Vec<_>>(),
        "bytes_checked": s.bytes_checked, "byte_mismatches": s.byte_mismatches.len(),
        "first_byte_mismatches": s.byte_mismatches.iter().take(5).collect::<Vec<_>>(),
        "ms": s.ms, "agree": ok,
    });
    if a.json {
        println!("{summary}");
    } else {
        println!(
            "{shown} ({}): {} rules, {} frames, {} decided by flower, {} disagreements with the program alone, {} rule choices unlike the model, {} of {} frames sent on not as the program sends them, {} lost, {} ms; {} frames outside the model's assumptions ({} disagreements, {} rule choices unlike the model)",
            prog.entry,
            rules.rules.len(),
            frames.len(),
            s.by_rules,
            s.disagreements.len(),
            s.model_mismatches.len(),
            s.byte_mismatches.len(),
            s.bytes_checked,
            s.lost,
            s.ms,
            s.outside,
            s.outside_disagreements.len(),
            s.outside_mismatches.len()
        );
        for d in s
            .disagreements
            .iter()
            .chain(&s.model_mismatches)
            .chain(&s.byte_mismatches)
            .take(5)
        {
            println!("  {d}");
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// One test run of a loaded instance on a frame at a time: its code and
/// the frame it leaves.
type RunOf<'a> = dyn Fn(&nfkit_kernel::Loaded, u64, &[u8]) -> anyhow::Result<(u32, Vec<u8>)> + 'a;

struct Sent {
    by_rules: usize,
    lost: usize,
    disagreements: Vec<String>,
    model_mismatches: Vec<String>,
    /// Frames outside the field model's stated assumptions, and what
    /// went differently on them (reported, not failures).
    outside: usize,
    outside_disagreements: Vec<String>,
    outside_mismatches: Vec<String>,
    /// Frames a rule sent on (TX, redirect to a veth) whose bytes were
    /// compared with the program's, and those not seen as it sends them.
    bytes_checked: usize,
    byte_mismatches: Vec<String>,
    ms: u64,
}

/// Where a frame a rule sends on with `action` can be read as it left:
/// TX goes back to `peer`; a redirect out of a veth arrives at the
/// veth's other end (its `iflink`, read from sysfs, which shows the
/// namespace it was mounted in: not asked when the check runs in
/// another one). None for anything else.
fn wire_end(action: RuleAction, peer: &str, other_netns: bool) -> Option<String> {
    match action {
        RuleAction::Tx => Some(peer.to_string()),
        RuleAction::Redirect(_) if other_netns => None,
        RuleAction::Redirect(i) => {
            let name_of = |idx: u32| -> Option<String> {
                std::fs::read_dir("/sys/class/net")
                    .ok()?
                    .flatten()
                    .find_map(|e| {
                        let n = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
                        (n.trim().parse::<u32>().ok()? == idx)
                            .then(|| e.file_name().to_string_lossy().into_owned())
                    })
            };
            let dev = name_of(i)?;
            let link = std::fs::read_to_string(format!("/sys/class/net/{dev}/iflink")).ok()?;
            let link: u32 = link.trim().parse().ok()?;
            (link != i).then(|| name_of(link)).flatten()
        }
        _ => None,
    }
}

/// A frame the program sends on, and whether its IPv4 header checksum
/// bytes are left out of the comparison: a rule whose checksum fix-up
/// is incremental ([`nfkit_offload::Rewrite::assumes_valid_csum`]) on a
/// frame that arrived with a wrong checksum (`csum ip4h` recomputes it,
/// the program keeps it wrong), as the model compares them.
type Expected = (Vec<u8>, bool);

fn same(w: &Expected, g: &[u8]) -> bool {
    if !w.1 {
        return w.0 == g;
    }
    w.0.len() == g.len()
        && w.0.iter().zip(g).enumerate().all(|(i, (a, b))| {
            a == b || (24..26).contains(&i) || nfkit_offload::rewrite::CSUM_TCP.contains(&i)
        })
}

/// Each frame of `want` found, in order, among `got` (which may hold
/// other frames too: what was sent, the host's own); those not found.
fn missing_in_order(want: &[Expected], got: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut at = 0;
    let mut out = Vec::new();
    for w in want {
        match got[at..].iter().position(|g| same(w, g)) {
            Some(k) => at += k + 1,
            None => out.push(w.0.clone()),
        }
    }
    out
}

/// Pins the program's clock to `ts` (the classifier's `nfkit_config`:
/// a pinned flag and the time, as `prog test` does).
fn pin_clock(cfg: &nfkit_kernel::KMap, ts: u64) -> anyhow::Result<()> {
    let mut v = cfg.lookup(&0u32.to_le_bytes())?.unwrap_or_default();
    v.resize(v.len().max(40), 0);
    v.splice(20..24, 1u32.to_le_bytes());
    v.splice(24..32, ts.to_le_bytes());
    cfg.update(&0u32.to_le_bytes(), &v, 0)?;
    Ok(())
}

/// A frame the field model assumes away (docs/offload.md): an IP
/// version other than its EtherType's, or IPv4 options (IHL not 5). An
/// L4 header cut short after the ports is in the model: the flower
/// guard `tcp_flags 0/0xff` takes a TCP one, and UDP port rules are u32
/// filters, which need the whole UDP header.
fn outside_assumptions(f: &[u8]) -> bool {
    let et = u16::from_be_bytes([f[12], f[13]]);
    match et {
        0x0800 if f.len() > 14 => f[14] >> 4 != 4 || f[14] & 0x0f != 5,
        0x86dd if f.len() > 14 => f[14] >> 4 != 6,
        _ => false,
    }
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect()
}

#[allow(clippy::too_many_arguments)]
fn send_all(
    a: &CheckArgs,
    tc: &mut Tc,
    ifindex: u32,
    rules: &nfkit_offload::RuleSet,
    last: u32,
    frames: &[(u64, Vec<u8>)],
    alone: &nfkit_kernel::Loaded,
    software: &nfkit_kernel::Loaded,
    run_of: &RunOf<'_>,
) -> anyhow::Result<Sent> {
    let sender = nfkit_traffic::send::FrameSender::open(&a.peer, None)
        .map_err(|e| anyhow!("sending on {}: {e}", a.peer))?;
    // A capture at the far end of every device a rule sends frames out
    // of, and the frames the program alone sends there, in order.
    let mut wires: HashMap<String, (nfkit_traffic::recv::Capture, Vec<Expected>)> = HashMap::new();
    let mut wire_of: HashMap<u32, String> = HashMap::new();
    for r in &rules.rules {
        if let Some(dev) = wire_end(r.action, &a.peer, a.netns.is_some()) {
            if !wires.contains_key(&dev) {
                let cap = nfkit_traffic::recv::Capture::start(
                    &dev,
                    a.netns.as_deref(),
                    2 * frames.len() + 10_000,
                )
                .map_err(|e| anyhow!("capturing on {dev}: {e}"))?;
                wires.insert(dev.clone(), (cap, Vec::new()));
            }
            wire_of.insert(r.prio, dev);
        }
    }
    let mut s = Sent {
        by_rules: 0,
        lost: 0,
        disagreements: Vec::new(),
        model_mismatches: Vec::new(),
        outside: 0,
        outside_disagreements: Vec::new(),
        outside_mismatches: Vec::new(),
        bytes_checked: 0,
        byte_mismatches: Vec::new(),
        ms: 0,
    };
    let t0 = Instant::now();
    let mut before = counts(tc, ifindex)?;
    for (ts, f) in frames {
        let outside = outside_assumptions(f);
        if outside {
            s.outside += 1;
        }
        let (want, sent_as) = run_of(alone, *ts, f)?;
        sender
            .send(f)
            .map_err(|e| anyhow!("sending on {}: {e}", a.peer))?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let hit = loop {
            let now = counts(tc, ifindex)?;
            let moved: Vec<u32> = now
                .iter()
                .filter(|(p, n)| before.get(p).copied().unwrap_or(0) < **n)
                .map(|(p, _)| *p)
                .collect();
            if !moved.is_empty() || Instant::now() > deadline {
                before = now;
                break moved.into_iter().min();
            }
            std::thread::sleep(Duration::from_micros(200));
        };
        let Some(prio) = hit else {
            // Shown, and the program that sees what the rules pass on is
            // still run on it, so that a stateful program's two
            // instances stay in step for the frames after it.
            run_of(software, *ts, f)?;
            let tpid = f.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
            if matches!(tpid, Some(0x8100 | 0x88a8)) && f.len() < 20 {
                // The stack drops a VLAN tag cut short before tc, after
                // XDP (skb_vlan_untag pulls the 4-byte tag and 2 more
                // bytes): no rule can see it.
                if !outside {
                    s.outside += 1;
                }
                s.outside_mismatches.push(format!(
                    "frame {}: a VLAN tag cut short, dropped by the stack before tc",
                    hex(f)
                ));
                continue;
            }
            s.lost += 1;
            s.model_mismatches.push(format!(
                "frame {}: no filter counted it within 2 s (lost)",
                hex(f)
            ));
            continue;
        };
        let model = rules.first_match(f).map_or(last, |r| r.prio);
        let (mism, dis) = if outside {
            (&mut s.outside_mismatches, &mut s.outside_disagreements)
        } else {
            (&mut s.model_mismatches, &mut s.disagreements)
        };
        if model != prio {
            mism.push(format!(
                "frame {}: flower matched prio {prio}, the model prio {model}",
                hex(f)
            ));
        }
        let rule = rules.rules.iter().find(|r| r.prio == prio);
        let action = rule.map_or(RuleAction::Pass, |r| r.action);
        let got = if action == RuleAction::Pass {
            run_of(software, *ts, f)?.0
        } else {
            s.by_rules += 1;
            code(action)
        };
        if got == want {
            if let Some(w) = wire_of.get(&prio).and_then(|d| wires.get_mut(d)) {
                let rw = rule.and_then(|r| r.rewrite.as_ref());
                let incremental = rw.is_some_and(|rw| rw.assumes_valid_csum);
                let tcp = rw.is_some_and(|rw| rw.csum_tcp);
                // A checksum wrong on arrival: act_csum repairs it, the
                // program's incremental update keeps it wrong.
                let skip_csum = (incremental && !nfkit_offload::rewrite::ipv4_checksum_ok(f))
                    || (tcp && !nfkit_offload::rewrite::tcp_checksum_ok(f));
                w.1.push((sent_as, skip_csum));
                s.bytes_checked += 1;
            }
        }
        if got != want {
            dis.push(format!(
                "frame {}: flower prio {prio} then program: {got}, program alone: {want}",
                hex(f)
            ));
        }
    }
    s.ms = t0.elapsed().as_millis() as u64;
    // The last frames' way to the captures.
    std::thread::sleep(Duration::from_millis(200));
    for (dev, (cap, want)) in wires {
        let got = cap
            .finish()
            .map_err(|e| anyhow!("capturing on {dev}: {e}"))?;
        for m in missing_in_order(&want, &got) {
            s.byte_mismatches.push(format!(
                "frame {}: not seen on {dev} as the program sends it",
                hex(&m)
            ));
        }
    }
    if frames.is_empty() {
        bail!("no frames to send");
    }
    Ok(s)
}

//! The DDoS logic with a drop-only blacklist step
//! (`tests/progs/ddos_blacklist.c`) under traffic, in the model: a flood
//! fills the blacklist the data path writes, the rules follow it (one
//! per blacklisted source, merged where adjacent, before every other
//! rule), the entries expire and the rules go. Before every frame the
//! rules are derived again from the maps of the program that sees only
//! what they pass on (map sync with no lag), with the clock as of that
//! frame; the program's verdict counters plus the rules' packets folded
//! in must equal the counters of the program alone.
//!
//! Why dropping in flower cannot change what the program decides later:
//! an offloaded path writes nothing any decision reads (its only write
//! is the verdict counter, which no path loads; the analysis checks
//! both), so a packet flower drops would have left the program's state
//! as it was; and the rules are derived from that state as it is now.

mod common;

use common::{build_prog, random_frame, Rng};
use nfkit_offload::model::{run_xdp, Decision};
use nfkit_offload::{
    analyse, generate, hoist, switch, Limits, Rule, RuleAction, RuleSet, RulesOptions,
};
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use nfkit_vm::{Vm, VmConfig};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const ENTRY: &str = "ddos_blacklist";
const DROPPED: u32 = 1;

fn set_clock(vm: &Vm, now: u64) {
    let mut v = vec![0u8; 40];
    v[20..24].copy_from_slice(&1u32.to_le_bytes());
    v[24..32].copy_from_slice(&now.to_le_bytes());
    vm.map("nfkit_config")
        .unwrap_or_else(|| panic!("no nfkit_config"))
        .update(&0u32.to_le_bytes(), &v, 0)
        .unwrap_or_else(|e| panic!("{e:?}"));
}

/// Sum over the CPUs of 64-bit counter `k` of map `counters`.
fn counter(vm: &Vm, k: u32) -> u64 {
    let v = vm
        .map("counters")
        .unwrap_or_else(|| panic!("no counters"))
        .lookup(&k.to_le_bytes())
        .unwrap_or_else(|e| panic!("{e:?}"))
        .unwrap_or_default();
    v.chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .sum()
}

/// Every blacklist key (IPv4 and IPv6 sources) live after `now`.
fn live_keys(vm: &Vm, now: u64) -> BTreeSet<Vec<u8>> {
    vm.map("blacklist")
        .unwrap_or_else(|| panic!("no blacklist"))
        .entries()
        .into_iter()
        .filter(|(_, v)| u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8])) > now)
        .map(|(k, _)| k)
        .collect()
}

/// IPv4 sources blacklisted until after `now`.
fn blacklisted(vm: &Vm, now: u64) -> BTreeSet<Ipv4Addr> {
    vm.map("blacklist")
        .unwrap_or_else(|| panic!("no blacklist"))
        .entries()
        .into_iter()
        .filter(|(k, v)| {
            k[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
                && u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8])) > now
        })
        .map(|(k, _)| Ipv4Addr::new(k[12], k[13], k[14], k[15]))
        .collect()
}

/// The fewest prefixes covering exactly `set` (aligned blocks).
fn prefix_cover(set: &BTreeSet<Ipv4Addr>) -> usize {
    let mut blocks: BTreeSet<(u32, u32)> = set.iter().map(|a| (u32::from(*a), 0)).collect();
    loop {
        let mut merged = false;
        for &(a, w) in blocks.clone().iter() {
            let size = 1u64 << w;
            if w < 32
                && (a as u64).is_multiple_of(2 * size)
                && blocks.contains(&(a + size as u32, w))
            {
                blocks.remove(&(a, w));
                blocks.remove(&(a + size as u32, w));
                blocks.insert((a, w + 1));
                merged = true;
                break;
            }
        }
        if !merged {
            return blocks.len();
        }
    }
}

/// The rules as of now, and whether the path budget cut the analysis.
fn derive(img: &nfkit_object::Image, vm: &Vm, now: u64) -> (RuleSet, bool) {
    let limits = Limits {
        data_path_maps: true,
        // The program reads the pinned clock (nfkit_config); the kernel's
        // clock, were it used, would be this frame's time too.
        now_ns: Some(now),
        // The token buckets' maps are expanded too (one software path per
        // bucket and parse case): a lookup in a map with more entries
        // than this is one software path instead.
        max_map_entries: 32,
        ..Limits::default()
    };
    let a = analyse(img, ENTRY, vm, &limits).unwrap_or_else(|e| panic!("{e}"));
    let (a, _) = hoist(img, vm, &limits, &a).unwrap_or_else(|e| panic!("{e}"));
    (generate(&a, &RulesOptions::default()), a.truncated)
}

fn key(r: &Rule) -> String {
    format!("{} {:?} {:?}", r.pattern, r.ranges, r.action)
}

fn frame(rng: &mut Rng, src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    let mut f = build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        proto: if rng.chance(60) {
            Proto::Udp
        } else {
            Proto::Tcp { flags: 0x02 }
        },
        sport: 1024 + rng.below(60000) as u16,
        dport: [53u16, 80, 443, 123][rng.below(4) as usize],
        ttl: 64,
        tos: 0,
        payload: vec![0; rng.below(32) as usize],
    })
    .unwrap_or_else(|e| panic!("{e}"));
    // Some fragments and cut frames: the rules must decide them as the
    // program does too.
    if rng.chance(5) {
        f[20..22].copy_from_slice(&0x2010u16.to_be_bytes());
    }
    if rng.chance(5) {
        f.truncate(34 + rng.below(12) as usize);
    }
    f
}

/// A random frame aimed at one of `rules` (or any frame).
fn frame_aimed_at<'a>(rng: &mut Rng, rules: impl Iterator<Item = &'a Rule>) -> Vec<u8> {
    let a = nfkit_offload::Analysis {
        entry: ENTRY.into(),
        paths: rules
            .map(|r| nfkit_offload::Path {
                pattern: r.pattern.clone(),
                outcome: nfkit_offload::Outcome::Software(String::new()),
                steps: 0,
                counts: Vec::new(),
                rewrite: None,
            })
            .collect(),
        truncated: false,
        live_maps: Vec::new(),
        uses_clock: false,
        clock_window: None,
    };
    random_frame(rng, &a)
}

/// Replays the switch from `old` (installed) to `new` step by step:
/// at every step each frame of `pool` must meet its old outcome or its
/// new one. Returns the states checked and how many (step, frame)
/// pairs already had the new outcome while it differed from the old.
fn check_switch(old: &[Rule], new: &RuleSet, pool: &[Vec<u8>]) -> (usize, usize) {
    let p = switch::plan(
        &old.iter().map(|r| r.prio).collect::<Vec<_>>(),
        new.rules.len(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let states = switch::replay(old, &new.rules, &p);
    let mut moved = 0;
    for f in pool {
        let (was, will) = (switch::outcome(old, f), switch::outcome(&new.rules, f));
        for (k, st) in states.iter().enumerate() {
            let now = switch::outcome(st, f);
            assert!(
                now == was || now == will,
                "switch step {k} of {}: frame {f:02x?} meets {now:?}, old {was:?}, new {will:?}",
                states.len() - 1
            );
            moved += usize::from(was != will && now == will);
        }
        assert_eq!(
            switch::outcome(&states[states.len() - 1], f),
            will,
            "after the switch"
        );
    }
    (states.len(), moved)
}

#[test]
fn blacklist_fill_and_expiry_drive_rules() {
    let img = build_prog(ENTRY);
    let vm = || Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let (alone, software) = (vm(), vm());
    let mut rng = Rng(19);
    let victim = Ipv4Addr::new(198, 18, 0, 1);
    // Four adjacent attackers (one /30 once all are in), two apart.
    let attackers: Vec<Ipv4Addr> = [(1, 0), (1, 1), (1, 2), (1, 3), (2, 7), (3, 9)]
        .iter()
        .map(|&(c, d)| Ipv4Addr::new(198, 19, c, d))
        .collect();
    let legit: Vec<Ipv4Addr> = (0..20).map(|i| Ipv4Addr::new(198, 18, 9, i)).collect();
    let pcap = nfkit_pcap::read_file(common::root().join("examples/ddos.pcap"))
        .unwrap_or_else(|e| panic!("{e}"));

    // The traffic: (time, frame). Background first, then a flood of 5 s
    // at 2,000 frames/s among the background, the example's pcap and
    // random frames, then 12 s of background only (the entries expire
    // after 10 s), then the pcap's frames again.
    let mut traffic: Vec<(u64, Vec<u8>)> = Vec::new();
    let ms = 1_000_000u64;
    let mut t = 1_000 * ms;
    for _ in 0..200 {
        t += 5 * ms;
        let s = legit[rng.below(legit.len() as u64) as usize];
        traffic.push((t, frame(&mut rng, s, victim)));
    }
    for i in 0..4_000u64 {
        t += ms / 2;
        let s = if i % 10 == 0 {
            legit[rng.below(legit.len() as u64) as usize]
        } else {
            attackers[rng.below(attackers.len() as u64) as usize]
        };
        traffic.push((t, frame(&mut rng, s, victim)));
    }
    let flood_end = t;
    let mut random = Rng(7);
    for _ in 0..1_200 {
        t += 10 * ms;
        let s = legit[rng.below(legit.len() as u64) as usize];
        traffic.push((t, frame(&mut rng, s, Ipv4Addr::new(198, 18, 0, 2))));
    }
    let expired_at = t;
    for p in &pcap {
        t += ms;
        traffic.push((t, p.data.clone()));
    }

    let mut rules = RuleSet {
        rules: Vec::new(),
        paths: 0,
        offloaded: 0,
        passed: 0,
        fallbacks: Vec::new(),
        before_merge: 0,
        after_merge: 0,
    };
    let mut derive_times: Vec<Duration> = Vec::new();
    let (mut adds, mut removes) = (0usize, 0usize);
    let mut by_rules = 0u64;
    // The counts of the rule each frame flower decided met.
    let mut hits: Vec<Vec<nfkit_offload::Count>> = Vec::new();
    let mut disagreements = 0;
    let mut max_v4_rules = 0;
    let mut checked_cover = 0;
    let mut frames = 0usize;
    let mut truncated = false;
    // The rules as installed (the switch's priorities), and what the
    // switch checks saw.
    let mut installed: Vec<Rule> = Vec::new();
    let (mut switch_states, mut switch_moved) = (0usize, 0usize);
    let mut last_blacklist = BTreeSet::new();
    let mut last_live = BTreeSet::new();
    for (i, (now, f)) in traffic.iter().enumerate() {
        // Some random frames in between (biased toward the rules).
        let extra = (i % 4 == 0).then(|| frame_aimed_at(&mut random, rules.rules.iter()));
        for f in std::iter::once(f).chain(extra.as_ref()) {
            frames += 1;
            set_clock(&alone, *now);
            set_clock(&software, *now);
            // The sync: the rules are derived again when the live
            // blacklist (entries not expired as of now) changed; every
            // 64th frame a full derivation checks that nothing else
            // would have changed them.
            let bl = blacklisted(&software, *now);
            let live = live_keys(&software, *now);
            if bl != last_blacklist || live != last_live || frames == 1 {
                last_live = live;
                let t0 = Instant::now();
                let (next, cut) = derive(&img, &software, *now);
                truncated |= cut;
                derive_times.push(t0.elapsed());
                let old: BTreeSet<String> = rules.rules.iter().map(key).collect();
                let new: BTreeSet<String> = next.rules.iter().map(key).collect();
                adds += new.difference(&old).count();
                removes += old.difference(&new).count();
                // The switch as `nfkit offload --watch` makes it: no
                // frame of the traffic around it (nor random frames
                // aimed at either rule set) meets a third decision.
                let pool: Vec<Vec<u8>> =
                    traffic[i.saturating_sub(200)..(i + 200).min(traffic.len())]
                        .iter()
                        .map(|(_, f)| f.clone())
                        .chain((0..50).map(|_| {
                            frame_aimed_at(&mut random, installed.iter().chain(&next.rules))
                        }))
                        .collect();
                let (states, moved) = check_switch(&installed, &next, &pool);
                switch_states += states;
                switch_moved += moved;
                let p = switch::plan(
                    &installed.iter().map(|r| r.prio).collect::<Vec<_>>(),
                    next.rules.len(),
                )
                .unwrap_or_else(|e| panic!("{e}"));
                installed = next.rules.clone();
                for (r, &prio) in installed.iter_mut().zip(&p.prios) {
                    r.prio = prio;
                }
                rules = next;
            } else if frames.is_multiple_of(128) {
                let (full, cut) = derive(&img, &software, *now);
                truncated |= cut;
                assert!(
                    cut || full.rules.len() == rules.rules.len(),
                    "{} vs {}: {:?}",
                    full.rules.len(),
                    rules.rules.len(),
                    full.rules.iter().map(key).collect::<Vec<_>>()
                );
                if !cut {
                    assert_eq!(
                        full.rules.iter().map(key).collect::<Vec<_>>(),
                        rules.rules.iter().map(key).collect::<Vec<_>>(),
                        "rules changed without a blacklist change at frame {frames}"
                    );
                }
            }
            let v4_drops = rules
                .rules
                .iter()
                .filter(|r| {
                    r.action == RuleAction::Drop && r.pattern.value.get(12..14) == Some(&[8, 0])
                })
                .count();
            max_v4_rules = max_v4_rules.max(v4_drops);
            if bl != last_blacklist {
                // One rule per blacklisted source, adjacent ones merged.
                assert_eq!(
                    v4_drops,
                    prefix_cover(&bl),
                    "{bl:?} truncated {truncated} paths {}",
                    rules.paths
                );
                checked_cover += 1;
                last_blacklist = bl;
            }
            let want = run_xdp(&alone, ENTRY, f);
            let rule = rules.first_match(f);
            let got = match rule.map(|r| r.action) {
                Some(RuleAction::Drop) => Decision::Drop,
                Some(RuleAction::Tx) => Decision::Tx,
                Some(RuleAction::Redirect(x)) => Decision::Redirect(x),
                Some(RuleAction::Pass) | None => run_xdp(&software, ENTRY, f),
            };
            if let Some(r) = rule.filter(|r| r.action != RuleAction::Pass) {
                by_rules += 1;
                hits.push(r.counts.clone());
            }
            if got != want {
                disagreements += 1;
                println!("frame {i} at {now}: rules+program {got}, program {want}, rule {rule:?}");
            }
            if *now == flood_end {
                assert!(
                    !blacklisted(&software, *now).is_empty(),
                    "the flood blacklisted nobody"
                );
            }
            if *now == expired_at {
                assert_eq!(rules.offloading_rules(), 0, "rules left after expiry");
            }
        }
    }
    // The folded counters: what the rules dropped counts as the program's
    // DROPPED.
    let folded = nfkit_offload::fold::fold(hits.iter().map(|c| (&c[..], 1)));
    let folded_drops = folded
        .iter()
        .find(|(k, _)| k.map == "counters" && k.key == DROPPED.to_le_bytes() && k.off == 0)
        .map_or(0, |(_, v)| *v);
    let (alone_drops, software_drops) = (counter(&alone, DROPPED), counter(&software, DROPPED));
    derive_times.sort();
    let median = derive_times[derive_times.len() / 2];
    let max = derive_times[derive_times.len() - 1];
    println!(
        "ddos blacklist sync: {frames} frames, {by_rules} dropped by rules, {adds} rules added, {removes} removed, at most {max_v4_rules} IPv4 drop rules, {checked_cover} blacklist changes checked; change to rule (derivation) median {median:?}, max {max:?}; DROPPED alone {alone_drops} = program {software_drops} + rules {folded_drops}"
    );
    assert!(!truncated, "the path budget cut an analysis");
    assert_eq!(disagreements, 0);
    assert!(by_rules > 1_000, "{by_rules}");
    assert!(adds >= 3 && removes >= 3, "{adds} {removes}");
    println!("switches: {switch_states} intermediate rule states checked, {switch_moved} frame decisions changed by a switch");
    assert!(
        switch_moved > 0,
        "no switch changed a decision: the check saw nothing"
    );
    assert!(max_v4_rules >= 3, "{max_v4_rules}");
    assert!(checked_cover >= 2);
    assert_eq!(folded_drops, by_rules);
    assert_eq!(alone_drops, software_drops + folded_drops);
    for k in [0, 2] {
        assert_eq!(counter(&alone, k), counter(&software, k), "counter {k}");
    }
}

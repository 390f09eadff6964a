//! Header rewrites as pedit + csum: the paths that store constants (or
//! a field plus a constant) into the headers and fix the IPv4 checksum,
//! then TX or redirect, become rules whose rewrite, applied as pedit and
//! csum do, gives the frame the program sends, byte for byte: on every
//! packet of the example pcaps and 10,000 random frames, for a
//! clang-built XDP program and two one-NF chains of the catalogue
//! (nf/mark.c's set_dscp and set_ttl). Rewrites flower cannot make stay
//! in software with their reason.

mod common;

use common::{build_prog, random_frame, report, root, Rng};
use nfkit_control::runner::ScriptVm;
use nfkit_offload::model::{run_xdp_bytes, Decision};
use nfkit_offload::rewrite::fix_ipv4_checksum;
use nfkit_offload::RulesOptions;
use nfkit_offload::{analyse, generate, Analysis, Equivalence, Limits, Outcome, RuleSet};

const RANDOM: usize = 10_000;

/// Every packet of every example pcap.
fn example_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let dir = root().join("examples");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    names.sort();
    for p in names {
        let pk = nfkit_pcap::read_file(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        out.extend(pk.into_iter().map(|p| p.data));
    }
    out
}

/// Random frames aimed at `a`'s paths; every other one gets a right
/// IPv4 header checksum (the generator leaves it as built, then bits
/// flip), so that both kinds are checked.
fn randoms(a: &Analysis, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    (0..RANDOM)
        .map(|i| {
            let mut f = random_frame(&mut rng, a);
            if i % 2 == 0 {
                fix_ipv4_checksum(&mut f);
            }
            f
        })
        .collect()
}

fn decision(o: &nfkit_control::runner::Outcome) -> Decision {
    if let Some(e) = &o.error {
        return Decision::Other(format!("fault: {e}"));
    }
    match o.code as u32 {
        1 => Decision::Drop,
        2 => Decision::Pass,
        3 => Decision::Tx,
        4 => match o.redirect {
            Some(i) => Decision::Redirect(i),
            None => Decision::Other("redirect without a target".into()),
        },
        c => Decision::Other(format!("return {c}")),
    }
}

fn lines(r: &RuleSet) -> Vec<String> {
    let l = r.to_tc_lines("eth0", "skip_hw", &|i| format!("if{i}"));
    for x in &l {
        println!("{x}");
    }
    l
}

/// The equivalence with bytes for a clang-built program.
fn check_prog(name: &str) -> (Analysis, RuleSet, Equivalence) {
    let img = build_prog(name);
    let alone =
        nfkit_vm::Vm::new(&img, nfkit_vm::VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let software =
        nfkit_vm::Vm::new(&img, nfkit_vm::VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let a = analyse(&img, name, &alone, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    let mut eq = Equivalence::default();
    let mut ra = |f: &[u8]| run_xdp_bytes(&alone, name, f);
    let mut rs = |f: &[u8]| run_xdp_bytes(&software, name, f);
    for f in example_frames()
        .iter()
        .chain(&randoms(&a, 0x5eed ^ name.len() as u64))
    {
        eq.check_bytes(&rules, f, &mut ra, &mut rs);
    }
    report(name, &a, &rules, &eq);
    println!(
        "{name}: {} frames rewritten by rules, {} of them with a wrong IPv4 checksum on arrival",
        eq.rewritten, eq.bad_csum
    );
    (a, rules, eq)
}

#[test]
fn clang_program_rewrites_as_pedit_and_csum() {
    let (a, r, eq) = check_prog("rewrite");
    assert!(
        eq.disagreements.is_empty(),
        "{:?}",
        eq.disagreements.first()
    );
    let l = lines(&r);
    // UDP: TTL - 1, a new destination MAC, the incremental checksum
    // update as csum ip4h, then the redirect.
    assert!(
        l.iter().any(|x| x.contains("ip_proto udp")
            && x.contains(
                "action pedit ex munge eth dst set 02:00:5e:00:00:05 munge ip ttl add 0xff pipe action csum ip4h pipe action mirred egress redirect dev if5"
            )),
        "{l:#?}"
    );
    // TCP: DSCP EF, ECN kept, the checksum recomputed from scratch.
    assert!(
        l.iter().any(|x| x.contains("ip_proto tcp")
            && x.contains(
                "action pedit ex munge ip tos set 0xb8 retain 0xfc pipe action csum ip4h pipe action mirred egress redirect dev eth0"
            )),
        "{l:#?}"
    );
    let rw: Vec<_> = a.paths.iter().filter_map(|p| p.rewrite.as_ref()).collect();
    // The from-scratch checksum holds for every frame, the incremental
    // one for frames whose checksum was right.
    assert!(rw.iter().any(|w| w.csum_ip4h && !w.assumes_valid_csum));
    assert!(rw.iter().any(|w| w.csum_ip4h && w.assumes_valid_csum));
    assert!(eq.rewritten > 1000, "{}", eq.rewritten);
    assert!(
        eq.rewritten > eq.bad_csum + 500,
        "{} / {}",
        eq.rewritten,
        eq.bad_csum
    );

    // The byte check is not vacuous: a wrong edit or no checksum
    // fix-up is caught.
    let img = build_prog("rewrite");
    let vm =
        nfkit_vm::Vm::new(&img, nfkit_vm::VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    for spoil in 0..2 {
        let mut bad = r.clone();
        for x in &mut bad.rules {
            if let Some(w) = &mut x.rewrite {
                if spoil == 0 {
                    w.csum_ip4h = false;
                } else if let Some(nfkit_offload::Edit::Add { add, .. }) = w.edits.last_mut() {
                    *add = 0xfe;
                } else if let Some(nfkit_offload::Edit::Set { val, .. }) = w.edits.last_mut() {
                    *val ^= 0x80;
                }
            }
        }
        let mut e = Equivalence::default();
        let mut run = |f: &[u8]| run_xdp_bytes(&vm, "rewrite", f);
        let mut run2 = |f: &[u8]| run_xdp_bytes(&vm, "rewrite", f);
        for f in randoms(&a, 3).iter().take(2000) {
            e.check_bytes(&bad, f, &mut run, &mut run2);
        }
        assert!(
            e.disagreements.iter().any(|d| d.bytes.is_some()),
            "spoil {spoil}: not caught"
        );
    }
}

#[test]
fn rewrites_flower_cannot_make_stay_in_software() {
    let (a, r, eq) = check_prog("badcsum");
    assert!(eq.disagreements.is_empty());
    assert_eq!(r.offloading_rules(), 0, "{:#?}", r.rules);
    let why: Vec<&str> = a
        .paths
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Software(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    // The wrong checksum update: refused at the checksum bytes.
    assert!(why.iter().any(|w| w.contains("packet byte 24")), "{why:#?}");
    assert!(
        why.iter().any(|w| w.contains("not a constant rewrite")),
        "{why:#?}"
    );
}

/// A one-NF chain of the catalogue: (rules, equivalence).
fn check_chain(file: &str) -> (Analysis, RuleSet, Equivalence) {
    let path = root().join("crates/nfkit-offload/tests/progs").join(file);
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let c = nfkit_lang::compile(file, &src, &nfkit_lang::Options::default())
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let entry = c
        .entry()
        .unwrap_or_else(|| panic!("no classifier"))
        .to_string();
    let mut alone = ScriptVm::new(&c).unwrap_or_else(|e| panic!("{e}"));
    let mut software = ScriptVm::new(&c).unwrap_or_else(|e| panic!("{e}"));
    let a =
        analyse(&c.image, &entry, &alone.vm, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    let mut eq = Equivalence::default();
    let frames = example_frames();
    let rnd = randoms(&a, 0xd5c9);
    for (i, f) in frames.iter().chain(&rnd).enumerate() {
        let t = 1_000_000 * i as u64;
        let mut ra = |f: &[u8]| {
            let o = alone.run(f, t, false).unwrap_or_else(|e| panic!("{e}")).0;
            (decision(&o), o.packet)
        };
        let mut rs = |f: &[u8]| {
            let o = software
                .run(f, t, false)
                .unwrap_or_else(|e| panic!("{e}"))
                .0;
            (decision(&o), o.packet)
        };
        eq.check_bytes(&rules, f, &mut ra, &mut rs);
    }
    report(file, &a, &rules, &eq);
    println!(
        "{file}: {} frames rewritten by rules, {} of them with a wrong IPv4 checksum on arrival",
        eq.rewritten, eq.bad_csum
    );
    for p in &a.paths {
        if let Outcome::Software(w) = &p.outcome {
            println!("  software: {w}");
        }
    }
    (a, rules, eq)
}

/// The catalogue's set_dscp and set_ttl (nf/mark.c) in one-NF chains:
/// the equivalence with bytes holds, but nothing is offloaded yet: the
/// classifier (`every_packet`) reads a per-CPU map value on every path
/// (docs/offload.md, "What remains"), before the NF's rewrite is met.
#[test]
fn catalogue_mark_chains_equivalent_with_bytes() {
    for file in ["mark_dscp.py", "mark_ttl.py"] {
        let (a, r, eq) = check_chain(file);
        assert!(
            eq.disagreements.is_empty(),
            "{file}: {:?}",
            eq.disagreements.first()
        );
        assert_eq!(r.offloading_rules(), 0, "{file}");
        assert!(a.paths.iter().any(
            |p| matches!(&p.outcome, Outcome::Software(w) if w.contains("per-CPU map value"))
        ));
    }
}

/// A TCP destination NAT with incremental checksum updates (IPv4 header
/// and TCP): the rule is a u32 filter with the total-length check, then
/// `pedit ... pipe action csum iph and tcp pipe action mirred ...`.
/// act_csum's semantics are the model's (`Rewrite::apply`: the TCP
/// checksum recomputed over the total length, the frame dropped when it
/// does not hold it): byte for byte the frame the program sends, on the
/// example pcaps and 10,000 random frames; frames cut short of their
/// total length and fragments go to the program.
#[test]
fn tcp_nat_checksum_fix_up_as_csum_tcp() {
    let (a, r, eq) = check_prog("tcpnat");
    assert!(
        eq.disagreements.is_empty(),
        "{:?}",
        eq.disagreements.first()
    );
    let rw: Vec<_> = a.paths.iter().filter_map(|p| p.rewrite.as_ref()).collect();
    assert!(
        rw.iter().any(|w| w.csum_tcp && w.csum_ip4h),
        "{:#?}",
        a.paths
            .iter()
            .map(|p| (&p.outcome, &p.rewrite))
            .collect::<Vec<_>>()
    );
    let l = lines(&r);
    assert!(l.iter().any(|x| x.contains("u32 divisor 1")), "{l:#?}");
    assert!(
        l.iter().any(|x| x.contains("match u32 0 0 at nexthdr+-4")
            && x.contains(
                "pipe action csum iph and tcp pipe action mirred egress redirect dev eth0"
            )),
        "{l:#?}"
    );
    assert!(
        l.iter()
            .any(|x| x.contains("offset at 2 mask 0xffff shift 0 link")),
        "{l:#?}"
    );
    // The total-length guards for TCP.
    assert!(
        r.rules
            .iter()
            .filter(|x| x.is_guard() && x.u32_filter)
            .count()
            >= 10,
        "{:#?}",
        r.rules
    );
    let rule = r
        .rules
        .iter()
        .find(|x| x.rewrite.as_ref().is_some_and(|w| w.csum_tcp))
        .unwrap_or_else(|| panic!("no csum tcp rule"));
    assert!(eq.rewritten > 200, "{}", eq.rewritten);
    // The UDP checksum fix-up: software, with the reason.
    let why = format!("{:?} {:?}", a.paths, r.fallbacks);
    assert!(why.contains("fixes up the UDP checksum"), "{why}");
    // Frames the rule's keys match cut short of their total length (the
    // NAT's frames with a payload, cut inside it): act_csum would drop
    // them, the program rewrites them; the total-length check leaves
    // them to the program, so the decision and bytes agree.
    let img = build_prog("tcpnat");
    let vm =
        || nfkit_vm::Vm::new(&img, nfkit_vm::VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let (alone, software) = (vm(), vm());
    let mut ra = |f: &[u8]| run_xdp_bytes(&alone, "tcpnat", f);
    let mut rs = |f: &[u8]| run_xdp_bytes(&software, "tcpnat", f);
    let mut cut = Equivalence::default();
    let mut rng = Rng(0xc5);
    for f in randoms(&a, 0x7c9)
        .iter()
        .filter(|f| rule.pattern.matches(f) && nfkit_offload::u32match::holds_total_length(f))
    {
        let total = 14 + usize::from(u16::from_be_bytes([f[16], f[17]]));
        if total <= 54 {
            continue;
        }
        let g = &f[..54 + rng.below((total - 54) as u64) as usize];
        assert!(rule.pattern.matches(g));
        cut.check_bytes(&r, g, &mut ra, &mut rs);
    }
    println!(
        "tcpnat: {} rewritten; {} frames cut short of their total length, {} disagreements",
        eq.rewritten,
        cut.frames,
        cut.disagreements.len()
    );
    assert!(cut.frames > 20, "{}", cut.frames);
    assert!(
        cut.disagreements.is_empty(),
        "{:?}",
        cut.disagreements.first()
    );
    assert_eq!(cut.rewritten, 0);
}

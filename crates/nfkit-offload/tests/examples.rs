//! The acceptance's model half: the DDoS example chain (with its pcap),
//! the firewall NF's standalone exports, the hand C examples and the
//! corpus's clang-built XDP programs (with every packet of every example
//! pcap): on those packets and 10,000 random frames each, "rules, then
//! the program" decides like the program alone.

mod common;

use common::{check_program, image_of, random_frame, report, root, Rng};
use nfkit_control::runner::ScriptVm;
use nfkit_object::ProgType;
use nfkit_offload::model::Decision;
use nfkit_offload::{analyse, generate, Equivalence, Limits, Outcome, RulesOptions};

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

/// Checks frame `f` at time `t` (ns): "rules, then `software`" against
/// `alone`, both the chain's VMs.
fn check_at(
    eq: &mut Equivalence,
    rules: &nfkit_offload::RuleSet,
    vms: (&mut ScriptVm, &mut ScriptVm),
    f: &[u8],
    t: u64,
) {
    let (alone, software) = vms;
    let mut ra = |f: &[u8]| decision(&alone.run(f, t, false).unwrap_or_else(|e| panic!("{e}")).0);
    let mut rs = |f: &[u8]| {
        decision(
            &software
                .run(f, t, false)
                .unwrap_or_else(|e| panic!("{e}"))
                .0,
        )
    };
    eq.check(rules, f, &mut ra, &mut rs);
}

#[test]
fn ddos_example_chain() {
    let path = root().join("examples/ddos.py");
    let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let c = nfkit_lang::compile("ddos.py", &src, &nfkit_lang::Options::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let entry = c
        .entry()
        .unwrap_or_else(|| panic!("no classifier"))
        .to_string();
    let mut alone = ScriptVm::new(&c).unwrap_or_else(|e| panic!("{e}"));
    let mut software = ScriptVm::new(&c).unwrap_or_else(|e| panic!("{e}"));
    let t0 = std::time::Instant::now();
    let a =
        analyse(&c.image, &entry, &alone.vm, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    println!("ddos: rule generation {:?}", t0.elapsed());
    let pcap =
        nfkit_pcap::read_file(root().join("examples/ddos.pcap")).unwrap_or_else(|e| panic!("{e}"));
    let mut eq = Equivalence::default();
    let mut now = 0;
    for p in &pcap {
        now = p.ts_ns;
        let t = now;
        check_at(&mut eq, &rules, (&mut alone, &mut software), &p.data, t);
    }
    let mut rng = Rng(7);
    for _ in 0..10_000 {
        now += 1_000_000;
        let t = now;
        let f = random_frame(&mut rng, &a);
        check_at(&mut eq, &rules, (&mut alone, &mut software), &f, t);
    }
    report("ddos.py", &a, &rules, &eq);
    assert!(eq.frames >= pcap.len() + 10_000);
    assert!(eq.disagreements.is_empty());
    // What the analysis says about ddos.py today (docs/offload.md,
    // "The DDoS example"): nothing offloaded, also with the data-path
    // maps expanded and the clock as now. The parse-once block no longer
    // stops the analysis (it is run-local scratch memory): the paths now
    // reach the blacklist (an LRU map the program writes) and, with the
    // data-path maps, its sampling and token buckets (state).
    for limits in [
        Limits::default(),
        Limits {
            data_path_maps: true,
            now_ns: Some(now),
            ..Limits::default()
        },
    ] {
        let a = analyse(&c.image, &entry, &alone.vm, &limits).unwrap_or_else(|e| panic!("{e}"));
        let rules = generate(&a, &RulesOptions::default());
        assert_eq!(rules.offloaded, 0, "{limits:?}");
        assert_eq!(rules.offloading_rules(), 0, "{limits:?}");
        assert!(!a.paths.is_empty());
        let mut reasons = std::collections::BTreeMap::new();
        for p in &a.paths {
            let Outcome::Software(why) = &p.outcome else {
                panic!("ddos.py path decided: {p:?}");
            };
            assert!(why.contains("(slot ") || why.contains("reads map"), "{why}");
            assert!(!why.contains("writes a map value"), "{why}");
            assert!(!why.contains("nfkit_pktinfo"), "{why}");
            *reasons.entry(why.clone()).or_insert(0) += 1;
        }
        for (why, n) in &reasons {
            println!(
                "ddos.py ({}): {n} paths to software: {why}",
                if limits.data_path_maps {
                    "data-path maps"
                } else {
                    "default"
                }
            );
        }
        if !limits.data_path_maps {
            // Most paths reach the blacklist lookup.
            let bl = reasons
                .iter()
                .filter(|(w, _)| w.contains("lookup in lru_hash map nf_sets_src (state)"))
                .map(|(_, n)| *n)
                .sum::<usize>();
            assert!(bl * 2 > a.paths.len(), "{reasons:#?}");
        } else {
            assert!(
                !reasons.keys().any(|w| w.contains("lookup in lru_hash map")),
                "{reasons:#?}"
            );
        }
    }
}

/// Every packet of every example pcap.
fn example_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(root().join("examples")) else {
        return out;
    };
    let mut files: Vec<_> = dir.flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files {
        let name = f.to_string_lossy().to_string();
        if name.ends_with(".pcap") && !name.ends_with(".out.pcap") {
            let pkts = nfkit_pcap::read_file(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
            out.extend(pkts.into_iter().map(|p| p.data));
        }
    }
    out
}

/// One `nf_firewall_acl` rule (nf/firewall.c `struct nf_acl_rule`, 88
/// bytes): addresses and masks zero (any address), a protocol, port
/// ranges, `ACL_VALID`, the action.
fn acl_rule(proto: u8, sport: (u16, u16), dport: (u16, u16), action: u64) -> Vec<u8> {
    let mut v = vec![0u8; 88];
    v[64..66].copy_from_slice(&sport.0.to_le_bytes());
    v[66..68].copy_from_slice(&sport.1.to_le_bytes());
    v[68..70].copy_from_slice(&dport.0.to_le_bytes());
    v[70..72].copy_from_slice(&dport.1.to_le_bytes());
    v[72] = proto;
    v[73] = 1; // NF_ACL_VALID
    v[80..88].copy_from_slice(&action.to_le_bytes());
    v
}

/// The firewall's rule table: TCP to port 23 and UDP to port 53
/// dropped, TCP from ports 1000-1999 passed, then a rule on a source
/// prefix (`::ffff:10.0.0.0/104`), which the executor cannot follow
/// (`(addr ^ rule) & mask` with a non-zero rule address): the paths
/// reaching it stay in software.
fn fill_acl(vm: &nfkit_vm::Vm) {
    use nfkit_abi::verdict::Action;
    let acl = vm
        .map("nf_firewall_acl")
        .unwrap_or_else(|| panic!("no nf_firewall_acl"));
    let drop = Action::Drop.verdict(0);
    let pass = Action::Pass.verdict(0);
    let mut rules = vec![
        acl_rule(6, (0, 65535), (23, 23), drop),
        acl_rule(17, (0, 65535), (53, 53), drop),
        acl_rule(6, (1000, 1999), (0, 65535), pass),
    ];
    let mut prefix = acl_rule(0, (0, 65535), (0, 65535), drop);
    prefix[10..12].copy_from_slice(&[0xff, 0xff]);
    prefix[12] = 10;
    prefix[16..29].copy_from_slice(&[0xff; 13]);
    rules.push(prefix);
    for (i, r) in rules.iter().enumerate() {
        acl.update(&(i as u32).to_le_bytes(), r, 0)
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
}

#[test]
fn firewall_nf_standalone() {
    let frames = example_frames();
    assert!(frames.len() > 300);
    let bytes = nfkit_nf::catalogue::object("firewall", nfkit_nf::Hook::Xdp)
        .unwrap_or_else(|| panic!("no firewall object"));
    let img = image_of(bytes, "firewall.xdp.o");
    // Per entry: the rule table filled or not.
    for (entry, fill) in [
        ("xdp_acl", false),
        ("xdp_acl", true),
        ("xdp_conntrack", false),
    ] {
        let setup: &dyn Fn(&nfkit_vm::Vm) = if fill { &fill_acl } else { &|_| {} };
        let (a, rules, eq) = check_program(
            &img,
            entry,
            setup,
            &frames,
            10_000,
            &RulesOptions::default(),
        );
        assert!(eq.disagreements.is_empty(), "{entry}");
        assert_eq!(eq.frames, frames.len() + 10_000);
        let mut reasons = std::collections::BTreeMap::new();
        for p in &a.paths {
            if let Outcome::Software(w) = &p.outcome {
                *reasons.entry(w.clone()).or_insert(0) += 1;
            }
        }
        for (w, n) in &reasons {
            println!("  {entry} (rules {fill}): {n} paths to software: {w}");
        }
        if entry == "xdp_acl" {
            // The rule table is read only (the write scan follows the
            // program's stores into its parse-once block): no path is
            // software for reading it.
            assert!(
                !reasons.keys().any(|w| w.contains("nf_firewall_acl")),
                "{reasons:#?}"
            );
            assert!(a.decided() > 0, "{reasons:#?}");
        }
        if entry == "xdp_acl" && fill {
            // The port rules are decided by flower rules.
            assert!(rules.offloaded >= 2, "{}", rules.offloaded);
            assert!(eq.by_rules > 1000, "{}", eq.by_rules);
            let lines = rules.to_tc_lines("eth0", "skip_sw", &|i| format!("if{i}"));
            println!("{}", lines.join("\n"));
            // TCP to 23 and UDP to 53, each merged with the ports just
            // below it that earlier `pass` rules already took.
            for want in [
                // TCP headers cut short go to the program first.
                "protocol ip flower skip_sw ip_proto tcp tcp_flags 0x00/0xff action pass",
                "protocol ip flower skip_sw ip_flags nofrag ip_proto tcp dst_port 16-23 action drop",
                // UDP's as u32 filters (flower would read the ports of a
                // UDP header cut short).
                "protocol ip u32 skip_sw match u8 0x45 0xff at 0 match u16 0x0000 0x3fff at 6 match u8 0x11 0xff at 9 match u16 0x0034 0xfffe at 22 match u32 0x00000000 0x00000000 at 24 action drop",
                "protocol ip flower skip_sw ip_flags nofrag ip_proto tcp src_ip 10.0.0.0/8",
            ] {
                assert!(lines.iter().any(|l| l.contains(want)), "{want}: {lines:#?}");
            }
        }
    }
}

#[test]
fn clang_built_xdp_programs() {
    let mut objects: Vec<(&str, &[u8])> = nfkit_corpus::objects();
    objects.extend(nfkit_corpus::EXAMPLES_C.iter().map(|e| (e.name, e.object)));
    let frames = example_frames();
    let mut checked = 0;
    for (name, bytes) in objects {
        let Ok(obj) = nfkit_object::read::read_object(bytes, name) else {
            continue;
        };
        let Ok(img) = nfkit_object::link::link(&[obj]) else {
            continue;
        };
        if nfkit_vm::Vm::new(&img, nfkit_vm::VmConfig::kernel()).is_err() {
            println!("{name}: the VM does not load it, skipped");
            continue;
        }
        let entries: Vec<String> = img
            .entries
            .iter()
            .filter(|e| e.prog_type == ProgType::Xdp)
            .map(|e| e.name.clone())
            .collect();
        for entry in entries {
            let (_, _, eq) = check_program(
                &img,
                &entry,
                &|_| {},
                &frames,
                10_000,
                &RulesOptions::default(),
            );
            assert!(eq.disagreements.is_empty(), "{name}: {entry}");
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked}");
}

/// Every other example chain on every example pcap and 10,000 random
/// frames: "rules, then the chain" decides like the chain alone. Their
/// parse-once block is run-local memory now, so the analysis reaches
/// their NFs' logic (what stops it is printed).
#[test]
fn example_chains() {
    let frames = example_frames();
    let mut total = Equivalence::default();
    for name in [
        "dscp_dispatch.py",
        "flow_limiter.py",
        "port_stats.py",
        "router.py",
        "tcp_options.py",
    ] {
        let path = root().join("examples").join(name);
        let src = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let c = nfkit_lang::compile(name, &src, &nfkit_lang::Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let Some(entry) = c.entry().map(str::to_string) else {
            continue;
        };
        let mut alone = ScriptVm::new(&c).unwrap_or_else(|e| panic!("{e}"));
        let mut software = ScriptVm::new(&c).unwrap_or_else(|e| panic!("{e}"));
        let a = analyse(&c.image, &entry, &alone.vm, &Limits::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let rules = generate(&a, &RulesOptions::default());
        let mut eq = Equivalence::default();
        let mut rng = Rng(11);
        let randoms: Vec<Vec<u8>> = (0..10_000).map(|_| random_frame(&mut rng, &a)).collect();
        for (i, f) in frames.iter().chain(&randoms).enumerate() {
            let t = 1_000_000 * i as u64;
            check_at(&mut eq, &rules, (&mut alone, &mut software), f, t);
        }
        report(name, &a, &rules, &eq);
        // The classifier no longer multiplies the paths (VLAN tags and
        // IPv6 extension headers end in software at once, its
        // extension-header test is followed): the analysis is complete.
        assert!(!a.truncated, "{name}: path budget reached");
        let mut reasons = std::collections::BTreeMap::new();
        for p in &a.paths {
            if let Outcome::Software(w) = &p.outcome {
                assert!(!w.contains("writes a map value"), "{name}: {w}");
                *reasons.entry(w.clone()).or_insert(0) += 1;
            }
        }
        for (w, n) in reasons {
            println!("  {name}: {n} paths to software: {w}");
        }
        assert!(
            eq.disagreements.is_empty(),
            "{name}: {:?}",
            eq.disagreements
        );
        assert_eq!(eq.frames, frames.len() + 10_000);
        total.frames += eq.frames;
        total.by_rules += eq.by_rules;
    }
    println!(
        "example chains: {} frames, {} decided by rules",
        total.frames, total.by_rules
    );
}

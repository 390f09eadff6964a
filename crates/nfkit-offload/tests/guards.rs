//! The u32 guards (`guard`), in the model: frames outside the field
//! model's assumptions (IPv4 options, IHL below 5, an IP version that is
//! not the EtherType's) aimed at the rules. The model matches flower
//! as the kernel does for them (the L4 header found after the options,
//! no version or IHL key: `fields::flower_frame`). With the guards,
//! "rules, then the program" decides like the program alone on every
//! such frame; without them, the ACL's rules decide some of them
//! differently (so the frames do reach what the guards are for).

mod common;

use common::{build_prog, random_frame, Rng};
use nfkit_offload::model::run_xdp;
use nfkit_offload::{analyse, generate, Equivalence, Limits, RuleSet, RulesOptions};
use nfkit_vm::{Vm, VmConfig};

/// `f` made to break one assumption, chosen by `kind`.
fn outside(rng: &mut Rng, mut f: Vec<u8>, kind: u64) -> Option<Vec<u8>> {
    let eth = f.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]))?;
    match (eth, kind) {
        (0x0800, 0) if f.len() >= 34 => {
            // k words of options (NOPs, an end) after the fixed header.
            let k = 1 + rng.below(10) as usize;
            let mut opts = vec![1u8; k * 4];
            opts[k * 4 - 1] = 0;
            f.splice(34..34, opts);
            f[14] = 0x40 | (5 + k as u8);
            Some(f)
        }
        (0x0800, 1) if f.len() >= 15 => {
            f[14] = (f[14] & 0xf0) | rng.below(5) as u8;
            Some(f)
        }
        (0x0800, _) if f.len() >= 15 => {
            let v = [0u8, 1, 5, 6, 7, 15][rng.below(6) as usize];
            f[14] = (v << 4) | (f[14] & 0x0f);
            Some(f)
        }
        (0x86dd, _) if f.len() >= 15 => {
            let v = [0u8, 4, 5, 7, 15][rng.below(5) as usize];
            f[14] = (v << 4) | (f[14] & 0x0f);
            Some(f)
        }
        _ => None,
    }
}

fn without_guards(r: &RuleSet) -> RuleSet {
    let mut u = r.clone();
    u.rules.retain(|x| !(x.u32_filter && x.is_guard()));
    u
}

/// (frames, disagreements with guards, without, frames the guards took).
fn run(name: &str, frames: usize) -> (usize, usize, usize, usize) {
    let img = build_prog(name);
    let vm = || Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let (alone, software, unguarded_sw) = (vm(), vm(), vm());
    let a = analyse(&img, name, &alone, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    let bare = without_guards(&rules);
    assert!(rules.rules.len() > bare.rules.len(), "{name}: no guards");
    let mut rng = Rng(0x5eed ^ name.len() as u64);
    let (mut with, mut without) = (Equivalence::default(), Equivalence::default());
    let mut guarded = 0;
    while with.frames < frames {
        let f = random_frame(&mut rng, &a);
        let kind = rng.below(4);
        let Some(f) = outside(&mut rng, f, kind) else {
            continue;
        };
        if rules
            .first_match(&f)
            .is_some_and(|r| r.u32_filter && r.is_guard())
        {
            guarded += 1;
        }
        with.check(&rules, &f, &mut |x| run_xdp(&alone, name, x), &mut |x| {
            run_xdp(&software, name, x)
        });
        without.check(&bare, &f, &mut |x| run_xdp(&alone, name, x), &mut |x| {
            run_xdp(&unguarded_sw, name, x)
        });
    }
    for d in with.disagreements.iter().take(3) {
        println!("{name}: {d:?}");
    }
    println!(
        "{name}: {} frames outside the assumptions, {} taken by guards; disagreements with guards {}, without {}",
        with.frames,
        guarded,
        with.disagreements.len(),
        without.disagreements.len()
    );
    (
        with.frames,
        with.disagreements.len(),
        without.disagreements.len(),
        guarded,
    )
}

#[test]
fn guards_keep_frames_outside_the_model_from_flower() {
    let mut missed_without = 0;
    for name in ["acl", "tcpflags", "v6frag"] {
        let (n, with, without, guarded) = run(name, 3000);
        assert_eq!(with, 0, "{name}: guarded rules disagree with the program");
        assert!(guarded > n / 4, "{name}: guards took {guarded} of {n}");
        missed_without += without;
    }
    assert!(
        missed_without > 0,
        "without guards no frame was decided differently: the test frames miss the case"
    );
}

/// TCP frames cut inside their header (they hold the ports, 4 to 19 of
/// the 20 header bytes): flower reads their ports, and its flags key is
/// zero. The ACL's TCP port rules would take some of them, which the
/// program passes (it needs the whole header); the flags guard hands
/// them all to the program.
#[test]
fn tcp_cut_guard_keeps_short_tcp_headers_from_port_rules() {
    let name = "acl";
    let img = build_prog(name);
    let vm = || Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let (alone, software, bare_sw) = (vm(), vm(), vm());
    let a = analyse(&img, name, &alone, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    assert_eq!(
        rules
            .rules
            .iter()
            .filter(|r| nfkit_offload::guard::is_tcp_cut_guard(r))
            .count(),
        1,
        "{:#?}",
        rules.rules
    );
    let lines = rules.to_tc_lines("eth0", "skip_hw", &|i| format!("if{i}"));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ip_proto tcp tcp_flags 0x00/0xff action pass")),
        "{lines:#?}"
    );
    let mut bare = rules.clone();
    bare.rules
        .retain(|r| !nfkit_offload::guard::is_tcp_cut_guard(r));
    let mut rng = Rng(0xc07);
    let (mut with, mut without) = (Equivalence::default(), Equivalence::default());
    while with.frames < 3000 {
        let mut f = random_frame(&mut rng, &a);
        if f.len() < 54 || f[12..14] != [8, 0] || f[14] != 0x45 || f[23] != 6 {
            continue;
        }
        f[20..22].fill(0);
        f.truncate(38 + rng.below(16) as usize);
        with.check(&rules, &f, &mut |x| run_xdp(&alone, name, x), &mut |x| {
            run_xdp(&software, name, x)
        });
        without.check(&bare, &f, &mut |x| run_xdp(&alone, name, x), &mut |x| {
            run_xdp(&bare_sw, name, x)
        });
    }
    println!(
        "{} TCP frames cut inside the header: disagreements with the guard {}, without {}",
        with.frames,
        with.disagreements.len(),
        without.disagreements.len()
    );
    assert_eq!(
        with.disagreements.len(),
        0,
        "{:?}",
        with.disagreements.first()
    );
    assert!(
        without.disagreements.len() > 10,
        "{}",
        without.disagreements.len()
    );
}

/// UDP frames cut inside their header (they hold the ports, 4 to 7 of
/// the 8 header bytes): flower would read their ports, so the ACL's UDP
/// port rules are u32 filters, which match only frames holding the
/// whole header. The same rules as flower rules disagree with the
/// program on such frames.
#[test]
fn udp_port_rules_are_u32_filters_that_skip_cut_headers() {
    let name = "acl";
    let img = build_prog(name);
    let vm = || Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let (alone, software, flower_sw) = (vm(), vm(), vm());
    let a = analyse(&img, name, &alone, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    let u32_rules = rules
        .rules
        .iter()
        .filter(|r| r.u32_filter && !r.is_guard())
        .count();
    assert!(u32_rules >= 2, "{:#?}", rules.rules);
    // The same rules as flower would match them.
    let mut as_flower = rules.clone();
    for r in &mut as_flower.rules {
        if !r.is_guard() {
            r.u32_filter = false;
        }
    }
    let mut rng = Rng(0x0d9);
    let (mut with, mut flower) = (Equivalence::default(), Equivalence::default());
    while with.frames < 3000 {
        let mut f = random_frame(&mut rng, &a);
        if f.len() < 42 || f[12..14] != [8, 0] || f[14] != 0x45 || f[23] != 17 {
            continue;
        }
        f[20..22].fill(0);
        f.truncate(38 + rng.below(4) as usize);
        with.check(&rules, &f, &mut |x| run_xdp(&alone, name, x), &mut |x| {
            run_xdp(&software, name, x)
        });
        flower.check(
            &as_flower,
            &f,
            &mut |x| run_xdp(&alone, name, x),
            &mut |x| run_xdp(&flower_sw, name, x),
        );
    }
    println!(
        "{} UDP frames cut inside the header, {u32_rules} u32 rules: disagreements {}, as flower rules {}",
        with.frames,
        with.disagreements.len(),
        flower.disagreements.len()
    );
    assert_eq!(
        with.disagreements.len(),
        0,
        "{:?}",
        with.disagreements.first()
    );
    assert!(
        flower.disagreements.len() > 10,
        "{}",
        flower.disagreements.len()
    );
}

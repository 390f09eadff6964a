//! Programs in eBPF assembly: a bpf-to-bpf call followed into, and a
//! loop cut by the depth budget.

mod common;

use nfkit_object::{Image, ProgType};
use nfkit_offload::model::run_xdp;
use nfkit_offload::source::NoMaps;
use nfkit_offload::{analyse, generate, Equivalence, Limits, Outcome, RulesOptions};
use nfkit_vm::{Vm, VmConfig};

fn image(text: &str) -> Image {
    let insns = nfkit_isa::assemble(text, None).unwrap_or_else(|e| panic!("{e}"));
    Image::from_insns("prog", ProgType::Xdp, insns)
}

/// The `tc` lines of `img`'s rules on `eth0`, with default limits.
fn tc_lines(img: &Image) -> Vec<String> {
    let a = analyse(img, "prog", &NoMaps, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    generate(&a, &RulesOptions::default()).to_tc_lines("eth0", "", &|i| format!("if{i}"))
}

fn equivalent(img: &Image) -> Equivalence {
    let a = analyse(img, "prog", &NoMaps, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, &RulesOptions::default());
    let vm = Vm::new(img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e}"));
    let mut run = |f: &[u8]| run_xdp(&vm, "prog", f);
    let mut run2 = |f: &[u8]| run_xdp(&vm, "prog", f);
    let mut eq = Equivalence::default();
    let mut rng = common::Rng(11);
    for _ in 0..2000 {
        let f = common::random_frame(&mut rng, &a);
        eq.check(&rules, &f, &mut run, &mut run2);
    }
    eq
}

#[test]
fn call_into_a_subprogram() {
    let img = image(
        "
        call local check
        exit
    check:
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 14
        r0 = 2
        if r4 > r3 goto out
        r5 = *(u16 *)(r2 + 12)
        if r5 != 0xdd86 goto out
        r0 = 1
    out:
        exit
    ",
    );
    let lines = tc_lines(&img);
    assert_eq!(
        lines,
        vec!["tc filter add dev eth0 ingress prio 1 protocol ipv6 flower action drop"]
    );
    assert!(equivalent(&img).disagreements.is_empty());
}

#[test]
fn loop_beyond_the_depth_budget_is_software() {
    let img = image(
        "
        r0 = 0
    again:
        r0 += 1
        if r0 < 100000 goto again
        r0 = 1
        exit
    ",
    );
    let a = analyse(&img, "prog", &NoMaps, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.paths.len(), 1);
    assert!(matches!(&a.paths[0].outcome, Outcome::Software(w) if w.contains("depth budget")));
    assert!(generate(&a, &RulesOptions::default()).rules.is_empty());
    // A short loop is unrolled and decided.
    let short = image(
        "
        r0 = 0
    again:
        r0 += 1
        if r0 < 10 goto again
        r0 = 1
        exit
    ",
    );
    let a = analyse(&short, "prog", &NoMaps, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(generate(&a, &RulesOptions::default()).offloaded, 1);
    assert!(equivalent(&short).disagreements.is_empty());
}

/// A set-membership test by a variable shift (`1 << proto & MASK`, how
/// clang writes `proto == 6 || proto == 17`): split on the protocol's
/// values, one exact `ip_proto` per alternative.
#[test]
fn shift_by_a_header_field_is_a_membership_test() {
    let img = image(
        "
        r2 = *(u32 *)(r1 + 0)
        r3 = *(u32 *)(r1 + 4)
        r4 = r2
        r4 += 34
        r0 = 2
        if r4 > r3 goto out
        r5 = *(u16 *)(r2 + 12)
        if r5 != 0x8 goto out
        r5 = *(u8 *)(r2 + 14)
        if r5 != 0x45 goto out
        r5 = *(u16 *)(r2 + 20)
        r5 &= 0xff3f
        if r5 != 0 goto out
        r5 = *(u8 *)(r2 + 23)
        if r5 > 63 goto out
        r6 = 1
        r6 <<= r5
        r6 &= 0x20040
        if r6 == 0 goto out
        r0 = 1
    out:
        exit
    ",
    );
    let lines = tc_lines(&img);
    assert!(
        lines.iter().any(|l| l.contains("ip_proto tcp action drop")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("ip_proto udp action drop")),
        "{lines:#?}"
    );
    let eq = equivalent(&img);
    assert!(eq.disagreements.is_empty(), "{:?}", eq.disagreements);
    assert!(eq.by_rules > 0);
}

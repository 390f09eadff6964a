//! Map sync's derivations with the regions' analyses cached
//! ([`Deriver`]): over a sequence of blacklist changes and clock steps
//! (entries added, expiry times changed, the clock passing an expiry),
//! every cached derivation gives exactly the rules of a derivation from
//! scratch; regions whose reads are unchanged come from the cache, the
//! others are analysed again.

mod common;

use common::build_prog;
use nfkit_offload::{analyse, generate, hoist, Deriver, Limits, RulesOptions};
use nfkit_vm::{Vm, VmConfig};

const ENTRY: &str = "ddos_blacklist";

fn mapped(a: [u8; 4]) -> Vec<u8> {
    let mut k = vec![0u8; 10];
    k.extend_from_slice(&[0xff, 0xff]);
    k.extend_from_slice(&a);
    k
}

#[test]
fn cached_derivations_equal_fresh_ones() {
    let img = build_prog(ENTRY);
    let vm = Vm::new(&img, VmConfig::kernel()).unwrap_or_else(|e| panic!("{e:?}"));
    let bl = vm
        .map("blacklist")
        .unwrap_or_else(|| panic!("no blacklist"));
    let set = |a: [u8; 4], exp: u64| {
        bl.update(&mapped(a), &exp.to_le_bytes(), 0)
            .unwrap_or_else(|e| panic!("{e:?}"))
    };
    for i in 0..4u8 {
        set([198, 19, 1, i], 5_000);
    }
    let options = RulesOptions::default();
    let mut deriver = Deriver::new();
    // (step, clock): 0 fresh; 1 nothing changed; 2 one source added;
    // 3 an expiry moved; 4 the clock inside every window; 5 the clock
    // past 198.19.1.0-3's expiry (5,000) but not the new ones'.
    let mut seen = Vec::new();
    for (step, now) in [
        (0, 1_000u64),
        (1, 1_000),
        (2, 1_500),
        (3, 2_000),
        (4, 4_999),
        (5, 5_000),
    ] {
        match step {
            2 => set([198, 19, 1, 9], 9_000),
            3 => set([198, 19, 1, 9], 8_000),
            _ => {}
        }
        let limits = Limits {
            data_path_maps: true,
            now_ns: Some(now),
            max_map_entries: 32,
            ..Limits::default()
        };
        let d = deriver
            .derive(&img, ENTRY, &vm, &limits, &options)
            .unwrap_or_else(|e| panic!("{e}"));
        let a = analyse(&img, ENTRY, &vm, &limits).unwrap_or_else(|e| panic!("{e}"));
        let (h, n) = hoist(&img, &vm, &limits, &a).unwrap_or_else(|e| panic!("{e}"));
        let fresh = generate(&h, &options);
        assert_eq!(d.hoisted, n, "step {step}: regions hoisted");
        assert_eq!(d.analysis.paths, h.paths, "step {step}: paths");
        assert_eq!(d.rules.rules, fresh.rules, "step {step}: rules");
        eprintln!(
            "step {step} (now {now}): {} regions hoisted, {} from the cache, {} analysed, {} rules; {:?} + {:?} + {:?}",
            d.hoisted,
            d.regions_cached,
            d.regions_analysed,
            d.rules.rules.len(),
            d.analyse_time,
            d.hoist_time,
            d.generate_time
        );
        seen.push((d.hoisted, d.regions_cached, d.regions_analysed));
    }
    let (h0, c0, a0) = seen[0];
    // Four IPv4 sources and their v4-mapped IPv6 form.
    assert_eq!(h0, 8, "regions at first");
    assert_eq!(c0, 0, "an empty cache serves nothing");
    assert!(a0 >= h0, "every region analysed at first");
    assert_eq!(
        seen[1],
        (h0, a0, 0),
        "nothing changed: every region from the cache"
    );
    let (h2, c2, a2) = seen[2];
    assert_eq!(h2, h0 + 2, "the new source's two regions");
    assert!(
        a2 >= 2 && c2 >= h0,
        "only the new source's regions analysed: {:?}",
        seen[2]
    );
    let (_, _, a3) = seen[3];
    assert!(
        (2..a2 + 1).contains(&a3),
        "the moved expiry re-analyses that source's regions: {:?}",
        seen[3]
    );
    assert_eq!(
        seen[4].2, 0,
        "a clock inside every window re-analyses nothing: {:?}",
        seen[4]
    );
    assert_eq!(
        seen[5].0, 2,
        "past the expiry only the newest source stays: {:?}",
        seen[5]
    );
}

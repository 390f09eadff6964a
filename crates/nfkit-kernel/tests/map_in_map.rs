//! Maps of maps (`tests/progs/map_in_map.c`: an array of array maps and a
//! hash of hash maps, declared the libbpf way with statically initialised
//! slots) in the VM and the kernel: the same packets through both, the
//! verdict of each compared, and after each phase every map — the outer
//! maps as slot -> inner map name (the kernel gives inner map ids, the
//! VM indices of its map table), the inner maps entry by entry. Between
//! the phases the control plane puts `counts_spare` into the array's
//! empty slot 1 and takes `flows_y` out of the hash's key 3.
//!
//! `map_in_map_overread.c` reads past a value of an inner map: the VM
//! faults with the kernel's terms, the kernel refuses it at load.

mod common;

use common::compile;
use nfkit_kernel::{load_image, KMap, LoadOptions, Loaded, TestRun};
use nfkit_object::{Image, MapType, ProgType};
use nfkit_vm::{Context, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use std::collections::BTreeMap;

/// A 60-byte IPv4/UDP frame whose first three bytes (the destination
/// MAC) steer the program.
fn frame(b: [u8; 3]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..3].copy_from_slice(&b);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = [
        0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
    ];
    f[14..34].copy_from_slice(&ip);
    f[34..42].copy_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 26, 0, 0]);
    f
}

fn packets(seed: u64, n: usize) -> Vec<[u8; 3]> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            [x as u8, (x >> 8) as u8, (x >> 16) as u8]
        })
        .collect()
}

type Contents = BTreeMap<Vec<u8>, String>;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every map of the kernel side; outer values as inner map names.
fn kernel_maps(k: &Loaded) -> BTreeMap<String, Contents> {
    let by_id: BTreeMap<u32, &str> = k
        .maps()
        .iter()
        .map(|m| (m.id().expect("map id"), m.name()))
        .collect();
    let outer = |m: &KMap| matches!(m.map_type(), MapType::ArrayOfMaps | MapType::HashOfMaps);
    k.maps()
        .iter()
        .map(|m| {
            let entries = m.entries().expect("kernel entries");
            let c = entries
                .into_iter()
                .map(|(key, v)| {
                    let shown = if outer(m) {
                        let id = u32::from_le_bytes(v[..4].try_into().expect("4 bytes"));
                        by_id.get(&id).map_or(format!("id {id}"), |n| n.to_string())
                    } else {
                        hex(&v)
                    };
                    (key, shown)
                })
                .collect();
            (m.name().to_string(), c)
        })
        .collect()
}

/// Every map of the VM side; outer values as inner map names.
fn vm_maps(vm: &Vm) -> BTreeMap<String, Contents> {
    vm.maps()
        .iter()
        .map(|m| {
            let c = m
                .entries()
                .into_iter()
                .map(|(key, v)| {
                    let shown = match m.outer() {
                        Some(_) => {
                            let i = u32::from_le_bytes(v[..4].try_into().expect("4 bytes"));
                            vm.maps()
                                .by_index(i as usize)
                                .map_or(format!("#{i}"), |x| x.name().to_string())
                        }
                        None => hex(&v),
                    };
                    (key, shown)
                })
                .collect();
            (m.name().to_string(), c)
        })
        .collect()
}

/// Runs `pkts` through both programs on both sides; the disagreements.
fn run_phase(vm: &Vm, k: &Loaded, pkts: &[[u8; 3]], tally: &mut [usize; 256]) -> Vec<String> {
    let mut wrong = Vec::new();
    for (entry, ty) in [
        ("mim_array", ProgType::Xdp),
        ("mim_hash", ProgType::SchedCls),
    ] {
        for b in pkts {
            let pkt = frame(*b);
            let ctx = match ty {
                ProgType::Xdp => Context::Xdp(XdpMd::new(&pkt)),
                _ => Context::Skb(SkBuff::new(&pkt)),
            };
            let v = vm.run(entry, ctx, &RunOptions::default());
            let kr = k
                .prog(entry)
                .expect("kernel prog")
                .test_run(&TestRun::packet(&pkt));
            match (&v.result, kr) {
                (Ok(r), Ok(out)) if *r as u32 == out.retval => {
                    tally[(out.retval & 0xff) as usize] += 1;
                }
                (vr, kr) => wrong.push(format!(
                    "{entry} {b:02x?}: VM {vr:?}, kernel {:?}",
                    kr.map(|o| o.retval)
                )),
            }
        }
    }
    wrong
}

fn compare_maps(vm: &Vm, k: &Loaded, phase: &str) -> Vec<String> {
    let (vmm, km) = (vm_maps(vm), kernel_maps(k));
    let mut wrong = Vec::new();
    for (name, kc) in &km {
        match vmm.get(name) {
            Some(vc) if vc == kc => {}
            vc => wrong.push(format!("{phase}: map {name}: VM {vc:?}, kernel {kc:?}")),
        }
    }
    if vmm.len() != km.len() {
        wrong.push(format!(
            "{phase}: VM has {} maps, kernel {}",
            vmm.len(),
            km.len()
        ));
    }
    wrong
}

#[test]
fn maps_of_maps_agree_with_the_kernel() {
    if !common::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let image = Image::from_elf(&compile("map_in_map"), "map_in_map.o").expect("image");
    let vm = Vm::new(&image, VmConfig::kernel()).expect("VM load");
    let k = load_image(&image, &LoadOptions::default()).expect("kernel load");
    let mut wrong = compare_maps(&vm, &k, "loaded");
    let start = vm_maps(&vm);
    assert_eq!(
        start["by_slot"].len(),
        2,
        "statically initialised slots: {start:?}"
    );
    assert_eq!(start["by_slot"][&0u32.to_le_bytes().to_vec()], "counts_a");
    assert_eq!(start["by_key"][&3u32.to_le_bytes().to_vec()], "flows_y");
    let mut tally = [0usize; 256];
    wrong.extend(run_phase(&vm, &k, &packets(0x9e37_79b9, 300), &mut tally));
    wrong.extend(compare_maps(&vm, &k, "phase 1"));

    // The control plane changes the outer maps' slots on both sides.
    let spare = vm.map("counts_spare").expect("spare");
    let one = 1u32.to_le_bytes();
    let three = 3u32.to_le_bytes();
    vm.map("by_slot")
        .expect("by_slot")
        .update(&one, &(spare.index as u32).to_le_bytes(), 0)
        .expect("VM slot 1");
    vm.map("by_key")
        .expect("by_key")
        .delete(&three)
        .expect("VM key 3");
    let kspare = k.map("counts_spare").expect("kernel spare");
    let kslot = k.map("by_slot").expect("kernel by_slot");
    kslot
        .update(&one, &(kspare.fd() as u32).to_le_bytes(), 0)
        .expect("kernel slot 1");
    k.map("by_key")
        .expect("by_key")
        .delete(&three)
        .expect("kernel key 3");
    wrong.extend(run_phase(&vm, &k, &packets(0x2545_f491, 300), &mut tally));
    wrong.extend(compare_maps(&vm, &k, "phase 2"));

    // A map that does not fit the inner definition is refused.
    let flows = vm.map("flows_x").expect("flows_x").index as u32;
    assert!(vm
        .map("by_slot")
        .expect("by_slot")
        .update(&three, &flows.to_le_bytes(), 0)
        .is_err());

    let verdicts: Vec<String> = tally
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(v, n)| format!("{v}:{n}"))
        .collect();
    println!(
        "maps of maps: 1200 runs, verdicts {}, {} disagreements",
        verdicts.join(" "),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every path was taken: pass/ok (empty slots), tx, drop, aborted,
    // pipe (insert), reclassify (delete), unspec (count).
    for v in [0u32, 1, 2, 3, 0xff] {
        assert!(
            tally[v as usize] > 0,
            "verdict {v} never seen: {verdicts:?}"
        );
    }
}

#[test]
fn inner_map_values_are_bounded_like_the_kernel() {
    let image = Image::from_elf(&compile("map_in_map_overread"), "overread.o").expect("image");
    let vm = Vm::new(&image, VmConfig::kernel()).expect("VM load");
    // Element 1 holds data: a read through element 0's pointer must not see it.
    let counts = vm.map("counts_a").expect("counts_a");
    counts
        .update(&1u32.to_le_bytes(), &7u64.to_le_bytes(), 0)
        .expect("element 1");
    let pkt = frame([0, 0, 0]);
    let res = vm.run(
        "overread",
        Context::Xdp(XdpMd::new(&pkt)),
        &RunOptions::default(),
    );
    let err = res.result.expect_err("the read past the value faults");
    assert!(err.to_string().contains("value_size=8 off=8"), "{err}");
    if !common::is_root() {
        return;
    }
    match load_image(&image, &LoadOptions::default()) {
        Err(nfkit_kernel::KernelError::Verifier { log, .. }) => {
            assert!(log.contains("invalid access to map value"), "{log}")
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("the kernel accepted a read past an inner map's value"),
    }
}

//! `bpf_redirect_map` into a cpumap, an xskmap and a devmap_hash
//! (`tests/progs/redirect_maps.c`), in the VM and through
//! `BPF_PROG_TEST_RUN`: for every key (present and missing) and every
//! flags byte, both give the same verdict — `XDP_REDIRECT` for a present
//! entry, the flags' low bits for a missing one, `XDP_ABORTED` for flags
//! the map type does not take — and the VM reports the target it
//! redirected to (`cpu 1 (map #0)`, `xsk map #1 key 2`, ...).
//!
//! The kernel's xskmap stays empty (its entries are AF_XDP sockets); the
//! VM's gets an entry in a second pass, checked against the expected
//! verdicts alone.

use nfkit_kernel::{load_image, LoadOptions, TestRun};
use nfkit_object::Image;
use nfkit_vm::{Context, Redirect, RunOptions, Vm, VmConfig, XdpMd};

mod common;

use common::compile;

const XDP_ABORTED: u64 = 0;
const XDP_REDIRECT: u64 = 4;
const BROADCAST: u64 = 1 << 3;
const EXCLUDE_INGRESS: u64 = 1 << 4;

fn frame(key: u8, flags: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0] = key;
    f[1] = flags;
    f[12] = 0x08;
    f
}

/// What the kernel's `__bpf_xdp_redirect_map` answers.
fn expected(devmap: bool, present: bool, flags: u64) -> u64 {
    let allowed = if devmap {
        3 | BROADCAST | EXCLUDE_INGRESS
    } else {
        3
    };
    if flags & !allowed != 0 {
        XDP_ABORTED
    } else if present || flags & BROADCAST != 0 {
        XDP_REDIRECT
    } else {
        flags & 3
    }
}

/// The target the VM should report for a redirect of `key` through
/// `entry`'s map (index `map`), absent a broadcast.
fn target(entry: &str, map: usize, key: u32) -> Redirect {
    match entry {
        "to_cpu" => Redirect::Cpu { map, cpu: key },
        "to_xsk" => Redirect::Xsk { map, key },
        _ => Redirect::Map {
            map,
            key,
            ifindex: Some(1),
        },
    }
}

/// Runs every (key, flags) frame through `entry` in the VM (and the
/// kernel when given); the disagreements.
fn sweep(
    vm: &Vm,
    kernel: Option<&nfkit_kernel::Loaded>,
    entry: &str,
    present: &[u32],
) -> (Vec<String>, usize) {
    let (map_name, devmap) = match entry {
        "to_cpu" => ("cpus", false),
        "to_xsk" => ("xsks", false),
        _ => ("ports", true),
    };
    let map = vm.map(map_name).expect("map").index;
    let mut wrong = Vec::new();
    let mut runs = 0;
    for key in 0u8..4 {
        for flags in 0u8..=255 {
            let pkt = frame(key, flags);
            let want = expected(devmap, present.contains(&u32::from(key)), u64::from(flags));
            let res = vm.run(
                entry,
                Context::Xdp(XdpMd::new(&pkt)),
                &RunOptions::default(),
            );
            runs += 1;
            let got = res.result.as_ref().map_err(|e| e.to_string()).copied();
            if got != Ok(want) {
                wrong.push(format!(
                    "{entry} key {key} flags {flags:#x}: VM {got:?}, want {want}"
                ));
                continue;
            }
            let want_target = match want {
                XDP_REDIRECT if u64::from(flags) & BROADCAST != 0 => Some(Redirect::Broadcast {
                    map,
                    exclude_ingress: u64::from(flags) & EXCLUDE_INGRESS != 0,
                }),
                XDP_REDIRECT => Some(target(entry, map, u32::from(key))),
                _ => None,
            };
            if res.redirect != want_target {
                wrong.push(format!(
                    "{entry} key {key} flags {flags:#x}: VM reports {:?}, want {want_target:?}",
                    res.redirect
                ));
            }
            let Some(k) = kernel else { continue };
            let prog = k.prog(entry).expect("kernel prog");
            match prog.test_run(&TestRun::packet(&pkt)) {
                Ok(out) if u64::from(out.retval) == want => {}
                Ok(out) => wrong.push(format!(
                    "{entry} key {key} flags {flags:#x}: kernel {}, VM and model {want}",
                    out.retval
                )),
                Err(e) => wrong.push(format!("{entry} key {key} flags {flags:#x}: kernel: {e}")),
            }
        }
    }
    (wrong, runs)
}

#[test]
fn redirect_maps_agree_with_the_kernel() {
    if !common::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let image = Image::from_elf(&compile("redirect_maps"), "redirect_maps.o").expect("image");
    let vm = Vm::new(&image, VmConfig::kernel()).expect("VM load");
    let kernel = load_image(&image, &LoadOptions::default()).expect("kernel load");
    // cpumap slot 1: CPU 1's queue of 192 frames (struct bpf_cpumap_val);
    // devmap_hash key 1: the loopback device. The xskmap stays empty.
    let qsize: Vec<u8> = [192u32, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let one = 1u32.to_le_bytes();
    for (map, v) in [("cpus", &qsize[..]), ("ports", &one[..])] {
        vm.map(map)
            .expect("VM map")
            .update(&one, v, 0)
            .expect("VM update");
        let km = kernel.map(map).expect("kernel map");
        km.update(&one, v, 0).expect("kernel update");
    }
    let mut wrong = Vec::new();
    let mut runs = 0;
    for (entry, present) in [("to_cpu", &[1][..]), ("to_xsk", &[]), ("to_port", &[1])] {
        let (w, n) = sweep(&vm, Some(&kernel), entry, present);
        wrong.extend(w);
        runs += n;
    }
    // The VM's xskmap takes a placeholder value for slot 2.
    vm.map("xsks")
        .expect("xsks")
        .update(&2u32.to_le_bytes(), &7u32.to_le_bytes(), 0)
        .expect("xsk entry");
    let (w, n) = sweep(&vm, None, "to_xsk", &[2]);
    wrong.extend(w);
    runs += n;
    println!(
        "redirect maps: {runs} VM runs, {} disagreements",
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn cpumap_entries_follow_the_kernel() {
    let image = Image::from_elf(&compile("redirect_maps"), "redirect_maps.o").expect("image");
    let config = VmConfig {
        ncpus: 2,
        ..VmConfig::kernel()
    };
    let vm = Vm::new(&image, config).expect("VM load");
    let cpus = vm.map("cpus").expect("cpus");
    let val = |q: u32| -> Vec<u8> { [q, 0].iter().flat_map(|v| v.to_le_bytes()).collect() };
    let key = |k: u32| k.to_le_bytes();
    cpus.update(&key(0), &val(64), 0).expect("qsize 64");
    assert!(cpus.lookup(&key(0)).expect("lookup").is_some());
    // Queue size 0 clears the slot; beyond max_entries is E2BIG; a queue
    // above 16384 frames is refused.
    cpus.update(&key(0), &val(0), 0).expect("qsize 0");
    assert_eq!(cpus.lookup(&key(0)).expect("lookup"), None);
    assert_eq!(
        cpus.update(&key(4), &val(64), 0).map_err(|e| e.errno()),
        Err(7)
    );
    assert!(cpus.update(&key(1), &val(16385), 0).is_err());
    // A CPU the VM does not have: ENODEV (the VM here has 2 CPUs).
    assert_eq!(
        cpus.update(&key(3), &val(64), 0).map_err(|e| e.errno()),
        Err(19)
    );
}

#[test]
fn redirects_print_their_target() {
    // As `nfkit run` prints them (`redirect: ...`) and `--json` gives them.
    let shown = [
        Redirect::Cpu { map: 0, cpu: 1 },
        Redirect::Xsk { map: 1, key: 2 },
        Redirect::Map {
            map: 2,
            key: 1,
            ifindex: Some(1),
        },
    ]
    .map(|r| r.to_string());
    assert_eq!(
        shown,
        [
            "cpu 1 (map #0)",
            "xsk map #1 key 2",
            "map #2 key 1 (ifindex 1)"
        ]
    );
}

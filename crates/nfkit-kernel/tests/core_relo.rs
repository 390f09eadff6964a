//! CO-RE relocations resolved against the running kernel's BTF (issue
//! 13): programs built with clang against a `vmlinux.h` generated here
//! from `/sys/kernel/btf/vmlinux` read `struct xdp_md` / `struct
//! __sk_buff` fields and packet headers through kernel structs, and ask
//! `bpf_core_*` questions about kernel types. The same relocated Image
//! runs in the VM and through `BPF_PROG_TEST_RUN` in the kernel; verdicts,
//! packet bytes and maps must agree. An object whose tracing programs use
//! `BPF_CORE_READ` on `task_struct` still runs its XDP program.

use nfkit_corpus::BpfBuild;
use nfkit_kernel::{load_image, LoadOptions, Loaded, TestRun};
use nfkit_object::{Image, ProgType};
use nfkit_vm::{Context, RunOptions, SkBuff, Vm, VmConfig, XdpMd};
use std::path::PathBuf;

/// A scratch directory removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nfkit-core-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `tests/progs/NAME.c` built with clang against a vmlinux.h generated
/// from the running kernel.
fn build(name: &str) -> Vec<u8> {
    let dir = Dir::new(name);
    nfkit_corpus::vmlinux_h(&dir.0).unwrap_or_else(|e| panic!("{e}"));
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/progs/{name}.c"));
    BpfBuild::new(src)
        .without_arch_include()
        .arg("-mcpu=v3")
        .define("__TARGET_ARCH_x86")
        .include(&dir.0)
        .out(dir.0.join(format!("{name}.o")))
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Ethernet + IPv4 (`ihl` words of header) + UDP/TCP to `dport`.
fn ipv4(proto: u8, ihl: u8, ttl: u8, dport: u16, payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let hl = usize::from(ihl) * 4;
    let l4 = if proto == 17 { 8 } else { 20 };
    let total = (hl + l4 + payload) as u16;
    let mut ip = vec![0u8; hl];
    ip[0] = 0x40 | ihl;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = ttl;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 0, 2 + dport as u8]);
    f.extend_from_slice(&ip);
    let mut l = vec![0u8; l4];
    l[0..2].copy_from_slice(&4242u16.to_be_bytes());
    l[2..4].copy_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&l);
    f.extend((0..payload).map(|i| i as u8));
    f
}

/// Frames the programs branch on: UDP to 53 and elsewhere, TCP, IPv4
/// with options, a truncated IPv4 header, ARP.
fn packets() -> Vec<Vec<u8>> {
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let mut short_ip = ipv4(17, 5, 64, 53, 0);
    short_ip.truncate(24);
    vec![
        ipv4(17, 5, 64, 53, 10),
        ipv4(17, 5, 3, 8080, 100),
        ipv4(6, 5, 200, 443, 0),
        ipv4(17, 7, 64, 53, 30),
        ipv4(17, 15, 1, 9, 0),
        short_ip,
        arp,
    ]
}

/// The `u64` values of array map `name` in the VM and the kernel.
fn values(vm: &Vm, kernel: &Loaded, name: &str, n: u32) -> (Vec<u64>, Vec<u64>) {
    let le = |b: Option<Vec<u8>>| {
        let b = b.unwrap_or_default();
        u64::from_le_bytes(b.get(..8).and_then(|s| s.try_into().ok()).unwrap_or([0; 8]))
    };
    let vmap = vm.map(name).expect("VM map");
    let kmap = kernel.map(name).expect("kernel map");
    (0..n)
        .map(|k| {
            let key = k.to_le_bytes();
            (
                le(vmap.lookup(&key).expect("VM lookup")),
                le(kmap.lookup(&key).expect("kernel lookup")),
            )
        })
        .unzip()
}

/// Runs entry `entry` of `image` on every packet in the VM and the
/// kernel (only that entry loaded there); the differences, and both
/// sides for the map checks.
fn compare(image: &Image, entry: &str, ty: ProgType) -> (Vec<String>, Vm, Loaded) {
    let vm = Vm::new(image, VmConfig::kernel()).expect("VM loads");
    assert!(vm.entry_refused(entry).is_none(), "VM refuses {entry}");
    let opts = LoadOptions {
        entries: Some(vec![entry.to_string()]),
        ..LoadOptions::default()
    };
    let kernel = load_image(image, &opts).unwrap_or_else(|e| panic!("kernel load {entry}: {e}"));
    let kprog = kernel.prog(entry).expect("kernel prog");
    let mut diffs = Vec::new();
    for (i, pkt) in packets().iter().enumerate() {
        let ctx = match ty {
            ProgType::Xdp => Context::Xdp(XdpMd::new(pkt)),
            _ => Context::Skb(SkBuff::new(pkt)),
        };
        let k = kprog.test_run(&TestRun {
            data: pkt.clone(),
            data_size_out: 8192,
            ..TestRun::default()
        });
        // skb test runs refuse a frame whose IPv4 header is cut (the
        // truncated one): the VM does not run it either, so the maps
        // stay comparable.
        let k = match k {
            Err(_) if ty != ProgType::Xdp && pkt.len() < 14 + 20 => continue,
            k => k.unwrap_or_else(|e| panic!("{entry}: test run of packet {i}: {e}")),
        };
        let v = vm.run(entry, ctx, &RunOptions::default());
        let vret = v.r0().map(|r| r as u32);
        if vret != Some(k.retval) || v.packet != k.data {
            diffs.push(format!(
                "{entry} packet {i}: VM {vret:?} {:02x?}, kernel {} {:02x?}",
                v.packet, k.retval, k.data
            ));
        }
    }
    (diffs, vm, kernel)
}

#[test]
fn context_and_header_reads_agree_with_the_kernel() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let obj = build("core_ctx");
    let image = Image::from_elf(&obj, "core_ctx.o").expect("CO-RE object links");
    assert!(
        image.core_sites.len() > 40 && image.core_sites.iter().all(|s| s.result.is_ok()),
        "every relocation resolves: {:?}",
        image.core_sites.iter().find(|s| s.result.is_err())
    );
    for (entry, ty) in [("xdp_core", ProgType::Xdp), ("tc_core", ProgType::SchedCls)] {
        let (diffs, vm, kernel) = compare(&image, entry, ty);
        // One frame (the cut IPv4 header) is refused by skb test runs.
        let n = packets().len() as u64 - u64::from(ty != ProgType::Xdp);
        assert!(diffs.is_empty(), "{}", diffs.join("\n"));
        let (v, k) = values(&vm, &kernel, "seen", 24);
        assert_eq!(v, k, "{entry}: map `seen` differs (VM, kernel)");
        // The kernel's own answers, through both.
        assert_eq!(v[0], 4 * n, "field size of iphdr.daddr");
        assert_eq!(v[1], n, "sk_buff.len exists");
        assert_eq!(v[2], n, "task_struct exists");
        assert_eq!(v[3], 14 * n, "sizeof(struct ethhdr)");
        assert_eq!(v[4], n, "XDP_TX exists");
        assert_eq!(v[5], 4 * n, "XDP_REDIRECT is 4");
        assert_eq!(v[6], 2 * n, "offset of udphdr.dest");
        assert_eq!(v[7], 192 * n, "sizeof(struct __sk_buff)");
        assert_eq!(v[22], n, "kernel type id of ethhdr is set");
        println!("{entry}: {} packets agree; seen = {v:?}", n);
    }
}

#[test]
fn xdp_runs_beside_tracing_programs_with_core_reads() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let obj = build("core_mixed");
    let image = Image::from_elf(&obj, "core_mixed.o").expect("links");
    let tracing: Vec<_> = image
        .core_sites
        .iter()
        .filter(|s| s.function != "xdp_count")
        .collect();
    assert!(
        tracing
            .iter()
            .any(|s| s.what == "byte_off struct task_struct::pid"),
        "{tracing:?}"
    );
    let (diffs, vm, kernel) = compare(&image, "xdp_count", ProgType::Xdp);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    let (v, k) = values(&vm, &kernel, "hits", 4);
    assert_eq!(v, k, "map `hits` differs (VM, kernel)");
    let total: usize = packets().iter().map(Vec::len).sum();
    assert_eq!(v[0], total as u64);
    assert!(
        kernel.prog("kp_sleep").is_none(),
        "only the XDP entry is loaded"
    );
}

#[test]
fn guarded_unresolved_field_is_dead_code_in_both() {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let obj = build("core_guarded");
    let image = Image::from_elf(&obj, "core_guarded.o").expect("links");
    assert!(
        image.core_sites.iter().any(|s| s.result.is_err()),
        "the missing field poisons"
    );
    // Guarded: both run it, with the same results (ttl 64 -> XDP_TX).
    let (diffs, _vm, _kernel) = compare(&image, "xdp_guarded", ProgType::Xdp);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    assert!(image.core_error(0).is_none());
    // Unguarded: both refuse it, naming the relocation.
    let vm = Vm::new(&image, VmConfig::kernel()).expect("VM loads");
    let why = vm
        .entry_refused("xdp_unguarded")
        .expect("VM refuses xdp_unguarded")
        .to_string();
    assert!(
        why.contains(
            "byte_off struct iphdr___nope::missing_field: field not found in the kernel's BTF"
        ),
        "{why}"
    );
    let opts = LoadOptions {
        entries: Some(vec!["xdp_unguarded".into()]),
        ..LoadOptions::default()
    };
    match load_image(&image, &opts) {
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("CO-RE relocation in 'xdp_unguarded'") && e.contains("missing_field"),
                "{e}"
            );
            println!("kernel: {e}");
        }
        Ok(_) => panic!("the kernel accepted a reachable poisoned instruction"),
    }
}

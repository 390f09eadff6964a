//! `nf_rand()` (docs/abi.md 7): in real mode `bpf_get_prandom_u32` runs
//! at most once per packet — the first call returns its value r, later
//! calls of the packet step the xorshift64 sequence started at
//! `NF_RAND_SEED0 ^ r << 32` — and a new packet draws again; pinned, the
//! helper never runs and the values are the xorshift64 sequence from the
//! configured seed, restarted for each packet (as before the change).

use nfkit_abi::layout::RAND_SEED0;
use nfkit_abi::NfConfig;
use nfkit_vm::{Context, RunOptions, Vm, VmConfig, XdpMd};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A program that calls `nf_rand()` three times per packet and stores
/// the values in `out[0..3]`.
const SOURCE: &str = r#"
#include "nfkit.h"
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} out SEC(".maps");

SEC("xdp") int rand3(struct xdp_md *ctx)
{
	if (!nf_enter(ctx))
		return XDP_ABORTED;
	for (__u32 k = 0; k < 3; k++) {
		__u64 v = nf_rand();
		bpf_map_update_elem(&out, &k, &v, 0);
	}
	return XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// `bpf_get_prandom_u32`: 0x1000_0001, 0x1000_0002, ... counting calls.
struct Counting(AtomicU32);

impl nfkit_vm::config::Rng for Counting {
    fn next_u32(&self) -> u32 {
        0x1000_0000 + self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}

fn xorshift(x: u64) -> u64 {
    let mut x = x;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// The program, compiled once for both tests.
fn image() -> &'static nfkit_object::Image {
    static IMAGE: std::sync::OnceLock<nfkit_object::Image> = std::sync::OnceLock::new();
    IMAGE.get_or_init(build)
}

fn build() -> nfkit_object::Image {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("nfkit-rand-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let src = dir.join("rand3.c");
    let obj = dir.join("rand3.o");
    std::fs::write(&src, SOURCE).expect("write source");
    let arch = std::env::consts::ARCH;
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let st = std::process::Command::new(clang)
        .args([
            "-O2",
            "-g",
            "-target",
            "bpf",
            "-mcpu=v3",
            "-DNF_HOOK_XDP",
            "-I",
        ])
        .arg(root.join("nf/include"))
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("run clang");
    assert!(st.success(), "clang failed");
    let o = nfkit_object::read_file(&obj).expect("read object");
    std::fs::remove_dir_all(&dir).ok();
    nfkit_object::link(&[o]).expect("link")
}

/// Runs three packets; gives the three values of each and the helper
/// calls made during each.
fn run(pinned: Option<u64>) -> Vec<([u64; 3], u32)> {
    let image = image();
    let rng = Arc::new(Counting(AtomicU32::new(0)));
    let cfg = VmConfig {
        rng: rng.clone(),
        ..VmConfig::kernel()
    };
    let vm = Vm::new(image, cfg).expect("load");
    let conf = match pinned {
        Some(seed) => NfConfig {
            rand_seed: seed,
            ..NfConfig::default()
        }
        .pinned_at(1000),
        None => NfConfig::default(),
    };
    vm.map("nfkit_config")
        .expect("nfkit_config")
        .update(&0u32.to_le_bytes(), &conf.to_bytes(), 0)
        .expect("config");
    let frame = [0u8; 64];
    let mut got = Vec::new();
    for _ in 0..3 {
        let before = rng.0.load(Ordering::SeqCst);
        let r = vm.run(
            "rand3",
            Context::Xdp(XdpMd::new(&frame)),
            &RunOptions::default(),
        );
        assert_eq!(r.result.expect("run"), 2, "XDP_PASS");
        let calls = rng.0.load(Ordering::SeqCst) - before;
        let out = vm.map("out").expect("out");
        let mut v = [0u64; 3];
        for (k, x) in v.iter_mut().enumerate() {
            let b = out
                .lookup(&(k as u32).to_le_bytes())
                .expect("lookup")
                .expect("entry");
            *x = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        }
        got.push((v, calls));
    }
    got
}

#[test]
fn real_mode_draws_once_per_packet() {
    for (i, (v, calls)) in run(None).into_iter().enumerate() {
        assert_eq!(calls, 1, "packet {i}: one bpf_get_prandom_u32");
        let r = 0x1000_0001 + i as u64;
        let s1 = xorshift(RAND_SEED0 ^ (r << 32));
        let s2 = xorshift(s1);
        assert_eq!(v, [r, s1 >> 32, s2 >> 32], "packet {i}");
    }
}

#[test]
fn pinned_mode_is_the_seeded_sequence_per_packet() {
    for seed in [7u64, 0] {
        let start = if seed == 0 { RAND_SEED0 } else { seed };
        let s1 = xorshift(start);
        let s2 = xorshift(s1);
        let s3 = xorshift(s2);
        for (i, (v, calls)) in run(Some(seed)).into_iter().enumerate() {
            assert_eq!(calls, 0, "seed {seed}, packet {i}: no helper call");
            assert_eq!(v, [s1 >> 32, s2 >> 32, s3 >> 32], "seed {seed}, packet {i}");
        }
    }
}

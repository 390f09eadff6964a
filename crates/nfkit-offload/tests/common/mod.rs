//! Shared by the tests and the bench: building programs, random frames
//! biased toward the constants of the paths, the equivalence run.
#![allow(dead_code)]

use nfkit_object::Image;
use nfkit_offload::model::{run_xdp, Decision};
use nfkit_offload::{analyse, generate, Analysis, Equivalence, Limits, RuleSet, RulesOptions};
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use nfkit_vm::{Vm, VmConfig};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds `tests/progs/NAME.c` and links it.
pub fn build_prog(name: &str) -> Image {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/progs/{name}.c"));
    let bytes = nfkit_corpus::BpfBuild::new(src)
        .arg("-mcpu=v3")
        .include(root().join("corpus"))
        .bytes()
        .unwrap_or_else(|e| panic!("{e}"));
    image_of(&bytes, name)
}

pub fn image_of(bytes: &[u8], name: &str) -> Image {
    let obj = nfkit_object::read::read_object(bytes, name).unwrap_or_else(|e| panic!("{e}"));
    nfkit_object::link::link(&[obj]).unwrap_or_else(|e| panic!("{e}"))
}

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// A random frame: UDP or TCP over IPv4, then often the required bits of
/// one of `a`'s paths imposed, sometimes bits flipped, the EtherType or
/// IHL changed, or the frame cut short.
pub fn random_frame(rng: &mut Rng, a: &Analysis) -> Vec<u8> {
    let ports = [7u16, 22, 23, 53, 80, 999, 1000, 1500, 1999, 2000, 443];
    let pick = |rng: &mut Rng| ports[rng.below(ports.len() as u64) as usize];
    let proto = if rng.chance(50) {
        Proto::Udp
    } else {
        Proto::Tcp {
            flags: rng.next() as u8,
        }
    };
    let sport = if rng.chance(70) {
        pick(rng)
    } else {
        rng.next() as u16
    };
    let dport = if rng.chance(70) {
        pick(rng)
    } else {
        rng.next() as u16
    };
    let ip = |rng: &mut Rng| {
        let x = rng.next();
        IpAddr::V4(Ipv4Addr::new(
            [10, 192, 198, 203][(x % 4) as usize],
            [0, 18, 168, 51][((x >> 8) % 4) as usize],
            (x >> 16) as u8 % 4,
            (x >> 24) as u8,
        ))
    };
    let ip6 = |rng: &mut Rng| {
        let x = rng.next();
        let pre = [0x2001_0db8u32, 0xfe80_0000, 0x2001_0db9][(x % 3) as usize];
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&pre.to_be_bytes());
        a[15] = (x >> 8) as u8;
        IpAddr::from(a)
    };
    let (src, dst) = if rng.chance(25) {
        (ip6(rng), ip6(rng))
    } else {
        (ip(rng), ip(rng))
    };
    let spec = FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, rng.next() as u8]),
        dst_mac: Mac([2, 0, 0, 0, 1, rng.next() as u8]),
        src,
        dst,
        proto,
        sport,
        dport,
        ttl: [0u8, 1, 2, 64, 255][rng.below(5) as usize],
        tos: [0u8, 46 << 2, (46 << 2) | 1, rng.next() as u8][rng.below(4) as usize],
        payload: vec![0xab; rng.below(24) as usize],
    };
    let mut f = build(&spec).unwrap_or_else(|e| panic!("{e}"));
    if rng.chance(70) && !a.paths.is_empty() {
        let p = &a.paths[rng.below(a.paths.len() as u64) as usize].pattern;
        for (pos, v) in p.bits() {
            let (byte, bit) = ((pos / 8) as usize, pos % 8);
            if let Some(b) = f.get_mut(byte) {
                *b = (*b & !(1 << bit)) | ((v as u8) << bit);
            }
        }
    }
    for _ in 0..rng.below(3) {
        if rng.chance(40) {
            let pos = rng.below(f.len().min(64) as u64 * 8) as usize;
            f[pos / 8] ^= 1 << (pos % 8);
        }
    }
    if rng.chance(5) {
        let t = [0x86dd_u16, 0x0806, 0x8100, rng.next() as u16][rng.below(4) as usize];
        f[12..14].copy_from_slice(&t.to_be_bytes());
    }
    if rng.chance(5) {
        f[14] = (f[14] & 0xf0) | (rng.below(16) as u8);
    }
    if rng.chance(5) && f.len() > 22 && f[12..14] == [8, 0] {
        // Fragment bits: MF, an offset, DF.
        let v: u16 = [0x2000, 0x0010, 0x4000, 0x2010][rng.below(4) as usize];
        f[20..22].copy_from_slice(&v.to_be_bytes());
    }
    if rng.chance(8) {
        let n = rng.below(f.len() as u64 + 1) as usize;
        f.truncate(n);
    }
    f
}

/// Analyses, generates rules and checks the model on `frames` plus
/// `random` random frames; `setup` fills a fresh VM's maps.
pub fn check_program(
    image: &Image,
    entry: &str,
    setup: &dyn Fn(&Vm),
    frames: &[Vec<u8>],
    random: usize,
    opts: &RulesOptions,
) -> (Analysis, RuleSet, Equivalence) {
    // Both VMs see one frozen clock and the same random sequence: the
    // program alone and the one behind the rules run the same frames at
    // different moments, and a token bucket or a sample must not decide
    // differently for that alone.
    let clock = std::sync::Arc::new(nfkit_vm::FixedClock::new(1_000_000_000_000));
    let vm = |_: ()| {
        let cfg = VmConfig {
            clock: clock.clone(),
            rng: std::sync::Arc::new(nfkit_vm::SeqRng::new(0x5eed)),
            ..VmConfig::kernel()
        };
        let vm = Vm::new(image, cfg).unwrap_or_else(|e| panic!("{e}"));
        setup(&vm);
        vm
    };
    let alone = vm(());
    let software = vm(());
    let a = analyse(image, entry, &alone, &Limits::default()).unwrap_or_else(|e| panic!("{e}"));
    let rules = generate(&a, opts);
    let mut eq = Equivalence::default();
    let mut run_a = |f: &[u8]| -> Decision { run_xdp(&alone, entry, f) };
    let mut run_s = |f: &[u8]| -> Decision { run_xdp(&software, entry, f) };
    for f in frames {
        eq.check(&rules, f, &mut run_a, &mut run_s);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ entry.len() as u64);
    for _ in 0..random {
        let f = random_frame(&mut rng, &a);
        eq.check(&rules, &f, &mut run_a, &mut run_s);
    }
    report(entry, &a, &rules, &eq);
    (a, rules, eq)
}

pub fn report(name: &str, a: &Analysis, r: &RuleSet, eq: &Equivalence) {
    println!(
        "{name}: {} paths ({} decided), {} offloaded ({:.0} %), {} pass, {} to software; rules {} before merging, {} after ({} offloading); {} frames, {} decided by rules, {} disagreements",
        a.paths.len(),
        a.decided(),
        r.offloaded,
        100.0 * r.offloaded as f64 / a.paths.len().max(1) as f64,
        r.passed,
        r.fallbacks.len(),
        r.before_merge,
        r.after_merge,
        r.offloading_rules(),
        eq.frames,
        eq.by_rules,
        eq.disagreements.len()
    );
    if std::env::var("OFFLOAD_DEBUG").is_ok() {
        for (i, p) in a.paths.iter().enumerate() {
            println!("  path {i}: [{}] -> {:?}", p.pattern, p.outcome);
        }
    }
    for (i, f) in &r.fallbacks {
        println!("  path {i} [{}]: {f:?}", a.paths[*i].pattern);
    }
    for d in eq.disagreements.iter().take(3) {
        println!("  disagreement: {d:?}");
    }
}

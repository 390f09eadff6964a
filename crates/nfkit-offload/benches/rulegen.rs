//! Rule generation time (analysis + rules) for the DDoS example chain
//! and its hand C version, the firewall NF's standalone ACL and the
//! hand-written ACL, TCP-flags and blacklist programs (the blacklist
//! with 32 source prefixes 10.0.i.0/24 that merge into 10.0.0.0/19),
//! with rule counts before and after merging; and the drop-only
//! blacklist DDoS variant as map sync derives it, the first derivation
//! and a re-derivation after a map change apart.

use criterion::{criterion_group, criterion_main, Criterion};
use nfkit_object::Image;
use nfkit_offload::source::MapSource;
use nfkit_offload::{analyse, generate, Deriver, Limits, RulesOptions};
use nfkit_vm::{Vm, VmConfig};
use std::hint::black_box;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn link(bytes: &[u8], name: &str) -> Option<Image> {
    let obj = nfkit_object::read::read_object(bytes, name).ok()?;
    nfkit_object::link::link(&[obj]).ok()
}

fn prog(name: &str) -> Option<Image> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/progs/{name}.c"));
    let bytes = nfkit_corpus::BpfBuild::new(src)
        .arg("-mcpu=v3")
        .include(root().join("corpus"))
        .bytes()
        .ok()?;
    link(&bytes, name)
}

fn case(c: &mut Criterion, label: &str, image: &Image, entry: &str, maps: &dyn MapSource) {
    let Ok(a) = analyse(image, entry, maps, &Limits::default()) else {
        eprintln!("{label}: analysis failed, skipped");
        return;
    };
    let r = generate(&a, &RulesOptions::default());
    println!(
        "rulegen {label}: {} paths, {} offloaded, rules {} before merging, {} after",
        a.paths.len(),
        r.offloaded,
        r.before_merge,
        r.after_merge
    );
    c.bench_function(&format!("rulegen/{label}"), |b| {
        b.iter(|| {
            let a = analyse(black_box(image), entry, maps, &Limits::default());
            a.map(|a| generate(&a, &RulesOptions::default()).rules.len())
        })
    });
}

/// The DDoS logic with a drop-only blacklist (`tests/progs/ddos_blacklist.c`)
/// as map sync derives it: data-path maps expanded, the clock as now,
/// uniform regions hoisted; 16 blacklisted sources (one /28) and 16
/// destination buckets. `first`: a derivation from scratch (a fresh
/// [`Deriver`]); `sync`: map sync's re-derivation after one more source
/// was blacklisted (each iteration a new one), the unchanged regions'
/// analyses taken from the cache.
fn ddos_sync(c: &mut Criterion) {
    let Some(img) = prog("ddos_blacklist") else {
        return;
    };
    let Ok(vm) = Vm::new(&img, VmConfig::kernel()) else {
        return;
    };
    let addr = |a: [u8; 4]| {
        let mut k = vec![0u8; 10];
        k.extend_from_slice(&[0xff, 0xff]);
        k.extend_from_slice(&a);
        k
    };
    let (Some(bl), Some(db)) = (vm.map("blacklist"), vm.map("dst_buckets")) else {
        return;
    };
    for i in 0..16u8 {
        let _ = bl.update(&addr([198, 19, 1, i]), &u64::MAX.to_le_bytes(), 0);
        let _ = db.update(&addr([198, 18, 0, i]), &[0u8; 24], 0);
    }
    let limits = Limits {
        data_path_maps: true,
        now_ns: Some(1_000_000_000),
        max_map_entries: 32,
        ..Limits::default()
    };
    let opts = RulesOptions::default();
    let first = || Deriver::new().derive(&img, "ddos_blacklist", &vm, &limits, &opts);
    if let Ok(d) = first() {
        println!(
            "rulegen ddos_blacklist (first): {} paths, {} uniform regions, {} offloaded, rules {} before merging, {} after ({} dropping); analysis {:?}, regions {:?}, rules {:?}",
            d.analysis.paths.len() - d.hoisted,
            d.hoisted,
            d.rules.offloaded,
            d.rules.before_merge,
            d.rules.after_merge,
            d.rules.offloading_rules(),
            d.analyse_time,
            d.hoist_time,
            d.generate_time
        );
    }
    c.bench_function("rulegen/ddos_blacklist_first", |b| {
        b.iter(|| first().map(|d| d.rules.rules.len()))
    });
    // One more blacklisted source per sync, removed again at the next
    // (16 entries plus one, never more than `max_map_entries`).
    let mut deriver = Deriver::new();
    let _ = deriver.derive(&img, "ddos_blacklist", &vm, &limits, &opts);
    let mut n = 0u32;
    let mut sync = |deriver: &mut Deriver| {
        let prev = addr([198, 19, 2, (n % 250) as u8]);
        n += 1;
        let _ = bl.delete(&prev);
        let _ = bl.update(
            &addr([198, 19, 2, (n % 250) as u8]),
            &u64::MAX.to_le_bytes(),
            0,
        );
        deriver.derive(&img, "ddos_blacklist", &vm, &limits, &opts)
    };
    if let Ok(d) = sync(&mut deriver) {
        println!(
            "rulegen ddos_blacklist (sync, one source added): {} regions, {} from the cache, {} analysed, rules {} before merging, {} after; analysis {:?}, regions {:?}, rules {:?}",
            d.hoisted,
            d.regions_cached,
            d.regions_analysed,
            d.rules.before_merge,
            d.rules.after_merge,
            d.analyse_time,
            d.hoist_time,
            d.generate_time
        );
    }
    c.bench_function("rulegen/ddos_blacklist_sync", |b| {
        b.iter(|| sync(&mut deriver).map(|d| d.rules.rules.len()))
    });
}

fn benches(c: &mut Criterion) {
    ddos_sync(c);
    let src = std::fs::read_to_string(root().join("examples/ddos.py")).unwrap_or_default();
    if let Ok(comp) = nfkit_lang::compile("ddos.py", &src, &nfkit_lang::Options::default()) {
        if let (Some(entry), Ok(vm)) = (comp.entry(), Vm::new(&comp.image, VmConfig::kernel())) {
            case(c, "ddos.py", &comp.image, entry, &vm);
        }
    }
    if let Some(img) = nfkit_corpus::example_c("ddos").and_then(|e| link(e.object, "ddos")) {
        if let Ok(vm) = Vm::new(&img, VmConfig::kernel()) {
            case(c, "ddos.c", &img, "ddos", &vm);
        }
    }
    if let Some(img) = nfkit_nf::catalogue::object("firewall", nfkit_nf::Hook::Xdp)
        .and_then(|b| link(b, "firewall"))
    {
        if let Ok(vm) = Vm::new(&img, VmConfig::kernel()) {
            case(c, "firewall.xdp_acl", &img, "xdp_acl", &vm);
            // With three port rules in its table (tests/examples.rs's).
            if let Some(m) = vm.map("nf_firewall_acl") {
                let drop = nfkit_abi::verdict::Action::Drop.verdict(0);
                let pass = nfkit_abi::verdict::Action::Pass.verdict(0);
                for (i, (proto, sport, dport, act)) in [
                    (6u8, (0u16, 65535u16), (23u16, 23u16), drop),
                    (17, (0, 65535), (53, 53), drop),
                    (6, (1000, 1999), (0, 65535), pass),
                ]
                .into_iter()
                .enumerate()
                {
                    let mut v = vec![0u8; 88];
                    v[64..66].copy_from_slice(&sport.0.to_le_bytes());
                    v[66..68].copy_from_slice(&sport.1.to_le_bytes());
                    v[68..70].copy_from_slice(&dport.0.to_le_bytes());
                    v[70..72].copy_from_slice(&dport.1.to_le_bytes());
                    v[72] = proto;
                    v[73] = 1;
                    v[80..88].copy_from_slice(&act.to_le_bytes());
                    let _ = m.update(&(i as u32).to_le_bytes(), &v, 0);
                }
                case(c, "firewall.xdp_acl_3_rules", &img, "xdp_acl", &vm);
            }
        }
    }
    for name in ["acl", "tcpflags", "blacklist"] {
        if let Some(img) = prog(name) {
            if let Ok(vm) = Vm::new(&img, VmConfig::kernel()) {
                if name == "blacklist" {
                    if let Some(m) = vm.map("src_prefixes") {
                        for i in 0..32u8 {
                            let mut k = 24u32.to_le_bytes().to_vec();
                            k.extend_from_slice(&[10, 0, i, 0]);
                            let _ = m.update(&k, &1u32.to_le_bytes(), 0);
                        }
                    }
                }
                case(c, name, &img, name, &vm);
            }
        }
    }
}

criterion_group!(rulegen, benches);
criterion_main!(rulegen);

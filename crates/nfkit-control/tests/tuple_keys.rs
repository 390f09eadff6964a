//! Tuple map keys (`HashMap((u32, u32), u64, N)`): the checker's layout
//! and errors, the key's BTF struct, and one script run in the VM (static
//! and dynamic mode) and, as root, in the kernel, giving the same map
//! contents byte for byte, padding zeroed.

mod common;
use common::*;
use nfkit_control::runner::ScriptVm;
use nfkit_lang::{check, compile_dynamic, DynSlots, Options};
use std::collections::BTreeMap;

const SCRIPT: &str = r#"
from nf.classify import every_packet

flows = HashMap((u32, u32), u64, 1024)
ports = HashMap((u8, u32, u16), u32, 64)
wide = LruHashMap((u64, u8), u16, 64)
seen = HashMap((u16, u16), u8, 64)
pc = PercpuHashMap((u32, u16), u64, 64)
stats = ArrayMap(u64, 4)

def main() -> u64:
    src: u32 = Packet.read_u32(26)
    dst: u32 = Packet.read_u32(30)
    flows[(src, dst)] += 1
    proto: u8 = Packet.read_u8(23)
    ports[(proto, dst, Packet.read_u16(36))] = u32(Packet.len)
    wide[(u64(src) << 8, proto)] += 2
    sp: u16 = Packet.read_u16(34)
    dp: u16 = Packet.read_u16(36)
    if (sp, dp) in seen:
        stats[0] += 1
        seen[sp, dp] = seen.get((sp, dp), 0) + 1
    else:
        seen[(sp, dp)] = 1
    if seen[(sp, dp)] >= 3:
        del seen[(sp, dp)]
        stats[1] += 1
    if (dst, src) not in flows:
        stats[2] += 1
    pc[(dst, dp)] += 1
    return PASS

every_packet(main)
"#;

/// The maps of [`SCRIPT`] with tuple keys.
const MAPS: [&str; 5] = ["flows", "ports", "wide", "seen", "pc"];

fn packets() -> Vec<(u64, Vec<u8>)> {
    let a = [198, 18, 0, 1];
    let b = [198, 18, 0, 2];
    let c = [10, 1, 2, 3];
    [
        (a, b, 1000, 53),
        (a, b, 1000, 53),
        (b, a, 53, 1000),
        (c, b, 7, 80),
        (a, b, 1000, 53),
        (a, c, 1000, 53),
    ]
    .iter()
    .enumerate()
    .map(|(i, &(s, d, sp, dp))| {
        let payload = vec![0u8; i];
        (
            1_000_000_000 + i as u64,
            udp4(s, d, sp, dp, 0, 64, &payload),
        )
    })
    .collect()
}

/// Map name -> sorted (key, value) bytes; per-CPU values summed as u64.
type Contents = BTreeMap<String, Vec<(Vec<u8>, Vec<u8>)>>;

fn vm_contents(vm: &ScriptVm) -> Contents {
    MAPS.iter()
        .map(|&n| {
            let m = vm.vm.map(n).expect(n);
            let mut rows: Vec<(Vec<u8>, Vec<u8>)> = m
                .entries()
                .into_iter()
                .map(|(k, v)| {
                    if n == "pc" {
                        (k, sum_cpus(v.chunks(8).map(|c| c.to_vec())))
                    } else {
                        (k, v)
                    }
                })
                .collect();
            rows.sort();
            (n.to_string(), rows)
        })
        .collect()
}

fn sum_cpus(values: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    let sum = values
        .map(|v| {
            let mut b = [0u8; 8];
            b[..v.len().min(8)].copy_from_slice(&v[..v.len().min(8)]);
            u64::from_le_bytes(b)
        })
        .fold(0u64, u64::wrapping_add);
    sum.to_le_bytes().to_vec()
}

fn ip(a: [u8; 4]) -> [u8; 4] {
    u32::from_be_bytes(a).to_le_bytes()
}

#[test]
fn the_checker_lays_out_tuple_keys_as_c_structs() {
    let c = check::check("t.py", SCRIPT, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
    let m = |n: &str| {
        c.program
            .maps
            .iter()
            .find(|m| m.name == n)
            .unwrap_or_else(|| panic!("{n}"))
            .clone()
    };
    assert_eq!(m("flows").key_layout(), (vec![0, 4], 8));
    assert_eq!(m("ports").key_layout(), (vec![0, 4, 8], 12));
    assert_eq!(m("wide").key_layout(), (vec![0, 8], 16));
    assert_eq!(m("seen").key_layout(), (vec![0, 2], 4));
    assert_eq!(m("stats").key_layout(), (vec![0], 4));
    assert!(m("stats").tuple.is_empty());
    assert_eq!(
        m("ports").tuple,
        [nfkit_lang::Ty::U8, nfkit_lang::Ty::U32, nfkit_lang::Ty::U16]
    );
}

#[test]
fn tuple_key_errors() {
    let cases: [(&str, &str); 7] = [
        (
            "m = HashMap((u64, u64, u32), u64, 8)\n",
            "1:13: error: the key (u64, u64, u32) is 24 bytes; map keys are at most 16 bytes",
        ),
        (
            "m = HashMap((u32, bool), u64, 8)\n",
            "1:19: error: map keys and values are integer types",
        ),
        (
            "m = HashMap((u32,), u64, 8)\n",
            "1:13: error: a tuple key has at least two fields",
        ),
        (
            "m = HashMap((u32, u32), u64, 8)\ndef f(a: u32) -> u64:\n    return m[a]\n",
            "3:14: error: map 'm' has tuple keys (u32, u32); this key is one value",
        ),
        (
            "m = HashMap((u32, u32), u64, 8)\ndef f(a: u32) -> u64:\n    return m[(a, a, a)]\n",
            "3:14: error: map 'm' has tuple keys (u32, u32); this key is a tuple of 3",
        ),
        (
            "m = HashMap(u32, u64, 8)\ndef f(a: u32) -> u64:\n    if (a, a) in m:\n        return 1\n    return 0\n",
            "3:8: error: map 'm' has u32 keys; this key is a tuple of 2",
        ),
        (
            "m = HashMap((u8, u32), u64, 8)\ndef f(a: u32) -> u64:\n    m[(300, a)] = 1\n    return 0\n",
            "3:8: error: 300 does not fit u8",
        ),
    ];
    for (src, want) in cases {
        let got = match check::check("t.py", src, &Options::default()) {
            Ok(_) => panic!("no error for\n{src}"),
            Err(e) => e.to_string(),
        };
        assert!(got.contains(want), "{src}\nwant {want}\ngot {got}");
        assert!(got.contains("\n  help: "), "{got}");
    }
    // 16 bytes is the largest key.
    let ok = "m = HashMap((u64, u32, u16, u8), u64, 8)\n";
    check::check("t.py", ok, &Options::default()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn tuple_keys_have_a_named_btf_struct() {
    let c = build(SCRIPT);
    let btf = c.image.btf.as_ref().expect("BTF");
    for (map, members) in [
        ("flows", vec![("f0", 0), ("f1", 32)]),
        ("ports", vec![("f0", 0), ("f1", 32), ("f2", 64)]),
    ] {
        let spec = c.image.maps.iter().find(|m| m.name == map).expect(map);
        let key = spec.key_type_id.expect("key type");
        assert_eq!(btf.c_type(key), format!("struct {map}_key"));
        assert_eq!(btf.size_of(key).expect("size"), spec.key_size);
        let got: Vec<(&str, u32)> = btf
            .members(key)
            .expect("members")
            .iter()
            .map(|m| (m.name.as_str(), m.bit_offset))
            .collect();
        assert_eq!(got, members, "{map}");
        assert!(spec.value_type_id.is_some(), "{map}");
    }
    // Integer keys are unchanged: no BTF types.
    let stats = c
        .image
        .maps
        .iter()
        .find(|m| m.name == "stats")
        .expect("stats");
    assert_eq!(stats.key_type_id, None);
}

#[test]
fn tuple_keys_in_the_vm_static_and_dynamic() {
    let (_, mut vm) = load(SCRIPT);
    for (ts, p) in packets() {
        let (o, _) = vm.run(&p, ts, false).expect("run");
        assert!(o.error.is_none(), "{:?}", o.error);
        assert_eq!(o.code, XDP_PASS);
    }
    let got = vm_contents(&vm);
    let (a, b, c) = ([198, 18, 0, 1], [198, 18, 0, 2], [10, 1, 2, 3]);
    let key = |s, d| [ip(s), ip(d)].concat();
    assert_eq!(
        got["flows"],
        {
            let mut v = vec![
                (key(a, b), 3u64.to_le_bytes().to_vec()),
                (key(b, a), 1u64.to_le_bytes().to_vec()),
                (key(c, b), 1u64.to_le_bytes().to_vec()),
                (key(a, c), 1u64.to_le_bytes().to_vec()),
            ];
            v.sort();
            v
        },
        "flows"
    );
    // (u8, u32, u16): 17 at 0, three zero bytes, dst at 4, port at 8,
    // two zero bytes.
    let mut k = vec![17, 0, 0, 0];
    k.extend_from_slice(&ip(b));
    k.extend_from_slice(&53u16.to_le_bytes());
    k.extend_from_slice(&[0, 0]);
    let len = (packets()[4].1.len() as u32).to_le_bytes().to_vec();
    assert!(got["ports"].contains(&(k, len)), "{:?}", got["ports"]);
    // (1000, 53) seen three times (counted, then deleted), then once more.
    let pair = |a: u16, b: u16| [a.to_le_bytes(), b.to_le_bytes()].concat();
    let mut seen = vec![
        (pair(1000, 53), vec![1]),
        (pair(53, 1000), vec![1]),
        (pair(7, 80), vec![1]),
    ];
    seen.sort();
    assert_eq!(got["seen"], seen);
    let stats = vm.vm.map("stats").expect("stats");
    let stat = |i: u32| {
        stats
            .lookup(&i.to_le_bytes())
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    assert_eq!(stat(0)[..8], 2u64.to_le_bytes());
    assert_eq!(stat(1)[..8], 1u64.to_le_bytes());

    let d = compile_dynamic("t.py", SCRIPT, &Options::default(), &DynSlots::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut dvm = ScriptVm::new_dynamic(&d).expect("dynamic VM");
    for (ts, p) in packets() {
        let (o, _) = dvm.run(&p, ts, false).expect("run");
        assert!(o.error.is_none(), "{:?}", o.error);
    }
    assert_eq!(vm_contents(&dvm), got, "dynamic mode");
}

#[test]
fn tuple_keys_in_the_kernel_give_the_vm_contents() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    use nfkit_kernel::{load_image, LoadOptions, TestRun};
    let (c, mut vm) = load(SCRIPT);
    for (ts, p) in packets() {
        vm.run(&p, ts, false).expect("run");
    }
    let want = vm_contents(&vm);
    let _ = nfkit_kernel::pin_thread_to_cpu(0);
    let loaded = load_image(&c.image, &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}\n{}", nfkit_lang::listing::listing(&c)));
    for (m, k, v) in c.control_plane() {
        loaded
            .map(&m)
            .expect("control-plane map")
            .update(&k, &v, 0)
            .expect("update");
    }
    let prog = loaded.prog("every_packet").expect("entry");
    for (_, p) in packets() {
        let r = prog.test_run(&TestRun::packet(&p)).expect("test run");
        assert_eq!(r.retval as u64, XDP_PASS);
    }
    let got: Contents = MAPS
        .iter()
        .map(|&n| {
            let m = loaded.map(n).expect(n);
            let mut rows: Vec<(Vec<u8>, Vec<u8>)> = if m.is_percpu() {
                m.entries_percpu()
                    .expect("entries")
                    .into_iter()
                    .map(|(k, v)| (k, sum_cpus(v.into_iter())))
                    .collect()
            } else {
                m.entries().expect("entries")
            };
            rows.sort();
            (n.to_string(), rows)
        })
        .collect();
    assert_eq!(got, want);
    // The kernel took the key's BTF: bpftool shows the fields.
    let id = loaded.map("flows").expect("flows").id().expect("id");
    if let Ok(o) = std::process::Command::new("bpftool")
        .args(["-j", "map", "dump", "id", &id.to_string()])
        .output()
    {
        if o.status.success() {
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(
                out.contains("\"f0\"") && out.contains("\"f1\""),
                "bpftool: {out}"
            );
        }
    }
    drop(loaded);
    // The written object (a typed `key` in its .maps definition) loads
    // through libbpf.
    let path = std::env::temp_dir().join(format!("nfkit-tuple-keys-{}.o", std::process::id()));
    let bytes = nfkit_object::write_object(&c.image).expect("ELF");
    std::fs::write(&path, bytes).expect("write");
    let obj = nfkit_kernel::load_object_file(&path);
    let _ = std::fs::remove_file(&path);
    let obj = obj.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(obj.map("ports").expect("ports").key_size(), 12);
}

//! nfkit-abi against the header: every layout, map size and constant of
//! `nf/include/nfkit/abi.h`, read from the BTF (and `.rodata`) of the
//! built catalogue, equals its Rust twin.

use nfkit_abi::{layout, maps, stats, verdict, Action, Field, Hook};
use nfkit_object::btf::Kind;
use nfkit_object::{Btf, Object};

fn objects() -> Vec<Object> {
    let mut out = Vec::new();
    for m in nfkit_nf::catalogue() {
        for o in m.objects {
            let path = format!("{}.{}", m.name, o.hook);
            out.push(nfkit_object::read_object(o.object, &path).expect(&path));
        }
    }
    out
}

fn btf(o: &Object) -> &Btf {
    o.btf
        .as_ref()
        .unwrap_or_else(|| panic!("{}: no BTF", o.origin))
}

/// `(name, byte offset, byte size)` of the members of struct `name`, and
/// its size; `None` when the object does not have it.
fn c_struct(b: &Btf, name: &str) -> Option<(u32, Vec<Field>)> {
    let id = b.find(name, |k| matches!(k, Kind::Struct { .. }))?;
    let size = b.size_of(id).expect("size");
    let fields = b
        .members(id)
        .expect("members")
        .iter()
        .map(|m| Field {
            // Leak: the names live as long as the test.
            name: Box::leak(m.name.clone().into_boxed_str()),
            offset: (m.bit_offset / 8) as usize,
            size: b.size_of(m.ty).expect("member size") as usize,
        })
        .collect();
    Some((size, fields))
}

#[test]
fn struct_layouts_match_the_header() {
    let objs = objects();
    let rust: [(&str, usize, &[Field]); 6] = [
        (
            layout::PktInfo::C_NAME,
            layout::PktInfo::SIZE,
            layout::PktInfo::FIELDS,
        ),
        (
            layout::NfConfig::C_NAME,
            layout::NfConfig::SIZE,
            layout::NfConfig::FIELDS,
        ),
        (
            layout::NfFrame::C_NAME,
            layout::NfFrame::SIZE,
            layout::NfFrame::FIELDS,
        ),
        (
            layout::ClsEntry::C_NAME,
            layout::ClsEntry::SIZE,
            layout::ClsEntry::FIELDS,
        ),
        (
            layout::ClsIp4Key::C_NAME,
            layout::ClsIp4Key::SIZE,
            layout::ClsIp4Key::FIELDS,
        ),
        (
            layout::ClsIp6Key::C_NAME,
            layout::ClsIp6Key::SIZE,
            layout::ClsIp6Key::FIELDS,
        ),
    ];
    for (name, size, fields) in rust {
        let mut seen = 0;
        for o in &objs {
            let Some((c_size, c_fields)) = c_struct(btf(o), name) else {
                continue;
            };
            seen += 1;
            assert_eq!(c_size as usize, size, "{}: sizeof(struct {name})", o.origin);
            assert_eq!(c_fields, fields, "{}: struct {name}", o.origin);
        }
        assert!(seen > 0, "struct {name} is in no catalogue object");
    }
}

#[test]
fn shared_maps_have_the_abi_sizes() {
    let expect = [
        (maps::PKTINFO, maps::SLOTS, 4, layout::PktInfo::SIZE),
        (maps::NEST, maps::DEPTHS, 4, 4),
        (maps::CONFIG, 1, 4, layout::NfConfig::SIZE),
        (maps::FAULTS, 1, 4, 8),
        (maps::STATS_MAP, maps::STATS, 4, 8),
        (maps::FRAME, maps::SLOTS, 4, layout::NfFrame::SIZE),
        (maps::PROGS_MAP, maps::PROGS, 4, 4),
        (maps::FLOOD, maps::FLOOD_PORTS, 4, 4),
        (
            maps::CLS_IP4,
            maps::CLS_ENTRIES,
            layout::ClsIp4Key::SIZE as u32,
            layout::ClsEntry::SIZE,
        ),
        (
            maps::CLS_IP6,
            maps::CLS_ENTRIES,
            layout::ClsIp6Key::SIZE as u32,
            layout::ClsEntry::SIZE,
        ),
        (maps::CLS_PORT, maps::CLS_ENTRIES, 2, layout::ClsEntry::SIZE),
        (
            maps::CLS_DSCP,
            maps::CLS_DSCP_ENTRIES,
            4,
            layout::ClsEntry::SIZE,
        ),
    ];
    let objs = objects();
    for (name, entries, key, value) in expect {
        let mut seen = 0;
        for o in &objs {
            let Some(m) = o.maps.iter().find(|m| m.name == name) else {
                continue;
            };
            seen += 1;
            let got = (m.max_entries, m.key_size, m.value_size as usize);
            assert_eq!(got, (entries, key, value), "{}: map {name}", o.origin);
        }
        assert!(seen > 0, "map {name} is in no catalogue object");
    }
    // Every object defines every shared map, and nfkit's maps are only these.
    for o in &objs {
        for name in maps::SHARED {
            assert!(
                o.maps.iter().any(|m| m.name == name),
                "{}: no {name}",
                o.origin
            );
        }
        for m in o.maps.iter().filter(|m| maps::is_nfkit_map(&m.name)) {
            let known = maps::SHARED.contains(&m.name.as_str())
                || maps::CLASSIFIER.contains(&m.name.as_str());
            assert!(known, "{}: {} is not in nfkit_abi::maps", o.origin, m.name);
        }
    }
}

/// The enumerators of enum `name` in the base object.
fn enum_values(b: &Btf, name: &str) -> Vec<(String, i64)> {
    let id = b
        .find(name, |k| matches!(k, Kind::Enum { .. }))
        .unwrap_or_else(|| panic!("enum {name} not in base's BTF (NF_ABI_ANCHOR)"));
    match &b.ty(id).expect("type").kind {
        Kind::Enum { values, .. } => values.iter().map(|v| (v.name.clone(), v.value)).collect(),
        _ => unreachable!(),
    }
}

fn base() -> Object {
    let o = nfkit_nf::object("base", Hook::Xdp).expect("base.xdp");
    nfkit_object::read_object(o, "base.xdp").expect("read base")
}

fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(n, x)| (n.to_string(), *x)).collect()
}

#[test]
fn constants_match_the_header() {
    let o = base();
    let b = btf(&o);
    let mut actions: Vec<(String, i64)> = Action::ALL
        .iter()
        .map(|a| (format!("NF_ACT_{}", a.name()), i64::from(a.code())))
        .collect();
    actions.push(("NF_ACT_MAX".into(), i64::from(Action::MAX)));
    assert_eq!(enum_values(b, "nf_action"), actions);
    let pi = [
        ("NF_PI_VALID", layout::PI_VALID),
        ("NF_PI_VLAN", layout::PI_VLAN),
        ("NF_PI_FRAG", layout::PI_FRAG),
        ("NF_PI_TRUNC", layout::PI_TRUNC),
        ("NF_PI_L4", layout::PI_L4),
        ("NF_PI_NOW", layout::PI_NOW),
        ("NF_PI_RAND", layout::PI_RAND),
    ];
    let pi: Vec<(&str, i64)> = pi.iter().map(|(n, v)| (*n, i64::from(*v))).collect();
    assert_eq!(enum_values(b, "nf_pi_flag"), pairs(&pi));
    let tcp = [
        ("NF_TCP_FIN", layout::TCP_FIN),
        ("NF_TCP_SYN", layout::TCP_SYN),
        ("NF_TCP_RST", layout::TCP_RST),
        ("NF_TCP_PSH", layout::TCP_PSH),
        ("NF_TCP_ACK", layout::TCP_ACK),
    ];
    let tcp: Vec<(&str, i64)> = tcp.iter().map(|(n, v)| (*n, i64::from(*v))).collect();
    assert_eq!(enum_values(b, "nf_tcp_flag"), pairs(&tcp));
    assert_eq!(
        enum_values(b, "nf_cls_flag"),
        pairs(&[("NF_CLS_VALID", i64::from(layout::CLS_VALID))])
    );
    let limits = [
        ("NF_SLOTS", maps::SLOTS),
        ("NF_DEPTHS", maps::DEPTHS),
        ("NF_PROGS", maps::PROGS),
        ("NF_MAX_CHAINS", maps::MAX_CHAINS),
        ("NF_FLOOD_PORTS", maps::FLOOD_PORTS),
        ("NF_STATS", maps::STATS),
        ("NF_FLOW_KEY_SIZE", layout::FLOW_KEY_SIZE as u32),
        ("NF_FRAME_LOCALS", layout::FRAME_LOCALS as u32),
        ("NF_CLS_ENTRIES", maps::CLS_ENTRIES),
        ("NF_CLS_DSCP_ENTRIES", maps::CLS_DSCP_ENTRIES),
        ("NF_CONTROLLER_TAG", maps::CONTROLLER_TAG),
    ];
    let limits: Vec<(&str, i64)> = limits.iter().map(|(n, v)| (*n, i64::from(*v))).collect();
    assert_eq!(enum_values(b, "nf_limit"), pairs(&limits));
    let cols = [
        ("NF_STAT_VALUE", stats::VALUE),
        ("NF_STAT_FAULT", stats::FAULT),
        ("NF_STAT_PER_CHAIN", stats::PER_CHAIN),
    ];
    let cols: Vec<(&str, i64)> = cols.iter().map(|(n, v)| (*n, i64::from(*v))).collect();
    assert_eq!(enum_values(b, "nf_stat_col"), pairs(&cols));
    let mut hooks: Vec<(String, i64)> = Hook::ALL
        .iter()
        .map(|h| {
            (
                format!("NF_HOOK_ID_OF_{}", h.name().to_uppercase()),
                i64::from(h.id()),
            )
        })
        .collect();
    hooks.push(("NF_HOOK_ID_OF_OTHER".into(), 3));
    assert_eq!(enum_values(b, "nf_hook_id"), hooks);
    let clocks = [
        ("NF_CLOCK_REAL", layout::CLOCK_REAL),
        ("NF_CLOCK_PINNED", layout::CLOCK_PINNED),
        ("NF_CLOCK_RAND_ONLY", layout::CLOCK_RAND_ONLY),
    ];
    let clocks: Vec<(&str, i64)> = clocks.iter().map(|(n, v)| (*n, i64::from(*v))).collect();
    assert_eq!(enum_values(b, "nf_clock_mode"), pairs(&clocks));
}

#[test]
fn wide_constants_match_the_header() {
    let o = base();
    let b = btf(&o);
    // A static variable: found through the .rodata DATASEC of BTF.
    let var = b
        .datasec_vars(".rodata")
        .into_iter()
        .find(|v| b.name_of(v.var_id) == "nf_abi_anchor")
        .expect("nf_abi_anchor in base's .rodata");
    let rodata = o.maps.iter().find(|m| m.name.ends_with(".rodata"));
    let data = rodata.and_then(|m| m.data.as_ref()).expect(".rodata bytes");
    let (_, fields) = c_struct(b, "nf_abi_anchor").expect("struct nf_abi_anchor");
    let at = |name: &str| -> u64 {
        let f = fields.iter().find(|f| f.name == name).expect(name);
        let start = var.offset as usize + f.offset;
        let mut a = [0u8; 8];
        a.copy_from_slice(&data[start..start + 8]);
        u64::from_le_bytes(a)
    };
    assert_eq!(at("verdict_bit"), verdict::VERDICT_BIT);
    assert_eq!(at("fault"), verdict::FAULT);
    assert_eq!(at("value_max"), verdict::VALUE_MAX);
    assert_eq!(at("rand_seed0"), layout::RAND_SEED0);
}

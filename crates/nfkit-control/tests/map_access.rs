//! nfkit-control's typed map access on VM maps (the `MapAccess` trait
//! that kernel maps implement too): script tuple keys parsed and shown
//! field by field, addresses for u32 fields meaning their value, an NF
//! set's keys and expiry times typed from its BTF, and `no such key`.

mod common;
use common::*;
use nfkit_control::maps::{access, dump, DumpOptions, MapError, ValueType, VmMap};

const SCRIPT: &str = r#"
from nf.classify import every_packet
from nf.sets import src_set, SET_ADD

flows = HashMap((u32, u16), u64, 64)

def main() -> u64:
    flows[(Packet.read_u32(26), Packet.read_u16(36))] += 1
    src_set(SET_ADD, 30_000_000_000)
    return PASS

every_packet(main)
"#;

#[test]
fn vm_maps_through_the_trait() {
    let (_, mut vm) = load(SCRIPT);
    let frame = udp4([198, 18, 0, 9], [198, 18, 0, 1], 1000, 53, 0, 64, &[]);
    run_at(&mut vm, &frame, 1_000_000_000);
    run_at(&mut vm, &frame, 2_000_000_000);
    let dumps = vm.map_dumps().expect("dumps");
    let flows = dumps
        .iter()
        .find(|d| d.info.name == "flows")
        .expect("flows");
    assert!(!flows.nf);
    assert!(matches!(flows.info.key, ValueType::Tuple { size: 8, .. }));
    assert_eq!(flows.rows.len(), 1);
    assert_eq!(flows.rows[0].key_text, "(3323068425, 53)");
    assert_eq!(flows.rows[0].value_text, "2");

    let set = dumps
        .iter()
        .find(|d| d.info.name == "nf_sets_src")
        .expect("set");
    assert!(set.nf);
    // Added for 30 s at each packet, shown against the last one's time.
    assert_eq!(set.rows[0].text(), "198.18.0.9: expires in 30.0 s");
    assert_eq!(set.rows[0].value_json["ns"], 32_000_000_000u64);

    let m = vm.vm.map("flows").expect("flows");
    let info = flows.info.clone();
    let flows = VmMap::new(m, info, None);
    assert_eq!(
        access::get(&flows, "(198.18.0.9, 53)")
            .expect("get")
            .value_text,
        "2"
    );
    access::set(&flows, "198.18.0.9, 80", "7").expect("set");
    assert_eq!(dump(&flows, DumpOptions::default()).expect("dump").len(), 2);
    access::delete(&flows, "(198.18.0.9, 80)").expect("delete");
    let e = access::delete(&flows, "(198.18.0.9, 80)").expect_err("gone");
    assert!(matches!(e, MapError::NoSuchKey { .. }));
    assert_eq!(e.to_string(), "no such key (198.18.0.9, 80)");
    let e = access::get(&flows, "(1, 2, 3)").expect_err("3 fields");
    assert!(
        e.to_string()
            .starts_with("key `(1, 2, 3)` is not a (u32, u16)"),
        "{e}"
    );
}

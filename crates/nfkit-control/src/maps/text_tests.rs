use super::*;

/// `text` parses to `bytes`, which show as `shown`, which parses back.
fn rt(ty: &ValueType, text: &str, bytes: &[u8], shown: &str) {
    let b = parse(ty, text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(b, bytes, "parse {text}");
    assert_eq!(show(ty, &b, Some(0)).0, shown, "show {text}");
    assert_eq!(parse(ty, shown).unwrap(), b, "reparse {shown}");
}

fn field(name: &str, offset: u32, ty: ValueType) -> Field {
    Field {
        name: name.into(),
        offset,
        ty,
    }
}

#[test]
fn integers_are_host_order_and_addresses_mean_their_value() {
    let u32_ = ValueType::uint(4);
    rt(&u32_, "53", &[53, 0, 0, 0], "53");
    rt(&u32_, "0x1234", &[0x34, 0x12, 0, 0], "4660");
    // What `Packet.read_u32(26)` gives for source 198.18.0.1.
    rt(
        &u32_,
        "198.18.0.1",
        &0xC612_0001u32.to_le_bytes(),
        "3323068417",
    );
    rt(&u32_, "c6:12:00:01", &[0xc6, 0x12, 0, 1], "16782022");
    rt(&ValueType::uint(2), "65535", &[0xff, 0xff], "65535");
    let s16 = ValueType::Int {
        size: 2,
        signed: true,
    };
    rt(&s16, "-2", &[0xfe, 0xff], "-2");
    rt(&ValueType::uint(8), "1_000", &1000u64.to_le_bytes(), "1000");
    assert!(parse(&ValueType::uint(2), "70000").is_err());
    assert!(parse(&ValueType::uint(2), "198.18.0.1").is_err());
    let e = parse(&u32_, "zz").unwrap_err();
    assert_eq!(e.want, "u32");
    assert!(e.to_string().contains("`zz` is not a u32"), "{e}");
}

#[test]
fn big_endian_addresses_and_ports() {
    rt(&ValueType::BeInt { size: 2 }, "0x0102", &[1, 2], "258");
    rt(
        &ValueType::BeInt { size: 4 },
        "198.18.0.1",
        &[198, 18, 0, 1],
        "3323068417",
    );
    rt(
        &ValueType::Ipv4,
        "198.18.0.1",
        &[198, 18, 0, 1],
        "198.18.0.1",
    );
    let mut mapped = [0u8; 16];
    mapped[10..12].copy_from_slice(&[0xff, 0xff]);
    mapped[12..].copy_from_slice(&[198, 18, 0, 9]);
    rt(&ValueType::Ipv6, "198.18.0.9", &mapped, "198.18.0.9");
    rt(&ValueType::Ipv6, "::ffff:198.18.0.9", &mapped, "198.18.0.9");
    let mut v6 = [0u8; 16];
    v6[..2].copy_from_slice(&[0x20, 0x01]);
    v6[15] = 1;
    rt(&ValueType::Ipv6, "2001::1", &v6, "2001::1");
    rt(&ValueType::Port { be: true }, "53", &[0, 53], "53");
    rt(&ValueType::Port { be: false }, "53", &[53, 0], "53");
    assert!(parse(&ValueType::Ipv4, "198.18.0").is_err());
    // Hex bytes of the exact size, for any type.
    rt(&ValueType::Ipv4, "c6120001", &[198, 18, 0, 1], "198.18.0.1");
    assert!(parse(&ValueType::Ipv4, "c61200").is_err());
}

#[test]
fn times_show_relative_to_now() {
    let exp = ValueType::Time { expiry: true };
    let now = 100_000_000_000u64;
    let b = parse(&exp, &(now + 12_300_000_000).to_string()).unwrap();
    let (t, j) = show(&exp, &b, Some(now));
    assert_eq!(t, "expires in 12.3 s");
    assert_eq!(j["ns"], now + 12_300_000_000);
    assert_eq!(j["in_s"], 12.3);
    let b = parse(&exp, &(now - 4_000_000_000).to_string()).unwrap();
    assert_eq!(show(&exp, &b, Some(now)).0, "expired 4.0 s ago");
    let never = parse(&exp, "never").unwrap();
    assert_eq!(never, vec![0xff; 8]);
    let (t, j) = show(&exp, &never, Some(now));
    assert_eq!((t.as_str(), &j["never"]), ("never", &json!(true)));
    let stamp = ValueType::Time { expiry: false };
    let b = parse(&stamp, &(now - 1_500_000_000).to_string()).unwrap();
    assert_eq!(show(&stamp, &b, Some(now)).0, "1.5 s ago");
    assert_eq!(show(&stamp, &b, None).0, "98500000000 ns");
}

#[test]
fn tuples_and_structs_parse_field_by_field() {
    let tup = ValueType::Tuple {
        size: 8,
        fields: vec![
            field("f0", 0, ValueType::uint(4)),
            field("f1", 4, ValueType::uint(2)),
        ],
    };
    let mut want = 0xC612_0001u32.to_le_bytes().to_vec();
    want.extend([80, 0, 0, 0]);
    rt(&tup, "(198.18.0.1, 80)", &want, "(3323068417, 80)");
    assert_eq!(parse(&tup, "3323068417,80").unwrap(), want);
    assert_eq!(show(&tup, &want, None).1, json!([3323068417u32, 80]));
    assert!(parse(&tup, "(1, 2, 3)").is_err());

    let st = ValueType::Struct {
        name: "nf_cls_entry".into(),
        size: 8,
        fields: vec![
            field("chain_id", 0, ValueType::uint(4)),
            field("flags", 4, ValueType::uint(4)),
        ],
    };
    let b = [3, 0, 0, 0, 1, 0, 0, 0];
    rt(&st, "chain_id=3, flags=1", &b, "chain_id=3, flags=1");
    assert_eq!(parse(&st, "flags=1").unwrap(), [0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(show(&st, &b, None).1, json!({"chain_id": 3, "flags": 1}));
    assert!(parse(&st, "color=1")
        .unwrap_err()
        .hint
        .contains("chain_id, flags"));

    // A one-field struct (the sets NF's key) reads and shows bare.
    let one = ValueType::Struct {
        name: "nf_set_key".into(),
        size: 16,
        fields: vec![field("addr", 0, ValueType::Ipv6)],
    };
    let b = parse(&one, "198.18.0.9").unwrap();
    assert_eq!(show(&one, &b, None).0, "198.18.0.9");
    assert_eq!(parse(&one, "addr=198.18.0.9").unwrap(), b);
    rt(
        &ValueType::Bytes { size: 3 },
        "aa:bb:cc",
        &[0xaa, 0xbb, 0xcc],
        "aabbcc",
    );
}

#[test]
fn per_cpu_integers_add_up() {
    let (t, j) = show_values(
        &ValueType::uint(8),
        &[vec![1, 0, 0, 0, 0, 0, 0, 0], vec![2; 1]],
        None,
    );
    assert!(t.starts_with("3 (per CPU"), "{t}");
    assert_eq!(j["total"], 3);
}

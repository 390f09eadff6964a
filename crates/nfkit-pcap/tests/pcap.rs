//! Reading and writing classic pcap files: hand-built files of both byte
//! orders and resolutions, round trips, and bad input (truncated, garbage)
//! that must give a typed error naming the record and offset, never a
//! panic.

use nfkit_pcap::*;
use proptest::prelude::*;

/// A file built by hand, field by field: `be` picks the byte order, `ns`
/// the resolution; records are (sec, frac, caplen, orig_len, bytes).
fn build(be: bool, ns: bool, linktype: u32, records: &[(u32, u32, u32, u32, &[u8])]) -> Vec<u8> {
    let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut f = Vec::new();
    f.extend(w32(if ns { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    f.extend(w16(2));
    f.extend(w16(4));
    f.extend(w32(0));
    f.extend(w32(0));
    f.extend(w32(65535));
    f.extend(w32(linktype));
    for &(sec, frac, caplen, orig, data) in records {
        f.extend(w32(sec));
        f.extend(w32(frac));
        f.extend(w32(caplen));
        f.extend(w32(orig));
        f.extend_from_slice(data);
    }
    f
}

#[test]
fn reads_all_four_flavours() {
    let a: &[u8] = &[1, 2, 3, 4, 5];
    let b: &[u8] = &[0xff; 60];
    for be in [false, true] {
        for ns in [false, true] {
            let file = build(
                be,
                ns,
                1,
                &[(10, 250, 5, 5, a), (4_000_000_000, 999, 60, 1500, b)],
            );
            let c = Capture::parse(&file).expect("valid file");
            assert_eq!(
                c.byte_order,
                if be {
                    ByteOrder::Big
                } else {
                    ByteOrder::Little
                }
            );
            assert_eq!(
                c.resolution,
                if ns {
                    Resolution::Nanos
                } else {
                    Resolution::Micros
                }
            );
            assert_eq!(c.snaplen, 65535);
            assert_eq!(c.orig_lens, vec![5, 1500]);
            let unit = if ns { 1 } else { 1000 };
            assert_eq!(
                read(&file).expect("ethernet"),
                vec![
                    Packet::new(10_000_000_000 + 250 * unit, a.to_vec()),
                    Packet::new(4_000_000_000 * 1_000_000_000 + 999 * unit, b.to_vec()),
                ]
            );
        }
    }
}

#[test]
fn empty_capture_and_exact_bytes_written() {
    assert_eq!(read(&build(false, true, 1, &[])).expect("valid"), vec![]);
    let p = [Packet::new(1_500_000_123, vec![9, 8, 7])];
    // The default writer produces exactly the little-endian ns layout.
    assert_eq!(write(&p).expect("writes"), {
        let mut f = build(false, true, 1, &[(1, 500_000_123, 3, 3, &[9, 8, 7])]);
        f[16..20].copy_from_slice(&262_144u32.to_le_bytes());
        f
    });
    // Microsecond files truncate to whole microseconds.
    let opts = WriteOptions {
        resolution: Resolution::Micros,
        byte_order: ByteOrder::Big,
        ..WriteOptions::default()
    };
    let back = read(&write_with(&p, &opts).expect("writes")).expect("reads");
    assert_eq!(back, vec![Packet::new(1_500_000_000, vec![9, 8, 7])]);
}

#[test]
fn errors_name_record_and_offset() {
    let a: &[u8] = &[0; 10];
    let mut file = build(
        false,
        false,
        1,
        &[(0, 0, 10, 10, a), (0, 0, 40, 40, &[0; 39])],
    );
    match read(&file) {
        Err(PcapError::TruncatedData {
            index: 1,
            offset: 50,
            caplen: 40,
            available: 39,
        }) => {}
        other => panic!("unexpected: {other:?}"),
    }
    let msg = read(&file).expect_err("truncated").to_string();
    assert!(msg.contains("record 1 at offset 50"), "{msg}");
    file.truncate(24 + 26 + 7);
    assert!(matches!(
        read(&file),
        Err(PcapError::TruncatedHeader {
            index: 1,
            offset: 50,
            available: 7
        })
    ));
    assert!(matches!(
        read(&[0xd4, 0xc3]),
        Err(PcapError::ShortHeader { len: 2 })
    ));
    assert!(matches!(
        read(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0]),
        Err(PcapError::Pcapng)
    ));
    assert!(matches!(
        read(&[1, 2, 3, 4, 5]),
        Err(PcapError::BadMagic { magic: 0x0102_0304 })
    ));
    assert!(matches!(
        read(&build(true, false, 101, &[])),
        Err(PcapError::LinkType { linktype: 101 })
    ));
    // Any link type parses with Capture::parse.
    assert_eq!(
        Capture::parse(&build(true, false, 101, &[]))
            .map(|c| c.linktype)
            .ok(),
        Some(101)
    );
    let mut v = build(false, false, 1, &[]);
    v[4] = 3;
    assert!(matches!(
        read(&v),
        Err(PcapError::Version { major: 3, minor: 4 })
    ));
}

#[test]
fn files_on_disk() {
    let dir = std::env::temp_dir().join(format!("nfkit-pcap-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("x.pcap");
    let pkts = vec![Packet::new(7, vec![1; 64]), Packet::new(8, vec![])];
    write_file(&path, &pkts).expect("writes");
    assert_eq!(read_file(&path).expect("reads"), pkts);
    let missing = dir.join("missing.pcap");
    let e = read_file(&missing).expect_err("no such file");
    assert!(matches!(e, PcapError::Io { .. }));
    assert!(e.to_string().contains("missing.pcap"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timestamps_past_2106_are_refused() {
    let e = write(&[Packet::new(0, vec![]), Packet::new(u64::MAX, vec![1])]).expect_err("too late");
    assert!(matches!(e, PcapError::Timestamp { index: 1, .. }), "{e}");
}

fn packets() -> impl Strategy<Value = Vec<Packet>> {
    prop::collection::vec(
        (
            0u64..4_294_967_296_000_000_000,
            prop::collection::vec(any::<u8>(), 0..100),
        )
            .prop_map(|(ts_ns, data)| Packet { ts_ns, data }),
        0..8,
    )
}

fn opts() -> impl Strategy<Value = WriteOptions> {
    (any::<bool>(), any::<bool>()).prop_map(|(be, ns)| WriteOptions {
        byte_order: if be {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        },
        resolution: if ns {
            Resolution::Nanos
        } else {
            Resolution::Micros
        },
        ..WriteOptions::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(pkts in packets(), o in opts()) {
        let bytes = write_with(&pkts, &o).expect("writes");
        let c = Capture::parse(&bytes).expect("reads back");
        prop_assert_eq!(c.byte_order, o.byte_order);
        prop_assert_eq!(c.resolution, o.resolution);
        let unit = o.resolution.unit_ns();
        let want: Vec<Packet> = pkts
            .iter()
            .map(|p| Packet::new(p.ts_ns / unit * unit, p.data.clone()))
            .collect();
        prop_assert_eq!(c.packets, want);
    }

    /// Every prefix of a valid file either parses (at a record boundary,
    /// as the records before it) or is a typed error whose offset lies in
    /// the file.
    #[test]
    fn truncated_files(pkts in packets(), o in opts(), cut in any::<prop::sample::Index>()) {
        let bytes = write_with(&pkts, &o).expect("writes");
        let cut = cut.index(bytes.len() + 1);
        match read(&bytes[..cut]) {
            Ok(got) => prop_assert_eq!(&got[..], &read(&bytes).expect("whole")[..got.len()]),
            Err(PcapError::TruncatedHeader { offset, index, .. })
            | Err(PcapError::TruncatedData { offset, index, .. }) => {
                prop_assert!(offset < cut && index < pkts.len());
            }
            Err(PcapError::ShortHeader { len }) => prop_assert_eq!(len, cut),
            Err(e) => prop_assert!(false, "unexpected error {}", e),
        }
    }

    /// Garbage, alone or after a valid header, never panics.
    #[test]
    fn garbage(tail in prop::collection::vec(any::<u8>(), 0..300), header in any::<bool>(), o in opts()) {
        let mut bytes = if header { write_with(&[], &o).expect("writes") } else { Vec::new() };
        bytes.extend(tail);
        let _ = read(&bytes).map(|p| p.len()).map_err(|e| e.to_string());
    }

    /// Random bit flips in a valid file never panic.
    #[test]
    fn bit_flips(pkts in packets(), flips in prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..6)) {
        let mut bytes = write(&pkts).expect("writes");
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        let _ = Capture::parse(&bytes).map_err(|e| e.to_string());
    }
}

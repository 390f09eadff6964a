//! Frame builders, sequence stamps and the flow format, checked against
//! an independent reading of the headers and checksums.

use nfkit_traffic::frame::{parse, FrameSpec, Mac, Proto};
use nfkit_traffic::{build, parse_flows, seq};
use std::net::IpAddr;

/// Ones'-complement sum of 16-bit big-endian words (odd byte padded).
fn sum16(bytes: &[u8]) -> u32 {
    let mut s: u32 = 0;
    let mut i = 0;
    while i < bytes.len() {
        let hi = u32::from(bytes[i]) << 8;
        let lo = bytes.get(i + 1).map_or(0, |b| u32::from(*b));
        s += hi | lo;
        i += 2;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

/// Checks the IP header checksum (IPv4) and the L4 checksum with its
/// pseudo-header; returns (ethertype, ip proto, l4 bytes).
fn verify(frame: &[u8]) -> (u16, u8, Vec<u8>) {
    let et = u16::from_be_bytes([frame[12], frame[13]]);
    let ip = &frame[14..];
    let (proto, l4, pseudo) = match et {
        0x0800 => {
            assert_eq!(sum16(&ip[..20]), 0xffff, "IPv4 header checksum");
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            assert_eq!(total, ip.len(), "IPv4 total length");
            let l4 = ip[20..total].to_vec();
            let mut p = Vec::new();
            p.extend_from_slice(&ip[12..20]);
            p.extend_from_slice(&[0, ip[9]]);
            p.extend_from_slice(&(l4.len() as u16).to_be_bytes());
            (ip[9], l4, p)
        }
        0x86dd => {
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            assert_eq!(plen + 40, ip.len(), "IPv6 payload length");
            let l4 = ip[40..].to_vec();
            let mut p = Vec::new();
            p.extend_from_slice(&ip[8..40]);
            p.extend_from_slice(&(l4.len() as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, ip[6]]);
            (ip[6], l4, p)
        }
        other => panic!("ethertype {other:#x}"),
    };
    let mut all = pseudo;
    all.extend_from_slice(&l4);
    assert_eq!(sum16(&all), 0xffff, "L4 checksum over pseudo-header");
    if proto == 17 {
        assert_eq!(
            usize::from(u16::from_be_bytes([l4[4], l4[5]])),
            l4.len(),
            "UDP length"
        );
        assert_ne!(&l4[6..8], &[0, 0], "UDP checksum present");
    }
    (et, proto, l4)
}

fn spec(src: &str, dst: &str, proto: Proto, len: usize) -> FrameSpec {
    FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        proto,
        sport: 40000,
        dport: 53,
        ttl: 61,
        tos: 0,
        payload: (0..len).map(|i| (i * 7 + 3) as u8).collect(),
    }
}

#[test]
fn every_family_protocol_and_length_has_valid_checksums() {
    let pairs = [
        ("198.18.0.1", "198.19.255.254"),
        ("2001:db8::1", "2001:db8:ffff::2"),
    ];
    for (src, dst) in pairs {
        for proto in [
            Proto::Udp,
            Proto::Tcp { flags: 0x02 },
            Proto::Tcp { flags: 0x12 },
        ] {
            for len in [0usize, 1, 2, 15, 16, 17, 64, 1000, 1471] {
                let s = spec(src, dst, proto, len);
                let f = build(&s).unwrap();
                let (et, p, l4) = verify(&f);
                assert_eq!(et, if s.src.is_ipv4() { 0x0800 } else { 0x86dd });
                assert_eq!(&f[0..6], &s.dst_mac.0);
                assert_eq!(&f[6..12], &s.src_mac.0);
                let hlen = match proto {
                    Proto::Udp => 8,
                    Proto::Tcp { flags } => {
                        assert_eq!(p, 6);
                        assert_eq!(l4[13], flags);
                        assert_eq!(l4[12] >> 4, 5);
                        20
                    }
                };
                assert_eq!(u16::from_be_bytes([l4[0], l4[1]]), 40000);
                assert_eq!(u16::from_be_bytes([l4[2], l4[3]]), 53);
                assert_eq!(&l4[hlen..], &s.payload[..]);
                let parsed = parse(&f).unwrap();
                assert_eq!(parsed.src, s.src);
                assert_eq!(parsed.dst, s.dst);
                if proto == Proto::Udp {
                    assert_eq!(parsed.udp_payload, &s.payload[..]);
                }
            }
        }
    }
}

#[test]
fn a_known_ipv4_header_checksum() {
    // 45 00 00 1c 00 00 00 00 40 11 [csum] c6 12 00 01 c6 12 00 02:
    // 0x4500+0x001c+0x4011+0xc612+0x0001+0xc612+0x0002 = 0x21154,
    // folded 0x1156, complemented 0xeea9.
    let mut s = spec("198.18.0.1", "198.18.0.2", Proto::Udp, 0);
    s.ttl = 64;
    let f = build(&s).unwrap();
    assert_eq!(&f[14 + 10..14 + 12], &[0xee, 0xa9]);
}

#[test]
fn mixed_families_are_refused() {
    let s = spec("198.18.0.1", "2001:db8::2", Proto::Udp, 4);
    assert!(build(&s)
        .unwrap_err()
        .to_string()
        .contains("different address families"));
}

#[test]
fn stamps_keep_udp_checksums_valid_and_read_back() {
    for (src, dst) in [("198.18.3.4", "198.18.9.9"), ("2001:db8::7", "2001:db8::8")] {
        for n in [0u64, 1, 0xffff, u64::MAX - 1, 123_456_789_012] {
            let mut f = build(&spec(src, dst, Proto::Udp, 40)).unwrap();
            assert!(seq::stamp(&mut f, 0xdead_beef, n));
            let (_, _, l4) = verify(&f);
            assert_eq!(seq::read(&l4[8..]), Some((0xdead_beef, n)));
            // Payload past the stamp is untouched.
            assert_eq!(l4[8 + 16], ((16 * 7 + 3) as u8));
        }
    }
    // Too short, or not UDP: left alone.
    let mut short = build(&spec("198.18.0.1", "198.18.0.2", Proto::Udp, 15)).unwrap();
    let before = short.clone();
    assert!(!seq::stamp(&mut short, 1, 1));
    assert_eq!(short, before);
    let mut tcp = build(&spec(
        "198.18.0.1",
        "198.18.0.2",
        Proto::Tcp { flags: 2 },
        40,
    ))
    .unwrap();
    assert!(!seq::stamp(&mut tcp, 1, 1));
    assert_eq!(seq::read(b"NFKQ\0\0\0\x01"), None);
}

#[test]
fn flows_parse_with_defaults_and_errors_name_the_flow() {
    let flows = parse_flows(
        "proto=udp,src=198.18.1.1,dst=198.18.2.2,sport=1000,dport=53,len=64,weight=3; \
         proto=tcp,flags=synack,src=2001:db8::1,dst=2001:db8::2,dmac=02:00:00:00:00:09",
    )
    .unwrap();
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[0].weight, 3);
    assert_eq!(flows[0].spec.payload.len(), 64);
    assert_eq!(flows[0].spec.sport, 1000);
    assert_eq!(flows[0].spec.dst_mac, Mac::BROADCAST);
    assert!(!flows[0].src_mac_given);
    assert_eq!(flows[1].spec.proto, Proto::Tcp { flags: 0x12 });
    assert_eq!(flows[1].spec.dst_mac, Mac([2, 0, 0, 0, 0, 9]));
    assert_eq!(flows[1].spec.src, "2001:db8::1".parse::<IpAddr>().unwrap());

    for (text, needle) in [
        ("src=198.18.0.1", "dst= is required"),
        ("src=198.18.0.1,dst=2001:db8::1", "different families"),
        (
            "src=198.18.0.1,dst=198.18.0.2;src=x,dst=198.18.0.1",
            "flow spec 2",
        ),
        ("src=198.18.0.1,dst=198.18.0.2,dport=70000", "not a port"),
        (
            "src=198.18.0.1,dst=198.18.0.2,colour=red",
            "unknown key `colour`",
        ),
        ("src=198.18.0.1,dst=198.18.0.2,dmac=1:2:3", "not a MAC"),
        ("src=198.18.0.1 dst=198.18.0.2", "not an IP"),
        (" ; ", "empty"),
    ] {
        let e = parse_flows(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn render_times_and_stamps_frames_as_send_would() {
    use nfkit_traffic::send::{render, Source, RENDER_MAC};
    use nfkit_traffic::SendOptions;
    let flows = parse_flows(
        "src=198.18.0.1,dst=198.18.0.2,len=20;src=198.18.0.3,dst=198.18.0.2,len=20,proto=tcp",
    )
    .unwrap();
    let opts = SendOptions {
        rate: Some(10.0),
        duration: Some(std::time::Duration::from_secs(1)),
        seq: true,
        stream: Some(9),
        ..SendOptions::default()
    };
    let packets = render(&Source::Flows(flows), &opts, 5_000_000_000).unwrap();
    assert_eq!(packets.len(), 10);
    for (i, p) in packets.iter().enumerate() {
        assert_eq!(p.ts_ns, 5_000_000_000 + i as u64 * 100_000_000);
        assert_eq!(&p.data[6..12], &RENDER_MAC.0);
        let (_, proto, l4) = verify(&p.data);
        if i % 2 == 0 {
            assert_eq!(proto, 17);
            // Only stamped (UDP) frames take numbers: 0, 1, 2, ...
            assert_eq!(seq::read(&l4[8..]), Some((9, i as u64 / 2)));
        } else {
            assert_eq!(proto, 6);
        }
    }
}

/// The one flow of `text`'s frame.
fn flow_frame(text: &str) -> Vec<u8> {
    let flows = parse_flows(text).unwrap();
    assert_eq!(flows.len(), 1, "{text}");
    build(&flows[0].spec).unwrap()
}

#[test]
fn flows_set_tos_dscp_and_ttl_in_ipv4_and_ipv6_headers() {
    // IPv4: ToS is byte 1 of the header, TTL byte 8.
    for (keys, tos, ttl) in [
        ("", 0u8, 64u8),
        (",tos=184,ttl=7", 0xb8, 7),
        (",tos=0x2a", 0x2a, 64),
        (",dscp=46,ttl=255", 46 << 2, 255),
        (",dscp=63,ttl=0", 0xfc, 0),
        (",dscp=0x0a", 0x28, 64),
    ] {
        for proto in ["udp", "tcp"] {
            let text = format!("proto={proto},src=198.18.0.1,dst=198.18.0.2,len=20{keys}");
            let flows = parse_flows(&text).unwrap();
            assert_eq!((flows[0].spec.tos, flows[0].spec.ttl), (tos, ttl), "{text}");
            let f = build(&flows[0].spec).unwrap();
            verify(&f);
            assert_eq!(f[14] & 0x0f, 5, "{text}: no IPv4 options");
            assert_eq!(f[14 + 1], tos, "{text}: IPv4 ToS");
            assert_eq!(f[14 + 8], ttl, "{text}: IPv4 TTL");
        }
    }
    // IPv6: version 6, then the traffic class across bytes 0-1, a zero
    // flow label; hop limit byte 7.
    for (keys, tc, hops) in [
        ("", 0u8, 64u8),
        (",tos=0xb9,ttl=1", 0xb9, 1),
        (",dscp=10,ttl=200", 40, 200),
        (",tos=255", 0xff, 64),
    ] {
        for proto in ["udp", "tcp"] {
            let f = flow_frame(&format!(
                "proto={proto},src=2001:db8::1,dst=2001:db8::2,len=20{keys}"
            ));
            verify(&f);
            let ip = &f[14..];
            assert_eq!(ip[0] >> 4, 6, "{keys}: version");
            assert_eq!(
                (ip[0] & 0x0f) << 4 | ip[1] >> 4,
                tc,
                "{keys}: traffic class"
            );
            assert_eq!(
                (ip[1] & 0x0f, ip[2], ip[3]),
                (0, 0, 0),
                "{keys}: flow label"
            );
            assert_eq!(ip[7], hops, "{keys}: hop limit");
        }
    }
}

#[test]
fn payload_patterns_fill_len_and_checksums_stay_valid() {
    let cases: [(&str, &[u8]); 6] = [
        (
            "payload=hex:deadbeef,len=10",
            b"\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad",
        ),
        ("len=3,payload=hex:DEADBEEF", b"\xde\xad\xbe"),
        ("payload=hex:0x01 02,len=5", b"\x01\x02\x01\x02\x01"),
        ("payload=text:GET /,len=12", b"GET /GET /GE"),
        ("payload=text:a=b:c,len=5", b"a=b:c"),
        ("payload=text:x,len=0", b""),
    ];
    for (keys, want) in cases {
        for (src, dst) in [("198.18.0.1", "198.18.0.2"), ("2001:db8::1", "2001:db8::2")] {
            for (proto, hlen) in [("udp", 8), ("tcp", 20)] {
                let text = format!("proto={proto},src={src},dst={dst},{keys}");
                let f = flow_frame(&text);
                let (_, _, l4) = verify(&f);
                assert_eq!(&l4[hlen..], want, "{text}");
            }
        }
    }
    // The default: 32 zero bytes; a pattern without len fills those 32.
    let f = flow_frame("src=198.18.0.1,dst=198.18.0.2");
    assert_eq!(&verify(&f).2[8..], &[0u8; 32][..]);
    let f = flow_frame("src=198.18.0.1,dst=198.18.0.2,payload=hex:ab");
    assert_eq!(&verify(&f).2[8..], &[0xabu8; 32][..]);
}

#[test]
fn a_sequence_stamp_overwrites_the_first_16_bytes_of_a_payload_pattern() {
    for (src, dst) in [("198.18.3.4", "198.18.9.9"), ("2001:db8::7", "2001:db8::8")] {
        let text = format!("src={src},dst={dst},len=40,tos=0x10,payload=text:0123456789");
        let mut f = flow_frame(&text);
        assert!(seq::stamp(&mut f, 7, 12345));
        let (_, _, l4) = verify(&f);
        let payload = &l4[8..];
        assert_eq!(seq::read(payload), Some((7, 12345)));
        // Bytes 16.. keep the pattern where it was: byte i is "0123456789"[i % 10].
        let want: Vec<u8> = (16..40).map(|i| b"0123456789"[i % 10]).collect();
        assert_eq!(&payload[16..], &want[..], "{text}");
    }
}

#[test]
fn flow_field_errors_name_the_flow_and_the_key() {
    let ok = "src=198.18.0.1,dst=198.18.0.2";
    for (bad, needles) in [
        ("tos=256", &["flow spec 2", "tos=`256`", "0-255"][..]),
        ("tos=-1", &["flow spec 2", "tos="]),
        ("dscp=64", &["flow spec 2", "dscp=`64`", "0-63"]),
        ("dscp=x", &["flow spec 2", "dscp=`x`"]),
        ("tos=4,dscp=1", &["flow spec 2", "tos=", "dscp=", "both"]),
        ("ttl=256", &["flow spec 2", "ttl=`256`"]),
        ("payload=hex:abc", &["flow spec 2", "payload=", "odd"]),
        ("payload=hex:zz", &["flow spec 2", "payload=", "`zz`"]),
        ("payload=hex:", &["flow spec 2", "payload=", "empty"]),
        ("payload=text:", &["flow spec 2", "payload=", "empty"]),
        (
            "payload=deadbeef",
            &["flow spec 2", "payload=", "hex:", "text:"],
        ),
    ] {
        let text = format!("{ok};{ok},{bad}");
        let e = parse_flows(&text).unwrap_err().to_string();
        for n in needles {
            assert!(e.contains(n), "{text}: `{n}` not in: {e}");
        }
    }
}

#[test]
fn send_report_shortfall_is_judged_beyond_5_percent_and_one_frame() {
    use nfkit_traffic::SendReport;
    let report = |sent: u64, achieved: f64, target: Option<f64>| SendReport {
        sent,
        achieved_pps: achieved,
        target_pps: target,
        ..SendReport::default()
    };
    let short = |r: SendReport| r.shortfall_pct(5.0).map(|p| p.round() as i64);
    assert_eq!(short(report(7012, 7012.0, Some(10_000.0))), Some(30));
    assert_eq!(short(report(20_000, 19_990.0, Some(20_000.0))), None);
    assert_eq!(short(report(20_000, 18_000.0, Some(20_000.0))), Some(10));
    assert_eq!(short(report(100_000, 1.2e6, Some(5e7))), Some(98));
    // No target, nothing sent, or a single frame a little late: no verdict.
    assert_eq!(short(report(20_000, 7000.0, None)), None);
    assert_eq!(short(report(0, 0.0, Some(1000.0))), None);
    assert_eq!(short(report(1, 900.0, Some(1000.0))), None);
}

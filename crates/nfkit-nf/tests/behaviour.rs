//! Behaviour of every NF of the catalogue on crafted packets in the VM,
//! called through the caller exactly as a chain calls an NF (ctx + four
//! u64 arguments, u64 result), with the clock pinned through nfkit_config.

mod common;

use common::*;
use nfkit_nf::Hook;

const C1: [u8; 4] = [198, 18, 0, 1];
const C2: [u8; 4] = [198, 18, 0, 2];
const S1: [u8; 4] = [198, 19, 0, 1];
const S2: [u8; 4] = [198, 19, 0, 2];

fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    v4(src, dst, TCP, &tcp(sport, dport, flags))
}

fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    v4(src, dst, UDP, &udp(sport, dport))
}

// ---------------------------------------------------------------- nf.base

#[test]
fn base_verdicts_and_their_hook_codes() {
    let pkt = udp4(C1, S1, 1000, 53);
    for (name, v, code) in [
        ("drop", DROP, 1),
        ("allow", PASS, 2),
        ("abort", ABORTED, 0),
        ("tx", TX, 3),
    ] {
        let h = Harness::xdp("nf.base", name);
        assert_eq!(h.call(&pkt, NOARGS), v, "{name}");
        assert_eq!(h.stored_result(0), v, "{name}");
        assert_eq!(
            h.act(&pkt, NOARGS).result.ok(),
            Some(code),
            "{name}: XDP code"
        );
    }
    let h = Harness::xdp("nf.base", "redirect");
    assert_eq!(h.call(&pkt, args1(7)), redirect(7));
    let r = h.act(&pkt, args1(7));
    assert_eq!(r.result.ok(), Some(4), "XDP_REDIRECT");
    assert!(
        matches!(
            r.redirect,
            Some(nfkit_vm::Redirect::Ifindex { ifindex: 7, .. })
        ),
        "{:?}",
        r.redirect
    );
    // Bad argument: an ifindex that does not fit 32 bits is DROP.
    assert_eq!(h.call(&pkt, args1(1 << 32)), DROP);
    assert_eq!(h.call(&pkt, args1(u64::MAX)), DROP);
}

// Socket-filter builds parse through bpf_skb_load_bytes_relative, which
// the VM does not have yet: they are checked by the kernel (bpftool /
// nfkit-kernel tests) and for their signatures (tests/signatures.rs).
#[test]
fn base_on_tc_build() {
    let pkt = udp4(C1, S1, 1000, 53);
    let h = Harness::new("nf.base", "redirect", Hook::Tc);
    assert_eq!(h.call(&pkt, args1(9)), redirect(9));
    let h = Harness::new("nf.base", "drop", Hook::Tc);
    assert_eq!(h.call(&pkt, NOARGS), DROP);
}

// ---------------------------------------------------------------- nf.parse

fn parse_fields(hook: Hook, pkt: &[u8]) -> [u64; 6] {
    let names = [
        "ip_version",
        "l4_proto",
        "src_port",
        "dst_port",
        "dscp",
        "pkt_len",
    ];
    names.map(|n| Harness::new("nf.parse", n, hook).call(pkt, NOARGS))
}

#[test]
fn parse_reads_v4_v6_tcp_udp_vlan_and_non_ip() {
    let p = v4_full(C1, S1, TCP, 46 << 2 | 1, 64, &tcp(40000, 443, SYN));
    assert_eq!(
        parse_fields(Hook::Xdp, &p),
        [4, 6, 40000, 443, 46, p.len() as u64]
    );
    let p = v6_full(a6(1), a6(2), UDP, 10 << 2, 64, &udp(5353, 53));
    assert_eq!(
        parse_fields(Hook::Xdp, &p),
        [6, 17, 5353, 53, 10, p.len() as u64]
    );
    let p = vlan(&udp4(C1, S1, 1, 2), 100);
    assert_eq!(
        parse_fields(Hook::Xdp, &p),
        [4, 17, 1, 2, 0, p.len() as u64]
    );
    let p = v4(C1, S1, ICMP, &[8, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(parse_fields(Hook::Xdp, &p), [4, 1, 0, 0, 0, p.len() as u64]);
    let p = arp();
    assert_eq!(parse_fields(Hook::Xdp, &p), [0, 0, 0, 0, 0, p.len() as u64]);
    // A non-first IPv4 fragment has no ports.
    let mut p = udp4(C1, S1, 1, 2);
    p[14 + 6] = 0x00;
    p[14 + 7] = 0x10; // fragment offset 16 (x8 bytes)
    assert_eq!(parse_fields(Hook::Xdp, &p)[..4], [4, 17, 0, 0]);
    // A truncated TCP header: protocol known, ports 0.
    let p = tcp4(C1, S1, 1, 2, SYN);
    let cut = &p[..14 + 20 + 10];
    assert_eq!(parse_fields(Hook::Xdp, cut)[..4], [4, 6, 0, 0]);
    // IPv6 with a hop-by-hop extension header before TCP.
    let mut ext = vec![TCP, 0, 0, 0, 0, 0, 0, 0];
    ext.extend(tcp(7, 8, ACK));
    let p = v6(a6(1), a6(2), 0, &ext);
    assert_eq!(parse_fields(Hook::Xdp, &p)[..4], [6, 6, 7, 8]);
}

#[test]
fn parse_on_tc() {
    let p = v4_full(C1, S1, TCP, 46 << 2, 64, &tcp(40000, 443, SYN));
    assert_eq!(
        parse_fields(Hook::Tc, &p),
        [4, 6, 40000, 443, 46, p.len() as u64]
    );
    let p = v6_full(a6(1), a6(2), UDP, 10 << 2, 64, &udp(5353, 53));
    assert_eq!(
        parse_fields(Hook::Tc, &p),
        [6, 17, 5353, 53, 10, p.len() as u64]
    );
}

// ---------------------------------------------------------------- nf.meter

const SEC: u64 = 1_000_000_000;

#[test]
fn token_bucket_burst_at_time_zero_then_refill_at_rate() {
    for name in ["tb_dst", "tb_src", "tb_srcdst"] {
        let h = Harness::xdp("nf.meter", name);
        let pkt = udp4(C1, S1, 1000, 53);
        let (rate, burst) = (10, 5);
        h.set_clock(0);
        let got: Vec<u64> = (0..8).map(|_| h.call(&pkt, args2(rate, burst))).collect();
        assert_eq!(
            got,
            [0, 0, 0, 0, 0, 1, 1, 1],
            "{name}: exactly burst packets at t=0"
        );
        // 10 tokens/s: 99.999999 ms later there is not yet a token; at 100 ms one.
        h.set_clock(SEC / 10 - 1);
        assert_eq!(h.call(&pkt, args2(rate, burst)), 1, "{name}");
        h.set_clock(SEC / 10);
        assert_eq!(h.call(&pkt, args2(rate, burst)), 0, "{name}");
        assert_eq!(h.call(&pkt, args2(rate, burst)), 1, "{name}");
        // 250 ms later: 2.5 tokens -> 2 packets.
        h.set_clock(SEC / 10 + SEC / 4);
        let got: Vec<u64> = (0..3).map(|_| h.call(&pkt, args2(rate, burst))).collect();
        assert_eq!(got, [0, 0, 1], "{name}");
        // Then 0.5 token remains; 50 ms later a whole one.
        h.set_clock(SEC / 10 + SEC / 4 + SEC / 20);
        assert_eq!(h.call(&pkt, args2(rate, burst)), 0, "{name}");
        // A long pause refills to burst, not more.
        h.set_clock(100 * SEC);
        let got: Vec<u64> = (0..7).map(|_| h.call(&pkt, args2(rate, burst))).collect();
        assert_eq!(got, [0, 0, 0, 0, 0, 1, 1], "{name}");
        // Exactly one bucket exists.
        assert_eq!(h.map(&format!("nf_meter_{name}")).keys().len(), 1, "{name}");
    }
}

#[test]
fn token_buckets_are_keyed_by_their_addresses_and_parameters() {
    let h = Harness::xdp("nf.meter", "tb_dst");
    let a = udp4(C1, S1, 1, 2);
    let b = udp4(C2, S1, 3, 4); // same destination
    let c = udp4(C1, S2, 1, 2); // other destination
    assert_eq!(h.call(&a, args2(1, 2)), 0);
    assert_eq!(h.call(&b, args2(1, 2)), 0);
    assert_eq!(
        h.call(&a, args2(1, 2)),
        1,
        "shared destination bucket is empty"
    );
    assert_eq!(h.call(&c, args2(1, 2)), 0, "other destination: own bucket");
    assert_eq!(h.call(&a, args2(1, 3)), 0, "other parameters: own bucket");
    let keys = h.map("nf_meter_tb_dst").keys();
    assert_eq!(keys.len(), 3);
    let mut k = mapped(S1).to_vec();
    k.extend(1u32.to_le_bytes());
    k.extend(2u32.to_le_bytes());
    assert!(keys.contains(&k), "key = {{dst, rate, burst}}");

    let h = Harness::xdp("nf.meter", "tb_src");
    assert_eq!(h.call(&a, args2(1, 1)), 0);
    assert_eq!(h.call(&c, args2(1, 1)), 1, "same source");
    assert_eq!(h.call(&b, args2(1, 1)), 0, "other source");

    let h = Harness::xdp("nf.meter", "tb_srcdst");
    assert_eq!(h.call(&a, args2(1, 1)), 0);
    assert_eq!(h.call(&b, args2(1, 1)), 0);
    assert_eq!(h.call(&c, args2(1, 1)), 0);
    assert_eq!(h.call(&a, args2(1, 1)), 1);

    // IPv6 addresses have buckets of their own.
    let h = Harness::xdp("nf.meter", "tb_dst");
    let p6 = v6(a6(1), a6(2), UDP, &udp(1, 2));
    assert_eq!(h.call(&p6, args2(1, 1)), 0);
    assert_eq!(h.call(&p6, args2(1, 1)), 1);
    let mut k6 = a6(2).to_vec();
    k6.extend(1u32.to_le_bytes());
    k6.extend(1u32.to_le_bytes());
    assert!(h.map("nf_meter_tb_dst").keys().contains(&k6));
}

#[test]
fn token_bucket_bad_arguments() {
    let h = Harness::xdp("nf.meter", "tb_dst");
    let p = udp4(C1, S1, 1, 2);
    for (rate, burst) in [(0, 5), (5, 0), (0, 0)] {
        assert_eq!(
            h.call(&p, args2(rate, burst)),
            1,
            "rate {rate} burst {burst}"
        );
    }
    assert!(h.map("nf_meter_tb_dst").keys().is_empty(), "nothing stored");
    // Clamped to TB_MAX: the same bucket as rate = burst = 2^32 - 1.
    assert_eq!(h.call(&p, args2(1 << 40, u64::MAX)), 0);
    let keys = h.map("nf_meter_tb_dst").keys();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0][16..], [0xff; 8]);
    // A clock that steps back refills nothing.
    let h = Harness::xdp("nf.meter", "tb_dst");
    h.set_clock(10 * SEC);
    assert_eq!(h.call(&p, args2(1, 1)), 0);
    h.set_clock(5 * SEC);
    assert_eq!(h.call(&p, args2(1, 1)), 1);
    h.set_clock(5 * SEC + SEC);
    assert_eq!(h.call(&p, args2(1, 1)), 0, "refills from the new time on");
}

// ---------------------------------------------------------------- nf.sets

const LOOKUP: u64 = 0;
const ADD: u64 = 1;
const DELETE: u64 = 2;
const REFRESH: u64 = 3;

#[test]
fn set_membership_expires_after_ttl() {
    for name in ["src_set", "dst_set", "srcdst_set"] {
        let h = Harness::xdp("nf.sets", name);
        let p = tcp4(C1, S1, 1, 2, SYN);
        h.set_clock(1000);
        assert_eq!(h.call(&p, args2(LOOKUP, 0)), 0, "{name}");
        assert_eq!(h.call(&p, args2(ADD, 500)), 0, "{name}: was not a member");
        assert_eq!(h.call(&p, args2(ADD, 500)), 1, "{name}: now a member");
        h.set_clock(1499);
        assert_eq!(h.call(&p, args2(LOOKUP, 0)), 1, "{name}");
        h.set_clock(1500);
        assert_eq!(
            h.call(&p, args2(LOOKUP, 0)),
            0,
            "{name}: expired at now + ttl"
        );
        // lookup-and-refresh extends only members.
        assert_eq!(h.call(&p, args2(REFRESH, 100)), 0, "{name}");
        h.set_clock(2000);
        assert_eq!(h.call(&p, args2(ADD, 100)), 0, "{name}");
        h.set_clock(2090);
        assert_eq!(h.call(&p, args2(REFRESH, 100)), 1, "{name}");
        h.set_clock(2150);
        assert_eq!(h.call(&p, args2(LOOKUP, 0)), 1, "{name}: refreshed to 2190");
        h.set_clock(2190);
        assert_eq!(h.call(&p, args2(LOOKUP, 0)), 0, "{name}");
        // delete.
        assert_eq!(h.call(&p, args2(ADD, 0)), 0, "{name}");
        h.set_clock(u64::MAX - 1);
        assert_eq!(
            h.call(&p, args2(LOOKUP, 0)),
            1,
            "{name}: ttl 0 never expires"
        );
        assert_eq!(h.call(&p, args2(DELETE, 0)), 1, "{name}");
        assert_eq!(h.call(&p, args2(LOOKUP, 0)), 0, "{name}");
        assert!(h
            .map(&format!("nf_sets_{}", name.trim_end_matches("_set")))
            .keys()
            .is_empty());
        // now + ttl overflowing: never expires.
        h.set_clock(10);
        assert_eq!(h.call(&p, args2(ADD, u64::MAX)), 0, "{name}");
        h.set_clock(u64::MAX - 1);
        assert_eq!(h.call(&p, args2(LOOKUP, 0)), 1, "{name}");
    }
}

#[test]
fn sets_are_keyed_by_their_addresses_and_bad_ops_change_nothing() {
    let h = Harness::xdp("nf.sets", "src_set");
    let a = udp4(C1, S1, 1, 2);
    let b = udp4(C1, S2, 3, 4);
    let c = udp4(C2, S1, 1, 2);
    assert_eq!(h.call(&a, args2(ADD, 0)), 0);
    assert_eq!(h.call(&b, args2(LOOKUP, 0)), 1, "same source");
    assert_eq!(h.call(&c, args2(LOOKUP, 0)), 0, "other source");
    assert_eq!(h.map("nf_sets_src").keys(), vec![mapped(C1).to_vec()]);
    // Unknown op: 0, nothing changes (not even for a member).
    for op in [4, 5, u64::MAX] {
        assert_eq!(h.call(&a, args2(op, 0)), 0, "op {op}");
        assert_eq!(h.call(&c, args2(op, 0)), 0, "op {op}");
    }
    assert_eq!(h.map("nf_sets_src").keys().len(), 1);
    assert_eq!(h.call(&a, args2(LOOKUP, 0)), 1);

    let h = Harness::xdp("nf.sets", "dst_set");
    assert_eq!(h.call(&a, args2(ADD, 0)), 0);
    assert_eq!(h.call(&c, args2(LOOKUP, 0)), 1, "same destination");
    assert_eq!(h.call(&b, args2(LOOKUP, 0)), 0);

    let h = Harness::xdp("nf.sets", "srcdst_set");
    let p6 = v6(a6(1), a6(2), UDP, &udp(1, 2));
    assert_eq!(h.call(&p6, args2(ADD, 0)), 0);
    assert_eq!(h.call(&p6, args2(LOOKUP, 0)), 1);
    assert_eq!(h.call(&a, args2(LOOKUP, 0)), 0);
    let mut k = a6(1).to_vec();
    k.extend(a6(2));
    assert_eq!(h.map("nf_sets_srcdst").keys(), vec![k]);
}

// ---------------------------------------------------------------- nf.monitor

#[test]
fn count_is_per_cpu_with_an_overflow_slot() {
    let h = Harness::xdp("nf.monitor", "count");
    let p = udp4(C1, S1, 1, 2);
    let mut cpu0 = h.vm.runner();
    let got: Vec<u64> = (0..3)
        .map(|_| h.call_on(&mut cpu0, 0, &p, args1(5)).0)
        .collect();
    assert_eq!(got, [1, 2, 3]);
    assert_eq!(
        h.call_on(&mut cpu0, 1, &p, args1(5)).0,
        1,
        "CPU 1 counts apart"
    );
    let per_cpu = h
        .map("nf_monitor_count")
        .lookup(&5u32.to_le_bytes())
        .unwrap()
        .unwrap();
    let values: Vec<u64> = per_cpu.chunks(8).map(|c| u64_at(c, 0)).collect();
    assert_eq!(values, [3, 1, 0, 0]);
    assert_eq!(h.call(&p, args1(254)), 1);
    assert_eq!(h.call(&p, args1(255)), 1);
    assert_eq!(h.call(&p, args1(1 << 40)), 2, "bad ids share slot 255");
    assert_eq!(h.call(&p, args1(u64::MAX)), 3);
    let v = h
        .map("nf_monitor_count")
        .lookup_cpu(&254u32.to_le_bytes(), 0)
        .unwrap()
        .unwrap();
    assert_eq!(u64_at(&v, 0), 1);
}

#[test]
fn flow_rate_is_an_exponential_average_of_the_gaps() {
    let h = Harness::xdp("nf.monitor", "flow_rate");
    let a = tcp4(C1, S1, 1000, 80, ACK);
    let b = tcp4(C1, S1, 1001, 80, ACK);
    let ms = 1_000_000;
    h.set_clock(0);
    assert_eq!(h.call(&a, NOARGS), 0, "first packet");
    h.set_clock(ms);
    assert_eq!(h.call(&a, NOARGS), 1000, "1 ms gap: 1000 pps");
    h.set_clock(2 * ms);
    assert_eq!(h.call(&a, NOARGS), 1000);
    assert_eq!(h.call(&b, NOARGS), 0, "another flow starts at 0");
    // A 9 ms gap moves the average by (9 ms - 1 ms) / 8 to 2 ms: 500 pps.
    h.set_clock(11 * ms);
    assert_eq!(h.call(&a, NOARGS), 500);
    assert_eq!(h.map("nf_monitor_rate").keys().len(), 2);
    // Back-to-back packets: the average shrinks by 1/8 per packet.
    assert_eq!(h.call(&a, NOARGS), 571, "2 ms * 7/8 = 1.75 ms");
}

#[test]
fn last_seen_measures_the_gap_since_the_flows_previous_packet() {
    let h = Harness::xdp("nf.monitor", "last_seen");
    let a = udp4(C1, S1, 1000, 53);
    let reply = udp4(S1, C1, 53, 1000);
    h.set_clock(1000);
    assert_eq!(h.call(&a, NOARGS), (1 << 63) - 1, "LAST_SEEN_NEVER");
    h.set_clock(1500);
    assert_eq!(h.call(&a, NOARGS), 500);
    assert_eq!(
        h.call(&reply, NOARGS),
        (1 << 63) - 1,
        "the other direction is its own flow"
    );
    h.set_clock(1200);
    assert_eq!(h.call(&a, NOARGS), 0, "a clock that went back");
    h.set_clock(1300);
    assert_eq!(h.call(&a, NOARGS), 100);
}

// ---------------------------------------------------------------- nf.sample

#[test]
fn one_in_n_samples_packets_1_n_plus_1_per_flow() {
    let h = Harness::xdp("nf.sample", "one_in");
    let a = udp4(C1, S1, 1000, 53);
    let b = udp4(C1, S1, 1001, 53);
    let got: Vec<u64> = (0..7).map(|_| h.call(&a, args1(3))).collect();
    assert_eq!(got, [1, 0, 0, 1, 0, 0, 1]);
    assert_eq!(h.call(&b, args1(3)), 1, "own counter per flow");
    assert_eq!(h.call(&a, args1(2)), 1, "own counter per n");
    assert_eq!(h.call(&a, args1(2)), 0);
    assert_eq!(h.map("nf_sample_flows").keys().len(), 3);
    // Bad and trivial n: nothing stored.
    let h = Harness::xdp("nf.sample", "one_in");
    assert!(
        (0..5).all(|_| h.call(&a, args1(0)) == 0),
        "n = 0 never samples"
    );
    assert!(
        (0..5).all(|_| h.call(&a, args1(1)) == 1),
        "n = 1 always samples"
    );
    assert!(h.map("nf_sample_flows").keys().is_empty());
    // Huge n: only the first packet.
    let got: Vec<u64> = (0..3).map(|_| h.call(&a, args1(u64::MAX))).collect();
    assert_eq!(got, [1, 0, 0]);
}

// ---------------------------------------------------------------- nf.mark

const L3: usize = 14;

#[test]
fn set_dscp_ecn_ttl_keep_the_ipv4_checksum_valid() {
    let dscp = Harness::xdp("nf.mark", "set_dscp");
    let ecn = Harness::xdp("nf.mark", "set_ecn");
    let ttl = Harness::xdp("nf.mark", "set_ttl");
    for tos in [0u8, 0x01, 0xb8, 0xff, 0x5e] {
        let p = v4_full(C1, S1, TCP, tos, 61, &tcp(1, 2, ACK));
        assert!(ipv4_checksum_ok(&p, L3));
        for v in 0..64u8 {
            let (r, out) = dscp.call_pkt(&p, args1(v as u64));
            assert_eq!(r, (tos >> 2) as u64, "previous DSCP");
            assert_eq!(out[L3 + 1], v << 2 | (tos & 3), "DSCP {v}, ECN kept");
            assert!(
                ipv4_checksum_ok(&out, L3),
                "tos {tos:#x} dscp {v}: {:x?}",
                &out[L3..L3 + 20]
            );
            assert_eq!(out[..L3 + 1], p[..L3 + 1]);
            assert_eq!(out[L3 + 2..L3 + 10], p[L3 + 2..L3 + 10]);
            assert_eq!(out[L3 + 12..], p[L3 + 12..]);
        }
        for v in 0..4u8 {
            let (r, out) = ecn.call_pkt(&p, args1(v as u64));
            assert_eq!(r, (tos & 3) as u64);
            assert_eq!(out[L3 + 1], (tos & 0xfc) | v);
            assert!(ipv4_checksum_ok(&out, L3));
        }
        for v in [0u8, 1, 63, 64, 128, 255] {
            let (r, out) = ttl.call_pkt(&p, args1(v as u64));
            assert_eq!(r, 61);
            assert_eq!(out[L3 + 8], v);
            assert!(ipv4_checksum_ok(&out, L3), "ttl {v}");
        }
    }
    // Behind a VLAN tag.
    let p = vlan(&v4_full(C1, S1, UDP, 0, 9, &udp(1, 2)), 7);
    let (r, out) = ttl.call_pkt(&p, args1(200));
    assert_eq!(r, 9);
    assert_eq!(out[L3 + 4 + 8], 200);
    assert!(ipv4_checksum_ok(&out, L3 + 4));
}

#[test]
fn set_dscp_ecn_ttl_on_ipv6() {
    let p = v6_full(a6(1), a6(2), UDP, 10 << 2 | 2, 33, &udp(1, 2));
    let (r, out) = Harness::xdp("nf.mark", "set_dscp").call_pkt(&p, args1(46));
    assert_eq!(r, 10);
    let vtf = u32::from_be_bytes(out[L3..L3 + 4].try_into().unwrap());
    assert_eq!(vtf, (6 << 28) | ((46 << 2 | 2) << 20) | 0x12345, "{vtf:#x}");
    assert_eq!(out[L3 + 4..], p[L3 + 4..]);
    let (r, out) = Harness::xdp("nf.mark", "set_ecn").call_pkt(&p, args1(3));
    assert_eq!(r, 2);
    let vtf = u32::from_be_bytes(out[L3..L3 + 4].try_into().unwrap());
    assert_eq!(vtf, (6 << 28) | ((10 << 2 | 3) << 20) | 0x12345);
    let (r, out) = Harness::xdp("nf.mark", "set_ttl").call_pkt(&p, args1(1));
    assert_eq!(r, 33);
    assert_eq!(out[L3 + 7], 1);
    assert_eq!(out[..L3 + 7], p[..L3 + 7]);
}

#[test]
fn mark_bad_arguments_and_non_ip_change_nothing() {
    let p = v4_full(C1, S1, TCP, 0x10, 64, &tcp(1, 2, ACK));
    for (name, bad) in [("set_dscp", 64u64), ("set_ecn", 4), ("set_ttl", 256)] {
        let h = Harness::xdp("nf.mark", name);
        for v in [bad, u64::MAX] {
            let (r, out) = h.call_pkt(&p, args1(v));
            assert_eq!(r, 257, "{name}({v}): MARK_BAD_ARG");
            assert_eq!(out, p, "{name}({v})");
        }
        let a = arp();
        let (r, out) = h.call_pkt(&a, args1(1));
        assert_eq!(r, 256, "{name}: MARK_NOT_IP");
        assert_eq!(out, a);
    }
}

// ---------------------------------------------------------------- nf.route

fn route4(h: &Harness, prefix: [u8; 4], len: u32, ifindex: u32, flags: u32) {
    let mut k = len.to_le_bytes().to_vec();
    k.extend(prefix);
    let mut v = ifindex.to_le_bytes().to_vec();
    v.extend(flags.to_le_bytes());
    v.extend([0x02, 0xdd, 0, 0, 0, ifindex as u8]); // dmac
    v.extend([0x02, 0x55, 0, 0, 0, ifindex as u8]); // smac
    h.map("nf_route_v4").update(&k, &v, 0).unwrap();
}

fn route6(h: &Harness, prefix: [u8; 16], len: u32, ifindex: u32) {
    let mut k = len.to_le_bytes().to_vec();
    k.extend(prefix);
    let mut v = ifindex.to_le_bytes().to_vec();
    v.extend([0u8; 16]);
    h.map("nf_route_v6").update(&k, &v, 0).unwrap();
}

fn routes(h: &Harness) {
    route4(h, [198, 18, 0, 0], 15, 2, 0);
    route4(h, [198, 19, 0, 0], 16, 3, 0);
    route4(h, [198, 19, 7, 0], 24, 4, 1);
    route4(h, [198, 19, 7, 9], 32, 0, 0); // a host route with no interface
    let mut p = a6(0);
    p[4] = 0xaa;
    route6(h, a6(0), 32, 6);
    route6(h, p, 48, 7);
}

#[test]
fn lpm_lookup_picks_the_longest_prefix() {
    let h = Harness::xdp("nf.route", "lpm_lookup");
    routes(&h);
    for (dst, want) in [
        ([198, 19, 7, 1], 4),
        ([198, 19, 8, 1], 3),
        ([198, 18, 200, 1], 2),
        ([198, 20, 0, 1], 0),
        ([198, 19, 7, 9], 0),
    ] {
        assert_eq!(h.call(&udp4(C1, dst, 1, 2), NOARGS), want, "{dst:?}");
    }
    let mut in48 = a6(5);
    in48[4] = 0xaa;
    assert_eq!(h.call(&v6(a6(1), in48, UDP, &udp(1, 2)), NOARGS), 7);
    assert_eq!(h.call(&v6(a6(1), a6(5), UDP, &udp(1, 2)), NOARGS), 6);
    let mut other = a6(5);
    other[3] = 0xb9;
    assert_eq!(h.call(&v6(a6(1), other, UDP, &udp(1, 2)), NOARGS), 0);
    assert_eq!(h.call(&arp(), NOARGS), 0);
}

#[test]
fn forward_redirects_to_the_next_hop_and_rewrites_macs() {
    let h = Harness::xdp("nf.route", "forward");
    routes(&h);
    let p = udp4(C1, [198, 19, 8, 1], 1, 2);
    let (r, out) = h.call_pkt(&p, NOARGS);
    assert_eq!(r, redirect(3));
    assert_eq!(out, p, "no ROUTE_F_MAC: unchanged");
    let p = udp4(C1, [198, 19, 7, 1], 1, 2);
    let (r, out) = h.call_pkt(&p, NOARGS);
    assert_eq!(r, redirect(4));
    assert_eq!(out[0..6], [0x02, 0xdd, 0, 0, 0, 4]);
    assert_eq!(out[6..12], [0x02, 0x55, 0, 0, 0, 4]);
    assert_eq!(out[12..], p[12..]);
    let res = h.act(&p, NOARGS);
    assert_eq!(res.result.ok(), Some(4), "XDP_REDIRECT");
    assert!(matches!(
        res.redirect,
        Some(nfkit_vm::Redirect::Ifindex { ifindex: 4, .. })
    ));
    assert_eq!(
        h.call(&udp4(C1, [198, 20, 0, 1], 1, 2), NOARGS),
        0,
        "no route: value 0"
    );
    assert_eq!(
        h.call(&udp4(C1, [198, 19, 7, 9], 1, 2), NOARGS),
        0,
        "ifindex 0: value 0"
    );
}

// ---------------------------------------------------------------- nf.l2

#[test]
fn xconnect_redirects_to_the_paired_port() {
    let mut h = Harness::xdp("nf.l2", "xconnect");
    let m = h.map("nf_l2_xconnect");
    m.update(&1u32.to_le_bytes(), &5u32.to_le_bytes(), 0)
        .unwrap();
    m.update(&5u32.to_le_bytes(), &1u32.to_le_bytes(), 0)
        .unwrap();
    m.update(&2u32.to_le_bytes(), &0u32.to_le_bytes(), 0)
        .unwrap();
    let p = arp();
    for (ingress, want) in [(1, redirect(5)), (5, redirect(1)), (2, 0), (3, 0)] {
        h.ingress = ingress;
        assert_eq!(h.call(&p, NOARGS), want, "ingress {ingress}");
    }
}

// ---------------------------------------------------------------- nf.firewall

const NEW: u64 = 1;
const EST: u64 = 2;
const INVALID: u64 = 3;
const REPLY: u64 = 0x100;

#[test]
fn conntrack_follows_a_tcp_handshake_with_directions() {
    let h = Harness::xdp("nf.firewall", "conntrack");
    let c = |f| tcp4(C1, S1, 40000, 80, f);
    let s = |f| tcp4(S1, C1, 80, 40000, f);
    let steps = [
        (c(SYN), NEW),
        (c(SYN), NEW), // retransmitted SYN
        (s(SYN | ACK), EST | REPLY),
        (c(ACK), EST),
        (s(ACK | 0x08), EST | REPLY),
        (c(ACK | 0x08), EST),
        (c(SYN), INVALID), // SYN on an established connection
        (c(FIN | ACK), EST),
        (s(ACK), EST | REPLY),
        (s(FIN | ACK), EST | REPLY),
        (c(ACK), EST),
        (c(SYN), NEW), // both sides closed: the 5-tuple may reopen
    ];
    for (i, (p, want)) in steps.iter().enumerate() {
        assert_eq!(h.call(p, NOARGS), *want, "step {i}");
    }
    assert_eq!(
        h.map("nf_firewall_ct").keys().len(),
        1,
        "one entry for both directions"
    );
    // The key is the canonical 5-tuple: side a = the smaller address.
    let mut k = mapped(C1).to_vec();
    k.extend(mapped(S1));
    k.extend(40000u16.to_le_bytes());
    k.extend(80u16.to_le_bytes());
    k.extend([TCP, 0, 0, 0]);
    assert_eq!(h.map("nf_firewall_ct").keys(), vec![k]);
}

#[test]
fn conntrack_invalid_cases_change_nothing() {
    let h = Harness::xdp("nf.firewall", "conntrack");
    let c = |f| tcp4(C1, S1, 40001, 443, f);
    let s = |f| tcp4(S1, C1, 443, 40001, f);
    assert_eq!(h.call(&c(ACK), NOARGS), INVALID, "ACK without a connection");
    assert_eq!(
        h.call(&c(SYN | ACK), NOARGS),
        INVALID,
        "SYN+ACK without a connection"
    );
    assert_eq!(h.call(&c(SYN | RST), NOARGS), INVALID);
    assert!(h.map("nf_firewall_ct").keys().is_empty(), "nothing stored");
    assert_eq!(h.call(&c(SYN), NOARGS), NEW);
    assert_eq!(
        h.call(&s(ACK), NOARGS),
        INVALID | REPLY,
        "reply without SYN+ACK"
    );
    assert_eq!(
        h.call(&c(ACK), NOARGS),
        INVALID,
        "opener's ACK before the reply"
    );
    assert_eq!(
        h.call(&s(SYN | ACK), NOARGS),
        EST | REPLY,
        "state unchanged by the invalid packets"
    );
    assert_eq!(h.call(&c(SYN | ACK), NOARGS), INVALID);
    assert_eq!(h.call(&c(ACK), NOARGS), EST);
    // RST ends the connection.
    assert_eq!(h.call(&s(RST), NOARGS), EST | REPLY);
    assert!(
        h.map("nf_firewall_ct").keys().is_empty(),
        "RST deletes the entry"
    );
    assert_eq!(h.call(&c(ACK), NOARGS), INVALID);
    // A RST answering a SYN is NEW in the opener's direction only.
    assert_eq!(h.call(&c(SYN), NOARGS), NEW);
    assert_eq!(h.call(&c(RST), NOARGS), NEW);
    assert!(h.map("nf_firewall_ct").keys().is_empty());
}

#[test]
fn conntrack_entries_expire() {
    let h = Harness::xdp("nf.firewall", "conntrack");
    let c = |f| tcp4(C2, S2, 5555, 22, f);
    let s = |f| tcp4(S2, C2, 22, 5555, f);
    h.set_clock(0);
    assert_eq!(h.call(&c(SYN), NOARGS), NEW);
    h.set_clock(59 * SEC);
    assert_eq!(
        h.call(&s(SYN | ACK), NOARGS),
        EST | REPLY,
        "within the 60 s handshake timeout"
    );
    h.set_clock(59 * SEC + 61 * SEC);
    assert_eq!(h.call(&c(ACK), NOARGS), INVALID, "handshake timed out");
    // UDP: unreplied 30 s.
    let u = udp4(C2, S2, 7000, 53);
    let r = udp4(S2, C2, 53, 7000);
    h.set_clock(1000 * SEC);
    assert_eq!(h.call(&u, NOARGS), NEW);
    h.set_clock(1031 * SEC);
    assert_eq!(
        h.call(&r, NOARGS),
        NEW,
        "expired: the reply opens a new flow"
    );
    assert_eq!(
        h.call(&u, NOARGS),
        EST | REPLY,
        "from the new opener's view"
    );
}

#[test]
fn conntrack_udp_ipv6_and_untracked() {
    let h = Harness::xdp("nf.firewall", "conntrack");
    let u = udp4(C1, S1, 7000, 53);
    let r = udp4(S1, C1, 53, 7000);
    assert_eq!(h.call(&u, NOARGS), NEW);
    assert_eq!(h.call(&u, NOARGS), NEW, "still unreplied");
    assert_eq!(h.call(&r, NOARGS), EST | REPLY);
    assert_eq!(h.call(&u, NOARGS), EST);
    let c6 = |f| v6(a6(9), a6(1), TCP, &tcp(1234, 80, f));
    let s6 = |f| v6(a6(1), a6(9), TCP, &tcp(80, 1234, f));
    assert_eq!(h.call(&c6(SYN), NOARGS), NEW);
    assert_eq!(h.call(&s6(SYN | ACK), NOARGS), EST | REPLY);
    assert_eq!(h.call(&c6(ACK), NOARGS), EST);
    assert_eq!(h.map("nf_firewall_ct").keys().len(), 2);
    assert_eq!(
        h.call(&v4(C1, S1, ICMP, &[8, 0, 0, 0, 0, 0, 0, 0]), NOARGS),
        0,
        "ICMP"
    );
    assert_eq!(h.call(&arp(), NOARGS), 0, "non-IP");
    let mut frag = udp4(C1, S1, 7000, 53);
    frag[L3 + 7] = 0x20; // non-first fragment
    frag[L3 + 6] = 0;
    assert_eq!(h.call(&frag, NOARGS), 0, "no ports");
    assert_eq!(h.map("nf_firewall_ct").keys().len(), 2);
}

struct Rule {
    src: [u8; 16],
    src_len: u32,
    dst: [u8; 16],
    dst_len: u32,
    sport: (u16, u16),
    dport: (u16, u16),
    proto: u8,
    valid: bool,
    action: u64,
}

fn mask(len: u32) -> [u8; 16] {
    let mut m = [0u8; 16];
    for (i, b) in m.iter_mut().enumerate() {
        let bits = len.saturating_sub(i as u32 * 8).min(8);
        *b = (0xff00u16 >> bits) as u8;
    }
    m
}

const ANY: (u16, u16) = (0, 65535);

fn rule(
    src: [u8; 16],
    src_len: u32,
    dst: [u8; 16],
    dst_len: u32,
    proto: u8,
    dport: (u16, u16),
    action: u64,
) -> Rule {
    Rule {
        src,
        src_len,
        dst,
        dst_len,
        sport: ANY,
        dport,
        proto,
        valid: true,
        action,
    }
}

fn put_rules(h: &Harness, rules: &[Rule]) {
    for (i, r) in rules.iter().enumerate() {
        let mut v = Vec::new();
        v.extend(r.src);
        v.extend(mask(r.src_len));
        v.extend(r.dst);
        v.extend(mask(r.dst_len));
        for p in [r.sport.0, r.sport.1, r.dport.0, r.dport.1] {
            v.extend(p.to_le_bytes());
        }
        v.push(r.proto);
        v.push(r.valid as u8);
        v.extend([0u8; 6]);
        v.extend(r.action.to_le_bytes());
        assert_eq!(v.len(), 88);
        h.map("nf_firewall_acl")
            .update(&(i as u32).to_le_bytes(), &v, 0)
            .unwrap();
    }
}

#[test]
fn acl_first_match_with_wildcards_and_prefixes() {
    let h = Harness::xdp("nf.firewall", "acl");
    let z = [0u8; 16];
    let mut end = rule(z, 0, z, 0, 0, ANY, 99);
    end.valid = false;
    put_rules(
        &h,
        &[
            rule(mapped([198, 18, 0, 0]), 96 + 16, z, 0, TCP, (22, 22), DROP),
            rule(z, 0, z, 0, UDP, ANY, 7),
            rule(a6(0), 32, z, 0, 0, ANY, 9),
            rule(z, 0, mapped(S1), 128, TCP, (1, 1023), 11),
            rule(z, 0, z, 0, TCP, (100, 50), 13), // lo > hi: matches nothing
            end,
            rule(z, 0, z, 0, 0, ANY, 99), // after the end: ignored
        ],
    );
    for (p, want) in [
        (tcp4(C1, S1, 1000, 22, SYN), DROP), // rules 0 and 3 match: the first wins
        (tcp4(C1, S1, 1000, 80, SYN), 11),   // rule 3
        (tcp4(C1, S1, 1000, 8080, SYN), 0),  // port outside 1..1023
        (tcp4([10, 0, 0, 1], S1, 1000, 22, SYN), 11), // source outside 198.18/16
        (udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2), 7), // protocol wildcard rule
        (v6(a6(1), a6(2), TCP, &tcp(1, 22, SYN)), 9), // IPv6 prefix, any protocol
        (
            v6(
                [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                a6(2),
                TCP,
                &tcp(1, 22, SYN),
            ),
            0,
        ),
        (v4(C1, S2, ICMP, &[8, 0, 0, 0, 0, 0, 0, 0]), 0),
    ] {
        assert_eq!(h.call(&p, NOARGS), want, "{:x?}", &p[L3..]);
    }
    // A rule that is the first one is also the only one: wildcard everything.
    let h = Harness::xdp("nf.firewall", "acl");
    put_rules(&h, &[rule(z, 0, z, 0, 0, ANY, PASS)]);
    assert_eq!(h.call(&arp(), NOARGS), PASS);
    let h = Harness::xdp("nf.firewall", "acl");
    assert_eq!(h.call(&arp(), NOARGS), 0, "empty table: ACL_NO_MATCH");
}

// ---------------------------------------------------------------- nf.classify

struct Cls {
    vm: nfkit_vm::Vm,
}

impl Cls {
    fn new() -> Cls {
        let obj = nfkit_nf::object("nf.classify", Hook::Xdp).unwrap();
        let image = nfkit_object::Image::from_elf(obj, "classify.xdp.o").unwrap();
        let vm = nfkit_vm::Vm::new(&image, nfkit_vm::VmConfig::kernel()).unwrap();
        Cls { vm }
    }
    fn map(&self, n: &str) -> &std::sync::Arc<nfkit_vm::Map> {
        self.vm.map(n).unwrap()
    }
    /// Runs classifier `entry`; its XDP code and the nfkit_stats row it counted in.
    fn run(&self, entry: &str, p: &[u8]) -> (u64, Option<(i64, u64)>) {
        let before = self.stats();
        let r = self.vm.run(
            entry,
            nfkit_vm::Context::Xdp(nfkit_vm::XdpMd::new(p)),
            &Default::default(),
        );
        let after = self.stats();
        let changed: Vec<usize> = (0..after.len())
            .filter(|&i| after[i] != before[i])
            .collect();
        assert!(changed.len() <= 1, "{changed:?}");
        let row = changed.first().map(|&i| (i as i64 / 16 - 1, i as u64 % 16));
        (r.result.unwrap(), row)
    }
    fn stats(&self) -> Vec<u64> {
        let m = self.map("nfkit_stats");
        (0..1024u32)
            .map(|i| u64_at(&m.lookup_cpu(&i.to_le_bytes(), 0).unwrap().unwrap(), 0))
            .collect()
    }
    fn entry(chain: u32, valid: bool) -> Vec<u8> {
        let mut v = chain.to_le_bytes().to_vec();
        v.extend((valid as u32).to_le_bytes());
        v
    }
    fn lpm(&self, map: &str, len: u32, addr: &[u8], chain: u32) {
        let mut k = len.to_le_bytes().to_vec();
        k.extend(addr);
        self.map(map)
            .update(&k, &Cls::entry(chain, true), 0)
            .unwrap();
    }
}

/// A plain value from the weak nfkit_dispatch: counted as k = 8 (value,
/// default action PASS = XDP code 2) in the picked chain's row.
const VALUE: u64 = 8;

#[test]
fn classifiers_pick_chains_from_their_maps() {
    let c = Cls::new();
    let p4 = udp4(C1, [198, 19, 7, 1], 1, 443);
    let p6 = v6(a6(1), a6(2), TCP, &tcp(1, 443, SYN));
    assert_eq!(c.run("every_packet", &arp()), (2, Some((0, VALUE))));

    c.lpm("nfkit_cls_ip4", 16, &[198, 19, 0, 0], 1);
    c.lpm("nfkit_cls_ip4", 24, &[198, 19, 7, 0], 2);
    c.lpm("nfkit_cls_ip4", 32, &C1, 3);
    assert_eq!(
        c.run("by_ipv4_dst", &p4).1,
        Some((2, VALUE)),
        "longest prefix"
    );
    assert_eq!(
        c.run("by_ipv4_dst", &udp4(C1, [198, 19, 8, 1], 1, 2)).1,
        Some((1, VALUE))
    );
    assert_eq!(
        c.run("by_ipv4_dst", &udp4(C1, [198, 20, 0, 1], 1, 2)).1,
        Some((-1, VALUE)),
        "unclaimed"
    );
    assert_eq!(
        c.run("by_ipv4_dst", &p6).1,
        Some((-1, VALUE)),
        "IPv6 is unclaimed"
    );
    assert_eq!(c.run("by_ipv4_src", &p4).1, Some((3, VALUE)));

    c.lpm("nfkit_cls_ip6", 32, &a6(0), 4);
    c.lpm("nfkit_cls_ip6", 128, &a6(1), 5);
    assert_eq!(c.run("by_ipv6_dst", &p6).1, Some((4, VALUE)));
    assert_eq!(c.run("by_ipv6_src", &p6).1, Some((5, VALUE)));
    assert_eq!(c.run("by_ipv6_src", &p4).1, Some((-1, VALUE)));

    c.map("nfkit_cls_port")
        .update(&443u16.to_le_bytes(), &Cls::entry(6, true), 0)
        .unwrap();
    c.map("nfkit_cls_port")
        .update(&53u16.to_le_bytes(), &Cls::entry(7, false), 0)
        .unwrap();
    assert_eq!(c.run("by_l4_dport", &p4).1, Some((6, VALUE)));
    assert_eq!(c.run("by_l4_dport", &p6).1, Some((6, VALUE)));
    assert_eq!(
        c.run("by_l4_dport", &udp4(C1, S1, 1, 53)).1,
        Some((-1, VALUE)),
        "entry without CLS_VALID"
    );
    assert_eq!(
        c.run("by_l4_dport", &v4(C1, S1, ICMP, &[0; 8])).1,
        Some((-1, VALUE))
    );

    c.map("nfkit_cls_dscp")
        .update(&46u32.to_le_bytes(), &Cls::entry(8, true), 0)
        .unwrap();
    c.map("nfkit_cls_dscp")
        .update(&10u32.to_le_bytes(), &Cls::entry(63, true), 0)
        .unwrap();
    let ef = v4_full(C1, S1, UDP, 46 << 2, 64, &udp(1, 2));
    assert_eq!(c.run("by_dscp", &ef).1, Some((8, VALUE)));
    let af11 = v4_full(C1, S1, UDP, 10 << 2, 64, &udp(1, 2));
    assert_eq!(
        c.run("by_dscp", &af11).1,
        Some((-1, VALUE)),
        "chain id 63 is out of range"
    );
    assert_eq!(c.run("by_dscp", &arp()).1, Some((-1, VALUE)));
}

#[test]
fn dynamic_classifier_without_a_chain_program_is_a_fault() {
    let c = Cls::new();
    c.map("nfkit_cls_dscp")
        .update(&46u32.to_le_bytes(), &Cls::entry(8, true), 0)
        .unwrap();
    let ef = v4_full(C1, S1, UDP, 46 << 2, 64, &udp(1, 2));
    assert_eq!(
        c.run("dyn_by_dscp", &ef),
        (1, Some((8, 9))),
        "XDP_DROP, counted as a fault of chain 8"
    );
    let faults = c
        .map("nfkit_faults")
        .lookup_cpu(&0u32.to_le_bytes(), 0)
        .unwrap()
        .unwrap();
    assert_eq!(u64_at(&faults, 0), 1);
    // An unclaimed packet never reaches the tail call.
    assert_eq!(c.run("dyn_by_dscp", &arp()), (2, Some((-1, VALUE))));
    // The classifier leaves the call frame to the chain's segments
    // (abi.md 5): nothing written there.
    let f = c
        .map("nfkit_frame")
        .lookup_cpu(&0u32.to_le_bytes(), 0)
        .unwrap()
        .unwrap();
    assert!(f.iter().all(|&b| b == 0), "the frame untouched");
}

// ---------------------------------------------------------------- packet placement

/// With no XDP headroom the VM's packet starts at an address whose low 32
/// bits are zero. The header must not let clang turn `!p` for a packet
/// pointer into a 32-bit test of the u32 `data` field (it did: nf__opaque).
#[test]
fn packets_at_addresses_with_zero_low_bits_parse_and_mark() {
    let p = v4_full(C1, S1, UDP, 0, 64, &udp(1000, 53));
    for (module, name, args, want) in [
        ("nf.parse", "ip_version", NOARGS, 4),
        ("nf.parse", "src_port", NOARGS, 1000),
        ("nf.mark", "set_ttl", args1(5), 64),
        ("nf.mark", "set_dscp", args1(5), 0),
    ] {
        let h = Harness::xdp(module, name);
        h.map(nfkit_nf::caller::CALL_ARGS_MAP)
            .update(&0u32.to_le_bytes(), &nfkit_nf::caller::encode_args(args), 0)
            .unwrap();
        let mut x = nfkit_vm::XdpMd::new(&p);
        x.headroom = 0;
        let r = h.vm.run(
            nfkit_nf::caller::CALL_ENTRY,
            nfkit_vm::Context::Xdp(x),
            &Default::default(),
        );
        assert_eq!(r.result.ok(), Some(want), "{name}");
        assert!(ipv4_checksum_ok(&r.packet, L3), "{name}");
    }
}

//! The VM's network helpers against the kernel (`BPF_PROG_TEST_RUN`), on
//! the programs of `tests/progs/net_helpers.c`: return values, packet
//! bytes and the result maps must agree for every case.
//!
//! * `bpf_skb_adjust_room`, `bpf_skb_change_proto`, `bpf_skb_ecn_set_ce`
//!   (TC): valid and refused modes and flags on IPv4, IPv6 and ARP frames.
//! * `bpf_skb_set_tunnel_key` / `bpf_skb_get_tunnel_key` (TC): a test run's
//!   skb has no tunnel metadata, so `get` alone fails (EINVAL) in both;
//!   `set` attaches the kernel's metadata dst, which `get` then reads in
//!   the same run. Received metadata (`RunOptions::tunnel_key`) needs a
//!   tunnel device's receive path, which a test run cannot give: the VM
//!   is checked against the kernel's documented semantics in nfkit-vm's
//!   unit tests.
//! * `bpf_fib_lookup` (XDP, TC): in a network namespace of our own with
//!   veths, addresses in 198.18.0.0/15, routes and static neighbours; the
//!   VM gets the same table as `ip -o link`, `ip route show table all`
//!   and `ip neigh` print it (pasted as they are).
//! * `bpf_perf_event_output` (XDP, TC, socket filter): the kernel's
//!   records are read with a perf buffer on the test thread's CPU.

use nfkit_kernel::testbed::Netns;
use nfkit_kernel::{load_image, netns::in_netns, KernelError, LoadOptions, Loaded, TestRun};
use nfkit_object::Image;
use nfkit_vm::{Context, FibTable, RunOptions, RunResult, SkBuff, Vm, VmConfig, XdpMd};
use std::path::PathBuf;
use std::sync::Arc;

fn compile() -> Image {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = dir.join("tests/progs/net_helpers.c");
    // One file per call: tests build it from parallel threads.
    let out = nfkit_corpus::BpfBuild::new(&src)
        .arg("-mcpu=v3")
        .include(dir.join("../../corpus"))
        .object_file()
        .unwrap_or_else(|e| panic!("{e}"));
    let image = Image::from_file(&out).expect("net_helpers image");
    let _ = std::fs::remove_file(&out);
    image
}

struct Sides {
    vm: Vm,
    kernel: Loaded,
}

fn sides() -> Option<Sides> {
    if !nfkit_kernel::is_root() {
        eprintln!("skipped: needs root");
        return None;
    }
    let image = compile();
    let ncpus = nfkit_kernel::possible_cpus().expect("cpus") as u32;
    let vm = Vm::new(
        &image,
        VmConfig {
            ncpus,
            ..VmConfig::kernel()
        },
    )
    .expect("VM");
    let kernel = match load_image(&image, &LoadOptions::default()) {
        Ok(k) => k,
        Err(KernelError::Verifier { entry, log, .. }) => {
            let tail: Vec<&str> = log.lines().rev().take(3).collect();
            panic!("kernel refused {entry}: {}", tail.join(" | "))
        }
        Err(e) => panic!("kernel load: {e}"),
    };
    Some(Sides { vm, kernel })
}

impl Sides {
    /// Zeroes map `name` on both sides.
    fn reset(&self, name: &str) {
        let k = self.kernel.map(name).expect("kernel map");
        let v = self.vm.map(name).expect("vm map");
        let zero = vec![0u8; k.value_size() as usize];
        for i in 0..k.max_entries() {
            let key = i.to_le_bytes();
            k.update(&key, &zero, 0).expect("kernel reset");
            v.update(&key, &zero, 0).expect("vm reset");
        }
    }

    /// Map `name` on both sides: (kernel values, VM values).
    fn values(&self, name: &str) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let k = self.kernel.map(name).expect("kernel map");
        let v = self.vm.map(name).expect("vm map");
        (0..k.max_entries())
            .map(|i| {
                let key = i.to_le_bytes();
                (
                    k.lookup(&key).expect("kernel lookup").unwrap_or_default(),
                    v.lookup(&key).expect("vm lookup").unwrap_or_default(),
                )
            })
            .unzip()
    }

    /// Runs `prog` on a TC frame with `cb` in both; differences go to
    /// `wrong`. Returns the VM's result.
    fn tc(
        &self,
        prog: &str,
        frame: &[u8],
        cb: [u32; 5],
        map: &str,
        wrong: &mut Vec<String>,
    ) -> RunResult {
        self.reset(map);
        let mut ctx = vec![0u8; 192]; // sizeof(struct __sk_buff)
        for (i, w) in cb.iter().enumerate() {
            ctx[48 + 4 * i..52 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        let k = self.kernel.prog(prog).expect("prog").test_run(&TestRun {
            ctx_in: Some(ctx),
            ..TestRun::packet(frame)
        });
        let skb = SkBuff {
            cb,
            ..SkBuff::new(frame)
        };
        let v = self.vm.run(prog, Context::Skb(skb), &RunOptions::default());
        self.compare(prog, &format!("cb {cb:x?}"), k, &v, map, wrong);
        v
    }

    fn compare(
        &self,
        prog: &str,
        case: &str,
        k: Result<nfkit_kernel::TestRunOut, KernelError>,
        v: &RunResult,
        map: &str,
        wrong: &mut Vec<String>,
    ) {
        let k = match k {
            Ok(k) => k,
            Err(e) => {
                wrong.push(format!("{prog} {case}: kernel test run failed: {e}"));
                return;
            }
        };
        if v.r0() != Some(u64::from(k.retval)) {
            wrong.push(format!(
                "{prog} {case}: r0 VM {:?} kernel {}",
                v.result, k.retval
            ));
        }
        if !prog.starts_with("socket") && v.packet != k.data {
            wrong.push(format!(
                "{prog} {case}: packet VM {} kernel {}",
                hex(&v.packet),
                hex(&k.data)
            ));
        }
        let (kv, vv) = self.values(map);
        if kv != vv {
            let show = |x: &[Vec<u8>]| x.iter().map(|b| hex(b)).collect::<Vec<_>>().join(" ");
            wrong.push(format!(
                "{prog} {case}: {map} VM {} kernel {}",
                show(&vv),
                show(&kv)
            ));
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

const MAC_HDR: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

/// An IPv4/UDP frame (`payload` bytes) from `src` to `dst`.
fn ipv4(src: [u8; 4], dst: [u8; 4], tos: u8, id: u16, payload: usize) -> Vec<u8> {
    let mut f = MAC_HDR.to_vec();
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + 8 + payload) as u16;
    let mut ip = vec![0x45, tos];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&id.to_be_bytes());
    ip.extend_from_slice(&[0x40, 0, 64, 17, 0, 0]);
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = csum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| i as u8));
    f
}

/// An IPv6/UDP frame; `flow` is the 20-bit flow label, `tc` the traffic class.
fn ipv6(src: [u8; 16], dst: [u8; 16], tc: u8, flow: u32, payload: usize) -> Vec<u8> {
    let mut f = MAC_HDR.to_vec();
    f.extend_from_slice(&0x86ddu16.to_be_bytes());
    let word = (6u32 << 28) | (u32::from(tc) << 20) | (flow & 0xfffff);
    f.extend_from_slice(&word.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..payload).map(|i| i as u8));
    f
}

fn v6(last: u16, net: u16) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[4..6].copy_from_slice(&net.to_be_bytes());
    a[14..].copy_from_slice(&last.to_be_bytes());
    a
}

fn arp() -> Vec<u8> {
    let mut f = MAC_HDR.to_vec();
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend([0u8; 20]);
    f.extend([0u8; 18]);
    f
}

const A1: [u8; 4] = [198, 18, 0, 1];
const A2: [u8; 4] = [198, 18, 0, 2];

type Runs = Vec<(Vec<u8>, [u32; 5])>;

/// Runs `tc_room` on every (frame, cb) of `runs` in both; prints the
/// count under `what`, fails on any difference; the set of return values.
fn room_runs(s: &Sides, what: &str, runs: &Runs) -> std::collections::BTreeSet<i64> {
    let mut wrong = Vec::new();
    let mut rcs = std::collections::BTreeSet::new();
    for (f, cb) in runs {
        s.tc("tc_room", f, *cb, "room_out", &mut wrong);
        let (_, v) = s.values("room_out");
        rcs.insert(i64::from_le_bytes(v[0][..8].try_into().expect("8 bytes")));
    }
    println!("{what}: {} cases, {} disagree", runs.len(), wrong.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    rcs
}

/// An IPv4, an IPv6 and an ARP frame.
fn room_frames() -> [Vec<u8>; 3] {
    [
        ipv4(A1, A2, 0, 7, 40),
        ipv6(v6(1, 0), v6(2, 0), 0, 0, 60),
        arp(),
    ]
}

const NET: u32 = 0;
const MAC: u32 = 1;
const L3V4: u32 = 1 << 1;

#[test]
fn skb_adjust_room_and_change_proto_agree_with_the_kernel() {
    let Some(s) = sides() else { return };
    const L3V6: u32 = 1 << 2;
    const GRE: u32 = 1 << 3;
    const UDP: u32 = 1 << 4;
    const L2ETH: u32 = 1 << 6;
    const DECAP4: u32 = 1 << 7;
    const DECAP6: u32 = 1 << 8;
    let l2 = |n: u32| n << 24; // in the flags' high word
                               // (len_diff, mode, flags low, flags high)
    let room: &[(i32, u32, u32, u32)] = &[
        (8, NET, 0, 0),
        (8, MAC, 0, 0),
        (-8, NET, 0, 0),
        (-8, MAC, 0, 0),
        (0, NET, 0, 0),
        (20, MAC, L3V4, 0),
        (40, MAC, L3V6, 0),
        (28, MAC, L3V4 | UDP, 0),
        (24, MAC, L3V4 | GRE, 0),
        (28, MAC, L3V4 | GRE | UDP, 0),
        (28, MAC, L3V4 | L3V6, 0),
        (34, MAC, L3V4 | L2ETH, l2(14)),
        (34, MAC, L3V4 | L2ETH, l2(10)),
        (20, MAC, L3V4, l2(30)),
        (8, NET, 1 | (1 << 5), 0),
        (8, NET, 1 << 9, 0),
        (5000, NET, 0, 0),
        (8, 2, 0, 0),
        (-20, MAC, DECAP4, 0),
        (-40, MAC, DECAP6, 0),
        (-20, MAC, DECAP4 | DECAP6, 0),
        (8, NET, DECAP4, 0),
        (-8, NET, L3V4, 0),
        (-1000, NET, 0, 0),
        (-40, NET, 0, 0),
    ];
    let mut runs = Runs::new();
    for f in room_frames() {
        for &(d, mode, lo, hi) in room {
            runs.push((f.clone(), [0, d as u32, mode, lo, hi]));
        }
        // Encapsulating twice: the second gives EALREADY.
        runs.push((f.clone(), [3, 20, MAC, L3V4, 0]));
        for (proto, flags) in [(0x86dd, 0), (0x0800, 0), (0x86dd, 1), (0x0806, 0)] {
            runs.push((f.clone(), [1, proto, 0, flags, 0]));
        }
    }
    // A VLAN-tagged frame: not IP.
    let mut tagged = ipv4(A1, A2, 0x2a, 9, 10);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    runs.push((tagged.clone(), [0, 8, NET, 0, 0]));
    runs.push((tagged, [1, 0x86dd, 0, 0, 0]));
    let rcs = room_runs(&s, "adjust_room / change_proto", &runs);
    // Every outcome occurred: success, EINVAL, EFAULT, EALREADY, ENOTSUPP.
    for rc in [0, -22, -14, -114, -524] {
        assert!(rcs.contains(&rc), "no case returned {rc}: {rcs:?}");
    }
}

#[test]
fn skb_ecn_set_ce_agrees_with_the_kernel() {
    let Some(s) = sides() else { return };
    let mut runs = Runs::new();
    // Every codepoint, IPv4 checksums of many ids (end-around carry).
    for ecn in 0..4u8 {
        for id in (0..4000u16).step_by(97) {
            runs.push((ipv4(A1, A2, 0x28 | ecn, id, 10), [2, 0, 0, 0, 0]));
        }
        let f = ipv6(v6(1, 0), v6(2, 0), 0x28 | ecn, 5, 10);
        runs.push((f, [2, 0, 0, 0, 0]));
    }
    runs.push((arp(), [2, 0, 0, 0, 0]));
    // VLAN-tagged: the protocol behind the tag.
    let mut tagged = ipv4(A1, A2, 0x2a, 9, 10);
    tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
    runs.push((tagged, [2, 0, 0, 0, 0]));
    let rcs = room_runs(&s, "ecn_set_ce", &runs);
    assert_eq!(rcs.into_iter().collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn skb_hash_type_tail_head_and_tstamp_agree_with_the_kernel() {
    let Some(s) = sides() else { return };
    let mut runs = Runs::new();
    for f in room_frames() {
        let len = f.len() as u32;
        for cb in [
            [4, 0x1234_5678, 0, 0, 0],
            [5, 0x1234_5678, 0, 0, 0],
            [6, 0, 0, 0, 0],
            [6, 3, 0, 0, 0],
            [6, 4, 0, 0, 0],
            [7, 0xffff, 0, 0, 0],
            [8, len + 10, 0, 0, 0],
            [8, len - 10, 0, 0, 0],
            [8, 14, 0, 0, 0],
            [8, 13, 0, 0, 0],
            [8, len, 0, 1, 0],
            [8, 20000, 0, 0, 0],
            [9, len + 4, 0, 0, 0],
            // change_head, then helpers that find the network header.
            [16, 14, 0, 0, 0],
            [16, 0, 0, 0, 0],
            [16, 4, 0, 1, 0],
            [16, 20000, 0, 0, 0],
            [16, 14, 1, 0, 0],
            [16, 14, 2, 0, 0],
            [16, 14, 3, 0, 0],
            [16, 14, 4, 0, 20],
            [16, 14, 4, 0, 40],
            [16, 14, 5, 0, 0],
        ] {
            runs.push((f.clone(), cb));
        }
        // Timestamps of every clock type, zero and not.
        for (hi, ty, lo) in [
            (1, 0, 5),
            (0, 0, 0),
            (1, 1, 5),
            (0, 1, 0),
            (1, 2, 5),
            (0, 2, 0),
            (1, 3, 5),
        ] {
            runs.push((f.clone(), [17, hi, ty, lo, 0]));
        }
    }
    // Checksum levels: every step sequence of inc, dec, reset, query, an
    // unknown level and adjust_room with and without NO_CSUM_RESET.
    for a in [0, 1, 2, 3, 4, 5, 6] {
        for b in [1, 2, 3, 5, 6] {
            for c in [0, 1, 2] {
                runs.push((room_frames()[0].clone(), [15, a, b, c, 0]));
            }
        }
    }
    room_runs(&s, "hash / type / tail / head / tstamp / csum_level", &runs);
}

#[test]
fn skb_vlan_push_and_pop_agree_with_the_kernel() {
    let Some(s) = sides() else { return };
    // Pushed out of band, into the frame under a new one, popped from out
    // of band or the frame (QinQ, length-field payloads, a short frame).
    let tag = |f: &[u8], tpid: u16, tci: u16| -> Vec<u8> {
        let mut t = f.to_vec();
        let mut h = tpid.to_be_bytes().to_vec();
        h.extend_from_slice(&tci.to_be_bytes());
        t.splice(12..12, h);
        t
    };
    let plain = room_frames()[0].clone();
    let one = tag(&plain, 0x8100, 5);
    let mut raw = MAC_HDR.to_vec();
    raw.extend_from_slice(&[0x81, 0, 0, 9, 0, 0x40, 0xff, 0xff]);
    raw.extend([7u8; 30]);
    let mut llc = raw.clone();
    llc[18] = 0xaa;
    let frames = [
        plain,
        one.clone(),
        tag(&one, 0x88a8, 7),
        raw,
        llc,
        one[..17].to_vec(),
    ];
    let mut runs = Runs::new();
    for f in &frames {
        for cb in [
            [10, 0x8100, 0x1005, 0, 0],
            [10, 0x88a8, 3, 0, 0],
            [10, 0x0800, 3, 0, 0],
            [11, 0x8100, 5, 0x88a8, 6],
            [12, 0, 0, 0, 0],
            [13, 0x8100, 5, 0, 0],
            [14, 0, 0, 0, 0],
        ] {
            runs.push((f.clone(), cb));
        }
    }
    room_runs(&s, "vlan push / pop", &runs);
}

#[test]
fn tunnel_keys_agree_with_the_kernel() {
    let Some(s) = sides() else { return };
    const V6: u32 = 1;
    const FLAGS: u32 = 1 << 4;
    let f = ipv4(A1, A2, 0, 1, 20);
    // (op, id, set flags, get flags, size)
    let cases: &[[u32; 5]] = &[
        [0, 0, 0, 0, 44],
        [0, 0, 0, FLAGS, 44],
        [1, 5, 0, 0, 44],
        [1, 5, 0, FLAGS, 44],
        [1, 0xdead_beef, 2 | 4 | 8, FLAGS, 44],
        [1, 6, 16, FLAGS, 44],
        [1, 7, V6, V6 | FLAGS, 44],
        [1, 7, V6, 0, 44],
        [1, 7, 0, V6, 44],
        [1 | (5 << 8), 8, 0, 0, 44],
        [1 | (5 << 8), 8, V6, V6, 44],
        [1 | (0x1f_ffff << 8), 8, V6, V6, 44],
        [1, 9, 0, 0, 28],
        [1, 9, 0, 0, 24],
        [1, 9, 0, 0, 22],
        [1, 9, 0, 0, 8],
        [1, 9, 0, 0, 30],
        [1, 9, 1 << 5, 0, 44],
        [1, 9, 0, 1 << 1, 44],
        [0x81, 10, 0, 0, 24],
        [0x81, 10, 0, 0, 28],
        [0x81, 10, 0, 0, 8],
        [0x81, 10, V6, V6, 8],
        [0x81, 10, 0, 0, 30],
    ];
    let mut wrong = Vec::new();
    let mut rcs = std::collections::BTreeSet::new();
    for cb in cases {
        let v = s.tc("tc_tunnel", &f, *cb, "tun_out", &mut wrong);
        let (_, vals) = s.values("tun_out");
        rcs.insert(i64::from_le_bytes(
            vals[0][8..16].try_into().expect("8 bytes"),
        ));
        let set_ok = vals[0].get(..8) == Some(&[0u8; 8][..]) && cb[0] & 0xff != 0;
        if set_ok != v.tunnel_key.is_some() {
            wrong.push(format!(
                "cb {cb:x?}: VM reports tunnel key {:?}",
                v.tunnel_key
            ));
        }
    }
    // Tunnel options: (set a key first, option bytes (0xff: none), get size).
    let opts: &[[u32; 3]] = &[
        [0, 0xff, 20],
        [0, 8, 20],
        [1, 0xff, 20],
        [1, 8, 20],
        [1, 20, 20],
        [1, 8, 4],
        [1, 6, 20],
        [1, 8, 12],
    ];
    for &[key, n, m] in opts {
        s.tc("tc_tunopt", &f, [key, n, m, 0, 0], "tun_out", &mut wrong);
    }
    println!(
        "tunnel keys and options: {} cases, {} disagree",
        cases.len() + opts.len(),
        wrong.len()
    );
    assert_eq!(
        rcs.into_iter().collect::<Vec<_>>(),
        [-71, -22, 0],
        "get results"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `ip` commands that build [`fib_netns`], one per line.
const FIB_SETUP: &[&str] = &[
    "link add v0 type veth peer name v1",
    "link set v0 address 02:00:00:00:00:10 up",
    "link set v1 address 02:00:00:00:00:11 mtu 1400 up",
    "addr add 198.18.0.1/24 dev v0",
    "addr add 198.18.1.1/24 dev v1",
    "-6 addr add 2001:db8::1/64 dev v0 nodad",
    "-6 addr add 2001:db8:1::1/64 dev v1 nodad",
    "route add 198.18.5.0/24 via 198.18.1.2 dev v1 mtu 1300",
    "route add 198.18.4.0/24 via 198.18.0.2 metric 7",
    "route add 198.18.3.0/24 via 198.18.1.2 mtu lock 1300",
    "route add blackhole 198.18.6.0/24",
    "route add unreachable 198.18.7.0/24",
    "route add prohibit 198.18.8.0/24",
    "route add 198.18.9.0/24 via 198.18.0.2 dev v0 table 100",
    "neigh add 198.18.1.2 lladdr 02:00:00:00:00:aa dev v1 nud permanent",
    "neigh add 198.18.0.2 lladdr 02:00:00:00:00:bb dev v0 nud permanent",
    "-6 route add 2001:db8:5::/64 via 2001:db8:1::2 dev v1",
    "-6 route add blackhole 2001:db8:6::/64",
    "-6 route add 2001:db8:7::/64 via 2001:db8:1::2 mtu lock 1280",
    "-6 route add 2001:db8:8::/64 via 2001:db8:1::2 mtu 1280",
    "-6 neigh add 2001:db8:1::2 lladdr 02:00:00:00:00:cc dev v1 nud permanent",
];

/// A namespace with two veths (v0: 198.18.0.1/24, 2001:db8::1/64; v1 with
/// MTU 1400: 198.18.1.1/24, 2001:db8:1::1/64), routes of every type, a
/// second table, static neighbours and forwarding on. Removed on drop.
fn fib_netns() -> Netns {
    let ns = Netns::new("fib").expect("netns");
    for c in FIB_SETUP {
        let args: Vec<&str> = c.split_whitespace().collect();
        ns.ip(&args).unwrap_or_else(|e| panic!("ip {c}: {e}"));
    }
    ns.exec(&[
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
    ])
    .expect("sysctl");
    ns
}

/// The namespace's table as `ip` prints it, read by the VM's parser.
fn fib_table(ns: &Netns) -> FibTable {
    let mut text = String::new();
    for args in [
        &["-o", "link"][..],
        &["route", "show", "table", "all"],
        &["-6", "route", "show", "table", "all"],
        &["neigh"],
        &["-6", "neigh"],
    ] {
        text += &ns.ip(args).expect("ip show");
        text.push('\n');
    }
    FibTable::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn fib_lookup_agrees_with_the_kernel() {
    let Some(s) = sides() else { return };
    let ns = fib_netns();
    let table = Arc::new(fib_table(&ns));
    let v0 = ns.ifindex("v0").expect("v0");
    const DIRECT: u16 = 1;
    const OUTPUT: u16 = 2;
    const SKIP: u16 = 4;
    const TBID: u16 = 8;
    const SRC: u16 = 16;
    const TOT: u16 = 0x100;
    let d = |c: u8, x: u8| [198, 18, c, x];
    // (destination, flags in the IP id; TOT = pass the IP length)
    let v4: Vec<([u8; 4], u16, usize)> = vec![
        (d(5, 7), 0, 20),
        (d(5, 7), OUTPUT, 20),
        (d(5, 7), TOT, 1300),
        (d(5, 7), TOT, 1400),
        (d(5, 7), 0, 1400),
        (d(3, 7), TOT, 1300),
        (d(3, 7), TOT, 1200),
        (d(4, 1), 0, 20),
        (d(0, 2), 0, 20),
        (d(0, 3), 0, 20),
        (d(0, 3), SKIP, 20),
        (d(0, 1), 0, 20),
        (d(6, 1), 0, 20),
        (d(7, 1), 0, 20),
        (d(8, 1), 0, 20),
        (d(9, 5), 0, 20),
        (d(9, 5), DIRECT | TBID, 20),
        (d(9, 5), DIRECT, 20),
        (d(1, 9), DIRECT, 20),
        (d(0, 2), SRC, 20),
        ([10, 1, 1, 1], 0, 20),
        (d(5, 7), 64, 20),
    ];
    let mut frames: Vec<Vec<u8>> = v4
        .iter()
        .map(|&(dst, fl, n)| ipv4(A1, dst, 0, fl, n))
        .collect();
    for (net, last, fl, n) in [
        (5u16, 7u16, 0u32, 20usize),
        (5, 7, 0x100, 1400),
        (7, 7, 0x100, 1300),
        (7, 7, 0x100, 1000),
        (8, 7, 0x100, 1300),
        (0, 9, 0, 20),
        (0, 9, 4, 20),
        (6, 1, 0, 20),
        (9, 1, 0, 20),
    ] {
        frames.push(ipv6(v6(1, 0), v6(last, net), 0, fl, n));
    }
    let mut ll = v6(1, 0);
    ll[..2].copy_from_slice(&[0xfe, 0x80]);
    frames.push(ipv6(v6(1, 0), ll, 0, 0, 20));
    frames.push(arp());
    let opts = RunOptions {
        fib: Some(table),
        ..RunOptions::default()
    };
    let wrong = in_netns(Some(ns.name()), || {
        let mut wrong = Vec::new();
        let mut codes = std::collections::BTreeSet::new();
        for f in &frames {
            fib_case(&s, f, &opts, [v0, 999], &mut wrong, &mut codes);
        }
        // Every result code the table can give, and ENODEV.
        for c in [0, 1, 2, 3, 4, 7, 8, -19, -22, -97] {
            if !codes.contains(&c) {
                wrong.push(format!("no case returned {c}: {codes:?}"));
            }
        }
        Ok(wrong)
    })
    .expect("in netns");
    println!(
        "fib_lookup: {} frames x 3 runs, {} disagree",
        frames.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // No table: nothing is forwarded.
    let v = s.vm.run(
        "xdp_fib",
        Context::Xdp(XdpMd::new(&frames[0])),
        &RunOptions::default(),
    );
    assert_eq!(v.r0(), Some(2));
    let (_, vals) = s.values("fib_out");
    assert_eq!(vals[0][..8], 4i64.to_le_bytes());
}

#[test]
fn check_mtu_agrees_with_the_kernel() {
    let Some(s) = sides() else { return };
    let ns = fib_netns();
    let table = Arc::new(fib_table(&ns));
    let v1 = ns.ifindex("v1").expect("v1");
    let opts = RunOptions {
        fib: Some(table),
        ..RunOptions::default()
    };
    // (ifindex, mtu_len, len_diff, flags, payload)
    let cases: Vec<(u32, u32, i32, u32, usize)> = vec![
        (0, 0, 0, 0, 100),
        (v1, 0, 0, 0, 100),
        (v1, 0, 0, 0, 1400),
        (v1, 0, -50, 0, 1400),
        (v1, 1400, 0, 0, 100),
        (v1, 1401, 0, 0, 100),
        (v1, 1300, 101, 0, 100),
        (v1, 0, 0, 1, 100),
        (v1, 5, 0, 1, 100),
        (v1, 0, 0, 2, 100),
        (999, 0, 0, 0, 100),
        (999, 7, 0, 0, 100),
        (1, 0, 0, 0, 100),
    ];
    let wrong = in_netns(Some(ns.name()), || {
        let mut wrong = Vec::new();
        let mut codes = std::collections::BTreeSet::new();
        for &(ifindex, mtu_len, diff, flags, n) in &cases {
            let mut f = ipv4(A1, A2, 0, 0, n.max(16));
            for (i, w) in [ifindex, mtu_len, diff as u32, flags].iter().enumerate() {
                f[42 + 4 * i..46 + 4 * i].copy_from_slice(&w.to_le_bytes());
            }
            let case = format!(
                "ifindex {ifindex} mtu_len {mtu_len} diff {diff} flags {flags} len {}",
                f.len()
            );
            for prog in ["xdp_mtu", "tc_mtu"] {
                s.reset("mtu_out");
                let k = s
                    .kernel
                    .prog(prog)
                    .expect("prog")
                    .test_run(&TestRun::packet(&f));
                let ctx = if prog == "xdp_mtu" {
                    Context::Xdp(XdpMd::new(&f))
                } else {
                    Context::Skb(SkBuff::new(&f))
                };
                let v = s.vm.run(prog, ctx, &opts);
                s.compare(prog, &case, k, &v, "mtu_out", &mut wrong);
                codes.insert(i64::from_le_bytes(
                    s.values("mtu_out").1[0][..8].try_into().expect("8"),
                ));
            }
        }
        for c in [0, 1, -19, -22] {
            if !codes.contains(&c) {
                wrong.push(format!("no case returned {c}: {codes:?}"));
            }
        }
        Ok(wrong)
    })
    .expect("in netns");
    println!(
        "check_mtu: {} cases x 2, {} disagree",
        cases.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One frame through `xdp_fib` (ingress: loopback) and `tc_fib` (input
/// devices v0 and a missing one).
fn fib_case(
    s: &Sides,
    f: &[u8],
    opts: &RunOptions,
    ifindexes: [u32; 2],
    wrong: &mut Vec<String>,
    codes: &mut std::collections::BTreeSet<i64>,
) {
    let case = hex(&f[14..f.len().min(54)]);
    s.reset("fib_out");
    let k = s
        .kernel
        .prog("xdp_fib")
        .expect("prog")
        .test_run(&TestRun::packet(f));
    let v = s.vm.run("xdp_fib", Context::Xdp(XdpMd::new(f)), opts);
    s.compare("xdp_fib", &case, k, &v, "fib_out", wrong);
    codes.insert(i64::from_le_bytes(
        s.values("fib_out").1[0][..8].try_into().expect("8"),
    ));
    for ifindex in ifindexes {
        s.reset("fib_out");
        let mut ctx = vec![0u8; 192];
        ctx[48..52].copy_from_slice(&ifindex.to_le_bytes());
        let k = s.kernel.prog("tc_fib").expect("prog").test_run(&TestRun {
            ctx_in: Some(ctx),
            ..TestRun::packet(f)
        });
        let skb = SkBuff {
            cb: [ifindex, 0, 0, 0, 0],
            ..SkBuff::new(f)
        };
        let v = s.vm.run("tc_fib", Context::Skb(skb), opts);
        s.compare(
            "tc_fib",
            &format!("{case} dev {ifindex}"),
            k,
            &v,
            "fib_out",
            wrong,
        );
        codes.insert(i64::from_le_bytes(
            s.values("fib_out").1[0][..8].try_into().expect("8"),
        ));
    }
}

#[test]
fn string_helpers_agree_with_the_kernel() {
    let Some(s) = sides() else { return };
    let texts: &[(&[u8], u8)] = &[
        (b"42", 0),
        (b"  -42xyz", 10),
        (b"0x1f", 0),
        (b"0x1f", 16),
        (b"0x", 16),
        (b"017", 0),
        (b"019", 8),
        (b"9", 8),
        (b"\t\n 7", 0),
        (b"-", 0),
        (b"", 0),
        (b"abc", 16),
        (b"9223372036854775807", 10),
        (b"9223372036854775808", 10),
        (b"-9223372036854775808", 10),
        (b"18446744073709551615", 10),
        (b"18446744073709551616", 10),
        (b"-0", 10),
        (b"12", 3),
        (b"12", 0x20),
        (b"198.18.0.1", 10),
        (b"198.18.0", 0),
        (b"198.17", 0),
        (b"198.19", 0),
        (
            b"000000000000000000000000000000000000000000000000000000000000000000001",
            10,
        ),
    ];
    let mut wrong = Vec::new();
    for &(t, flags) in texts {
        let mut f = ipv4(A1, A2, 0, 0, 48);
        f[40] = flags;
        f[41] = t.len().min(32) as u8;
        f[42..90].fill(0);
        let n = t.len().min(48);
        f[42..42 + n].copy_from_slice(&t[..n]);
        s.reset("str_out");
        let k = s
            .kernel
            .prog("xdp_str")
            .expect("prog")
            .test_run(&TestRun::packet(&f));
        let v = s.vm.run(
            "xdp_str",
            Context::Xdp(XdpMd::new(&f)),
            &RunOptions::default(),
        );
        s.compare(
            "xdp_str",
            &String::from_utf8_lossy(t),
            k,
            &v,
            "str_out",
            &mut wrong,
        );
    }
    println!(
        "strtol/strtoul/strncmp: {} texts, {} disagree",
        texts.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A kernel record as the perf buffer hands it over: (CPU, bytes with the
/// ring's padding to 8 bytes with the size word).
type Records = std::sync::Arc<std::sync::Mutex<Vec<(i32, Vec<u8>)>>>;

#[test]
fn perf_event_output_agrees_with_the_kernel() {
    let Some(s) = sides() else { return };
    let ncpus = nfkit_kernel::possible_cpus().expect("cpus");
    let cpu = if ncpus > 1 { 1 } else { 0 };
    nfkit_kernel::pin_thread_to_cpu(cpu).expect("pin");
    let records: Records = Default::default();
    let sink = records.clone();
    let events = s.kernel.map("events").expect("events map");
    let perf = libbpf_rs::PerfBufferBuilder::new(events.handle())
        .sample_cb(move |c: i32, data: &[u8]| {
            if let Ok(mut r) = sink.lock() {
                r.push((c, data.to_vec()));
            }
        })
        .build()
        .expect("perf buffer");
    let opts = RunOptions {
        cpu: cpu as u32,
        ..RunOptions::default()
    };
    let mut wrong = Vec::new();
    let mut seen = 0;
    for sel in [0u8, 1, 2, 4, 5, 8, 16, 4 | 16] {
        let f = ipv4(A1, A2, sel, 3, 30);
        for prog in ["xdp_perf", "tc_perf", "socket_perf"] {
            s.reset("perf_out");
            let k = s
                .kernel
                .prog(prog)
                .expect("prog")
                .test_run(&TestRun::packet(&f));
            let ctx = if prog == "xdp_perf" {
                Context::Xdp(XdpMd::new(&f))
            } else {
                Context::Skb(SkBuff::new(&f))
            };
            let v = s.vm.run(prog, ctx, &opts);
            s.compare(prog, &format!("sel {sel}"), k, &v, "perf_out", &mut wrong);
            perf.consume().expect("consume");
            let got = std::mem::take(&mut *records.lock().expect("records"));
            let want: Vec<(i32, Vec<u8>)> = v
                .perf_events
                .iter()
                .map(|e| (e.cpu as i32, [e.data.clone(), e.packet.clone()].concat()))
                .collect();
            seen += want.len();
            let same = got.len() == want.len()
                && got.iter().zip(&want).all(|((kc, kb), (vc, vb))| {
                    kc == vc && kb.len() == (vb.len() + 4).div_ceil(8) * 8 - 4 && kb.starts_with(vb)
                });
            if !same {
                wrong.push(format!(
                    "{prog} sel {sel}: records VM {:?} kernel {:?}",
                    want.iter().map(|(c, b)| (c, hex(b))).collect::<Vec<_>>(),
                    got.iter().map(|(c, b)| (c, hex(b))).collect::<Vec<_>>()
                ));
            }
        }
    }
    println!(
        "perf_event_output: {seen} records, {} disagree",
        wrong.len()
    );
    assert!(seen >= 6, "too few records to compare: {seen}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `bpf_clone_redirect` to the namespace's loopback (up, so the kernel
/// transmits the copy), out of it and into it, and the refused flags and
/// ifindex 0: the same return codes and packet in both; the VM reports
/// each copy.
#[test]
fn clone_redirect_agrees_with_the_kernel() {
    let Some(s) = sides() else { return };
    let ns = Netns::new("clone").expect("netns");
    ns.ip(&["link", "set", "lo", "up"]).expect("lo up");
    let frame = ipv4(A1, A2, 0, 7, 20);
    let cases: [([u32; 5], i64); 4] = [
        ([1, 0, 0, 0, 0], 0),
        ([1, 1, 0, 0, 0], 0),
        ([0, 0, 0, 0, 0], -22),
        ([1, 2, 0, 0, 0], -22),
    ];
    let wrong = in_netns(Some(ns.name()), || {
        let mut wrong = Vec::new();
        for (cb, rc) in cases {
            let v = s.tc("tc_clone", &frame, cb, "clone_out", &mut wrong);
            let (_, vm) = s.values("clone_out");
            let got = i64::from_le_bytes(vm[0][..8].try_into().expect("8 bytes"));
            if got != rc {
                wrong.push(format!("cb {cb:?}: VM returned {got}, expected {rc}"));
            }
            let clones: Vec<(u32, bool, &[u8])> = v
                .clones
                .iter()
                .map(|c| (c.ifindex, c.ingress, c.packet.as_slice()))
                .collect();
            let want: Vec<(u32, bool, &[u8])> = if rc == 0 {
                vec![(cb[0], cb[1] == 1, frame.as_slice())]
            } else {
                Vec::new()
            };
            if clones != want {
                wrong.push(format!("cb {cb:?}: VM clones {:?}", v.clones));
            }
        }
        Ok(wrong)
    })
    .expect("in netns");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

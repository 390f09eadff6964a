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
use std::process::Command;
use std::sync::Arc;

fn compile() -> Image {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = dir.join("tests/progs/net_helpers.c");
    let out = std::env::temp_dir().join(format!("nfkit-net-helpers-{}.o", std::process::id()));
    let arch = Command::new("uname").arg("-m").output().expect("uname");
    let arch = String::from_utf8_lossy(&arch.stdout).trim().to_string();
    let status = Command::new("clang")
        .args(["-O2", "-g", "-target", "bpf", "-mcpu=v3"])
        .arg(format!("-I/usr/include/{arch}-linux-gnu"))
        .arg(format!("-I{}", dir.join("../../corpus").display()))
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .status()
        .expect("run clang");
    assert!(status.success(), "clang failed on {}", src.display());
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
    fn tc(&self, prog: &str, frame: &[u8], cb: [u32; 5], map: &str, wrong: &mut Vec<String>) -> RunResult {
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
            wrong.push(format!("{prog} {case}: r0 VM {:?} kernel {}", v.result, k.retval));
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
            wrong.push(format!("{prog} {case}: {map} VM {} kernel {}", show(&vv), show(&kv)));
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

#[test]
fn skb_room_proto_and_ecn_agree_with_the_kernel() {
    let Some(s) = sides() else { return };
    const NET: u32 = 0;
    const MAC: u32 = 1;
    const L3V4: u32 = 1 << 1;
    const L3V6: u32 = 1 << 2;
    const GRE: u32 = 1 << 3;
    const UDP: u32 = 1 << 4;
    const L2ETH: u32 = 1 << 6;
    const DECAP4: u32 = 1 << 7;
    const DECAP6: u32 = 1 << 8;
    let l2 = |n: u32| n << 24; // in the flags' high word
    let frames = [
        ipv4(A1, A2, 0, 7, 40),
        ipv6(v6(1, 0), v6(2, 0), 0, 0, 60),
        arp(),
    ];
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
    let mut wrong = Vec::new();
    let mut cases = 0;
    let mut rcs = std::collections::BTreeSet::new();
    let mut run = |f: &[u8], cb: [u32; 5], wrong: &mut Vec<String>| {
        s.tc("tc_room", f, cb, "room_out", wrong);
        let (_, v) = s.values("room_out");
        rcs.insert(i64::from_le_bytes(v[0][..8].try_into().expect("8 bytes")));
    };
    for f in &frames {
        for &(d, mode, lo, hi) in room {
            run(f, [0, d as u32, mode, lo, hi], &mut wrong);
            cases += 1;
        }
        // Encapsulating twice: the second gives EALREADY.
        run(f, [3, 20, MAC, L3V4, 0], &mut wrong);
        for (proto, flags) in [(0x86dd, 0), (0x0800, 0), (0x86dd, 1), (0x0806, 0)] {
            run(f, [1, proto, 0, flags, 0], &mut wrong);
            cases += 1;
        }
    }
    // Every outcome occurred: success, EINVAL, EFAULT, EALREADY, ENOTSUPP.
    for rc in [0, -22, -14, -114, -524] {
        assert!(rcs.contains(&rc), "no case returned {rc}: {rcs:?}");
    }
    // ECN: every codepoint, IPv4 checksums of many ids (end-around carry).
    for ecn in 0..4u8 {
        for id in (0..4000u16).step_by(97) {
            let f = ipv4(A1, A2, 0x28 | ecn, id, 10);
            s.tc("tc_room", &f, [2, 0, 0, 0, 0], "room_out", &mut wrong);
            cases += 1;
        }
        let f = ipv6(v6(1, 0), v6(2, 0), 0x28 | ecn, 5, 10);
        s.tc("tc_room", &f, [2, 0, 0, 0, 0], "room_out", &mut wrong);
        cases += 1;
    }
    s.tc("tc_room", &arp(), [2, 0, 0, 0, 0], "room_out", &mut wrong);
    println!("skb room/proto/ecn: {cases} cases, {} disagree", wrong.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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
        rcs.insert(i64::from_le_bytes(vals[0][8..16].try_into().expect("8 bytes")));
        let set_ok = vals[0].get(..8) == Some(&[0u8; 8][..]) && cb[0] & 0xff != 0;
        if set_ok != v.tunnel_key.is_some() {
            wrong.push(format!("cb {cb:x?}: VM reports tunnel key {:?}", v.tunnel_key));
        }
    }
    println!("tunnel keys: {} cases, {} disagree", cases.len(), wrong.len());
    assert_eq!(rcs.into_iter().collect::<Vec<_>>(), [-71, -22, 0], "get results");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

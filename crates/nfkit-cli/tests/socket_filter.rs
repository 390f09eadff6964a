//! Socket filters: a chain script with `attach(..., "socket")`, compiled
//! by nfkit-lang, loaded and attached to a UDP socket in a test
//! namespace (`nfkit_kernel::attach_socket_filter`); datagrams from the
//! peer namespace with various source ports and payloads. The datagrams
//! the filter drops never reach the socket, the others do, and the
//! script's maps end as the VM's.
//!
//! The VM does not model `bpf_skb_load_bytes_relative` (how socket
//! filters read the packet), so the VM side runs the same script
//! compiled for XDP on the same datagrams as Ethernet frames. The script
//! reads only the parse-once fields and offsets relative to
//! `Packet.l4_off`, which mean the same at both hooks, so the verdicts
//! and maps must be equal. Needs root (skipped otherwise).

mod common;
use common::{is_root, le, Pair};
use nfkit_kernel::deploy::enter_netns;
use nfkit_kernel::{attach_socket_filter, load_image, LoadOptions};
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

const SCRIPT: &str = r#""""Keeps datagrams from odd source ports, and from even ones whose
payload starts with 'K'; counts datagrams per source port."""
from nf.classify import every_packet

seen = HashMap(u16, u64, 64)
dropped = ArrayMap(u64, 1)

def keep() -> u64:
    if Packet.l4_proto != 17:
        return PASS
    seen[Packet.sport] += 1
    if Packet.sport % 2 == 1:
        return PASS
    if Packet.read_u8(u64(Packet.l4_off) + 8) == 0x4b:
        return PASS
    dropped[0] += 1
    return DROP

every_packet(keep)
attach("lo", "socket")
"#;

const SUT: Ipv4Addr = Ipv4Addr::new(198, 18, 43, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(198, 18, 43, 2);
const PORT: u16 = 7000;

fn compile(hook: Option<nfkit_nf::Hook>) -> nfkit_lang::Compiled {
    let opts = nfkit_lang::Options {
        search: nfkit_nf::SearchPath::from_env(&[]),
        hook,
    };
    nfkit_lang::compile("keep.py", SCRIPT, &opts).unwrap_or_else(|e| panic!("{e}"))
}

/// The datagrams: (source port, payload).
fn datagrams() -> Vec<(u16, Vec<u8>)> {
    (0..30u16)
        .map(|i| {
            let first = if i % 3 == 0 { b'K' } else { b'x' };
            (5000 + i % 12, vec![first, i as u8, 0xaa, 0x55])
        })
        .collect()
}

/// The datagram as the peer's stack sends it, as an Ethernet frame.
fn frame(sport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    let total = 20 + 8 + payload.len() as u16;
    f.extend([0x45, 0]);
    f.extend(total.to_be_bytes());
    f.extend([0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend(PEER.octets());
    f.extend(SUT.octets());
    f.extend(sport.to_be_bytes());
    f.extend(PORT.to_be_bytes());
    f.extend((8 + payload.len() as u16).to_be_bytes());
    f.extend([0, 0]);
    f.extend(payload);
    f
}

/// A map's entries as (key, value) integers, sorted, array zeros left out.
fn kernel_map(m: &nfkit_kernel::KMap, is_array: bool) -> Vec<(u64, u64)> {
    let mut rows: Vec<(u64, u64)> = m
        .entries()
        .expect("entries")
        .into_iter()
        .map(|(k, v)| (le(&k), le(&v)))
        .filter(|(_, v)| !(is_array && *v == 0))
        .collect();
    rows.sort();
    rows
}

/// The VM's account: the script compiled for XDP run on the datagrams
/// as frames; the datagrams it keeps (by their second payload byte) and
/// the report (for the maps).
fn vm_kept() -> (BTreeSet<u8>, nfkit_control::runner::Report) {
    // The VM's verdicts (XDP codes: 2 pass, 1 drop) and maps.
    let vm_c = compile(Some(nfkit_nf::Hook::Xdp));
    let input: Vec<(u64, Vec<u8>)> = datagrams()
        .iter()
        .map(|(sp, p)| (1_000_000_000, frame(*sp, p)))
        .collect();
    let report = nfkit_control::runner::run_capture(&vm_c, &input, false).expect("VM run");
    let vm_kept: BTreeSet<u8> = report
        .lines
        .iter()
        .zip(datagrams())
        .filter(|(l, _)| l.code == 2)
        .map(|(_, (_, p))| p[1])
        .collect();
    let vm_dropped = report.lines.iter().filter(|l| l.code == 1).count();
    assert_eq!(vm_kept.len() + vm_dropped, datagrams().len());
    assert!(
        vm_dropped > 0 && !vm_kept.is_empty(),
        "a test that can fail"
    );
    (vm_kept, report)
}

/// The kernel's filter: the script compiled for its own hook, `socket`,
/// loaded with its control-plane writes done; also its entry's name.
fn load_filter() -> (nfkit_lang::Compiled, nfkit_kernel::Loaded, String) {
    let c = compile(None);
    assert_eq!(c.hook, nfkit_nf::Hook::Socket);
    let entry = c.entry().expect("classifier").to_string();
    let loaded = load_image(
        &c.image,
        &LoadOptions {
            entries: Some(vec![entry.clone()]),
            ..LoadOptions::default()
        },
    )
    .expect("load");
    for (m, k, v) in c.control_plane() {
        loaded.map(&m).expect("map").update(&k, &v, 0).expect("cp");
    }
    (c, loaded, entry)
}

/// SUT 198.18.43.1, peer 198.18.43.2, with fixed MACs and neighbours:
/// no ARP in flight while datagrams go out.
fn bed() -> Pair {
    let pair = Pair::new("sut", "peer", "198.18.43");
    pair.pin_neighbours("198.18.43", 0);
    pair
}

/// In namespace `sut_ns`: binds the UDP socket, attaches `prog`, says
/// ready, and gives the datagrams it receives (by their second payload
/// byte, each once) until `want` are in and nothing more comes for
/// 100 ms (extras would show), or 3 s.
fn receive_kept(
    sut_ns: &str,
    prog: &nfkit_kernel::Prog,
    want: usize,
    ready: std::sync::mpsc::Sender<()>,
) -> BTreeSet<u8> {
    enter_netns(sut_ns).expect("enter sut");
    let sock = UdpSocket::bind(SocketAddrV4::new(SUT, PORT)).expect("bind");
    attach_socket_filter(&sock, prog).expect("attach");
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    ready.send(()).expect("ready");
    let mut got = BTreeSet::new();
    let mut buf = [0u8; 64];
    let t0 = Instant::now();
    let mut quiet_since = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                assert!(n >= 2, "short datagram");
                assert!(got.insert(buf[1]), "datagram {} twice", buf[1]);
                quiet_since = Instant::now();
            }
            Err(_) if got.len() >= want && quiet_since.elapsed() > Duration::from_millis(100) => {
                break
            }
            Err(_) => {}
        }
    }
    got
}

/// In namespace `peer_ns`: sends every datagram from its source port.
fn send_datagrams(peer_ns: &str) {
    enter_netns(peer_ns).expect("enter peer");
    for (sport, payload) in datagrams() {
        let sock = UdpSocket::bind(SocketAddrV4::new(PEER, sport)).expect("bind peer");
        sock.send_to(&payload, SocketAddrV4::new(SUT, PORT))
            .expect("send");
    }
}

/// The datagrams that reach the SUT's socket through `prog` (the sender
/// starts once the filter is attached).
fn kernel_kept(bed: &Pair, prog: &nfkit_kernel::Prog, want: usize) -> BTreeSet<u8> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let sut_ns = bed.sut.name();
    std::thread::scope(|s| {
        let receiver = s.spawn(move || receive_kept(sut_ns, prog, want, ready_tx));
        ready_rx.recv().expect("receiver ready");
        s.spawn(|| send_datagrams(bed.peer.name()))
            .join()
            .expect("sender");
        receiver.join().expect("receiver")
    })
}

#[test]
fn socket_filter_keeps_what_the_vm_keeps() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let (vm_kept, report) = vm_kept();
    let (c, loaded, entry) = load_filter();
    let prog = loaded.prog(&entry).expect("prog");
    let bed = bed();
    let got = kernel_kept(&bed, prog, vm_kept.len());
    assert_eq!(got, vm_kept, "datagrams kept: kernel / VM");

    for (name, rows) in &report.maps {
        let spec = c.program.maps.iter().find(|m| &m.name == name);
        let is_array = spec.is_some_and(|m| m.map_type == nfkit_object::MapType::Array);
        let m = loaded.map(name).expect("map");
        assert_eq!(&kernel_map(&m, is_array), rows, "map {name}: kernel / VM");
    }
}

#[test]
fn deploy_refuses_a_socket_script_and_says_why() {
    let dir = std::env::temp_dir().join(format!("nfkit-sockdeploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let script = dir.join("keep.py");
    std::fs::write(&script, SCRIPT).expect("script");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .arg("deploy")
        .arg(&script)
        .args(["--dev", "lo"])
        .env("NFKIT_PIN_ROOT", dir.join("bpf"))
        .env("NFKIT_STATE_DIR", dir.join("state"))
        .output()
        .expect("nfkit");
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("attach_socket_filter") && err.contains("socket filter belongs"),
        "{err}"
    );
}

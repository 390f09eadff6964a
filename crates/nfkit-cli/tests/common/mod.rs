//! Shared by the nfkit-cli tests: the root check and the private bpffs
//! mount and state directory (nfkit-kernel's test support, the same
//! file), running the `nfkit` binary with them, JSON, frames.
#![allow(dead_code)]

#[path = "../../../nfkit-kernel/tests/common/mod.rs"]
mod kernel;

pub mod daemon_cli;
pub mod router_bed;

#[allow(unused_imports)]
pub use kernel::{compile, is_root, tc, Scratch};
use nfkit_kernel::testbed::{Netns, Veth};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const NFKIT: &str = env!("CARGO_BIN_EXE_nfkit");

/// `nfkit ARGS`, without namespace or private bpffs (VM-only commands).
pub fn nfkit_plain(args: &[&str]) -> std::process::Output {
    Command::new(NFKIT).args(args).output().expect("run nfkit")
}

/// Standard output of a command that must have succeeded.
pub fn stdout_ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "nfkit failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Path of corpus program `name`.
pub fn corpus(name: &str) -> &'static str {
    nfkit_corpus::get(name).expect("corpus program").path
}

/// Ethernet + IPv4 frame of `len` bytes (at least 42), protocol
/// `proto`, 198.18.0.1 -> 198.18.0.2: UDP/TCP from port 1234 to `dport`
/// (TCP with a 20-byte header), ICMP an echo request (checksum left 0).
pub fn ipv4(proto: u8, dport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12] = 0x08;
    f[14] = 0x45;
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    if proto == 1 {
        f[34] = 8;
    } else {
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
    }
    if proto == 6 {
        f[46] = 0x50; // TCP data offset
    }
    f
}

/// The repository's `examples/`.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The `nfkit` command with the scratch paths (`NFKIT_PIN_ROOT`,
/// `NFKIT_STATE_DIR`); run in namespace `ns` (`ip netns exec`) when given.
pub fn nfkit_cmd(ns: Option<&Netns>, s: &Scratch) -> Command {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns.name(), NFKIT]);
            c
        }
        None => Command::new(NFKIT),
    };
    c.env("NFKIT_PIN_ROOT", s.bpf())
        .env("NFKIT_STATE_DIR", s.state());
    c
}

/// Runs `cmd` with `args`; (exit ok, stdout, stderr).
pub fn output(mut cmd: Command, args: &[&str]) -> (bool, String, String) {
    let out = cmd.args(args).output().expect("run nfkit");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `cmd` with `args`; its stdout (panics on failure).
pub fn output_ok(cmd: Command, args: &[&str]) -> String {
    let (ok, out, err) = output(cmd, args);
    assert!(ok, "nfkit {args:?} failed:\n{out}\n{err}");
    out
}

/// Runs nfkit in namespace `ns` with the scratch paths; (exit ok, stdout, stderr).
pub fn nfkit(ns: &Netns, s: &Scratch, args: &[&str]) -> (bool, String, String) {
    output(nfkit_cmd(Some(ns), s), args)
}

/// Runs nfkit in namespace `ns` with the scratch paths; its stdout
/// (panics on failure).
pub fn nfkit_ok(ns: &Netns, s: &Scratch, args: &[&str]) -> String {
    output_ok(nfkit_cmd(Some(ns), s), args)
}

/// Runs nfkit here (not in a namespace) with the scratch paths; its
/// stdout (panics on failure).
pub fn nfkit_host(s: &Scratch, args: &[&str]) -> String {
    output_ok(nfkit_cmd(None, s), args)
}

/// Namespaces `sut` and `peer` joined by a veth pair: `veth.a` in `sut`
/// with NET.1/24, `veth.b` in `peer` with NET.2/24. Fields drop in
/// order: the pair, then the namespaces; so do the locals of
/// `let Pair { sut, peer, veth } = Pair::new(..)` (bindings drop in
/// reverse order).
pub struct Pair {
    pub veth: Veth,
    pub peer: Netns,
    pub sut: Netns,
}

impl Pair {
    /// `sut` and `peer` tag the namespaces; `net` is `198.18.X`.
    pub fn new(sut: &str, peer: &str, net: &str) -> Pair {
        let sut = Netns::new(sut).expect("netns");
        let peer = Netns::new(peer).expect("netns");
        let veth = Veth::new(
            Some(&sut),
            Some(&format!("{net}.1/24")),
            Some(&peer),
            Some(&format!("{net}.2/24")),
        )
        .expect("veth");
        Pair { veth, peer, sut }
    }

    /// Fixed MACs (`02:00:00:00:TAG:01` on `sut`, `..:02` on `peer`) and
    /// permanent neighbours both ways for the pair made on `net`: no ARP
    /// in flight (or queue to overflow) while datagrams go out.
    pub fn pin_neighbours(&self, net: &str, tag: u8) {
        let mac = |end: u8| format!("02:00:00:00:{tag:02x}:{end:02x}");
        for (ns, dev, own, other) in [
            (&self.sut, &self.veth.a.dev, 1u8, 2u8),
            (&self.peer, &self.veth.b.dev, 2, 1),
        ] {
            ns.ip(&["link", "set", dev, "address", &mac(own)])
                .expect("mac");
            ns.ip(&[
                "neigh",
                "replace",
                &format!("{net}.{other}"),
                "lladdr",
                &mac(other),
                "dev",
                dev,
                "nud",
                "permanent",
            ])
            .expect("neigh");
        }
    }
}

pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A 60-byte broadcast IPv4/UDP frame from `src` (MAC 02:00:00:00:00:02,
/// port 1234) to `dst`, destination `port`, no checksums.
pub fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr, port: u16) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend([0x02, 0, 0, 0, 0, 2, 0x08, 0x00]);
    f.extend([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend(src.octets());
    f.extend(dst.octets());
    f.extend(1234u16.to_be_bytes());
    f.extend(port.to_be_bytes());
    f.extend([0, 8, 0, 0]);
    f.resize(60, 0);
    f
}

/// Up to 8 little-endian bytes as an integer.
pub fn le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(a)
}

/// A scratch directory under the system temp dir, removed on drop:
/// `nfkit-TAG-PID`.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nfkit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        Dir(d)
    }

    /// `name` inside the directory, as a string for command lines.
    pub fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Sends `count` copies of `frame` on `dev` from inside `ns` with nfkit's
/// own sender, and checks they all went out.
pub fn send_frames(ns: &Netns, dev: &str, frame: Vec<u8>, count: u64) {
    use nfkit_traffic::send::{send, SendOptions, Source};
    let opts = SendOptions {
        dev: dev.to_string(),
        netns: Some(ns.name().to_string()),
        count: Some(count),
        ..SendOptions::default()
    };
    let r = send(&Source::Frames(vec![frame]), &opts).expect("send frames");
    assert_eq!(r.sent, count, "frames sent");
}

/// Sends `frames` once each, in order, from `dev` in `ns`, in one run of
/// the sender (paced by it, not by the test's thread): frames a
/// time-driven NF (a token bucket) sees keep the spacing they were
/// meant to have even on a loaded machine.
pub fn send_frames_in_order(ns: &Netns, dev: &str, frames: Vec<Vec<u8>>) {
    use nfkit_traffic::send::{send, SendOptions, Source};
    let count = frames.len() as u64;
    let opts = SendOptions {
        dev: dev.to_string(),
        netns: Some(ns.name().to_string()),
        count: Some(count),
        ..SendOptions::default()
    };
    let r = send(&Source::Frames(frames), &opts).expect("send frames");
    assert_eq!(r.sent, count, "frames sent");
}

/// A namespace with one veth pair (its other end in a second one).
pub struct Bed {
    pub ns: String,
    pub peer_ns: String,
    pub dev: String,
}

impl Bed {
    /// Names start with `prefix` (distinct per test file) and the pid.
    pub fn new(prefix: &str) -> Bed {
        let base = format!("{prefix}{}c", std::process::id() % 100_000);
        let b = Bed {
            ns: format!("{base}s"),
            peer_ns: format!("{base}r"),
            dev: format!("{base}a"),
        };
        let ip = |args: &[&str]| {
            let ok = Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "ip {args:?}");
        };
        ip(&["netns", "add", &b.ns]);
        ip(&["netns", "add", &b.peer_ns]);
        let peer = format!("{base}b");
        ip(&[
            "link", "add", &b.dev, "netns", &b.ns, "type", "veth", "peer", "name", &peer, "netns",
            &b.peer_ns,
        ]);
        ip(&["-n", &b.ns, "link", "set", &b.dev, "up"]);
        ip(&["-n", &b.peer_ns, "link", "set", &peer, "up"]);
        b
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for ns in [&self.ns, &self.peer_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A script of `tests/scripts`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scripts")
        .join(name)
}

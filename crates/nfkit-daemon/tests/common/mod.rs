//! Shared by the daemon's tests: a private nfkitd (its own socket, run
//! and data directories, config, and nfkit paths on a private bpffs),
//! killed when dropped; a client runtime.
#![allow(dead_code)]

#[path = "../../../nfkit-kernel/tests/common/mod.rs"]
mod kernel;

pub use kernel::{is_root, Scratch};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

pub const NFKITD: &str = env!("CARGO_BIN_EXE_nfkitd");

/// This process's uid and gid (from /proc/self, no unsafe call).
pub fn my_ids() -> (u32, u32) {
    let m = std::fs::metadata("/proc/self").expect("/proc/self");
    (m.uid(), m.gid())
}

/// A running nfkitd of a test.
pub struct Daemon {
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub config: PathBuf,
    pub audit: PathBuf,
    pub log: PathBuf,
}

impl Daemon {
    /// Writes a config (`roles` is its `[roles]` table text, `extra` more
    /// keys) under `scratch` and starts nfkitd on it.
    pub fn start(scratch: &Scratch, roles: &str, extra: &str) -> Daemon {
        let dir = scratch.dir.join("daemon");
        std::fs::create_dir_all(&dir).expect("daemon dir");
        let socket = dir.join("nfkitd.sock");
        let audit = dir.join("data/audit.log");
        let config = dir.join("nfkitd.toml");
        let text = format!(
            "socket = {socket:?}\nsocket_mode = 0o666\nrun_dir = {run:?}\ndata_dir = {data:?}\n\
             pin_root = {pins:?}\nstate_dir = {state:?}\n{extra}\n[roles]\n{roles}\n",
            run = dir.join("run"),
            data = dir.join("data"),
            pins = scratch.bpf(),
            state = scratch.state(),
        );
        std::fs::write(&config, text).expect("write config");
        let mut d = Daemon {
            child: None,
            log: dir.join("nfkitd.log"),
            dir,
            socket,
            config,
            audit,
        };
        d.restart();
        d
    }

    /// Starts nfkitd (again) and waits for its socket.
    pub fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log");
        let child = Command::new(NFKITD)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start nfkitd");
        self.child = Some(child);
        let t0 = Instant::now();
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    panic!("nfkitd exited ({st}): {}", self.log_text());
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "nfkitd did not answer: {}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL, and wait for it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The audit log's records.
    pub fn audit_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("audit line is JSON"))
            .collect()
    }

    /// A client channel (on `rt`).
    pub fn channel(&self, rt: &tokio::runtime::Runtime) -> Channel {
        rt.block_on(nfkit_daemon::client::channel(&self.socket))
            .expect("connect to nfkitd")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A runtime for a test's client calls.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The crate's test scripts.
pub fn script(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/scripts")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two network namespaces `dmn<pid><tag>{s,r}` joined by a veth pair:
/// the SUT end `dev` (198.18.<net>.1/30) where chains are deployed, and
/// the sender end (198.18.<net>.2/30). Removed on drop.
pub struct Bed {
    pub sut: String,
    pub sender: String,
    pub dev: String,
    pub net: u8,
}

impl Bed {
    pub fn new(tag: char, net: u8) -> Bed {
        let base = format!("dmn{}{tag}", std::process::id() % 100_000);
        let bed = Bed {
            sut: format!("{base}s"),
            sender: format!("{base}r"),
            dev: format!("{base}a"),
            net,
        };
        let peer = format!("{base}b");
        for ns in [&bed.sut, &bed.sender] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
        }
        ip(&[
            "link",
            "add",
            &bed.dev,
            "netns",
            &bed.sut,
            "type",
            "veth",
            "peer",
            "name",
            &peer,
            "netns",
            &bed.sender,
        ]);
        let a = format!("198.18.{net}.1/30");
        let b = format!("198.18.{net}.2/30");
        ip(&["-n", &bed.sut, "addr", "add", &a, "dev", &bed.dev]);
        ip(&["-n", &bed.sender, "addr", "add", &b, "dev", &peer]);
        for (ns, d) in [(&bed.sut, &bed.dev), (&bed.sender, &peer)] {
            ip(&["-n", ns, "link", "set", d, "up"]);
        }
        let t0 = Instant::now();
        while !ip(&["-n", &bed.sut, "-o", "link", "show", "dev", &bed.dev]).contains("state UP")
            && t0.elapsed() < Duration::from_secs(3)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        bed
    }

    /// Sends `n` UDP datagrams from the sender to the SUT end (a thread
    /// of its own enters the sender's namespace).
    pub fn send_udp(&self, n: usize) {
        let ns = self.sender.clone();
        let to = format!("198.18.{}.1:9999", self.net);
        std::thread::spawn(move || {
            nfkit_kernel::deploy::enter_netns(&ns).expect("enter sender netns");
            let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("udp socket");
            for i in 0..n {
                s.send_to(&(i as u32).to_be_bytes(), &to).expect("send");
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .join()
        .expect("sender thread");
        std::thread::sleep(Duration::from_millis(100));
    }

    /// Is an XDP program attached to the SUT end?
    pub fn has_xdp(&self) -> bool {
        ip(&["-n", &self.sut, "-d", "link", "show", "dev", &self.dev]).contains("prog/xdp")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for ns in [&self.sut, &self.sender] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

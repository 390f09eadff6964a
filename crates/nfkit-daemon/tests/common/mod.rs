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

//! The switch's control socket: a Unix stream socket at
//! `$NFKIT_RUN_DIR/NAME.sock` (default `/run/nfkit/switch/NAME.sock`),
//! one JSON request line per connection answered by one JSON line
//! (docs/switch.md): `{"op":"status"}`, `{"op":"reload","script":PATH}`,
//! `{"op":"stop"}`, `{"op":"update","message":HEX}`. [`Server`] accepts
//! on a thread of `nfkit switch run` and hands each request to its main
//! loop; [`request`] is the client side of `nfkit switch
//! status|reload|stop|update`.
//!
//! Update messages also come over the network ([`Listener`], `--update-listen
//! udp:ADDR|tcp:ADDR`): one datagram is one message, answered by one JSON
//! datagram; a TCP connection carries one message (the client shuts its
//! side down after it), answered by one JSON line. [`send_update`] is the
//! client side.

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The directory of control sockets.
pub fn run_dir() -> PathBuf {
    std::env::var_os("NFKIT_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/nfkit/switch"))
}

/// Switch `name`'s control socket.
pub fn socket_path(name: &str) -> anyhow::Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        bail!("switch name `{name}`: a plain name is needed (no `/`, not starting with `.`)");
    }
    Ok(run_dir().join(format!("{name}.sock")))
}

/// A request from a client, with where its answer goes.
pub struct Pending {
    pub req: Value,
    pub reply: mpsc::Sender<Value>,
    /// When the request was read off its socket.
    pub received: Instant,
    /// Where it came from (`control socket`, `udp 127.0.0.1:5000`).
    pub source: String,
}

/// The listening socket: accepts on its own thread, removes the socket
/// file when dropped.
pub struct Server {
    path: PathBuf,
    quit: Arc<AtomicBool>,
    /// The accept thread, joined on drop so that an answer being written
    /// (the `stop` request's) reaches its client before the process exits.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Binds switch `name`'s socket (its directory made); refuses when a
    /// live switch answers on it, replaces a stale file. `None` (with a
    /// warning) when the socket cannot be made: the switch runs without
    /// one.
    pub fn start(name: &str, tx: mpsc::Sender<Pending>) -> anyhow::Result<Option<Server>> {
        let path = socket_path(name)?;
        if path.exists() && UnixStream::connect(&path).is_ok() {
            bail!(
                "switch {name} is already running (control socket {})",
                path.display()
            );
        }
        match Server::bind(name, path, tx) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                eprintln!("warning: {e:#}; running without a control socket");
                Ok(None)
            }
        }
    }

    fn bind(name: &str, path: PathBuf, tx: mpsc::Sender<Pending>) -> anyhow::Result<Server> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("switch {name}: creating {}", dir.display()))?;
        }
        if path.exists() {
            if UnixStream::connect(&path).is_ok() {
                bail!(
                    "switch {name} is already running (control socket {})",
                    path.display()
                );
            }
            std::fs::remove_file(&path).with_context(|| {
                format!("switch {name}: removing stale socket {}", path.display())
            })?;
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("switch {name}: binding {}", path.display()))?;
        listener
            .set_nonblocking(true)
            .with_context(|| format!("switch {name}: {}", path.display()))?;
        let quit = Arc::new(AtomicBool::new(false));
        let q = Arc::clone(&quit);
        let thread = std::thread::Builder::new()
            .name("nfkit-sw-ctl".into())
            .spawn(move || accept(listener, tx, &q))
            .with_context(|| format!("switch {name}: starting the control thread"))?;
        Ok(Server {
            path,
            quit,
            thread: Some(thread),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_file(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The control plane's nice value: a flood of requests (hostile
/// updates) gives way to the workers.
pub const CONTROL_NICE: i32 = 10;

/// Accepts connections until `quit`, one request each (polling every
/// 10 ms when none is waiting).
fn accept(listener: UnixListener, tx: mpsc::Sender<Pending>, quit: &AtomicBool) {
    nfkit_switch::pin::nice_current(CONTROL_NICE);
    while !quit.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = serve(s, &tx);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Reads one request line, has the main loop answer it, writes the
/// answer.
fn serve(s: UnixStream, tx: &mpsc::Sender<Pending>) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    let received = Instant::now();
    let answer = match serde_json::from_str::<Value>(&line) {
        Ok(req) => ask(tx, req, received, "control socket".into()),
        Err(e) => json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    let mut w = &s;
    writeln!(w, "{answer}")?;
    w.flush()
}

/// Hands a request to the main loop and waits for its answer.
fn ask(tx: &mpsc::Sender<Pending>, req: Value, received: Instant, source: String) -> Value {
    let (rtx, rrx) = mpsc::channel();
    let p = Pending {
        req,
        reply: rtx,
        received,
        source,
    };
    if tx.send(p).is_err() {
        json!({"ok": false, "error": "the switch is stopping"})
    } else {
        rrx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| json!({"ok": false, "error": "no answer from the switch"}))
    }
}

/// Where update messages come over the network: `udp:ADDR` or `tcp:ADDR`.
#[derive(Clone, Debug)]
pub enum UpdateAddr {
    Udp(SocketAddr),
    Tcp(SocketAddr),
}

impl std::str::FromStr for UpdateAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<UpdateAddr, String> {
        let bad = || format!("`{s}`: expected udp:HOST:PORT or tcp:HOST:PORT");
        let (kind, addr) = s.split_once(':').ok_or_else(bad)?;
        let addr = addr
            .to_socket_addrs()
            .map_err(|e| format!("`{s}`: {e}"))?
            .next()
            .ok_or_else(bad)?;
        match kind {
            "udp" => Ok(UpdateAddr::Udp(addr)),
            "tcp" => Ok(UpdateAddr::Tcp(addr)),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for UpdateAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdateAddr::Udp(a) => write!(f, "udp:{a}"),
            UpdateAddr::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// The largest update message taken over the network.
const MAX_MESSAGE: usize = nfkit_update::message::MAX_PAYLOAD + 2048;

/// A network listener for update messages, on its own thread; stops
/// when dropped.
pub struct Listener {
    quit: Arc<AtomicBool>,
    /// The address it is bound to (the port chosen when 0 was given).
    pub local: UpdateAddr,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
    }
}

impl Listener {
    /// Binds `addr` and hands every message to the main loop through `tx`
    /// (as `{"op":"update"}` requests).
    pub fn start(
        name: &str,
        addr: &UpdateAddr,
        tx: mpsc::Sender<Pending>,
    ) -> anyhow::Result<Listener> {
        let quit = Arc::new(AtomicBool::new(false));
        let q = Arc::clone(&quit);
        let local = match addr {
            UpdateAddr::Udp(a) => {
                let sock = UdpSocket::bind(a)
                    .with_context(|| format!("switch {name}: binding update listener {addr}"))?;
                sock.set_read_timeout(Some(Duration::from_millis(100)))?;
                let local = UpdateAddr::Udp(sock.local_addr()?);
                std::thread::Builder::new()
                    .name("nfkit-sw-udp".into())
                    .spawn(move || serve_udp(sock, tx, &q))?;
                local
            }
            UpdateAddr::Tcp(a) => {
                let l = TcpListener::bind(a)
                    .with_context(|| format!("switch {name}: binding update listener {addr}"))?;
                l.set_nonblocking(true)?;
                let local = UpdateAddr::Tcp(l.local_addr()?);
                std::thread::Builder::new()
                    .name("nfkit-sw-tcp".into())
                    .spawn(move || serve_tcp(l, tx, &q))?;
                local
            }
        };
        Ok(Listener { quit, local })
    }
}

/// The update request for message `bytes`.
fn update_request(bytes: &[u8]) -> Value {
    json!({"op": "update", "message": nfkit_update::hex::encode(bytes)})
}

fn serve_udp(sock: UdpSocket, tx: mpsc::Sender<Pending>, quit: &AtomicBool) {
    nfkit_switch::pin::nice_current(CONTROL_NICE);
    let mut buf = vec![0u8; 65536];
    while !quit.load(Ordering::Relaxed) {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let received = Instant::now();
        let answer = ask(
            &tx,
            update_request(&buf[..n]),
            received,
            format!("udp {peer}"),
        );
        let _ = sock.send_to(answer.to_string().as_bytes(), peer);
    }
}

fn serve_tcp(l: TcpListener, tx: mpsc::Sender<Pending>, quit: &AtomicBool) {
    nfkit_switch::pin::nice_current(CONTROL_NICE);
    while !quit.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, peer)) => {
                let _ = serve_tcp_one(s, peer, &tx);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// One connection: the message until the client's end, one answer line.
fn serve_tcp_one(
    s: TcpStream,
    peer: SocketAddr,
    tx: &mpsc::Sender<Pending>,
) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut bytes = Vec::new();
    (&s).take(MAX_MESSAGE as u64 + 1).read_to_end(&mut bytes)?;
    let received = Instant::now();
    let answer = ask(tx, update_request(&bytes), received, format!("tcp {peer}"));
    let mut w = &s;
    writeln!(w, "{answer}")?;
    w.flush()
}

/// Sends an update message to `addr` and gives the switch's answer.
pub fn send_update(addr: &UpdateAddr, bytes: &[u8]) -> anyhow::Result<Value> {
    let line = match addr {
        UpdateAddr::Udp(a) => {
            let local: SocketAddr = if a.is_ipv4() {
                "0.0.0.0:0".parse()?
            } else {
                "[::]:0".parse()?
            };
            let sock = UdpSocket::bind(local)?;
            sock.set_read_timeout(Some(Duration::from_secs(60)))?;
            sock.send_to(bytes, a)
                .with_context(|| format!("sending the update to {addr}"))?;
            let mut buf = vec![0u8; 65536];
            let (n, _) = sock
                .recv_from(&mut buf)
                .with_context(|| format!("no answer from {addr}"))?;
            String::from_utf8_lossy(&buf[..n]).into_owned()
        }
        UpdateAddr::Tcp(a) => {
            let s = TcpStream::connect_timeout(a, Duration::from_secs(10))
                .with_context(|| format!("connecting to {addr}"))?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            let mut w = &s;
            w.write_all(bytes)
                .with_context(|| format!("sending the update to {addr}"))?;
            s.shutdown(std::net::Shutdown::Write)?;
            let mut line = String::new();
            BufReader::new(&s)
                .read_line(&mut line)
                .with_context(|| format!("no answer from {addr}"))?;
            line
        }
    };
    serde_json::from_str(&line).with_context(|| format!("bad answer from {addr}: {line}"))
}

/// Sends `req` to switch `name` and gives its answer (an error naming
/// the switch and the socket when it cannot be reached or refuses).
pub fn request(name: &str, req: &Value) -> anyhow::Result<Value> {
    let path = socket_path(name)?;
    request_at(name, &path, req)
}

/// [`request`] to the socket at `path`.
pub fn request_at(name: &str, path: &Path, req: &Value) -> anyhow::Result<Value> {
    let s = UnixStream::connect(path).map_err(|e| {
        anyhow!(
            "switch {name}: cannot reach its control socket {} ({e}); is it running?",
            path.display()
        )
    })?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut w = &s;
    writeln!(w, "{req}").with_context(|| format!("switch {name}: {}", path.display()))?;
    let mut line = String::new();
    BufReader::new(&s)
        .read_line(&mut line)
        .with_context(|| format!("switch {name}: reading from {}", path.display()))?;
    let v: Value = serde_json::from_str(&line)
        .with_context(|| format!("switch {name}: bad answer from {}", path.display()))?;
    Ok(v)
}

/// The sockets in the run directory: (name, path), by name.
pub fn list() -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(run_dir())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            let name = p.file_name()?.to_str()?.strip_suffix(".sock")?.to_string();
            // nfkitd's socket, when it shares the run directory.
            (name != "nfkitd").then_some((name, p))
        })
        .collect();
    out.sort();
    out
}

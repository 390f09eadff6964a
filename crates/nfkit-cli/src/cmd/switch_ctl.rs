//! The switch's control socket: a Unix stream socket at
//! `$NFKIT_RUN_DIR/NAME.sock` (default `/run/nfkit/switch/NAME.sock`),
//! one JSON request line per connection answered by one JSON line
//! (docs/switch.md): `{"op":"status"}`, `{"op":"reload","script":PATH}`,
//! `{"op":"stop"}`. [`Server`] accepts on a thread of `nfkit switch run`
//! and hands each request to its main loop; [`request`] is the client
//! side of `nfkit switch status|reload|stop`.

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

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
}

/// The listening socket: accepts on its own thread, removes the socket
/// file when dropped.
pub struct Server {
    path: PathBuf,
    quit: Arc<AtomicBool>,
    pub requests: mpsc::Receiver<Pending>,
}

impl Server {
    /// Binds switch `name`'s socket (its directory made); refuses when a
    /// live switch answers on it, replaces a stale file. `None` (with a
    /// warning) when the socket cannot be made: the switch runs without
    /// one.
    pub fn start(name: &str) -> anyhow::Result<Option<Server>> {
        let path = socket_path(name)?;
        if path.exists() && UnixStream::connect(&path).is_ok() {
            bail!(
                "switch {name} is already running (control socket {})",
                path.display()
            );
        }
        match Server::bind(name, path) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                eprintln!("warning: {e:#}; running without a control socket");
                Ok(None)
            }
        }
    }

    fn bind(name: &str, path: PathBuf) -> anyhow::Result<Server> {
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
        let (tx, rx) = mpsc::channel();
        let quit = Arc::new(AtomicBool::new(false));
        let q = Arc::clone(&quit);
        std::thread::Builder::new()
            .name("nfkit-sw-ctl".into())
            .spawn(move || accept(listener, tx, &q))
            .with_context(|| format!("switch {name}: starting the control thread"))?;
        Ok(Server {
            path,
            quit,
            requests: rx,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.quit.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Accepts connections until `quit`, one request each.
fn accept(listener: UnixListener, tx: mpsc::Sender<Pending>, quit: &AtomicBool) {
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
    let answer = match serde_json::from_str::<Value>(&line) {
        Ok(req) => {
            let (rtx, rrx) = mpsc::channel();
            if tx.send(Pending { req, reply: rtx }).is_err() {
                json!({"ok": false, "error": "the switch is stopping"})
            } else {
                rrx.recv_timeout(Duration::from_secs(60))
                    .unwrap_or_else(|_| json!({"ok": false, "error": "no answer from the switch"}))
            }
        }
        Err(e) => json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    let mut w = &s;
    writeln!(w, "{answer}")?;
    w.flush()
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
            Some((name, p))
        })
        .collect();
    out.sort();
    out
}

//! A blocking client for the CLI: connects to the daemon's Unix socket
//! (or its TCP address with mutual TLS, [`Target`]) and runs calls on a
//! runtime of its own; and the CLI's view of a
//! deployment rebuilt from a reply, for output identical to the direct
//! path's.

use crate::proto;
use hyper_util::rt::TokioIo;
use nfkit_kernel::deploy::Deployment;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tonic::transport::{Channel, Endpoint, Uri};

/// Why the daemon could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("nfkitd at {path}: {msg}")]
    Connect { path: PathBuf, msg: String },
    #[error("starting the client's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("nfkitd's reply: {0}")]
    Reply(String),
    #[error("{path}: {cause}")]
    File {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// Where the daemon is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Its Unix socket.
    Unix(PathBuf),
    /// Its TCP address (`host:port`), with mutual TLS.
    Tls { addr: String, creds: TlsFiles },
}

/// A TLS client's files (PEM): the CA that signed the server's
/// certificate, and the client's certificate and key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Target {
    /// `https://ADDR` or `tcp:ADDR`: TLS to ADDR with `creds`; `unix:PATH`
    /// or anything else: a socket path.
    pub fn parse(s: &str, creds: TlsFiles) -> Target {
        match s
            .strip_prefix("https://")
            .or_else(|| s.strip_prefix("tcp:"))
        {
            Some(a) => Target::Tls {
                addr: a.trim_end_matches('/').to_string(),
                creds,
            },
            None => Target::Unix(PathBuf::from(s.strip_prefix("unix:").unwrap_or(s))),
        }
    }

    /// `/run/nfkit/nfkitd.sock`, `https://127.0.0.1:7443`.
    pub fn display(&self) -> String {
        match self {
            Target::Unix(p) => p.display().to_string(),
            Target::Tls { addr, .. } => format!("https://{addr}"),
        }
    }
}

/// A connection to nfkitd.
pub struct Client {
    rt: tokio::runtime::Runtime,
    channel: Channel,
    socket: PathBuf,
}

impl Client {
    /// Connects to the daemon on `socket` (within a few seconds).
    pub fn connect(socket: &Path) -> Result<Client, ClientError> {
        Client::connect_to(&Target::Unix(socket.to_path_buf()))
    }

    /// Connects to the daemon at `target` (within a few seconds).
    pub fn connect_to(target: &Target) -> Result<Client, ClientError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        let channel = match target {
            Target::Unix(p) => rt.block_on(channel(p))?,
            Target::Tls { addr, creds } => rt.block_on(tls_channel(addr, creds))?,
        };
        Ok(Client {
            rt,
            channel,
            socket: PathBuf::from(target.display()),
        })
    }

    /// Runs `f` to completion.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// The connection (cheap to clone) for the generated clients.
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

/// An HTTP/2 channel over the Unix socket `socket`.
pub async fn channel(socket: &Path) -> Result<Channel, ClientError> {
    let path = socket.to_path_buf();
    let err = |msg: String| ClientError::Connect {
        path: socket.to_path_buf(),
        msg,
    };
    // The URI is required by the API and unused: the connector below
    // opens the socket.
    let ep = Endpoint::try_from("http://nfkitd.local")
        .map_err(|e| err(e.to_string()))?
        .connect_timeout(std::time::Duration::from_secs(5));
    ep.connect_with_connector(tower::service_fn(move |_: Uri| {
        let p = path.clone();
        async move {
            Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?))
        }
    }))
    .await
    .map_err(|e| err(chain_text(&e)))
}

/// An error and its causes, each once.
fn chain_text(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg = format!("{msg}: {t}");
        }
        src = s.source();
    }
    msg
}

/// An HTTP/2 channel over TLS to `addr` (`host:port`): the server's
/// certificate must chain to `creds.ca` and name the host; the client
/// shows `creds.cert` (with `creds.key`) when given.
pub async fn tls_channel(addr: &str, creds: &TlsFiles) -> Result<Channel, ClientError> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let err = |msg: String| ClientError::Connect {
        path: PathBuf::from(format!("https://{addr}")),
        msg,
    };
    let read = |p: &Path| {
        std::fs::read(p).map_err(|cause| ClientError::File {
            path: p.to_path_buf(),
            cause,
        })
    };
    let ca = creds.ca.as_deref().ok_or_else(|| {
        err("no CA to check the server's certificate with (--ca FILE or NFKIT_DAEMON_CA)".into())
    })?;
    let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
    match (&creds.cert, &creds.key) {
        (Some(c), Some(k)) => tls = tls.identity(Identity::from_pem(read(c)?, read(k)?)),
        (None, None) => {}
        _ => return Err(err("--cert and --key go together".into())),
    }
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']'),
        None => return Err(err("give host:port".into())),
    };
    let ep = Endpoint::from_shared(format!("https://{addr}"))
        .map_err(|e| err(e.to_string()))?
        .tls_config(tls.domain_name(host))
        .map_err(|e| err(chain_text(&e)))?
        .connect_timeout(std::time::Duration::from_secs(5));
    ep.connect().await.map_err(|e| err(chain_text(&e)))
}

/// One chain's counters, as `nfkit status --json` shows them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Counters {
    pub chain: String,
    pub counts: BTreeMap<String, u64>,
}

/// A deployment as `nfkit status` shows it (the fields and their order
/// of nfkit-control's `DeploymentStatus`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatusRow {
    #[serde(flatten)]
    pub deployment: Deployment,
    pub attached: bool,
    pub live_prog_id: u32,
    pub attach_kind: String,
    pub verdicts: Vec<Counters>,
}

/// The state-file record carried in a reply.
pub fn record(d: &proto::Deployment) -> Result<Deployment, ClientError> {
    serde_json::from_str(&d.record_json)
        .map_err(|e| ClientError::Reply(format!("deployment record of {}: {e}", d.dev)))
}

impl StatusRow {
    pub fn from_reply(d: &proto::Deployment) -> Result<StatusRow, ClientError> {
        Ok(StatusRow {
            deployment: record(d)?,
            attached: d.attached,
            live_prog_id: d.live_prog_id,
            attach_kind: d.attach_kind.clone(),
            verdicts: d
                .verdicts
                .iter()
                .map(|c| Counters {
                    chain: c.chain.clone(),
                    counts: c.counts.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                })
                .collect(),
        })
    }
}

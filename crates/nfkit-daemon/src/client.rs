//! A blocking client for the CLI: connects to the daemon's Unix socket
//! and runs calls on a runtime of its own; and the CLI's view of a
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
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        let channel = rt.block_on(channel(socket))?;
        Ok(Client {
            rt,
            channel,
            socket: socket.to_path_buf(),
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
    .map_err(|e| {
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            let t = s.to_string();
            if !msg.contains(&t) {
                msg = format!("{msg}: {t}");
            }
            src = s.source();
        }
        err(msg)
    })
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

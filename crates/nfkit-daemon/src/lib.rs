//! nfkitd, nfkit's control-plane daemon: one process that owns the
//! deployments of a host and serves the gRPC API of `proto/nfkit/v1`
//! on a Unix socket, and over TCP with mutual TLS when configured
//! (docs/daemon.md).
//!
//! * [`proto`]: the generated messages, clients and servers.
//! * [`config`](mod@config): the TOML config (socket, directories, roles, limits).
//! * [`auth`]: peer credentials → [`auth::Role`]; the role each RPC needs.
//! * [`audit`]: the append-only JSON-lines audit log.
//! * [`validate`]: request field checks (`INVALID_ARGUMENT` naming the field).
//! * [`chains`]: the chain registry (versions, digests).
//! * [`records`]: the daemon's deployment records and adoption at start.
//! * [`switches`]: software switches as processes of their own: start,
//!   control socket, stop, records and adoption at start.
//! * [`files`]: atomic, durable file writes; content digests.
//! * [`map_cache`]: maps kept open between requests.
//! * [`stats_hub`]: counter snapshots shared by the stats streams.
//! * [`gate`]: audits the requests tonic refuses before the services.
//! * [`metrics`]: the Prometheus exposition (`--metrics ADDR`).
//! * [`service`]: the seven services; [`convert`]: nfkit types → messages.
//! * [`nf_store`]: adding users' NF objects (`nf add`, RegisterNf).
//! * [`nf_text`]: the text of `nf show` (also used by the CLI).
//! * [`server`]: bind, adopt, serve, stop.
//! * [`tls`]: TCP with mutual TLS (handshakes, client certificates → names).
//! * [`reload`]: roles and TLS material read again (SIGHUP, Reload RPC).
//! * [`certs`]: a test CA and its server and client certificates.
//! * [`client`]: the CLI's blocking client.
//! * [`error`](mod@error): [`DaemonError`].
#![forbid(unsafe_code)]

pub mod audit;
pub mod auth;
pub mod certs;
pub mod chains;
pub mod client;
pub mod config;
pub mod convert;
pub mod error;
pub mod files;
pub mod gate;
pub mod map_cache;
pub mod metrics;
pub mod nf_store;
pub mod nf_text;
pub mod records;
pub mod reload;
pub mod server;
pub mod service;
pub mod stats_hub;
pub mod switches;
pub mod tls;
pub mod validate;

/// The API (`proto/nfkit/v1/*.proto`), generated at build time.
#[allow(clippy::all)]
pub mod proto {
    tonic::include_proto!("nfkit.v1");
}

pub use client::Client;
pub use config::Config;
pub use error::DaemonError;

//! The switch's errors.

use crate::port::PortError;

/// What went wrong running a switch.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(transparent)]
    Port(#[from] PortError),
    #[error("the chain is compiled for hook {0}, the switch runs hook `switch` (attach(\"sw0\", \"switch\") or compile with the switch hook)")]
    Hook(nfkit_abi::Hook),
    #[error("{0}")]
    Script(#[from] nfkit_control::runner::RunError),
    #[error("the switch needs at least one port")]
    NoPorts,
    #[error(
        "port `{port}`: {got} transmit queues for {workers} workers (one per worker expected)"
    )]
    TxQueues {
        port: String,
        got: usize,
        workers: usize,
    },
    #[error("port `{port}`: {got} receive queues for {workers} workers (at most one per worker)")]
    RxQueues {
        port: String,
        got: usize,
        workers: usize,
    },
    #[error("host queue on port {0}: no such port")]
    HostQueue(usize),
    #[error("the pipeline's post program: {0}")]
    Post(String),
    #[error("too many ports: {0} (at most 65535)")]
    TooManyPorts(usize),
    #[error("worker {worker}: {why}")]
    Worker { worker: usize, why: String },
    #[error("cannot start worker {worker}: {source}")]
    Spawn {
        worker: usize,
        #[source]
        source: std::io::Error,
    },
}

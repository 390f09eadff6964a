//! From nfkit's types to the API's messages, and from nfkit's errors to
//! gRPC statuses (bad input: `INVALID_ARGUMENT`; absent: `NOT_FOUND`;
//! the kernel refused: `FAILED_PRECONDITION`).

use crate::proto;
use crate::records::Record;
use crate::validate::attach_wire;
use nfkit_control::maps::MapError;
use nfkit_control::status::DeploymentStatus;
use nfkit_control::ControlError;
use nfkit_kernel::deploy::{DeployMode, Deployment};
use nfkit_kernel::stats::ChainCounters;
use nfkit_kernel::KernelError;
use tonic::Status;

/// Metadata key set on a status whose message is a script's rendered
/// diagnostics (the CLI prints it as it is).
pub const SCRIPT_ERROR: &str = "nfkit-script-error";

/// The status of a failed deploy or check.
pub fn control_error(e: ControlError) -> Status {
    match e {
        ControlError::Script(d) => {
            let mut s = Status::invalid_argument(d.to_string());
            s.metadata_mut().insert(
                SCRIPT_ERROR,
                tonic::metadata::MetadataValue::from_static("1"),
            );
            s
        }
        ControlError::Compile(_)
        | ControlError::SocketScript(_)
        | ControlError::SwitchScript(_)
        | ControlError::NoClassifier(_)
        | ControlError::NoDevice(_)
        | ControlError::NoProgram { .. }
        | ControlError::ProgramType { .. }
        | ControlError::AttachPoint { .. } => Status::invalid_argument(e.to_string()),
        ControlError::Kernel { .. } => Status::failed_precondition(e.to_string()),
        ControlError::State(_) => Status::internal(e.to_string()),
    }
}

/// The status of a failed map lookup (`find`: finding the map).
pub fn map_error(e: MapError) -> Status {
    let text = e.to_string();
    match e {
        MapError::NoSuchKey { .. } => Status::not_found(text),
        MapError::Key(_) | MapError::Value(_) => Status::invalid_argument(text),
        MapError::Kernel(k) => kernel_error(*k),
        MapError::Vm(_) => Status::internal(text),
    }
}

/// The status of a kernel error.
pub fn kernel_error(e: KernelError) -> Status {
    let text = e.to_string();
    match e {
        KernelError::NoDeployedMap { .. } => Status::not_found(text),
        KernelError::AmbiguousMap { .. } => Status::invalid_argument(text),
        _ => Status::failed_precondition(text),
    }
}

/// `map `NAME`: ERROR`, as the CLI tells map errors.
pub fn in_map(name: &str, e: MapError) -> Status {
    let s = map_error(e);
    Status::new(s.code(), format!("map `{name}`: {}", s.message()))
}

/// The packets of `c` that ended in a fault.
pub fn faults(c: &ChainCounters) -> u64 {
    c.counts
        .get(nfkit_abi::stats::name(nfkit_abi::stats::FAULT))
        .copied()
        .unwrap_or(0)
}

fn counters(c: &[ChainCounters]) -> Vec<proto::ChainCounters> {
    c.iter()
        .map(|c| proto::ChainCounters {
            chain: c.chain.clone(),
            counts: c.counts.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            faults: faults(c),
        })
        .collect()
}

/// A deployment (as just deployed, or removed: `attached` says which).
pub fn deployment(d: &Deployment, attached: bool, rec: Option<&Record>) -> proto::Deployment {
    proto::Deployment {
        dev: d.dev.clone(),
        netns: d.netns.clone().unwrap_or_default(),
        attach: attach_wire(d.hook),
        mode: match d.mode {
            DeployMode::Static => proto::DeployMode::Static,
            DeployMode::Dynamic => proto::DeployMode::Dynamic,
        } as i32,
        source: d.source.clone(),
        entry: d.entry.clone(),
        link_id: d.link_id,
        prog_id: d.prog_id,
        generation: d.generation,
        deployed_at: d.deployed_at,
        attached,
        live_prog_id: if attached { d.prog_id } else { 0 },
        attach_kind: nfkit_kernel::tc::attach_kind(d.hook, &d.attach).to_string(),
        verdicts: Vec::new(),
        maps: d.maps.iter().map(|m| m.name.clone()).collect(),
        chain: rec.map(|r| r.chain.clone()).unwrap_or_default(),
        chain_version: rec.map_or(0, |r| r.chain_version),
        digest: rec.map(|r| r.digest.clone()).unwrap_or_default(),
        record_json: serde_json::to_string(d).unwrap_or_default(),
    }
}

/// A deployment as `status` finds it, with counters.
pub fn deployment_status(s: &DeploymentStatus, rec: Option<&Record>) -> proto::Deployment {
    let mut p = deployment(&s.status.deployment, s.status.attached, rec);
    p.live_prog_id = s.status.live_prog_id;
    p.attach_kind = s.status.attach_kind.to_string();
    p.verdicts = counters(&s.verdicts);
    p
}

/// Compiler diagnostics.
pub fn diagnostics(ds: &[nfkit_lang::Diagnostic]) -> Vec<proto::Diagnostic> {
    ds.iter()
        .map(|d| proto::Diagnostic {
            severity: if d.is_error() { "error" } else { "warning" }.to_string(),
            file: d.file.clone(),
            line: d.line,
            col: d.col + 1,
            message: d.message.clone(),
            help: d.help.clone(),
            text: d.text.clone(),
        })
        .collect()
}

/// Per-chain counters for the stats stream.
pub fn stats_counters(c: &[ChainCounters]) -> Vec<proto::ChainCounters> {
    counters(c)
}

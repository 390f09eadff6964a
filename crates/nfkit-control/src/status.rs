//! What is deployed now: every recorded deployment checked against its
//! pins ([`nfkit_kernel::deploy::status`]) with its per-chain, per-verdict
//! counters, and undeploying.

use crate::error::ControlError;
use nfkit_kernel::deploy::{self as kdeploy, Deployment, Paths, Status};
use nfkit_kernel::stats::ChainCounters;
use serde::Serialize;

/// One deployment as `nfkit status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct DeploymentStatus {
    #[serde(flatten)]
    pub status: Status,
    /// Per-chain counters (as `nfkit run --json` gives them); empty when
    /// the deployment's maps cannot be read.
    pub verdicts: Vec<ChainCounters>,
}

/// Every deployment with its counters.
pub fn status(paths: &Paths) -> Result<Vec<DeploymentStatus>, ControlError> {
    let st = kdeploy::status(paths).map_err(kernel)?;
    Ok(st
        .into_iter()
        .map(|s| DeploymentStatus {
            verdicts: nfkit_kernel::stats::verdict_counters(&s.deployment).unwrap_or_default(),
            status: s,
        })
        .collect())
}

/// Removes the deployments on `dev` (all when `None`); what was removed.
pub fn undeploy(paths: &Paths, dev: Option<&str>) -> Result<Vec<Deployment>, ControlError> {
    kdeploy::undeploy(paths, dev).map_err(kernel)
}

fn kernel(e: nfkit_kernel::KernelError) -> ControlError {
    ControlError::State(Box::new(e))
}

//! The switch's errors.

use crate::port::PortError;

/// What went wrong running a switch.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error(transparent)]
    Port(#[from] PortError),
}

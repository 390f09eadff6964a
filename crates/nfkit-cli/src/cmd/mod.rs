//! One module per top-level command (or command group).

pub mod asm;
pub mod disasm;
pub mod nf;
pub mod object;

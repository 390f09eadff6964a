//! One module per top-level command (or command group).

pub mod asm;
pub mod check;
pub mod compile;
pub mod deploy;
pub mod disasm;
pub mod map;
pub mod nf;
pub mod object;
pub mod prog;
pub mod recv;
pub mod run;
pub mod run_script;
pub mod send;
pub mod vm;

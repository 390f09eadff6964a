//! The x86-64 JIT: compiles a checked [`Program`](crate::prog::Program)
//! to native code behind the same run API as the interpreter.
//!
//! (Being built: until the code generator lands, every entry falls back
//! to the interpreter and [`Vm::engine`](crate::Vm::engine) says so.)

use crate::check::EntryInfo;
use crate::config::{EngineUse, VmConfig};
use crate::interp::{Machine, Step};
use crate::prog::Program;

/// A program compiled to native code.
pub(crate) struct Code {
    _private: (),
}

/// Compiles `program`; per entry, what will run it.
pub(crate) fn compile(
    _program: &Program,
    entries: &[EntryInfo],
    _config: &VmConfig,
) -> (Option<Code>, Vec<EngineUse>) {
    let why = "the JIT is not built yet".to_string();
    (
        None,
        entries
            .iter()
            .map(|_| EngineUse::Fallback(why.clone()))
            .collect(),
    )
}

impl Code {
    /// Runs the compiled code from op `start` on machine `m`.
    pub(crate) fn exec(&self, _m: &mut Machine, _start: usize) -> Step<u64> {
        unreachable!("no compiled code exists yet")
    }
}

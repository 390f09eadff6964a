//! Errors of loading programs into the core and driving its model.

/// Why a program could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum RtlError {
    /// The crate was built without Verilator, so there is no model.
    #[error("verilator not installed: run scripts/install-deps.sh (then rebuild) to simulate the RTL core")]
    NotInstalled,
    /// An instruction or helper outside the core's subset: the first, and
    /// the other kinds of lack the program has (`what (slot N)`).
    #[error(
        "slot {slot}: `{insn}`: {what} is not in the RTL core's subset{}",
        also(more)
    )]
    Unsupported {
        slot: usize,
        insn: String,
        what: String,
        more: Vec<String>,
    },
    /// The program does not fit the instruction memory.
    #[error("program of {slots} slots does not fit the core's {max}-slot instruction memory")]
    TooLarge { slots: usize, max: usize },
    /// No such entry in the image.
    #[error("no program `{0}` in the object")]
    NoEntry(String),
    /// The packet does not fit the data memory.
    #[error("packet of {len} bytes does not fit the core's {max}-byte packet buffer")]
    PacketTooLarge { len: usize, max: usize },
    /// `yosys` is not on PATH.
    #[error("yosys not installed: run scripts/install-deps.sh")]
    YosysMissing,
    /// Synthesis failed.
    #[error("synthesis: {0}")]
    Synth(String),
    /// A map of the image the coprocessor cannot hold.
    #[error("map `{name}`: {why}")]
    MapRefused { name: String, why: String },
    /// A map reference to a map the program does not have.
    #[error("slot {slot}: no map #{index} for this reference")]
    NoMap { slot: usize, index: i32 },
    /// A host-side map operation failed.
    #[error("map `{name}`: {err}")]
    MapOp {
        name: String,
        err: crate::maps::MapOpError,
    },
    /// Action module settings it cannot hold.
    #[error("action module: {0}")]
    Action(String),
    /// A packet the engine's port cannot take.
    #[error("port: {0}")]
    Port(String),
    /// What the switch top cannot take (a port or engine beyond it, a
    /// program with maps).
    #[error("switch: {0}")]
    Switch(String),
    /// The model failed to open the VCD file.
    #[error("cannot write the VCD trace to {0}")]
    Vcd(String),
}

/// `; also lacks: a, b` when there are others.
fn also(more: &[String]) -> String {
    if more.is_empty() {
        String::new()
    } else {
        format!("; also lacks: {}", more.join(", "))
    }
}

//! Errors: [`LoadError`] (the program can never run) and [`RunError`] (a
//! run ended abnormally).

#![forbid(unsafe_code)]

use std::fmt;

/// The rule a rejected program breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The bytes do not decode as instructions (incl. an unpaired `lddw`).
    Decode,
    /// A jump leaves its function, the program, or lands inside an `lddw`.
    JumpTarget,
    /// A call or function address does not name the start of a function.
    CallTarget,
    /// A register is read before anything is written to it.
    UninitRead,
    /// An instruction writes r10 (the read-only frame pointer).
    FramePointerWrite,
    /// An `lddw` kind the VM cannot bind (map fds, BTF ids).
    Lddw,
    /// A helper id that the profile does not define.
    UnknownHelper,
    /// A helper the entry's program type may not call.
    HelperNotAllowed,
    /// An instruction (kfunc call, addr_space_cast, ...) the VM does not run.
    Unsupported,
    /// Execution can run past the end of a function.
    FallOff,
    /// A map index or map value offset out of range.
    MapIndex,
    /// More than the allowed call frames on some call path.
    CallDepth,
    /// A function calls itself (directly or not) in kernel-compatible mode.
    Recursion,
    /// More than 512 bytes of stack over a call path (kernel-compatible mode).
    StackSize,
    /// Division or modulo by a zero immediate (kernel-compatible mode).
    DivByZero,
    /// Legacy packet loads in a program type that has no socket buffer.
    LdAbs,
    /// An instruction whose CO-RE relocation could not be resolved (the
    /// linker poisoned it).
    CoreRelocation,
    /// A stack access outside the 512-byte frame on every offset its
    /// pointer may have (kernel profile).
    StackAccess,
    /// A map value access outside the value on every offset its pointer
    /// may have (kernel profile).
    MapValueAccess,
    /// A ring-buffer record access outside the record on every offset
    /// its pointer may have (kernel profile).
    MemAccess,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::Decode => "invalid instruction",
            Rule::JumpTarget => "bad jump target",
            Rule::CallTarget => "bad call target",
            Rule::UninitRead => "read of an uninitialised register",
            Rule::FramePointerWrite => "write to the frame pointer r10",
            Rule::Lddw => "unsupported lddw",
            Rule::UnknownHelper => "unknown helper",
            Rule::HelperNotAllowed => "helper not allowed for the program type",
            Rule::Unsupported => "unsupported instruction",
            Rule::FallOff => "execution falls off the end of the function",
            Rule::MapIndex => "bad map reference",
            Rule::CallDepth => "call depth too large",
            Rule::Recursion => "recursive call",
            Rule::StackSize => "stack too large",
            Rule::DivByZero => "division by zero",
            Rule::LdAbs => "legacy packet load not allowed",
            Rule::CoreRelocation => "CO-RE relocation",
            Rule::StackAccess => "stack access out of bounds",
            Rule::MapValueAccess => "map value access out of bounds",
            Rule::MemAccess => "memory access out of bounds",
        })
    }
}

/// Why a program cannot be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// An instruction breaks a rule. `slot` is the instruction's slot
    /// index in the Image, `location` its `function+offset`.
    #[error("instruction {slot} ({location}): {rule}: {detail}")]
    Insn {
        slot: usize,
        location: String,
        rule: Rule,
        detail: String,
    },
    /// The program is larger than the kernel's limit.
    #[error("program has {count} instructions, more than the limit of {limit}")]
    TooLarge { count: usize, limit: usize },
    /// A map specification the VM cannot create.
    #[error("map {index} '{name}': {detail}")]
    Map {
        index: usize,
        name: String,
        detail: String,
    },
    /// The Image itself is inconsistent (functions, entries).
    #[error("image: {0}")]
    Image(String),
    /// Memory for the VM could not be allocated.
    #[error("cannot allocate VM memory: {0}")]
    Alloc(String),
}

impl LoadError {
    /// The rule broken, for instruction errors.
    pub fn rule(&self) -> Option<Rule> {
        match self {
            LoadError::Insn { rule, .. } => Some(*rule),
            _ => None,
        }
    }
}

/// What went wrong during a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunErrorKind {
    /// A load or store outside every region the program may touch.
    Access {
        addr: u64,
        size: usize,
        write: bool,
        region: String,
    },
    /// A context access the kernel's verifier refuses.
    Context {
        offset: u64,
        size: usize,
        write: bool,
        why: &'static str,
    },
    /// The instruction budget ran out.
    Budget { limit: u64 },
    /// Too many call frames.
    CallDepth { limit: usize },
    /// A helper was called with arguments it cannot use.
    Helper { helper: String, why: String },
    /// `callx` to a value that is no helper of the profile.
    BadCallx { value: u64 },
    /// An atomic operation on a misaligned or non-memory address.
    Atomic { addr: u64 },
    /// A run was started wrongly (unknown entry, bad CPU, no memory).
    Setup(String),
}

impl fmt::Display for RunErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunErrorKind::Access {
                size,
                write,
                region,
                ..
            } => write!(
                f,
                "{} of {size} bytes at {region} outside the regions the program may touch",
                if *write { "store" } else { "load" }
            ),
            RunErrorKind::Context {
                offset,
                size,
                write,
                why,
            } => write!(
                f,
                "context {} of {size} bytes at offset {offset}: {why}",
                if *write { "store" } else { "load" }
            ),
            RunErrorKind::Budget { limit } => {
                write!(f, "instruction budget of {limit} exhausted")
            }
            RunErrorKind::CallDepth { limit } => {
                write!(f, "more than {limit} call frames")
            }
            RunErrorKind::Helper { helper, why } => write!(f, "helper {helper}: {why}"),
            RunErrorKind::BadCallx { value } => {
                write!(f, "callx to {value:#x}, which is no helper")
            }
            RunErrorKind::Atomic { addr } => {
                write!(
                    f,
                    "atomic operation on misaligned or invalid address {addr:#x}"
                )
            }
            RunErrorKind::Setup(s) => f.write_str(s),
        }
    }
}

/// A run that ended abnormally: where and why. The program's result is
/// then the fault verdict ([`RunError::fault_code`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("instruction {slot} ({location}): {kind}")]
pub struct RunError {
    /// Slot index of the faulting instruction in the Image.
    pub slot: usize,
    /// `function+offset` of the faulting instruction.
    pub location: String,
    pub kind: RunErrorKind,
    /// The hook's return code a fault maps to (XDP_ABORTED, TC_ACT_SHOT,
    /// 0 for socket filters).
    pub fault_code: u64,
}

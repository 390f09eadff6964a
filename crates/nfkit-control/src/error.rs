//! Errors of the orchestration path, each saying what and where.

use nfkit_lang::Diagnostic;

/// Why a compile, deploy or run did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The script has errors (rendered with file:line:col and a caret).
    #[error("{0}")]
    Script(Box<Diagnostic>),
    /// Code generation or linking failed.
    #[error(transparent)]
    Compile(#[from] nfkit_lang::CompileError),
    /// The kernel refused or failed.
    #[error("{file}: {cause}")]
    Kernel {
        file: String,
        cause: Box<nfkit_kernel::KernelError>,
    },
    /// The script attaches to a socket: nothing to deploy on an interface.
    #[error(
        "{0}: the script attaches to a socket: a socket filter belongs to a socket \
         that a process holds, so there is no interface to deploy it on; the program \
         that owns the socket loads it and calls nfkit_kernel::attach_socket_filter \
         (or give --hook xdp|xdp-generic|tc-ingress|tc-egress)"
    )]
    SocketScript(String),
    /// A script for the software switch (hook `switch`) given to deploy.
    #[error(
        "{0}: the script is for the software switch (attach(..., \"switch\")): run it with \
         `nfkit switch run`, or give --hook xdp|xdp-generic|tc-ingress|tc-egress to deploy it"
    )]
    SwitchScript(String),
    /// The deployment state could not be read or changed.
    #[error(transparent)]
    State(Box<nfkit_kernel::KernelError>),
    /// No classifier: nothing to attach.
    #[error("{0}: the script has no classifier (nothing to attach)")]
    NoClassifier(String),
    /// No interface given and none in the script's `attach(...)`.
    #[error("{0}: no interface: give --dev IFACE or attach(\"IFACE\", \"HOOK\") in the script")]
    NoDevice(String),
    /// The object has no entry program of that name.
    #[error("{file}: no program '{name}'")]
    NoProgram { file: String, name: String },
    /// The program's type has no attach point on an interface.
    #[error(
        "{file}: program '{name}' is of type {prog_type}, which does not attach to an \
         interface (deploy takes xdp and tc programs; --type xdp|tc runs a program of a \
         section without a type as one)"
    )]
    ProgramType {
        file: String,
        name: String,
        prog_type: String,
    },
    /// The script's attach point does not fit the hook it was compiled for.
    #[error("{file}: compiled for {hook} but attached at {attach}")]
    AttachPoint {
        file: String,
        hook: nfkit_abi::Hook,
        attach: nfkit_abi::AttachPoint,
    },
}

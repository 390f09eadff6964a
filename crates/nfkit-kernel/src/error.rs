//! Errors of the kernel backend, each naming the program, map or command.

use std::fmt;
use std::path::PathBuf;

/// A source position a verifier message maps back to (from line info).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
    pub col: u32,
    /// The source line's text, when the object carries it.
    pub text: String,
}

impl fmt::Display for SourceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)?;
        if !self.text.is_empty() {
            write!(f, ": {}", self.text.trim())?;
        }
        Ok(())
    }
}

fn at_line(line: &Option<SourceLine>) -> String {
    match line {
        Some(l) => format!(" at {l}"),
        None => String::new(),
    }
}

/// The last lines of a verifier log (the part that says what went wrong).
pub fn log_tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Errors of loading, running and reading programs and maps.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The verifier refused entry program `entry`; `log` is its full log.
    #[error(
        "verifier rejected program '{entry}'{}: {}",
        at_line(line),
        log_tail(log, 3)
    )]
    Verifier {
        entry: String,
        log: String,
        line: Option<SourceLine>,
    },
    /// The kernel refused a program for another reason than the verifier.
    #[error("cannot load program '{entry}': {}", std::io::Error::from_raw_os_error(*errno))]
    ProgLoad { entry: String, errno: i32 },
    /// The Image cannot be turned into kernel instructions.
    #[error("program '{entry}': {msg}")]
    Image { entry: String, msg: String },
    /// The kernel refused to create a map.
    #[error("map '{map}': cannot create {map_type} (key {key_size}, value {value_size}, {max_entries} entries, flags {flags:#x}): {cause}")]
    MapCreate {
        map: String,
        map_type: String,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        flags: u32,
        cause: libbpf_rs::Error,
    },
    /// A map given for reuse does not have the shape the Image declares.
    #[error("map '{0}': the map given for reuse has another type, key or value size")]
    ReuseShape(String),
    /// An initial slot of a map of maps names a map the Image lacks.
    #[error("map '{map}': slot {slot} names map '{inner}', which is not a declared map")]
    MapSlot {
        map: String,
        slot: u32,
        inner: String,
    },
    /// A map's initial contents do not fit it.
    #[error("map '{map}': {why}")]
    MapData { map: String, why: String },
    /// A map operation failed.
    #[error("map '{map}': {op}: {cause}")]
    MapOp {
        map: String,
        op: &'static str,
        cause: libbpf_rs::Error,
    },
    /// A global variable named in the load options does not exist or
    /// does not fit.
    #[error("global '{name}': {msg}")]
    Global { name: String, msg: String },
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("test run of '{prog}': {}", std::io::Error::from_raw_os_error(*errno))]
    TestRun { prog: String, errno: i32 },
    /// An ELF object could not be opened or loaded by libbpf.
    #[error("object {path}: {cause}")]
    Object {
        path: String,
        cause: libbpf_rs::Error,
    },
    /// bpffs could not be mounted or used.
    #[error("bpffs at {path}: {msg}")]
    Bpffs { path: String, msg: String },
    /// A command of the testbed failed.
    #[error("testbed: `{cmd}` failed: {msg}")]
    Command { cmd: String, msg: String },
    /// An operating-system call failed.
    #[error("{what}: {}", std::io::Error::from_raw_os_error(*errno))]
    Os { what: String, errno: i32 },

    /// A file or directory of nfkit's (pins, the state file) could not
    /// be used.
    #[error("cannot {what} {}: {cause}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The state file holds something nfkit did not write.
    #[error("state file {}: {cause}", path.display())]
    StateFile {
        path: PathBuf,
        cause: serde_json::Error,
    },
    /// A path nfkit pins at is not UTF-8.
    #[error("path {} is not UTF-8", .0.display())]
    PathNotUtf8(PathBuf),
    /// No interface `dev` where the deploy looked; `elsewhere` lists the
    /// named network namespaces (`ip netns`) that have one.
    #[error("no interface `{dev}` in {}{}", where_(netns), hint_netns(elsewhere))]
    NoInterface {
        dev: String,
        netns: Option<String>,
        elsewhere: Vec<String>,
    },
    /// A named network namespace that cannot be entered.
    #[error("netns `{name}`: {why}")]
    Netns { name: String, why: NetnsProblem },
    /// Socket filters belong to a process's socket, not to an interface.
    #[error("`{0}` is not an interface hook (xdp, xdp-generic, tc-ingress, tc-egress)")]
    NotInterfaceHook(nfkit_abi::AttachPoint),
    /// What a deploy request names is not in its image or was not loaded.
    #[error("{what} `{name}` {why}")]
    Missing {
        what: &'static str,
        name: String,
        why: &'static str,
    },
    /// No deployment has a map of that name (on that device and hook).
    #[error("no deployed map `{name}`{}{}", dev.as_ref().map_or(String::new(), |d| format!(" on {d}")), hook.map_or(String::new(), |h| format!(" at {h}")))]
    NoDeployedMap {
        name: String,
        dev: Option<String>,
        hook: Option<nfkit_abi::AttachPoint>,
    },
    /// A map name matches more than one deployment.
    #[error("map `{name}` is deployed {} times ({}): say which with --dev and --hook", places.len(), places.join(", "))]
    AmbiguousMap { name: String, places: Vec<String> },
    /// A TC hook is attached one way and the deploy asks for the other.
    #[error("{dev} {hook} is deployed through {current}: undeploy it first to switch to {wanted}")]
    AttachConflict {
        dev: String,
        hook: nfkit_abi::AttachPoint,
        current: &'static str,
        wanted: &'static str,
    },
    /// An environment variable with a value nfkit does not know.
    #[error("{var}=`{value}`: expected {expected}")]
    BadEnv {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A program of the wrong type for what was asked.
    #[error("program `{prog}` is {prog_type}, not {wanted}")]
    WrongProgType {
        prog: String,
        prog_type: String,
        wanted: &'static str,
    },
    /// A worker thread of nfkit's died.
    #[error("internal: {0}")]
    Internal(&'static str),
}

/// Why a named network namespace cannot be entered.
#[derive(Debug, thiserror::Error)]
pub enum NetnsProblem {
    #[error("a name has no '/' and is not empty")]
    BadName,
    #[error("{}: {cause}", path.display())]
    Open {
        path: PathBuf,
        cause: std::io::Error,
    },
}

fn where_(netns: &Option<String>) -> String {
    match netns {
        Some(ns) => format!("network namespace `{ns}`"),
        None => "this network namespace".into(),
    }
}

fn hint_netns(elsewhere: &[String]) -> String {
    match elsewhere {
        [] => String::new(),
        [one] => format!("; it is in netns `{one}`: add --netns {one}"),
        many => format!(
            "; netns {} have one: add --netns NAME",
            many.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl KernelError {
    /// The OS error number, when the error carries one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            KernelError::ProgLoad { errno, .. }
            | KernelError::TestRun { errno, .. }
            | KernelError::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

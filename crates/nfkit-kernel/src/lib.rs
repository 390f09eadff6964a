//! nfkit's kernel backend (foundation): loads an [`Image`](nfkit_object::Image)
//! into Linux and runs it with `BPF_PROG_TEST_RUN`.
//!
//! * [`load`]: [`load_image`] (BTF, maps, func/line info, verifier errors
//!   mapped to source lines), [`load_object_file`] (libbpf's own loader,
//!   for comparison), [`Loaded`], [`Prog`] with [`Prog::test_run`].
//! * [`maps`]: [`KMap`], a kernel map read and written from Rust.
//! * [`deploy`]: attaching to interfaces (XDP native/generic, tcx),
//!   pinned links/programs/maps, live swaps by link update; status,
//!   undeploy, finding a deployed map.
//! * [`state`]: what is remembered of deployments: [`state::Paths`] (pin
//!   root, state file) and the JSON [`state::State`].
//! * [`dynamic`]: dynamic mode: NFs loaded once in `nfkit_progs`, chain
//!   segments in alternating banks, a chain switched by one slot update.
//! * [`tc`]: TC attachment, tcx links or (fallback) clsact filters.
//! * [`netns`]: named network namespaces: enter, run inside, search.
//! * [`socket`]: socket filters attached to a process's own sockets.
//! * [`stats`]: a deployment's per-chain, per-verdict counters.
//! * [`bpffs`]: mounting bpffs, nfkit's pin directory.
//! * [`testbed`]: RAII network namespaces, veth pairs and XDP links for tests.
//! * [`error`]: [`KernelError`], [`SourceLine`].
//! * `layout` (private): an entry program's instructions as the kernel
//!   takes them.
//! * `sys` (private): the crate's only `unsafe` code (libbpf calls
//!   libbpf-rs does not wrap, CPU pinning), and `sys_tc` (private):
//!   libbpf's netlink TC calls for clsact filters, `sys_sock` (private):
//!   `SO_ATTACH_BPF`.

#![deny(unsafe_code)]

pub mod bpffs;
pub mod deploy;
pub mod dynamic;
pub mod error;
mod layout;
pub mod load;
pub mod maps;
pub mod netns;
pub mod perf;
pub mod probe;
pub mod socket;
pub mod state;
pub mod stats;
mod sys;
mod sys_sock;
mod sys_tc;
pub mod tc;
pub mod testbed;

pub use bpffs::{ensure_bpffs, BPFFS, PIN_DIR};
pub use error::{KernelError, SourceLine};
pub use load::{
    load_image, load_object_file, set_global, LoadOptions, Loaded, Prog, ProgInfo, TestRun,
    TestRunOut,
};
pub use maps::KMap;
pub use socket::{attach_socket_filter, detach_socket_filter};
pub use testbed::{Netns, Testbed, Veth, XdpLink};

/// Pins the calling thread to CPU `cpu`, so test runs (which run on the
/// calling CPU) touch that CPU's slot of per-CPU maps.
pub fn pin_thread_to_cpu(cpu: usize) -> Result<(), KernelError> {
    sys::pin_thread_to_cpu(cpu).map_err(|errno| KernelError::Os {
        what: format!("sched_setaffinity to CPU {cpu}"),
        errno,
    })
}

/// Whether the process runs as root (loading, attaching and test runs
/// need it; kernel tests and benchmarks skip without it).
pub fn is_root() -> bool {
    sys::euid() == 0
}

/// The CPU the calling thread runs on.
pub fn current_cpu() -> Option<usize> {
    sys::current_cpu()
}

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns` (and of
/// `nf_now()` unpinned), for showing map times relative to now.
pub fn monotonic_ns() -> u64 {
    sys::monotonic_ns()
}

/// Number of possible CPUs (the length of per-CPU map values).
pub fn possible_cpus() -> Result<usize, KernelError> {
    libbpf_rs::num_possible_cpus().map_err(|e| KernelError::Os {
        what: format!("possible CPUs: {e}"),
        errno: libc::EIO,
    })
}

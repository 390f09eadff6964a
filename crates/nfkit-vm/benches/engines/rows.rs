//! One row per engine: a closure that runs one program on one packet and
//! gives r0 (u64::MAX when the run failed), with the engine's column and
//! what actually ran it.

use nfkit_object::{Image, ProgType};
use nfkit_vm::{Engine, PacketCtx, RunOptions, Vm, VmConfig};

/// Runs the program on a packet.
pub type RunFn = Box<dyn FnMut(&mut Vec<u8>) -> u64>;

/// The engines, in table order.
pub const COLUMNS: &[&str] = &[
    "nfkit JIT",
    "nfkit interp",
    "rbpf JIT",
    "rbpf interp",
    "DPDK JIT",
    "DPDK interp",
    "native C",
];

/// One engine running one program, and its timings.
pub struct Row {
    /// One of [`COLUMNS`].
    pub column: &'static str,
    /// What ran (nfkit: `Vm::engine` of the entry).
    pub ran: String,
    pub run: RunFn,
    /// ns per run of each round.
    pub samples: Vec<f64>,
}

impl Row {
    pub fn new(column: &'static str, ran: impl Into<String>, run: RunFn) -> Row {
        Row {
            column,
            ran: ran.into(),
            run,
            samples: Vec::new(),
        }
    }
}

/// Both nfkit rows of a loaded program: the VM configured for the JIT,
/// and the interpreter.
pub fn nfkit_rows(vms: [(Vm, &'static str); 2], entry: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (vm, column) in vms {
        let i = vm
            .entry_index(entry)
            .ok_or_else(|| format!("no entry {entry}"))?;
        let ran = vm
            .engine(i)
            .map_or_else(|| "?".to_string(), |e| e.to_string());
        let mut runner = vm.runner();
        let opts = RunOptions::default();
        // The in-place API: no packet copies out, no allocation.
        let run: RunFn = Box::new(move |p: &mut Vec<u8>| {
            runner
                .run_packet(i, p, PacketCtx::Xdp, &opts)
                .r0()
                .unwrap_or(u64::MAX)
        });
        rows.push(Row::new(column, ran, run));
    }
    Ok(rows)
}

/// The nfkit VM on `engine` for an XDP program assembled from `insns`,
/// checked as `nfkit run` checks programs (the kernel profile: its
/// load-time proofs are what lets the JIT leave out packet checks).
pub fn nfkit_vm(insns: &[nfkit_isa::Insn], engine: Engine) -> Result<Vm, String> {
    let config = VmConfig {
        budget: u64::MAX,
        ..VmConfig::kernel()
    }
    .with_engine(engine);
    let image = Image::from_insns("bench", ProgType::Xdp, insns.to_vec());
    Vm::new(&image, config).map_err(|e| format!("nfkit refuses the program: {e}"))
}

/// nfkit JIT and interpreter rows of an assembled XDP program.
pub fn nfkit_asm(insns: &[nfkit_isa::Insn]) -> Result<Vec<Row>, String> {
    let vms = [
        (nfkit_vm(insns, Engine::Jit)?, "nfkit JIT"),
        (nfkit_vm(insns, Engine::Interp)?, "nfkit interp"),
    ];
    nfkit_rows(vms, "bench")
}

/// The trivial helper registered with rbpf: gives back its argument.
fn trivial_helper(a: u64, _: u64, _: u64, _: u64, _: u64) -> u64 {
    a
}

/// The id the helper-call programs call (nfkit: `bpf_get_smp_processor_id`,
/// rbpf: [`trivial_helper`]).
pub const HELPER_ID: u32 = 8;

/// rbpf's metadata buffer for `p`: `{data u64, data_end u64}`.
fn meta(p: &[u8]) -> [u8; 16] {
    let start = p.as_ptr() as u64;
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&start.to_le_bytes());
    m[8..].copy_from_slice(&(start + p.len() as u64).to_le_bytes());
    m
}

/// rbpf JIT and interpreter rows of `insns` (the metadata-buffer form:
/// r1 points at `{data, data_end}`), with [`trivial_helper`] registered.
pub fn rbpf_rows(insns: &[nfkit_isa::Insn]) -> Result<Vec<Row>, String> {
    // rbpf's VMs borrow their program for as long as they live.
    let bytes: &'static [u8] = Box::leak(nfkit_isa::encode_bytes(insns).into_boxed_slice());
    let e = |e: std::io::Error| format!("rbpf: {e}");
    let mut interp = rbpf::EbpfVmMbuff::new(Some(bytes)).map_err(e)?;
    interp
        .register_helper(HELPER_ID, trivial_helper)
        .map_err(e)?;
    let mut jit = rbpf::EbpfVmMbuff::new(Some(bytes)).map_err(e)?;
    jit.register_helper(HELPER_ID, trivial_helper).map_err(e)?;
    jit.jit_compile().map_err(e)?;
    // The JIT wants a metadata buffer borrowed as long as the VM: one
    // leaked buffer, rewritten before each run.
    let mbuff: *mut [u8; 16] = Box::into_raw(Box::new([0u8; 16]));
    let jit_run: RunFn = Box::new(move |p: &mut Vec<u8>| {
        // SAFETY: `mbuff` is leaked (lives forever) and only this closure
        // uses it; the program only reads the packet and the buffer (the
        // results are checked against the interpreter's before timing).
        unsafe {
            *mbuff = meta(p);
            jit.execute_program_jit(p, &mut *mbuff).unwrap_or(u64::MAX)
        }
    });
    let interp_run: RunFn =
        Box::new(move |p: &mut Vec<u8>| interp.execute_program(p, &meta(p)).unwrap_or(u64::MAX));
    Ok(vec![
        Row::new("rbpf JIT", "jit", jit_run),
        Row::new("rbpf interp", "interp", interp_run),
    ])
}

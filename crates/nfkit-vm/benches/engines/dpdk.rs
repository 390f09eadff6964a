//! DPDK's rte_bpf rows (interpreter and JIT), when libdpdk-dev is
//! installed: `dpdk.c`, compiled at run time against librte_bpf, loads
//! and runs the programs. rte_bpf reaches the packet through an rte_mbuf
//! (see `dpdk.c`), so packet programs get their own prologue
//! ([`Dpdk::ctx`]) in place of `{CTX}`; its validator refuses loops.

use crate::native::Lib;
use crate::rows::{Row, RunFn};
use std::ffi::{c_char, c_void};
use std::path::Path;
use std::process::Command;

type LoadFn = extern "C" fn(*const u8, u32, i32, *mut c_char, usize) -> *mut c_void;
type HasJitFn = extern "C" fn(*const c_void) -> i32;
type RunPacketFn = extern "C" fn(*const c_void, *mut u8, u32, i32) -> u64;
type RunRawFn = extern "C" fn(*const c_void, u64, i32) -> u64;
type OffsetsFn = extern "C" fn(*mut u32);

/// The loaded shim.
#[derive(Clone, Copy)]
pub struct Dpdk {
    load: LoadFn,
    has_jit: HasJitFn,
    run_packet: RunPacketFn,
    run_raw: RunRawFn,
    /// Offsets of `buf_addr`, `data_off` and `data_len` in `rte_mbuf`.
    offsets: [u32; 3],
}

/// Builds and loads the shim, or says why not.
pub fn load(out: &Path) -> Result<Dpdk, String> {
    let cflags = Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .ok_or("libdpdk-dev is not installed (pkg-config knows no libdpdk)")?;
    let mut args: Vec<String> = vec!["-O2".into()];
    args.extend(
        String::from_utf8_lossy(&cflags.stdout)
            .split_whitespace()
            .map(str::to_string),
    );
    args.extend(["-lrte_bpf".into(), "-lrte_eal".into()]);
    let lib = Lib::build("dpdk.c", out, "engines-dpdk.so", &args)?;
    // SAFETY: the symbols are dpdk.c's functions with exactly these
    // signatures; the library stays loaded for the process.
    let d = unsafe {
        let offsets: OffsetsFn = std::mem::transmute(lib.sym("dpdk_mbuf_offsets")?);
        let mut o = [0u32; 3];
        offsets(o.as_mut_ptr());
        Dpdk {
            load: std::mem::transmute::<*mut c_void, LoadFn>(lib.sym("dpdk_load")?),
            has_jit: std::mem::transmute::<*mut c_void, HasJitFn>(lib.sym("dpdk_has_jit")?),
            run_packet: std::mem::transmute::<*mut c_void, RunPacketFn>(
                lib.sym("dpdk_run_packet")?,
            ),
            run_raw: std::mem::transmute::<*mut c_void, RunRawFn>(lib.sym("dpdk_run_raw")?),
            offsets: o,
        }
    };
    Ok(d)
}

impl Dpdk {
    /// The prologue that sets r2 = data and r3 = data_end from the mbuf
    /// in r1.
    pub fn ctx(&self) -> String {
        let [buf, off, len] = self.offsets;
        format!(
            "r2 = *(u64 *)(r1 + {buf})\n    r3 = *(u16 *)(r1 + {off})\n    r2 += r3\n    \
             r3 = *(u16 *)(r1 + {len})\n    r3 += r2"
        )
    }

    /// JIT and interpreter rows of `insns`; `packet`: r1 is the packet's
    /// mbuf (else a raw 0).
    pub fn rows(&self, insns: &[nfkit_isa::Insn], packet: bool) -> Result<Vec<Row>, String> {
        let bytes = nfkit_isa::encode_bytes(insns);
        let mut err = [0 as c_char; 256];
        let shim = (self.load)(
            bytes.as_ptr(),
            insns.len() as u32,
            packet as i32,
            err.as_mut_ptr(),
            err.len(),
        );
        if shim.is_null() {
            // SAFETY: the shim wrote a NUL-terminated message into `err`.
            let msg = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
            return Err(msg.to_string_lossy().trim().to_string());
        }
        let shim = shim as *const c_void;
        let mut rows = Vec::new();
        // No JIT (not x86-64 or arm64): the interpreter row only.
        let jit_too = (self.has_jit)(shim) != 0;
        for jit in [true, false] {
            if jit && !jit_too {
                continue;
            }
            let (run_packet, run_raw) = (self.run_packet, self.run_raw);
            let run: RunFn = if packet {
                Box::new(move |p: &mut Vec<u8>| {
                    run_packet(shim, p.as_mut_ptr(), p.len() as u32, jit as i32)
                })
            } else {
                Box::new(move |_: &mut Vec<u8>| run_raw(shim, 0, jit as i32))
            };
            let (column, ran) = if jit {
                ("DPDK JIT", "rte_bpf jit")
            } else {
                ("DPDK interp", "rte_bpf interp")
            };
            rows.push(Row::new(column, ran, run));
        }
        Ok(rows)
    }
}

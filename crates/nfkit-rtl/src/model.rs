//! The Verilated model behind the C ABI of `csrc/shim.cpp` (present when
//! the crate was built with Verilator), and a stand-in that reports
//! [`RtlError::NotInstalled`] otherwise.

use crate::error::RtlError;

/// Inputs of one run (the shim's `NfkitRtlIn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RunIn {
    pub arg1: u64,
    pub arg2: u64,
    pub pkt_lo: u32,
    pub pkt_hi: u32,
    pub timestamp: u64,
    pub max_cycles: u64,
    /// Run the other instruction memory version from this run on.
    pub swap: u32,
    /// The packet arrives during the run (see [`Model::stream`]).
    pub stream: u32,
    /// Its first data memory row.
    pub rx_row0: u32,
    pub pad: u32,
    /// The action module's settings ([`crate::ActionConfig`]): verdict
    /// mode, ingress port index, ports, host queues' ports (a byte each)
    /// and their number, the fault action.
    pub act_verdicts: u32,
    pub act_in_port: u32,
    pub act_nports: u32,
    pub act_hosts: u32,
    pub act_host_n: u32,
    pub pad2: u32,
    pub act_fault_verdict: u64,
    /// The packet comes in through the engine's port FSM: its length,
    /// port index and receive queue.
    pub via_port: u32,
    pub pin_len: u32,
    pub pin_port: u32,
    pub pin_queue: u32,
}

/// Outputs of one run (the shim's `NfkitRtlOut`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOut {
    pub r0: u64,
    pub cycles: u64,
    pub retired: u64,
    pub stall_load_use: u64,
    pub stall_div: u64,
    pub stall_call: u64,
    pub stall_rx: u64,
    pub flushes: u64,
    pub trace_len: u64,
    pub fault: u32,
    pub fault_pc: u32,
    /// The instruction memory version the run used.
    pub version: u32,
    pub pad: u32,
    /// Map operations (lookup, update, delete) and their cycles.
    pub map_ops: [u64; 3],
    pub map_cycles: [u64; 3],
    /// `1 << 32 | port` when bpf_redirect set an output port, else 0.
    pub out_port: u64,
    /// `kind << 48 | exclude_ingress << 47 | map << 32 | arg` (kind 1 a
    /// port, 2 a devmap entry, 3 a devmap broadcast; 0 none).
    pub redirect: u64,
    /// The action module: `action | decision << 8 | fault << 16 | port
    /// << 24`, the argument, the mask of ports a copy leaves by.
    pub action: u32,
    pub action_arg: u32,
    pub action_mask: u32,
    pub pad3: u32,
    /// Through the port FSM: cycles from the offer to the core's start.
    pub fsm_cycles: u64,
}

/// One map line (the shim's `NfkitRtlLine`): key in 32-bit words.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Line {
    pub valid: u32,
    pub map: u32,
    pub plen: u32,
    pub pad: u32,
    pub key: [u32; crate::layout::KEY_WORDS],
}

#[cfg(nfkit_rtl_model)]
mod ffi {
    use super::{Line, RunIn, RunOut};
    use std::os::raw::{c_char, c_int};

    #[repr(C)]
    pub struct NfkitRtl {
        _private: [u8; 0],
    }

    extern "C" {
        pub fn nfkit_rtl_new() -> *mut NfkitRtl;
        pub fn nfkit_rtl_free(m: *mut NfkitRtl);
        pub fn nfkit_rtl_vcd_open(m: *mut NfkitRtl, path: *const c_char) -> c_int;
        pub fn nfkit_rtl_imem_write(m: *mut NfkitRtl, slot: u32, word: u64);
        pub fn nfkit_rtl_stage(m: *mut NfkitRtl, words: *const u64, len: u64);
        pub fn nfkit_rtl_stream(m: *mut NfkitRtl, words: *const u64, len: u64);
        pub fn nfkit_rtl_dmem_write(m: *mut NfkitRtl, row: u32, word: u64, mask: u8);
        pub fn nfkit_rtl_dmem_read(m: *mut NfkitRtl, row: u32) -> u64;
        pub fn nfkit_rtl_map_config(
            m: *mut NfkitRtl,
            map: u32,
            kind: u32,
            key_size: u32,
            value_size: u32,
            base: u32,
            n: u32,
            trunc: u32,
        );
        pub fn nfkit_rtl_line_write(m: *mut NfkitRtl, idx: u32, l: *const Line);
        pub fn nfkit_rtl_line_read(m: *mut NfkitRtl, idx: u32, l: *mut Line);
        pub fn nfkit_rtl_run(
            m: *mut NfkitRtl,
            input: *const RunIn,
            out: *mut RunOut,
            trace: *mut u32,
            trace_cap: u64,
        ) -> c_int;
    }
}

/// One instance of the model (owns it; freed on drop).
#[cfg(nfkit_rtl_model)]
pub struct Model {
    ptr: std::ptr::NonNull<ffi::NfkitRtl>,
}

// The model is plain C++ state touched only through `&mut self`.
#[cfg(nfkit_rtl_model)]
unsafe impl Send for Model {}

#[cfg(nfkit_rtl_model)]
impl Model {
    pub fn new() -> Result<Model, RtlError> {
        // SAFETY: nfkit_rtl_new allocates and resets a model, never null
        // (it aborts on allocation failure like any C++ new).
        let ptr = unsafe { ffi::nfkit_rtl_new() };
        std::ptr::NonNull::new(ptr)
            .map(|ptr| Model { ptr })
            .ok_or(RtlError::NotInstalled)
    }

    pub fn vcd_open(&mut self, path: &std::path::Path) -> Result<(), RtlError> {
        let text = path.display().to_string();
        let c = std::ffi::CString::new(text.clone()).map_err(|_| RtlError::Vcd(text.clone()))?;
        // SAFETY: the model is live and `c` a NUL-terminated path.
        let rc = unsafe { ffi::nfkit_rtl_vcd_open(self.ptr.as_ptr(), c.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(RtlError::Vcd(text))
        }
    }

    /// Writes a slot of the inactive instruction memory version.
    pub fn imem_write(&mut self, slot: u32, word: u64) {
        // SAFETY: the model is live; the address is truncated by the port.
        unsafe { ffi::nfkit_rtl_imem_write(self.ptr.as_ptr(), slot, word) }
    }

    /// Queues slots for the inactive version, written during the next run.
    pub fn stage(&mut self, words: &[u64]) {
        // SAFETY: the model is live and copies `words` before returning.
        unsafe { ffi::nfkit_rtl_stage(self.ptr.as_ptr(), words.as_ptr(), words.len() as u64) }
    }

    /// Queues the packet's rows, streamed in during the next run.
    pub fn stream(&mut self, words: &[u64]) {
        // SAFETY: the model is live and copies `words` before returning.
        unsafe { ffi::nfkit_rtl_stream(self.ptr.as_ptr(), words.as_ptr(), words.len() as u64) }
    }

    pub fn dmem_write(&mut self, row: u32, word: u64, mask: u8) {
        // SAFETY: as above.
        unsafe { ffi::nfkit_rtl_dmem_write(self.ptr.as_ptr(), row, word, mask) }
    }

    pub fn dmem_read(&mut self, row: u32) -> u64 {
        // SAFETY: as above.
        unsafe { ffi::nfkit_rtl_dmem_read(self.ptr.as_ptr(), row) }
    }

    /// Configures map slot `map`: `[kind, key_size, value_size, base, n,
    /// trunc]` (`trunc`: n is fewer entries than the map declares).
    pub fn map_config(&mut self, map: u32, c: [u32; 6]) {
        // SAFETY: the model is live; plain integers.
        unsafe {
            ffi::nfkit_rtl_map_config(self.ptr.as_ptr(), map, c[0], c[1], c[2], c[3], c[4], c[5])
        }
    }

    pub fn line_write(&mut self, idx: u32, line: &Line) {
        // SAFETY: the model is live and `line` a valid repr(C) struct.
        unsafe { ffi::nfkit_rtl_line_write(self.ptr.as_ptr(), idx, line) }
    }

    pub fn line_read(&mut self, idx: u32) -> Line {
        let mut l = Line::default();
        // SAFETY: the model is live and `l` a valid repr(C) struct.
        unsafe { ffi::nfkit_rtl_line_read(self.ptr.as_ptr(), idx, &mut l) };
        l
    }

    /// Runs; `trace` receives up to its length of retired pcs. `true`
    /// when the program ended, `false` when the budget ran out.
    pub fn run(&mut self, input: &RunIn, trace: &mut [u32]) -> (bool, RunOut) {
        let mut out = RunOut::default();
        // SAFETY: the model is live, `input`/`out` are valid repr(C)
        // structs, and `trace` has room for `trace.len()` entries.
        let rc = unsafe {
            ffi::nfkit_rtl_run(
                self.ptr.as_ptr(),
                input,
                &mut out,
                trace.as_mut_ptr(),
                trace.len() as u64,
            )
        };
        (rc == 0, out)
    }
}

#[cfg(nfkit_rtl_model)]
impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the pointer came from nfkit_rtl_new and is freed once.
        unsafe { ffi::nfkit_rtl_free(self.ptr.as_ptr()) }
    }
}

/// Without Verilator: no model; creating one says so.
#[cfg(not(nfkit_rtl_model))]
pub struct Model {
    _none: (),
}

#[cfg(not(nfkit_rtl_model))]
impl Model {
    pub fn new() -> Result<Model, RtlError> {
        Err(RtlError::NotInstalled)
    }
    pub fn vcd_open(&mut self, _path: &std::path::Path) -> Result<(), RtlError> {
        Err(RtlError::NotInstalled)
    }
    pub fn imem_write(&mut self, _slot: u32, _word: u64) {}
    pub fn stage(&mut self, _words: &[u64]) {}
    pub fn stream(&mut self, _words: &[u64]) {}
    pub fn dmem_write(&mut self, _row: u32, _word: u64, _mask: u8) {}
    pub fn dmem_read(&mut self, _row: u32) -> u64 {
        0
    }
    pub fn map_config(&mut self, _map: u32, _c: [u32; 6]) {}
    pub fn line_write(&mut self, _idx: u32, _line: &Line) {}
    pub fn line_read(&mut self, _idx: u32) -> Line {
        Line::default()
    }
    pub fn run(&mut self, _input: &RunIn, _trace: &mut [u32]) -> (bool, RunOut) {
        (false, RunOut::default())
    }
}

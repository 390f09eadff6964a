//! [`Core`]: one engine's model with a program loaded, run packet by
//! packet.

use crate::error::RtlError;
use crate::layout::{addr, PKT_BASE, PKT_MAX, REGION_PACKET};
use crate::model::{Model, RunIn};
use crate::program::Program;
use crate::result::{Fault, FaultKind, RunResult, Stalls};

/// Default cycle budget of a run.
pub const DEFAULT_MAX_CYCLES: u64 = 10_000_000;

/// What one run starts from.
#[derive(Clone, Debug)]
pub struct RunInput<'a> {
    /// The packet (the conformance suite's memory): placed in the packet
    /// buffer, `r1` = its address, `r2` = its length (the VM's raw
    /// context).
    pub packet: &'a [u8],
    /// What `bpf_ktime_get_ns` answers.
    pub timestamp: u64,
    /// Record the retired pcs.
    pub trace: bool,
    /// Cycle budget; the run faults with [`FaultKind::Budget`] past it.
    pub max_cycles: u64,
}

impl<'a> RunInput<'a> {
    /// A run on `packet` with the defaults (no trace, time 0).
    pub fn new(packet: &'a [u8]) -> RunInput<'a> {
        RunInput {
            packet,
            timestamp: 0,
            trace: false,
            max_cycles: DEFAULT_MAX_CYCLES,
        }
    }
}

/// The model with a program in its instruction memory.
pub struct Core {
    model: Model,
    program: Program,
}

impl Core {
    /// Builds a model and loads `program`.
    pub fn new(program: Program) -> Result<Core, RtlError> {
        let mut core = Core {
            model: Model::new()?,
            program: Program {
                name: String::new(),
                words: Vec::new(),
                base_slot: 0,
            },
        };
        core.load(program);
        Ok(core)
    }

    /// Replaces the program.
    pub fn load(&mut self, program: Program) {
        for (slot, w) in program.words.iter().enumerate() {
            self.model.imem_write(slot as u32, *w);
        }
        self.program = program;
    }

    /// The loaded program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Dumps every signal of the following runs to a VCD file.
    pub fn vcd(&mut self, path: &std::path::Path) -> Result<(), RtlError> {
        self.model.vcd_open(path)
    }

    /// Runs the program on one packet.
    pub fn run(&mut self, input: &RunInput<'_>) -> Result<RunResult, RtlError> {
        let len = input.packet.len();
        if len > PKT_MAX {
            return Err(RtlError::PacketTooLarge { len, max: PKT_MAX });
        }
        self.write_bytes(PKT_BASE, input.packet);
        let run_in = RunIn {
            arg1: addr(REGION_PACKET, 0),
            arg2: len as u64,
            pkt_lo: 0,
            pkt_hi: len as u32,
            timestamp: input.timestamp,
            max_cycles: input.max_cycles,
        };
        let mut trace_buf = if input.trace {
            vec![0u32; (input.max_cycles.min(1 << 22)) as usize]
        } else {
            Vec::new()
        };
        let (ended, out) = self.model.run(&run_in, &mut trace_buf);
        let result = if !ended {
            Err(Fault {
                kind: FaultKind::Budget,
                pc: 0,
            })
        } else if out.fault != 0 {
            Err(Fault {
                kind: FaultKind::from_code(out.fault),
                pc: out.fault_pc as usize + self.program.base_slot,
            })
        } else {
            Ok(out.r0)
        };
        let kept = (out.trace_len as usize).min(trace_buf.len());
        let base = self.program.base_slot;
        let trace = trace_buf[..kept]
            .iter()
            .map(|pc| *pc as usize + base)
            .collect();
        Ok(RunResult {
            result,
            packet: self.read_bytes(PKT_BASE, len),
            cycles: out.cycles,
            retired: out.retired,
            stalls: Stalls {
                load_use: out.stall_load_use,
                div: out.stall_div,
                call: out.stall_call,
                flushes: out.flushes,
            },
            trace,
        })
    }

    /// Writes `bytes` at data memory index `at` through the host port.
    fn write_bytes(&mut self, at: usize, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            let pos = at + i;
            let (row, lane) = (pos / 8, pos % 8);
            let n = (8 - lane).min(bytes.len() - i);
            let mut word = [0u8; 8];
            word[lane..lane + n].copy_from_slice(&bytes[i..i + n]);
            let mask = (((1u16 << n) - 1) << lane) as u8;
            self.model
                .dmem_write(row as u32, u64::from_le_bytes(word), mask);
            i += n;
        }
    }

    /// Reads `len` bytes from data memory index `at`.
    fn read_bytes(&mut self, at: usize, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut pos = at;
        while out.len() < len {
            let (row, lane) = (pos / 8, pos % 8);
            let word = self.model.dmem_read(row as u32).to_le_bytes();
            let n = (8 - lane).min(len - out.len());
            out.extend_from_slice(&word[lane..lane + n]);
            pos += n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_isa::Insn;

    #[test]
    fn runs_or_says_verilator_is_missing() {
        let prog = Program::from_insns("p", &[Insn::Exit]).expect("in the subset");
        match Core::new(prog) {
            Ok(_) => assert!(crate::model_available()),
            Err(e) => {
                assert!(!crate::model_available());
                assert!(e
                    .to_string()
                    .contains("verilator not installed: run scripts/install-deps.sh"));
            }
        }
    }

    #[test]
    fn refuses_oversized_packets() {
        if !crate::model_available() {
            return;
        }
        let prog = Program::from_insns("p", &[Insn::lddw(nfkit_isa::Reg::R0, 0), Insn::Exit])
            .expect("in the subset");
        let mut core = Core::new(prog).expect("model");
        let big = vec![0u8; PKT_MAX + 1];
        assert!(matches!(
            core.run(&RunInput::new(&big)),
            Err(RtlError::PacketTooLarge { .. })
        ));
    }
}

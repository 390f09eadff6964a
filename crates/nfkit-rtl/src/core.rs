//! [`Core`]: one engine's model with a program loaded, run packet by
//! packet.

use crate::action::{ActionConfig, ActionOut, MAX_HOSTS, MAX_PORTS};
use crate::error::RtlError;
use crate::layout::{
    addr, meta, META_BYTES, PKT_BASE, PKT_MAX, REGION_META, REGION_PACKET, XDP_HEADROOM,
};
use crate::maps::MapOps;
use crate::model::{Model, RunIn};
use crate::program::Program;
use crate::result::{Fault, FaultKind, RunResult, Stalls};

/// Default cycle budget of a run.
pub const DEFAULT_MAX_CYCLES: u64 = 10_000_000;
/// Most retired pcs a traced run keeps (the VM's limit too).
pub const TRACE_LIMIT: usize = 1_000_000;

/// The context a program gets in `r1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctx {
    /// The conformance suite's form (the VM's raw context): the packet at
    /// offset 0 of its region, `r1` = its address, `r2` = its length.
    Raw,
    /// An XDP packet: `r1` = the metadata (`struct xdp_md`), the packet
    /// after [`XDP_HEADROOM`] bytes, as in the VM and the kernel.
    Xdp {
        ingress_ifindex: u32,
        rx_queue_index: u32,
    },
}

/// What one run starts from.
#[derive(Clone, Debug)]
pub struct RunInput<'a> {
    /// The packet (or the conformance suite's memory).
    pub packet: &'a [u8],
    pub ctx: Ctx,
    /// What `bpf_ktime_get_ns` answers.
    pub timestamp: u64,
    /// Record the retired pcs.
    pub trace: bool,
    /// Stream the packet in while the program runs (8 bytes a cycle from
    /// the start, sharing the write port with stores), as the engine
    /// receives it, instead of writing it whole before the start; packet
    /// accesses to bytes not yet arrived wait ([`Stalls::rx`]).
    pub stream: bool,
    /// Cycle budget; the run faults with [`FaultKind::Budget`] past it.
    pub max_cycles: u64,
    /// Offer the packet to the engine's port FSM instead (XDP context
    /// only): the FSM writes the metadata (the context's ingress port and
    /// receive queue, the timestamp, the length) and starts the core, the
    /// packet streaming in ([`RunResult::fsm_cycles`]).
    pub via_port: bool,
}

impl<'a> RunInput<'a> {
    /// A run on `packet` with the defaults (no trace, time 0).
    pub fn new(packet: &'a [u8]) -> RunInput<'a> {
        RunInput {
            packet,
            ctx: Ctx::Raw,
            timestamp: 0,
            trace: false,
            stream: false,
            max_cycles: DEFAULT_MAX_CYCLES,
            via_port: false,
        }
    }
}

/// The model with a program in its instruction memory.
///
/// The instruction memory is double-buffered: [`Core::load`] writes the
/// inactive version between runs, [`Core::stage`] while the next run
/// executes (as a controller would under a packet stream); either way the
/// new program becomes active at the start of a later run, never within
/// one.
pub struct Core {
    pub(crate) model: Model,
    /// The program of the active version.
    program: Program,
    /// Written to the inactive version, active from the next run on.
    pending: Option<Program>,
    /// Queued to be written during the next run.
    staged: Option<Program>,
    /// Where traced runs' pcs land.
    trace_buf: Vec<u32>,
    /// The action module's settings.
    action: ActionConfig,
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
                maps: Default::default(),
            },
            pending: None,
            staged: None,
            trace_buf: Vec::new(),
            action: ActionConfig::default(),
        };
        core.load(program);
        Ok(core)
    }

    /// Writes `program` into the inactive instruction memory now and its
    /// maps (empty) into the coprocessor; the next run runs it.
    pub fn load(&mut self, program: Program) {
        self.configure_maps(&program.maps);
        for (slot, w) in program.words.iter().enumerate() {
            self.model.imem_write(slot as u32, *w);
        }
        self.pending = Some(program);
    }

    /// Queues `program` to be written into the inactive instruction
    /// memory, one slot per cycle, while the next run executes (the rest,
    /// if the run is shorter, right after it); the run after that runs it.
    /// A second `stage` before that run replaces the first.
    pub fn stage(&mut self, program: Program) {
        self.model.stage(&program.words);
        self.staged = Some(program);
    }

    /// Sets how the action module reads the following runs and where its
    /// ports are; refused when it has more ports or host queues than the
    /// module holds ([`MAX_PORTS`], [`MAX_HOSTS`]) or a host queue names a
    /// port beyond them.
    pub fn set_action(&mut self, cfg: ActionConfig) -> Result<(), RtlError> {
        if usize::from(cfg.nports) > MAX_PORTS || cfg.hosts.len() > MAX_HOSTS {
            return Err(RtlError::Action(format!(
                "{} ports and {} host queues (the action module has {MAX_PORTS} and {MAX_HOSTS})",
                cfg.nports,
                cfg.hosts.len()
            )));
        }
        if let Some(h) = cfg.hosts.iter().find(|&&h| usize::from(h) >= MAX_PORTS) {
            return Err(RtlError::Action(format!(
                "host queue on port index {h} (the action module has {MAX_PORTS} ports)"
            )));
        }
        self.action = cfg;
        Ok(())
    }

    /// The program the next run runs.
    pub fn program(&self) -> &Program {
        self.pending.as_ref().unwrap_or(&self.program)
    }

    /// Dumps every signal of the following runs to a VCD file.
    pub fn vcd(&mut self, path: &std::path::Path) -> Result<(), RtlError> {
        self.model.vcd_open(path)
    }

    /// Runs the program on one packet.
    pub fn run(&mut self, input: &RunInput<'_>) -> Result<RunResult, RtlError> {
        let len = input.packet.len();
        let (start, args) = match input.ctx {
            Ctx::Raw => (0, [addr(REGION_PACKET, 0), len as u64]),
            Ctx::Xdp { .. } => (XDP_HEADROOM, [addr(REGION_META, 0), 0]),
        };
        if start + len > PKT_MAX {
            return Err(RtlError::PacketTooLarge {
                len,
                max: PKT_MAX - start,
            });
        }
        let via_port = match input.ctx {
            Ctx::Xdp {
                ingress_ifindex,
                rx_queue_index,
            } if input.via_port => {
                if ingress_ifindex == 0 || ingress_ifindex > 255 {
                    return Err(RtlError::Port(format!(
                        "ingress_ifindex {ingress_ifindex}: the engine's ports are 1..=255"
                    )));
                }
                Some((ingress_ifindex - 1, rx_queue_index))
            }
            _ if input.via_port => {
                return Err(RtlError::Port(
                    "only an XDP context comes in through the port".into(),
                ))
            }
            _ => None,
        };
        if let (
            Ctx::Xdp {
                ingress_ifindex,
                rx_queue_index,
            },
            None,
        ) = (input.ctx, via_port)
        {
            let mut m = [0u8; META_BYTES];
            let mut put32 = |at: usize, v: u32| m[at..at + 4].copy_from_slice(&v.to_le_bytes());
            put32(meta::DATA, start as u32);
            put32(meta::DATA_END, (start + len) as u32);
            put32(meta::DATA_META, start as u32);
            put32(meta::INGRESS_IFINDEX, ingress_ifindex);
            put32(meta::RX_QUEUE_INDEX, rx_queue_index);
            put32(meta::EGRESS_IFINDEX, 0);
            put32(meta::LEN, len as u32);
            m[meta::TIMESTAMP..meta::TIMESTAMP + 8].copy_from_slice(&input.timestamp.to_le_bytes());
            self.write_bytes(0, &m);
        }
        let rx_row0 = ((PKT_BASE + start) / 8) as u32;
        if input.stream || via_port.is_some() {
            let rows: Vec<u64> = input
                .packet
                .chunks(8)
                .map(|c| {
                    let mut w = [0u8; 8];
                    w[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(w)
                })
                .collect();
            self.model.stream(&rows);
        } else {
            self.write_bytes(PKT_BASE + start, input.packet);
        }
        let run_in = RunIn {
            arg1: args[0],
            arg2: args[1],
            pkt_lo: start as u32,
            pkt_hi: (start + len) as u32,
            timestamp: input.timestamp,
            max_cycles: input.max_cycles,
            swap: u32::from(self.pending.is_some()),
            stream: u32::from(input.stream),
            rx_row0,
            pad: 0,
            act_verdicts: u32::from(self.action.verdicts),
            // The switch numbers ports from 1 in `ingress_ifindex`.
            act_in_port: match input.ctx {
                Ctx::Xdp {
                    ingress_ifindex, ..
                } => ingress_ifindex.saturating_sub(1) & 0xff,
                _ => 0,
            },
            act_nports: u32::from(self.action.nports),
            act_hosts: self
                .action
                .hosts
                .iter()
                .enumerate()
                .fold(0, |w, (i, &p)| w | u32::from(p) << (8 * i)),
            act_host_n: self.action.hosts.len() as u32,
            pad2: 0,
            act_fault_verdict: self.action.fault_verdict,
            via_port: u32::from(via_port.is_some()),
            pin_len: len as u32,
            pin_port: via_port.map_or(0, |p| p.0),
            pin_queue: via_port.map_or(0, |p| p.1),
        };
        if let Some(p) = self.pending.take() {
            self.program = p;
        }
        // One buffer per core, allocated at the first traced run.
        let mut trace_buf = std::mem::take(&mut self.trace_buf);
        if input.trace && trace_buf.len() < TRACE_LIMIT {
            // Zeroed pages: untouched until written.
            trace_buf = vec![0u32; TRACE_LIMIT];
        }
        let slots: &mut [u32] = if input.trace { &mut trace_buf } else { &mut [] };
        let (ended, out) = self.model.run(&run_in, slots);
        if let Some(p) = self.staged.take() {
            self.pending = Some(p);
        }
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
        let kept = if input.trace {
            (out.trace_len as usize).min(TRACE_LIMIT)
        } else {
            0
        };
        let base = self.program.base_slot;
        let trace = trace_buf[..kept]
            .iter()
            .map(|pc| *pc as usize + base)
            .collect();
        self.trace_buf = trace_buf;
        Ok(RunResult {
            result,
            packet: self.read_bytes(PKT_BASE + start, len),
            cycles: out.cycles,
            retired: out.retired,
            version: out.version as u8,
            stalls: Stalls {
                values: 0,
                load_use: out.stall_load_use,
                div: out.stall_div,
                call: out.stall_call,
                rx: out.stall_rx,
                flushes: out.flushes,
            },
            trace,
            map_ops: out.map_ops,
            map_cycles: out.map_cycles,
            out_port: (out.out_port >> 32 != 0).then_some(out.out_port as u32),
            redirect: crate::result::Redirect::decode(out.redirect),
            action: ActionOut::decode(out.action, out.action_arg, out.action_mask),
            fsm_cycles: out.fsm_cycles,
        })
    }

    /// Writes `bytes` at data memory index `at` through the host port.
    pub(crate) fn write_bytes(&mut self, at: usize, bytes: &[u8]) {
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
    pub(crate) fn read_bytes(&mut self, at: usize, len: usize) -> Vec<u8> {
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

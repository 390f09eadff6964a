//! Recording a traced run: before each instruction the machine notes the
//! registers and the memory the instruction is about to touch; after it,
//! the differences become a [`TraceStep`]. Only the traced copy of the
//! interpreter loop calls this; the fast path carries none of it (both
//! entry points are kept out of line, so that the untraced loop compiled
//! next to the traced one stays as it was).

#![forbid(unsafe_code)]

use crate::interp::Machine;
use crate::mem::{self, Role};
use crate::prog::{Code, Op};
use crate::result::{
    AccessKind, HelperCall, MemAccess, MemRegion, RegChange, TraceStep, TRACE_LIMIT,
};
use nfkit_object::MapKind;

/// What the machine noted before running the instruction at `pc`.
pub(crate) struct Pending {
    pc: usize,
    regs: [u64; 16],
    mem: Option<PendingMem>,
}

/// The memory an instruction is about to touch.
struct PendingMem {
    addr: u64,
    size: usize,
    kind: AccessKind,
    /// The register a load writes.
    dst: usize,
    /// The value a store writes (cut to `size`).
    stored: u64,
    /// What the memory held before (when it is plain memory).
    old: Option<u64>,
}

/// `v` cut to `size` bytes.
fn truncate(v: u64, size: usize) -> u64 {
    if size >= 8 {
        v
    } else {
        v & ((1u64 << (size * 8)) - 1)
    }
}

/// Address, size and kind of the access `op` makes with registers `r`.
fn access(op: &Op, r: &[u64; 16]) -> Option<(u64, usize, AccessKind, u64)> {
    use Code::*;
    let (d, s) = ((op.dst & 15) as usize, (op.src & 15) as usize);
    let at = |base: u64| base.wrapping_add(op.off as i64 as u64);
    let (addr, size, kind, stored) = match op.code {
        LdxB | LdxSB => (at(r[s]), 1, AccessKind::Read, 0),
        LdxH | LdxSH => (at(r[s]), 2, AccessKind::Read, 0),
        LdxW | LdxSW => (at(r[s]), 4, AccessKind::Read, 0),
        LdxDW => (at(r[s]), 8, AccessKind::Read, 0),
        StB | StH | StW | StDW => {
            let size = match op.code {
                StB => 1,
                StH => 2,
                StW => 4,
                _ => 8,
            };
            (at(r[d]), size, AccessKind::Write, op.imm)
        }
        StxB => (at(r[d]), 1, AccessKind::Write, r[s]),
        StxH => (at(r[d]), 2, AccessKind::Write, r[s]),
        StxW => (at(r[d]), 4, AccessKind::Write, r[s]),
        StxDW => (at(r[d]), 8, AccessKind::Write, r[s]),
        Atomic => (at(r[d]), op.imm as usize, AccessKind::Atomic, 0),
        _ => return None,
    };
    Some((addr, size, kind, truncate(stored, size)))
}

impl Machine {
    /// The plain-memory value at `addr..addr+size`, if readable.
    fn peek(&self, addr: u64, size: usize) -> Option<u64> {
        let (buf, off) = self.mem.resolve(addr, size, false)?;
        buf.load(off, size)
    }

    /// Notes the state before the instruction at `pc` runs.
    #[inline(never)]
    pub(crate) fn trace_begin(&mut self, pc: usize) {
        let op = self.vm.program.ops.get(pc);
        let mem = op
            .and_then(|op| access(op, &self.regs))
            .map(|(addr, size, kind, stored)| PendingMem {
                addr,
                size,
                kind,
                dst: op.map_or(0, |o| (o.dst & 15) as usize),
                stored,
                old: self.peek(addr, size),
            });
        self.trace_pending = Some(Box::new(Pending {
            pc,
            regs: self.regs,
            mem,
        }));
    }

    /// Records the instruction noted by [`Machine::trace_begin`], now
    /// that it ran (`next`: the op that runs next, if any) or faulted
    /// (`fault_pc`: where the run faulted, if it did).
    #[inline(never)]
    pub(crate) fn trace_end(&mut self, next: Option<usize>, fault_pc: Option<usize>) {
        let Some(p) = self.trace_pending.take() else {
            return;
        };
        if self.trace.len() >= TRACE_LIMIT {
            return;
        }
        let faulted = fault_pc == Some(p.pc);
        let changes = (0..=10)
            .filter(|&r| p.regs[r] != self.regs[r])
            .map(|r| RegChange {
                reg: r as u8,
                old: p.regs[r],
                new: self.regs[r],
            })
            .collect();
        let prog = &self.vm.program;
        let func = prog.op_func.get(p.pc).copied();
        let prev = self
            .trace
            .last()
            .and_then(|s| prog.op_func.get(s.op).copied());
        let enters = match func {
            Some(f) if prev != Some(f) => prog.funcs.get(f as usize).map(|f| f.name.clone()),
            _ => None,
        };
        let mem = match &p.mem {
            Some(m) if !faulted => Some(self.mem_access(m, &p.regs)),
            _ => None,
        };
        let helper = if faulted {
            None
        } else {
            self.helper_call(&p, next)
        };
        self.trace.push(TraceStep {
            op: p.pc,
            slot: prog.slot(p.pc),
            insn: prog.insns.get(p.pc).copied(),
            enters,
            changes,
            mem,
            helper,
            faulted,
        });
    }

    /// The helper the instruction noted in `p` called, if it is a call.
    fn helper_call(&self, p: &Pending, next: Option<usize>) -> Option<HelperCall> {
        let op = self.vm.program.ops.get(p.pc)?;
        let id = match op.code {
            Code::Call => op.imm as i64,
            Code::Callx => p.regs[(op.dst & 15) as usize] as i64,
            _ => return None,
        };
        Some(HelperCall {
            id,
            name: i32::try_from(id)
                .ok()
                .and_then(nfkit_isa::helpers::helper_name),
            ret: (next == Some(p.pc + 1)).then_some(self.regs[0]),
        })
    }

    /// The access `m` as the program sees it: region, offset, value.
    fn mem_access(&self, m: &PendingMem, before: &[u64; 16]) -> MemAccess {
        let id = (m.addr >> mem::REGION_SHIFT) as u32;
        let off = (m.addr & 0xffff_ffff) as i64;
        let now = self.peek(m.addr, m.size);
        let value = match m.kind {
            // A context load's value is what reached the register.
            AccessKind::Read => now.unwrap_or(self.regs[m.dst]),
            AccessKind::Write => now.unwrap_or(m.stored),
            AccessKind::Atomic => now.unwrap_or(0),
        };
        let old = match m.kind {
            AccessKind::Read => None,
            AccessKind::Write | AccessKind::Atomic => m.old,
        };
        let region = self.mem.region(id);
        let lo = self.mem.window(id).map_or(0, |w| w.lo as i64);
        let role = region.map_or(Role::Plain, |r| r.role);
        let (region, offset) = match (id, role) {
            (mem::CTX, _) => (MemRegion::Ctx, off),
            (mem::PACKET, _) if region.is_some_and(|r| &*r.name == "memory") => {
                (MemRegion::Memory, off)
            }
            (mem::PACKET, _) => (MemRegion::Packet, off - self.pkt.data as i64),
            // Every frame shares the stack's offsets: count from this
            // frame's r10 (a caller's slot shows as fp+N).
            (_, Role::Frame(_)) => (MemRegion::Stack, off - (before[10] & 0xffff_ffff) as i64),
            (_, Role::MapValue(i)) => match self.vm.maps.by_index(i as usize) {
                Some(map) => {
                    let name = map.name().to_string();
                    match map.spec.kind {
                        MapKind::Global { .. } => (MemRegion::Global(name), off - lo),
                        _ => (MemRegion::Map(name), off - lo),
                    }
                }
                None => (MemRegion::Other(String::new()), off - lo),
            },
            _ => (
                MemRegion::Other(region.map_or_else(String::new, |r| r.name.to_string())),
                off - lo,
            ),
        };
        MemAccess {
            kind: m.kind,
            region,
            offset,
            size: m.size,
            value,
            old,
        }
    }
}

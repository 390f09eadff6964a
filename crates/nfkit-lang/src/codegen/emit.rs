//! The instruction level: instruction builders, labels and jumps,
//! stack slots, map references, and one function's code assembled
//! (unreachable code dropped, jumps resolved).

use super::{Frame, Gen, GenError, GenFunc, Label, ObjMap, Ref, MAX_FRAME};
use crate::ir::Program;
use nfkit_isa::{AluOp, CallKind, Cond, Insn, LddwKind, Operand, Reg, Size, Width};
use nfkit_nf::Hook;

/// `dst = v`.
pub(super) fn mov_imm(dst: Reg, v: i32) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src: Operand::Imm(v),
    }
}

/// `dst = src`.
pub(super) fn mov_reg(dst: Reg, src: Reg) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op: AluOp::Mov,
        dst,
        src: Operand::Reg(src),
    }
}

/// `dst op= src` (64-bit).
pub(super) fn alu(op: AluOp, dst: Reg, src: Operand) -> Insn {
    Insn::Alu {
        width: Width::W64,
        op,
        dst,
        src,
    }
}

/// `dst = *(size *)(src + off)`.
pub(super) fn ldx(size: Size, dst: Reg, src: Reg, off: i16) -> Insn {
    Insn::Ldx {
        size,
        signed: false,
        dst,
        src,
        off,
    }
}

/// `*(size *)(dst + off) = src`.
pub(super) fn stx(size: Size, dst: Reg, off: i16, src: Reg) -> Insn {
    Insn::Stx {
        size,
        dst,
        src,
        off,
    }
}

/// Offset of local `i` in a frame based at `base` (<= 0 from r10; > 0
/// from the block pointer of a `bpf_loop` callback).
pub(super) fn local_off(base: i32, i: usize) -> i16 {
    (base - 8 * (i as i32 + 1)).clamp(i16::MIN as i32, i16::MAX as i32) as i16
}

impl Gen<'_> {
    /// A new label, bound later.
    pub(super) fn label(&mut self) -> Label {
        self.labels.push(None);
        self.labels.len() - 1
    }

    /// Binds `l` to the next instruction.
    pub(super) fn bind(&mut self, l: Label) {
        self.labels[l] = Some(self.insns.len());
    }

    /// Appends an instruction.
    pub(super) fn emit(&mut self, i: Insn) {
        self.insns.push(i);
    }

    /// `goto l`.
    pub(super) fn jmp(&mut self, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.emit(Insn::Ja { off: 0 });
    }

    /// `if dst cond src goto l`.
    pub(super) fn jcond(&mut self, cond: Cond, dst: Reg, src: Operand, l: Label) {
        self.fixups.push((self.insns.len(), l));
        self.emit(Insn::Jmp {
            width: Width::W64,
            cond,
            dst,
            src,
            off: 0,
        });
    }

    /// Allocates an 8-byte stack slot; its offset from r10.
    pub(super) fn alloc(&mut self, bytes: i32) -> i16 {
        self.used += bytes;
        self.max_used = self.max_used.max(self.used);
        (-self.used).clamp(i16::MIN as i32, 0) as i16
    }

    /// Releases the last `bytes` allocated.
    pub(super) fn free(&mut self, bytes: i32) {
        self.used -= bytes;
    }

    /// The index of map `m` in the object (added on first use).
    fn map_index(&mut self, m: ObjMap) -> usize {
        match self.maps.iter().position(|x| *x == m) {
            Some(i) => i,
            None => {
                self.maps.push(m);
                self.maps.len() - 1
            }
        }
    }

    /// `dst = &map m` (an `lddw` relocated when linking).
    pub(super) fn load_map(&mut self, dst: Reg, m: ObjMap) {
        let i = self.map_index(m);
        self.refs.push((self.insns.len(), Ref::Map(i)));
        self.emit(Insn::Lddw {
            kind: LddwKind::MapFd,
            dst,
            imm: 0,
            next_imm: 0,
        });
    }

    /// A call of local function `sym` (an NF or the classifier's
    /// `nfkit_dyn_finish`), relocated when linking.
    pub(super) fn call_local(&mut self, sym: String) {
        self.refs.push((self.insns.len(), Ref::Nf(sym)));
        self.emit(Insn::Call {
            kind: CallKind::Local,
            imm: -1,
        });
    }

    /// A call of helper `id`.
    pub(super) fn call_helper(&mut self, id: i32) {
        self.emit(Insn::Call {
            kind: CallKind::Helper,
            imm: id,
        });
    }

    /// `dst = v` (`lddw` when it does not fit 32 bits).
    pub(super) fn konst(&mut self, dst: Reg, v: u64) {
        if (v as i64) >= i32::MIN as i64 && (v as i64) <= i32::MAX as i64 {
            self.emit(mov_imm(dst, v as i64 as i32));
        } else {
            self.emit(Insn::lddw(dst, v));
        }
    }

    /// `dst = r10 + off`.
    pub(super) fn fp_addr(&mut self, dst: Reg, off: i16) {
        self.emit(mov_reg(dst, Reg::FP));
        self.emit(alu(AluOp::Add, dst, Operand::Imm(off as i32)));
    }

    /// The function, once generated (or its first error).
    pub(super) fn finish(mut self) -> Result<GenFunc, GenError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.check_frame()?;
        self.code(self.name.clone(), None, None)
    }

    /// The stack frame fits [`MAX_FRAME`].
    pub(super) fn check_frame(&self) -> Result<(), GenError> {
        if self.max_used > MAX_FRAME {
            return Err(GenError::Stack {
                chain: self.name.clone(),
                bytes: self.max_used as u32,
                why: format!(
                    "locals and temporaries of {} (chain calls are inlined)",
                    self.inline_path.join(" -> ")
                ),
            });
        }
        Ok(())
    }

    /// The generated code as a function named `name`: with `entry` =
    /// (label, target) the label is re-pointed first (where a dynamic
    /// segment starts); code no path reaches is dropped (the kernel
    /// refuses it) and jumps are resolved.
    pub(super) fn code(
        &self,
        name: String,
        entry: Option<(Label, Label)>,
        slot: Option<u32>,
    ) -> Result<GenFunc, GenError> {
        let mut labels = self.labels.clone();
        if let Some((l, to)) = entry {
            labels[l] = labels[to];
        }
        // Jump targets as instruction indices.
        let n = self.insns.len();
        let mut target: Vec<Option<usize>> = vec![None; n];
        for &(at, l) in &self.fixups {
            target[at] = Some(labels[l].unwrap_or(n).min(n.saturating_sub(1)));
        }
        // The kernel refuses unreachable instructions: keep only what a
        // path from the first instruction reaches.
        let mut live = vec![false; n];
        let mut work = vec![0usize];
        while let Some(i) = work.pop() {
            if i >= n || live[i] {
                continue;
            }
            live[i] = true;
            if let Some(t) = target[i] {
                work.push(t);
            }
            if !self.insns[i].ends_block() {
                work.push(i + 1);
            }
        }
        let mut new_index = vec![0usize; n + 1];
        let mut k = 0;
        for i in 0..n {
            new_index[i] = k;
            if live[i] {
                k += 1;
            }
        }
        new_index[n] = k;
        let mut insns = Vec::with_capacity(k);
        let mut targets = Vec::with_capacity(k);
        for i in 0..n {
            if live[i] {
                insns.push(self.insns[i]);
                targets.push(target[i].map(|t| new_index[t]));
            }
        }
        let refs = self
            .refs
            .iter()
            .filter(|(i, _)| live.get(*i).copied().unwrap_or(false))
            .map(|(i, r)| (new_index[*i], r.clone()))
            .collect();
        let mut lines: Vec<(usize, u32, u32)> = Vec::new();
        for &(i, l, c) in &self.lines {
            let ni = new_index[i.min(n)];
            if ni >= k {
                continue;
            }
            if lines.last().is_some_and(|x| x.0 == ni) {
                lines.pop();
            }
            lines.push((ni, l, c));
        }
        let slots = nfkit_isa::slot_offsets(&insns);
        for (at, t) in targets.iter().enumerate() {
            let Some(t) = *t else { continue };
            let rel = slots[t] as i64 - slots[at] as i64 - 1;
            let rel = i16::try_from(rel).map_err(|_| GenError::JumpTooFar(self.name.clone()))?;
            match &mut insns[at] {
                Insn::Ja { off } | Insn::Jmp { off, .. } => *off = rel,
                _ => {}
            }
        }
        Ok(GenFunc {
            name,
            insns,
            refs,
            lines,
            stack: self.max_used as u32,
            global: false,
            slot,
            callback: self.in_callback,
        })
    }

    /// The innermost inlining frame.
    pub(super) fn frame(&self) -> &Frame {
        // A frame always exists while generating statements.
        &self.frames[self.frames.len() - 1]
    }

    /// The offset of local `i` of the current frame.
    pub(super) fn local(&self, i: usize) -> i16 {
        local_off(self.frame().base, i)
    }

    /// The register locals of the current frame are addressed from.
    pub(super) fn lreg(&self) -> Reg {
        self.frame().reg
    }
}

impl<'a> Gen<'a> {
    /// A generator for function `name` (its exit and fault labels made).
    pub(super) fn new(
        prog: &'a Program,
        hook: Hook,
        maps: &'a mut Vec<ObjMap>,
        name: &str,
    ) -> Gen<'a> {
        let mut g = Gen {
            prog,
            hook,
            maps,
            name: name.to_string(),
            insns: Vec::new(),
            refs: Vec::new(),
            lines: Vec::new(),
            labels: Vec::new(),
            fixups: Vec::new(),
            used: 0,
            max_used: 0,
            frames: Vec::new(),
            exit: 0,
            fault: 0,
            inline_path: vec![name.to_string()],
            dynamic: None,
            callbacks: Vec::new(),
            cb_next: 0,
            in_callback: false,
            error: None,
        };
        g.exit = g.label();
        g.fault = g.label();
        g
    }
}

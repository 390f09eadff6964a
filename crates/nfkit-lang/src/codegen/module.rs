//! The program (docs/language.md, "Chains"): every chain a function
//! with the NF calling convention, locals in stack slots, the exit and
//! fault paths.

use super::classifier::dispatcher;
use super::emit::{local_off, mov_imm, mov_reg, stx};
use super::{Frame, Gen, GenError, Generated, ObjMap};
use crate::ir::{Chain, Program};
use nfkit_isa::{Insn, Reg, Size};
use nfkit_nf::Hook;
use std::collections::BTreeMap;

/// Generates every chain of `prog` for `hook`.
pub fn generate(prog: &Program, hook: Hook) -> Result<Generated, GenError> {
    let mut maps: Vec<ObjMap> = (0..prog.maps.len()).map(ObjMap::User).collect();
    let mut funcs = Vec::new();
    // bpf_loop callbacks come after the chains and the dispatcher.
    let mut callbacks = Vec::new();
    // With a classifier only the dispatched chains become functions (the
    // others exist inlined); a library keeps every chain.
    let dispatched = prog.dispatched();
    let emitted: Vec<usize> = if prog.classifier.is_some() {
        dispatched.clone()
    } else {
        (0..prog.chains.len()).collect()
    };
    let cb_base = emitted.len() + usize::from(prog.classifier.is_some());
    for &i in &emitted {
        let mut g = Gen::new(prog, hook, &mut maps, &prog.chains[i].name);
        g.cb_next = cb_base + callbacks.len();
        g.chain_function(i)?;
        let cbs = std::mem::take(&mut g.callbacks);
        funcs.push(g.finish()?);
        callbacks.extend(cbs);
    }
    if prog.classifier.is_some() {
        let order: Vec<usize> = (0..dispatched.len()).collect();
        funcs.push(dispatcher(&order));
    }
    funcs.extend(callbacks);
    Ok(Generated {
        funcs,
        maps,
        nf_slots: BTreeMap::new(),
    })
}

impl Gen<'_> {
    /// The function of chain `ci`: ctx kept in r9, parameters and
    /// locals in their slots, the body, then the exit and fault paths.
    pub(super) fn chain_function(&mut self, ci: usize) -> Result<(), GenError> {
        let c: &Chain = &self.prog.chains[ci];
        self.lines.push((0, c.line, 0));
        // Dynamic mode: a tail-called program gets no arguments, so
        // parameters start at 0.
        let dynamic = self.dynamic.is_some();
        if dynamic {
            self.dyn_entry();
        }
        self.emit(mov_reg(Reg::R9, Reg::R1));
        let n = c.locals.len() as i32;
        let base = 0;
        self.alloc(8 * n);
        let nparams = if dynamic { 0 } else { c.params.len() };
        for (i, r) in [Reg::R2, Reg::R3, Reg::R4, Reg::R5]
            .into_iter()
            .enumerate()
            .take(nparams)
        {
            // Parameters arrive as u64: bring them into their type.
            let ty = c.params[i].1;
            self.emit(mov_reg(Reg::R0, r));
            self.normalize(ty);
            self.emit(stx(Size::DW, Reg::FP, local_off(base, i), Reg::R0));
        }
        for i in nparams..c.locals.len() {
            self.emit(Insn::St {
                size: Size::DW,
                dst: Reg::FP,
                off: local_off(base, i),
                imm: 0,
            });
        }
        self.frames.push(Frame {
            base,
            reg: Reg::FP,
            ret: None,
            chain: ci,
            loops: Vec::new(),
        });
        let body = &self.prog.chains[ci].body;
        self.block(body);
        // Falling off the end returns 0.
        self.emit(mov_imm(Reg::R0, 0));
        self.bind(self.exit);
        if dynamic {
            self.dyn_end();
        } else {
            self.emit(Insn::Exit);
            self.bind(self.fault);
            self.emit(mov_imm(Reg::R0, -1));
            self.emit(Insn::Exit);
        }
        self.frames.pop();
        Ok(())
    }
}

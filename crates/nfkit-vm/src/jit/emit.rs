//! The code generator: one pass over the pre-decoded ops, x86-64 through
//! `dynasmrt` (encodings, labels), assembled into plain memory for the
//! address it will run at (`super::pages` makes it executable).
//!
//! # Conventions
//!
//! * eBPF registers live in x86 registers for the whole run: r0 `rax`,
//!   r1 `rdi`, r2 `rsi`, r3 `rdx`, r4 `rcx`, r5 `r8`, r6 `rbx`, r7 `r13`,
//!   r8 `r14`, r9 `r15`, r10 `rbp` (the kernel JIT's choice: r1–r5 are
//!   the System V argument registers, r6–r10 callee-saved). `r12` holds
//!   the run's [`JitCtx`](super::state::JitCtx), `r9` the instruction
//!   count, `r10`/`r11` are scratch.
//! * Every eBPF function is a native function: `exit` is `ret`; a call
//!   pushes r6–r10 and the `may_goto` budget, opens the callee's stack
//!   frame window and calls; a tail call jumps.
//! * Memory: an address is `region << 32 | offset`; each access looks the
//!   region up in the window table and checks `lo <= off` and
//!   `off + size <= hi` (or the write limit) inline, then touches
//!   `base + off`. Accesses relative to r10 within the current frame need
//!   no check (r10 is read-only and the frame is live). Anything else goes
//!   to a cold stub calling the glue (context fields, faults).
//! * `r9` holds the instructions the run may still execute: a basic
//!   block subtracts its length at its start (one fused `sub`/`jb`); when
//!   that would go below zero, the interpreter takes over at the block's
//!   first op and stops at exactly the instruction it would have stopped
//!   at, so every run ends and budget faults are the interpreter's.

use super::glue;
use super::state::{self as st};
use crate::config::FRAME_SIZE;
use crate::mem::{self, WIN_BASE, WIN_HI, WIN_LO, WIN_SHIFT, WIN_WHI};
use crate::prog::{Code, Op, Program};
use dynasmrt::x64::X64Relocation;
use dynasmrt::{dynasm, AssemblyOffset, DynamicLabel, DynasmApi, DynasmLabelApi, VecAssembler};

/// x86 register of each eBPF register.
const MAP: [u8; 11] = [0, 7, 6, 2, 1, 8, 3, 13, 14, 15, 5];
const RCX: u8 = 1;
/// Scratch register.
const T0: u8 = 10;

fn x(r: u8) -> u8 {
    MAP[(r as usize).min(10)]
}

/// What a call sequence calls.
enum Callee {
    Label(DynamicLabel),
    /// The address at `[rsp + off]` as the sequence starts.
    Stack(i32),
}

/// Out-of-line code emitted after the functions.
enum Stub {
    /// A memory access the inline check refused: calls `glue::mem_slow`.
    Mem {
        entry: DynamicLabel,
        resume: DynamicLabel,
        op: Op,
        pc: usize,
    },
    /// A native fault (call depth) at `pc`.
    Fault {
        entry: DynamicLabel,
        code: u64,
        pc: usize,
    },
    /// The budget runs out in the block starting at `pc`, `len` long.
    Budget {
        entry: DynamicLabel,
        pc: usize,
        len: u32,
    },
}

/// Result of code generation.
pub(super) struct Generated {
    /// The machine code, for the address `Emitter::new` was given.
    pub code: Vec<u8>,
    /// Offset of the entry stub.
    pub enter: AssemblyOffset,
    /// Native offset of each function's first op, by op.
    pub funcs: Vec<(usize, AssemblyOffset)>,
}

pub(super) struct Emitter<'p> {
    a: VecAssembler<X64Relocation>,
    prog: &'p Program,
    /// By map index: arrays whose values have static regions (lookups
    /// of a map known at the call are computed inline).
    statics: &'p [Option<crate::vm::StaticValues>],
    labels: Vec<DynamicLabel>,
    stubs: Vec<Stub>,
    fault_exit: DynamicLabel,
    /// Op index one past the end of each op's basic block, for leaders.
    block_len: Vec<u32>,
    may_goto_budget: u32,
    /// The kernel profile's helpers: the common ones are called directly
    /// (the conformance profile has other helpers under those numbers).
    kernel_helpers: bool,
}

/// Why the JIT cannot compile a program.
pub(super) type Refusal = String;

impl<'p> Emitter<'p> {
    /// An emitter for code that will run at address `base` (relocations
    /// are resolved for it), `block_len` [`blocks`] of `prog`, `capacity`
    /// the bytes to reserve (the size of the last program is a good
    /// guess).
    pub(super) fn new(
        prog: &'p Program,
        may_goto_budget: u32,
        kernel_helpers: bool,
        statics: &'p [Option<crate::vm::StaticValues>],
        base: usize,
        block_len: Vec<u32>,
        capacity: usize,
    ) -> Result<Emitter<'p>, Refusal> {
        let n = prog.ops.len();
        // Every op has a label; stubs add a few more, and about as many
        // references as there are ops.
        let mut a = VecAssembler::new_with_capacity(base, capacity, 0, 4, 2 * n + 8, 4, 2 * n + 8);
        let labels = (0..n).map(|_| a.new_dynamic_label()).collect();
        let fault_exit = a.new_dynamic_label();
        Ok(Emitter {
            a,
            prog,
            statics,
            labels,
            stubs: Vec::with_capacity(n),
            fault_exit,
            block_len,
            may_goto_budget,
            kernel_helpers,
        })
    }

    /// Generates the entry stub, every function, then the stubs.
    pub(super) fn generate(mut self) -> Result<Generated, Refusal> {
        let enter = self.entry_stub();
        let mut funcs = Vec::new();
        let mut is_func = vec![false; self.prog.ops.len()];
        for f in &self.prog.funcs {
            if let Some(v) = is_func.get_mut(f.start_op) {
                *v = true;
            }
        }
        for (pc, &starts_func) in is_func.iter().enumerate() {
            if starts_func {
                funcs.push((pc, self.a.offset()));
            }
            let l = self.labels[pc];
            dynasm!(self.a ; .arch x64 ; =>l);
            let len = self.block_len[pc];
            if len > 0 {
                let entry = self.a.new_dynamic_label();
                self.stubs.push(Stub::Budget { entry, pc, len });
                let n = len as i32;
                dynasm!(self.a ; .arch x64 ; sub r9, n ; jb =>entry);
            }
            self.op(pc)?;
        }
        self.emit_stubs();
        self.loop_runner();
        let code = self
            .a
            .finalize()
            .map_err(|e| format!("cannot assemble the code: {e}"))?;
        Ok(Generated { code, enter, funcs })
    }

    /// `extern "sysv64" fn(jc: *mut JitCtx, target: usize) -> u64`: saves
    /// the host's callee-saved registers, loads the eBPF registers from
    /// `jc.regs`, calls `target`; on return (or on a fault, which unwinds
    /// to here) stores the count back and returns r0.
    fn entry_stub(&mut self) -> AssemblyOffset {
        let start = self.a.offset();
        let fe = self.fault_exit;
        dynasm!(self.a
            ; .arch x64
            ; push rbx
            ; push rbp
            ; push r12
            ; push r13
            ; push r14
            ; push r15
            ; sub rsp, 8
            ; mov r12, rdi
            ; mov [r12 + st::SAVED_RSP], rsp
            ; mov r11, rsi
            ; mov r9, [r12 + st::COUNT]
            ; mov r10, [r12 + st::REGS]
            ; mov rax, [r10 + st::reg(0)]
            ; mov rdi, [r10 + st::reg(1)]
            ; mov rsi, [r10 + st::reg(2)]
            ; mov rdx, [r10 + st::reg(3)]
            ; mov rcx, [r10 + st::reg(4)]
            ; mov r8, [r10 + st::reg(5)]
            ; mov rbx, [r10 + st::reg(6)]
            ; mov r13, [r10 + st::reg(7)]
            ; mov r14, [r10 + st::reg(8)]
            ; mov r15, [r10 + st::reg(9)]
            ; mov rbp, [r10 + st::reg(10)]
            ; call r11
            ; mov [r12 + st::COUNT], r9
            ; ->restore:
            ; add rsp, 8
            ; pop r15
            ; pop r14
            ; pop r13
            ; pop r12
            ; pop rbp
            ; pop rbx
            ; ret
            ; =>fe
            ; mov rsp, [r12 + st::SAVED_RSP]
            ; jmp ->restore
        );
        start
    }

    fn label(&self, pc: usize) -> Result<DynamicLabel, Refusal> {
        self.labels
            .get(pc)
            .copied()
            .ok_or_else(|| format!("jump to op {pc}, outside the program"))
    }

    /// A fault stub for `pc`; its entry label.
    fn fault_stub(&mut self, code: u64, pc: usize) -> DynamicLabel {
        let entry = self.a.new_dynamic_label();
        self.stubs.push(Stub::Fault { entry, code, pc });
        entry
    }

    fn op(&mut self, pc: usize) -> Result<(), Refusal> {
        use Code::*;
        let op = self.prog.ops[pc];
        let (d, s) = (x(op.dst & 15), x(op.src & 15));
        let imm = op.imm;
        let i32k = imm as i32;
        let fits = imm as i64 == i32k as i64;
        macro_rules! alu64k {
            ($ins:ident) => {
                if fits {
                    dynasm!(self.a ; .arch x64 ; $ins Rq(d), i32k);
                } else {
                    dynasm!(self.a ; .arch x64 ; mov r11, QWORD imm as i64 ; $ins Rq(d), r11);
                }
            };
        }
        match op.code {
            Add64K => alu64k!(add),
            Add64X => dynasm!(self.a ; .arch x64 ; add Rq(d), Rq(s)),
            Sub64K => alu64k!(sub),
            Sub64X => dynasm!(self.a ; .arch x64 ; sub Rq(d), Rq(s)),
            Mul64K => {
                if fits {
                    dynasm!(self.a ; .arch x64 ; imul Rq(d), Rq(d), i32k);
                } else {
                    dynasm!(self.a ; .arch x64 ; mov r11, QWORD imm as i64 ; imul Rq(d), r11);
                }
            }
            Mul64X => dynasm!(self.a ; .arch x64 ; imul Rq(d), Rq(s)),
            Or64K => alu64k!(or),
            Or64X => dynasm!(self.a ; .arch x64 ; or Rq(d), Rq(s)),
            And64K => alu64k!(and),
            And64X => dynasm!(self.a ; .arch x64 ; and Rq(d), Rq(s)),
            Xor64K => alu64k!(xor),
            Xor64X => dynasm!(self.a ; .arch x64 ; xor Rq(d), Rq(s)),
            Mov64K => {
                if fits {
                    dynasm!(self.a ; .arch x64 ; mov Rq(d), i32k);
                } else {
                    dynasm!(self.a ; .arch x64 ; mov Rq(d), QWORD imm as i64);
                }
            }
            Mov64X => dynasm!(self.a ; .arch x64 ; mov Rq(d), Rq(s)),
            Lsh64K => dynasm!(self.a ; .arch x64 ; shl Rq(d), (imm & 63) as i8),
            Rsh64K => dynasm!(self.a ; .arch x64 ; shr Rq(d), (imm & 63) as i8),
            Arsh64K => dynasm!(self.a ; .arch x64 ; sar Rq(d), (imm & 63) as i8),
            Lsh64X | Rsh64X | Arsh64X | Lsh32X | Rsh32X | Arsh32X => self.shift_x(op.code, d, s),
            Neg64 => dynasm!(self.a ; .arch x64 ; neg Rq(d)),
            MovSx64B => dynasm!(self.a ; .arch x64 ; movsx Rq(d), Rb(s)),
            MovSx64H => dynasm!(self.a ; .arch x64 ; movsx Rq(d), Rw(s)),
            MovSx64W => dynasm!(self.a ; .arch x64 ; movsxd Rq(d), Rd(s)),
            Add32K => dynasm!(self.a ; .arch x64 ; add Rd(d), i32k),
            Add32X => dynasm!(self.a ; .arch x64 ; add Rd(d), Rd(s)),
            Sub32K => dynasm!(self.a ; .arch x64 ; sub Rd(d), i32k),
            Sub32X => dynasm!(self.a ; .arch x64 ; sub Rd(d), Rd(s)),
            Mul32K => dynasm!(self.a ; .arch x64 ; imul Rd(d), Rd(d), i32k),
            Mul32X => dynasm!(self.a ; .arch x64 ; imul Rd(d), Rd(s)),
            Or32K => dynasm!(self.a ; .arch x64 ; or Rd(d), i32k),
            Or32X => dynasm!(self.a ; .arch x64 ; or Rd(d), Rd(s)),
            And32K => dynasm!(self.a ; .arch x64 ; and Rd(d), i32k),
            And32X => dynasm!(self.a ; .arch x64 ; and Rd(d), Rd(s)),
            Xor32K => dynasm!(self.a ; .arch x64 ; xor Rd(d), i32k),
            Xor32X => dynasm!(self.a ; .arch x64 ; xor Rd(d), Rd(s)),
            Mov32K => dynasm!(self.a ; .arch x64 ; mov Rd(d), i32k),
            Mov32X => dynasm!(self.a ; .arch x64 ; mov Rd(d), Rd(s)),
            Lsh32K => dynasm!(self.a ; .arch x64 ; shl Rd(d), (imm & 31) as i8),
            Rsh32K => dynasm!(self.a ; .arch x64 ; shr Rd(d), (imm & 31) as i8),
            Arsh32K => dynasm!(self.a ; .arch x64 ; sar Rd(d), (imm & 31) as i8),
            Neg32 => dynasm!(self.a ; .arch x64 ; neg Rd(d)),
            MovSx32B => dynasm!(self.a ; .arch x64 ; movsx Rd(d), Rb(s)),
            MovSx32H => dynasm!(self.a ; .arch x64 ; movsx Rd(d), Rw(s)),
            Trunc16 => dynasm!(self.a ; .arch x64 ; movzx Rd(d), Rw(d)),
            Trunc32 => dynasm!(self.a ; .arch x64 ; mov Rd(d), Rd(d)),
            Nop => {}
            Swap16 => dynasm!(self.a ; .arch x64 ; ror Rw(d), 8 ; movzx Rd(d), Rw(d)),
            Swap32 => dynasm!(self.a ; .arch x64 ; bswap Rd(d)),
            Swap64 => dynasm!(self.a ; .arch x64 ; bswap Rq(d)),
            Div64K | Div64X | SDiv64K | SDiv64X | Mod64K | Mod64X | SMod64K | SMod64X | Div32K
            | Div32X | SDiv32K | SDiv32X | Mod32K | Mod32X | SMod32K | SMod32X => {
                self.div(op, d, s)
            }
            LdxB | LdxH | LdxW | LdxDW | LdxSB | LdxSH | LdxSW => self.load(op, pc),
            StB | StH | StW | StDW | StxB | StxH | StxW | StxDW => self.store(op, pc),
            Atomic => self.atomic(op, pc),
            Lddw => dynasm!(self.a ; .arch x64 ; mov Rq(d), QWORD imm as i64),
            LdAbs | LdInd => self.ld_abs(op, pc),
            // A jump to the next op (chain code has many) is the fall
            // through: no code, and it ends no block (`blocks`).
            Ja if op.off as usize == pc + 1 => {}
            Ja => {
                let l = self.label(op.off as usize)?;
                dynasm!(self.a ; .arch x64 ; jmp =>l);
            }
            MayGoto => {
                let l = self.label(op.off as usize)?;
                dynasm!(self.a
                    ; .arch x64
                    ; cmp QWORD [r12 + st::MAY_GOTO], 0
                    ; je =>l
                    ; sub QWORD [r12 + st::MAY_GOTO], 1
                );
            }
            Call => self.helper_call(pc, op.imm, false),
            Callx => self.helper_call(pc, op.dst as u64 & 15, true),
            CallLocal => self.call_local(pc, op.off as usize)?,
            Exit => {
                let p = pc as i32;
                dynasm!(self.a ; .arch x64 ; mov QWORD [r12 + st::EXIT_PC], p ; ret);
            }
            _ => self.jump(op, pc, d, s)?,
        }
        Ok(())
    }

    /// Conditional jumps.
    fn jump(&mut self, op: Op, pc: usize, d: u8, s: u8) -> Result<(), Refusal> {
        use Code::*;
        let l = self.label(op.off as usize)?;
        let k = op.imm as i32;
        let k64_fits = op.imm as i64 == k as i64;
        // Compare (or test) first.
        let (wide, reg) = match op.code {
            JeqK | JgtK | JgeK | JsetK | JneK | JsgtK | JsgeK | JltK | JleK | JsltK | JsleK => {
                (true, false)
            }
            JeqX | JgtX | JgeX | JsetX | JneX | JsgtX | JsgeX | JltX | JleX | JsltX | JsleX => {
                (true, true)
            }
            Jeq32K | Jgt32K | Jge32K | Jset32K | Jne32K | Jsgt32K | Jsge32K | Jlt32K | Jle32K
            | Jslt32K | Jsle32K => (false, false),
            Jeq32X | Jgt32X | Jge32X | Jset32X | Jne32X | Jsgt32X | Jsge32X | Jlt32X | Jle32X
            | Jslt32X | Jsle32X => (false, true),
            other => return Err(format!("op {pc}: {other:?} is not a jump")),
        };
        let set = matches!(op.code, JsetK | JsetX | Jset32K | Jset32X);
        match (wide, reg, set) {
            (true, true, false) => dynasm!(self.a ; .arch x64 ; cmp Rq(d), Rq(s)),
            (true, true, true) => dynasm!(self.a ; .arch x64 ; test Rq(d), Rq(s)),
            (true, false, false) if k64_fits => dynasm!(self.a ; .arch x64 ; cmp Rq(d), k),
            (true, false, true) if k64_fits => dynasm!(self.a ; .arch x64 ; test Rq(d), k),
            (true, false, false) => {
                dynasm!(self.a ; .arch x64 ; mov r11, QWORD op.imm as i64 ; cmp Rq(d), r11)
            }
            (true, false, true) => {
                dynasm!(self.a ; .arch x64 ; mov r11, QWORD op.imm as i64 ; test Rq(d), r11)
            }
            (false, true, false) => dynasm!(self.a ; .arch x64 ; cmp Rd(d), Rd(s)),
            (false, true, true) => dynasm!(self.a ; .arch x64 ; test Rd(d), Rd(s)),
            (false, false, false) => dynasm!(self.a ; .arch x64 ; cmp Rd(d), k),
            (false, false, true) => dynasm!(self.a ; .arch x64 ; test Rd(d), k),
        }
        match op.code {
            JeqK | JeqX | Jeq32K | Jeq32X => dynasm!(self.a ; .arch x64 ; je =>l),
            JneK | JneX | Jne32K | Jne32X | JsetK | JsetX | Jset32K | Jset32X => {
                dynasm!(self.a ; .arch x64 ; jne =>l)
            }
            JgtK | JgtX | Jgt32K | Jgt32X => dynasm!(self.a ; .arch x64 ; ja =>l),
            JgeK | JgeX | Jge32K | Jge32X => dynasm!(self.a ; .arch x64 ; jae =>l),
            JltK | JltX | Jlt32K | Jlt32X => dynasm!(self.a ; .arch x64 ; jb =>l),
            JleK | JleX | Jle32K | Jle32X => dynasm!(self.a ; .arch x64 ; jbe =>l),
            JsgtK | JsgtX | Jsgt32K | Jsgt32X => dynasm!(self.a ; .arch x64 ; jg =>l),
            JsgeK | JsgeX | Jsge32K | Jsge32X => dynasm!(self.a ; .arch x64 ; jge =>l),
            JsltK | JsltX | Jslt32K | Jslt32X => dynasm!(self.a ; .arch x64 ; jl =>l),
            _ => dynasm!(self.a ; .arch x64 ; jle =>l),
        }
        Ok(())
    }

    /// Shifts by a register: the count goes through `cl` (r4's register),
    /// which is saved in r10 around the shift. x86 masks the count to the
    /// width as eBPF does.
    fn shift_x(&mut self, code: Code, d: u8, s: u8) {
        use Code::*;
        // r11 = count; r10 = saved rcx; the shifted value is in r11's
        // place when the destination is rcx itself.
        dynasm!(self.a ; .arch x64 ; mov r11, Rq(s) ; mov r10, rcx ; mov rcx, r11);
        let target = if d == RCX { T0 } else { d };
        match code {
            Lsh64X => dynasm!(self.a ; .arch x64 ; shl Rq(target), cl),
            Rsh64X => dynasm!(self.a ; .arch x64 ; shr Rq(target), cl),
            Arsh64X => dynasm!(self.a ; .arch x64 ; sar Rq(target), cl),
            Lsh32X => dynasm!(self.a ; .arch x64 ; shl Rd(target), cl),
            Rsh32X => dynasm!(self.a ; .arch x64 ; shr Rd(target), cl),
            _ => dynasm!(self.a ; .arch x64 ; sar Rd(target), cl),
        }
        // Either r4 comes back, or (shifting r4 itself) its result.
        dynasm!(self.a ; .arch x64 ; mov rcx, r10);
    }

    /// Division and remainder with eBPF's rules: x/0 = 0, x%0 = x,
    /// signed MIN/-1 = MIN and MIN%-1 = 0 (x86 would trap on both).
    /// Operands go through the scratch slots so that rax/rdx (r0/r3) can
    /// be borrowed whatever registers are involved.
    fn div(&mut self, op: Op, d: u8, s: u8) {
        use Code::*;
        let c = op.code;
        let wide = matches!(
            c,
            Div64K | Div64X | SDiv64K | SDiv64X | Mod64K | Mod64X | SMod64K | SMod64X
        );
        let reg = matches!(
            c,
            Div64X | SDiv64X | Mod64X | SMod64X | Div32X | SDiv32X | Mod32X | SMod32X
        );
        let signed = matches!(
            c,
            SDiv64K | SDiv64X | SMod64K | SMod64X | SDiv32K | SDiv32X | SMod32K | SMod32X
        );
        let rem = matches!(
            c,
            Mod64K | Mod64X | SMod64K | SMod64X | Mod32K | Mod32X | SMod32K | SMod32X
        );
        let (a0, a1) = (st::SCRATCH, st::SCRATCH + 8);
        // scratch[0] = dividend, scratch[1] = divisor, each extended to
        // 64 bits as the width reads it.
        if wide {
            dynasm!(self.a ; .arch x64 ; mov [r12 + a0], Rq(d));
        } else if signed {
            dynasm!(self.a ; .arch x64 ; movsxd r11, Rd(d) ; mov [r12 + a0], r11);
        } else {
            dynasm!(self.a ; .arch x64 ; mov r11d, Rd(d) ; mov [r12 + a0], r11);
        }
        if reg {
            if wide {
                dynasm!(self.a ; .arch x64 ; mov [r12 + a1], Rq(s));
            } else if signed {
                dynasm!(self.a ; .arch x64 ; movsxd r11, Rd(s) ; mov [r12 + a1], r11);
            } else {
                dynasm!(self.a ; .arch x64 ; mov r11d, Rd(s) ; mov [r12 + a1], r11);
            }
        } else {
            let k = if wide {
                op.imm as i64
            } else if signed {
                op.imm as u32 as i32 as i64
            } else {
                op.imm as u32 as i64
            };
            dynasm!(self.a ; .arch x64 ; mov r11, QWORD k ; mov [r12 + a1], r11);
        }
        let (zero, minus1, done) = (
            self.a.new_dynamic_label(),
            self.a.new_dynamic_label(),
            self.a.new_dynamic_label(),
        );
        dynasm!(self.a ; .arch x64 ; cmp QWORD [r12 + a1], 0 ; je =>zero);
        if signed {
            dynasm!(self.a ; .arch x64 ; cmp QWORD [r12 + a1], -1 ; je =>minus1);
        }
        // r10/r11 keep r0/r3 while rax/rdx divide.
        dynasm!(self.a ; .arch x64 ; mov r10, rax ; mov r11, rdx ; mov rax, [r12 + a0]);
        match (wide, signed) {
            (true, false) => dynasm!(self.a ; .arch x64 ; xor edx, edx ; div QWORD [r12 + a1]),
            (true, true) => dynasm!(self.a ; .arch x64 ; cqo ; idiv QWORD [r12 + a1]),
            (false, false) => dynasm!(self.a ; .arch x64 ; xor edx, edx ; div DWORD [r12 + a1]),
            (false, true) => dynasm!(self.a ; .arch x64 ; cdq ; idiv DWORD [r12 + a1]),
        }
        if rem {
            dynasm!(self.a ; .arch x64 ; mov [r12 + a0], rdx);
        } else {
            dynasm!(self.a ; .arch x64 ; mov [r12 + a0], rax);
        }
        dynasm!(self.a ; .arch x64 ; mov rax, r10 ; mov rdx, r11 ; jmp =>done);
        // x / 0 = 0, x % 0 = x.
        dynasm!(self.a ; .arch x64 ; =>zero);
        if !rem {
            dynasm!(self.a ; .arch x64 ; mov QWORD [r12 + a0], 0);
        }
        dynasm!(self.a ; .arch x64 ; jmp =>done);
        if signed {
            // x / -1 = -x (wrapping), x % -1 = 0.
            dynasm!(self.a ; .arch x64 ; =>minus1);
            if rem {
                dynasm!(self.a ; .arch x64 ; mov QWORD [r12 + a0], 0);
            } else {
                dynasm!(self.a ; .arch x64 ; neg QWORD [r12 + a0]);
            }
        }
        dynasm!(self.a ; .arch x64 ; =>done);
        if wide {
            dynasm!(self.a ; .arch x64 ; mov Rq(d), [r12 + a0]);
        } else {
            dynasm!(self.a ; .arch x64 ; mov Rd(d), [r12 + a0]);
        }
    }

    /// True if `base + off .. + size` is inside the current frame: r10
    /// with an offset in `[-512, -size]`.
    fn frame_access(base: u8, off: i32, size: i32) -> bool {
        base == 10 && off >= -(FRAME_SIZE as i32) && off + size <= 0
    }

    /// r11 = the current frame's host address minus its region's bits, so
    /// that `[r11 + rbp + off]` is `r10 + off` (the current frame: no
    /// check).
    fn frame_addr(&mut self) {
        dynasm!(self.a ; .arch x64 ; mov r11, [r12 + st::FRAME_BASE]);
    }

    /// The inline window check of an access of `size` bytes at
    /// `base + off`: jumps to `slow` when refused, else leaves the host
    /// address of the first byte in r11.
    fn window_check(&mut self, base: u8, off: i32, size: i32, write: bool, slow: DynamicLabel) {
        let limit = if write { WIN_WHI } else { WIN_HI };
        let shift = WIN_SHIFT as i8;
        dynasm!(self.a
            ; .arch x64
            ; lea r11, [Rq(base) + off]
            ; mov r10, r11
            ; shr r10, 32
            ; cmp r10, [r12 + st::NWIN]
            ; jae =>slow
            ; shl r10, shift
            ; add r10, [r12 + st::WIN]
            ; mov r11d, r11d
            ; cmp r11, [r10 + WIN_LO]
            ; jb =>slow
            ; add r11, size
            ; cmp r11, [r10 + limit]
            ; ja =>slow
            ; add r11, [r10 + WIN_BASE]
            ; sub r11, size
        );
    }

    fn size_of(code: Code) -> i32 {
        use Code::*;
        match code {
            LdxB | LdxSB | StB | StxB => 1,
            LdxH | LdxSH | StH | StxH => 2,
            LdxW | LdxSW | StW | StxW => 4,
            _ => 8,
        }
    }

    /// True if the checker proved op `pc`'s packet access in bounds.
    fn proven(&self, pc: usize) -> bool {
        self.prog.packet_proven.get(pc).copied().unwrap_or(false)
    }

    /// True if the checker proved op `pc` a load of an `xdp_md` field
    /// through the entry's own context.
    fn ctx_field(&self, pc: usize) -> bool {
        self.prog.ctx_field.get(pc).copied().unwrap_or(false)
    }

    /// r11 = the packet buffer's host address minus the packet region's
    /// bits, so that `[r11 + base + off]` is the proven access's first
    /// byte: the checker showed `base + off` is the VM address of a byte
    /// inside the packet on every run (region bits included), so the sum
    /// cannot leave the buffer (no check).
    fn packet_addr(&mut self) {
        dynasm!(self.a ; .arch x64 ; mov r11, [r12 + st::PACKET_BASE]);
    }

    fn load(&mut self, op: Op, pc: usize) {
        let size = Self::size_of(op.code);
        let (d, base) = (x(op.dst & 15), op.src & 15);
        let resume = self.a.new_dynamic_label();
        if Self::frame_access(base, op.off, size) {
            self.frame_addr();
            self.load_from_r11(op.code, d, x(10), op.off);
            return;
        }
        if self.proven(pc) {
            self.packet_addr();
            self.load_from_r11(op.code, d, x(base), op.off);
            return;
        }
        let entry = self.a.new_dynamic_label();
        if self.ctx_field(pc) && op.code == Code::LdxW {
            // An `xdp_md` field through the entry's own context: from the
            // context table while it is valid, else the usual stub.
            let at = st::CTX_VALS + 2 * op.off;
            dynasm!(self.a
                ; .arch x64
                ; cmp QWORD [r12 + st::CTX_OK], 0
                ; je =>entry
                ; mov Rq(d), [r12 + at]
                ; =>resume
            );
            self.stubs.push(Stub::Mem {
                entry,
                resume,
                op,
                pc,
            });
            return;
        }
        self.window_check(x(base), op.off, size, false, entry);
        self.load_at(op.code, d);
        dynasm!(self.a ; .arch x64 ; =>resume);
        self.stubs.push(Stub::Mem {
            entry,
            resume,
            op,
            pc,
        });
    }

    /// `d = [r11 + b + disp]` of the op's size and signedness.
    fn load_from_r11(&mut self, code: Code, d: u8, b: u8, disp: i32) {
        use Code::*;
        match code {
            LdxB => dynasm!(self.a ; .arch x64 ; movzx Rd(d), BYTE [r11 + Rq(b) + disp]),
            LdxH => dynasm!(self.a ; .arch x64 ; movzx Rd(d), WORD [r11 + Rq(b) + disp]),
            LdxW => dynasm!(self.a ; .arch x64 ; mov Rd(d), DWORD [r11 + Rq(b) + disp]),
            LdxSB => dynasm!(self.a ; .arch x64 ; movsx Rq(d), BYTE [r11 + Rq(b) + disp]),
            LdxSH => dynasm!(self.a ; .arch x64 ; movsx Rq(d), WORD [r11 + Rq(b) + disp]),
            LdxSW => dynasm!(self.a ; .arch x64 ; movsxd Rq(d), DWORD [r11 + Rq(b) + disp]),
            _ => dynasm!(self.a ; .arch x64 ; mov Rq(d), QWORD [r11 + Rq(b) + disp]),
        }
    }

    /// `d = [r11]` of the op's size and signedness (after a window check).
    fn load_at(&mut self, code: Code, d: u8) {
        use Code::*;
        match code {
            LdxB => dynasm!(self.a ; .arch x64 ; movzx Rd(d), BYTE [r11]),
            LdxH => dynasm!(self.a ; .arch x64 ; movzx Rd(d), WORD [r11]),
            LdxW => dynasm!(self.a ; .arch x64 ; mov Rd(d), DWORD [r11]),
            LdxSB => dynasm!(self.a ; .arch x64 ; movsx Rq(d), BYTE [r11]),
            LdxSH => dynasm!(self.a ; .arch x64 ; movsx Rq(d), WORD [r11]),
            LdxSW => dynasm!(self.a ; .arch x64 ; movsxd Rq(d), DWORD [r11]),
            _ => dynasm!(self.a ; .arch x64 ; mov Rq(d), QWORD [r11]),
        }
    }

    fn store(&mut self, op: Op, pc: usize) {
        use Code::*;
        let size = Self::size_of(op.code);
        let base = op.dst & 15;
        let s = x(op.src & 15);
        let k = op.imm as i32;
        let resume = self.a.new_dynamic_label();
        let direct = if Self::frame_access(base, op.off, size) {
            self.frame_addr();
            Some(x(10))
        } else if self.proven(pc) {
            self.packet_addr();
            Some(x(base))
        } else {
            let entry = self.a.new_dynamic_label();
            self.window_check(x(base), op.off, size, true, entry);
            self.stubs.push(Stub::Mem {
                entry,
                resume,
                op,
                pc,
            });
            None
        };
        match direct {
            Some(b) => {
                let disp = op.off;
                match op.code {
                    StB => dynasm!(self.a ; .arch x64 ; mov BYTE [r11 + Rq(b) + disp], k as i8),
                    StH => dynasm!(self.a ; .arch x64 ; mov WORD [r11 + Rq(b) + disp], k as i16),
                    StW => dynasm!(self.a ; .arch x64 ; mov DWORD [r11 + Rq(b) + disp], k),
                    StDW => dynasm!(self.a ; .arch x64 ; mov QWORD [r11 + Rq(b) + disp], k),
                    StxB => dynasm!(self.a ; .arch x64 ; mov BYTE [r11 + Rq(b) + disp], Rb(s)),
                    StxH => dynasm!(self.a ; .arch x64 ; mov WORD [r11 + Rq(b) + disp], Rw(s)),
                    StxW => dynasm!(self.a ; .arch x64 ; mov DWORD [r11 + Rq(b) + disp], Rd(s)),
                    _ => dynasm!(self.a ; .arch x64 ; mov QWORD [r11 + Rq(b) + disp], Rq(s)),
                }
            }
            None => match op.code {
                StB => dynasm!(self.a ; .arch x64 ; mov BYTE [r11], k as i8),
                StH => dynasm!(self.a ; .arch x64 ; mov WORD [r11], k as i16),
                StW => dynasm!(self.a ; .arch x64 ; mov DWORD [r11], k),
                StDW => dynasm!(self.a ; .arch x64 ; mov QWORD [r11], k),
                StxB => dynasm!(self.a ; .arch x64 ; mov BYTE [r11], Rb(s)),
                StxH => dynasm!(self.a ; .arch x64 ; mov WORD [r11], Rw(s)),
                StxW => dynasm!(self.a ; .arch x64 ; mov DWORD [r11], Rd(s)),
                _ => dynasm!(self.a ; .arch x64 ; mov QWORD [r11], Rq(s)),
            },
        }
        dynasm!(self.a ; .arch x64 ; =>resume);
    }

    /// Stores r0–r5 and the count in the context before a glue call.
    fn spill_volatile(&mut self) {
        dynasm!(self.a
            ; .arch x64
            ; mov r10, [r12 + st::REGS]
            ; mov [r10 + st::reg(0)], rax
            ; mov [r10 + st::reg(1)], rdi
            ; mov [r10 + st::reg(2)], rsi
            ; mov [r10 + st::reg(3)], rdx
            ; mov [r10 + st::reg(4)], rcx
            ; mov [r10 + st::reg(5)], r8
            ; mov [r12 + st::COUNT], r9
        );
    }

    /// Also r6–r10 (glue that reads any register).
    fn spill_all(&mut self) {
        self.spill_volatile();
        self.spill_callee_saved();
    }

    /// r6–r10 (after `spill_volatile`, which leaves the spill area's
    /// address in r10).
    fn spill_callee_saved(&mut self) {
        dynasm!(self.a
            ; .arch x64
            ; mov [r10 + st::reg(6)], rbx
            ; mov [r10 + st::reg(7)], r13
            ; mov [r10 + st::reg(8)], r14
            ; mov [r10 + st::reg(9)], r15
            ; mov [r10 + st::reg(10)], rbp
        );
    }

    /// Reloads r0–r5 and the count after a glue call, and leaves for the
    /// fault exit if the glue stopped the run.
    fn reload_volatile(&mut self) {
        let fe = self.fault_exit;
        dynasm!(self.a
            ; .arch x64
            ; cmp QWORD [r12 + st::NATIVE_FAULT], 0
            ; jne =>fe
        );
        self.reload_args();
        dynasm!(self.a ; .arch x64 ; mov rax, [r10 + st::reg(0)]);
    }

    /// r1–r5 and the budget (not r0: a pure helper's comes back in rax),
    /// leaving the spill area's address in r10.
    fn reload_args(&mut self) {
        dynasm!(self.a
            ; .arch x64
            ; mov r10, [r12 + st::REGS]
            ; mov rdi, [r10 + st::reg(1)]
            ; mov rsi, [r10 + st::reg(2)]
            ; mov rdx, [r10 + st::reg(3)]
            ; mov rcx, [r10 + st::reg(4)]
            ; mov r8, [r10 + st::reg(5)]
            ; mov r9, [r12 + st::COUNT]
        );
    }

    /// Also r6–r9 (r10 never changes).
    fn reload_all(&mut self) {
        self.reload_volatile();
        dynasm!(self.a
            ; .arch x64
            ; mov rbx, [r10 + st::reg(6)]
            ; mov r13, [r10 + st::reg(7)]
            ; mov r14, [r10 + st::reg(8)]
            ; mov r15, [r10 + st::reg(9)]
        );
    }

    /// Calls glue function `f` with `jc` and up to three more arguments
    /// already in rsi, rdx, rcx. The stack is 16-byte aligned at the call
    /// (function bodies run at `rsp % 16 == 8`).
    fn call_glue(&mut self, f: usize) {
        dynasm!(self.a
            ; .arch x64
            ; mov rdi, r12
            ; sub rsp, 8
            ; mov rax, QWORD f as i64
            ; call rax
            ; add rsp, 8
        );
    }

    /// Helper `id` at op `pc` through glue function `f(jc, id, pc)`
    /// that returns to the next op: spill, call, reload.
    fn helper_to(&mut self, f: usize, id: u64, pc: usize) {
        self.spill_volatile();
        let p = pc as i64;
        dynasm!(self.a ; .arch x64 ; mov rsi, QWORD id as i64 ; mov rdx, QWORD p);
        self.call_glue(f);
        self.reload_volatile();
    }

    fn helper_call(&mut self, pc: usize, id: u64, dynamic: bool) {
        use crate::helpers::table::id::{self as hid, LOOP, TAIL_CALL};
        let direct = !dynamic && self.kernel_helpers && id <= i32::MAX as u64;
        let pure = matches!(
            id as i32,
            hid::KTIME_GET_NS
                | hid::KTIME_GET_COARSE_NS
                | hid::KTIME_GET_BOOT_NS
                | hid::JIFFIES64
                | hid::GET_PRANDOM_U32
                | hid::GET_SMP_PROCESSOR_ID
                | hid::GET_NUMA_NODE_ID
        );
        if direct && pure {
            // No argument, no memory, no fault: r0 comes back in rax;
            // r1-r5 stay as they were (as on the interpreter).
            self.spill_volatile();
            dynasm!(self.a ; .arch x64 ; mov rsi, QWORD id as i64);
            self.call_glue(glue::helper_pure as *const () as usize);
            self.reload_args();
            return;
        }
        let map = matches!(
            id as i32,
            hid::MAP_LOOKUP_ELEM
                | hid::MAP_LOOKUP_PERCPU_ELEM
                | hid::MAP_UPDATE_ELEM
                | hid::MAP_DELETE_ELEM
        );
        if direct && map {
            let inline = match (id as i32 == hid::MAP_LOOKUP_ELEM, self.map_at_call(pc)) {
                (true, Some(i)) => self.statics.get(i).copied().flatten(),
                _ => None,
            };
            match inline {
                Some(s) if s.key_size == 4 => self.array_lookup(s, id, pc),
                _ => self.helper_to(glue::helper_map as *const () as usize, id, pc),
            }
            return;
        }
        if !dynamic && id != TAIL_CALL as u64 && id != LOOP as u64 {
            // Returns to the next op: no tail-call or loop checks after.
            self.helper_to(glue::helper_plain as *const () as usize, id, pc);
            return;
        }
        self.spill_volatile();
        let (p, dy) = (pc as i64, dynamic as i32);
        dynasm!(self.a
            ; .arch x64
            ; mov rsi, QWORD id as i64
            ; mov rdx, QWORD p
            ; mov ecx, dy
        );
        if dynamic {
            // The helper id is in a register: the glue reads it from the
            // spill area, so spill the rest too.
            self.spill_callee_saved();
        }
        self.call_glue(glue::helper as *const () as usize);
        self.reload_volatile();
        // A tail call continues at another entry's code; a `bpf_loop`
        // runs its callbacks.
        let (cont, no_loop) = (self.a.new_dynamic_label(), self.a.new_dynamic_label());
        dynasm!(self.a
            ; .arch x64
            ; mov r11, [r12 + st::JUMP]
            ; test r11, r11
            ; jz =>cont
            ; jmp r11
            ; =>cont
            ; cmp QWORD [r12 + st::LOOP_N], 0
            ; je =>no_loop
            ; sub rsp, 8
            ; call ->loop_runner
            ; add rsp, 8
            ; =>no_loop
        );
    }

    /// The map index `r1` holds at the call at op `pc` on every path:
    /// the last write to `r1` before it in the same basic block is an
    /// `lddw` of a map handle (every op in between is one that writes
    /// only its own destination register, or memory through a plain
    /// store). `None` when that is not shown.
    fn map_at_call(&self, pc: usize) -> Option<usize> {
        use Code::*;
        if self.block_len.get(pc).copied().unwrap_or(1) > 0 {
            // The call starts a block: something jumps to it.
            return None;
        }
        let mut i = pc;
        while i > 0 {
            i -= 1;
            let op = self.prog.ops.get(i)?;
            let writes_dst_only = !matches!(
                op.code,
                Atomic | Call | Callx | CallLocal | Exit | LdAbs | LdInd | MayGoto | Ja
            ) && !is_branch(op.code);
            if !writes_dst_only {
                return None;
            }
            let store = matches!(
                op.code,
                StB | StH | StW | StDW | StxB | StxH | StxW | StxDW | Nop
            );
            if !store && op.dst & 15 == 1 {
                return (op.code == Lddw && op.imm >> 32 == u64::from(mem::MAP_HANDLES))
                    .then_some((op.imm & 0xffff_ffff) as usize);
            }
            if self.block_len.get(i).copied().unwrap_or(0) > 0 {
                // The block's first op: nothing before it counts.
                return None;
            }
        }
        None
    }

    /// `bpf_map_lookup_elem` on array `s` (its values have static
    /// regions) inline, as the interpreter's `Machine::static_lookup`
    /// computes it: the 4-byte key read through its window, NULL past
    /// `max_entries`, else value `k`'s region and offset (per-CPU: the
    /// run's CPU's slot, when the regions show it). A key the window
    /// refuses, or a run whose regions show another CPU, goes to the
    /// glue (the general lookup, which faults the same way). r1-r5 are
    /// left as they are, as after any helper call.
    fn array_lookup(&mut self, s: crate::vm::StaticValues, id: u64, pc: usize) {
        let (slow, null, done) = (
            self.a.new_dynamic_label(),
            self.a.new_dynamic_label(),
            self.a.new_dynamic_label(),
        );
        let per_value = i64::from(s.ncpus) * i64::from(s.stride);
        let (max, first, ncpus, stride) = (
            s.max as i32,
            s.first as i32,
            s.ncpus as i32,
            s.stride as i32,
        );
        self.window_check(x(2), 0, 4, false, slow);
        dynasm!(self.a
            ; .arch x64
            ; mov r11d, DWORD [r11]
            ; cmp r11, max
            ; jae =>null
            ; mov rax, QWORD per_value
            ; imul rax, r11
        );
        if s.ncpus > 1 {
            dynasm!(self.a
                ; .arch x64
                ; mov r10, [r12 + st::STATICS_CPU]
                ; cmp r10, ncpus
                ; jae =>slow
                ; imul r10, r10, stride
                ; add rax, r10
            );
        }
        dynasm!(self.a
            ; .arch x64
            ; add r11, first
            ; shl r11, 32
            ; or rax, r11
            ; jmp =>done
            ; =>null
            ; xor eax, eax
            ; jmp =>done
            ; =>slow
        );
        self.helper_to(glue::helper_map as *const () as usize, id, pc);
        dynasm!(self.a ; .arch x64 ; =>done);
    }

    fn atomic(&mut self, op: Op, pc: usize) {
        self.spill_all();
        let info = (pc as u64) << 24
            | (op.imm & 0xff) << 16
            | (op.aux as u64) << 8
            | ((op.dst & 15) as u64) << 4
            | (op.src & 15) as u64;
        dynasm!(self.a
            ; .arch x64
            ; mov rsi, QWORD info as i64
            ; mov rdx, QWORD op.off as i64
        );
        self.call_glue(glue::atomic as *const () as usize);
        self.reload_all();
    }

    fn ld_abs(&mut self, op: Op, pc: usize) {
        self.spill_volatile();
        let info = ((pc as u64) << 8 | (op.aux as u64) << 1) as i64;
        dynasm!(self.a ; .arch x64 ; mov rsi, QWORD info ; mov rdx, QWORD op.imm as i64);
        if op.code == Code::LdInd {
            // k = (i32) src + imm, as the interpreter computes it.
            let s = x(op.src & 15);
            dynasm!(self.a ; .arch x64 ; movsxd r11, Rd(s) ; add rdx, r11);
        }
        self.call_glue(glue::ld_abs as *const () as usize);
        self.reload_volatile();
    }

    /// A bpf-to-bpf call: depth check, save r6–r10 and the `may_goto`
    /// budget, open the callee's frame, call, close, restore.
    fn call_local(&mut self, pc: usize, target: usize) -> Result<(), Refusal> {
        let depth_fault = self.fault_stub(st::FAULT_DEPTH, pc);
        let l = self.label(target)?;
        self.call_seq(Callee::Label(l), depth_fault);
        Ok(())
    }

    /// The call sequence of bpf-to-bpf calls and `bpf_loop` callbacks.
    /// Runs at `rsp % 16 == 8` and pushes 56 bytes, so the callee runs
    /// at `rsp % 16 == 8` too.
    fn call_seq(&mut self, callee: Callee, depth_fault: DynamicLabel) {
        let shift = WIN_SHIFT as i8;
        let stack = mem::STACK as i32;
        let frame = FRAME_SIZE as i32;
        let budget = self.may_goto_budget as i32;
        dynasm!(self.a
            ; .arch x64
            ; mov r10, [r12 + st::DEPTH]
            ; add r10, 1
            ; cmp r10, [r12 + st::MAX_FRAMES]
            ; jae =>depth_fault
            ; mov [r12 + st::DEPTH], r10
            ; cmp r10, [r12 + st::DEEPEST]
            ; jbe >deeper
            ; mov [r12 + st::DEEPEST], r10
            ; deeper:
            ; push rbx
            ; push r13
            ; push r14
            ; push r15
            ; push rbp
            ; push QWORD [r12 + st::MAY_GOTO]
            ; sub rsp, 8
            ; mov QWORD [r12 + st::MAY_GOTO], budget
            // r11 = &win[STACK + depth]; open the window; r10 = callee fp
            ; add r10, stack
            ; mov r11, r10
            ; shl r11, shift
            ; add r11, [r12 + st::WIN]
            ; shl r10, 32
            ; or r10, [r11 + WIN_HI]
            ; mov rbp, r10
            ; mov r10, [r11 + WIN_HI]
            ; sub r10, frame
            ; mov [r11 + WIN_LO], r10
            ; mov r10, QWORD 1i64 << 32
            ; sub [r12 + st::FRAME_BASE], r10
        );
        match callee {
            Callee::Label(l) => dynasm!(self.a ; .arch x64 ; call =>l),
            Callee::Stack(off) => {
                let at = off + 56;
                dynasm!(self.a ; .arch x64 ; call QWORD [rsp + at])
            }
        }
        dynasm!(self.a
            ; .arch x64
            ; mov r10, QWORD 1i64 << 32
            ; add [r12 + st::FRAME_BASE], r10
            // close the callee's window: lo = hi
            ; mov r10, [r12 + st::DEPTH]
            ; add r10, stack
            ; shl r10, shift
            ; add r10, [r12 + st::WIN]
            ; mov r11, [r10 + WIN_HI]
            ; mov [r10 + WIN_LO], r11
            ; sub QWORD [r12 + st::DEPTH], 1
            ; add rsp, 8
            ; pop QWORD [r12 + st::MAY_GOTO]
            ; pop rbp
            ; pop r15
            ; pop r14
            ; pop r13
            ; pop rbx
        );
    }

    /// The routine that runs a `bpf_loop` the helper glue set up
    /// (`loop_*` in the context): calls the callback with (i, ctx) until
    /// it returns non-zero or `n` iterations ran; r0 = iterations run.
    fn loop_runner(&mut self) {
        let depth_fault = self.a.new_dynamic_label();
        let fe = self.fault_exit;
        dynasm!(self.a
            ; .arch x64
            ; ->loop_runner:
            ; mov r10, [r12 + st::LOOP_N]
            ; mov QWORD [r12 + st::LOOP_N], 0
            ; push r10
            ; push QWORD [r12 + st::LOOP_CB]
            ; push QWORD [r12 + st::LOOP_CTX]
            ; push 0
            // [rsp] i, [rsp+8] ctx, [rsp+16] callback, [rsp+24] n
            ; ->loop_iter:
            ; mov rdi, [rsp]
            ; mov rsi, [rsp + 8]
        );
        self.call_seq(Callee::Stack(16), depth_fault);
        dynasm!(self.a
            ; .arch x64
            ; add QWORD [rsp], 1
            ; test rax, rax
            ; jnz >done
            ; mov r10, [rsp]
            ; cmp r10, [rsp + 24]
            ; jb ->loop_iter
            ; done:
            ; mov rax, [rsp]
            ; add rsp, 32
            ; ret
            ; =>depth_fault
            ; mov [r12 + st::COUNT], r9
            ; mov QWORD [r12 + st::NATIVE_FAULT], st::FAULT_DEPTH as i32
            ; mov r11, [r12 + st::LOOP_PC]
            ; mov [r12 + st::FAULT_PC], r11
            ; jmp =>fe
        );
    }

    fn emit_stubs(&mut self) {
        let stubs = std::mem::take(&mut self.stubs);
        let fe = self.fault_exit;
        for stub in stubs {
            match stub {
                Stub::Budget { entry, pc, len } => {
                    // Undo the subtraction, then let the interpreter run
                    // the block to the instruction the budget ends at.
                    let (n, p) = (len as i32, pc as i64);
                    dynasm!(self.a ; .arch x64 ; =>entry ; add r9, n);
                    self.spill_all();
                    dynasm!(self.a ; .arch x64 ; mov rsi, QWORD p);
                    self.call_glue(glue::budget_out as *const () as usize);
                    dynasm!(self.a ; .arch x64 ; jmp =>fe);
                }
                Stub::Fault { entry, code, pc } => {
                    let (c, p) = (code as i32, pc as i64);
                    dynasm!(self.a
                        ; .arch x64
                        ; =>entry
                        ; mov [r12 + st::COUNT], r9
                        ; mov QWORD [r12 + st::NATIVE_FAULT], c
                        ; mov r11, QWORD p
                        ; mov [r12 + st::FAULT_PC], r11
                        ; jmp =>fe
                    );
                }
                Stub::Mem {
                    entry,
                    resume,
                    op,
                    pc,
                } => self.mem_stub(entry, resume, op, pc),
            }
        }
    }

    /// The slow path of a load or store: the glue decides (context field
    /// or fault); a load's value comes back in rax.
    fn mem_stub(&mut self, entry: DynamicLabel, resume: DynamicLabel, op: Op, pc: usize) {
        use Code::*;
        let load = matches!(op.code, LdxB | LdxH | LdxW | LdxDW | LdxSB | LdxSH | LdxSW);
        let size = Self::size_of(op.code);
        let base = if load { op.src & 15 } else { op.dst & 15 };
        let info = ((pc as u64) << 8 | (size as u64) << 1 | (!load) as u64) as i64;
        dynasm!(self.a ; .arch x64 ; =>entry);
        if load && size == 4 {
            // An XDP context field: its value is in the context's table
            // while that is valid (aligned offsets below 24).
            let (glue_path, b) = (self.a.new_dynamic_label(), x(base));
            let (ctx_id, off) = (mem::CTX as i32, op.off);
            let xd = x(op.dst & 15);
            dynasm!(self.a
                ; .arch x64
                ; cmp QWORD [r12 + st::CTX_OK], 0
                ; je =>glue_path
                ; lea r11, [Rq(b) + off]
                ; mov r10, r11
                ; shr r10, 32
                ; cmp r10, ctx_id
                ; jne =>glue_path
                ; mov r11d, r11d
                ; test r11, 3
                ; jnz =>glue_path
                ; cmp r11, [r12 + st::CTX_LEN]
                ; jae =>glue_path
                ; mov r11, [r12 + r11 * 2 + st::CTX_VALS]
            );
            match op.code {
                LdxSW => dynasm!(self.a ; .arch x64 ; movsxd Rq(xd), r11d),
                _ => dynasm!(self.a ; .arch x64 ; mov Rq(xd), r11),
            }
            dynasm!(self.a ; .arch x64 ; jmp =>resume ; =>glue_path);
        }
        self.spill_volatile();
        // Value (stores) into rcx, address into rsi, info into rdx; the
        // sources are read before any of them is overwritten (from the
        // spill area where they are argument registers).
        match op.code {
            StB | StH | StW | StDW => {
                dynasm!(self.a ; .arch x64 ; mov rcx, QWORD op.imm as i32 as i64)
            }
            StxB | StxH | StxW | StxDW => {
                let v = st::reg(op.src & 15);
                if op.src & 15 <= 5 {
                    dynasm!(self.a ; .arch x64 ; mov rcx, [r10 + v]);
                } else {
                    let s = x(op.src & 15);
                    dynasm!(self.a ; .arch x64 ; mov rcx, Rq(s));
                }
            }
            _ => {}
        }
        if base <= 5 {
            dynasm!(self.a ; .arch x64 ; mov rsi, [r10 + st::reg(base)]);
        } else {
            let b = x(base);
            dynasm!(self.a ; .arch x64 ; mov rsi, Rq(b));
        }
        let off = op.off;
        dynasm!(self.a
            ; .arch x64
            ; add rsi, off
            ; mov rdx, QWORD info
        );
        self.call_glue(glue::mem_slow as *const () as usize);
        if load {
            // The loaded value, extended as the op reads it, goes to the
            // destination after the other registers come back.
            let d = op.dst & 15;
            dynasm!(self.a ; .arch x64 ; mov [r12 + st::SCRATCH], rax);
            self.reload_volatile();
            let xd = x(d);
            match op.code {
                LdxSB => dynasm!(self.a ; .arch x64 ; movsx Rq(xd), BYTE [r12 + st::SCRATCH]),
                LdxSH => dynasm!(self.a ; .arch x64 ; movsx Rq(xd), WORD [r12 + st::SCRATCH]),
                LdxSW => dynasm!(self.a ; .arch x64 ; movsxd Rq(xd), DWORD [r12 + st::SCRATCH]),
                _ => dynasm!(self.a ; .arch x64 ; mov Rq(xd), [r12 + st::SCRATCH]),
            }
        } else {
            self.reload_volatile();
        }
        dynasm!(self.a ; .arch x64 ; jmp =>resume);
    }
}

/// Length of the basic block starting at each op (0 where no block
/// starts). Blocks start at function starts, jump targets and after every
/// jump (but a `goto` to the next op, which falls through), call and exit.
pub(super) fn blocks(prog: &Program) -> Vec<u32> {
    use Code::*;
    let n = prog.ops.len();
    let mut leader = vec![false; n + 1];
    leader[0] = true;
    for f in &prog.funcs {
        if f.start_op < n {
            leader[f.start_op] = true;
        }
    }
    for (pc, op) in prog.ops.iter().enumerate() {
        // `goto` the next op falls through: the block goes on (its
        // count includes the `goto`, as the interpreter's does).
        if op.code == Ja && op.off as usize == pc + 1 {
            continue;
        }
        let branch = is_branch(op.code);
        if branch || matches!(op.code, Call | CallLocal | Callx | Exit) {
            leader[pc + 1] = true;
        }
        if branch || op.code == CallLocal {
            if let Some(t) = leader.get_mut(op.off as usize) {
                *t = true;
            }
        }
    }
    let mut len = vec![0u32; n];
    let mut pc = 0;
    while pc < n {
        let s = pc;
        pc += 1;
        while pc < n && !leader[pc] {
            pc += 1;
        }
        len[s] = (pc - s) as u32;
    }
    len
}

/// True for jumps (conditional or not, and `may_goto`).
fn is_branch(code: Code) -> bool {
    use Code::*;
    matches!(
        code,
        Ja | MayGoto
            | JeqK
            | JeqX
            | JgtK
            | JgtX
            | JgeK
            | JgeX
            | JsetK
            | JsetX
            | JneK
            | JneX
            | JsgtK
            | JsgtX
            | JsgeK
            | JsgeX
            | JltK
            | JltX
            | JleK
            | JleX
            | JsltK
            | JsltX
            | JsleK
            | JsleX
            | Jeq32K
            | Jeq32X
            | Jgt32K
            | Jgt32X
            | Jge32K
            | Jge32X
            | Jset32K
            | Jset32X
            | Jne32K
            | Jne32X
            | Jsgt32K
            | Jsgt32X
            | Jsge32K
            | Jsge32X
            | Jlt32K
            | Jlt32X
            | Jle32K
            | Jle32X
            | Jslt32K
            | Jslt32X
            | Jsle32K
            | Jsle32X
    )
}

/// Index one past the last op of the block containing each op (for the
/// exact instruction count of a run that faults mid-block).
pub(super) fn block_ends(lens: &[u32]) -> Vec<u32> {
    let mut ends = vec![0u32; lens.len()];
    let mut end = 0u32;
    for pc in 0..lens.len() {
        if lens[pc] > 0 {
            end = pc as u32 + lens[pc];
        }
        ends[pc] = end;
    }
    ends
}

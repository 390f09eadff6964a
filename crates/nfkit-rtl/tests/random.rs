//! Random instruction streams against the VM: a few thousand seeded,
//! loop-free programs mixing every ALU64/ALU32 operation (division and
//! modulo by random and zero divisors), byte swaps, `lddw`, loads and
//! stores of every width on the stack and the packet, forward jumps of
//! every condition and early exits, dense in register dependencies so
//! every forwarding path and stall fires. Each must give the VM's r0,
//! packet and instruction count; every 16th its retired-pc trace too.
//! Every other program gets its packet streamed in while it runs
//! (accesses wait for their bytes).
//! `NFKIT_RTL_SEED` changes the seed, `NFKIT_RTL_PROGRAMS` the count.

mod common;

use common::{compare, rtl_run_mode, vm_load, vm_run};
use nfkit_isa::{AluOp, ByteOrder, Cond, Insn, Operand, Reg, Size, Width};
use nfkit_rtl::{Core, Program};

/// xorshift64*: a small, seedable generator (reproducible streams).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Registers programs compute in (r1 keeps the packet pointer, r10 the frame).
const REGS: [u8; 9] = [0, 2, 3, 4, 5, 6, 7, 8, 9];

fn reg(n: u8) -> Reg {
    Reg::new(n).expect("register number in range")
}

fn imm(rng: &mut Rng) -> i32 {
    match rng.below(4) {
        0 => rng.below(16) as i32,
        1 => -(rng.below(16) as i32),
        _ => rng.next() as i32,
    }
}

/// One instruction of the body; jumps are returned as (insn, target
/// instruction index) to be resolved into slot offsets afterwards.
enum Gen {
    Plain(Insn),
    Jump(Insn, usize),
}

fn gen_insn(rng: &mut Rng, idx: usize, body_len: usize, pkt_len: usize) -> Gen {
    let dst = reg(rng.pick(&REGS));
    let src_reg = reg(rng.pick(&REGS));
    let width = if rng.below(2) == 0 {
        Width::W64
    } else {
        Width::W32
    };
    let bits = if width == Width::W64 { 64 } else { 32 };
    match rng.below(20) {
        0..=7 => {
            let op = rng.pick(&[
                AluOp::Add,
                AluOp::Sub,
                AluOp::Mul,
                AluOp::Or,
                AluOp::And,
                AluOp::Lsh,
                AluOp::Rsh,
                AluOp::Arsh,
                AluOp::Xor,
                AluOp::Mov,
                AluOp::Neg,
                AluOp::Div,
                AluOp::Mod,
                AluOp::SDiv,
                AluOp::SMod,
                AluOp::MovSx(8),
                AluOp::MovSx(16),
                AluOp::MovSx(32),
            ]);
            let op = match (op, width) {
                (AluOp::MovSx(32), Width::W32) => AluOp::MovSx(16),
                (o, _) => o,
            };
            let src = match op {
                AluOp::Neg => Operand::Imm(0),
                AluOp::MovSx(_) => Operand::Reg(src_reg),
                AluOp::Lsh | AluOp::Rsh | AluOp::Arsh if rng.below(2) == 0 => {
                    Operand::Imm(rng.below(bits) as i32)
                }
                _ if rng.below(2) == 0 => Operand::Reg(src_reg),
                _ => Operand::Imm(imm(rng)),
            };
            Gen::Plain(Insn::Alu {
                width,
                op,
                dst,
                src,
            })
        }
        8 => {
            let order = rng.pick(&[ByteOrder::Le, ByteOrder::Be, ByteOrder::Swap]);
            let bits = rng.pick(&[16u8, 32, 64]);
            Gen::Plain(Insn::Endian { order, bits, dst })
        }
        9 => Gen::Plain(Insn::lddw(dst, rng.next())),
        10..=11 => {
            // Stack load from the initialised 64 bytes below r10.
            let size = rng.pick(&[Size::B, Size::H, Size::W, Size::DW]);
            let off = -((rng.below(64 / size.bytes() as u64) as i16 + 1) * size.bytes() as i16);
            Gen::Plain(Insn::Ldx {
                size,
                signed: size != Size::DW && rng.below(3) == 0,
                dst,
                src: Reg::FP,
                off,
            })
        }
        12..=13 => {
            let size = rng.pick(&[Size::B, Size::H, Size::W, Size::DW]);
            let off = -((rng.below(64 / size.bytes() as u64) as i16 + 1) * size.bytes() as i16);
            if rng.below(3) == 0 {
                Gen::Plain(Insn::St {
                    size,
                    dst: Reg::FP,
                    off,
                    imm: imm(rng),
                })
            } else {
                Gen::Plain(Insn::Stx {
                    size,
                    dst: Reg::FP,
                    src: src_reg,
                    off,
                })
            }
        }
        14 => {
            // Packet load at any alignment.
            let size = rng.pick(&[Size::B, Size::H, Size::W, Size::DW]);
            let off = rng.below((pkt_len - size.bytes() + 1) as u64) as i16;
            Gen::Plain(Insn::Ldx {
                size,
                signed: size != Size::DW && rng.below(3) == 0,
                dst,
                src: Reg::R1,
                off,
            })
        }
        15 => {
            let size = rng.pick(&[Size::B, Size::H, Size::W, Size::DW]);
            let off = rng.below((pkt_len - size.bytes() + 1) as u64) as i16;
            Gen::Plain(Insn::Stx {
                size,
                dst: Reg::R1,
                src: src_reg,
                off,
            })
        }
        16..=18 => {
            let cond = rng.pick(&[
                Cond::Eq,
                Cond::Gt,
                Cond::Ge,
                Cond::Set,
                Cond::Ne,
                Cond::Sgt,
                Cond::Sge,
                Cond::Lt,
                Cond::Le,
                Cond::Slt,
                Cond::Sle,
            ]);
            let src = if rng.below(2) == 0 {
                Operand::Reg(src_reg)
            } else {
                Operand::Imm(imm(rng))
            };
            let target = idx + 1 + rng.below((body_len - idx).min(6) as u64) as usize;
            Gen::Jump(
                Insn::Jmp {
                    width,
                    cond,
                    dst,
                    src,
                    off: 0,
                },
                target,
            )
        }
        _ => {
            if rng.below(4) == 0 {
                Gen::Plain(Insn::Exit)
            } else {
                let target = idx + 1 + rng.below((body_len - idx).min(4) as u64) as usize;
                Gen::Jump(Insn::Ja { off: 0 }, target)
            }
        }
    }
}

/// A program: registers and 64 bytes of stack initialised, a random body,
/// `exit`.
fn gen_program(rng: &mut Rng, pkt_len: usize) -> Vec<Insn> {
    let mut pre = Vec::new();
    for r in REGS {
        if rng.below(2) == 0 {
            pre.push(Insn::lddw(reg(r), rng.next()));
        } else {
            pre.push(Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst: reg(r),
                src: Operand::Imm(imm(rng)),
            });
        }
    }
    for k in 1..=8i16 {
        pre.push(Insn::Stx {
            size: Size::DW,
            dst: Reg::FP,
            src: reg(rng.pick(&REGS)),
            off: -8 * k,
        });
    }
    let body_len = 8 + rng.below(40) as usize;
    let body: Vec<Gen> = (0..body_len)
        .map(|i| gen_insn(rng, i, body_len, pkt_len))
        .collect();
    // Resolve jump targets (instruction indices in the body; body_len is
    // the final exit) into slot offsets.
    let mut slot_of = Vec::with_capacity(body_len + 1);
    let mut slot = 0usize;
    for g in &body {
        slot_of.push(slot);
        slot += match g {
            Gen::Plain(i) | Gen::Jump(i, _) => i.slots(),
        };
    }
    slot_of.push(slot);
    let mut insns = pre;
    for (i, g) in body.into_iter().enumerate() {
        insns.push(match g {
            Gen::Plain(insn) => insn,
            Gen::Jump(insn, target) => {
                let off = (slot_of[target] - slot_of[i] - 1) as i16;
                match insn {
                    Insn::Jmp {
                        width,
                        cond,
                        dst,
                        src,
                        ..
                    } => Insn::Jmp {
                        width,
                        cond,
                        dst,
                        src,
                        off,
                    },
                    _ => Insn::Ja { off },
                }
            }
        });
    }
    insns.push(Insn::Exit);
    insns
}

#[test]
fn random_programs_match_the_vm() {
    let seed: u64 = std::env::var("NFKIT_RTL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0022);
    let count: usize = std::env::var("NFKIT_RTL_PROGRAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut rng = Rng(seed | 1);
    let mut core: Option<Core> = None;
    let (mut ran, mut refused, mut traced, mut faulted) = (0usize, 0usize, 0usize, 0usize);
    let (mut cycles, mut retired, mut rx_waits) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    for n in 0..count {
        let pkt_len = 16 + rng.below(112) as usize;
        let pkt: Vec<u8> = (0..pkt_len).map(|_| rng.next() as u8).collect();
        let insns = gen_program(&mut rng, pkt_len);
        let Ok(vm) = vm_load(&insns) else {
            refused += 1;
            continue;
        };
        let prog = Program::from_insns("random", &insns).expect("generated within the subset");
        let core = match core.as_mut() {
            Some(c) => {
                c.load(prog);
                c
            }
            None => core.insert(Core::new(prog).expect("RTL model built")),
        };
        let trace = n % 16 == 0;
        let want = vm_run(&vm, &pkt, trace);
        // Odd programs get their packet streamed in while they run.
        let got = rtl_run_mode(core, &pkt, trace, n % 2 == 1);
        rx_waits += got.stalls.rx;
        let mut verdict = compare(&want, &got);
        if verdict.is_ok() && trace && want.r0.is_some() {
            if want.trace == got.trace {
                traced += 1;
            } else {
                verdict = Err("retired pcs differ from the VM's trace".into());
            }
        }
        if want.r0.is_none() {
            faulted += 1;
        }
        if let Err(why) = verdict {
            failures.push(format!(
                "program {n} (seed {seed:#x}): {why}\n{}",
                nfkit_isa::disassemble(&insns, &Default::default())
            ));
        }
        ran += 1;
        cycles += got.cycles;
        retired += got.retired;
    }
    println!(
        "random streams: {ran} run ({refused} refused by the VM's checks), {traced} traces compared, {faulted} faulted on both, CPI {:.3}",
        cycles as f64 / retired.max(1) as f64
    );
    assert!(
        failures.is_empty(),
        "{} differ; first:\n{}",
        failures.len(),
        failures[0]
    );
    assert!(
        ran * 10 >= count * 9,
        "too many programs refused: {refused} of {count}"
    );
    assert!(traced >= count / 20, "only {traced} traces compared");
    assert!(rx_waits > 0, "streamed packets made some access wait");
}

//! Program generators shared by the hostile-program tests, the JIT
//! equivalence property test and the soak example: random instructions,
//! valid-by-construction programs, seeds and their mutations.
#![allow(dead_code)]

use super::*;
use nfkit_isa::{CallKind, Insn, RawInsn};
use nfkit_object::MapType;
use nfkit_vm::helpers::table::id;
use proptest::prelude::*;

/// Seed programs to mutate: small loops, map access, packet parsing.
pub fn seeds() -> Vec<Vec<Insn>> {
    use nfkit_isa::{AluOp, Cond, Size};
    use nfkit_vm::helpers::table::id;
    vec![
        vec![
            ldx(Size::W, 2, 1, 0),
            ldx(Size::W, 3, 1, 4),
            movr(4, 2),
            alu64(AluOp::Add, 4, 14),
            jmpr(Cond::Gt, 4, 3, 3),
            ldx(Size::H, 0, 2, 12),
            alu64(AluOp::And, 0, 3),
            exit(),
            mov(0, 2),
            exit(),
        ],
        vec![
            st(Size::W, 10, -4, 1),
            map_ptr(1, 0),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            call(id::MAP_LOOKUP_ELEM),
            jmp(Cond::Eq, 0, 0, 2),
            ldx(Size::DW, 1, 0, 0),
            stx(Size::DW, 0, 1, 8),
            mov(0, 2),
            exit(),
        ],
        vec![
            mov(0, 0),
            mov(1, 10),
            alu64(AluOp::Add, 0, 3),
            alu64(AluOp::Sub, 1, 1),
            jmp(Cond::Ne, 1, 0, -3),
            exit(),
        ],
        vec![
            movr(6, 1),
            mov(2, -20),
            call(id::XDP_ADJUST_HEAD),
            ldx(Size::W, 2, 6, 0),
            ldx(Size::B, 0, 2, 0),
            exit(),
        ],
    ]
}

pub fn raw(insns: &[Insn]) -> Vec<RawInsn> {
    nfkit_isa::encode_program(insns)
}

pub fn maps() -> Vec<nfkit_object::MapSpec> {
    vec![
        map("h", MapType::Hash, 4, 16, 8),
        map("a", MapType::Array, 4, 16, 4),
        map("pa", MapType::PercpuArray, 4, 8, 2),
        map("lpm", MapType::LpmTrie, 8, 8, 4),
        map("rb", MapType::Ringbuf, 0, 0, 4096),
        map("jmp", MapType::ProgArray, 4, 4, 2),
    ]
}

/// Registers given values at the start of the entry function, so that more
/// programs pass the uninitialised-register check.
pub fn entry_prologue() -> Vec<Insn> {
    vec![
        mov(0, 0),
        movr(2, 10),
        alu64(nfkit_isa::AluOp::Add, 2, -16),
        movr(3, 1),
        mov(4, 14),
        mov(5, -1),
        movr(6, 1),
        mov(7, 0),
        mov(8, 4),
        mov(9, 512),
    ]
}

/// The same for a called function (r1-r5 are its arguments).
pub fn callee_prologue() -> Vec<Insn> {
    vec![
        mov(0, 0),
        movr(6, 1),
        movr(7, 10),
        alu64(nfkit_isa::AluOp::Add, 7, -8),
        mov(8, 2),
        mov(9, -7),
    ]
}

/// `body` with argument registers given values again after every call
/// (calls clobber r1-r5), ended by `exit`.
pub fn function(prologue: Vec<Insn>, body: Vec<Insn>) -> Vec<Insn> {
    let mut all = prologue;
    for i in body {
        all.push(i);
        if matches!(
            i,
            Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. }
        ) {
            all.extend([
                movr(1, 6),
                movr(2, 10),
                alu64(nfkit_isa::AluOp::Add, 2, -32),
                mov(3, 8),
                mov(4, 0),
                mov(5, 0),
            ]);
        }
    }
    all.push(Insn::Exit);
    all
}

/// A program of an entry function and up to three subprograms, all made
/// of random instructions whose control flow is bent to stay valid (see
/// [`assemble`]).
pub fn structured_program() -> impl Strategy<Value = Vec<RawInsn>> {
    (
        prop::collection::vec(insn_strategy(), 1..24),
        prop::collection::vec(prop::collection::vec(insn_strategy(), 1..10), 0..4),
    )
        .prop_map(|(main, subs)| assemble(main, subs))
}

/// Joins an entry function's body and subprogram bodies (each given its
/// prologue and `exit`) into one program whose control flow is bent to
/// stay valid: jump offsets are wrapped into their function (backward
/// ones too, so loops that only the budget ends are common), local calls
/// and function addresses with immediate `i` name subprogram `i` (modulo
/// their number). Register values, memory addresses, helper arguments
/// and everything else stay as given.
pub fn assemble(main: Vec<Insn>, subs: Vec<Vec<Insn>>) -> Vec<RawInsn> {
    let mut funcs = vec![function(entry_prologue(), main)];
    funcs.extend(subs.into_iter().map(|b| function(callee_prologue(), b)));
    let mut insns: Vec<Insn> = Vec::new();
    let mut bounds = Vec::new();
    for f in funcs {
        let a = insns.len();
        insns.extend(f);
        bounds.push((a, insns.len()));
    }
    let starts = nfkit_isa::slot_offsets(&insns);
    let rel = |from: usize, to: usize| starts[to] as i64 - starts[from] as i64 - 1;
    let subs = &bounds[1..];
    for (a, b) in bounds.iter().copied() {
        for (k, insn) in insns.iter_mut().enumerate().take(b).skip(a) {
            let n = (b - a) as i64;
            let wrap = |off: i64| a + (k as i64 - a as i64 + 1 + off).rem_euclid(n) as usize;
            match insn {
                Insn::Ja { off } | Insn::Jmp { off, .. } | Insn::MayGoto { off } => {
                    *off = rel(k, wrap(*off as i64)) as i16;
                }
                Insn::Gotol { imm } => *imm = rel(k, wrap(*imm as i64)) as i32,
                Insn::Call {
                    kind: nfkit_isa::CallKind::Local,
                    imm,
                }
                | Insn::Lddw {
                    kind: nfkit_isa::LddwKind::Func,
                    imm,
                    ..
                } => {
                    if let Some(&(s, _)) =
                        subs.get((*imm).unsigned_abs() as usize % subs.len().max(1))
                    {
                        *imm = rel(k, s) as i32;
                    }
                }
                _ => {}
            }
        }
    }
    raw(&insns)
}

pub fn slot_strategy() -> impl Strategy<Value = RawInsn> {
    // Opcodes from the defined set most of the time, registers mostly
    // valid, offsets and immediates small or extreme.
    let code = prop_oneof![any::<u8>(), prop::sample::select(OPCODES.to_vec())];
    let reg = prop_oneof![0u8..=10, 0u8..=15];
    let off = prop_oneof![-8i16..8, -520i16..64, any::<i16>()];
    let imm = prop_oneof![
        -16i32..16,
        any::<i32>(),
        prop::sample::select(vec![0, 1, -1, 8, 16, 32, 64, i32::MIN, i32::MAX])
    ];
    (code, reg.clone(), reg, off, imm).prop_map(|(code, dst, src, off, imm)| RawInsn {
        code,
        dst,
        src,
        off,
        imm,
    })
}

/// A random slot that decodes on its own (an `lddw` gets its second
/// slot); anything else becomes `exit`.
pub fn decoding_slots(slots: Vec<RawInsn>) -> Vec<RawInsn> {
    let mut out = Vec::new();
    for s in slots {
        let pair = [
            s,
            RawInsn {
                imm: s.imm.rotate_left(7),
                ..RawInsn::default()
            },
        ];
        match nfkit_isa::decode_one(&pair) {
            Ok(Insn::Lddw { .. }) => out.extend(pair),
            Ok(_) => out.push(s),
            Err(_) => out.push(RawInsn {
                code: 0x95,
                ..RawInsn::default()
            }),
        }
    }
    out
}

/// A structurally valid instruction with random fields.
pub fn insn_strategy() -> impl Strategy<Value = Insn> {
    use nfkit_isa::*;
    use nfkit_vm::helpers::table::KERNEL_HELPERS;
    let reg = (0u8..=10).prop_map(|n| Reg::new(n).unwrap_or(Reg::R0));
    // Destinations: r10 is read-only (the loader rejects writes to it).
    let dreg = (0u8..=9).prop_map(|n| Reg::new(n).unwrap_or(Reg::R0));
    let width = prop_oneof![Just(Width::W64), Just(Width::W32)];
    let size = prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W), Just(Size::DW)];
    let alu_op = prop::sample::select(vec![
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Div,
        AluOp::SDiv,
        AluOp::Or,
        AluOp::And,
        AluOp::Lsh,
        AluOp::Rsh,
        AluOp::Neg,
        AluOp::Mod,
        AluOp::SMod,
        AluOp::Xor,
        AluOp::Mov,
        AluOp::MovSx(8),
        AluOp::MovSx(16),
        AluOp::Arsh,
    ]);
    let cond = prop::sample::select(vec![
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
    let imm = prop_oneof![-16i32..16, any::<i32>()];
    let off = prop_oneof![-16i16..16, -520i16..0, any::<i16>()];
    let operand = prop_oneof![
        reg.clone().prop_map(Operand::Reg),
        imm.clone().prop_map(Operand::Imm)
    ];
    // Mostly helpers the kernel profile has, sometimes any number.
    let helper = prop_oneof![
        9 => prop::sample::select(KERNEL_HELPERS.iter().map(|h| h.id).collect::<Vec<_>>()),
        1 => 0i32..220
    ];
    let atomic = prop::sample::select(vec![
        AtomicOp::Add { fetch: false },
        AtomicOp::Add { fetch: true },
        AtomicOp::Or { fetch: true },
        AtomicOp::And { fetch: false },
        AtomicOp::Xor { fetch: true },
        AtomicOp::Xchg,
        AtomicOp::CmpXchg,
    ]);
    prop_oneof![
        6 => (width.clone(), alu_op, dreg.clone(), operand.clone()).prop_map(|(width, op, dst, src)| {
            let src = match op {
                AluOp::Neg => Operand::Imm(0),
                AluOp::MovSx(_) => match src { Operand::Imm(_) => Operand::Reg(dst), r => r },
                _ => src,
            };
            Insn::Alu { width, op, dst, src }
        }),
        1 => (dreg.clone(), prop::sample::select(vec![16u8, 32, 64]), any::<bool>())
            .prop_map(|(dst, bits, be)| Insn::Endian {
                order: if be { ByteOrder::Be } else { ByteOrder::Le }, bits, dst }),
        3 => (size.clone(), any::<bool>(), dreg.clone(), reg.clone(), off.clone())
            .prop_map(|(size, sx, dst, src, off)| Insn::Ldx { size, signed: sx && size != Size::DW, dst, src, off }),
        2 => (size.clone(), reg.clone(), reg.clone(), off.clone())
            .prop_map(|(size, dst, src, off)| Insn::Stx { size, dst, src, off }),
        1 => (size.clone(), reg.clone(), off.clone(), imm.clone())
            .prop_map(|(size, dst, off, imm)| Insn::St { size, dst, off, imm }),
        1 => (any::<bool>(), atomic, reg.clone(), reg.clone(), off.clone())
            .prop_map(|(w, op, dst, src, off)| Insn::Atomic { size: if w { Size::W } else { Size::DW }, op, dst, src, off }),
        1 => (dreg.clone(), any::<u64>()).prop_map(|(d, v)| Insn::lddw(d, v)),
        // Map handles (one index past the maps), and direct value
        // addresses: mostly into the array map "a" (16-byte values), some
        // anywhere.
        1 => (dreg.clone(), prop_oneof![Just(1i32), 0i32..7], prop_oneof![-4i32..16, -4i32..20]).prop_map(|(dst, m, o)| {
            if o < 0 {
                Insn::Lddw { kind: LddwKind::MapIdx, dst, imm: m, next_imm: 0 }
            } else {
                Insn::Lddw { kind: LddwKind::MapIdxValue, dst, imm: m, next_imm: o }
            }
        }),
        1 => (dreg.clone(), -12i32..12).prop_map(|(dst, imm)| Insn::Lddw { kind: LddwKind::Func, dst, imm, next_imm: 0 }),
        1 => (prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W)], reg.clone(), imm.clone(), any::<bool>())
            .prop_map(|(size, src, imm, ind)| if ind { Insn::LdInd { size, src, imm } } else { Insn::LdAbs { size, imm } }),
        4 => (width, cond, reg.clone(), operand, -3i16..12)
            .prop_map(|(width, cond, dst, src, off)| Insn::Jmp { width, cond, dst, src, off }),
        1 => (-3i16..12).prop_map(|off| Insn::Ja { off }),
        1 => (-12i16..12).prop_map(|off| Insn::MayGoto { off }),
        2 => helper.prop_map(|imm| Insn::Call { kind: CallKind::Helper, imm }),
        1 => (0i32..12).prop_map(|imm| Insn::Call { kind: CallKind::Local, imm }),
        1 => reg.prop_map(|reg| Insn::Callx { reg }),
        2 => Just(Insn::Exit),
    ]
}

/// Opcodes the ISA defines.
pub const OPCODES: &[u8] = &[
    0x07, 0x0f, 0x17, 0x1f, 0x27, 0x2f, 0x37, 0x3f, 0x47, 0x4f, 0x57, 0x5f, 0x67, 0x6f, 0x77, 0x7f,
    0x87, 0x97, 0x9f, 0xa7, 0xaf, 0xb7, 0xbf, 0xc7, 0xcf, 0xd4, 0xdc, 0xd7, 0x04, 0x0c, 0x14, 0x1c,
    0x24, 0x2c, 0x34, 0x3c, 0x44, 0x4c, 0x54, 0x5c, 0x64, 0x6c, 0x74, 0x7c, 0x84, 0x94, 0x9c, 0xa4,
    0xac, 0xb4, 0xbc, 0xc4, 0xcc, 0x18, 0x61, 0x69, 0x71, 0x79, 0x81, 0x89, 0x91, 0x62, 0x6a, 0x72,
    0x7a, 0x63, 0x6b, 0x73, 0x7b, 0xc3, 0xdb, 0x05, 0x06, 0x15, 0x1d, 0x25, 0x2d, 0x35, 0x3d, 0x45,
    0x4d, 0x55, 0x5d, 0x65, 0x6d, 0x75, 0x7d, 0xa5, 0xad, 0xb5, 0xbd, 0xc5, 0xcd, 0xd5, 0xdd, 0x16,
    0x1e, 0x26, 0x2e, 0x36, 0x56, 0x5e, 0xa6, 0xae, 0xc6, 0x85, 0x8d, 0x95, 0x20, 0x28, 0x30, 0x40,
    0x48, 0x50, 0xe5,
];

pub fn packet_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..80),
        (14usize..200).prop_map(udp_frame),
    ]
}

/// One mutation of a program: where, how, and the material.
pub type Mutation = (prop::sample::Index, u8, Insn, RawInsn);

/// One to three mutations (see [`mutate`]).
pub fn mutations_strategy() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(
        (
            any::<prop::sample::Index>(),
            0u8..6,
            insn_strategy(),
            slot_strategy(),
        ),
        1..4,
    )
}

/// Applies `muts` to `slots`: an instruction replaced by a whole random
/// one, or one field (offset, immediate, registers) of a slot changed.
pub fn mutate(slots: &mut Vec<RawInsn>, muts: Vec<Mutation>) {
    for (at, how, insn, new) in muts {
        if slots.is_empty() {
            return;
        }
        let i = at.index(slots.len());
        match how {
            0 | 1 => {
                let enc = raw(&[insn]);
                slots.splice(i..(i + 1).min(slots.len()), enc);
            }
            2 => slots[i].off = new.off,
            3 => slots[i].imm = new.imm,
            4 => slots[i].dst = new.dst % 11,
            _ => slots[i].src = new.src % 11,
        }
    }
}

/// Flips bit `bit % 64` of slot `at` for every `(at, bit)` pair (the
/// slot's 64 bits in their encoded layout: code, registers, offset,
/// immediate).
pub fn flip_bits(slots: &mut [RawInsn], flips: &[(prop::sample::Index, u8)]) {
    for (at, bit) in flips {
        if slots.is_empty() {
            return;
        }
        let s = &mut slots[at.index(slots.len())];
        let bit = bit % 64;
        match bit {
            0..=7 => s.code ^= 1 << bit,
            8..=11 => s.dst = (s.dst ^ (1 << (bit - 8))) & 0xf,
            12..=15 => s.src = (s.src ^ (1 << (bit - 12))) & 0xf,
            16..=31 => s.off ^= 1 << (bit - 16),
            _ => s.imm ^= 1 << (bit - 32),
        }
    }
}

fn any_size() -> impl Strategy<Value = nfkit_isa::Size> + Clone {
    use nfkit_isa::Size;
    prop_oneof![Just(Size::B), Just(Size::H), Just(Size::W), Just(Size::DW)]
}

fn any_width() -> impl Strategy<Value = nfkit_isa::Width> + Clone {
    use nfkit_isa::Width;
    prop_oneof![Just(Width::W64), Just(Width::W32)]
}

/// A short, valid-by-construction instruction sequence exercising one
/// feature: division and modulo by zero, shifts of the width or more,
/// sign-extending loads and moves, byte swaps, atomics, map lookups
/// with value accesses in and out of bounds, map updates, the clock and
/// random helpers, tail calls, `bpf_loop`, `gotol`, JMP32, packet
/// accesses after (and past) a `data_end` comparison, and out-of-bounds
/// stack, context and NULL accesses. The entry prologue keeps the
/// context in r6; jumps inside a snippet stay inside it.
pub fn snippet_strategy() -> impl Strategy<Value = Vec<Insn>> {
    use nfkit_isa::*;
    use nfkit_vm::helpers::table::id;
    let divop = prop::sample::select(vec![AluOp::Div, AluOp::Mod, AluOp::SDiv, AluOp::SMod]);
    let shiftop = prop::sample::select(vec![AluOp::Lsh, AluOp::Rsh, AluOp::Arsh]);
    let atomic = prop::sample::select(vec![
        AtomicOp::Add { fetch: false },
        AtomicOp::Add { fetch: true },
        AtomicOp::Or { fetch: false },
        AtomicOp::Or { fetch: true },
        AtomicOp::And { fetch: false },
        AtomicOp::And { fetch: true },
        AtomicOp::Xor { fetch: false },
        AtomicOp::Xor { fetch: true },
        AtomicOp::Xchg,
        AtomicOp::CmpXchg,
    ]);
    let cond = prop::sample::select(vec![
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
    let small = prop_oneof![-3i32..4, any::<i32>()];
    prop_oneof![
        // Division and modulo by a register that is often zero.
        (any_width(), divop.clone(), 0i32..3, small.clone()).prop_map(|(w, op, d, a)| vec![
            mov(0, a),
            mov(1, d),
            Insn::Alu {
                width: w,
                op,
                dst: r(0),
                src: Operand::Reg(r(1))
            },
        ]),
        // ... and by an immediate (zero refused by the kernel profile).
        (
            any_width(),
            divop,
            prop_oneof![Just(0i32), Just(-1), any::<i32>()],
            any::<i32>()
        )
            .prop_map(|(w, op, d, a)| vec![
                lddw(0, (a as i64 * 0x1_0000_0001) as u64),
                Insn::Alu {
                    width: w,
                    op,
                    dst: r(0),
                    src: Operand::Imm(d)
                },
            ]),
        // Shifts by the width and more, by register and by immediate.
        (any_width(), shiftop.clone(), 0i32..130, any::<u64>()).prop_map(|(w, op, s, v)| vec![
            lddw(0, v),
            mov(1, s),
            Insn::Alu {
                width: w,
                op,
                dst: r(0),
                src: Operand::Reg(r(1))
            },
        ]),
        (any_width(), shiftop, 0i32..70).prop_map(|(w, op, s)| vec![
            mov(0, -12345),
            Insn::Alu {
                width: w,
                op,
                dst: r(0),
                src: Operand::Imm(s)
            },
        ]),
        // Sign-extending moves and loads, byte swaps.
        (
            any_width(),
            prop::sample::select(vec![8u8, 16, 32]),
            any::<u64>()
        )
            .prop_map(|(w, b, v)| vec![
                lddw(1, v),
                Insn::Alu {
                    width: if b == 32 { Width::W64 } else { w },
                    op: AluOp::MovSx(b),
                    dst: r(0),
                    src: Operand::Reg(r(1)),
                },
            ]),
        (
            prop::sample::select(vec![Size::B, Size::H, Size::W]),
            any::<u64>(),
            -8i16..8
        )
            .prop_map(|(size, v, o)| vec![
                lddw(1, v),
                stx(Size::DW, 10, 1, -16),
                Insn::Ldx {
                    size,
                    signed: true,
                    dst: r(0),
                    src: r(10),
                    off: -16 + o
                },
            ]),
        (
            prop::sample::select(vec![ByteOrder::Le, ByteOrder::Be, ByteOrder::Swap]),
            prop::sample::select(vec![16u8, 32, 64]),
            any::<u64>()
        )
            .prop_map(|(order, bits, v)| vec![
                lddw(0, v),
                Insn::Endian {
                    order,
                    bits,
                    dst: r(0)
                }
            ]),
        // Atomics on the stack (in and out of the frame, aligned or not).
        (
            atomic,
            any::<bool>(),
            any::<u64>(),
            any::<i32>(),
            prop_oneof![8 => Just(-16i16), 1 => -20i16..4]
        )
            .prop_map(|(op, w, v, s, off)| vec![
                lddw(1, v),
                stx(Size::DW, 10, 1, -16),
                mov(1, s),
                mov(0, v as i32),
                Insn::Atomic {
                    size: if w { Size::W } else { Size::DW },
                    op,
                    dst: r(10),
                    src: r(1),
                    off
                },
                ldx(Size::DW, 2, 10, -16),
                alu64r(AluOp::Xor, 0, 2),
            ]),
        // Map lookup, then a value access in or out of bounds (maps 0-2
        // have 16- and 8-byte values).
        (
            0i32..3,
            0i32..6,
            any_size(),
            prop_oneof![4 => 0i16..16, 1 => -8i16..24],
            any::<bool>(),
            any::<i32>()
        )
            .prop_map(|(m, key, size, off, write, v)| {
                let access = if write {
                    st(size, 0, off, v)
                } else {
                    ldx(size, 0, 0, off)
                };
                vec![
                    st(Size::W, 10, -4, key),
                    map_ptr(1, m),
                    movr(2, 10),
                    alu64(AluOp::Add, 2, -4),
                    call(id::MAP_LOOKUP_ELEM),
                    jmp(Cond::Eq, 0, 0, 1),
                    access,
                ]
            }),
        // Map update (flags any/noexist/exist/bad).
        (0i32..3, 0i32..10, any::<u64>(), 0i32..4).prop_map(|(m, key, v, flags)| vec![
            st(Size::W, 10, -4, key),
            lddw(3, v),
            stx(Size::DW, 10, 3, -24),
            stx(Size::DW, 10, 3, -16),
            map_ptr(1, m),
            movr(2, 10),
            alu64(AluOp::Add, 2, -4),
            movr(3, 10),
            alu64(AluOp::Add, 3, -24),
            mov(4, flags),
            call(id::MAP_UPDATE_ELEM),
        ]),
        // Clock and random numbers.
        prop::sample::select(vec![id::KTIME_GET_NS, id::GET_PRANDOM_U32])
            .prop_map(|h| vec![call(h), alu64(AluOp::Add, 0, 1)]),
        // Tail call through the prog array (map 5).
        (0i32..3).prop_map(|slot| vec![
            movr(1, 6),
            map_ptr(2, 5),
            mov(3, slot),
            call(id::TAIL_CALL)
        ]),
        // bpf_loop with a subprogram as the callback.
        (0i32..40, 0i32..4).prop_map(|(n, f)| vec![
            mov(1, n),
            func_ptr(2, f),
            mov(3, 0),
            mov(4, 0),
            call(id::LOOP),
        ]),
        // gotol and JMP32.
        (0i32..3).prop_map(|o| vec![Insn::Gotol { imm: o }, mov(0, 1), mov(0, 2), mov(0, 3)]),
        (cond, any::<u64>(), any::<i32>()).prop_map(|(cond, v, imm)| vec![
            lddw(1, v),
            Insn::Jmp {
                width: Width::W32,
                cond,
                dst: r(1),
                src: Operand::Imm(imm),
                off: 1
            },
            mov(0, 7),
        ]),
        // Packet access after a data_end comparison, sometimes past it.
        (
            1i32..64,
            any_size(),
            prop_oneof![4 => 0i16..8, 1 => 0i16..80],
            any::<bool>()
        )
            .prop_map(|(n, size, off, write)| vec![
                ldx(Size::W, 2, 6, 0),
                ldx(Size::W, 3, 6, 4),
                movr(4, 2),
                alu64(AluOp::Add, 4, n),
                jmpr(Cond::Gt, 4, 3, 1),
                if write {
                    stx(size, 2, 4, off)
                } else {
                    ldx(size, 0, 2, off)
                },
            ]),
        // Out-of-bounds stack, context and NULL accesses.
        (any_size(), -600i16..16, any::<bool>()).prop_map(|(size, off, write)| vec![if write {
            st(size, 10, off, 1)
        } else {
            ldx(size, 0, 10, off)
        },]),
        (any_size(), -4i16..40, any::<bool>()).prop_map(|(size, off, write)| vec![if write {
            stx(size, 6, 0, off)
        } else {
            ldx(size, 0, 6, off)
        },]),
        (any_size(), -8i16..64).prop_map(|(size, off)| vec![mov(1, 0), ldx(size, 0, 1, off)]),
        // Head adjustment and redirect.
        (-64i32..64).prop_map(|d| vec![movr(1, 6), mov(2, d), call(id::XDP_ADJUST_HEAD)]),
        (0i32..8).prop_map(|i| vec![mov(1, i), mov(2, 0), call(id::REDIRECT)]),
    ]
}

/// A function body: random instructions and snippets.
pub fn body_strategy(max: usize) -> impl Strategy<Value = Vec<Insn>> {
    prop::collection::vec(
        prop_oneof![
            2 => insn_strategy().prop_map(|i| vec![i]),
            3 => snippet_strategy(),
        ],
        1..max,
    )
    .prop_map(|v| v.into_iter().flatten().collect())
}

/// A mostly valid program: an entry and up to three subprograms made of
/// snippets and random instructions (see [`assemble`]).
pub fn rich_program() -> impl Strategy<Value = Vec<RawInsn>> {
    (
        body_strategy(12),
        prop::collection::vec(body_strategy(4), 0..4),
    )
        .prop_map(|(main, subs)| assemble(main, subs))
}

/// A call chain `depth` functions deep (the entry calls subprogram 0,
/// which calls 1, ...), sometimes with a function calling itself, so
/// programs meet the frame limit at load or at run time.
pub fn chain_program() -> impl Strategy<Value = Vec<RawInsn>> {
    (
        1usize..12,
        prop::collection::vec(body_strategy(3), 13),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(depth, mut bodies, selfcall, recurse)| {
            let rec = selfcall.index(depth);
            let mut main = vec![call_local(0)];
            main.append(&mut bodies[0]);
            let subs = bodies
                .into_iter()
                .skip(1)
                .take(depth)
                .enumerate()
                .map(|(i, mut b)| {
                    if i + 1 < depth {
                        b.push(call_local(i as i32 + 1));
                    }
                    if recurse && i == rec {
                        b.push(call_local(i as i32));
                    }
                    b
                })
                .collect();
            assemble(main, subs)
        })
}

/// `insns` with every helper call but the conformance profile's (5),
/// legacy packet load and `callx` turned into a move of the same size,
/// so that programs also load in the conformance profile (which has no
/// other helper and no socket buffer).
pub fn helper_free(insns: &[Insn]) -> Vec<Insn> {
    insns
        .iter()
        .map(|i| match *i {
            Insn::Call {
                kind: CallKind::Helper,
                imm,
            } if imm != id::KTIME_GET_NS => mov(0, imm),
            Insn::LdAbs { .. } | Insn::LdInd { .. } | Insn::Callx { .. } => mov(0, 1),
            i => i,
        })
        .collect()
}

/// Mostly valid programs: snippets and random instructions, call chains,
/// random instructions alone, and a few raw slot soups.
pub fn generated_programs() -> impl Strategy<Value = Vec<RawInsn>> {
    prop_oneof![
        6 => rich_program(),
        1 => chain_program(),
        1 => structured_program(),
        1 => prop::collection::vec(slot_strategy(), 1..24).prop_map(decoding_slots),
    ]
}

/// Valid programs and seeds, mutated: whole instructions or fields
/// replaced, or random bits flipped.
pub fn mutated_programs() -> impl Strategy<Value = Vec<RawInsn>> {
    let seeds: Vec<Vec<RawInsn>> = seeds().iter().map(|s| raw(s)).collect();
    let base = prop_oneof![
        4 => rich_program(),
        1 => prop::sample::select(seeds),
    ];
    let flips = prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4);
    prop_oneof![
        3 => (base.clone(), mutations_strategy()).prop_map(|(mut p, m)| {
            mutate(&mut p, m);
            p
        }),
        1 => (base, flips).prop_map(|(mut p, f)| {
            flip_bits(&mut p, &f);
            p
        }),
    ]
}

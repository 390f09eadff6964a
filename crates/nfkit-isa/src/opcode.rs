//! Opcode field values of RFC 9669 (eBPF ISA v4), as named in the RFC and in
//! `linux/bpf.h`. An opcode byte is `class | (size | mode)` for loads and
//! stores, or `class | source | operation` for arithmetic and jumps.

// Instruction classes (low 3 bits).
pub const CLS_LD: u8 = 0x00;
pub const CLS_LDX: u8 = 0x01;
pub const CLS_ST: u8 = 0x02;
pub const CLS_STX: u8 = 0x03;
pub const CLS_ALU: u8 = 0x04;
pub const CLS_JMP: u8 = 0x05;
pub const CLS_JMP32: u8 = 0x06;
pub const CLS_ALU64: u8 = 0x07;
pub const CLS_MASK: u8 = 0x07;

// Load/store size (bits 3-4).
pub const SZ_W: u8 = 0x00;
pub const SZ_H: u8 = 0x08;
pub const SZ_B: u8 = 0x10;
pub const SZ_DW: u8 = 0x18;
pub const SZ_MASK: u8 = 0x18;

// Load/store mode (bits 5-7).
pub const MODE_IMM: u8 = 0x00;
pub const MODE_ABS: u8 = 0x20;
pub const MODE_IND: u8 = 0x40;
pub const MODE_MEM: u8 = 0x60;
pub const MODE_MEMSX: u8 = 0x80;
pub const MODE_ATOMIC: u8 = 0xc0;
pub const MODE_MASK: u8 = 0xe0;

// Source operand (bit 3) of ALU and JMP classes.
pub const SRC_K: u8 = 0x00;
pub const SRC_X: u8 = 0x08;
pub const SRC_MASK: u8 = 0x08;

// ALU operations (bits 4-7).
pub const ALU_ADD: u8 = 0x00;
pub const ALU_SUB: u8 = 0x10;
pub const ALU_MUL: u8 = 0x20;
pub const ALU_DIV: u8 = 0x30;
pub const ALU_OR: u8 = 0x40;
pub const ALU_AND: u8 = 0x50;
pub const ALU_LSH: u8 = 0x60;
pub const ALU_RSH: u8 = 0x70;
pub const ALU_NEG: u8 = 0x80;
pub const ALU_MOD: u8 = 0x90;
pub const ALU_XOR: u8 = 0xa0;
pub const ALU_MOV: u8 = 0xb0;
pub const ALU_ARSH: u8 = 0xc0;
pub const ALU_END: u8 = 0xd0;
pub const OP_MASK: u8 = 0xf0;

// JMP operations (bits 4-7).
pub const JMP_JA: u8 = 0x00;
pub const JMP_JEQ: u8 = 0x10;
pub const JMP_JGT: u8 = 0x20;
pub const JMP_JGE: u8 = 0x30;
pub const JMP_JSET: u8 = 0x40;
pub const JMP_JNE: u8 = 0x50;
pub const JMP_JSGT: u8 = 0x60;
pub const JMP_JSGE: u8 = 0x70;
pub const JMP_CALL: u8 = 0x80;
pub const JMP_EXIT: u8 = 0x90;
pub const JMP_JLT: u8 = 0xa0;
pub const JMP_JLE: u8 = 0xb0;
pub const JMP_JSLT: u8 = 0xc0;
pub const JMP_JSLE: u8 = 0xd0;
pub const JMP_JCOND: u8 = 0xe0;

// Atomic operations (imm field of STX|ATOMIC).
pub const ATOMIC_FETCH: i32 = 0x01;
pub const ATOMIC_ADD: i32 = 0x00;
pub const ATOMIC_OR: i32 = 0x40;
pub const ATOMIC_AND: i32 = 0x50;
pub const ATOMIC_XOR: i32 = 0xa0;
pub const ATOMIC_XCHG: i32 = 0xe0 | ATOMIC_FETCH;
pub const ATOMIC_CMPXCHG: i32 = 0xf0 | ATOMIC_FETCH;

// `lddw` pseudo sources (src field of the first slot).
pub const PSEUDO_IMM64: u8 = 0;
pub const PSEUDO_MAP_FD: u8 = 1;
pub const PSEUDO_MAP_VALUE: u8 = 2;
pub const PSEUDO_BTF_ID: u8 = 3;
pub const PSEUDO_FUNC: u8 = 4;
pub const PSEUDO_MAP_IDX: u8 = 5;
pub const PSEUDO_MAP_IDX_VALUE: u8 = 6;

// Call kinds (src field of JMP|CALL).
pub const CALL_HELPER: u8 = 0;
pub const CALL_LOCAL: u8 = 1;
pub const CALL_KFUNC: u8 = 2;

/// The `lddw` opcode (`LD | IMM | DW`).
pub const LDDW: u8 = CLS_LD | MODE_IMM | SZ_DW;
/// `exit`.
pub const EXIT: u8 = CLS_JMP | JMP_EXIT;
/// `call imm`.
pub const CALL: u8 = CLS_JMP | JMP_CALL;
/// `callx reg`.
pub const CALLX: u8 = CLS_JMP | JMP_CALL | SRC_X;

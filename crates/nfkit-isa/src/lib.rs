//! The eBPF instruction set of RFC 9669 (ISA v4) as nfkit models it.
//!
//! * [`insn`]: the structured instruction ([`Insn`]) and the raw 8-byte slot.
//! * [`opcode`]: the opcode field values.
//! * [`encode`] / [`decode`]: exact, lossless conversion between the two;
//!   decoding rejects reserved bits with the slot and field named.
//! * [`helpers`]: kernel helper names by id.
//! * [`asm`] / [`disasm`]: text in the llvm and bpf_conformance syntaxes.

#![forbid(unsafe_code)]

pub mod asm;
pub mod decode;
pub mod disasm;
pub mod encode;
pub mod helpers;
pub mod insn;
pub mod opcode;

pub use asm::{assemble, assemble_program, AsmError, Program, SymbolRef, Syntax};
pub use decode::{
    decode_bytes, decode_one, decode_program, raw_slots, DecodeError, DecodeErrorKind, Field,
};
pub use disasm::{disassemble, Annotation, DisasmOptions};
pub use encode::{encode_bytes, encode_program};
pub use insn::*;

//! Encoding [`Btf`] into `.BTF` bytes, with a string table that callers
//! (the `.BTF.ext` encoder) can add their own strings to.

use super::parse::{HEADER_LEN, MAGIC};
use super::*;
use std::collections::HashMap;

/// A BTF string table under construction: deduplicated, offset 0 is "".
#[derive(Clone, Debug)]
pub struct StringTable {
    bytes: Vec<u8>,
    index: HashMap<String, u32>,
}

impl Default for StringTable {
    fn default() -> Self {
        StringTable::new()
    }
}

impl StringTable {
    pub fn new() -> StringTable {
        let mut index = HashMap::new();
        index.insert(String::new(), 0);
        StringTable {
            bytes: vec![0],
            index,
        }
    }

    /// The offset of `s`, adding it if new.
    pub fn add(&mut self, s: &str) -> u32 {
        if let Some(&off) = self.index.get(s) {
            return off;
        }
        let off = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s.as_bytes());
        self.bytes.push(0);
        self.index.insert(s.to_string(), off);
        off
    }

    /// The table's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

fn info(kind: u32, vlen: usize, kind_flag: bool) -> u32 {
    (u32::from(kind_flag) << 31) | (kind << 24) | (vlen as u32 & 0xffff)
}

impl Btf {
    /// Encodes the types; strings go to `strings` (so that `.BTF.ext`
    /// can share the table). Finish with [`Btf::encode_with`].
    fn encode_types(&self, strings: &mut StringTable) -> Vec<u8> {
        let mut e = Encoder {
            out: Vec::new(),
            strings,
        };
        for t in self.types.iter().skip(1) {
            e.ty(t);
        }
        e.out
    }

    /// Encodes `.BTF` bytes on their own.
    pub fn encode(&self) -> Vec<u8> {
        let mut strings = StringTable::new();
        let types = self.encode_types(&mut strings);
        assemble(&types, &strings)
    }

    /// Encodes the types and lets `more` add strings to the same table
    /// (e.g. file names and source lines for `.BTF.ext`) before the
    /// blob is finished. Returns the `.BTF` bytes and `more`'s result.
    pub fn encode_with<T>(&self, more: impl FnOnce(&mut StringTable) -> T) -> (Vec<u8>, T) {
        let mut strings = StringTable::new();
        let types = self.encode_types(&mut strings);
        let extra = more(&mut strings);
        (assemble(&types, &strings), extra)
    }
}

/// Type records being encoded, their strings added to `strings` (each
/// type's name before those of its members).
struct Encoder<'s> {
    out: Vec<u8>,
    strings: &'s mut StringTable,
}

impl Encoder<'_> {
    fn w(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// The record header: name, info, and size or type.
    fn head(&mut self, name: u32, info: u32, size_or_type: u32) {
        self.w(name);
        self.w(info);
        self.w(size_or_type);
    }

    /// The record of `t` (nothing for `Void`, type 0).
    fn ty(&mut self, t: &Type) {
        let name = self.strings.add(&t.name);
        let k = t.kind.number();
        match &t.kind {
            Kind::Void => {}
            Kind::Int {
                size,
                encoding,
                offset,
                bits,
            } => {
                self.head(name, info(k, 0, false), *size);
                self.w((u32::from(*encoding & 0x0f) << 24)
                    | (u32::from(*offset) << 16)
                    | u32::from(*bits));
            }
            Kind::Ptr { ty }
            | Kind::Typedef { ty }
            | Kind::Volatile { ty }
            | Kind::Const { ty }
            | Kind::Restrict { ty } => self.head(name, info(k, 0, false), *ty),
            Kind::TypeTag { ty, attr } => self.head(name, info(k, 0, *attr), *ty),
            Kind::Array {
                elem,
                index,
                nelems,
            } => {
                self.head(name, info(k, 0, false), 0);
                self.w(*elem);
                self.w(*index);
                self.w(*nelems);
            }
            Kind::Struct { size, members } | Kind::Union { size, members } => {
                self.composite(name, k, *size, members)
            }
            Kind::Enum {
                size,
                signed,
                values,
            } => {
                self.head(name, info(k, values.len(), *signed), *size);
                self.enumerators(values, false);
            }
            Kind::Enum64 {
                size,
                signed,
                values,
            } => {
                self.head(name, info(k, values.len(), *signed), *size);
                self.enumerators(values, true);
            }
            Kind::Fwd { union } => self.head(name, info(k, 0, *union), 0),
            Kind::Func { proto, linkage } => {
                self.head(name, info(k, linkage.to_u32() as usize, false), *proto)
            }
            Kind::FuncProto { ret, params } => {
                self.head(name, info(k, params.len(), false), *ret);
                self.params(params);
            }
            Kind::Var { ty, linkage } => {
                self.head(name, info(k, 0, false), *ty);
                self.w(linkage.to_u32());
            }
            Kind::Datasec { size, vars } => {
                self.head(name, info(k, vars.len(), false), *size);
                self.vars(vars);
            }
            Kind::Float { size } => self.head(name, info(k, 0, false), *size),
            Kind::DeclTag {
                ty,
                component,
                attr,
            } => {
                self.head(name, info(k, 0, *attr), *ty);
                self.w(*component as u32);
            }
        }
    }

    /// Enumerators with 32-bit values, or 64-bit ones (low half first).
    fn enumerators(&mut self, values: &[EnumValue], wide: bool) {
        for v in values {
            let n = self.strings.add(&v.name);
            self.w(n);
            self.w(v.value as u64 as u32);
            if wide {
                self.w((v.value as u64 >> 32) as u32);
            }
        }
    }

    /// Function parameters: name and type.
    fn params(&mut self, params: &[Param]) {
        for p in params {
            let n = self.strings.add(&p.name);
            self.w(n);
            self.w(p.ty);
        }
    }

    /// `DATASEC` entries: variable, offset, size.
    fn vars(&mut self, vars: &[VarSecinfo]) {
        for v in vars {
            self.w(v.ty);
            self.w(v.offset);
            self.w(v.size);
        }
    }

    /// A struct or union: the kind flag (and bitfield sizes in the member
    /// offsets) only when a member is a bitfield.
    fn composite(&mut self, name: u32, k: u32, size: u32, members: &[Member]) {
        let bitfields = members.iter().any(|m| m.bitfield_size != 0);
        self.head(name, info(k, members.len(), bitfields), size);
        for m in members {
            let n = self.strings.add(&m.name);
            self.w(n);
            self.w(m.ty);
            self.w(if bitfields {
                (m.bitfield_size << 24) | (m.bit_offset & 0x00ff_ffff)
            } else {
                m.bit_offset
            });
        }
    }
}

fn assemble(types: &[u8], strings: &StringTable) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + types.len() + strings.bytes().len());
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(1);
    out.push(0);
    for v in [
        HEADER_LEN as u32,
        0,
        types.len() as u32,
        types.len() as u32,
        strings.bytes().len() as u32,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(types);
    out.extend_from_slice(strings.bytes());
    out
}

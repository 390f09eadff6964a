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
        let mut out = Vec::new();
        let mut w = |v: u32| out.extend_from_slice(&v.to_le_bytes());
        for t in self.types.iter().skip(1) {
            let name = strings.add(&t.name);
            let k = t.kind.number();
            match &t.kind {
                Kind::Void => {}
                Kind::Int {
                    size,
                    encoding,
                    offset,
                    bits,
                } => {
                    w(name);
                    w(info(k, 0, false));
                    w(*size);
                    w((u32::from(*encoding & 0x0f) << 24)
                        | (u32::from(*offset) << 16)
                        | u32::from(*bits));
                }
                Kind::Ptr { ty }
                | Kind::Typedef { ty }
                | Kind::Volatile { ty }
                | Kind::Const { ty }
                | Kind::Restrict { ty } => {
                    w(name);
                    w(info(k, 0, false));
                    w(*ty);
                }
                Kind::TypeTag { ty, attr } => {
                    w(name);
                    w(info(k, 0, *attr));
                    w(*ty);
                }
                Kind::Array {
                    elem,
                    index,
                    nelems,
                } => {
                    w(name);
                    w(info(k, 0, false));
                    w(0);
                    w(*elem);
                    w(*index);
                    w(*nelems);
                }
                Kind::Struct { size, members } | Kind::Union { size, members } => {
                    let bitfields = members.iter().any(|m| m.bitfield_size != 0);
                    w(name);
                    w(info(k, members.len(), bitfields));
                    w(*size);
                    for m in members {
                        w(strings.add(&m.name));
                        w(m.ty);
                        w(if bitfields {
                            (m.bitfield_size << 24) | (m.bit_offset & 0x00ff_ffff)
                        } else {
                            m.bit_offset
                        });
                    }
                }
                Kind::Enum {
                    size,
                    signed,
                    values,
                } => {
                    w(name);
                    w(info(k, values.len(), *signed));
                    w(*size);
                    for v in values {
                        w(strings.add(&v.name));
                        w(v.value as u32);
                    }
                }
                Kind::Enum64 {
                    size,
                    signed,
                    values,
                } => {
                    w(name);
                    w(info(k, values.len(), *signed));
                    w(*size);
                    for v in values {
                        w(strings.add(&v.name));
                        w(v.value as u64 as u32);
                        w((v.value as u64 >> 32) as u32);
                    }
                }
                Kind::Fwd { union } => {
                    w(name);
                    w(info(k, 0, *union));
                    w(0);
                }
                Kind::Func { proto, linkage } => {
                    w(name);
                    w(info(k, linkage.to_u32() as usize, false));
                    w(*proto);
                }
                Kind::FuncProto { ret, params } => {
                    w(name);
                    w(info(k, params.len(), false));
                    w(*ret);
                    for p in params {
                        w(strings.add(&p.name));
                        w(p.ty);
                    }
                }
                Kind::Var { ty, linkage } => {
                    w(name);
                    w(info(k, 0, false));
                    w(*ty);
                    w(linkage.to_u32());
                }
                Kind::Datasec { size, vars } => {
                    w(name);
                    w(info(k, vars.len(), false));
                    w(*size);
                    for v in vars {
                        w(v.ty);
                        w(v.offset);
                        w(v.size);
                    }
                }
                Kind::Float { size } => {
                    w(name);
                    w(info(k, 0, false));
                    w(*size);
                }
                Kind::DeclTag {
                    ty,
                    component,
                    attr,
                } => {
                    w(name);
                    w(info(k, 0, *attr));
                    w(*ty);
                    w(*component as u32);
                }
            }
        }
        out
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

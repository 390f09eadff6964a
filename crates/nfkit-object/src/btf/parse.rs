//! Parsing `.BTF` bytes into [`Btf`], checking every bound, string offset
//! and type id on the way.

use super::*;

/// `struct btf_header` size.
pub(crate) const HEADER_LEN: usize = 24;
pub(crate) const MAGIC: u16 = 0xeb9f;

/// A little-endian reader over a byte slice that reports truncation.
pub(crate) struct Cursor<'a> {
    pub data: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(data: &'a [u8], pos: usize) -> Cursor<'a> {
        Cursor { data, pos }
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], BtfError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let s = &self.data[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(BtfError::Truncated {
                what,
                offset: self.pos,
                need: n,
                len: self.data.len(),
            }),
        }
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, BtfError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, BtfError> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, BtfError> {
        Ok(self.bytes(1, what)?[0])
    }
}

/// The string section of a BTF blob.
#[derive(Clone, Copy)]
pub(crate) struct Strings<'a> {
    pub data: &'a [u8],
}

impl<'a> Strings<'a> {
    /// The NUL-terminated string at `off`.
    pub fn get(&self, off: u32, type_id: u32) -> Result<&'a str, BtfError> {
        let start = off as usize;
        let rest = self.data.get(start..).ok_or(BtfError::StringOffset {
            offset: off,
            type_id,
            len: self.data.len(),
        })?;
        if rest.is_empty() {
            return Err(BtfError::StringOffset {
                offset: off,
                type_id,
                len: self.data.len(),
            });
        }
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(BtfError::BadString(off))?;
        std::str::from_utf8(&rest[..end]).map_err(|_| BtfError::BadString(off))
    }
}

/// The parts of a BTF blob: header fields, type bytes and strings.
pub(crate) struct Layout<'a> {
    pub types: &'a [u8],
    pub strings: Strings<'a>,
}

pub(crate) fn layout(data: &[u8]) -> Result<Layout<'_>, BtfError> {
    let mut c = Cursor::new(data, 0);
    let magic = c.u16("header")?;
    if magic != MAGIC {
        return Err(BtfError::Magic(magic));
    }
    let version = c.u8("header")?;
    if version != 1 {
        return Err(BtfError::Version(version));
    }
    let flags = c.u8("header")?;
    if flags != 0 {
        return Err(BtfError::Header(format!("flags {flags} must be 0")));
    }
    let hdr_len = c.u32("header")? as usize;
    let type_off = c.u32("header")? as usize;
    let type_len = c.u32("header")? as usize;
    let str_off = c.u32("header")? as usize;
    let str_len = c.u32("header")? as usize;
    if hdr_len < HEADER_LEN || hdr_len > data.len() {
        return Err(BtfError::Header(format!(
            "header length {hdr_len} (blob is {} bytes)",
            data.len()
        )));
    }
    let body = &data[hdr_len..];
    let section = |off: usize, len: usize, what: &str| -> Result<&[u8], BtfError> {
        off.checked_add(len)
            .and_then(|end| body.get(off..end))
            .ok_or_else(|| {
                BtfError::Header(format!(
                    "{what} section at {off}+{len} is outside the blob ({} bytes after the header)",
                    body.len()
                ))
            })
    };
    let types = section(type_off, type_len, "type")?;
    let strings = section(str_off, str_len, "string")?;
    if !type_len.is_multiple_of(4) || !type_off.is_multiple_of(4) {
        return Err(BtfError::Header(format!(
            "type section {type_off}+{type_len} is not 4-byte aligned"
        )));
    }
    if strings.first().is_some_and(|&b| b != 0) {
        return Err(BtfError::Header(
            "string section does not start with an empty string".into(),
        ));
    }
    if strings.last().is_some_and(|&b| b != 0) {
        return Err(BtfError::Header(
            "string section does not end with NUL".into(),
        ));
    }
    Ok(Layout {
        types,
        strings: Strings { data: strings },
    })
}

fn check_name(name: &str, type_id: u32, allowed: bool, kind: &str) -> Result<(), BtfError> {
    if !allowed && !name.is_empty() {
        return Err(BtfError::Invalid {
            type_id,
            why: format!("{kind} must not have a name (has '{name}')"),
        });
    }
    Ok(())
}

impl Btf {
    /// Parses and validates a `.BTF` blob.
    pub fn parse(data: &[u8]) -> Result<Btf, BtfError> {
        let l = layout(data)?;
        let mut c = Cursor::new(l.types, 0);
        let mut btf = Btf::new();
        while c.pos < l.types.len() {
            let id = btf.len();
            let ty = parse_type(&mut c, l.strings, id)?;
            btf.types.push(ty);
        }
        btf.validate()?;
        Ok(btf)
    }
}

fn parse_type(c: &mut Cursor<'_>, s: Strings<'_>, id: u32) -> Result<Type, BtfError> {
    let name_off = c.u32("type")?;
    let info = c.u32("type")?;
    let size_or_type = c.u32("type")?;
    let vlen = (info & 0xffff) as usize;
    let kind_no = (info >> 24) & 0x1f;
    let kind_flag = info >> 31 != 0;
    if info & 0x60ff_0000 != 0 {
        return Err(BtfError::Invalid {
            type_id: id,
            why: format!("reserved bits of info 0x{info:08x} are set"),
        });
    }
    let name = s.get(name_off, id)?.to_string();
    let no_vlen = |k: &str| -> Result<(), BtfError> {
        if vlen != 0 {
            return Err(BtfError::Invalid {
                type_id: id,
                why: format!("{k} has vlen {vlen}, must be 0"),
            });
        }
        Ok(())
    };
    // The kernel caps vlen at 0xffff; each record is at least 8 bytes,
    // so a lying vlen is caught by the cursor's bound check.
    let kind = match kind_no {
        1 => {
            no_vlen("INT")?;
            let v = c.u32("INT")?;
            Kind::Int {
                size: size_or_type,
                encoding: ((v >> 24) & 0x0f) as u8,
                offset: ((v >> 16) & 0xff) as u8,
                bits: (v & 0xff) as u8,
            }
        }
        2 => {
            no_vlen("PTR")?;
            check_name(&name, id, false, "PTR")?;
            Kind::Ptr { ty: size_or_type }
        }
        3 => {
            no_vlen("ARRAY")?;
            check_name(&name, id, false, "ARRAY")?;
            Kind::Array {
                elem: c.u32("ARRAY")?,
                index: c.u32("ARRAY")?,
                nelems: c.u32("ARRAY")?,
            }
        }
        4 | 5 => {
            let mut members = Vec::with_capacity(vlen.min(1024));
            for _ in 0..vlen {
                let mname = s.get(c.u32("member")?, id)?.to_string();
                let ty = c.u32("member")?;
                let off = c.u32("member")?;
                let (bit_offset, bitfield_size) = if kind_flag {
                    (off & 0x00ff_ffff, off >> 24)
                } else {
                    (off, 0)
                };
                members.push(Member {
                    name: mname,
                    ty,
                    bit_offset,
                    bitfield_size,
                });
            }
            if kind_no == 4 {
                Kind::Struct {
                    size: size_or_type,
                    members,
                }
            } else {
                Kind::Union {
                    size: size_or_type,
                    members,
                }
            }
        }
        6 => {
            let mut values = Vec::with_capacity(vlen.min(1024));
            for _ in 0..vlen {
                let vname = s.get(c.u32("enumerator")?, id)?.to_string();
                let raw = c.u32("enumerator")?;
                let value = if kind_flag {
                    raw as i32 as i64
                } else {
                    raw as i64
                };
                values.push(EnumValue { name: vname, value });
            }
            Kind::Enum {
                size: size_or_type,
                signed: kind_flag,
                values,
            }
        }
        7 => {
            no_vlen("FWD")?;
            Kind::Fwd { union: kind_flag }
        }
        8 => {
            no_vlen("TYPEDEF")?;
            Kind::Typedef { ty: size_or_type }
        }
        9 => {
            no_vlen("VOLATILE")?;
            Kind::Volatile { ty: size_or_type }
        }
        10 => {
            no_vlen("CONST")?;
            Kind::Const { ty: size_or_type }
        }
        11 => {
            no_vlen("RESTRICT")?;
            Kind::Restrict { ty: size_or_type }
        }
        12 => Kind::Func {
            proto: size_or_type,
            linkage: Linkage::from_u32(vlen as u32),
        },
        13 => {
            check_name(&name, id, false, "FUNC_PROTO")?;
            let mut params = Vec::with_capacity(vlen.min(1024));
            for _ in 0..vlen {
                let pname = s.get(c.u32("param")?, id)?.to_string();
                let ty = c.u32("param")?;
                params.push(Param { name: pname, ty });
            }
            Kind::FuncProto {
                ret: size_or_type,
                params,
            }
        }
        14 => {
            no_vlen("VAR")?;
            Kind::Var {
                ty: size_or_type,
                linkage: Linkage::from_u32(c.u32("VAR")?),
            }
        }
        15 => {
            let mut vars = Vec::with_capacity(vlen.min(1024));
            for _ in 0..vlen {
                vars.push(VarSecinfo {
                    ty: c.u32("DATASEC entry")?,
                    offset: c.u32("DATASEC entry")?,
                    size: c.u32("DATASEC entry")?,
                });
            }
            Kind::Datasec {
                size: size_or_type,
                vars,
            }
        }
        16 => {
            no_vlen("FLOAT")?;
            Kind::Float { size: size_or_type }
        }
        17 => {
            no_vlen("DECL_TAG")?;
            Kind::DeclTag {
                ty: size_or_type,
                component: c.u32("DECL_TAG")? as i32,
                attr: kind_flag,
            }
        }
        18 => {
            no_vlen("TYPE_TAG")?;
            Kind::TypeTag {
                ty: size_or_type,
                attr: kind_flag,
            }
        }
        19 => {
            let mut values = Vec::with_capacity(vlen.min(1024));
            for _ in 0..vlen {
                let vname = s.get(c.u32("enumerator")?, id)?.to_string();
                let lo = c.u32("enumerator")? as u64;
                let hi = c.u32("enumerator")? as u64;
                values.push(EnumValue {
                    name: vname,
                    value: ((hi << 32) | lo) as i64,
                });
            }
            Kind::Enum64 {
                size: size_or_type,
                signed: kind_flag,
                values,
            }
        }
        k => {
            return Err(BtfError::UnknownKind {
                type_id: id,
                kind: k,
            })
        }
    };
    Ok(Type { name, kind })
}

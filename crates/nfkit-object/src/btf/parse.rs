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

/// Parses the type record at `c` (type `id`; names from `s`).
fn parse_type<'a>(c: &mut Cursor<'a>, s: Strings<'a>, id: u32) -> Result<Type, BtfError> {
    let name_off = c.u32("type")?;
    let info = c.u32("type")?;
    let size_or_type = c.u32("type")?;
    if info & 0x60ff_0000 != 0 {
        return Err(BtfError::Invalid {
            type_id: id,
            why: format!("reserved bits of info 0x{info:08x} are set"),
        });
    }
    let name = s.get(name_off, id)?.to_string();
    let mut r = Record {
        c,
        s,
        id,
        name,
        vlen: (info & 0xffff) as usize,
        kind_flag: info >> 31 != 0,
        size_or_type,
    };
    let kind = r.kind((info >> 24) & 0x1f)?;
    Ok(Type { name: r.name, kind })
}

/// A type record being parsed: its header's fields, and the cursor at the
/// kind's data that follows it.
struct Record<'c, 'a> {
    c: &'c mut Cursor<'a>,
    s: Strings<'a>,
    id: u32,
    name: String,
    vlen: usize,
    kind_flag: bool,
    size_or_type: u32,
}

impl Record<'_, '_> {
    /// Kind number `kind_no` with its data. The kernel caps vlen at
    /// 0xffff; each record is at least 8 bytes, so a lying vlen is caught
    /// by the cursor's bound check.
    fn kind(&mut self, kind_no: u32) -> Result<Kind, BtfError> {
        let (t, flag) = (self.size_or_type, self.kind_flag);
        Ok(match kind_no {
            1 => self.int()?,
            2 => {
                self.no_vlen("PTR")?;
                check_name(&self.name, self.id, false, "PTR")?;
                Kind::Ptr { ty: t }
            }
            3 => self.array()?,
            4 | 5 => self.composite(kind_no == 4)?,
            6 => self.enum32()?,
            7 => {
                self.no_vlen("FWD")?;
                Kind::Fwd { union: flag }
            }
            8 => Kind::Typedef {
                ty: self.modifier("TYPEDEF")?,
            },
            9 => Kind::Volatile {
                ty: self.modifier("VOLATILE")?,
            },
            10 => Kind::Const {
                ty: self.modifier("CONST")?,
            },
            11 => Kind::Restrict {
                ty: self.modifier("RESTRICT")?,
            },
            12 => Kind::Func {
                proto: t,
                linkage: Linkage::from_u32(self.vlen as u32),
            },
            13 => self.func_proto()?,
            14 => {
                self.no_vlen("VAR")?;
                Kind::Var {
                    ty: t,
                    linkage: Linkage::from_u32(self.c.u32("VAR")?),
                }
            }
            15 => self.datasec()?,
            16 => {
                self.no_vlen("FLOAT")?;
                Kind::Float { size: t }
            }
            17 => {
                self.no_vlen("DECL_TAG")?;
                Kind::DeclTag {
                    ty: t,
                    component: self.c.u32("DECL_TAG")? as i32,
                    attr: flag,
                }
            }
            18 => Kind::TypeTag {
                ty: self.modifier("TYPE_TAG")?,
                attr: flag,
            },
            19 => self.enum64()?,
            k => {
                return Err(BtfError::UnknownKind {
                    type_id: self.id,
                    kind: k,
                })
            }
        })
    }

    /// Kind `k` has no vlen records.
    fn no_vlen(&self, k: &str) -> Result<(), BtfError> {
        if self.vlen != 0 {
            return Err(BtfError::Invalid {
                type_id: self.id,
                why: format!("{k} has vlen {}, must be 0", self.vlen),
            });
        }
        Ok(())
    }

    /// A kind `k` that only refers to a type (typedef, qualifiers, type
    /// tag): that type.
    fn modifier(&self, k: &str) -> Result<u32, BtfError> {
        self.no_vlen(k)?;
        Ok(self.size_or_type)
    }

    /// The name of a member, enumerator or parameter.
    fn member_name(&mut self, what: &'static str) -> Result<String, BtfError> {
        Ok(self.s.get(self.c.u32(what)?, self.id)?.to_string())
    }

    fn int(&mut self) -> Result<Kind, BtfError> {
        self.no_vlen("INT")?;
        let v = self.c.u32("INT")?;
        Ok(Kind::Int {
            size: self.size_or_type,
            encoding: ((v >> 24) & 0x0f) as u8,
            offset: ((v >> 16) & 0xff) as u8,
            bits: (v & 0xff) as u8,
        })
    }

    fn array(&mut self) -> Result<Kind, BtfError> {
        self.no_vlen("ARRAY")?;
        check_name(&self.name, self.id, false, "ARRAY")?;
        Ok(Kind::Array {
            elem: self.c.u32("ARRAY")?,
            index: self.c.u32("ARRAY")?,
            nelems: self.c.u32("ARRAY")?,
        })
    }

    /// A struct (`is_struct`) or union with its members.
    fn composite(&mut self, is_struct: bool) -> Result<Kind, BtfError> {
        let mut members = Vec::with_capacity(self.vlen.min(1024));
        for _ in 0..self.vlen {
            let mname = self.member_name("member")?;
            let ty = self.c.u32("member")?;
            let off = self.c.u32("member")?;
            let (bit_offset, bitfield_size) = if self.kind_flag {
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
        let size = self.size_or_type;
        Ok(if is_struct {
            Kind::Struct { size, members }
        } else {
            Kind::Union { size, members }
        })
    }

    /// An enum of 32-bit values (signed when the kind flag is set).
    fn enum32(&mut self) -> Result<Kind, BtfError> {
        let mut values = Vec::with_capacity(self.vlen.min(1024));
        for _ in 0..self.vlen {
            let vname = self.member_name("enumerator")?;
            let raw = self.c.u32("enumerator")?;
            let value = if self.kind_flag {
                raw as i32 as i64
            } else {
                raw as i64
            };
            values.push(EnumValue { name: vname, value });
        }
        Ok(Kind::Enum {
            size: self.size_or_type,
            signed: self.kind_flag,
            values,
        })
    }

    /// An enum of 64-bit values (low, then high half).
    fn enum64(&mut self) -> Result<Kind, BtfError> {
        let mut values = Vec::with_capacity(self.vlen.min(1024));
        for _ in 0..self.vlen {
            let vname = self.member_name("enumerator")?;
            let lo = self.c.u32("enumerator")? as u64;
            let hi = self.c.u32("enumerator")? as u64;
            values.push(EnumValue {
                name: vname,
                value: ((hi << 32) | lo) as i64,
            });
        }
        Ok(Kind::Enum64 {
            size: self.size_or_type,
            signed: self.kind_flag,
            values,
        })
    }

    fn func_proto(&mut self) -> Result<Kind, BtfError> {
        check_name(&self.name, self.id, false, "FUNC_PROTO")?;
        let mut params = Vec::with_capacity(self.vlen.min(1024));
        for _ in 0..self.vlen {
            let pname = self.member_name("param")?;
            let ty = self.c.u32("param")?;
            params.push(Param { name: pname, ty });
        }
        Ok(Kind::FuncProto {
            ret: self.size_or_type,
            params,
        })
    }

    fn datasec(&mut self) -> Result<Kind, BtfError> {
        let mut vars = Vec::with_capacity(self.vlen.min(1024));
        for _ in 0..self.vlen {
            vars.push(VarSecinfo {
                ty: self.c.u32("DATASEC entry")?,
                offset: self.c.u32("DATASEC entry")?,
                size: self.c.u32("DATASEC entry")?,
            });
        }
        Ok(Kind::Datasec {
            size: self.size_or_type,
            vars,
        })
    }
}

//! `.BTF.ext`: per-section function info (which BTF `FUNC` starts at which
//! instruction), line info (source file, line, column and text of
//! instructions) and CO-RE relocations (which instruction holds a value
//! that depends on the kernel's types). In ELF objects instruction
//! offsets are in bytes from the start of the section.

use super::parse::{layout, Cursor};
use super::write::StringTable;
use super::BtfError;

/// One `bpf_func_info` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncInfo {
    /// Byte offset of the function in its section.
    pub insn_off: u32,
    pub type_id: u32,
}

/// One `bpf_line_info` record, strings resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineRecord {
    /// Byte offset of the instruction in its section.
    pub insn_off: u32,
    pub file: String,
    /// The source line's text.
    pub text: String,
    pub line: u32,
    pub col: u32,
}

/// One `bpf_core_relo` record, its access string resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreRecord {
    /// Byte offset of the instruction in its section.
    pub insn_off: u32,
    /// The local (object's) BTF type the access starts from.
    pub type_id: u32,
    /// The access string (`0:1:2`: index into the root, then member or
    /// array indices).
    pub access: String,
    /// `enum bpf_core_relo_kind` (see [`crate::co_re::CoreKind`]).
    pub kind: u32,
}

/// The records of one section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionInfo<T> {
    pub section: String,
    pub records: Vec<T>,
}

/// A parsed `.BTF.ext`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BtfExt {
    pub func_info: Vec<SectionInfo<FuncInfo>>,
    pub line_info: Vec<SectionInfo<LineRecord>>,
    /// CO-RE relocations, applied by the linker ([`crate::co_re`]).
    pub core_relos: Vec<SectionInfo<CoreRecord>>,
}

const EXT_MAGIC: u16 = 0xeb9f;
const FUNC_REC: usize = 8;
const LINE_REC: usize = 16;
const CORE_REC: usize = 16;

fn ext_err(msg: String) -> BtfError {
    BtfError::Ext(msg)
}

impl BtfExt {
    /// Parses `.BTF.ext` bytes; strings are looked up in the `.BTF` blob `btf`.
    pub fn parse(data: &[u8], btf: &[u8]) -> Result<BtfExt, BtfError> {
        BtfExt::parse_with(data, btf, true)
    }

    /// [`BtfExt::parse`], with the line info read only when `lines`
    /// (without it: its layout is checked — bounds, record size and
    /// counts — but no record's strings are looked up and `line_info`
    /// is empty). Loading an update does
    /// without source lines: two `String`s per line were a fifth of
    /// reading the object (docs/update.md, "Swap time").
    pub fn parse_with(data: &[u8], btf: &[u8], lines: bool) -> Result<BtfExt, BtfError> {
        let strings = layout(btf)?.strings;
        let mut c = Cursor::new(data, 0);
        let magic = c.u16("BTF.ext header")?;
        if magic != EXT_MAGIC {
            return Err(ext_err(format!("bad magic 0x{magic:04x}")));
        }
        let version = c.u8("BTF.ext header")?;
        if version != 1 {
            return Err(ext_err(format!("unsupported version {version}")));
        }
        let _flags = c.u8("BTF.ext header")?;
        let hdr_len = c.u32("BTF.ext header")? as usize;
        let func_off = c.u32("BTF.ext header")? as usize;
        let func_len = c.u32("BTF.ext header")? as usize;
        let line_off = c.u32("BTF.ext header")? as usize;
        let line_len = c.u32("BTF.ext header")? as usize;
        if !(24..=data.len()).contains(&hdr_len) {
            return Err(ext_err(format!(
                "header length {hdr_len} (section is {} bytes)",
                data.len()
            )));
        }
        let (core_off, core_len) = if hdr_len >= 32 {
            (
                c.u32("BTF.ext header")? as usize,
                c.u32("BTF.ext header")? as usize,
            )
        } else {
            (0, 0)
        };
        let body = &data[hdr_len..];
        let part = |off: usize, len: usize, what: &str| -> Result<&[u8], BtfError> {
            off.checked_add(len)
                .and_then(|e| body.get(off..e))
                .ok_or_else(|| ext_err(format!("{what} at {off}+{len} is outside the section")))
        };
        let mut ext = BtfExt::default();
        for (sec, recs) in info_sections(
            part(func_off, func_len, "func_info")?,
            FUNC_REC,
            "func_info",
        )? {
            let section = strings.get(sec, 0)?.to_string();
            let records = recs
                .iter()
                .map(|r| FuncInfo {
                    insn_off: le32(r, 0),
                    type_id: le32(r, 4),
                })
                .collect();
            ext.func_info.push(SectionInfo { section, records });
        }
        let line_sections = info_sections(
            part(line_off, line_len, "line_info")?,
            LINE_REC,
            "line_info",
        )?;
        for (sec, recs) in line_sections.into_iter().filter(|_| lines) {
            let section = strings.get(sec, 0)?.to_string();
            let mut records = Vec::with_capacity(recs.len());
            for r in recs {
                let col_line = le32(r, 12);
                records.push(LineRecord {
                    insn_off: le32(r, 0),
                    file: strings.get(le32(r, 4), 0)?.to_string(),
                    text: strings.get(le32(r, 8), 0)?.to_string(),
                    line: col_line >> 10,
                    col: col_line & 0x3ff,
                });
            }
            ext.line_info.push(SectionInfo { section, records });
        }
        if core_len > 0 {
            for (sec, recs) in info_sections(
                part(core_off, core_len, "core_relo")?,
                CORE_REC,
                "core_relo",
            )? {
                let section = strings.get(sec, 0)?.to_string();
                let mut records = Vec::with_capacity(recs.len());
                for r in recs {
                    records.push(CoreRecord {
                        insn_off: le32(r, 0),
                        type_id: le32(r, 4),
                        access: strings.get(le32(r, 8), 0)?.to_string(),
                        kind: le32(r, 12),
                    });
                }
                ext.core_relos.push(SectionInfo { section, records });
            }
        }
        Ok(ext)
    }

    /// Encodes `.BTF.ext` bytes; file names, line texts and section names
    /// are added to `strings` (the `.BTF` blob's table, see
    /// [`super::Btf::encode_with`]).
    pub fn encode(&self, strings: &mut StringTable) -> Vec<u8> {
        let mut func = Vec::new();
        if !self.func_info.is_empty() {
            func.extend_from_slice(&(FUNC_REC as u32).to_le_bytes());
            for s in &self.func_info {
                func.extend_from_slice(&strings.add(&s.section).to_le_bytes());
                func.extend_from_slice(&(s.records.len() as u32).to_le_bytes());
                for r in &s.records {
                    func.extend_from_slice(&r.insn_off.to_le_bytes());
                    func.extend_from_slice(&r.type_id.to_le_bytes());
                }
            }
        }
        let mut line = Vec::new();
        if !self.line_info.is_empty() {
            line.extend_from_slice(&(LINE_REC as u32).to_le_bytes());
            for s in &self.line_info {
                line.extend_from_slice(&strings.add(&s.section).to_le_bytes());
                line.extend_from_slice(&(s.records.len() as u32).to_le_bytes());
                for r in &s.records {
                    line.extend_from_slice(&r.insn_off.to_le_bytes());
                    line.extend_from_slice(&strings.add(&r.file).to_le_bytes());
                    line.extend_from_slice(&strings.add(&r.text).to_le_bytes());
                    let col_line = (r.line << 10) | r.col.min(0x3ff);
                    line.extend_from_slice(&col_line.to_le_bytes());
                }
            }
        }
        let mut out = Vec::new();
        out.extend_from_slice(&EXT_MAGIC.to_le_bytes());
        out.push(1);
        out.push(0);
        let hdr_len = 32u32;
        for v in [
            hdr_len,
            0,
            func.len() as u32,
            func.len() as u32,
            line.len() as u32,
            (func.len() + line.len()) as u32,
            0,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&func);
        out.extend_from_slice(&line);
        out
    }
}

fn le32(b: &[u8], at: usize) -> u32 {
    match b.get(at..at + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// A section name offset and its raw records.
type InfoSection<'a> = (u32, Vec<&'a [u8]>);

/// Splits one info part (`rec_size`, then per section: name offset,
/// count, records) into (section name offset, records).
fn info_sections<'a>(
    part: &'a [u8],
    min_rec: usize,
    what: &'static str,
) -> Result<Vec<InfoSection<'a>>, BtfError> {
    let mut out = Vec::new();
    if part.is_empty() {
        return Ok(out);
    }
    let mut c = Cursor::new(part, 0);
    let rec_size = c.u32(what)? as usize;
    if rec_size < min_rec || !rec_size.is_multiple_of(4) || rec_size > 1024 {
        return Err(ext_err(format!("{what} record size {rec_size}")));
    }
    while c.pos < part.len() {
        let sec = c.u32(what)?;
        let n = c.u32(what)? as usize;
        if n == 0 {
            return Err(ext_err(format!("{what} section with no records")));
        }
        let total = n
            .checked_mul(rec_size)
            .ok_or_else(|| ext_err(format!("{what} record count {n} overflows")))?;
        let recs = c.bytes(total, what)?;
        out.push((sec, recs.chunks_exact(rec_size).collect()));
    }
    Ok(out)
}

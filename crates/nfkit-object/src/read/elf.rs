//! The ELF layer: header checks, sections, symbols, relocations.

use super::err;
use crate::error::{Location, ReadError, ReadErrorKind};
use object::elf as e;
use object::read::elf::{FileHeader, Rel as _, SectionHeader as _, Sym as _};
use object::Endianness;

/// eBPF relocation types (`R_BPF_*`).
pub(crate) const R_BPF_NONE: u32 = 0;
pub(crate) const R_BPF_64_64: u32 = 1;
pub(crate) const R_BPF_64_ABS64: u32 = 2;
pub(crate) const R_BPF_64_ABS32: u32 = 3;
pub(crate) const R_BPF_64_NODYLD32: u32 = 4;
pub(crate) const R_BPF_64_32: u32 = 10;

const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;

/// A section of the file.
pub(crate) struct Section<'a> {
    pub index: usize,
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    /// File contents (empty for `SHT_NOBITS`).
    pub data: &'a [u8],
    /// `sh_size` (also for `SHT_NOBITS`).
    pub size: u64,
    /// Relocations that apply to this section.
    pub rels: Vec<Rel>,
    /// A `SHT_RELA` section targets this section.
    pub has_rela: bool,
}

impl Section<'_> {
    pub fn is_code(&self) -> bool {
        self.sh_type == e::SHT_PROGBITS && self.flags & u64::from(e::SHF_EXECINSTR) != 0
    }

    pub fn is_alloc(&self) -> bool {
        self.flags & u64::from(e::SHF_ALLOC) != 0
    }
}

/// One `Elf64_Rel`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rel {
    pub offset: u64,
    pub sym: usize,
    pub rtype: u32,
}

/// Symbol type, as far as nfkit cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SymKind {
    NoType,
    Object,
    Func,
    Section,
    File,
    Other(u8),
}

/// One symbol.
#[derive(Clone, Debug)]
pub(crate) struct Symbol {
    pub name: String,
    /// Defining section, `None` for undefined (and absolute/common).
    pub section: Option<usize>,
    pub value: u64,
    pub size: u64,
    pub kind: SymKind,
    pub bind: u8,
}

impl Symbol {
    pub fn is_local(&self) -> bool {
        self.bind == e::STB_LOCAL
    }
}

/// A parsed ELF file.
pub(crate) struct Elf<'a> {
    pub sections: Vec<Section<'a>>,
    pub symbols: Vec<Symbol>,
}

fn malformed(what: impl std::fmt::Display) -> ReadError {
    ReadError::bare(ReadErrorKind::Malformed(what.to_string()))
}

/// A malformed-file error at a file offset (no section to name).
fn file_err(offset: u64, what: impl std::fmt::Display) -> ReadError {
    ReadError::new(
        Location {
            offset: Some(offset),
            ..Location::default()
        },
        ReadErrorKind::Malformed(what.to_string()),
    )
}

/// The ELF types of the files read.
type Header = e::FileHeader64<Endianness>;
type SectionHeader = e::SectionHeader64<Endianness>;
type SectionTable<'a> = object::read::elf::SectionTable<'a, Header>;
type SymbolTable<'a> = object::read::elf::SymbolTable<'a, Header>;

/// The file and its section header table, which the sections, the
/// symbols and the relocations are read from.
struct Tables<'a> {
    data: &'a [u8],
    endian: Endianness,
    table: SectionTable<'a>,
    /// File offset of the section header table.
    shoff: u64,
}

impl<'a> Elf<'a> {
    pub fn parse(data: &'a [u8]) -> Result<Elf<'a>, ReadError> {
        check_ident(data)?;
        let t = Tables::new(data)?;
        let mut sections = t.sections()?;
        let (symbols, symtab_index) = t.symbols(&sections)?;
        t.relocations(&mut sections, symbols.len(), symtab_index)?;
        Ok(Elf { sections, symbols })
    }

    pub fn section_by_name(&self, name: &str) -> Option<&Section<'a>> {
        self.sections.iter().find(|s| s.name == name)
    }

    pub fn section_name(&self, index: usize) -> &str {
        self.sections
            .get(index)
            .map(|s| s.name.as_str())
            .unwrap_or("?")
    }

    /// Symbols defined in section `index` (excluding section/file symbols).
    pub fn symbols_in(&self, index: usize) -> impl Iterator<Item = (usize, &Symbol)> {
        self.symbols.iter().enumerate().filter(move |(_, s)| {
            s.section == Some(index) && !matches!(s.kind, SymKind::Section | SymKind::File)
        })
    }
}

/// The ELF identification: magic, 64-bit, little-endian.
fn check_ident(data: &[u8]) -> Result<(), ReadError> {
    if data.len() < 4 || data[..4] != [0x7f, b'E', b'L', b'F'] {
        return Err(ReadError::bare(ReadErrorKind::NotElf));
    }
    if data.len() < 16 {
        return Err(malformed(format!(
            "file is {} bytes, shorter than the ELF identification",
            data.len()
        )));
    }
    if data[EI_CLASS] != e::ELFCLASS64 {
        return Err(ReadError::bare(ReadErrorKind::Not64Bit));
    }
    match data[EI_DATA] {
        e::ELFDATA2LSB => Ok(()),
        e::ELFDATA2MSB => Err(ReadError::bare(ReadErrorKind::BigEndian)),
        d => Err(malformed(format!("unknown ELF data encoding {d}"))),
    }
}

impl<'a> Tables<'a> {
    /// The file header (an eBPF relocatable file) and the section table.
    fn new(data: &'a [u8]) -> Result<Tables<'a>, ReadError> {
        let header = Header::parse(data).map_err(|_| {
            file_err(
                0,
                format!(
                    "file is {} bytes, shorter than the ELF header (64)",
                    data.len()
                ),
            )
        })?;
        let endian = header.endian().map_err(malformed)?;
        let machine = header.e_machine(endian);
        if machine != e::EM_BPF {
            return Err(ReadError::bare(ReadErrorKind::WrongMachine(machine)));
        }
        let ty = header.e_type(endian);
        if ty != e::ET_REL {
            return Err(ReadError::bare(ReadErrorKind::NotRelocatable(ty)));
        }
        let shoff = header.e_shoff(endian);
        let table = header.sections(endian, data).map_err(|e| {
            file_err(
                shoff,
                format!(
                    "section header table ({} entries of {} bytes, file is {} bytes): {e}",
                    header.e_shnum(endian),
                    header.e_shentsize(endian),
                    data.len()
                ),
            )
        })?;
        Ok(Tables {
            data,
            endian,
            table,
            shoff,
        })
    }

    /// Every section, with its name and contents (no relocations yet).
    fn sections(&self) -> Result<Vec<Section<'a>>, ReadError> {
        let (data, endian) = (self.data, self.endian);
        let mut sections = Vec::with_capacity(self.table.len());
        for (i, sh) in self.table.enumerate() {
            let name = self.table.section_name(endian, sh).map_err(|e| {
                file_err(
                    self.shoff.saturating_add(i.0 as u64 * 64),
                    format!("header of section {}: name: {e}", i.0),
                )
            })?;
            let name = String::from_utf8_lossy(name).into_owned();
            let sec_data = sh.data(endian, data).map_err(|e| {
                err(
                    Location::section(&name),
                    ReadErrorKind::Malformed(format!(
                        "contents at file offset 0x{:x}, {} bytes, file is {} bytes: {e}",
                        sh.sh_offset(endian),
                        sh.sh_size(endian),
                        data.len()
                    )),
                )
            })?;
            sections.push(Section {
                index: i.0,
                name,
                sh_type: sh.sh_type(endian),
                flags: sh.sh_flags(endian),
                data: sec_data,
                size: sh.sh_size(endian),
                rels: Vec::new(),
                has_rela: false,
            });
        }
        Ok(sections)
    }

    /// The symbols of the (single) symbol table, and that table's index.
    fn symbols(&self, sections: &[Section<'_>]) -> Result<(Vec<Symbol>, Option<usize>), ReadError> {
        let mut symbols = Vec::new();
        let mut symtab_index = None;
        for (i, sh) in self.table.enumerate() {
            if sh.sh_type(self.endian) != e::SHT_SYMTAB {
                continue;
            }
            if symtab_index.is_some() {
                return Err(malformed("more than one symbol table"));
            }
            symtab_index = Some(i.0);
            let stname = &sections[i.0].name;
            let sym_err = |si: usize, what: String| {
                err(
                    Location::at(stname, si as u64 * 24),
                    ReadErrorKind::Malformed(what),
                )
            };
            let syms = sh
                .symbols(self.endian, self.data, &self.table, i)
                .map_err(|e| sym_err(0, format!("symbol table: {e}")))?
                .ok_or_else(|| sym_err(0, "symbol table".into()))?;
            for (si, sym) in syms.enumerate() {
                symbols.push(
                    self.symbol(&syms, si, sym, sections)
                        .map_err(|what| sym_err(si.0, what))?,
                );
            }
        }
        Ok((symbols, symtab_index))
    }

    /// Symbol `si` of `syms`; errors are what is wrong with it.
    fn symbol(
        &self,
        syms: &SymbolTable<'a>,
        si: object::SymbolIndex,
        sym: &e::Sym64<Endianness>,
        sections: &[Section<'_>],
    ) -> Result<Symbol, String> {
        let endian = self.endian;
        let name = syms
            .symbol_name(endian, sym)
            .map_err(|e| format!("symbol {}: {e}", si.0))?;
        let mut name = String::from_utf8_lossy(name).into_owned();
        let section = syms
            .symbol_section(endian, sym, si)
            .map_err(|e| format!("symbol {}: {e}", si.0))?
            .map(|s| s.0);
        if let Some(s) = section {
            if s >= sections.len() {
                return Err(format!(
                    "symbol '{name}' is in section {s}, which does not exist"
                ));
            }
        }
        let kind = match sym.st_type() {
            e::STT_NOTYPE => SymKind::NoType,
            e::STT_OBJECT => SymKind::Object,
            e::STT_FUNC => SymKind::Func,
            e::STT_SECTION => SymKind::Section,
            e::STT_FILE => SymKind::File,
            t => SymKind::Other(t),
        };
        if kind == SymKind::Section && name.is_empty() {
            if let Some(s) = section {
                name = sections[s].name.clone();
            }
        }
        Ok(Symbol {
            name,
            section,
            value: sym.st_value(endian),
            size: sym.st_size(endian),
            kind,
            bind: sym.st_bind(),
        })
    }

    /// Attaches the `SHT_REL` relocations to the sections they apply to
    /// (a `SHT_RELA` section only marks its target).
    fn relocations(
        &self,
        sections: &mut [Section<'a>],
        nsymbols: usize,
        symtab_index: Option<usize>,
    ) -> Result<(), ReadError> {
        for (i, sh) in self.table.enumerate() {
            let st = sh.sh_type(self.endian);
            if st != e::SHT_REL && st != e::SHT_RELA {
                continue;
            }
            let rname = sections[i.0].name.clone();
            let target = sh.sh_info(self.endian) as usize;
            if target == 0 || target >= sections.len() {
                return Err(err(
                    Location::section(&rname),
                    ReadErrorKind::Malformed(format!(
                        "relocations for section {target}, which does not exist"
                    )),
                ));
            }
            if st == e::SHT_RELA {
                sections[target].has_rela = true;
                continue;
            }
            if Some(sh.sh_link(self.endian) as usize) != symtab_index {
                return Err(err(
                    Location::section(&rname),
                    ReadErrorKind::Malformed(
                        "relocations refer to a table that is not the symbol table".into(),
                    ),
                ));
            }
            let rels = self.rels(sh, &rname, &sections[target].name, nsymbols)?;
            sections[target].rels.extend(rels);
        }
        Ok(())
    }

    /// The entries of `SHT_REL` section `sh` (called `rname`), which apply
    /// to section `tname`; each must name an existing symbol.
    fn rels(
        &self,
        sh: &SectionHeader,
        rname: &str,
        tname: &str,
        nsymbols: usize,
    ) -> Result<Vec<Rel>, ReadError> {
        let (rels, _) = sh
            .rel(self.endian, self.data)
            .map_err(|e| {
                err(
                    Location::section(rname),
                    ReadErrorKind::Malformed(e.to_string()),
                )
            })?
            .ok_or_else(|| {
                err(
                    Location::section(rname),
                    ReadErrorKind::Malformed("not a relocation section".into()),
                )
            })?;
        let mut out = Vec::with_capacity(rels.len());
        for r in rels {
            let sym = r.r_sym(self.endian) as usize;
            let offset = r.r_offset(self.endian);
            if sym >= nsymbols {
                return Err(err(
                    Location::at(tname, offset),
                    ReadErrorKind::BadRelocation(format!("symbol index {sym} does not exist")),
                ));
            }
            out.push(Rel {
                offset,
                sym,
                rtype: r.r_type(self.endian),
            });
        }
        Ok(out)
    }
}

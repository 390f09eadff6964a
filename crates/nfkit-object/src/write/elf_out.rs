//! Emitting sections, symbols and relocations as a little-endian ELF64
//! relocatable file for EM_BPF (with `object`'s low-level writer).

use crate::error::WriteError;
use object::elf;
use object::write::elf::{FileHeader, Rel, SectionHeader, SectionIndex, Sym, Writer};
use object::write::StringId;
use object::Endianness;

/// A section to write.
pub(crate) struct OutSection {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub align: u64,
    pub data: Vec<u8>,
    /// Size for `SHT_NOBITS` (else `data.len()`).
    pub nobits_size: u64,
    /// (offset, symbol index in `OutElf::symbols`, type).
    pub rels: Vec<(u64, usize, u32)>,
}

/// A symbol to write.
pub(crate) struct OutSymbol {
    pub name: String,
    /// Index into `OutElf::sections`.
    pub section: Option<usize>,
    pub value: u64,
    pub size: u64,
    pub st_type: u8,
    pub bind: u8,
}

#[derive(Default)]
pub(crate) struct OutElf {
    pub sections: Vec<OutSection>,
    pub symbols: Vec<OutSymbol>,
}

impl OutElf {
    pub fn add_section(&mut self, s: OutSection) -> usize {
        self.sections.push(s);
        self.sections.len() - 1
    }

    pub fn add_symbol(&mut self, s: OutSymbol) -> usize {
        self.symbols.push(s);
        self.symbols.len() - 1
    }

    /// The section symbol of section `idx` (created on first use).
    pub fn section_symbol(&mut self, idx: usize) -> usize {
        if let Some(i) = self
            .symbols
            .iter()
            .position(|s| s.st_type == elf::STT_SECTION && s.section == Some(idx))
        {
            return i;
        }
        self.add_symbol(OutSymbol {
            name: String::new(),
            section: Some(idx),
            value: 0,
            size: 0,
            st_type: elf::STT_SECTION,
            bind: elf::STB_LOCAL,
        })
    }

    /// Serialises the file.
    pub fn finish(&self) -> Result<Vec<u8>, WriteError> {
        let order = SymbolOrder::new(&self.symbols);
        // The writer borrows the names until it is done.
        let rel_names: Vec<String> = self
            .sections
            .iter()
            .map(|s| format!(".rel{}", s.name))
            .collect();
        let mut buf = Vec::new();
        let mut w = Writer::new(Endianness::Little, true, &mut buf);
        let r = self.reserve(&mut w, &order, &rel_names);
        w.write_file_header(&FileHeader {
            os_abi: elf::ELFOSABI_NONE,
            abi_version: 0,
            e_type: elf::ET_REL,
            e_machine: elf::EM_BPF,
            e_entry: 0,
            e_flags: 0,
        })
        .map_err(|e| WriteError::Elf(e.to_string()))?;
        self.write_contents(&mut w, &order)?;
        self.write_symbols(&mut w, &order, &r);
        w.write_strtab();
        w.write_shstrtab();
        self.write_section_headers(&mut w, &r);
        w.write_symtab_section_header(order.num_local);
        w.write_strtab_section_header();
        w.write_shstrtab_section_header();
        Ok(buf)
    }

    /// Reserves names, indices and file space for everything, in the
    /// order it is written.
    fn reserve<'a>(
        &'a self,
        w: &mut Writer<'a>,
        order: &SymbolOrder,
        rel_names: &'a [String],
    ) -> Reserved {
        w.reserve_file_header();
        w.reserve_null_section_index();
        let n = self.sections.len();
        let mut r = Reserved {
            sec_index: Vec::with_capacity(n),
            sec_name: Vec::with_capacity(n),
            rel_index: Vec::with_capacity(n),
            sym_names: Vec::new(),
            symtab: SectionIndex(0),
            offsets: Vec::with_capacity(n),
            rel_offsets: Vec::with_capacity(n),
        };
        for (i, s) in self.sections.iter().enumerate() {
            r.sec_name.push(w.add_section_name(s.name.as_bytes()));
            r.sec_index.push(w.reserve_section_index());
            if s.rels.is_empty() {
                r.rel_index.push(None);
            } else {
                let n = w.add_section_name(rel_names[i].as_bytes());
                r.rel_index.push(Some((n, w.reserve_section_index())));
            }
        }
        r.sym_names = self
            .symbols
            .iter()
            .map(|s| (!s.name.is_empty()).then(|| w.add_string(s.name.as_bytes())))
            .collect();
        w.reserve_null_symbol_index();
        for &i in &order.order {
            w.reserve_symbol_index(self.symbols[i].section.map(|s| r.sec_index[s]));
        }
        r.symtab = w.reserve_symtab_section_index();
        w.reserve_strtab_section_index();
        w.reserve_shstrtab_section_index();
        for s in &self.sections {
            let off = if s.sh_type == elf::SHT_NOBITS {
                0
            } else {
                w.reserve(s.data.len(), s.align.max(1) as usize)
            };
            r.offsets.push(off);
            r.rel_offsets.push(if s.rels.is_empty() {
                0
            } else {
                w.reserve_relocations(s.rels.len(), false)
            });
        }
        w.reserve_symtab();
        w.reserve_strtab();
        w.reserve_shstrtab();
        w.reserve_section_headers();
        r
    }

    /// Each section's data, followed by its relocations.
    fn write_contents(&self, w: &mut Writer<'_>, order: &SymbolOrder) -> Result<(), WriteError> {
        for s in &self.sections {
            if s.sh_type != elf::SHT_NOBITS {
                w.write_align(s.align.max(1) as usize);
                w.write(&s.data);
            }
            if !s.rels.is_empty() {
                w.write_align_relocation();
                for &(offset, sym, r_type) in &s.rels {
                    let r_sym = order.pos.get(sym).copied().ok_or_else(|| {
                        WriteError::Elf(format!("relocation in {} names no symbol", s.name))
                    })?;
                    w.write_relocation(
                        false,
                        &Rel {
                            r_offset: offset,
                            r_sym,
                            r_type,
                            r_addend: 0,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// The symbol table, locals first.
    fn write_symbols(&self, w: &mut Writer<'_>, order: &SymbolOrder, r: &Reserved) {
        w.write_null_symbol();
        for &i in &order.order {
            let s = &self.symbols[i];
            let section = s.section.map(|x| r.sec_index[x]);
            w.write_symbol(&Sym {
                name: r.sym_names[i],
                section,
                st_info: (s.bind << 4) | (s.st_type & 0x0f),
                st_other: elf::STV_DEFAULT,
                st_shndx: match section {
                    Some(SectionIndex(x)) if x < u32::from(elf::SHN_LORESERVE) => x as u16,
                    Some(_) => elf::SHN_XINDEX,
                    None => elf::SHN_UNDEF,
                },
                st_value: s.value,
                st_size: s.size,
            });
        }
    }

    /// The headers of the sections and of their relocation sections.
    fn write_section_headers(&self, w: &mut Writer<'_>, r: &Reserved) {
        w.write_null_section_header();
        for (i, s) in self.sections.iter().enumerate() {
            let nobits = s.sh_type == elf::SHT_NOBITS;
            w.write_section_header(&SectionHeader {
                name: Some(r.sec_name[i]),
                sh_type: s.sh_type,
                sh_flags: s.flags,
                sh_addr: 0,
                sh_offset: if nobits { 0 } else { r.offsets[i] as u64 },
                sh_size: if nobits {
                    s.nobits_size
                } else {
                    s.data.len() as u64
                },
                sh_link: 0,
                sh_info: 0,
                sh_addralign: s.align.max(1),
                sh_entsize: 0,
            });
            if let Some((name, _)) = r.rel_index[i] {
                w.write_relocation_section_header(
                    name,
                    r.sec_index[i],
                    r.symtab,
                    r.rel_offsets[i],
                    s.rels.len(),
                    false,
                );
            }
        }
    }
}

/// Where each symbol goes: locals first, as ELF requires.
struct SymbolOrder {
    /// Symbol indices (into `OutElf::symbols`) in table order.
    order: Vec<usize>,
    /// Per symbol: its index in the table (after the null symbol).
    pos: Vec<u32>,
    /// Number of local symbols, the null symbol included (`sh_info`).
    num_local: u32,
}

impl SymbolOrder {
    fn new(symbols: &[OutSymbol]) -> SymbolOrder {
        let mut order: Vec<usize> = (0..symbols.len()).collect();
        order.sort_by_key(|&i| symbols[i].bind != elf::STB_LOCAL);
        let mut pos = vec![0u32; symbols.len()];
        for (p, &i) in order.iter().enumerate() {
            pos[i] = p as u32 + 1;
        }
        let num_local = 1 + order
            .iter()
            .filter(|&&i| symbols[i].bind == elf::STB_LOCAL)
            .count() as u32;
        SymbolOrder {
            order,
            pos,
            num_local,
        }
    }
}

/// What was reserved in the writer, per section and symbol.
struct Reserved {
    sec_index: Vec<SectionIndex>,
    sec_name: Vec<StringId>,
    /// Name and index of each section's relocation section, if any.
    rel_index: Vec<Option<(StringId, SectionIndex)>>,
    sym_names: Vec<Option<StringId>>,
    symtab: SectionIndex,
    /// File offset of each section's data.
    offsets: Vec<usize>,
    /// File offset of each section's relocations.
    rel_offsets: Vec<usize>,
}

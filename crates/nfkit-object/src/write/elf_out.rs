//! Emitting sections, symbols and relocations as a little-endian ELF64
//! relocatable file for EM_BPF (with `object`'s low-level writer).

use crate::error::WriteError;
use object::elf;
use object::write::elf::{FileHeader, Rel, SectionHeader, SectionIndex, Sym, Writer};
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
        // Locals first, as ELF requires; remember where each symbol went.
        let mut order: Vec<usize> = (0..self.symbols.len()).collect();
        order.sort_by_key(|&i| self.symbols[i].bind != elf::STB_LOCAL);
        let mut sym_pos = vec![0u32; self.symbols.len()];
        for (pos, &i) in order.iter().enumerate() {
            sym_pos[i] = pos as u32 + 1;
        }
        let num_local = 1 + order
            .iter()
            .filter(|&&i| self.symbols[i].bind == elf::STB_LOCAL)
            .count() as u32;
        let rel_names: Vec<String> = self
            .sections
            .iter()
            .map(|s| format!(".rel{}", s.name))
            .collect();

        let mut buf = Vec::new();
        let mut w = Writer::new(Endianness::Little, true, &mut buf);
        w.reserve_file_header();
        w.reserve_null_section_index();
        let mut sec_index = Vec::with_capacity(self.sections.len());
        let mut sec_name = Vec::with_capacity(self.sections.len());
        let mut rel_index = Vec::with_capacity(self.sections.len());
        for (i, s) in self.sections.iter().enumerate() {
            sec_name.push(w.add_section_name(s.name.as_bytes()));
            sec_index.push(w.reserve_section_index());
            if s.rels.is_empty() {
                rel_index.push(None);
            } else {
                let n = w.add_section_name(rel_names[i].as_bytes());
                rel_index.push(Some((n, w.reserve_section_index())));
            }
        }
        let sym_names: Vec<_> = self
            .symbols
            .iter()
            .map(|s| (!s.name.is_empty()).then(|| w.add_string(s.name.as_bytes())))
            .collect();
        w.reserve_null_symbol_index();
        for &i in &order {
            w.reserve_symbol_index(self.symbols[i].section.map(|s| sec_index[s]));
        }
        let symtab = w.reserve_symtab_section_index();
        w.reserve_strtab_section_index();
        w.reserve_shstrtab_section_index();
        // Data.
        let mut offsets = Vec::with_capacity(self.sections.len());
        let mut rel_offsets = Vec::with_capacity(self.sections.len());
        for s in &self.sections {
            let off = if s.sh_type == elf::SHT_NOBITS {
                0
            } else {
                w.reserve(s.data.len(), s.align.max(1) as usize)
            };
            offsets.push(off);
            rel_offsets.push(if s.rels.is_empty() {
                0
            } else {
                w.reserve_relocations(s.rels.len(), false)
            });
        }
        w.reserve_symtab();
        w.reserve_strtab();
        w.reserve_shstrtab();
        w.reserve_section_headers();

        w.write_file_header(&FileHeader {
            os_abi: elf::ELFOSABI_NONE,
            abi_version: 0,
            e_type: elf::ET_REL,
            e_machine: elf::EM_BPF,
            e_entry: 0,
            e_flags: 0,
        })
        .map_err(|e| WriteError::Elf(e.to_string()))?;
        for s in &self.sections {
            if s.sh_type != elf::SHT_NOBITS {
                w.write_align(s.align.max(1) as usize);
                w.write(&s.data);
            }
            if !s.rels.is_empty() {
                w.write_align_relocation();
                for &(offset, sym, r_type) in &s.rels {
                    let r_sym = sym_pos.get(sym).copied().ok_or_else(|| {
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
        w.write_null_symbol();
        for &i in &order {
            let s = &self.symbols[i];
            let section = s.section.map(|x| sec_index[x]);
            w.write_symbol(&Sym {
                name: sym_names[i],
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
        w.write_strtab();
        w.write_shstrtab();
        w.write_null_section_header();
        for (i, s) in self.sections.iter().enumerate() {
            w.write_section_header(&SectionHeader {
                name: Some(sec_name[i]),
                sh_type: s.sh_type,
                sh_flags: s.flags,
                sh_addr: 0,
                sh_offset: if s.sh_type == elf::SHT_NOBITS {
                    0
                } else {
                    offsets[i] as u64
                },
                sh_size: if s.sh_type == elf::SHT_NOBITS {
                    s.nobits_size
                } else {
                    s.data.len() as u64
                },
                sh_link: 0,
                sh_info: 0,
                sh_addralign: s.align.max(1),
                sh_entsize: 0,
            });
            if let Some((name, _)) = rel_index[i] {
                w.write_relocation_section_header(
                    name,
                    sec_index[i],
                    symtab,
                    rel_offsets[i],
                    s.rels.len(),
                    false,
                );
            }
        }
        w.write_symtab_section_header(num_local);
        w.write_strtab_section_header();
        w.write_shstrtab_section_header();
        Ok(buf)
    }
}

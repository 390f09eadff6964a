//! The ELF object bpf_conformance's runner writes with `--elf true`
//! (its `bpf_writer_classic`, through ELFIO), written here by hand: an
//! `ET_REL`/`EM_BPF` file with sections `""`, `.shstrtab`, `.symtab` and
//! the code section. The symbol table links to `.shstrtab` (which also
//! holds the symbol names) with `sh_info` of one; the code section is
//! `.text`, or `xdp` with `--xdp_prolog true` (`SHF_ALLOC |
//! SHF_EXECINSTR`, alignment 4), and its only symbol is the global
//! function `main` covering all of it. No relocations: the suite's
//! programs use no maps. The file offsets are ours: the header, section
//! contents in section order, then the section header table.

const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;
const STB_GLOBAL: u8 = 1;
const STT_FUNC: u8 = 2;

struct Shdr {
    name: u32,
    sh_type: u32,
    flags: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
    align: u64,
    entsize: u64,
}

fn align(buf: &mut Vec<u8>, to: usize) {
    while !buf.len().is_multiple_of(to) {
        buf.push(0);
    }
}

/// The runner's object for program `code` in section `section`.
pub fn write(section: &str, code: &[u8]) -> Vec<u8> {
    let mut shstrtab = vec![0u8];
    let name = |s: &str, tab: &mut Vec<u8>| {
        let at = tab.len() as u32;
        tab.extend_from_slice(s.as_bytes());
        tab.push(0);
        at
    };
    let n_shstrtab = name(".shstrtab", &mut shstrtab);
    let n_symtab = name(".symtab", &mut shstrtab);
    let n_code = name(section, &mut shstrtab);
    let n_main = name("main", &mut shstrtab);
    // The null symbol, then `main` (global function of section 3).
    let mut symtab = vec![0u8; 24];
    symtab.extend_from_slice(&n_main.to_le_bytes());
    symtab.push(STB_GLOBAL << 4 | STT_FUNC);
    symtab.push(0);
    symtab.extend_from_slice(&3u16.to_le_bytes());
    symtab.extend_from_slice(&0u64.to_le_bytes());
    symtab.extend_from_slice(&(code.len() as u64).to_le_bytes());

    let mut out = vec![0u8; 64];
    let mut headers = vec![Shdr {
        name: 0,
        sh_type: 0,
        flags: 0,
        offset: 0,
        size: 0,
        link: 0,
        info: 0,
        align: 0,
        entsize: 0,
    }];
    for (nm, ty, flags, data, link, info, al, ent) in [
        (n_shstrtab, SHT_STRTAB, 0, &shstrtab[..], 0, 0, 1, 0),
        (n_symtab, SHT_SYMTAB, 0, &symtab[..], 1, 1, 4, 24),
        (
            n_code,
            SHT_PROGBITS,
            SHF_ALLOC | SHF_EXECINSTR,
            code,
            0,
            0,
            4,
            0,
        ),
    ] {
        align(&mut out, al as usize);
        headers.push(Shdr {
            name: nm,
            sh_type: ty,
            flags,
            offset: out.len() as u64,
            size: data.len() as u64,
            link,
            info,
            align: al,
            entsize: ent,
        });
        out.extend_from_slice(data);
    }
    align(&mut out, 8);
    let shoff = out.len() as u64;
    for h in &headers {
        out.extend_from_slice(&h.name.to_le_bytes());
        out.extend_from_slice(&h.sh_type.to_le_bytes());
        out.extend_from_slice(&h.flags.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes()); // sh_addr
        out.extend_from_slice(&h.offset.to_le_bytes());
        out.extend_from_slice(&h.size.to_le_bytes());
        out.extend_from_slice(&h.link.to_le_bytes());
        out.extend_from_slice(&h.info.to_le_bytes());
        out.extend_from_slice(&h.align.to_le_bytes());
        out.extend_from_slice(&h.entsize.to_le_bytes());
    }
    // The ELF header.
    let mut hdr = Vec::with_capacity(64);
    hdr.extend_from_slice(b"\x7fELF");
    hdr.extend_from_slice(&[2, 1, 1, 0]); // 64-bit, little-endian, version 1, SYSV
    hdr.extend_from_slice(&[0; 8]);
    hdr.extend_from_slice(&1u16.to_le_bytes()); // ET_REL
    hdr.extend_from_slice(&247u16.to_le_bytes()); // EM_BPF
    hdr.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
    hdr.extend_from_slice(&0u64.to_le_bytes()); // e_entry
    hdr.extend_from_slice(&0u64.to_le_bytes()); // e_phoff
    hdr.extend_from_slice(&shoff.to_le_bytes());
    hdr.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    hdr.extend_from_slice(&64u16.to_le_bytes()); // e_ehsize
    hdr.extend_from_slice(&56u16.to_le_bytes()); // e_phentsize
    hdr.extend_from_slice(&0u16.to_le_bytes()); // e_phnum
    hdr.extend_from_slice(&64u16.to_le_bytes()); // e_shentsize
    hdr.extend_from_slice(&(headers.len() as u16).to_le_bytes());
    hdr.extend_from_slice(&1u16.to_le_bytes()); // e_shstrndx
    out[..64].copy_from_slice(&hdr);
    out
}

/// The runner's `--xdp_prolog true` prolog for `size` bytes of memory
/// (added only when there is memory): r0 = -1; r6 = r1; r1 = ctx->data;
/// r2 = ctx->data_end; exit with r0 unless `size` bytes fit; r2 = size.
pub fn xdp_prolog(size: usize) -> Vec<u8> {
    let size = size as i32;
    let insn = |op: u8, dst: u8, src: u8, off: i16, imm: i32| {
        let mut b = vec![op, dst | src << 4];
        b.extend_from_slice(&off.to_le_bytes());
        b.extend_from_slice(&imm.to_le_bytes());
        b
    };
    [
        insn(0xb7, 0, 0, 0, -1),
        insn(0xbf, 6, 1, 0, 0),
        insn(0x61, 1, 6, 0, 0),
        insn(0x61, 2, 6, 4, 0),
        insn(0xbf, 3, 1, 0, 0),
        insn(0x07, 3, 0, 0, size),
        insn(0xbd, 3, 2, 1, 0),
        insn(0x95, 0, 0, 0, 0),
        insn(0xb7, 2, 0, 0, size),
    ]
    .concat()
}

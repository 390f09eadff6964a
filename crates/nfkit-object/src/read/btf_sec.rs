//! `.BTF` and `.BTF.ext` sections: relocations applied (clang leaves
//! `DATASEC` variable offsets to `R_BPF_64_ABS32`/`R_BPF_64_NODYLD32`
//! relocations), then `DATASEC` sizes and offsets completed from the ELF
//! sections and symbols, as libbpf does before loading.

use super::elf::{
    Elf, Section, SymKind, R_BPF_64_ABS32, R_BPF_64_ABS64, R_BPF_64_NODYLD32, R_BPF_NONE,
};
use super::err;
use crate::btf::ext::BtfExt;
use crate::btf::{Btf, Kind, Linkage};
use crate::error::{Location, ReadError, ReadErrorKind};

/// Section bytes with 32/64-bit absolute relocations applied (S + A).
fn relocated(elf: &Elf<'_>, sec: &Section<'_>) -> Result<Vec<u8>, ReadError> {
    let mut data = sec.data.to_vec();
    for r in &sec.rels {
        let loc = Location::at(&sec.name, r.offset);
        let sym = &elf.symbols[r.sym];
        let width = match r.rtype {
            R_BPF_64_ABS32 | R_BPF_64_NODYLD32 => 4,
            R_BPF_64_ABS64 => 8,
            R_BPF_NONE => continue,
            t => {
                return Err(err(
                    loc.with_symbol(&sym.name),
                    ReadErrorKind::RelocationType(t),
                ))
            }
        };
        let start = usize::try_from(r.offset).ok();
        let field = start
            .and_then(|s| s.checked_add(width).map(|e| (s, e)))
            .and_then(|(s, e)| data.get_mut(s..e))
            .ok_or_else(|| {
                err(
                    loc.clone().with_symbol(&sym.name),
                    ReadErrorKind::BadRelocation("offset is outside the section".into()),
                )
            })?;
        if width == 4 {
            let a = u32::from_le_bytes([field[0], field[1], field[2], field[3]]);
            let v = a.wrapping_add(sym.value as u32);
            field.copy_from_slice(&v.to_le_bytes());
        } else {
            let mut b = [0u8; 8];
            b.copy_from_slice(field);
            let v = u64::from_le_bytes(b).wrapping_add(sym.value);
            field.copy_from_slice(&v.to_le_bytes());
        }
    }
    Ok(data)
}

/// Reads `.BTF` (fixed up) and `.BTF.ext`, if present (its line info
/// only when `lines`).
pub(crate) fn read(elf: &Elf<'_>, lines: bool) -> Result<(Option<Btf>, Option<BtfExt>), ReadError> {
    let Some(sec) = elf.section_by_name(".BTF") else {
        if elf.section_by_name(".BTF.ext").is_some() {
            return Err(err(
                Location::section(".BTF.ext"),
                ReadErrorKind::Btf(crate::btf::BtfError::Ext(".BTF.ext without .BTF".into())),
            ));
        }
        return Ok((None, None));
    };
    let bytes = relocated(elf, sec)?;
    let mut btf =
        Btf::parse(&bytes).map_err(|e| err(Location::section(".BTF"), ReadErrorKind::Btf(e)))?;
    fixup_datasecs(elf, &mut btf)?;
    let ext = match elf.section_by_name(".BTF.ext") {
        Some(xs) => {
            let xbytes = relocated(elf, xs)?;
            let ext = BtfExt::parse_with(&xbytes, &bytes, lines)
                .map_err(|e| err(Location::section(".BTF.ext"), ReadErrorKind::Btf(e)))?;
            Some(ext)
        }
        None => None,
    };
    Ok((Some(btf), ext))
}

/// Sets `DATASEC` sizes from the ELF sections and variable offsets from
/// the symbols (clang may leave either 0).
fn fixup_datasecs(elf: &Elf<'_>, btf: &mut Btf) -> Result<(), ReadError> {
    for id in 1..btf.len() {
        let Some(t) = btf.get(id) else { continue };
        let Kind::Datasec { vars, .. } = &t.kind else {
            continue;
        };
        let name = t.name.clone();
        let Some(sec) = elf.section_by_name(&name) else {
            // Externs (.kconfig, .ksyms) have no section.
            continue;
        };
        let mut offsets = Vec::with_capacity(vars.len());
        for v in vars {
            let (vname, linkage) = match btf.get(v.ty).map(|t| (&t.name, &t.kind)) {
                Some((n, Kind::Var { linkage, .. })) => (n.clone(), *linkage),
                _ => (String::new(), Linkage::Static),
            };
            let sym = elf.symbols_in(sec.index).find(|(_, s)| {
                s.name == vname && matches!(s.kind, SymKind::Object | SymKind::NoType)
            });
            offsets.push(match (sym, linkage) {
                (Some((_, s)), _) => u32::try_from(s.value).map_err(|_| {
                    err(
                        Location::section(&name).with_symbol(&vname),
                        ReadErrorKind::Malformed("symbol value does not fit 32 bits".into()),
                    )
                })?,
                (None, _) => v.offset,
            });
        }
        let size = u32::try_from(sec.size).map_err(|_| {
            err(
                Location::section(&name),
                ReadErrorKind::Malformed("section larger than 4 GiB".into()),
            )
        })?;
        if let Some(t) = btf.get_mut(id) {
            if let Kind::Datasec { size: s, vars } = &mut t.kind {
                if *s == 0 {
                    *s = size;
                }
                for (v, off) in vars.iter_mut().zip(offsets) {
                    v.offset = off;
                }
            }
        }
    }
    Ok(())
}

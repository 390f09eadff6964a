//! Declared arrays with initial contents turned into read-only global
//! data (`.rodata.NAME`), which every libbpf loader creates, fills from
//! the section and freezes, where `.nfkit.init.NAME` contents are filled
//! by nfkit's loaders only. Each `bpf_map_lookup_elem` of such a map
//! becomes the element's address in the section, as the kernel inlines
//! array lookups: with a constant key the `lddw` of the map becomes an
//! `lddw` of the element's address; with another, the key is loaded and
//! bounds-checked (`NULL` past the last entry) and the address computed.

use super::body::{use_def, Body};
use super::lookups::sites;
use crate::image::{MapKind, MapSpec, MapType};
use nfkit_isa::{AluOp, CallKind, Cond, Insn, LddwKind, Operand, Reg, Size, Width};

/// `bpf_map_lookup_elem`.
const LOOKUP: i32 = 1;
/// `BPF_F_RDONLY_PROG`.
const RDONLY_PROG: u32 = 1 << 7;

/// What [`arrays_to_rodata`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RodataReport {
    /// Maps now global data: (old name, section).
    pub converted: Vec<(String, String)>,
    /// Maps asked for but kept declared, and why.
    pub kept: Vec<(String, String)>,
}

/// One lookup of a map: (function, `lddw` index, `call` index).
type Site = (usize, usize, usize);

/// The lookups of map `m` in `bodies`, or why a reference of it is not
/// one (`lddw r1, m` followed in the same block by the lookup call,
/// nothing between reading or writing r1).
fn lookups_of(bodies: &[Body], m: usize) -> Result<Vec<Site>, String> {
    let mut out = Vec::new();
    for (f, b) in bodies.iter().enumerate() {
        let mut target = vec![false; b.insns.len() + 1];
        for t in b.jump.iter().flatten() {
            target[*t] = true;
        }
        for (k, insn) in b.insns.iter().enumerate() {
            let Insn::Lddw { kind, dst, imm, .. } = *insn else {
                continue;
            };
            if kind != LddwKind::MapIdx || usize::try_from(imm).ok() != Some(m) {
                continue;
            }
            let not_lookup = || format!("a reference at instruction {k} is not a lookup");
            if dst != Reg::R1 {
                return Err(not_lookup());
            }
            let mut c = k + 1;
            loop {
                let Some(next) = b.insns.get(c) else {
                    return Err(not_lookup());
                };
                if target[c] {
                    return Err(not_lookup());
                }
                if let Insn::Call {
                    kind: CallKind::Helper,
                    imm: LOOKUP,
                } = next
                {
                    break;
                }
                let (used, def) = use_def(next);
                if (used | def) & (1 << 1) != 0 || b.jump[c].is_some() || next.ends_block() {
                    return Err(not_lookup());
                }
                c += 1;
            }
            out.push((f, k, c));
        }
    }
    Ok(out)
}

/// Replaces instruction `at` of `b` with `seq` (whose jumps are indexes
/// into `seq`; `seq.len()` is the instruction after it).
fn splice(b: &mut Body, at: usize, seq: Vec<(Insn, Option<usize>)>) {
    let n = seq.len();
    let moved = |t: usize| if t > at { t + n - 1 } else { t };
    for j in b.jump.iter_mut().flatten() {
        *j = moved(*j);
    }
    for (k, _) in b.lines.iter_mut() {
        *k = moved(*k);
    }
    for (k, _) in b.core.iter_mut() {
        *k = moved(*k);
    }
    let (insns, jumps): (Vec<Insn>, Vec<Option<usize>>) =
        seq.into_iter().map(|(i, j)| (i, j.map(|j| at + j))).unzip();
    b.insns.splice(at..=at, insns);
    b.jump.splice(at..=at, jumps);
    b.call.splice(at..=at, std::iter::repeat_n(None, n));
}

/// The code of a lookup with the key at `r2` in an array of `n` values
/// of `vs` bytes whose first is at `r1`: `r0` = the value's address, or
/// 0 past the end.
fn lookup_code(n: u32, vs: u32) -> Result<Vec<(Insn, Option<usize>)>, String> {
    let vs = i32::try_from(vs).map_err(|_| format!("values of {vs} bytes"))?;
    let n = i32::try_from(n).map_err(|_| format!("{n} entries"))?;
    let alu = |op, dst, src| Insn::Alu {
        width: Width::W64,
        op,
        dst,
        src,
    };
    Ok(vec![
        (
            Insn::Ldx {
                size: Size::W,
                signed: false,
                dst: Reg::R0,
                src: Reg::R2,
                off: 0,
            },
            None,
        ),
        (
            Insn::Jmp {
                width: Width::W64,
                cond: Cond::Ge,
                dst: Reg::R0,
                src: Operand::Imm(n),
                off: 0,
            },
            Some(6),
        ),
        (alu(AluOp::Mul, Reg::R0, Operand::Imm(vs)), None),
        (alu(AluOp::Add, Reg::R1, Operand::Reg(Reg::R0)), None),
        (alu(AluOp::Mov, Reg::R0, Operand::Reg(Reg::R1)), None),
        (Insn::Ja { off: 0 }, Some(7)),
        (alu(AluOp::Mov, Reg::R0, Operand::Imm(0)), None),
    ])
}

/// Turns the maps of `bodies` that `pick` chooses (declared, non-per-CPU
/// arrays with initial contents, only looked up) into `.rodata.NAME`
/// global data of `maps`, rewriting their lookups in `bodies`.
pub(super) fn to_rodata(
    bodies: &mut [Body],
    maps: &mut [MapSpec],
    pick: &dyn Fn(&MapSpec) -> bool,
) -> RodataReport {
    let mut report = RodataReport::default();
    let named: Vec<String> = maps
        .iter()
        .filter_map(|s| s.inner.as_ref())
        .flat_map(|i| i.slots.iter().map(|s| s.map.clone()))
        .collect();
    for m in 0..maps.len() {
        let spec = &maps[m];
        if !pick(spec) {
            continue;
        }
        let keep = |why: String| (spec.name.clone(), why);
        let why = if spec.kind != MapKind::Declared || spec.map_type != MapType::Array {
            Some("it is not a declared array".to_string())
        } else if spec.data.is_none() {
            Some("it has no initial contents".to_string())
        } else if named.contains(&spec.name) {
            Some("a map of maps holds it".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            report.kept.push(keep(why));
            continue;
        }
        let found = match lookups_of(bodies, m) {
            Ok(f) => f,
            Err(why) => {
                report.kept.push(keep(why));
                continue;
            }
        };
        let (n, vs) = (spec.max_entries, spec.value_size);
        let Some(size) = n.checked_mul(vs).filter(|&s| s <= i32::MAX as u32) else {
            report
                .kept
                .push(keep(format!("{n} values of {vs} bytes are over 2 GiB")));
            continue;
        };
        let code = match lookup_code(n, vs) {
            Ok(c) => c,
            Err(why) => {
                report.kept.push(keep(why));
                continue;
            }
        };
        // Constant keys, before any instruction moves.
        let konst: Vec<Vec<(usize, u32)>> = bodies
            .iter()
            .map(|b| {
                sites(b, maps)
                    .into_iter()
                    .filter(|&(_, mi, _)| mi == m)
                    .map(|(k, _, key)| (k, key))
                    .collect()
            })
            .collect();
        // Last sites first: splicing moves only what follows.
        let mut found = found;
        found.sort_unstable_by(|a, b| b.cmp(a));
        for (f, l, c) in found {
            let key = konst[f].iter().find(|&&(k, _)| k == c).map(|&(_, key)| key);
            let b = &mut bodies[f];
            b.insns[l] = Insn::Lddw {
                kind: LddwKind::MapIdxValue,
                dst: Reg::R1,
                imm: m as i32,
                next_imm: key.map_or(0, |key| (key * vs) as i32),
            };
            match key {
                // In bounds (sites() checks): the address is r1.
                Some(_) => {
                    b.insns[c] = Insn::Alu {
                        width: Width::W64,
                        op: AluOp::Mov,
                        dst: Reg::R0,
                        src: Operand::Reg(Reg::R1),
                    }
                }
                None => splice(b, c, code.clone()),
            }
        }
        let spec = &mut maps[m];
        let section = format!(".rodata.{}", spec.name);
        let mut data = spec.data.take().unwrap_or_default();
        data.resize(size as usize, 0);
        report.converted.push((spec.name.clone(), section.clone()));
        *spec = MapSpec {
            name: section.clone(),
            kind: MapKind::Global {
                section,
                read_only: true,
            },
            map_type: MapType::Array,
            key_size: 4,
            value_size: size,
            max_entries: 1,
            flags: RDONLY_PROG,
            key_type_id: None,
            value_type_id: None,
            data: Some(data),
            pin_by_name: false,
            inner: None,
        };
    }
    report
}

#[cfg(test)]
mod tests {
    use crate::image::{Image, MapKind, MapSpec, MapType, ProgType};
    use crate::inline::testkit::{declared_map, lookup_at, mov};
    use nfkit_isa::{AluOp, Cond, Insn, LddwKind, Operand, Reg, Size, Width};

    fn table() -> MapSpec {
        MapSpec {
            max_entries: 3,
            flags: super::RDONLY_PROG,
            data: Some(vec![1, 0, 0, 0, 2]),
            ..declared_map("t", MapType::Array, 4, 4)
        }
    }

    /// `key` stored at r10-4 (before), the lookup of map 0, `after`.
    fn image(key: Insn, after: Vec<Insn>) -> Image {
        let mut insns = vec![key];
        insns.extend(lookup_at(0, -4));
        insns.extend(after);
        let mut img = Image::from_insns("f", ProgType::Xdp, insns);
        img.maps.push(table());
        img
    }

    fn exit_after_test() -> Vec<Insn> {
        vec![
            Insn::Jmp {
                width: Width::W64,
                cond: Cond::Eq,
                dst: Reg::R0,
                src: Operand::Imm(0),
                off: 1,
            },
            Insn::Ldx {
                size: Size::B,
                signed: false,
                dst: Reg::R0,
                src: Reg::R0,
                off: 0,
            },
            Insn::Exit,
        ]
    }

    #[test]
    fn a_constant_key_becomes_the_address_of_its_value() {
        let img = image(
            Insn::St {
                size: Size::W,
                dst: Reg::FP,
                off: -4,
                imm: 2,
            },
            exit_after_test(),
        );
        let (out, rep) = crate::arrays_to_rodata(&img, |_| true).expect("rewrite");
        assert_eq!(rep.converted, vec![("t".into(), ".rodata.t".into())]);
        let m = &out.maps[0];
        assert_eq!(m.name, ".rodata.t");
        assert!(matches!(
            m.kind,
            MapKind::Global {
                read_only: true,
                ..
            }
        ));
        assert_eq!((m.value_size, m.max_entries), (12, 1));
        assert_eq!(
            m.data.as_deref(),
            Some(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0][..])
        );
        assert_eq!(
            out.insns[3],
            Insn::Lddw {
                kind: LddwKind::MapIdxValue,
                dst: Reg::R1,
                imm: 0,
                next_imm: 8,
            }
        );
        assert_eq!(out.insns[4], mov(Reg::R0, Operand::Reg(Reg::R1)));
        assert_eq!(out.insns.len(), img.insns.len());
    }

    #[test]
    fn a_variable_key_is_bounds_checked_and_jumps_still_land() {
        let img = image(
            Insn::Stx {
                size: Size::W,
                dst: Reg::FP,
                src: Reg::R1,
                off: -4,
            },
            exit_after_test(),
        );
        let (out, rep) = crate::arrays_to_rodata(&img, |_| true).expect("rewrite");
        assert_eq!(rep.converted.len(), 1);
        let code = &out.insns[4..];
        assert_eq!(
            code[0],
            Insn::Ldx {
                size: Size::W,
                signed: false,
                dst: Reg::R0,
                src: Reg::R2,
                off: 0,
            }
        );
        // Past the last entry: r0 = 0, three slots on.
        assert!(matches!(
            code[1],
            Insn::Jmp {
                cond: Cond::Ge,
                src: Operand::Imm(3),
                off: 4,
                ..
            }
        ));
        assert_eq!(
            code[2],
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mul,
                dst: Reg::R0,
                src: Operand::Imm(4),
            }
        );
        assert_eq!(code[5], Insn::Ja { off: 1 });
        assert_eq!(code[6], mov(Reg::R0, Operand::Imm(0)));
        // The test after the lookup still skips exactly the load.
        assert!(matches!(
            code[7],
            Insn::Jmp {
                cond: Cond::Eq,
                off: 1,
                ..
            }
        ));
        assert_eq!(code[9], Insn::Exit);
        assert_eq!(out.functions[0].len, out.slot_count());
    }

    #[test]
    fn a_map_used_otherwise_is_kept_with_the_reason() {
        let mut img = image(
            Insn::St {
                size: Size::W,
                dst: Reg::FP,
                off: -4,
                imm: 0,
            },
            vec![Insn::Exit],
        );
        // r3 = r1 between the lddw and the call: the map escapes.
        img.insns.insert(4, mov(Reg::R3, Operand::Reg(Reg::R1)));
        img.functions[0].len += 1;
        let (out, rep) = crate::arrays_to_rodata(&img, |_| true).expect("rewrite");
        assert!(rep.converted.is_empty());
        assert_eq!(rep.kept.len(), 1);
        assert!(rep.kept[0].1.contains("not a lookup"), "{:?}", rep.kept);
        assert_eq!(out, img);
        // Not picked, or without contents: left alone too.
        let plain = image(Insn::Exit, vec![Insn::Exit]);
        let (_, rep) = crate::arrays_to_rodata(&plain, |_| false).expect("rewrite");
        assert_eq!(rep, super::RodataReport::default());
    }
}

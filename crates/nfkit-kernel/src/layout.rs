//! One entry program of an Image as the kernel loads it: the entry's
//! function first, then every function it reaches, with local calls and
//! function addresses re-aimed at the new positions, map references
//! (`MapIdx`/`MapIdxValue`) turned into map fds (`MapFd`/`MapValue`),
//! and the matching `bpf_func_info` / `bpf_line_info` records.

use nfkit_isa::{CallKind, Insn, LddwKind};
use nfkit_object::Image;
use std::os::fd::RawFd;

/// Kernel-ready code of one entry program.
pub(crate) struct ProgCode {
    /// Encoded instructions (one `u64` per slot).
    pub insns: Vec<u64>,
    /// `(insn_off, btf type id)`; empty when a function has no BTF.
    pub func_info: Vec<[u32; 2]>,
    /// `(insn_off, index into Image::line_info)`, sorted, one at least
    /// at every function start; empty when that cannot be given.
    pub lines: Vec<(u32, usize)>,
    /// Image slot of each new slot (for mapping verifier messages back).
    pub slot_map: Vec<usize>,
}

/// Builds the code of entry `entry` (index into `image.entries`);
/// `map_fds[i]` is the fd of `image.maps[i]`. Errors are messages.
pub(crate) fn build(image: &Image, entry: usize, map_fds: &[RawFd]) -> Result<ProgCode, String> {
    let e = image
        .entries
        .get(entry)
        .ok_or_else(|| format!("no entry {entry}"))?;
    let funcs = image.reachable_functions(e.function);
    // New start slot of each included function, in inclusion order.
    let mut new_start = Vec::with_capacity(funcs.len());
    let mut total = 0usize;
    for &f in &funcs {
        let func = image
            .functions
            .get(f)
            .ok_or_else(|| format!("function {f} out of range"))?;
        new_start.push(total);
        total += func.len;
    }
    let map_slot = |old: i64| -> Option<usize> {
        funcs.iter().zip(&new_start).find_map(|(&f, &ns)| {
            let func = image.functions.get(f)?;
            let off = usize::try_from(old).ok()?.checked_sub(func.start)?;
            (off < func.len).then_some(ns + off)
        })
    };
    let starts = nfkit_isa::slot_offsets(&image.insns);
    let mut out: Vec<Option<Insn>> = vec![None; total];
    let mut slot_map = vec![0usize; total];
    for (k, insn) in image.insns.iter().enumerate() {
        let Some(&old) = starts.get(k) else { continue };
        let Some(new) = map_slot(old as i64) else {
            continue;
        };
        let mut insn = *insn;
        let where_ = || image.describe_slot(old);
        match &mut insn {
            Insn::Lddw { kind, imm, .. }
                if matches!(kind, LddwKind::MapIdx | LddwKind::MapIdxValue) =>
            {
                let fd = usize::try_from(*imm)
                    .ok()
                    .and_then(|i| map_fds.get(i))
                    .ok_or_else(|| format!("{}: map index {} has no map", where_(), imm))?;
                *kind = if *kind == LddwKind::MapIdx {
                    LddwKind::MapFd
                } else {
                    LddwKind::MapValue
                };
                *imm = *fd;
            }
            Insn::Call {
                kind: CallKind::Local,
                imm,
            }
            | Insn::Lddw {
                kind: LddwKind::Func,
                imm,
                ..
            } => {
                let target = old as i64 + 1 + i64::from(*imm);
                let nt = map_slot(target).ok_or_else(|| {
                    format!("{}: call target slot {target} is in no function", where_())
                })?;
                *imm = i32::try_from(nt as i64 - (new as i64 + 1))
                    .map_err(|_| format!("{}: call offset out of range", where_()))?;
            }
            _ => {}
        }
        for s in 0..insn.slots() {
            if let Some(m) = slot_map.get_mut(new + s) {
                *m = old + s;
            }
        }
        if let Some(o) = out.get_mut(new) {
            *o = Some(insn);
        }
    }
    let mut insns = Vec::with_capacity(total);
    for insn in out.iter().flatten() {
        for raw in insn.encode() {
            insns.push(raw.to_u64());
        }
    }
    if insns.len() != total {
        return Err(format!(
            "functions of '{}' do not tile their slots ({} of {total})",
            e.name,
            insns.len()
        ));
    }
    let func_info = func_info(image, &funcs, &new_start);
    let lines = if func_info.is_empty() {
        Vec::new()
    } else {
        line_records(image, &funcs, &new_start)
    };
    Ok(ProgCode {
        insns,
        func_info,
        lines,
        slot_map,
    })
}

fn func_info(image: &Image, funcs: &[usize], new_start: &[usize]) -> Vec<[u32; 2]> {
    let mut out = Vec::with_capacity(funcs.len());
    let mut recs: Vec<(usize, u32)> = Vec::new();
    for (&f, &ns) in funcs.iter().zip(new_start) {
        match image.functions.get(f).and_then(|func| func.btf_id) {
            Some(id) => recs.push((ns, id)),
            None => return Vec::new(),
        }
    }
    recs.sort();
    for (ns, id) in recs {
        out.push([ns as u32, id]);
    }
    out
}

/// Line records of the included functions at their new slots; every
/// function start gets one (a copy of the function's first record), or
/// there is no line info at all.
fn line_records(image: &Image, funcs: &[usize], new_start: &[usize]) -> Vec<(u32, usize)> {
    let mut out: Vec<(u32, usize)> = Vec::new();
    for (&f, &ns) in funcs.iter().zip(new_start) {
        let Some(func) = image.functions.get(f) else {
            return Vec::new();
        };
        let mut recs: Vec<(u32, usize)> = image
            .line_info
            .iter()
            .enumerate()
            .filter(|(_, l)| l.slot >= func.start && l.slot < func.start + func.len)
            .map(|(i, l)| ((ns + l.slot - func.start) as u32, i))
            .collect();
        let Some(&(first_slot, first_idx)) = recs.first() else {
            return Vec::new();
        };
        if first_slot != ns as u32 {
            recs.insert(0, (ns as u32, first_idx));
        }
        out.extend(recs);
    }
    out.sort_by_key(|r| r.0);
    out.dedup_by_key(|r| r.0);
    out
}

/// Index of the last instruction a verifier log talks about (`N: (..)`).
pub(crate) fn last_insn_in_log(log: &str) -> Option<usize> {
    log.lines().rev().find_map(|l| {
        let (num, rest) = l.split_once(':')?;
        if !rest.starts_with(" (") || num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        num.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_failing_instruction() {
        let log = "0: R1=ctx() R10=fp0\n0: (61) r2 = *(u32 *)(r1 +0)\n1: (71) r0 = *(u8 *)(r2 +0)\ninvalid access to packet, off=0 size=1\n";
        assert_eq!(last_insn_in_log(log), Some(1));
        assert_eq!(last_insn_in_log("no instructions here"), None);
    }
}

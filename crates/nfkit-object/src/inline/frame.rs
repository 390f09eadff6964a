//! Stack frames: how many bytes a body uses below `r10`, and the
//! verifier's limits along every call path.

use super::body::Body;
use super::{MAX_FRAMES, STACK_LIMIT};
use nfkit_isa::{AluOp, Insn, Operand, Width};

/// Bytes of stack `b` uses (8-byte multiple): the lowest address it
/// reaches through `r10` or a register holding `r10 + k` (tracked
/// through moves and constant additions, in instruction order).
pub(super) fn frame_size(b: &Body) -> u32 {
    let mut known: [Option<i64>; 11] = [None; 11];
    let mut min: i64 = 0;
    let r = |reg: nfkit_isa::Reg| reg.num() as usize;
    for insn in &b.insns {
        known[10] = Some(0);
        match *insn {
            Insn::Ldx { dst, src, off, .. } => {
                if let Some(base) = known[r(src)] {
                    min = min.min(base + off as i64);
                }
                known[r(dst)] = None;
            }
            Insn::Stx { dst, off, .. } | Insn::St { dst, off, .. } => {
                if let Some(base) = known[r(dst)] {
                    min = min.min(base + off as i64);
                }
            }
            Insn::Atomic { dst, src, off, .. } => {
                if let Some(base) = known[r(dst)] {
                    min = min.min(base + off as i64);
                }
                known[r(src)] = None;
                known[0] = None;
            }
            Insn::Alu {
                width: Width::W64,
                op: AluOp::Mov,
                dst,
                src: Operand::Reg(s),
            } => known[r(dst)] = known[r(s)],
            Insn::Alu {
                width: Width::W64,
                op: op @ (AluOp::Add | AluOp::Sub),
                dst,
                src: Operand::Imm(k),
            } => {
                let k = if op == AluOp::Add {
                    k as i64
                } else {
                    -(k as i64)
                };
                known[r(dst)] = known[r(dst)].map(|b| b + k);
                if let Some(v) = known[r(dst)] {
                    min = min.min(v);
                }
            }
            Insn::Alu { dst, .. }
            | Insn::Endian { dst, .. }
            | Insn::AddrSpaceCast { dst, .. }
            | Insn::Lddw { dst, .. } => known[r(dst)] = None,
            Insn::Call { .. } | Insn::Callx { .. } | Insn::LdAbs { .. } | Insn::LdInd { .. } => {
                for k in known.iter_mut().take(6) {
                    *k = None;
                }
            }
            _ => {}
        }
    }
    ((-min) as u32).div_ceil(8) * 8
}

/// Checks every path from `roots` through `calls` (call and
/// function-address targets) against the stack and frame limits; frames
/// count rounded up to 32 bytes, as the kernel does.
pub(super) fn check_paths(
    frames: &[u32],
    calls: &[Vec<usize>],
    roots: &[usize],
    names: &[&str],
) -> Result<(), String> {
    fn walk(
        f: usize,
        depth: u32,
        path: &mut Vec<usize>,
        frames: &[u32],
        calls: &[Vec<usize>],
        names: &[&str],
    ) -> Result<(), String> {
        let total = depth + frames[f].div_ceil(32) * 32;
        let shown = |p: &[usize]| p.iter().map(|&i| names[i]).collect::<Vec<_>>().join(" -> ");
        if total > STACK_LIMIT {
            return Err(format!(
                "the call path {} would need {total} bytes of stack (limit {STACK_LIMIT})",
                shown(path)
            ));
        }
        if path.len() > MAX_FRAMES {
            return Err(format!(
                "the call path {} would have {} frames (limit {MAX_FRAMES})",
                shown(path),
                path.len()
            ));
        }
        for &g in &calls[f] {
            if path.contains(&g) {
                continue;
            }
            path.push(g);
            walk(g, total, path, frames, calls, names)?;
            path.pop();
        }
        Ok(())
    }
    for &r in roots {
        if r < frames.len() {
            walk(r, 0, &mut vec![r], frames, calls, names)?;
        }
    }
    Ok(())
}

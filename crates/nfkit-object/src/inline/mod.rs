//! Inlining at the eBPF level: every bpf-to-bpf call of a linked
//! [`Image`] whose callee can be placed at the call site is replaced by
//! the callee's body (docs/cost.md). On machines where every `ret` goes
//! through a return thunk a call costs some 7 ns; an inlined body costs
//! its instructions only.
//!
//! At a call site of `g` in `f` the body of `g` is copied in with:
//! * its stack frame moved below `f`'s (every `r10`-relative access and
//!   every `rX = r10` shifted by `f`'s frame plus the spill area);
//! * the callee-saved registers r6..r9 it uses spilled before it and
//!   restored after it (the calling convention: r1..r5 arguments, r0 the
//!   result, r6..r9 kept for the caller);
//! * each `exit` turned into a jump to the continuation;
//! * its jumps, calls, function addresses, line info and CO-RE sites
//!   carried along.
//!
//! Callees are inlined bottom-up (a function's own calls first), so a
//! chain absorbs its NFs before the dispatcher absorbs the chain and the
//! classifier the dispatcher. A call is kept, and the reason reported,
//! when inlining it would exceed the verifier's limits (512 bytes of
//! stack along a call path, 8 frames, the 16-bit jump range) or when the
//! callee uses `r10` other than as a base address. Functions no entry
//! reaches any more are dropped. Last ([`Passes`]), in each entry
//! program, an array element looked up several times with a constant key
//! (the info block, the configuration) is looked up once (`lookups.rs`),
//! and dead code is removed: stores of info-block bytes no one reads
//! (static builds only), stores into the stack no one reads
//! (`stack.rs`), instructions whose result no one reads (`dead.rs`).

mod body;
mod dead;
mod frame;
mod lookups;
mod rodata;
mod stack;
#[cfg(test)]
mod testkit;

use crate::image::Image;
use body::{assemble, decode, inline_into, Body};
use dead::remove_dead;
use frame::{check_paths, frame_size};
use lookups::cache_lookups;
pub use rodata::RodataReport;
use serde::Serialize;

/// Kernel stack limit summed over one call path.
pub const STACK_LIMIT: u32 = 512;
/// Kernel call-frame limit.
pub const MAX_FRAMES: usize = 8;
/// Slots one function may have so that every jump fits in 16 bits.
pub const MAX_FUNC_SLOTS: usize = 32767;
/// Instructions a program may have (privileged loader).
pub const MAX_PROG_SLOTS: usize = 1_000_000;

/// What inlining did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InlineReport {
    /// Slots of the image before and after.
    pub slots_before: usize,
    pub slots_after: usize,
    /// Local calls left (call instructions) before and after.
    pub calls_before: usize,
    pub calls_after: usize,
    pub inlined: Vec<Inlined>,
    pub kept: Vec<Kept>,
    /// Lookups of array elements replaced by a load of the pointer the
    /// entry looked up once (`lookups.rs`).
    pub lookups_removed: usize,
    /// Stores of info-block bytes the program never reads, removed
    /// (`dead.rs`).
    pub dead_info_stores: usize,
    /// Stores into the entry's own stack no one reads (the keys of the
    /// lookups done once, spills whose restore went), removed (`stack.rs`).
    pub dead_stack_stores: usize,
    /// Instructions removed as dead in all (those stores included).
    pub dead_removed: usize,
}

/// Calls of `callee` inlined into `caller`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inlined {
    pub caller: String,
    pub callee: String,
    pub sites: usize,
}

/// Calls of `callee` from `caller` kept as calls, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub caller: String,
    pub callee: String,
    pub reason: String,
}

/// Why an image could not be inlined at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InlineError {
    #[error("cannot inline: {0}")]
    Layout(String),
}

/// The passes [`inline_calls`] runs on each entry program after
/// inlining.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passes {
    /// None: the calls inlined only.
    None,
    /// What is sound for any program (one program run stays on one CPU):
    /// repeated constant-key array lookups done once, and the dead code
    /// in registers and in the program's own stack removed. The info
    /// block is left alone: for dynamic builds, whose programs (segments,
    /// call-site entries, NFs) share it for one packet, a byte this
    /// program does not read may be read by the next one.
    PerProgram,
    /// [`Passes::PerProgram`] and the stores of info-block bytes the
    /// program never reads removed: each entry's run is the packet's
    /// whole run (static builds).
    Static,
}

/// Inlines every call it can in `image` (see the module doc); calls of
/// functions for which `may_inline(name)` is false are kept; then runs
/// `passes` on each entry program.
pub fn inline_calls(
    image: &Image,
    may_inline: impl Fn(&str) -> bool,
    passes: Passes,
) -> Result<(Image, InlineReport), InlineError> {
    let lookups_once = passes != Passes::None;
    let mut bodies = decode(image)?;
    let mut report = InlineReport {
        slots_before: image.slot_count(),
        calls_before: count_calls(&bodies),
        ..InlineReport::default()
    };
    let names: Vec<&str> = image.functions.iter().map(|f| f.name.as_str()).collect();
    let roots: Vec<usize> = image.entries.iter().map(|e| e.function).collect();
    let mut frames: Vec<u32> = bodies.iter().map(frame_size).collect();
    for f in post_order(&bodies, &roots) {
        let original = bodies[f].clone();
        let f0 = frames[f];
        let mut chosen: Vec<usize> = Vec::new();
        for g in original.callees() {
            if g == f || !may_inline(names[g]) {
                continue;
            }
            let mut try_set = chosen.clone();
            try_set.push(g);
            let kept = |reason: String| Kept {
                caller: names[f].to_string(),
                callee: names[g].to_string(),
                reason,
            };
            let candidate = match inline_into(&original, &bodies, &try_set, f0) {
                Ok(b) => b,
                Err(reason) => {
                    report.kept.push(kept(reason));
                    continue;
                }
            };
            if let Err(reason) = fits(&candidate, f, &bodies, &mut frames, &roots, &names) {
                report.kept.push(kept(reason));
                continue;
            }
            chosen = try_set;
            bodies[f] = candidate;
            frames[f] = frame_size(&bodies[f]);
        }
        for &g in &chosen {
            report.inlined.push(Inlined {
                caller: names[f].to_string(),
                callee: names[g].to_string(),
                sites: original.call_sites(g),
            });
        }
    }
    // Entry programs: array elements looked up more than once, once.
    let mut entries = roots.clone();
    entries.sort_unstable();
    entries.dedup();
    for &r in entries.iter().filter(|_| lookups_once) {
        let Some(before) = bodies.get(r).cloned() else {
            continue;
        };
        let Some(n) = cache_lookups(&mut bodies[r], &image.maps, frames[r], STACK_LIMIT) else {
            continue;
        };
        let old = frames[r];
        frames[r] = frame_size(&bodies[r]);
        let calls: Vec<Vec<usize>> = bodies.iter().map(Body::targets).collect();
        if check_paths(&frames, &calls, &roots, &names).is_ok() {
            report.lookups_removed += n;
        } else {
            bodies[r] = before;
            frames[r] = old;
        }
    }
    // Entry programs: dead code out. Not an entry another function
    // calls (its body serves that call too).
    let called: Vec<usize> = bodies.iter().flat_map(Body::targets).collect();
    for &r in entries.iter().filter(|_| lookups_once) {
        if called.contains(&r) || r >= bodies.len() {
            continue;
        }
        let d = remove_dead(&mut bodies[r], &image.maps, passes == Passes::Static);
        report.dead_info_stores += d.pi_stores;
        report.dead_stack_stores += d.stack_stores;
        report.dead_removed += d.insns;
    }
    let out = assemble(image, &bodies, &roots)?;
    report.slots_after = out.slot_count();
    report.calls_after = count_calls(&decode(&out)?);
    Ok((out, report))
}

/// `image` with the declared arrays `pick` chooses that have initial
/// contents and are only looked up made `.rodata.NAME` global data
/// (`rodata.rs`): what libbpf loaders fill and freeze themselves. The
/// verifier then refuses any write to them.
pub fn arrays_to_rodata(
    image: &Image,
    pick: impl Fn(&crate::image::MapSpec) -> bool,
) -> Result<(Image, RodataReport), InlineError> {
    let mut bodies = decode(image)?;
    let mut maps = image.maps.clone();
    let report = rodata::to_rodata(&mut bodies, &mut maps, &pick);
    if report.converted.is_empty() {
        return Ok((image.clone(), report));
    }
    let roots: Vec<usize> = image.entries.iter().map(|e| e.function).collect();
    let mut out = assemble(image, &bodies, &roots)?;
    out.maps = maps;
    Ok((out, report))
}

/// Whether `candidate` as the new body of `f` stays in the limits; on
/// failure `frames[f]` is left as it was.
fn fits(
    candidate: &Body,
    f: usize,
    bodies: &[Body],
    frames: &mut [u32],
    roots: &[usize],
    names: &[&str],
) -> Result<(), String> {
    let slots = nfkit_isa::slot_count(&candidate.insns);
    if slots > MAX_FUNC_SLOTS {
        return Err(format!(
            "{slots} instructions in one function exceed the 16-bit jump range"
        ));
    }
    let total: usize = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if i == f {
                slots
            } else {
                nfkit_isa::slot_count(&b.insns)
            }
        })
        .sum();
    if total > MAX_PROG_SLOTS {
        return Err(format!(
            "the program would have {total} instructions (limit {MAX_PROG_SLOTS})"
        ));
    }
    let old = frames[f];
    frames[f] = frame_size(candidate);
    let mut calls: Vec<Vec<usize>> = bodies.iter().map(Body::targets).collect();
    calls[f] = candidate.targets();
    let r = check_paths(frames, &calls, roots, names);
    frames[f] = old;
    r
}

/// Functions reachable from `roots`, callees before their callers.
fn post_order(bodies: &[Body], roots: &[usize]) -> Vec<usize> {
    fn visit(f: usize, bodies: &[Body], seen: &mut [bool], out: &mut Vec<usize>) {
        if seen[f] {
            return;
        }
        seen[f] = true;
        for g in bodies[f].targets() {
            visit(g, bodies, seen, out);
        }
        out.push(f);
    }
    let mut seen = vec![false; bodies.len()];
    let mut out = Vec::new();
    for &r in roots {
        if r < bodies.len() {
            visit(r, bodies, &mut seen, &mut out);
        }
    }
    out
}

fn count_calls(bodies: &[Body]) -> usize {
    bodies
        .iter()
        .map(|b| {
            b.insns
                .iter()
                .filter(|i| {
                    matches!(
                        i,
                        nfkit_isa::Insn::Call {
                            kind: nfkit_isa::CallKind::Local,
                            ..
                        }
                    )
                })
                .count()
        })
        .sum()
}

//! Loops whose cap (or proven bound) is above [`BPF_LOOP_ABOVE`] are
//! compiled to `bpf_loop` (docs/language.md, "Loops"); such a loop may
//! not contain another one.

use super::{Checker, R};

/// Loops with a larger iteration cap (or proven bound) are compiled to
/// `bpf_loop` (the kernel verifier walks every iteration of a counted
/// loop; a `bpf_loop` body is verified as one callback).
pub const BPF_LOOP_ABOVE: u32 = 1024;

/// Largest iteration count `bpf_loop` takes.
pub const BPF_LOOP_MAX: u32 = 1 << 23;

/// Largest iteration cap: a `bpf_loop` runs cap + 1 times (the last one
/// to see that the cap is exceeded).
pub const MAX_LOOP_CAP: i128 = BPF_LOOP_MAX as i128 - 1;

/// What the cap warnings add for a cap compiled to `bpf_loop`.
pub(super) fn bpf_loop_note(cap: u32) -> &'static str {
    if cap > BPF_LOOP_ABOVE {
        "; the loop is compiled to bpf_loop"
    } else {
        ""
    }
}

impl Checker<'_> {
    /// Starts the body of a loop with iteration cap `cap` (0: none); the
    /// previous `in_bpf_loop`, to restore after the body. A `bpf_loop`
    /// inside another one's body is an error.
    pub(super) fn enter_loop(&mut self, at: usize, cap: u32) -> R<bool> {
        let outer = self.in_bpf_loop;
        if cap > BPF_LOOP_ABOVE {
            if outer {
                return self.err(
                    at,
                    format!("this loop (cap {cap}) is compiled to bpf_loop inside the body of another bpf_loop, which is not supported"),
                    &format!("give one of the two loops a cap of at most {BPF_LOOP_ABOVE} (a counted loop), or merge them into one loop"),
                );
            }
            self.in_bpf_loop = true;
        }
        Ok(outer)
    }
}

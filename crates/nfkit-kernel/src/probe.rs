//! Which helpers the running kernel lets a program type call, found by
//! loading one tiny program per (type, helper): its five argument
//! registers zeroed, a call, `r0 = 0; exit`. The verifier looks up the
//! helper's prototype for the type before it checks any argument, so
//! "cannot use helper" / "invalid func" / "unknown func" in its log means
//! refused, any other outcome (load, or an argument complaint) means the
//! type may call it. `bpftool feature probe` is not used: it reports the
//! same list for every networking type here.

use crate::sys::{self, ProgLoad};
use nfkit_object::ProgType;

/// The verdict on one helper for one program type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The type may call it (the program loaded, or only its arguments
    /// were refused).
    Allowed,
    /// The kernel has the helper but not for this type.
    NotForType,
    /// The kernel does not know the helper id.
    Unknown,
}

/// The raw instructions of the probe program for helper `id`.
fn probe_insns(id: i32) -> Vec<u64> {
    const MOV64_IMM: u64 = 0xb7;
    const CALL: u64 = 0x85;
    const EXIT: u64 = 0x95;
    let mut v: Vec<u64> = (1..=5u64).map(|r| MOV64_IMM | (r << 8)).collect();
    v.push(CALL | (u64::from(id as u32) << 32));
    v.push(MOV64_IMM);
    v.push(EXIT);
    v
}

/// Probes helper `id` for programs of type `t`.
pub fn probe_helper(t: ProgType, id: i32) -> Probe {
    let insns = probe_insns(id);
    let p = ProgLoad {
        prog_type: t.kernel_id(),
        expected_attach_type: 0,
        prog_flags: 0,
        name: "nfkit_probe",
        license: "GPL",
        insns: &insns,
        btf_fd: None,
        func_info: &[],
        line_info: &[],
        log_level: 1,
        log_size: 1 << 16,
    };
    match sys::prog_load(&p) {
        Ok(_) => Probe::Allowed,
        Err(f) if f.log.contains("invalid func") || f.log.contains("unknown func") => {
            Probe::Unknown
        }
        Err(f) if f.log.contains("cannot use helper") => Probe::NotForType,
        Err(_) => Probe::Allowed,
    }
}

/// Every helper id from 1 up to the first run of 8 unknown ids, with the
/// ids program type `t` may call.
pub fn allowed_helpers(t: ProgType) -> Vec<i32> {
    let mut out = Vec::new();
    let mut unknown_run = 0;
    let mut id = 1;
    while unknown_run < 8 {
        match probe_helper(t, id) {
            Probe::Allowed => {
                out.push(id);
                unknown_run = 0;
            }
            Probe::NotForType => unknown_run = 0,
            Probe::Unknown => unknown_run += 1,
        }
        id += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_program_calls_the_helper() {
        let v = probe_insns(69);
        assert_eq!(v.len(), 8);
        assert_eq!(v[5], 0x85 | (69u64 << 32));
        assert_eq!(v[0], 0x01b7);
    }
}

//! CO-RE ("compile once, run everywhere") relocations: instructions whose
//! immediate or offset depends on the layout of kernel types, recorded by
//! clang in `.BTF.ext` and resolved here against a target BTF (the
//! running kernel's `/sys/kernel/btf/vmlinux`), following libbpf's rules:
//!
//! * `spec`: an access string (`0:1:2`) on a local type, as accessors,
//!   and its match in a target type.
//! * `compat`: flavour-less names and type compatibility (candidates,
//!   fields, `type_matches`).
//! * `calc`: the value a relocation kind takes for a spec.
//! * `patch`: the value written into the instruction (ALU imm, LDX/ST/STX
//!   offset and size, `lddw` imm), or the instruction poisoned.
//! * `target`: the target BTF with its name index; the kernel's, loaded
//!   once.
//! * `reach`: which poisoned instructions an entry can execute (branches
//!   on constants followed as the verifier does).
//!
//! An unresolvable relocation does not fail the object: its instruction
//! is poisoned (a call of helper [`POISON_HELPER`], as libbpf does) and
//! the reason kept, so only the programs that reach it are refused.

mod calc;
mod compat;
mod patch;
mod reach;
mod spec;
mod target;

pub use compat::essential_name;
pub use patch::{patch, poison};
pub use reach::poisons_reached;
pub use target::{kernel_target, Target, KERNEL_BTF_ENV, KERNEL_BTF_PATH};

use crate::btf::Btf;
use spec::Spec;

/// The helper id a poisoned instruction calls (libbpf's `0xbad2310`).
pub const POISON_HELPER: i32 = 0xbad2310;

/// What a relocation computes (`enum bpf_core_relo_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum CoreKind {
    FieldByteOffset,
    FieldByteSize,
    FieldExists,
    FieldSigned,
    FieldLshiftU64,
    FieldRshiftU64,
    TypeIdLocal,
    TypeIdTarget,
    TypeExists,
    TypeSize,
    EnumvalExists,
    EnumvalValue,
    TypeMatches,
    /// A kind this version does not know.
    Other(u32),
}

impl CoreKind {
    pub fn from_u32(v: u32) -> CoreKind {
        use CoreKind::*;
        match v {
            0 => FieldByteOffset,
            1 => FieldByteSize,
            2 => FieldExists,
            3 => FieldSigned,
            4 => FieldLshiftU64,
            5 => FieldRshiftU64,
            6 => TypeIdLocal,
            7 => TypeIdTarget,
            8 => TypeExists,
            9 => TypeSize,
            10 => EnumvalExists,
            11 => EnumvalValue,
            12 => TypeMatches,
            v => Other(v),
        }
    }

    /// The short name libbpf's messages use (`byte_off`, `type_size`, ...).
    pub fn name(self) -> &'static str {
        use CoreKind::*;
        match self {
            FieldByteOffset => "byte_off",
            FieldByteSize => "byte_sz",
            FieldExists => "field_exists",
            FieldSigned => "signed",
            FieldLshiftU64 => "lshift_u64",
            FieldRshiftU64 => "rshift_u64",
            TypeIdLocal => "local_type_id",
            TypeIdTarget => "target_type_id",
            TypeExists => "type_exists",
            TypeSize => "type_size",
            EnumvalExists => "enumval_exists",
            EnumvalValue => "enumval_value",
            TypeMatches => "type_matches",
            Other(_) => "unknown",
        }
    }

    pub fn is_field(self) -> bool {
        use CoreKind::*;
        matches!(
            self,
            FieldByteOffset
                | FieldByteSize
                | FieldExists
                | FieldSigned
                | FieldLshiftU64
                | FieldRshiftU64
        )
    }

    pub fn is_type(self) -> bool {
        use CoreKind::*;
        matches!(
            self,
            TypeIdLocal | TypeIdTarget | TypeExists | TypeSize | TypeMatches
        )
    }

    pub fn is_enumval(self) -> bool {
        matches!(self, CoreKind::EnumvalExists | CoreKind::EnumvalValue)
    }

    /// What the relocation is about, for messages.
    fn subject(self) -> &'static str {
        if self.is_field() {
            "field"
        } else if self.is_enumval() {
            "enum value"
        } else {
            "type"
        }
    }
}

/// A CO-RE relocation of one instruction of a function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CoreRelo {
    /// Instruction index in the function (not slot).
    pub insn: usize,
    pub kind: CoreKind,
    /// The local type the access starts from (object's BTF).
    pub type_id: u32,
    /// The access string (`0:1:2`).
    pub access: String,
}

/// The outcome of resolving a relocation against a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The value the compiler assumed (from the local types).
    pub orig: u64,
    /// The value for the target; `None`: poison the instruction.
    pub new: Option<u64>,
    /// Check that the instruction holds `orig` before patching.
    pub validate: bool,
    /// Field sizes (local, target) for load/store size adjustment.
    pub orig_size: u32,
    pub new_size: u32,
    /// The size differs in a way a load cannot be adjusted for.
    pub bad_size_change: bool,
}

/// `relo` as people read it: `byte_off struct iphdr::daddr`.
pub fn describe(local: &Btf, relo: &CoreRelo) -> String {
    format!("{} {}", relo.kind.name(), spec::describe(local, relo))
}

/// Resolves `relo` (on `local` types) against `target`: the values, or
/// why it cannot be resolved at all (a malformed relocation, an
/// ambiguous match). A relocation that finds no match resolves to a
/// poison ([`Resolution::new`] `None`) when its kind requires a match;
/// [`failure`] words that case.
pub fn resolve(local: &Btf, relo: &CoreRelo, target: &Target) -> Result<Resolution, String> {
    let lspec = Spec::parse(local, relo).map_err(|e| {
        format!(
            "cannot parse access {} on local type {}: {e}",
            relo.access, relo.type_id
        )
    })?;
    let local_res = calc::relo(local, &lspec, Some((local, &lspec)))?;
    if relo.kind == CoreKind::TypeIdLocal {
        return Ok(Resolution {
            validate: false,
            ..local_res
        });
    }
    let mut found: Option<(Spec, Resolution)> = None;
    for cand in target.candidates(local, relo.type_id) {
        let Some(tspec) = lspec.match_in(local, target.btf(), cand)? else {
            continue;
        };
        let res = calc::relo(local, &lspec, Some((target.btf(), &tspec)))?;
        match &found {
            None => found = Some((tspec, res)),
            Some((first, r)) => {
                if first.bit_offset != tspec.bit_offset {
                    return Err(format!(
                        "ambiguous: field offsets {} and {} in two kernel types",
                        first.bit_offset / 8,
                        tspec.bit_offset / 8
                    ));
                }
                if r.new != res.new {
                    return Err(format!(
                        "ambiguous: values {:?} and {:?} from two kernel types",
                        r.new, res.new
                    ));
                }
            }
        }
    }
    match found {
        Some((_, res)) => Ok(res),
        None => calc::relo(local, &lspec, None),
    }
}

/// Why an unmatched relocation poisons (after its [`describe`]d name):
/// `field not found in the kernel's BTF (access 0:1)`.
pub fn failure(relo: &CoreRelo) -> String {
    format!(
        "{} not found in the kernel's BTF (access {})",
        relo.kind.subject(),
        relo.access
    )
}

/// `relo` for listings (`nfkit disasm`, `object show`), with its value
/// against the running kernel's BTF: `CO-RE byte_off struct
/// iphdr::daddr = 16`, or `... (unresolved: why)`.
pub fn note(local: Option<&Btf>, relo: &CoreRelo) -> String {
    let Some(local) = local else {
        return format!(
            "CO-RE {} {} (unresolved: the object has no BTF)",
            relo.kind.name(),
            relo.access
        );
    };
    let what = describe(local, relo);
    let value = kernel_target().and_then(|t| resolve(local, relo, &t));
    match value {
        Ok(Resolution { new: Some(v), .. }) => format!("CO-RE {what} = {v}"),
        Ok(_) => format!("CO-RE {what} (unresolved: {})", failure(relo)),
        Err(e) => format!("CO-RE {what} (unresolved: {e})"),
    }
}

#[cfg(test)]
mod tests;

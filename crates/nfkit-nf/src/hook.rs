//! The hooks an NF is built for ([`Hook`], from nfkit-abi). The context
//! type is part of an NF's signature, so every source is compiled once
//! per hook; this module adds what ties a hook to ELF objects.

pub use nfkit_abi::{Hook, UnknownHook};

/// What ties a [`Hook`] to ELF objects: section and program type.
pub trait HookObject: Sized {
    /// The ELF section of the hook's programs (`xdp`, `tc`, `socket`).
    fn section(self) -> &'static str;
    /// The program type of the hook's programs.
    fn prog_type(self) -> nfkit_object::ProgType;
    /// The hook of programs of type `t`, if NFs have one for it.
    fn from_prog_type(t: nfkit_object::ProgType) -> Option<Self>;
}

impl HookObject for Hook {
    fn section(self) -> &'static str {
        self.ctx_hook().name()
    }

    fn prog_type(self) -> nfkit_object::ProgType {
        match self {
            Hook::Xdp | Hook::Switch => nfkit_object::ProgType::Xdp,
            Hook::Tc => nfkit_object::ProgType::SchedCls,
            Hook::Socket => nfkit_object::ProgType::SocketFilter,
        }
    }

    fn from_prog_type(t: nfkit_object::ProgType) -> Option<Hook> {
        match t {
            nfkit_object::ProgType::Xdp => Some(Hook::Xdp),
            nfkit_object::ProgType::SchedCls | nfkit_object::ProgType::SchedAct => Some(Hook::Tc),
            nfkit_object::ProgType::SocketFilter => Some(Hook::Socket),
            _ => None,
        }
    }
}

/// Serializes a hook by its name (`xdp`, `tc`, `socket`): nfkit-abi has
/// no serde.
pub fn serialize_hook<S: serde::Serializer>(h: &Hook, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(h.name())
}

/// [`serialize_hook`] for a list.
pub fn serialize_hooks<S: serde::Serializer>(hs: &[Hook], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(hs.iter().map(|h| h.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prog_types_round_trip() {
        for h in Hook::ALL {
            assert_eq!(Hook::from_prog_type(h.prog_type()), Some(h));
        }
    }
}

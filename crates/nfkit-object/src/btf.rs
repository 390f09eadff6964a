//! BTF: the types, function signatures and names carried by objects.
//! (Filled in by the object reader; see the toolchain issue.)

/// A parsed BTF blob.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Btf {}

//! Map access with typed keys and values, one convention for every map
//! (docs/abi.md "Map keys and values"): integers in host order as the
//! programs store them, `__be*` types and address fields in network
//! order, tuples and structs field by field.
//!
//! * [`types`]: [`ValueType`], from a script's declarations or BTF.
//! * [`text`]: parse text into bytes, show bytes as text and JSON.
//! * [`access`]: the [`MapAccess`] trait and the operations on top of it,
//!   implemented for kernel maps ([`kernel`]) and VM maps ([`vm`]).

pub mod access;
pub mod btf;
pub mod kernel;
pub mod text;
pub mod types;
pub mod vm;

pub use access::{
    dump, has_data_entries, outer_snapshot_json, snapshot_json, DumpOptions, MapAccess, MapError,
    MapInfo, Row,
};
pub use kernel::KernelMap;
pub use types::{Field, ValueType};
pub use vm::VmMap;

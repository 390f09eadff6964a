//! eBPF ELF objects and the Image.
//!
//! * [`image`]: the linked, backend-independent program every backend runs.
//! * [`btf`]: BTF types and function signatures.

pub mod btf;
pub mod image;

pub use btf::Btf;
pub use image::{Entry, Function, Image, LineInfo, MapKind, MapSpec, MapType, ProgType};

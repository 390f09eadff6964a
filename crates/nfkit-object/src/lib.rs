//! eBPF ELF objects, BTF, the linker, and the Image.
//!
//! * [`image`]: the linked, backend-independent program every backend runs.
//! * [`btf`]: BTF types, function signatures, `.BTF.ext`; parse, query,
//!   build, merge and encode.
//! * [`co_re`]: CO-RE relocations resolved against the kernel's BTF.
//! * [`initial`]: initial contents of declared array maps.
//! * [`object`]: an unlinked object (functions with symbolic relocations,
//!   maps, globals), as [`read`] produces it from ELF bytes.
//! * [`progtype`]: program types from section names (libbpf conventions).
//! * [`link`](mod@link): objects into an [`Image`].
//! * [`inline`]: bpf-to-bpf calls of an [`Image`] replaced by the callee's body.
//! * [`write`](mod@write): an [`Image`] back into an eBPF relocatable ELF object.
//! * [`summary`]: what an object holds, for `nfkit object show`.
//! * [`error`]: read, link and write errors, each naming where.

#![forbid(unsafe_code)]

pub mod btf;
pub mod co_re;
pub mod error;
pub mod image;
pub mod initial;
pub mod inline;
pub mod link;
pub mod object;
pub mod progtype;
pub mod read;
pub mod summary;
pub mod write;

pub use btf::Btf;
pub use error::{Error, LinkError, Location, ReadError, ReadErrorKind, WriteError};
pub use image::{
    CoreSite, Entry, Function, Image, InnerMaps, InnerSlot, LineInfo, MapInit, MapKind, MapSpec,
    MapType, ProgType,
};
pub use inline::{arrays_to_rodata, inline_calls, InlineError, InlineReport, Passes, RodataReport};
pub use link::{link, link_files, link_with_target};
pub use object::Object;
pub use read::{
    inspect_object, read_object, read_object_as, read_object_for_load, section_bytes, Inspection,
};
pub use summary::ObjectSummary;
pub use write::{write_object, write_object_with};

use std::path::Path;

/// Reads the object file at `path` (not linked).
pub fn read_file(path: impl AsRef<Path>) -> Result<Object, Error> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: shown.clone(),
        cause: source,
    })?;
    read_object(&bytes, &shown).map_err(|source| Error::Read {
        path: shown,
        cause: Box::new(source),
    })
}

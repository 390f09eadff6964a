//! The linker: one or more [`Object`]s into one [`Image`].
//!
//! * Functions of all objects are concatenated (object order, then the
//!   order read). Static functions stay private to their object; global
//!   ones resolve by name across objects: a weak definition loses to a
//!   global one (and is dropped), two global definitions are an error.
//! * Declared maps with the same name and the same definition become one
//!   map (docs/abi.md §6); a different definition is an error naming both
//!   objects. Global data sections of the same name (`.rodata`, ...) are
//!   concatenated, each object's part 8-byte aligned; global variables
//!   (non-static) must be unique by name.
//! * Local calls and function addresses get relative offsets in the
//!   concatenated program; map references become map indices.
//! * BTF is merged (ids shifted, `DATASEC`s of one name merged), and
//!   line info shifted to image slots.
//!
//! Symbols are resolved here; `maps` merges maps and BTF, `code` lays out
//! the functions and applies the relocations.

mod code;
mod core_relos;
mod maps;

use crate::co_re::{self, Target};
use crate::error::{Error, LinkError};
use crate::image::Image;
use crate::object::{Binding, Object};
use code::{Code, Layout, Linker};
use core_relos::CoreCx;
use maps::{merge_btf, merge_maps};
use std::collections::HashMap;
use std::path::Path;

/// Global symbols: each non-static function name -> the definition that
/// wins it, as (object, function, binding).
type Globals<'a> = HashMap<&'a str, (usize, usize, Binding)>;

/// Links `objects` into an Image (see the module doc). CO-RE
/// relocations are resolved against the running kernel's BTF
/// ([`co_re::kernel_target`]), read only when an object has some.
pub fn link(objects: &[Object]) -> Result<Image, LinkError> {
    let has_core = objects
        .iter()
        .any(|o| o.functions.iter().any(|f| !f.core_relos.is_empty()));
    if !has_core {
        return link_with_target(objects, Err(String::new()));
    }
    let kernel = co_re::kernel_target();
    link_with_target(objects, kernel.as_deref().map_err(|e| e.clone()))
}

/// [`link`] with CO-RE relocations resolved against `target` (or, when
/// it is an error, each failing with that text).
pub fn link_with_target(
    objects: &[Object],
    target: Result<&Target, String>,
) -> Result<Image, LinkError> {
    if objects.is_empty() {
        return Err(LinkError::NoObjects);
    }
    let globals = resolve_globals(objects)?;
    check_data_symbols(objects)?;
    let mut maps = merge_maps(objects)?;
    let (btf, btf_maps) = merge_btf(objects, &maps);
    maps.retype(btf.as_ref(), &btf_maps);
    let layout = Layout::new(objects, &globals, &btf_maps);
    let linker = Linker {
        objects,
        globals,
        maps,
        layout,
        core: CoreCx {
            target,
            btf_maps: &btf_maps,
        },
    };
    let Code {
        insns,
        mut line_info,
        entries,
        core_sites,
    } = linker.code()?;
    let map_inits = linker.map_inits(&entries)?;

    let license = objects
        .iter()
        .map(|o| o.license.clone())
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    line_info.sort_by_key(|l| l.slot);
    Ok(Image {
        insns,
        functions: linker.layout.functions,
        entries,
        maps: linker.maps.maps,
        btf,
        line_info,
        license,
        map_inits,
        core_sites,
    })
}

/// Resolves global function names across objects: a weak definition
/// loses to a global one, two global definitions are an error.
fn resolve_globals(objects: &[Object]) -> Result<Globals<'_>, LinkError> {
    let mut globals: Globals<'_> = HashMap::new();
    for (oi, o) in objects.iter().enumerate() {
        for (fi, f) in o.functions.iter().enumerate() {
            if f.binding == Binding::Local {
                continue;
            }
            match globals.get(f.name.as_str()).copied() {
                None => {
                    globals.insert(&f.name, (oi, fi, f.binding));
                }
                Some((po, _, pb)) => match (pb, f.binding) {
                    (Binding::Global, Binding::Global) => {
                        return Err(LinkError::DuplicateSymbol {
                            symbol: f.name.clone(),
                            first: objects[po].origin.clone(),
                            second: o.origin.clone(),
                        })
                    }
                    (Binding::Weak, Binding::Global) => {
                        globals.insert(&f.name, (oi, fi, f.binding));
                    }
                    _ => {}
                },
            }
        }
    }
    Ok(globals)
}

/// Global variables must be unique by name across objects.
fn check_data_symbols(objects: &[Object]) -> Result<(), LinkError> {
    let mut data_names: HashMap<&str, usize> = HashMap::new();
    for (oi, o) in objects.iter().enumerate() {
        for d in &o.data_symbols {
            if let Some(&po) = data_names.get(d.name.as_str()) {
                return Err(LinkError::DuplicateSymbol {
                    symbol: d.name.clone(),
                    first: objects[po].origin.clone(),
                    second: o.origin.clone(),
                });
            }
            data_names.insert(&d.name, oi);
        }
    }
    Ok(())
}

/// Reads and links object files.
pub fn link_files<P: AsRef<Path>>(paths: &[P]) -> Result<Image, Error> {
    let mut objects = Vec::with_capacity(paths.len());
    for p in paths {
        objects.push(crate::read_file(p.as_ref())?);
    }
    Ok(link(&objects)?)
}

impl Image {
    /// The Image of one object (linked on its own).
    pub fn from_object(object: &Object) -> Result<Image, LinkError> {
        link(std::slice::from_ref(object))
    }

    /// Reads ELF bytes and links them on their own; `origin` names the
    /// object in diagnostics.
    pub fn from_elf(bytes: &[u8], origin: &str) -> Result<Image, Error> {
        Image::from_elf_as(bytes, origin, None)
    }

    /// [`Image::from_elf`] with the programs of sections whose name gives
    /// no type taken as `unknown_sections` ([`crate::read_object_as`]).
    pub fn from_elf_as(
        bytes: &[u8],
        origin: &str,
        unknown_sections: Option<crate::ProgType>,
    ) -> Result<Image, Error> {
        let o = crate::read_object_as(bytes, origin, unknown_sections).map_err(|source| {
            Error::Read {
                path: origin.to_string(),
                cause: Box::new(source),
            }
        })?;
        Ok(link(std::slice::from_ref(&o))?)
    }

    /// Reads an object file and links it on its own.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Image, Error> {
        link_files(&[path])
    }
}

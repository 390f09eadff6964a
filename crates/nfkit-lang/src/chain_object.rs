//! Chain objects: what `nfkit compile -o` writes. An eBPF ELF object
//! (chains, NFs and classifier linked, with BTF) that also carries the
//! script's manifest in a non-allocated `.nfkit.chain` section (loaders
//! skip it): the hook, the entry program, the chains and the
//! control-plane writes (classifier table, default and fault actions,
//! table entries). A pipeline's `post` program goes in `.nfkit.post` as
//! a nested chain object. A switch loads one without compiling
//! (docs/update.md, "Code as objects").

use crate::link::MapWrite;
use crate::{Compiled, Options};
use nfkit_nf::Hook;
use nfkit_object::Image;
use serde::{Deserialize, Serialize};

/// The manifest's section.
pub const MANIFEST: &str = ".nfkit.chain";
/// The nested post program's section.
pub const POST: &str = ".nfkit.post";
/// The manifest format this crate writes and reads.
const FORMAT: u32 = 1;

#[derive(Serialize, Deserialize)]
struct Manifest {
    format: u32,
    hook: String,
    entry: Option<String>,
    chains: Vec<String>,
    writes: Vec<MapWrite>,
}

/// A chain object read back: what loading a script needs, compiled.
#[derive(Clone, Debug)]
pub struct ChainObject {
    pub image: Image,
    pub hook: Hook,
    /// The entry program (the classifier), if the script configures one.
    pub entry: Option<String>,
    /// The dispatched chains, by id.
    pub chains: Vec<String>,
    /// The control-plane writes to do before running.
    pub writes: Vec<MapWrite>,
    /// A pipeline's post program.
    pub post: Option<Box<ChainObject>>,
}

/// Why a chain object could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ChainObjectError {
    #[error("{0}")]
    Object(#[from] nfkit_object::Error),
    #[error("{origin}: {cause}")]
    Read {
        origin: String,
        cause: Box<nfkit_object::ReadError>,
    },
    #[error("{0}: not a chain object (no {MANIFEST} section; `nfkit compile -o` writes one)")]
    NoManifest(String),
    #[error("{0}: bad chain manifest: {1}")]
    Manifest(String, String),
    #[error("writing the object: {0}")]
    Write(#[from] nfkit_object::WriteError),
    #[error("compiling the post program: {0}")]
    Post(String),
}

/// `c` as a chain object; its post program (if any) is compiled with
/// `opts` (the NF search path).
pub fn write(c: &Compiled, opts: &Options) -> Result<Vec<u8>, ChainObjectError> {
    let opts = Options {
        hook: Some(c.hook),
        ..opts.clone()
    };
    let post = crate::pipeline::post_of(c, &opts)
        .map_err(|e| ChainObjectError::Post(e.to_string()))?
        .map(|p| write_one(&p, None))
        .transpose()?;
    write_one(c, post.as_deref())
}

fn write_one(c: &Compiled, post: Option<&[u8]>) -> Result<Vec<u8>, ChainObjectError> {
    let m = Manifest {
        format: FORMAT,
        hook: c.hook.to_string(),
        entry: c.entry().map(str::to_string),
        chains: c.program.chain_names(),
        writes: c.control_plane(),
    };
    let json = serde_json::to_vec(&m).map_err(|e| ChainObjectError::Post(e.to_string()))?;
    let mut notes: Vec<(&str, &[u8])> = vec![(MANIFEST, &json)];
    if let Some(p) = post {
        notes.push((POST, p));
    }
    Ok(nfkit_object::write_object_with(&c.image, &notes)?)
}

/// Reads a chain object (`origin` names it in errors).
pub fn read(bytes: &[u8], origin: &str) -> Result<ChainObject, ChainObjectError> {
    read_as(bytes, origin, true)
}

/// [`read`] for loading only: the ELF parsed once for the code and the
/// notes, and no line info read (an update's load path: the VM does not
/// use source lines; docs/update.md, "Swap time").
pub fn read_for_load(bytes: &[u8], origin: &str) -> Result<ChainObject, ChainObjectError> {
    read_as(bytes, origin, false)
}

fn read_as(bytes: &[u8], origin: &str, lines: bool) -> Result<ChainObject, ChainObjectError> {
    let read_err = |e: nfkit_object::ReadError| ChainObjectError::Read {
        origin: origin.to_string(),
        cause: Box::new(e),
    };
    let (object, notes) = if lines {
        (
            None,
            nfkit_object::section_bytes(bytes, &[MANIFEST, POST]).map_err(read_err)?,
        )
    } else {
        let (o, notes) = nfkit_object::read_object_for_load(bytes, origin, &[MANIFEST, POST])
            .map_err(read_err)?;
        (Some(o), notes)
    };
    let (manifest, post) = (notes[0], notes[1]);
    let manifest = manifest.ok_or_else(|| ChainObjectError::NoManifest(origin.to_string()))?;
    let bad = |why: String| ChainObjectError::Manifest(origin.to_string(), why);
    let m: Manifest = serde_json::from_slice(manifest).map_err(|e| bad(e.to_string()))?;
    if m.format != FORMAT {
        return Err(bad(format!(
            "format {} (this nfkit reads {FORMAT})",
            m.format
        )));
    }
    let hook = m
        .hook
        .parse::<Hook>()
        .map_err(|_| bad(format!("unknown hook `{}`", m.hook)))?;
    let post = match post {
        Some(p) => Some(Box::new(read_as(
            p,
            &format!("{origin} (post program)"),
            lines,
        )?)),
        None => None,
    };
    let image = match object {
        Some(o) => Image::from_object(&o).map_err(nfkit_object::Error::from)?,
        None => Image::from_elf(bytes, origin)?,
    };
    Ok(ChainObject {
        image,
        hook,
        entry: m.entry,
        chains: m.chains,
        writes: m.writes,
        post,
    })
}

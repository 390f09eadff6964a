//! A process-wide cache of parsed NF objects.
//!
//! Every compile links the NF modules a script imports; reading such an
//! object (ELF, BTF, BTF.ext line info for every instruction) costs far
//! more than compiling a script. The cache keeps each parsed object keyed
//! by its origin name and its exact bytes, so an object file that changes
//! on disk is read again, and a compile gets its own copy to prune.

use nfkit_object::{Object, ReadError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Objects kept at most; past that the cache starts over (a long-running
/// process whose users keep rebuilding their NF objects stays bounded).
const MAX_OBJECTS: usize = 64;

/// The bytes an object was read from: an embedded catalogue object by
/// its address (it never changes, and copying it would cost a fresh
/// process as much as a compile), any other by a copy.
enum Source {
    Embedded(&'static [u8]),
    Copy(Vec<u8>),
}

impl Source {
    fn of(bytes: &[u8]) -> Source {
        let embedded = nfkit_nf::catalogue()
            .iter()
            .flat_map(|m| m.objects)
            .map(|o| o.object)
            .find(|o| std::ptr::eq(*o, bytes));
        match embedded {
            Some(o) => Source::Embedded(o),
            None => Source::Copy(bytes.to_vec()),
        }
    }

    fn matches(&self, bytes: &[u8]) -> bool {
        match self {
            Source::Embedded(o) => std::ptr::eq(*o, bytes),
            Source::Copy(v) => v.as_slice() == bytes,
        }
    }
}

/// Parsed objects by origin name, each with the bytes it was read from.
type Entries = HashMap<String, Vec<(Source, Arc<Object>)>>;

fn entries() -> &'static Mutex<Entries> {
    static CACHE: OnceLock<Mutex<Entries>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The parsed object of `bytes` (named `origin` in errors), from the cache
/// when these bytes were read before under this name. Errors are not
/// cached (they are rare, and the caller reports them).
pub fn read_object(bytes: &[u8], origin: &str) -> Result<Object, ReadError> {
    if let Some(obj) = lookup(bytes, origin) {
        return Ok((*obj).clone());
    }
    let obj = Arc::new(nfkit_object::read_object(bytes, origin)?);
    // A poisoned lock only means another thread panicked mid-insert; the
    // map itself is still consistent (inserts are single pushes).
    let mut map = entries().lock().unwrap_or_else(|e| e.into_inner());
    if map.values().map(Vec::len).sum::<usize>() >= MAX_OBJECTS {
        map.clear();
    }
    let list = map.entry(origin.to_string()).or_default();
    if !list.iter().any(|(b, _)| b.matches(bytes)) {
        list.push((Source::of(bytes), Arc::clone(&obj)));
    }
    drop(map);
    Ok(Arc::unwrap_or_clone(obj))
}

fn lookup(bytes: &[u8], origin: &str) -> Option<Arc<Object>> {
    let map = entries().lock().unwrap_or_else(|e| e.into_inner());
    map.get(origin)?
        .iter()
        .find(|(b, _)| b.matches(bytes))
        .map(|(_, o)| Arc::clone(o))
}

/// Number of objects cached (for tests).
pub fn len() -> usize {
    let map = entries().lock().unwrap_or_else(|e| e.into_inner());
    map.values().map(Vec::len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfkit_nf::Hook;

    #[test]
    fn cached_object_equals_a_fresh_read_and_changed_bytes_are_read_again() {
        let bytes = nfkit_nf::object("nf.meter", Hook::Xdp).expect("nf.meter xdp");
        let fresh = nfkit_object::read_object(bytes, "nf.meter (xdp)").unwrap();
        let first = read_object(bytes, "nf.meter (xdp)").unwrap();
        let second = read_object(bytes, "nf.meter (xdp)").unwrap();
        assert_eq!(first, fresh);
        assert_eq!(second, fresh);
        // The same bytes at another address (a file read into memory).
        let copy = bytes.to_vec();
        assert_eq!(read_object(&copy, "nf.meter (xdp)").unwrap(), fresh);
        // Other bytes under the same name: parsed on their own.
        let other = nfkit_nf::object("nf.sets", Hook::Xdp).expect("nf.sets xdp");
        let o = read_object(other, "nf.meter (xdp)").unwrap();
        assert_eq!(
            o,
            nfkit_object::read_object(other, "nf.meter (xdp)").unwrap()
        );
        assert_ne!(o, fresh);
        assert!(len() >= 2);
        // Damaged bytes: the reader's error, not a cached object.
        let mut bad = bytes.to_vec();
        bad.truncate(100);
        assert!(read_object(&bad, "nf.meter (xdp)").is_err());
        assert_eq!(read_object(bytes, "nf.meter (xdp)").unwrap(), fresh);
    }
}

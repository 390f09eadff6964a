//! Adding a user's NF object to an NF directory (`nfkit nf add`, the
//! RegisterNf RPC): the object is checked first — alone in a scratch
//! directory, it must give at least one NF or classifier, read from its
//! BTF or from the `.c` source given with it — then written atomically
//! as `<module>[.<hook>].o` (and `<module>.c`), where the search path
//! finds it (`nfkit nf list`, scripts' imports).

use crate::files::{digest, write_atomic};
use nfkit_nf::{Hook, NfDoc, SearchPath};
use std::path::{Path, PathBuf};

/// Why an object was not added.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    #[error("module `{0}`: 1 to 64 characters of A-Z a-z 0-9 _ - (not starting with `.`)")]
    Module(String),
    #[error("{0}: not an ELF object")]
    NotElf(String),
    #[error("{file}: {cause}")]
    Nfs { file: String, cause: String },
    #[error("{0}: has no NF (no `nf_<name>` function with five parameters in its BTF and no NF(...) in its source)")]
    Empty(String),
    #[error("{0}")]
    Io(String),
}

/// What was added.
#[derive(Clone, Debug)]
pub struct Added {
    pub module: String,
    pub path: PathBuf,
    pub digest: String,
    /// The same object was there already.
    pub unchanged: bool,
    pub nfs: Vec<NfDoc>,
}

impl Added {
    /// What `nfkit nf add` prints (directly or through nfkitd).
    pub fn text(module: &str, path: &str, unchanged: bool, names: &[String]) -> String {
        format!(
            "{} NF module {module} at {path}: {}\n",
            if unchanged { "unchanged:" } else { "added" },
            names.join(", ")
        )
    }
}

/// Checks a module name.
pub fn module_name(m: &str) -> Result<String, AddError> {
    let ok = !m.is_empty()
        && m.len() <= 64
        && !m.starts_with('.')
        && m.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(m.to_string())
    } else {
        Err(AddError::Module(m.to_string()))
    }
}

/// Adds `object` (with its C `source`, if given) as `module` for `hook`
/// (every hook its NFs fit when `None`) to `dir`.
pub fn add(
    dir: &Path,
    module: &str,
    hook: Option<Hook>,
    object: &[u8],
    source: Option<&str>,
    shown: &str,
) -> Result<Added, AddError> {
    let module = module_name(module)?;
    if !object.starts_with(b"\x7fELF") {
        return Err(AddError::NotElf(shown.to_string()));
    }
    let file = match hook {
        Some(h) => format!("{module}.{}.o", h.name()),
        None => format!("{module}.o"),
    };
    let io = |e: crate::DaemonError| AddError::Io(e.to_string());
    // Checked alone first.
    let scratch = std::env::temp_dir().join(format!(
        "nfkit-nf-add-{}-{}",
        std::process::id(),
        crate::audit::now_ms()
    ));
    let _guard = RemoveDir(scratch.clone());
    write_atomic(&scratch.join(&file), object).map_err(io)?;
    if let Some(s) = source {
        write_atomic(&scratch.join(format!("{module}.c")), s.as_bytes()).map_err(io)?;
    }
    let nfs: Vec<NfDoc> = SearchPath::new(vec![scratch.clone()])
        .list_all(true)
        .map_err(|e| AddError::Nfs {
            file: shown.to_string(),
            cause: e.to_string(),
        })?
        .into_iter()
        .filter(|d| d.origin != "embedded")
        .collect();
    if nfs.is_empty() {
        return Err(AddError::Empty(shown.to_string()));
    }
    let path = dir.join(&file);
    let d = digest(object);
    let unchanged = std::fs::read(&path).is_ok_and(|old| old == object)
        && source.is_none_or(|s| {
            std::fs::read_to_string(dir.join(format!("{module}.c"))).is_ok_and(|o| o == s)
        });
    if !unchanged {
        write_atomic(&path, object).map_err(io)?;
        if let Some(s) = source {
            write_atomic(&dir.join(format!("{module}.c")), s.as_bytes()).map_err(io)?;
        }
    }
    // As the search path will show them: with their final origin.
    let origin = path.display().to_string();
    let nfs = nfs
        .into_iter()
        .map(|mut n| {
            n.origin.clone_from(&origin);
            n
        })
        .collect();
    Ok(Added {
        module,
        path,
        digest: d,
        unchanged,
        nfs,
    })
}

/// Removes the scratch directory when dropped.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_are_checked() {
        assert!(module_name("my_nf-2").is_ok());
        for bad in ["", ".x", "a/b", "a b", "é", &"x".repeat(65)] {
            assert!(module_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn objects_without_nfs_and_non_elf_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("nfkit-nf-add-test-{}", std::process::id()));
        let _g = RemoveDir(dir.clone());
        let e = add(&dir, "m", None, b"not elf", None, "x.o").unwrap_err();
        assert!(matches!(e, AddError::NotElf(_)), "{e}");
        // An ELF header alone: not an object nfkit can read.
        let mut elf = b"\x7fELF".to_vec();
        elf.extend([0u8; 60]);
        assert!(add(&dir, "m", None, &elf, None, "x.o").is_err());
        assert!(!dir.join("m.o").exists(), "nothing written");
    }
}

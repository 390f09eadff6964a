//! Writing a file so that a crash leaves the old or the new content,
//! never a mix: a temporary file in the same directory, fsync, rename
//! over the old one, fsync of the directory.

use crate::error::DaemonError;
use std::io::Write as _;
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), DaemonError> {
    let io = |what: &'static str| {
        move |e| DaemonError::Io {
            what,
            path: path.to_path_buf(),
            cause: e,
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io("create directory for"))?;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}", std::process::id()));
    let tmp = dir.join(name);
    let mut f = std::fs::File::create(&tmp).map_err(io("create temporary file for"))?;
    f.write_all(bytes).map_err(io("write"))?;
    f.sync_all().map_err(io("sync"))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io("rename into"))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Reads JSON from `path`; `None` when the file does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, DaemonError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| DaemonError::Json {
                path: path.to_path_buf(),
                cause: e,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(DaemonError::Io {
            what: "read",
            path: path.to_path_buf(),
            cause: e,
        }),
    }
}

/// Writes `v` as pretty JSON to `path` with [`write_atomic`].
pub fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> Result<(), DaemonError> {
    let mut text = serde_json::to_vec_pretty(v).map_err(|e| DaemonError::Json {
        path: path.to_path_buf(),
        cause: e,
    })?;
    text.push(b'\n');
    write_atomic(path, &text)
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let h = sha2::Sha256::digest(bytes);
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in h {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("nfkitd-files-{}", std::process::id()));
        let p = dir.join("sub/x.json");
        write_json(&p, &vec![1, 2]).unwrap();
        write_json(&p, &vec![3]).unwrap();
        assert_eq!(read_json::<Vec<u32>>(&p).unwrap(), Some(vec![3]));
        let names: Vec<_> = std::fs::read_dir(dir.join("sub")).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert_eq!(read_json::<Vec<u32>>(&dir.join("none")).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn digest_is_sha256() {
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

//! The chain registry: each chain name has numbered versions, each the
//! script's text with its sha256 digest, kept under
//! `<data_dir>/chains/<name>/<version>.chain` with an index file written
//! atomically. Registering unchanged content gives back the version that
//! has it.

use crate::error::DaemonError;
use crate::files::{digest, read_json, write_atomic, write_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A registered version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub name: String,
    pub version: u32,
    pub digest: String,
    pub registered_at: u64,
    pub size: u64,
    pub registered_by: String,
}

#[derive(Default, Serialize, Deserialize)]
struct Index {
    chains: BTreeMap<String, Vec<Version>>,
}

/// The registry on disk.
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(data_dir: &std::path::Path) -> Store {
        Store {
            dir: data_dir.join("chains"),
        }
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn index(&self) -> Result<Index, DaemonError> {
        Ok(read_json(&self.index_path())?.unwrap_or_default())
    }

    fn source_path(&self, name: &str, version: u32) -> PathBuf {
        self.dir.join(name).join(format!("{version}.chain"))
    }

    /// Stores `source` as the next version of `name` (a valid name, see
    /// [`crate::validate::chain_name`]); `(version, unchanged)`.
    pub fn register(
        &self,
        name: &str,
        source: &str,
        by: &str,
    ) -> Result<(Version, bool), DaemonError> {
        let mut idx = self.index()?;
        let d = digest(source.as_bytes());
        let versions = idx.chains.entry(name.to_string()).or_default();
        if let Some(v) = versions.iter().find(|v| v.digest == d) {
            return Ok((v.clone(), true));
        }
        let v = Version {
            name: name.to_string(),
            version: versions.last().map_or(1, |v| v.version + 1),
            digest: d,
            registered_at: crate::audit::now_ms() / 1000,
            size: source.len() as u64,
            registered_by: by.to_string(),
        };
        write_atomic(&self.source_path(name, v.version), source.as_bytes())?;
        versions.push(v.clone());
        write_json(&self.index_path(), &idx)?;
        Ok((v, false))
    }

    /// Every version (of `name` only, when given), by name and version.
    pub fn list(&self, name: Option<&str>) -> Result<Vec<Version>, DaemonError> {
        Ok(self
            .index()?
            .chains
            .into_iter()
            .filter(|(n, _)| name.is_none_or(|x| x == n))
            .flat_map(|(_, vs)| vs)
            .collect())
    }

    /// Version `version` of `name` (0: the latest) and its source.
    pub fn get(&self, name: &str, version: u32) -> Result<Option<(Version, String)>, DaemonError> {
        let idx = self.index()?;
        let Some(vs) = idx.chains.get(name) else {
            return Ok(None);
        };
        let v = match version {
            0 => vs.last(),
            n => vs.iter().find(|v| v.version == n),
        };
        let Some(v) = v else {
            return Ok(None);
        };
        let p = self.source_path(name, v.version);
        let src = std::fs::read_to_string(&p).map_err(|e| DaemonError::Io {
            what: "read chain",
            path: p,
            cause: e,
        })?;
        Ok(Some((v.clone(), src)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_count_up_and_unchanged_content_keeps_its_version() {
        let dir = std::env::temp_dir().join(format!("nfkitd-chains-{}", std::process::id()));
        let s = Store::new(&dir);
        let (v1, same) = s.register("acl", "a", "root").unwrap();
        assert_eq!((v1.version, same), (1, false));
        let (v2, _) = s.register("acl", "b", "root").unwrap();
        assert_eq!(v2.version, 2);
        let (again, same) = s.register("acl", "a", "root").unwrap();
        assert_eq!((again.version, same), (1, true));
        assert_eq!(s.get("acl", 0).unwrap().unwrap().1, "b");
        assert_eq!(s.get("acl", 1).unwrap().unwrap().1, "a");
        assert!(s.get("acl", 3).unwrap().is_none());
        assert_eq!(s.list(Some("acl")).unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Opened maps kept between requests: a map read finds its map through
//! nfkit's state file and opens its pin once, then reuses the fd while
//! the state file stays the same file (inode, size, modification time:
//! every deploy and undeploy replaces it), so a hot `GetEntry` costs one
//! `stat` and the lookup itself.

use nfkit_abi::AttachPoint;
use nfkit_control::maps::{KernelMap, MapError};
use nfkit_kernel::deploy::Paths;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::sync::{Arc, Mutex};

/// Which map: (name, dev, attach) as the request gave them.
type Key = (String, Option<String>, Option<AttachPoint>);

/// The state file's identity: (device, inode, size, mtime in ns).
type Stamp = (u64, u64, u64, i128);

/// The maps open under one state file stamp.
type Open = (Option<Stamp>, HashMap<Key, Arc<KernelMap>>);

/// The cache.
#[derive(Default)]
pub struct MapCache {
    inner: Mutex<Open>,
}

/// At most this many maps stay open (beyond it the cache starts over).
const MAX_OPEN: usize = 1024;

fn stamp(paths: &Paths) -> Option<Stamp> {
    let m = std::fs::metadata(&paths.state_file).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    ))
}

impl MapCache {
    /// The map `name` (on `dev`, at `hook`), opened now or before.
    pub fn open(
        &self,
        paths: &Paths,
        name: &str,
        dev: Option<&str>,
        hook: Option<AttachPoint>,
    ) -> Result<Arc<KernelMap>, MapError> {
        let now = stamp(paths);
        let key: Key = (name.to_string(), dev.map(str::to_string), hook);
        {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            if g.0 != now || now.is_none() {
                g.0 = now;
                g.1.clear();
            }
            if let Some(m) = g.1.get(&key) {
                return Ok(m.clone());
            }
        }
        let m = Arc::new(KernelMap::find(paths, name, dev, hook)?);
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        // Kept only when the state file did not change meanwhile.
        if g.0 == now && now.is_some() {
            if g.1.len() >= MAX_OPEN {
                g.1.clear();
            }
            g.1.insert(key, m.clone());
        }
        Ok(m)
    }
}

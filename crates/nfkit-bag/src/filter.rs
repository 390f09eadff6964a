//! The kernel filter: a chain script compiled for the `socket` hook,
//! loaded, and attached to the server's socket with `SO_ATTACH_BPF`
//! (attaching again replaces the filter atomically, which is how the
//! server swaps versions at runtime). Its per-CPU `stats` map counts
//! valid, invalid and over-limit datagrams.

use crate::error::BagError;
use std::os::fd::AsFd;
use std::path::Path;

/// `examples/bag/filter.py`: the exact validity check.
pub const FILTER_V1: &str = include_str!("../../../examples/bag/filter.py");
/// `examples/bag/filter_v2.py`: the check plus a key limit of 1000.
pub const FILTER_V2: &str = include_str!("../../../examples/bag/filter_v2.py");
/// The key limit of [`FILTER_V2`].
pub const V2_KEY_LIMIT: u32 = 1000;

/// The filter's counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub valid: u64,
    pub invalid: u64,
    pub over_limit: u64,
}

impl Counters {
    /// Every datagram the filter saw.
    pub fn total(&self) -> u64 {
        self.valid + self.invalid + self.over_limit
    }

    /// Datagrams it dropped.
    pub fn dropped(&self) -> u64 {
        self.invalid + self.over_limit
    }

    /// `self + other`.
    pub fn add(&self, o: &Counters) -> Counters {
        Counters {
            valid: self.valid + o.valid,
            invalid: self.invalid + o.invalid,
            over_limit: self.over_limit + o.over_limit,
        }
    }
}

/// A compiled and loaded socket filter.
pub struct KernelFilter {
    name: String,
    entry: String,
    loaded: nfkit_kernel::Loaded,
}

impl std::fmt::Debug for KernelFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelFilter")
            .field("name", &self.name)
            .field("entry", &self.entry)
            .finish()
    }
}

impl KernelFilter {
    /// Compiles `source` (named `name` in diagnostics) for the socket
    /// hook and loads it, with its control-plane writes done.
    pub fn compile(name: &str, source: &str) -> Result<KernelFilter, BagError> {
        let opts = nfkit_lang::Options {
            search: nfkit_nf::SearchPath::from_env(&[]),
            hook: Some(nfkit_nf::Hook::Socket),
        };
        let c = nfkit_lang::compile(name, source, &opts).map_err(|e| BagError::Compile {
            file: name.to_string(),
            cause: e.to_string(),
        })?;
        let entry = c
            .entry()
            .ok_or_else(|| BagError::Compile {
                file: name.to_string(),
                cause: "the script has no classifier (every_packet(...))".into(),
            })?
            .to_string();
        let loaded = nfkit_kernel::load_image(
            &c.image,
            &nfkit_kernel::LoadOptions {
                entries: Some(vec![entry.clone()]),
                ..nfkit_kernel::LoadOptions::default()
            },
        )?;
        for (m, k, v) in c.control_plane() {
            let map = loaded.map(&m).ok_or_else(|| BagError::Compile {
                file: name.to_string(),
                cause: format!("map `{m}` of the control plane is not loaded"),
            })?;
            map.update(&k, &v, 0)?;
        }
        let f = KernelFilter {
            name: name.to_string(),
            entry,
            loaded,
        };
        f.stats_map()?;
        Ok(f)
    }

    /// Compiles the script in file `path`.
    pub fn from_file(path: &Path) -> Result<KernelFilter, BagError> {
        let src = std::fs::read_to_string(path).map_err(|source| BagError::File {
            path: path.to_path_buf(),
            source,
        })?;
        KernelFilter::compile(&path.display().to_string(), &src)
    }

    /// The script's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn stats_map(&self) -> Result<nfkit_kernel::KMap, BagError> {
        self.loaded.map("stats").ok_or_else(|| BagError::Compile {
            file: self.name.clone(),
            cause: "the filter has no `stats = PercpuArrayMap(u64, N)` map".into(),
        })
    }

    /// Attaches the filter to `sock` (replacing its filter, atomically).
    pub fn attach(&self, sock: impl AsFd) -> Result<(), BagError> {
        let prog = self
            .loaded
            .prog(&self.entry)
            .ok_or_else(|| BagError::Compile {
                file: self.name.clone(),
                cause: format!("entry `{}` is not loaded", self.entry),
            })?;
        nfkit_kernel::attach_socket_filter(sock, prog)?;
        Ok(())
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<Counters, BagError> {
        let m = self.stats_map()?;
        let slot = |i: u32| -> Result<u64, BagError> {
            let per_cpu = m.lookup_percpu(&i.to_le_bytes())?.unwrap_or_default();
            Ok(per_cpu
                .iter()
                .map(|v| {
                    let mut a = [0u8; 8];
                    let n = v.len().min(8);
                    a[..n].copy_from_slice(&v[..n]);
                    u64::from_le_bytes(a)
                })
                .sum())
        };
        Ok(Counters {
            valid: slot(0)?,
            invalid: slot(1)?,
            over_limit: if m.max_entries() > 2 { slot(2)? } else { 0 },
        })
    }

    /// Sets every counter to 0 (between runs of an experiment).
    pub fn reset_counters(&self) -> Result<(), BagError> {
        let m = self.stats_map()?;
        let ncpu = m.lookup_percpu(&0u32.to_le_bytes())?.map_or(0, |v| v.len());
        let zeros = vec![vec![0u8; 8]; ncpu];
        for i in 0..m.max_entries() {
            m.update_percpu(&i.to_le_bytes(), &zeros, 0)?;
        }
        Ok(())
    }
}

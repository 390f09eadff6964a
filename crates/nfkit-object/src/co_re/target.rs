//! The BTF relocations are resolved against, indexed by flavour-less
//! name; the running kernel's is read once, on first use.

use super::compat::{essential_name, same_kind};
use crate::btf::Btf;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Where the running kernel publishes its BTF.
pub const KERNEL_BTF_PATH: &str = "/sys/kernel/btf/vmlinux";
/// Environment variable naming another file to use as the kernel's BTF.
pub const KERNEL_BTF_ENV: &str = "NFKIT_KERNEL_BTF";

/// A target BTF with its types by essential name.
#[derive(Debug)]
pub struct Target {
    btf: Btf,
    by_name: HashMap<String, Vec<u32>>,
}

impl Target {
    pub fn new(btf: Btf) -> Target {
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
        for (id, t) in btf.types().iter().enumerate().skip(1) {
            if !t.name.is_empty() {
                by_name
                    .entry(essential_name(&t.name).to_string())
                    .or_default()
                    .push(id as u32);
            }
        }
        Target { btf, by_name }
    }

    /// Reads and parses a raw BTF file (`/sys/kernel/btf/vmlinux`).
    pub fn from_file(path: &str) -> Result<Target, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("the kernel's BTF ({path}): {e}"))?;
        let btf = Btf::parse(&bytes).map_err(|e| format!("the kernel's BTF ({path}): {e}"))?;
        Ok(Target::new(btf))
    }

    pub fn btf(&self) -> &Btf {
        &self.btf
    }

    /// Target types that may stand for local type `id`: same kind (enum
    /// and enum64 alike), same name without flavours.
    pub fn candidates(&self, local: &Btf, id: u32) -> Vec<u32> {
        let Some(lt) = local.get(id) else {
            return Vec::new();
        };
        let name = essential_name(&lt.name);
        if name.is_empty() {
            return Vec::new();
        }
        self.by_name
            .get(name)
            .map(|ids| {
                ids.iter()
                    .copied()
                    .filter(|&t| {
                        self.btf
                            .get(t)
                            .is_some_and(|t| same_kind(&t.kind, &lt.kind))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The running kernel's BTF ([`KERNEL_BTF_PATH`], or the file
/// [`KERNEL_BTF_ENV`] names), read on first use and kept; the error says
/// which file is missing or bad.
pub fn kernel_target() -> Result<Arc<Target>, String> {
    static CACHE: OnceLock<Result<Arc<Target>, String>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let path = std::env::var(KERNEL_BTF_ENV).unwrap_or_else(|_| KERNEL_BTF_PATH.into());
            Target::from_file(&path).map(Arc::new)
        })
        .clone()
}

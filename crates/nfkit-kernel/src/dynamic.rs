//! Dynamic mode of [`deploy`](crate::deploy::deploy) (docs/abi.md §5):
//! the dynamic classifier stays attached, each NF's dynamic entry is
//! loaded once and kept at its slot of `nfkit_progs`, and a chain change
//! loads only the chain's segments — into the bank of slots the running
//! version does not use — then switches each chain with one prog-array
//! update of its entry slot.

use crate::deploy::{DeployRequest, Paths, State};
use crate::error::KernelError;
use crate::load::Loaded;
use crate::sys;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Chain entries: slot = chain id, `0..CHAIN_SLOTS`.
pub const CHAIN_SLOTS: u32 = 63;
/// Slots of NF dynamic entries.
pub const NF_SLOTS: (u32, u32) = (64, 256);
/// The two banks of segment slots (a chain's later segments).
pub const BANKS: [(u32, u32); 2] = [(256, 640), (640, 1024)];

/// The dynamic parts of a deploy request (from
/// `nfkit_lang::DynCompiled`): the request's image holds them all.
#[derive(Clone, Copy, Debug)]
pub struct DynParts<'a> {
    /// (NF symbol, dynamic entry program, slot) of every NF called.
    pub nfs: &'a [(String, String, u32)],
    /// (segment program, slot); a chain's first segment at its chain id.
    pub segments: &'a [(String, u32)],
    /// The bank the segments were placed in ([`next_slots`]).
    pub bank: u32,
}

/// One NF kept loaded for a dynamic deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynNf {
    pub symbol: String,
    /// Its dynamic entry program (`dyn_tb_dst`), pinned under `progs/`.
    pub entry: String,
    pub slot: u32,
    pub prog_id: u32,
}

/// What a dynamic deployment has in `nfkit_progs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynRecord {
    /// The attached dynamic classifier (`dyn_every_packet`).
    pub classifier: String,
    /// Bank of the running segments (0 or 1).
    pub bank: u32,
    /// Every NF loaded so far (kept for later versions).
    pub nfs: Vec<DynNf>,
    /// (segment program, slot) of the running version.
    pub segments: Vec<(String, u32)>,
}

/// Where the next version on a device and hook goes: the NFs already
/// loaded keep their slots, segments go to the other bank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotPlan {
    pub nfs: BTreeMap<String, u32>,
    pub bank: u32,
    pub seg_first: u32,
    pub seg_end: u32,
}

/// The slots to compile the next dynamic version of `dev`/`hook` with.
pub fn next_slots(
    paths: &Paths,
    dev: &str,
    hook: crate::deploy::AttachPoint,
) -> Result<SlotPlan, KernelError> {
    let state = State::load(paths)?;
    let prev = state.find(dev, hook);
    let rec = prev.and_then(|d| d.dynamic.as_ref());
    let bank = rec.map_or(0, |r| 1 - r.bank.min(1));
    let mut nfs = BTreeMap::new();
    if let (Some(d), Some(r)) = (prev, rec) {
        for nf in &r.nfs {
            if d.pin_dir.join("progs").join(&nf.entry).exists() {
                nfs.insert(nf.symbol.clone(), nf.slot);
            }
        }
    }
    let (seg_first, seg_end) = BANKS[bank as usize];
    Ok(SlotPlan {
        nfs,
        bank,
        seg_first,
        seg_end,
    })
}

/// What a deploy loads.
pub(crate) struct Plan {
    /// Entry programs to load.
    pub entries: Vec<String>,
    /// The dynamic classifier is attached already and stays.
    pub keep_classifier: bool,
    /// NF symbols whose dynamic entry is loaded now.
    pub load_nfs: HashSet<String>,
}

impl Plan {
    pub(crate) fn new(req: &DeployRequest<'_>, prev: Option<&DynRecord>, dir: &Path) -> Plan {
        let Some(d) = &req.dynamic else {
            return Plan {
                entries: vec![req.entry.to_string()],
                keep_classifier: false,
                load_nfs: HashSet::new(),
            };
        };
        let keep_classifier = prev.is_some_and(|p| p.classifier == req.entry)
            && dir.join("prog").exists()
            && still_attached(dir);
        let mut entries = Vec::new();
        if !keep_classifier {
            entries.push(req.entry.to_string());
        }
        let mut load_nfs = HashSet::new();
        for (sym, entry, slot) in d.nfs {
            let loaded = prev.is_some_and(|p| {
                p.nfs
                    .iter()
                    .any(|n| &n.symbol == sym && n.slot == *slot && &n.entry == entry)
            }) && dir.join("progs").join(entry).exists();
            if !loaded && load_nfs.insert(sym.clone()) {
                entries.push(entry.clone());
            }
        }
        entries.extend(d.segments.iter().map(|(s, _)| s.clone()));
        Plan {
            entries,
            keep_classifier,
            load_nfs,
        }
    }
}

/// Is the deployment in `dir` attached (its pinned link has a device)?
/// A clsact deployment has no link pin; it counts as attached.
fn still_attached(dir: &Path) -> bool {
    let link = dir.join("link");
    let Some(p) = link.to_str() else {
        return false;
    };
    match sys::obj_get(p) {
        Ok(fd) => sys::link_info(fd.as_raw_fd()).is_ok_and(|i| i.ifindex != 0 && i.prog_id != 0),
        Err(_) => !link.exists(),
    }
}

/// The program pinned at `path`.
pub(crate) fn pinned_prog(path: &Path) -> Result<OwnedFd, KernelError> {
    let p = path
        .to_str()
        .ok_or_else(|| KernelError::PathNotUtf8(path.to_path_buf()))?;
    sys::obj_get(p).map_err(|errno| KernelError::Os {
        what: format!("open pinned program {}", path.display()),
        errno,
    })
}

/// The kernel's id of program `fd`.
pub(crate) fn prog_id(fd: RawFd) -> Result<u32, KernelError> {
    sys::prog_id(fd).map_err(|errno| KernelError::Os {
        what: "id of program".into(),
        errno,
    })
}

fn slot_key(slot: u32) -> [u8; 4] {
    slot.to_le_bytes()
}

/// Pins the newly loaded NFs and fills `nfkit_progs`: NFs, the later
/// segments, then each chain's entry (the switch); removes the entries
/// of chains the new version no longer has and classifier-table entries
/// it does not write.
pub(crate) fn install(
    plan: &Plan,
    d: &DynParts<'_>,
    entry: &str,
    loaded: &Loaded,
    prev: Option<&DynRecord>,
    dir: &Path,
    writes: &[(String, Vec<u8>, Vec<u8>)],
) -> Result<DynRecord, KernelError> {
    let progs = loaded
        .map("nfkit_progs")
        .ok_or_else(|| KernelError::Missing {
            what: "map",
            name: nfkit_abi::maps::PROGS_MAP.into(),
            why: "is not in the dynamic image",
        })?;
    let pdir = dir.join("progs");
    std::fs::create_dir_all(&pdir).map_err(|source| KernelError::File {
        what: "create",
        path: pdir.clone(),
        cause: source,
    })?;
    let mut nfs: Vec<DynNf> = Vec::new();
    for (sym, entry, slot) in d.nfs {
        if nfs.iter().any(|n| &n.symbol == sym) {
            continue;
        }
        let prog_id = if plan.load_nfs.contains(sym) {
            let p = loaded.prog(entry).ok_or_else(|| KernelError::Missing {
                what: "NF entry",
                name: entry.clone(),
                why: "was not loaded",
            })?;
            let pin = pdir.join(entry);
            let _ = std::fs::remove_file(&pin);
            let path = pin
                .to_str()
                .ok_or_else(|| KernelError::PathNotUtf8(pin.clone()))?;
            sys::obj_pin(p.fd(), path).map_err(|errno| KernelError::Os {
                what: format!("pin program at {}", pin.display()),
                errno,
            })?;
            progs.update(&slot_key(*slot), &(p.fd() as u32).to_le_bytes(), 0)?;
            p.id()?
        } else {
            prev.and_then(|p| p.nfs.iter().find(|n| &n.symbol == sym))
                .map_or(0, |n| n.prog_id)
        };
        nfs.push(DynNf {
            symbol: sym.clone(),
            entry: entry.clone(),
            slot: *slot,
            prog_id,
        });
    }
    // NFs of earlier versions stay loaded for later ones.
    if let Some(p) = prev {
        for n in &p.nfs {
            if !nfs.iter().any(|x| x.symbol == n.symbol) && pdir.join(&n.entry).exists() {
                nfs.push(n.clone());
            }
        }
    }
    let seg_fd = |name: &str| {
        loaded
            .prog(name)
            .map(|p| p.fd())
            .ok_or_else(|| KernelError::Missing {
                what: "segment",
                name: name.to_string(),
                why: "was not loaded",
            })
    };
    for (name, slot) in d.segments.iter().filter(|(_, s)| *s >= CHAIN_SLOTS) {
        progs.update(&slot_key(*slot), &(seg_fd(name)? as u32).to_le_bytes(), 0)?;
    }
    // The switch: one update per chain.
    for (name, slot) in d.segments.iter().filter(|(_, s)| *s < CHAIN_SLOTS) {
        progs.update(&slot_key(*slot), &(seg_fd(name)? as u32).to_le_bytes(), 0)?;
    }
    if let Some(p) = prev {
        for (_, slot) in p.segments.iter().filter(|(_, s)| *s < CHAIN_SLOTS) {
            if !d.segments.iter().any(|(_, s)| s == slot) {
                let _ = progs.delete(&slot_key(*slot));
            }
        }
    }
    // Classifier tables hold exactly what this version writes.
    for m in loaded.maps() {
        if !m.name().starts_with("nfkit_cls_") {
            continue;
        }
        let array = m.map_type() == nfkit_object::MapType::Array;
        let cleared = vec![0u8; m.value_size() as usize];
        for k in m.keys() {
            if !writes.iter().any(|(w, key, _)| w == m.name() && *key == k) {
                // Array entries cannot be deleted: an all-zero entry
                // lacks NF_CLS_VALID and is ignored.
                let _ = if array {
                    m.update(&k, &cleared, 0)
                } else {
                    m.delete(&k)
                };
            }
        }
    }
    Ok(DynRecord {
        classifier: entry.to_string(),
        bank: d.bank,
        nfs,
        segments: d.segments.to_vec(),
    })
}

/// Removes the NF program pins of a dynamic deployment in `dir`.
pub(crate) fn remove_pins(dir: &Path) -> Result<(), KernelError> {
    let pdir = dir.join("progs");
    let Ok(rd) = std::fs::read_dir(&pdir) else {
        return Ok(());
    };
    for e in rd.flatten() {
        std::fs::remove_file(e.path()).map_err(|err| KernelError::File {
            what: "remove pin",
            path: e.path(),
            cause: err,
        })?;
    }
    let _ = std::fs::remove_dir(&pdir);
    Ok(())
}

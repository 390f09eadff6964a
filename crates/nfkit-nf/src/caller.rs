//! The caller: a tiny entry program (`src/caller.c`, built per hook) that
//! parses a packet, runs one NF with arguments from a map and reports its
//! whole 64-bit result. Tests run NFs through it in the VM (and the kernel
//! through `BPF_PROG_TEST_RUN`), exactly as a chain would call them.
//!
//! [`caller_image`] links the caller with the NF's module, renaming the
//! NF's function `nf_<name>` to the caller's undefined `nf_target`.
//! Arguments and the last result live in the per-CPU array
//! [`CALL_ARGS_MAP`]: `{u64 args[4]; u64 result; u64 calls}`.

use crate::catalogue::HookObj;
use crate::error::NfError;
use crate::hook::Hook;
use crate::search::SearchPath;
use nfkit_object::object::{FuncRef, ObjFunction, RelocTarget};
use nfkit_object::{Image, Object};

/// Entry returning the NF's result as r0 (all 64 bits in the VM).
pub const CALL_ENTRY: &str = "nfkit_call";
/// Entry returning the hook's return code for the result (`nf_finish`, chain 0).
pub const CALL_ACT_ENTRY: &str = "nfkit_call_act";
/// Per-CPU array (1 entry) with the arguments, the last result and a run count.
pub const CALL_ARGS_MAP: &str = "nfkit_call_args";
/// Size of a [`CALL_ARGS_MAP`] value.
pub const CALL_ARGS_SIZE: usize = 48;
/// The name the caller calls.
pub const TARGET: &str = "nf_target";

static CALLERS: &[HookObj] = include!(concat!(env!("OUT_DIR"), "/callers.rs"));

/// The caller object built for `hook`.
pub fn caller_object(hook: Hook) -> &'static HookObj {
    match CALLERS.iter().find(|o| o.hook == hook) {
        Some(o) => o,
        // The build makes one per hook, in Hook::ALL order.
        None => &CALLERS[0],
    }
}

/// A [`CALL_ARGS_MAP`] value holding `args` (result and count zero).
pub fn encode_args(args: [u64; 4]) -> [u8; CALL_ARGS_SIZE] {
    let mut v = [0u8; CALL_ARGS_SIZE];
    for (chunk, a) in v.chunks_exact_mut(8).zip(args) {
        chunk.copy_from_slice(&a.to_le_bytes());
    }
    v
}

/// Keeps the functions of `obj` for which `keep` holds, fixing the
/// function indexes of relocations and prog-array initialisers.
fn retain_functions(obj: &mut Object, keep: impl Fn(&ObjFunction) -> bool) {
    let mut new_index = Vec::with_capacity(obj.functions.len());
    let mut next = 0usize;
    for f in &obj.functions {
        if keep(f) {
            new_index.push(Some(next));
            next += 1;
        } else {
            new_index.push(None);
        }
    }
    let remap = |r: &mut FuncRef| -> bool {
        match r {
            FuncRef::Index(i) => match new_index.get(*i).copied().flatten() {
                Some(n) => {
                    *i = n;
                    true
                }
                None => false,
            },
            FuncRef::Named(_) => true,
        }
    };
    let old = std::mem::take(&mut obj.functions);
    for (f, keep) in old.into_iter().zip(new_index.iter()) {
        if keep.is_some() {
            obj.functions.push(f);
        }
    }
    for f in &mut obj.functions {
        f.relocs.retain_mut(|r| match &mut r.target {
            RelocTarget::Call(t) | RelocTarget::FuncAddr(t) => remap(t),
            _ => true,
        });
    }
    obj.map_inits.retain_mut(|m| remap(&mut m.target));
}

/// The caller and the module object holding `symbol`, ready to link: the
/// module's `symbol` renamed to [`TARGET`], the module's own programs
/// (standalone and dynamic exports) left out, and of the caller's
/// programs only those in `entries` ([`CALL_ENTRY`], [`CALL_ACT_ENTRY`]).
pub fn caller_objects(
    module_elf: &[u8],
    origin: &str,
    symbol: &str,
    hook: Hook,
    entries: &[&str],
) -> Result<Vec<Object>, NfError> {
    let c = caller_object(hook);
    let mut caller = nfkit_object::read_object(c.object, c.path).map_err(|e| NfError::Object {
        path: c.path.to_string(),
        cause: Box::new(read_err(c.path, e)),
    })?;
    retain_functions(&mut caller, |f| {
        f.prog_type.is_none() || entries.contains(&f.name.as_str())
    });
    let mut module =
        nfkit_object::read_object(module_elf, origin).map_err(|e| NfError::Object {
            path: origin.to_string(),
            cause: Box::new(read_err(origin, e)),
        })?;
    let f = module
        .functions
        .iter_mut()
        .find(|f| f.name == symbol && f.prog_type.is_none())
        .ok_or_else(|| NfError::NoSymbol {
            path: origin.to_string(),
            symbol: symbol.to_string(),
        })?;
    f.name = TARGET.to_string();
    for f in &mut module.functions {
        for r in &mut f.relocs {
            if let RelocTarget::Call(FuncRef::Named(n)) | RelocTarget::FuncAddr(FuncRef::Named(n)) =
                &mut r.target
            {
                if n == symbol {
                    *n = TARGET.to_string();
                }
            }
        }
    }
    let wanted = reachable(&module, TARGET);
    retain_functions(&mut module, |f| wanted.contains(&f.name));
    Ok(vec![caller, module])
}

/// Names of the functions of `obj` that `from` reaches through calls
/// (itself included).
fn reachable(obj: &Object, from: &str) -> Vec<String> {
    let mut seen: Vec<usize> = obj
        .functions
        .iter()
        .position(|f| f.name == from)
        .into_iter()
        .collect();
    let mut i = 0;
    while let Some(&k) = seen.get(i) {
        i += 1;
        let Some(f) = obj.functions.get(k) else {
            continue;
        };
        for r in &f.relocs {
            let target = match &r.target {
                RelocTarget::Call(t) | RelocTarget::FuncAddr(t) => t,
                _ => continue,
            };
            let idx = match target {
                FuncRef::Index(j) => Some(*j),
                FuncRef::Named(n) => obj.functions.iter().position(|g| &g.name == n),
            };
            if let Some(j) = idx {
                if !seen.contains(&j) {
                    seen.push(j);
                }
            }
        }
    }
    seen.iter()
        .filter_map(|&k| obj.functions.get(k).map(|f| f.name.clone()))
        .collect()
}

fn read_err(path: &str, e: nfkit_object::ReadError) -> nfkit_object::Error {
    nfkit_object::Error::Read {
        path: path.to_string(),
        cause: Box::new(e),
    }
}

/// The linked Image of the caller (both entries) and NF `module`.`name`
/// for `hook`, module objects resolved through `path`.
pub fn caller_image(
    path: &SearchPath,
    module: &str,
    name: &str,
    hook: Hook,
) -> Result<Image, NfError> {
    caller_image_with(path, module, name, hook, &[CALL_ENTRY, CALL_ACT_ENTRY])
}

/// [`caller_image`] with only the caller entries `entries`.
pub fn caller_image_with(
    path: &SearchPath,
    module: &str,
    name: &str,
    hook: Hook,
    entries: &[&str],
) -> Result<Image, NfError> {
    let r = path
        .resolve(module, hook)?
        .ok_or_else(|| NfError::NotFound {
            what: format!("module {module} for hook {hook}"),
        })?;
    let origin = r.origin.to_string();
    let origin = if origin == "embedded" {
        format!("{}.{hook}.o", r.module)
    } else {
        origin
    };
    let objects = caller_objects(&r.bytes, &origin, &format!("nf_{name}"), hook, entries)?;
    nfkit_object::link(&objects).map_err(|e| NfError::Link {
        what: format!("{module}.{name} with the caller ({hook})"),
        cause: Box::new(e),
    })
}

//! The native C rows: `native.c` compiled at run time by clang (`-O2`,
//! vectorizers off since eBPF has none) into a shared object, loaded with
//! `dlopen` and called through function pointers (an indirect call, like
//! every engine's run). Built at run time so the VM crate needs no build
//! script for a bench; [`Lib`] also builds the DPDK shim.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

/// `(data, data_end) -> r0`.
pub type PacketFn = extern "C" fn(*const u8, *const u8) -> u64;
/// `(argument) -> r0`.
pub type ArgFn = extern "C" fn(u64) -> u64;

/// The native versions of the bench programs.
#[derive(Clone, Copy)]
pub struct Native {
    pub parse: PacketFn,
    pub alu: ArgFn,
    pub pkt_sum: PacketFn,
    pub helper_calls: ArgFn,
}

/// How the C is compiled (for the report).
pub const FLAGS: &[&str] = &["-O2", "-fno-vectorize", "-fno-slp-vectorize"];

/// A shared object the bench built and loaded (never unloaded).
pub struct Lib(*mut libc::c_void);

impl Lib {
    /// Compiles `src` (a file next to this one) with clang and `args`
    /// into `out/so`, and loads it.
    pub fn build(src: &str, out: &Path, so: &str, args: &[String]) -> Result<Lib, String> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("benches/engines")
            .join(src);
        let so = out.join(so);
        let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
        let status = Command::new(&clang)
            .args(["-shared", "-fPIC", "-o"])
            .arg(&so)
            .arg(&src)
            .args(args)
            .status()
            .map_err(|e| format!("cannot run {clang}: {e}"))?;
        if !status.success() {
            return Err(format!("{clang} failed on {}", src.display()));
        }
        let path = CString::new(so.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: dlopen of the object just built from our own source.
        let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!("dlopen {}: {}", so.display(), dl_error()));
        }
        Ok(Lib(lib))
    }

    /// The address of `name`.
    pub fn sym(&self, name: &str) -> Result<*mut libc::c_void, String> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `self.0` is a live handle (never closed).
        let p = unsafe { libc::dlsym(self.0, c.as_ptr()) };
        if p.is_null() {
            Err(format!("{name}: {}", dl_error()))
        } else {
            Ok(p)
        }
    }
}

/// Compiles `native.c` into `out` and loads it.
pub fn load(out: &Path) -> Result<Native, String> {
    let flags: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
    let lib = Lib::build("native.c", out, "engines-native.so", &flags)?;
    // SAFETY: the symbols are the functions of native.c with exactly
    // these signatures; the library stays loaded for the process.
    unsafe {
        Ok(Native {
            parse: std::mem::transmute::<*mut libc::c_void, PacketFn>(lib.sym("nat_parse")?),
            alu: std::mem::transmute::<*mut libc::c_void, ArgFn>(lib.sym("nat_alu")?),
            pkt_sum: std::mem::transmute::<*mut libc::c_void, PacketFn>(lib.sym("nat_pkt_sum")?),
            helper_calls: std::mem::transmute::<*mut libc::c_void, ArgFn>(
                lib.sym("nat_helper_calls")?,
            ),
        })
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

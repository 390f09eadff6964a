//! Building BPF C files with clang, for tests: one implementation of
//! `clang -O2 -g -target bpf [ARGS] -I/usr/include/<arch>-linux-gnu
//! [-I DIR]... [-D NAME]... -c SRC -o OUT`, and `vmlinux.h` of the
//! running kernel (`bpftool btf dump file /sys/kernel/btf/vmlinux format
//! c`) for CO-RE programs.
//!
//! ```no_run
//! use nfkit_corpus::clang::BpfBuild;
//! let bytes = BpfBuild::new("prog.c")
//!     .arg("-mcpu=v3")
//!     .include("corpus")
//!     .define("NF_HOOK_TC")
//!     .bytes()
//!     .unwrap_or_else(|e| panic!("{e}"));
//! # let _ = bytes;
//! ```

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A failed build: the tool, the file it worked on, and what went wrong
/// (the tool's stderr, or why it could not run or its output be read).
#[derive(Debug)]
pub struct BuildError {
    /// `clang`, `bpftool`, or `read` (the object could not be read).
    pub tool: &'static str,
    /// The C source (or, for `bpftool`, the BTF file).
    pub source: PathBuf,
    /// The tool's stderr, or the I/O error.
    pub message: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} failed on {}: {}",
            self.tool,
            self.source.display(),
            self.message.trim_end()
        )
    }
}

impl std::error::Error for BuildError {}

/// One `clang -target bpf` invocation, built up and then run by
/// [`BpfBuild::object_file`] or [`BpfBuild::bytes`].
#[derive(Clone, Debug)]
pub struct BpfBuild {
    src: PathBuf,
    args: Vec<OsString>,
    arch_include: bool,
    includes: Vec<PathBuf>,
    defines: Vec<String>,
    out: Option<PathBuf>,
}

impl BpfBuild {
    /// Builds C file `src` with `-O2 -g -target bpf` and the system's
    /// `/usr/include/<arch>-linux-gnu` on the include path.
    pub fn new(src: impl Into<PathBuf>) -> BpfBuild {
        BpfBuild {
            src: src.into(),
            args: Vec::new(),
            arch_include: true,
            includes: Vec::new(),
            defines: Vec::new(),
            out: None,
        }
    }

    /// One more clang argument (`-mcpu=v3`), after `-target bpf`.
    pub fn arg(mut self, arg: impl Into<OsString>) -> BpfBuild {
        self.args.push(arg.into());
        self
    }

    /// `-I DIR`, after the system's arch include directory.
    pub fn include(mut self, dir: impl Into<PathBuf>) -> BpfBuild {
        self.includes.push(dir.into());
        self
    }

    /// `-DNAME` (or `-DNAME=VALUE`).
    pub fn define(mut self, name: impl Into<String>) -> BpfBuild {
        self.defines.push(name.into());
        self
    }

    /// Leaves out `-I/usr/include/<arch>-linux-gnu` (programs built
    /// against a generated `vmlinux.h` alone).
    pub fn without_arch_include(mut self) -> BpfBuild {
        self.arch_include = false;
        self
    }

    /// Writes the object to `path` (kept) instead of a temporary file.
    pub fn out(mut self, path: impl Into<PathBuf>) -> BpfBuild {
        self.out = Some(path.into());
        self
    }

    /// Runs clang; the object's path: the [`BpfBuild::out`] path, or a
    /// new file in the temporary directory (unique per process and
    /// call), which the caller owns.
    pub fn object_file(&self) -> Result<PathBuf, BuildError> {
        let out = match &self.out {
            Some(p) => p.clone(),
            None => self.temp_path(),
        };
        self.run(&out)?;
        Ok(out)
    }

    /// Runs clang; the object's bytes. Without [`BpfBuild::out`] the
    /// object goes to a temporary file of its own, removed after reading.
    pub fn bytes(&self) -> Result<Vec<u8>, BuildError> {
        let out = self.object_file()?;
        let bytes = std::fs::read(&out);
        if self.out.is_none() {
            let _ = std::fs::remove_file(&out);
        }
        bytes.map_err(|e| BuildError {
            tool: "read",
            source: out,
            message: e.to_string(),
        })
    }

    /// The clang command line for object `out`.
    pub fn command(&self, out: &Path) -> Command {
        let mut cmd = Command::new("clang");
        cmd.args(["-O2", "-g", "-target", "bpf"]).args(&self.args);
        if self.arch_include {
            cmd.arg(format!(
                "-I/usr/include/{}-linux-gnu",
                std::env::consts::ARCH
            ));
        }
        for dir in &self.includes {
            cmd.arg("-I").arg(dir);
        }
        for d in &self.defines {
            cmd.arg(format!("-D{d}"));
        }
        cmd.arg("-c").arg(&self.src).arg("-o").arg(out);
        cmd
    }

    fn run(&self, out: &Path) -> Result<(), BuildError> {
        let fail = |message: String| BuildError {
            tool: "clang",
            source: self.src.clone(),
            message,
        };
        let o = self
            .command(out)
            .output()
            .map_err(|e| fail(format!("cannot run clang: {e}")))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(fail(format!(
                "{}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )))
        }
    }

    /// `$TMPDIR/nfkit-bpf-STEM-PID-N.o`: tests build from parallel
    /// threads and processes.
    fn temp_path(&self) -> PathBuf {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let stem = self.src.file_stem().unwrap_or_default().to_string_lossy();
        std::env::temp_dir().join(format!("nfkit-bpf-{stem}-{}-{n}.o", std::process::id()))
    }
}

/// The running kernel's BTF as C (`bpftool btf dump file
/// /sys/kernel/btf/vmlinux format c`), written to `dir/vmlinux.h`; its path.
pub fn vmlinux_h(dir: impl AsRef<Path>) -> Result<PathBuf, BuildError> {
    const BTF: &str = "/sys/kernel/btf/vmlinux";
    let fail = |tool, message: String| BuildError {
        tool,
        source: PathBuf::from(BTF),
        message,
    };
    let o = Command::new("bpftool")
        .args(["btf", "dump", "file", BTF, "format", "c"])
        .output()
        .map_err(|e| fail("bpftool", format!("cannot run bpftool: {e}")))?;
    if !o.status.success() {
        return Err(fail(
            "bpftool",
            format!("{}\n{}", o.status, String::from_utf8_lossy(&o.stderr)),
        ));
    }
    let path = dir.as_ref().join("vmlinux.h");
    std::fs::write(&path, o.stdout)
        .map_err(|e| fail("bpftool", format!("write {}: {e}", path.display())))?;
    Ok(path)
}

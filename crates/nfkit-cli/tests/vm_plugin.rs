//! `nfkit vm plugin [MEMORY_HEX] [--elf]` driven the way the
//! bpf_conformance runner drives a plugin: memory as hex bytes (each
//! followed by two spaces) in the first argument, the plugin options
//! (here empty) in the second, the program as hex bytes on stdin; r0 in
//! hex on stdout.

use nfkit_isa::asm::{assemble, Syntax};
#[path = "vm_plugin/runner_elf.rs"]
mod runner_elf;

use std::io::Write;
use std::process::{Command, Output, Stdio};

const SUITE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/conformance/bpf_conformance/tests"
);

/// The runner's hex encoding: every byte as two digits and two spaces.
fn runner_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}  ")).collect()
}

fn plugin(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(["vm", "plugin"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nfkit");
    if let Some(mut i) = child.stdin.take() {
        // The plugin may refuse its arguments and exit before reading its
        // input: a broken pipe here is part of that, not a failure.
        let written = i
            .write_all(stdin.as_bytes())
            .and_then(|()| i.write_all(b"\n"));
        if let Err(e) = written {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
        }
    }
    child.wait_with_output().expect("wait")
}

fn section(text: &str, name: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("-- ") {
            inside = s.trim() == name;
        } else if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// How the runner is told to run (`--elf`, `--xdp_prolog`).
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Default: raw instructions on stdin.
    Raw,
    /// `--xdp_prolog true --plugin_options "--xdp_prolog true"`: raw
    /// instructions behind the XDP prolog, the plugin told they are XDP.
    RawXdp,
    /// `--elf true`: the runner's ELF, program `main` in `.text`.
    Elf,
    /// `--elf true --xdp_prolog true`: program `main` in section `xdp`,
    /// behind the XDP prolog when there is memory.
    ElfXdp,
    /// Default, on the JIT: the wrapper runs `nfkit vm plugin --jit "$@"`.
    Jit,
}

/// The plugin's arguments as the runner builds them: the memory (when
/// there is any), the plugin options (split at spaces), then `--elf`.
fn runner_args(mem: &[u8], mode: Mode) -> Vec<String> {
    let mut args = Vec::new();
    if matches!(mode, Mode::Jit) {
        args.push("--jit".to_string());
    }
    if !mem.is_empty() {
        args.push(runner_hex(mem));
    }
    if matches!(mode, Mode::RawXdp) {
        args.extend(["--xdp_prolog".to_string(), "true".to_string()]);
    }
    if matches!(mode, Mode::Elf | Mode::ElfXdp) {
        args.push("--elf".to_string());
    }
    args
}

/// What running the suite in one mode gave.
struct Suite {
    vectors: usize,
    failed: Vec<String>,
    /// Vectors whose program the JIT could not compile (the plugin says
    /// so on stderr), with the reason.
    fallbacks: Vec<String>,
}

/// Runs every conformance vector through the plugin as the suite's runner
/// does in `mode`.
fn run_suite(mode: Mode) -> Suite {
    let mut files: Vec<_> = std::fs::read_dir(SUITE)
        .expect("conformance suite")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    files.sort();
    let mut failed = Vec::new();
    let mut fallbacks = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        let insns = assemble(&section(&text, "asm"), Some(Syntax::Conformance)).expect("assembles");
        let mut code = nfkit_isa::encode_bytes(&insns);
        let mem: Vec<u8> = section(&text, "mem")
            .split_whitespace()
            .map(|t| u8::from_str_radix(t, 16).expect("mem hex"))
            .collect();
        if matches!(mode, Mode::RawXdp | Mode::ElfXdp) && !mem.is_empty() {
            code.splice(0..0, runner_elf::xdp_prolog(mem.len()));
        }
        let program = match mode {
            Mode::Raw | Mode::RawXdp | Mode::Jit => runner_hex(&code),
            Mode::Elf => runner_hex(&runner_elf::write(".text", &code)),
            Mode::ElfXdp => runner_hex(&runner_elf::write("xdp", &code)),
        };
        let want = section(&text, "result");
        let want = u64::from_str_radix(want.trim().trim_start_matches("0x"), 16).expect("result");
        let args = runner_args(&mem, mode);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = plugin(&args, &program);
        let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let err = String::from_utf8_lossy(&o.stderr);
        if let Some(why) = err
            .lines()
            .find_map(|l| l.strip_prefix("nfkit: JIT fallback: "))
        {
            fallbacks.push(format!("{}: {why}", f.display()));
        }
        let ok = o.status.success()
            && out
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            && u64::from_str_radix(&out, 16) == Ok(want);
        if !ok {
            failed.push(format!(
                "{}: exit {:?}, stdout `{out}`, stderr `{}`, expected {want:x}",
                f.display(),
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
    }
    Suite {
        vectors: files.len(),
        failed,
        fallbacks,
    }
}

/// Asserts that every vector passes in `mode`, printing the count; the
/// suite's result.
fn suite_passes(mode: Mode) -> Suite {
    let s = run_suite(mode);
    assert_eq!(s.vectors, 313);
    println!(
        "{mode:?}: {}/{} pass",
        s.vectors - s.failed.len(),
        s.vectors
    );
    assert!(s.failed.is_empty(), "{}", s.failed.join("\n"));
    s
}

/// Every conformance vector, as the runner runs it by default: r0 printed
/// in lowercase hex, exit 0.
#[test]
fn conformance_cases_through_the_plugin() {
    suite_passes(Mode::Raw);
}

/// `--xdp_prolog true` with raw instructions, the plugin told by its
/// options that they are an XDP program.
#[test]
fn conformance_cases_behind_the_xdp_prolog() {
    suite_passes(Mode::RawXdp);
}

/// `--elf true`: the program is the global `main` of `.text`, and the
/// local calls go to `.text` offsets that have no symbol.
#[test]
fn conformance_cases_as_runner_elf_objects() {
    suite_passes(Mode::Elf);
}

/// `--elf true --xdp_prolog true`: an XDP program in section `xdp` whose
/// prolog takes the memory from `xdp_md` (`data`, `data_end`).
#[test]
fn conformance_cases_as_runner_xdp_elf_objects() {
    suite_passes(Mode::ElfXdp);
}

/// `--jit`: every vector passes on the JIT; the programs it could not
/// compile ran on the interpreter, and the plugin named the reason for
/// each (only the interpreter's modes are silent about it).
#[test]
fn conformance_cases_on_the_jit() {
    let s = suite_passes(Mode::Jit);
    println!(
        "Jit: {} of {} on the JIT, {} fell back to the interpreter",
        s.vectors - s.fallbacks.len(),
        s.vectors,
        s.fallbacks.len()
    );
    if let Some(first) = s.fallbacks.first() {
        println!("  e.g. {first}");
    }
    // x86-64 has the JIT: every vector must have run on it.
    if cfg!(target_arch = "x86_64") {
        assert!(s.fallbacks.is_empty(), "{:?}", s.fallbacks);
    }
    assert!(run_suite(Mode::Raw).fallbacks.is_empty());
}

/// `--jit` before the memory (the wrapper's form) and among the plugin
/// options (the runner's `--plugin_options --jit`) run the same program
/// to the same result as the interpreter.
#[test]
fn jit_option_runs_a_conformance_program() {
    let text = std::fs::read_to_string(format!("{SUITE}/ldxh-same-reg.data")).expect("vector");
    let insns = assemble(&section(&text, "asm"), Some(Syntax::Conformance)).expect("asm");
    let prog = runner_hex(&nfkit_isa::encode_bytes(&insns));
    let mem: Vec<u8> = section(&text, "mem")
        .split_whitespace()
        .map(|t| u8::from_str_radix(t, 16).expect("mem hex"))
        .collect();
    let want = section(&text, "result");
    let want = want.trim().trim_start_matches("0x").to_string();
    let mem = runner_hex(&mem);
    for args in [
        vec![mem.as_str()],
        vec!["--jit", mem.as_str()],
        vec![mem.as_str(), "--jit"],
        vec![mem.as_str(), "--jit", "true", "--elf", "false"],
    ] {
        let o = plugin(&args, &prog);
        assert!(o.status.success(), "{args:?}: {o:?}");
        let got = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert_eq!(
            u64::from_str_radix(&got, 16).ok(),
            u64::from_str_radix(&want, 16).ok(),
            "{args:?}"
        );
    }
}

#[test]
fn faults_and_bad_input_exit_non_zero_with_a_message() {
    // ldxb r0, [r1+9] on 2 bytes of memory.
    let prog = runner_hex(&nfkit_isa::encode_bytes(
        &assemble("ldxb %r0, [%r1+9]\nexit\n", Some(Syntax::Conformance)).expect("asm"),
    ));
    for (args, stdin) in [
        (vec!["aa bb"], prog.as_str()),
        (vec![""], "zz"),
        (vec!["a"], prog.as_str()),
        (vec![""], "95 00 00 00 00 00 00"), // 7 bytes: not an instruction
        (vec!["", "--bogus-option"], prog.as_str()),
    ] {
        let o = plugin(&args, stdin);
        assert!(!o.status.success(), "{args:?} {stdin}");
        assert!(
            o.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert!(!o.stderr.is_empty(), "{args:?}: a message on stderr");
    }
    // Memory is readable (and the whole memory reaches the program).
    let o = plugin(&["aa  bb  cc  dd  ee  ff  00  11  22  33  "], &prog);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "33");
}

#[test]
fn elf_programs() {
    // An XDP program reads its packet (the memory, padded to 14 bytes)
    // through `xdp_md`: r0 = *(u16 *)(data + 2) + (data_end - data).
    let xdp = assemble(
        "ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\nldxh %r0, [%r2+2]\nsub %r3, %r2\nadd %r0, %r3\nexit\n",
        Some(Syntax::Conformance),
    )
    .expect("asm");
    // Any other program gets r1 = the memory, r2 = its length.
    let raw = assemble(
        "ldxh %r0, [%r1+2]\nadd %r0, %r2\nexit\n",
        Some(Syntax::Conformance),
    )
    .expect("asm");
    // The XDP one written by nfkit's ELF writer (section `xdp`), the other
    // as the runner writes it (`main` in `.text`).
    let image = nfkit_object::Image::from_insns("prog", nfkit_object::ProgType::Xdp, xdp);
    let xdp_elf = nfkit_object::write_object(&image).expect("ELF");
    let text_elf = runner_elf::write(".text", &nfkit_isa::encode_bytes(&raw));
    for (elf, want) in [(xdp_elf, 0x0403 + 14), (text_elf, 0x0403 + 4)] {
        assert_eq!(&elf[..4], b"\x7fELF");
        let hex = runner_hex(&elf);
        for args in [
            vec!["01 02 03 04", "--elf"],
            vec!["01 02 03 04", "", "--elf"],
            vec!["01 02 03 04", "--elf", "true"],
        ] {
            let o = plugin(&args, &hex);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                format!("{want:x}"),
                "{args:?}"
            );
        }
        // Without --elf the same bytes are no instruction stream.
        assert!(!plugin(&["01 02 03 04"], &hex).status.success());
    }
}

/// A local call to a `.text` offset that no symbol names: the target
/// becomes a subprogram (`sub_<offset>`), and the program runs.
#[test]
fn unsymbolled_local_call_in_a_runner_object() {
    let insns = assemble(
        "mov %r1, 20\ncall local f\nadd %r0, 2\nexit\nf:\nmov %r0, %r1\nexit\n",
        Some(Syntax::Conformance),
    )
    .expect("asm");
    let code = nfkit_isa::encode_bytes(&insns);
    let elf = runner_elf::write(".text", &code);
    let o = plugin(&["--elf"], &runner_hex(&elf));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "16");
    let obj = nfkit_object::read_object(&elf, "runner.o").expect("reads");
    let names: Vec<(&str, bool)> = obj
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.prog_type.is_some()))
        .collect();
    assert_eq!(names, [("main", true), ("sub_20", false)]);
}

//! `nfkit vm plugin [MEMORY_HEX] [--elf]` driven the way the
//! bpf_conformance runner drives a plugin: memory as hex bytes (each
//! followed by two spaces) in the first argument, the plugin options
//! (here empty) in the second, the program as hex bytes on stdin; r0 in
//! hex on stdout.

use nfkit_isa::asm::{assemble, Syntax};
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

/// Every conformance test through the plugin, as the suite's runner
/// would run it: r0 printed in lowercase hex, exit 0.
#[test]
fn conformance_cases_through_the_plugin() {
    let mut files: Vec<_> = std::fs::read_dir(SUITE)
        .expect("conformance suite")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "data"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 313);
    let mut failed = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        let insns = assemble(&section(&text, "asm"), Some(Syntax::Conformance)).expect("assembles");
        let program = runner_hex(&nfkit_isa::encode_bytes(&insns));
        let mem: Vec<u8> = section(&text, "mem")
            .split_whitespace()
            .map(|t| u8::from_str_radix(t, 16).expect("mem hex"))
            .collect();
        let want = section(&text, "result");
        let want = u64::from_str_radix(want.trim().trim_start_matches("0x"), 16).expect("result");
        let o = plugin(&[&runner_hex(&mem), ""], &program);
        let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
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
    assert!(failed.is_empty(), "{}", failed.join("\n"));
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
    // An ELF object holding `r0 = *(u16 *)(r1 + 2); r0 += r2; exit`.
    let insns = assemble(
        "ldxh %r0, [%r1+2]\nadd %r0, %r2\nexit\n",
        Some(Syntax::Conformance),
    )
    .expect("asm");
    let image = nfkit_object::Image::from_insns("prog", nfkit_object::ProgType::Xdp, insns);
    let elf = nfkit_object::write_object(&image).expect("ELF");
    assert_eq!(&elf[..4], b"\x7fELF");
    let hex = runner_hex(&elf);
    for args in [
        vec!["01 02 03 04", "--elf"],
        vec!["01 02 03 04", "", "--elf"],
    ] {
        let o = plugin(&args, &hex);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            format!("{:x}", 0x0403 + 4)
        );
    }
    // Without --elf the same bytes are no instruction stream.
    assert!(!plugin(&["01 02 03 04"], &hex).status.success());
}

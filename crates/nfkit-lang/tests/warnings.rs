//! The checker's warnings that are not about loops (implicit narrowing of
//! a call result, comparisons decided by a type's range): golden files
//! `tests/warnings/<name>.py` give `tests/warnings/<name>.expected`, as
//! `nfkit check` prints them; NFKIT_BLESS=1 rewrites the expected files.
//! Every script compiles and warns. A comparison with a literal out of
//! the operand's range keeps its (constant) value at run time.

mod common;
use common::*;
use nfkit_lang::{check, diag, Options};
use std::path::Path;

#[test]
fn golden_warnings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/warnings");
    let bless = std::env::var_os("NFKIT_BLESS").is_some();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/warnings")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".py"))
                .map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 3, "only {} golden files", names.len());
    let mut failures = Vec::new();
    for n in &names {
        let src = std::fs::read_to_string(dir.join(format!("{n}.py"))).expect("source");
        let file = format!("{n}.py");
        let got = match check::check(&file, &src, &Options::default()) {
            Ok(c) => diag::render(&c.warnings),
            Err(e) => panic!("{n} does not compile:\n{e}"),
        };
        assert!(got.contains(": warning: "), "{n}: no warning");
        assert!(got.contains("^\n  help: "), "{n}: {got}");
        let exp_path = dir.join(format!("{n}.expected"));
        if bless {
            std::fs::write(&exp_path, &got).expect("write expected");
            continue;
        }
        let want = std::fs::read_to_string(&exp_path).unwrap_or_default();
        if got != want {
            failures.push(format!("--- {n}: expected\n{want}--- got\n{got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn comparisons_out_of_range_keep_their_value_in_the_vm() {
    let (_, mut vm) = load(
        r#"
from nf.classify import every_packet

out = ArrayMap(u64, 8)

def main() -> u64:
    x: u8 = Packet.read_u8(23)
    out[0] = u64(x == 300)
    out[1] = u64(x != -1)
    out[2] = u64(x < 0)
    out[3] = u64(x >= 0)
    out[4] = u64(300 > x)
    out[5] = u64(x <= -1)
    out[6] = u64(x == 17)
    return PASS

every_packet(main)
"#,
    );
    // Byte 23 is the IPv4 protocol: 17 (UDP).
    let o = run(
        &mut vm,
        &udp4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, 64, &[]),
    );
    assert_eq!(o.code, XDP_PASS);
    let m = vm.vm.map("out").expect("out");
    let got: Vec<u64> = (0..7u32)
        .map(|i| {
            let v = m
                .lookup(&i.to_le_bytes())
                .ok()
                .flatten()
                .unwrap_or_default();
            let mut b = [0u8; 8];
            b.copy_from_slice(&v[..8]);
            u64::from_le_bytes(b)
        })
        .collect();
    assert_eq!(got, [0, 1, 0, 1, 1, 0, 1]);
}

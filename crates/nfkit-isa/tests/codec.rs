//! Decode/encode invariants: anything that decodes re-encodes to the same
//! bytes, nothing panics, and the conformance suite's reserved-field
//! encodings are rejected with the field named.

use nfkit_isa::*;
use proptest::prelude::*;
use std::path::PathBuf;

fn conformance_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/bpf_conformance")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20000))]
    #[test]
    fn decode_encode_identity(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let len = bytes.len() / 8 * 8;
        let bytes = &bytes[..len];
        if let Ok(insns) = decode_bytes(bytes) {
            prop_assert_eq!(encode_bytes(&insns), bytes.to_vec());
        }
    }

    #[test]
    fn every_opcode_byte(code in any::<u8>(), regs in any::<u8>(), off in any::<i16>(), imm in any::<i32>()) {
        let raw = RawInsn { code, dst: regs & 0xf, src: regs >> 4, off, imm };
        let slots = [raw, RawInsn::default()];
        if let Ok(insn) = decode_one(&slots) {
            let enc = insn.encode();
            prop_assert_eq!(&enc[..], &slots[..insn.slots()]);
        }
    }
}

#[test]
fn unused_field_encodings_are_rejected_with_the_field_named() {
    let dir = conformance_dir().join("negative");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("unused-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let raw: Vec<u8> = text
            .lines()
            .skip_while(|l| l.trim() != "-- raw")
            .skip(1)
            .take_while(|l| !l.starts_with("--"))
            .flat_map(|l| {
                l.split_whitespace()
                    .map(|b| u8::from_str_radix(b, 16).unwrap())
            })
            .collect();
        let err = decode_bytes(&raw).expect_err(&name);
        // The file name says which field is non-zero: ...-offset, -src, -dst, -imm.
        let field = name.trim_end_matches(".data").rsplit('-').next().unwrap();
        let want = match field {
            "offset" => "offset",
            "src" => "src register",
            "dst" => "dst register",
            "imm" => "immediate",
            other => panic!("unexpected file {other}"),
        };
        let msg = err.to_string();
        assert!(msg.contains(want), "{name}: {msg}");
        assert_eq!(err.index, 0, "{name}");
        n += 1;
    }
    assert_eq!(n, 45);
}

#[test]
fn lddw_round_trip() {
    let i = Insn::lddw(Reg::R0, 0x1122334455667788);
    let raw: Vec<u64> = i.encode().into_iter().map(RawInsn::to_u64).collect();
    assert_eq!(raw, vec![0x5566778800000018, 0x1122334400000000]);
    assert_eq!(decode_bytes(&encode_bytes(&[i])).unwrap(), vec![i]);
}

#[test]
fn truncated_lddw_is_an_error() {
    let bytes = [0x18, 0, 0, 0, 0, 0, 0, 0];
    let e = decode_bytes(&bytes).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::TruncatedLddw);
}

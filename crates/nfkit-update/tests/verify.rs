//! The verifier refuses each kind of bad update with its reason and
//! leaves its state as it was; key files readable by others are refused.

use nfkit_update::message::CodeFormat;
use nfkit_update::{Body, Key, KeyError, KeyRing, Message, Position, Refusal, Verifier};
use std::os::unix::fs::PermissionsExt;

fn key(id: u32, b: u8) -> Key {
    Key::new(id, [b; 32]).expect("key")
}

fn code(version: u64) -> Message {
    Message::new(
        "sw0",
        Position::Pre,
        version,
        Body::Code {
            format: CodeFormat::ChainScript,
            name: "a.py".into(),
            bytes: b"print(1)\n".to_vec(),
        },
    )
    .expect("message")
}

fn verifier() -> Verifier {
    let mut v = Verifier::new("sw0", KeyRing::new([key(1, 1), key(2, 2)]));
    v.set_current(Position::Pre, 1);
    v
}

#[test]
fn each_refusal_has_its_reason_and_changes_nothing() {
    let mut v = verifier();
    let good = code(2).seal(&key(2, 2)).expect("seal");
    let ok = v.check(&good).expect("a good update");
    assert_eq!(ok.key_id, 2);
    assert_eq!(ok.message.version, 2);

    let mut flipped = good.clone();
    flipped[79] ^= 0x10; // a MAC bit (target "sw0": the MAC is at 79)
    let mut payload_bit = good.clone();
    let last = payload_bit.len() - 1;
    payload_bit[last] ^= 1;
    let mut version_bit = good.clone();
    version_bit[12] ^= 1;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() - 3].to_vec(), "truncated"),
        (b"hello".to_vec(), "malformed"),
        (code(2).unsigned().expect("unsigned"), "unauthenticated"),
        (code(2).seal(&key(9, 2)).expect("seal"), "unknown_key"),
        (code(2).seal(&key(1, 7)).expect("seal"), "forged"),
        (flipped, "forged"),
        (version_bit, "forged"),
        (payload_bit, "digest"),
        (
            Message {
                target: "sw1".into(),
                ..code(2)
            }
            .seal(&key(1, 1))
            .expect("seal"),
            "wrong_target",
        ),
        (code(1).seal(&key(1, 1)).expect("seal"), "downgrade"),
        (
            Message {
                position: Position::Table("acl".into()),
                version: 0,
                ..code(0)
            }
            .seal(&key(1, 1))
            .expect("seal"),
            "downgrade",
        ),
    ];
    for (bytes, want) in &cases {
        let r = v.check(bytes).expect_err(want);
        assert_eq!(r.reason(), *want, "{r}");
        assert!(!r.to_string().is_empty());
    }
    // Nothing changed: the good update is still good.
    assert_eq!(v.current(&Position::Pre), 1);
    let ok = v.check(&good).expect("still good");
    v.accept(&ok);
    assert_eq!(v.current(&Position::Pre), 2);
    // Now it is a replay; a new message of the same version a downgrade.
    assert_eq!(v.check(&good), Err(Refusal::Replayed));
    assert!(matches!(
        v.check(&code(2).seal(&key(1, 1)).expect("seal")),
        Err(Refusal::Downgrade {
            current: 2,
            got: 2,
            ..
        })
    ));
    // Versions may jump; each position has its own.
    let jump = v
        .check(&code(40).seal(&key(1, 1)).expect("seal"))
        .expect("jump");
    v.accept(&jump);
    assert_eq!(v.current(&Position::Pre), 40);
    let entry = Message::new(
        "sw0",
        Position::Table("acl".into()),
        1,
        Body::EntrySet {
            map: "acl".into(),
            key: vec![1],
            value: vec![2],
        },
    )
    .expect("message");
    let e = v
        .check(&entry.seal(&key(2, 2)).expect("seal"))
        .expect("entry");
    v.accept(&e);
    assert_eq!(v.current(&Position::Table("acl".into())), 1);
    assert_eq!(v.current(&Position::Pre), 40);
}

#[test]
fn rotation_drops_old_keys() {
    let mut v = verifier();
    let old = code(2).seal(&key(1, 1)).expect("seal");
    v.set_keys(KeyRing::new([key(2, 2), key(3, 3)]));
    assert_eq!(v.check(&old), Err(Refusal::UnknownKey(1)));
    assert!(v.check(&code(2).seal(&key(3, 3)).expect("seal")).is_ok());
}

#[test]
fn key_files_readable_by_others_are_refused() {
    let dir = std::env::temp_dir().join(format!("nfkit-update-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("keys");
    let ring = KeyRing::new([
        Key::generate(1).expect("gen"),
        Key::generate(4).expect("gen"),
    ]);
    ring.write_new(&path).expect("write");
    let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let loaded = KeyRing::load(&path).expect("load");
    assert_eq!(loaded.ids(), vec![1, 4]);
    assert_eq!(loaded.newest().map(|k| k.id), Some(4));
    // The same key signs and verifies across a file round trip.
    let m = code(2).seal(loaded.get(1).expect("key 1")).expect("seal");
    let mut v = Verifier::new("sw0", ring.clone());
    v.set_current(Position::Pre, 1);
    assert!(v.check(&m).is_ok());
    assert!(matches!(ring.write_new(&path), Err(KeyError::Io { .. })));
    for mode in [0o640, 0o604, 0o620, 0o644, 0o666] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let e = KeyRing::load(&path).expect_err("permissive");
        assert!(matches!(e, KeyError::Permissive { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("chmod 600") && text.contains("group or others"),
            "{text}"
        );
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    assert!(KeyRing::load(&path).is_ok());
    assert!(matches!(
        KeyRing::load(&dir),
        Err(KeyError::NotAFile { .. })
    ));
    assert!(matches!(
        KeyRing::load(&dir.join("missing")),
        Err(KeyError::Io { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

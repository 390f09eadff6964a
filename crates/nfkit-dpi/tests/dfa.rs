//! The DFA's scan against the `regex` crate: the first match (the
//! smallest end over every pattern, the lowest pattern among those)
//! on fixed cases and random payloads; errors name their pattern.

mod common;
use common::{first_match, reference};
use nfkit_dpi::{compile, Dfa, DpiError, Match, Options};
use proptest::prelude::*;
use regex::bytes::Regex;
use std::sync::OnceLock;

fn dfa(pats: &[&str]) -> Dfa {
    compile(pats, &Options::default()).expect("compiles")
}

const SQLI: &[&str] = &[
    r"(?i)union\s+select",
    r"(?i)or\s+1\s*=\s*1",
    r"(?i)drop\s+table",
    r"'\s*--",
];

#[test]
fn fixed_cases() {
    let d = dfa(SQLI);
    let res = reference(SQLI, false);
    let cases: &[&[u8]] = &[
        b"GET /?id=1 UNION  SELECT pass FROM users HTTP/1.1",
        b"GET /?id=1 or 1 = 1",
        b"name=x'-- ",
        b"nothing to see",
        b"",
        b"DrOp\tTaBlE t",
        b"union selec",
    ];
    for c in cases {
        for limit in [0, 5, 16, usize::MAX] {
            assert_eq!(
                d.scan(c, limit),
                first_match(&res, c, limit),
                "{:?} limit {limit}",
                String::from_utf8_lossy(c)
            );
        }
    }
    assert!(d.states() < 100, "{} states", d.states());
    let m = d.scan(b"a UNION SELECT b", usize::MAX).expect("match");
    assert_eq!(
        m,
        Match {
            pattern: 0,
            end: 14
        }
    );
    assert_eq!(Match::from_result(m.to_result()), Some(m));
    assert_eq!(Match::from_result(0), None);
}

#[test]
fn anchors_bytes_and_case() {
    let pats = &[
        "^\\x13BitTorrent protocol",
        "^SSH-2\\.0-",
        "d1:ad2:id20:",
        "end$",
        "[\\x80-\\xff]{4}",
    ];
    let d = dfa(pats);
    let res = reference(pats, false);
    let cases: &[&[u8]] = &[
        b"\x13BitTorrent protocol\0\0\0",
        b"x\x13BitTorrent protocol",
        b"SSH-2.0-OpenSSH_9.2",
        b"  SSH-2.0-",
        b"xxd1:ad2:id20:abc",
        b"the end",
        b"the end.",
        b"\x80\x81\x82",
        b"ab\x80\x81\x82\xff",
    ];
    for c in cases {
        for limit in [3, 7, usize::MAX] {
            assert_eq!(
                d.scan(c, limit),
                first_match(&res, c, limit),
                "{:?} limit {limit}",
                c
            );
        }
    }
    // `$` is the payload's end, not the scan limit's.
    assert_eq!(d.scan(b"the end.", 7), None);
    assert_eq!(d.scan(b"the end", 7), Some(Match { pattern: 3, end: 7 }));
    let ci = compile(
        &["get /admin"],
        &Options {
            case_insensitive: true,
            ..Options::default()
        },
    )
    .expect("ci");
    assert_eq!(
        ci.scan(b"GeT /ADMIN", usize::MAX),
        Some(Match {
            pattern: 0,
            end: 10
        })
    );
}

#[test]
fn errors_name_the_pattern() {
    let e = compile(&["ok", "a(b", "c"], &Options::default()).unwrap_err();
    match &e {
        DpiError::Syntax {
            index: 1, pattern, ..
        } => assert_eq!(pattern, "a(b"),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().starts_with("pattern 1 `a(b`:"), "{e}");
    // 2^12 states: the classic blow-up of "the 12th byte from the end".
    let e = compile(&["GET", "(a|b)*a(a|b){11}", "POST"], &Options::default()).unwrap_err();
    match &e {
        DpiError::TooManyStates {
            index: 1,
            pattern,
            budget,
            states,
        } => {
            assert_eq!(pattern, "(a|b)*a(a|b){11}");
            assert!(states > budget, "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        compile::<&str>(&[], &Options::default()).unwrap_err(),
        DpiError::Empty
    );
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    // Random bytes with pieces of the patterns' words spliced in, so
    // matches happen often.
    let words = prop::sample::select(vec![
        &b"union"[..],
        b" select",
        b"UNION",
        b"SeLeCt",
        b"  ",
        b"or ",
        b"1",
        b"=",
        b"' --",
        b"drop",
        b" table",
        b"\t",
        b"x",
    ]);
    prop::collection::vec(
        prop_oneof![
            3 => words.prop_map(|w| w.to_vec()),
            1 => prop::collection::vec(any::<u8>(), 0..4),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn random_payloads_match_the_regex_crate(p in payload(), limit in prop_oneof![Just(usize::MAX), 0usize..64]) {
        static SET: OnceLock<(Dfa, Vec<Regex>)> = OnceLock::new();
        let (d, res) = SET.get_or_init(|| (dfa(SQLI), reference(SQLI, false)));
        prop_assert_eq!(d.scan(&p, limit), first_match(res, &p, limit));
    }
}

#[test]
fn a_wide_bounded_repetition_is_refused_by_name() {
    // "Any 512 bytes, then a marker": more states than the budget.
    let big = r"^\x16\x03(?s:.){0,512}\x00\x00[\x00-\xff]{4}\x00";
    let e = compile(&["^SSH-2\\.0-", big], &Options::default()).unwrap_err();
    assert!(
        matches!(&e, DpiError::TooManyStates { index: 1, .. }),
        "{e}"
    );
}

//! Authenticated code updates at the pipeline positions other than
//! `pre`, under numbered traffic: `post:PORT` (that port's post
//! program alone) and `table:NAME` (the ingress code the table's actions
//! call, keeping the table's maps). Hundreds of updates lose no frame,
//! and each frame is counted on the version it ran (the version's mark
//! on the frame = its per-version counter); hostile variants of those
//! positions are refused with their reason and change nothing.

mod common;
use common::numbered::{assert_each_once, finish, frames_per_version, Traffic};
use common::try_compile_switch as compile;
use nfkit_switch::{Switch, SwitchConfig, UpdateAuth};
use nfkit_update::message::CodeFormat;
use nfkit_update::{Body, Key, KeyRing, Message, Position};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The ingress program: table T (exact on the destination) sends the
/// test's traffic (to 10.2.0.1) back out of port 1 through `act`, which
/// marks it (payload byte 4) with `mark`; `key` is T's match kind.
fn pipeline(mark: char, key: &str) -> String {
    format!(
        "def act(port: u64) -> u64:\n\
         \x20   Packet.write_u8(46, u8({}))\n\
         \x20   return port\n\
         T = Table(keys={{\"ip.dst\": \"{key}\"}}, actions=[act, DROP], size=16, default=DROP,\n\
         \x20         entries=[(\"10.2.0.1{}\", act, 1)])\n\
         pipeline(tables=[T])\n\
         attach(\"sw0\", \"switch\")\n",
        mark as u32,
        if key == "lpm" { "/32" } else { "" }
    )
}

/// A post program marking every frame it sends with `mark`.
fn post(mark: char) -> String {
    format!(
        "from nf.classify import every_packet\n\
         def main() -> u64:\n\
         \x20   Packet.write_u8(46, u8({}))\n\
         \x20   return PASS\n\
         every_packet(main)\n",
        mark as u32
    )
}

fn key() -> Key {
    Key::new(1, [3; 32]).expect("key")
}

fn code(position: Position, version: u64, name: &str, text: &str) -> Vec<u8> {
    Message::new(
        "sw0",
        position,
        version,
        Body::Code {
            format: CodeFormat::ChainScript,
            name: name.into(),
            bytes: text.as_bytes().to_vec(),
        },
    )
    .expect("message")
    .seal(&key())
    .expect("seal")
}

fn start(workers: usize) -> (Switch, Traffic) {
    let first = compile("A.py", &pipeline('A', "exact")).expect("compile");
    let (traffic, port) = Traffic::port(workers, workers, 500, 4_000_000);
    let cfg = SwitchConfig {
        workers,
        pin: false,
        auth: Some(UpdateAuth {
            switch_id: "sw0".into(),
            keys: KeyRing::new([key()]),
        }),
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&first, vec![port], &cfg).expect("start");
    (sw, traffic)
}

/// Every frame given went out once, in order of numbers.
fn none_lost(given: u64, out: &[(u32, u8)]) {
    assert!(given > 200, "traffic flowed: {given} frames");
    assert_each_once(out, given);
}

/// Frames out with each mark.
fn by_mark(out: &[(u32, u8)]) -> BTreeMap<u8, u64> {
    let mut m = BTreeMap::new();
    for (_, k) in out {
        *m.entry(*k).or_default() += 1;
    }
    m
}

fn post_updates_under_traffic(workers: usize, updates: u64) {
    let (sw, traffic) = start(workers);
    let mut marks = BTreeMap::new();
    for v in 1..=updates {
        let mark = if v % 2 == 0 { 'B' } else { 'C' };
        let r = sw
            .update(
                &code(Position::Post("1".into()), v, "post.py", &post(mark)),
                "test",
                Instant::now(),
                &compile,
            )
            .expect("post update");
        assert_eq!((r.position.as_str(), r.version), ("post:1", v));
        marks.insert(v, mark as u8);
        std::thread::sleep(Duration::from_micros(200));
    }
    let (given, stats, out) = finish(sw, &traffic);
    none_lost(given, &out);
    assert_eq!(stats.updates.applied, updates);
    assert_eq!(stats.updates.positions.get("post:1"), Some(&updates));
    assert_eq!(
        stats.updates.positions.get("pre"),
        Some(&1),
        "pre unchanged"
    );
    assert_eq!(stats.versions.len(), 1, "the ingress program never changed");
    assert_eq!(stats.post_versions.len() as u64, updates);
    let marked = by_mark(&out);
    // Before the first post program: the ingress mark only.
    let posted: u64 = stats.post_versions.iter().map(|v| v.frames).sum();
    assert_eq!(marked.get(&b'A').copied().unwrap_or(0), given - posted);
    for m in [b'B', b'C'] {
        let counted: u64 = stats
            .post_versions
            .iter()
            .filter(|v| v.position == "post:1" && marks.get(&v.version) == Some(&m))
            .map(|v| v.frames)
            .sum();
        assert_eq!(
            marked.get(&m).copied().unwrap_or(0),
            counted,
            "frames marked {} = frames counted on its versions",
            m as char
        );
    }
    assert!(posted > 0, "post programs ran");
}

#[test]
fn post_port_updates_one_worker_lose_no_frame() {
    post_updates_under_traffic(1, 200);
}

#[test]
fn post_port_updates_two_workers_lose_no_frame() {
    post_updates_under_traffic(2, 200);
}

#[test]
fn table_code_updates_lose_no_frame_and_keep_entries() {
    let (sw, traffic) = start(2);
    let mut marks = BTreeMap::from([(("pre".to_string(), 1), b'A')]);
    let updates = 200;
    for v in 1..=updates {
        let mark = if v % 2 == 0 { 'B' } else { 'C' };
        let r = sw
            .update(
                &code(
                    Position::Table("T".into()),
                    v,
                    "t.py",
                    &pipeline(mark, "exact"),
                ),
                "test",
                Instant::now(),
                &compile,
            )
            .expect("table code update");
        assert_eq!((r.position.as_str(), r.version), ("table:T", v));
        marks.insert(("table:T".to_string(), v), mark as u8);
        std::thread::sleep(Duration::from_micros(200));
    }
    let (given, stats, out) = finish(sw, &traffic);
    none_lost(given, &out);
    assert_eq!(stats.updates.applied, updates);
    assert_eq!(stats.updates.positions.get("table:T"), Some(&updates));
    assert_eq!(stats.versions.len() as u64, updates + 1);
    let marked = by_mark(&out);
    for m in [b'A', b'B', b'C'] {
        let counted: u64 = stats
            .versions
            .iter()
            .filter(|v| marks.get(&(v.position.clone(), v.version)) == Some(&m))
            .map(|v| v.frames)
            .sum();
        assert_eq!(
            marked.get(&m).copied().unwrap_or(0),
            counted,
            "frames marked {} = frames counted on its versions",
            m as char
        );
    }
}

/// Hostile updates at `post:PORT` and `table:NAME` are refused with
/// their reason while traffic flows; nothing changes, no frame is lost,
/// and valid ones apply afterwards.
#[test]
fn hostile_position_updates_are_refused() {
    let (sw, traffic) = start(2);
    let send = |bytes: &[u8]| sw.update(bytes, "test", Instant::now(), &compile);
    let reason = |bytes: Vec<u8>| send(&bytes).expect_err("refused").reason();
    let other = Key::new(1, [4; 32]).expect("key");
    let forged = Message::new(
        "sw0",
        Position::Post("1".into()),
        5,
        Body::Code {
            format: CodeFormat::ChainScript,
            name: "p.py".into(),
            bytes: post('X').into_bytes(),
        },
    )
    .expect("message")
    .seal(&other)
    .expect("seal");
    let mut flipped = code(
        Position::Table("T".into()),
        5,
        "t.py",
        &pipeline('X', "exact"),
    );
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            code(Position::Post("9".into()), 1, "p.py", &post('X')),
            "rejected",
        ),
        (
            code(Position::Post("nope".into()), 1, "p.py", &post('X')),
            "rejected",
        ),
        (
            code(Position::Post("1".into()), 1, "p.py", "def main(:\n"),
            "rejected",
        ),
        (
            code(
                Position::Table("NOPE".into()),
                1,
                "t.py",
                &pipeline('X', "exact"),
            ),
            "rejected",
        ),
        (
            code(
                Position::Table("T".into()),
                1,
                "t.py",
                &pipeline('X', "lpm"),
            ),
            "rejected",
        ),
        (forged, "forged"),
        (flipped, "forged"),
    ];
    for (bytes, want) in cases {
        let got = reason(bytes.clone());
        // Digest or MAC: a flipped bit in the payload is either.
        assert!(
            got == want || (want == "forged" && got == "digest"),
            "expected {want}, got {got}"
        );
    }
    // Valid ones apply; then their replay and older versions are refused.
    let p3 = code(Position::Post("1".into()), 3, "p.py", &post('P'));
    send(&p3).expect("post update");
    // The table update below gives port 1 the script's post again: let
    // frames meet the updated post first (a loaded machine may not run
    // any in a fixed pause).
    let t = Instant::now();
    let ran = |s: nfkit_switch::Stats| {
        s.post_versions
            .iter()
            .any(|v| v.position == "post:1" && v.version == 3 && v.frames > 0)
    };
    while !ran(sw.stats()) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(reason(p3), "replayed");
    assert_eq!(
        reason(code(Position::Post("1".into()), 2, "p.py", &post('X'))),
        "downgrade"
    );
    let t3 = code(
        Position::Table("T".into()),
        3,
        "t.py",
        &pipeline('Q', "exact"),
    );
    send(&t3).expect("table update");
    assert_eq!(
        reason(code(
            Position::Table("T".into()),
            3,
            "t.py",
            &pipeline('X', "exact")
        )),
        "downgrade"
    );
    std::thread::sleep(Duration::from_millis(50));
    let (given, stats, out) = finish(sw, &traffic);
    none_lost(given, &out);
    assert_eq!(stats.updates.applied, 2);
    assert_eq!(stats.updates.refused, 10);
    assert_eq!(stats.updates.reasons.get("rejected"), Some(&5));
    let marked = by_mark(&out);
    assert!(
        !marked.contains_key(&b'X'),
        "no refused code ran: {marked:?}"
    );
    assert!(marked.contains_key(&b'P'), "the valid post update ran");
}

/// A pipeline sent as a chain object at `pre` (no compiling in the
/// switch) brings its table entries (the manifest's control-plane
/// writes: without them T misses and drops) and its post program (the
/// nested object), which marks every frame it sends.
#[test]
fn a_pipeline_object_carries_its_entries_and_post_program() {
    let (sw, traffic) = start(2);
    let text = pipeline('B', "exact").replace(
        "pipeline(tables=[T])",
        &format!(
            "def out() -> u64:\n\x20   Packet.write_u8(46, u8({}))\n\x20   return PASS\n\
             pipeline(tables=[T], post=out)",
            'P' as u32
        ),
    );
    let c = compile("P.py", &text).expect("compile");
    let object =
        nfkit_lang::chain_object::write(&c, &nfkit_lang::Options::default()).expect("chain object");
    let m = Message::new(
        "sw0",
        Position::Pre,
        2,
        Body::Code {
            format: CodeFormat::Object,
            name: "P.o".into(),
            bytes: object,
        },
    )
    .expect("message")
    .seal(&key())
    .expect("seal");
    let none = |_: &str, _: &str| -> Result<nfkit_lang::Compiled, String> {
        Err("must not compile".into())
    };
    let r = sw
        .update(&m, "test", Instant::now(), &none)
        .expect("the pipeline object applies");
    assert_eq!((r.version, r.previous), (2, 1));
    let t = Instant::now();
    while sw
        .stats()
        .post_versions
        .iter()
        .map(|v| v.frames)
        .sum::<u64>()
        < 100
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the post program ran"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let (given, stats, out) = finish(sw, &traffic);
    assert_each_once(&out, given);
    let per = frames_per_version(&stats);
    let marked = |m: u8| out.iter().filter(|(_, x)| *x == m).count() as u64;
    assert_eq!(marked(b'A'), per[&1]);
    assert_eq!(
        marked(b'P'),
        per[&2],
        "version 2's frames went through its post"
    );
    let posted: u64 = stats.post_versions.iter().map(|v| v.frames).sum();
    assert_eq!(posted, per[&2]);
}

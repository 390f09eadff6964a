//! Authenticated updates under traffic: 10,000 hostile updates (random
//! bytes, wrong keys, flipped MAC and other bits, truncated, replayed,
//! old versions, wrong target, unsigned) are all refused with their
//! reason, counted and logged while numbered frames flow, no frame is
//! lost and every frame runs the current version; a valid update still
//! applies afterwards. 1000 valid updates (code, and entries of a map)
//! under traffic lose no frame; the update time distribution is printed
//! (`--nocapture`). Code updates as chain objects (`nfkit compile -o`)
//! apply without compiling; hostile ones (truncated, garbled, without
//! a manifest, refused by the VM's checks, for another hook) are
//! refused with their reason and change nothing.

mod common;
use common::numbered::{assert_each_once, finish, frames_per_version, percentile, Traffic};
use common::try_compile_switch as compile;
use nfkit_corpus::Xorshift as Rng;
use nfkit_lang::Compiled;
use nfkit_switch::{Switch, SwitchConfig, UpdateAuth, UpdateError};
use nfkit_update::message::CodeFormat;
use nfkit_update::{Body, Key, KeyRing, Message, Position};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Marks each frame (payload byte 4) with `mark` and sends it back out;
/// drops frames whose source port is in `blocked` (no entry matches the
/// test's traffic, so both versions pass every frame).
fn script(mark: char) -> String {
    format!(
        "from nf.classify import every_packet\n\
         blocked = HashMap(u16, u8, 64)\n\
         def main() -> u64:\n\
         \x20   if Packet.read_u16(34) in blocked:\n\
         \x20       return DROP\n\
         \x20   Packet.write_u8(46, u8({}))\n\
         \x20   return TX\n\
         every_packet(main)\n",
        mark as u32
    )
}

/// `compiled` as a chain object (what `nfkit compile -o` writes).
fn object_of(compiled: &Compiled) -> Vec<u8> {
    nfkit_lang::chain_object::write(compiled, &nfkit_lang::Options::default()).expect("object")
}

/// A code update carrying chain object `bytes`.
fn object_update(target: &str, version: u64, bytes: Vec<u8>) -> Message {
    Message::new(
        target,
        Position::Pre,
        version,
        Body::Code {
            format: CodeFormat::Object,
            name: format!("v{version}.o"),
            bytes,
        },
    )
    .expect("message")
}

fn key(id: u32, b: u8) -> Key {
    Key::new(id, [b; 32]).expect("key")
}

fn code(target: &str, version: u64, mark: char) -> Message {
    Message::new(
        target,
        Position::Pre,
        version,
        Body::Code {
            format: CodeFormat::ChainScript,
            name: format!("{mark}.py"),
            bytes: script(mark).into_bytes(),
        },
    )
    .expect("message")
}

/// A switch "sw0" taking updates signed with keys 1 and 2, on numbered
/// traffic.
fn start(workers: usize, queues: usize) -> (Switch, Traffic) {
    let first = compile("A.py", &script('A')).expect("compile");
    let (traffic, port) = Traffic::port(workers, queues, 1000, 4_000_000);
    let cfg = SwitchConfig {
        workers,
        pin: false,
        auth: Some(UpdateAuth {
            switch_id: "sw0".into(),
            keys: KeyRing::new([key(1, 1), key(2, 2)]),
        }),
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&first, vec![port], &cfg).expect("start");
    (sw, traffic)
}

#[test]
fn ten_thousand_hostile_updates_are_refused_while_traffic_flows() {
    let (sw, traffic) = start(2, 1);
    let none = |_: &str, _: &str| -> Result<Compiled, String> { Err("must not compile".into()) };
    // Version 2 (B) applies; it is the one replayed later.
    let v2 = code("sw0", 2, 'B').seal(&key(1, 1)).expect("seal");
    let r = sw
        .update(&v2, "test", Instant::now(), &compile)
        .expect("v2 applies");
    assert_eq!((r.version, r.previous, r.kind), (2, 1, "code"));
    let after_v2 = traffic.given();
    // Wait for traffic on version 2.
    while sw.stats().versions.last().map(|v| v.frames).unwrap_or(0) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut want: BTreeMap<&str, u64> = BTreeMap::new();
    let classes = 9;
    let n = 10_008;
    for i in 0..n {
        let fresh = || code("sw0", 3 + (i as u64 % 5), 'C');
        let (bytes, allowed): (Vec<u8>, &[&str]) = match i % classes {
            // Random bytes, sometimes behind a valid magic.
            0 => {
                let len = rng.index(400);
                let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                if i % 2 == 0 && len >= 4 {
                    b[..4].copy_from_slice(b"NFKU");
                }
                (b, &["malformed", "truncated"])
            }
            // A key that is not the switch's: a known id with other
            // bytes, or an unknown id.
            1 => {
                let k = if i % 2 == 0 { key(2, 9) } else { key(77, 1) };
                (
                    fresh().seal(&k).expect("seal"),
                    if k.id == 2 {
                        &["forged"]
                    } else {
                        &["unknown_key"]
                    },
                )
            }
            // One bit of the MAC flipped.
            2 => {
                let mut b = fresh().seal(&key(1, 1)).expect("seal");
                let at = 44 + 3 + 32 + rng.index(32);
                b[at] ^= 1 << rng.index(8);
                (b, &["forged"])
            }
            // Any one bit flipped (header, target, digest, payload).
            3 => {
                let mut b = fresh().seal(&key(2, 2)).expect("seal");
                let at = rng.index(b.len());
                b[at] ^= 1 << rng.index(8);
                (
                    b,
                    &[
                        "forged",
                        "digest",
                        "malformed",
                        "truncated",
                        "unknown_key",
                        "unauthenticated",
                    ],
                )
            }
            // Truncated anywhere.
            4 => {
                let b = fresh().seal(&key(1, 1)).expect("seal");
                let cut = rng.index(b.len());
                (b[..cut].to_vec(), &["truncated"])
            }
            // The applied update again.
            5 => (v2.clone(), &["replayed"]),
            // Old versions, properly signed.
            6 => (
                code("sw0", 1 + (i as u64 % 2), 'D')
                    .seal(&key(2, 2))
                    .expect("seal"),
                &["downgrade"],
            ),
            // For another switch.
            7 => (
                code("sw1", 9, 'E').seal(&key(1, 1)).expect("seal"),
                &["wrong_target"],
            ),
            // Not signed at all.
            _ => (fresh().unsigned().expect("unsigned"), &["unauthenticated"]),
        };
        match sw.update(&bytes, "hostile", Instant::now(), &none) {
            Ok(r) => panic!("hostile update {i} (class {}) applied: {r:?}", i % classes),
            Err(UpdateError::Refused(r)) => {
                assert!(
                    allowed.contains(&r.reason()),
                    "update {i} (class {}): refused as {} ({r}), expected one of {allowed:?}",
                    i % classes,
                    r.reason()
                );
                *want.entry(r.reason()).or_default() += 1;
            }
            Err(e) => panic!("update {i}: {e}"),
        }
    }
    // Counted per reason; the log has the last ones with reasons.
    let s = sw.stats();
    assert_eq!(s.updates.refused, n as u64);
    assert_eq!(s.updates.applied, 1);
    let got: BTreeMap<&str, u64> = s
        .updates
        .reasons
        .iter()
        .map(|(r, c)| (r.as_str(), *c))
        .collect();
    assert_eq!(got, want);
    assert!(want.len() >= 9, "every reason seen: {want:?}");
    let log = sw.refusals();
    assert_eq!(log.len(), nfkit_switch::update::LOG_KEPT);
    assert!(log
        .iter()
        .all(|r| r.source == "hostile" && !r.detail.is_empty()));
    assert_eq!(log.last().map(|r| r.reason), Some("unauthenticated"));
    // Still version 2; traffic flowed during the barrage.
    assert_eq!(s.version, 2);
    assert_eq!(s.updates.positions.get("pre"), Some(&2));
    assert!(traffic.given() > after_v2, "traffic flowed");
    // A valid update still applies (versions may jump).
    let v9 = code("sw0", 9, 'C').seal(&key(2, 2)).expect("seal");
    let r = sw
        .update(&v9, "test", Instant::now(), &compile)
        .expect("valid update after the barrage");
    assert_eq!((r.version, r.previous, r.key_id), (9, 2, 2));
    while sw.stats().versions.last().map(|v| v.frames).unwrap_or(0) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (given, stats, out) = finish(sw, &traffic);
    // No frame lost, none twice; each frame marked by the version that
    // ran it (A: 1, B: 2, C: 9), and the counts agree.
    assert_each_once(&out, given);
    let per = frames_per_version(&stats);
    assert_eq!(per.keys().copied().collect::<Vec<_>>(), vec![1, 2, 9]);
    for (mark, v) in [(b'A', 1), (b'B', 2), (b'C', 9)] {
        let marked = out.iter().filter(|(_, m)| *m == mark).count() as u64;
        assert_eq!(
            marked, per[&v],
            "frames marked {} = version {v}'s",
            mark as char
        );
    }
    assert!(per[&2] > 0 && per[&9] > 0);
    assert_eq!(stats.version, 9);
    assert_eq!(stats.updates.applied, 2);
}

/// `updates` valid code updates alternating B and A (every tenth also
/// an entry set and delete) under numbered traffic.
fn valid_updates_under_traffic(workers: usize, queues: usize, updates: usize) {
    let (sw, traffic) = start(workers, queues);
    let k = key(2, 2);
    let mut version = 1u64;
    let mut marks: BTreeMap<u64, u8> = BTreeMap::from([(1, b'A')]);
    let (mut total, mut switch, mut verify, mut load) = (vec![], vec![], vec![], vec![]);
    let mut entries = 0;
    for i in 0..updates {
        version += 1 + (i as u64 % 3);
        let mark = if i % 2 == 0 { 'B' } else { 'A' };
        let m = code("sw0", version, mark).seal(&k).expect("seal");
        let r = sw
            .update(&m, "test", Instant::now(), &compile)
            .expect("update");
        assert_eq!(r.version, version);
        marks.insert(version, mark as u8);
        total.push(r.total.as_secs_f64() * 1e6);
        switch.push(r.switch.as_secs_f64() * 1e6);
        verify.push(r.verify.as_secs_f64() * 1e6);
        load.push(r.load.as_secs_f64() * 1e6);
        if i % 10 == 0 {
            // An entry (port 9 blocked: no test frame uses it) written
            // and deleted, each a version of `pre`.
            let port = 9u16.to_le_bytes().to_vec();
            version += 1;
            let set = Message::new(
                "sw0",
                Position::Pre,
                version,
                Body::EntrySet {
                    map: "blocked".into(),
                    key: port.clone(),
                    value: vec![1],
                },
            )
            .expect("message");
            sw.update(
                &set.seal(&k).expect("seal"),
                "test",
                Instant::now(),
                &compile,
            )
            .expect("entry set");
            let cur = sw.script();
            let blocked = cur.vm.map("blocked").expect("blocked");
            assert_eq!(blocked.lookup(&port).expect("lookup"), Some(vec![1]));
            version += 1;
            let del = Message::new(
                "sw0",
                Position::Pre,
                version,
                Body::EntryDelete {
                    map: "blocked".into(),
                    key: port.clone(),
                },
            )
            .expect("message");
            sw.update(
                &del.seal(&k).expect("seal"),
                "test",
                Instant::now(),
                &compile,
            )
            .expect("entry delete");
            assert_eq!(blocked.lookup(&port).expect("lookup"), None);
            entries += 2;
        }
    }
    let (given, stats, out) = finish(sw, &traffic);
    assert_eq!(stats.updates.applied, (updates + entries) as u64);
    assert_eq!(stats.updates.refused, 0);
    assert_eq!(stats.updates.positions.get("pre"), Some(&version));
    assert!(given > updates as u64, "traffic flowed: {given} frames");
    assert_each_once(&out, given);
    let total_frames: u64 = stats.versions.iter().map(|v| v.frames).sum();
    assert_eq!(total_frames, given);
    let a_versions: u64 = stats
        .versions
        .iter()
        .filter(|v| marks.get(&v.version) == Some(&b'A'))
        .map(|v| v.frames)
        .sum();
    let marked_a = out.iter().filter(|(_, m)| *m == b'A').count() as u64;
    assert_eq!(
        marked_a, a_versions,
        "frames marked A = frames of A's versions"
    );
    for v in [&mut total, &mut switch, &mut verify, &mut load] {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "{workers} workers, {queues} rx queues: {updates} updates, {given} frames; µs p50/p99/max: \
         received -> all workers {:.1}/{:.1}/{:.1}; publish -> all workers {:.1}/{:.1}/{:.1}; \
         verify {:.1}/{:.1}; compile+load {:.0}/{:.0}",
        percentile(&total, 0.5),
        percentile(&total, 0.99),
        percentile(&total, 1.0),
        percentile(&switch, 0.5),
        percentile(&switch, 0.99),
        percentile(&switch, 1.0),
        percentile(&verify, 0.5),
        percentile(&verify, 0.99),
        percentile(&load, 0.5),
        percentile(&load, 0.99),
    );
}

#[test]
fn a_thousand_valid_updates_one_worker_lose_no_frame() {
    valid_updates_under_traffic(1, 1, 1000);
}

#[test]
fn a_thousand_valid_updates_two_workers_lose_no_frame() {
    valid_updates_under_traffic(2, 2, 1000);
}

#[test]
fn a_switch_without_keys_takes_no_updates_and_unsupported_ones_are_counted() {
    let first = compile("A.py", &script('A')).expect("compile");
    let (traffic, port) = Traffic::port(1, 1, 100, 1000);
    let cfg = SwitchConfig {
        pin: false,
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&first, vec![port], &cfg).expect("start");
    let m = code("sw0", 2, 'B').seal(&key(1, 1)).expect("seal");
    assert!(matches!(
        sw.update(&m, "t", Instant::now(), &compile),
        Err(UpdateError::NotEnabled)
    ));
    assert!(!sw.stats().updates.enabled);
    drop(finish(sw, &traffic));

    let (sw, traffic) = start(1, 1);
    let k = key(1, 1);
    // Entries at a post position (post programs have no maps of their
    // own): unsupported.
    let post_entry = Message::new(
        "sw0",
        Position::Post("1".into()),
        2,
        Body::EntrySet {
            map: "blocked".into(),
            key: vec![0, 1],
            value: vec![1],
        },
    )
    .expect("message");
    // Code for a table the running version does not have: rejected.
    let table = Message {
        position: Position::Table("acl".into()),
        ..code("sw0", 2, 'B')
    };
    let object = Message::new(
        "sw0",
        Position::Pre,
        2,
        Body::Code {
            format: CodeFormat::Object,
            name: "x.o".into(),
            bytes: vec![0x7f, b'E', b'L', b'F'],
        },
    )
    .expect("message");
    let bad_script = Message::new(
        "sw0",
        Position::Pre,
        2,
        Body::Code {
            format: CodeFormat::ChainScript,
            name: "bad.py".into(),
            bytes: b"def main(:\n".to_vec(),
        },
    )
    .expect("message");
    let no_map = Message::new(
        "sw0",
        Position::Pre,
        2,
        Body::EntrySet {
            map: "nope".into(),
            key: vec![0, 1],
            value: vec![1],
        },
    )
    .expect("message");
    for (m, want) in [
        (&post_entry, "unsupported"),
        (&table, "rejected"),
        (&object, "rejected"),
        (&bad_script, "rejected"),
        (&no_map, "rejected"),
    ] {
        let e = sw
            .update(&m.seal(&k).expect("seal"), "t", Instant::now(), &compile)
            .expect_err(want);
        assert_eq!(e.reason(), want, "{e}");
    }
    // None of them spent its version or nonce: a good version 2 applies.
    let good = code("sw0", 2, 'B');
    let bytes = good.seal(&k).expect("seal");
    sw.update(&bytes, "t", Instant::now(), &compile)
        .expect("version 2");
    let e = sw.refuse_unauthenticated("control socket reload");
    assert_eq!(e.reason(), "unauthenticated");
    let s = sw.stats();
    assert_eq!(s.updates.applied, 1);
    assert_eq!(s.updates.refused, 6);
    assert_eq!(s.updates.reasons.get("unsupported"), Some(&1));
    assert_eq!(s.updates.reasons.get("rejected"), Some(&4));
    assert_eq!(s.updates.reasons.get("unauthenticated"), Some(&1));
    assert!(
        s.text().contains("updates: 1 applied, 6 refused"),
        "{}",
        s.text()
    );
    drop(finish(sw, &traffic));
}

/// Compiling is not allowed: object updates must not need it.
fn no_compile(_: &str, _: &str) -> Result<Compiled, String> {
    Err("must not compile".into())
}

/// Object updates under numbered traffic, each version marking frames
/// with its own number: no frame lost, each counted on the version that
/// marked it, and every frame taken in after an update returned ran
/// that version or a later one: a worker idle (parked in its receive)
/// when the update was published does not run an old version after it.
#[test]
fn object_updates_apply_without_compiling_and_lose_no_frame() {
    let (sw, traffic) = start(2, 1);
    let k = key(1, 1);
    let updates = 40u64;
    // Version v marks its frames v (version 1: 'A' = 65, above all).
    let objects: Vec<Vec<u8>> = (2..2 + updates)
        .map(|v| {
            let mark = char::from(v as u8);
            object_of(&compile("V.py", &script(mark)).expect("compile"))
        })
        .collect();
    let mut returned = Vec::new();
    for (v, bytes) in (2..).zip(objects) {
        let m = object_update("sw0", v, bytes);
        let r = sw
            .update(
                &m.seal(&k).expect("seal"),
                "test",
                Instant::now(),
                &no_compile,
            )
            .expect("object update");
        returned.push((traffic.given(), v as u8));
        assert_eq!((r.version, r.previous, r.kind), (v, v - 1, "code"));
        // Every stage ran and they add up to the load.
        let st = r.stages;
        assert!(
            st.decode > Duration::ZERO && st.check > Duration::ZERO,
            "{st:?}"
        );
        assert!(
            st.decode + st.check + st.maps + st.jit + st.prepare <= r.load,
            "{r:?}"
        );
        assert!(r.total >= r.verify + r.load + r.switch, "{r:?}");
        // The blocked map is kept across versions (a data map).
        assert!(sw.script().vm.map("blocked").is_some());
        // Let some traffic through (and the workers go idle) between
        // updates.
        std::thread::sleep(Duration::from_micros(300));
    }
    let (given, stats, out) = finish(sw, &traffic);
    assert_eq!(stats.updates.applied, updates);
    assert_eq!(stats.version, 1 + updates);
    assert_each_once(&out, given);
    let version_of = |mark: u8| if mark == b'A' { 1 } else { u64::from(mark) };
    for v in &stats.versions {
        let marked = out
            .iter()
            .filter(|(_, m)| version_of(*m) == v.version)
            .count();
        assert_eq!(marked as u64, v.frames, "frames of version {}", v.version);
    }
    for (from, v) in returned {
        if let Some((n, m)) = out
            .iter()
            .skip(from as usize)
            .find(|(_, m)| version_of(*m) < u64::from(v))
        {
            panic!("frame {n}, taken in after version {v} applied, ran version {m}");
        }
    }
    assert!(stats.versions.iter().filter(|v| v.frames > 0).count() > 2);
}

#[test]
fn hostile_object_updates_are_refused_and_change_nothing() {
    let (sw, traffic) = start(2, 1);
    let k = key(1, 1);
    let b = compile("B.py", &script('B')).expect("compile");
    let good = object_of(&b);
    // Truncated (in the middle of the section headers' table, or of the
    // code), garbled (the section header offset pointing past the end),
    // not an ELF at all.
    let mut garbled = good.clone();
    garbled[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
    // A plain eBPF object: no manifest.
    let plain = nfkit_object::write_object(&b.image).expect("plain object");
    // The manifest garbled (its JSON opened with something else).
    let mut manifest = good.clone();
    let at = good
        .windows(10)
        .position(|w| w == b"{\"format\":")
        .expect("manifest in the object");
    manifest[at] = b'[';
    // A program the VM's checks refuse: the entry returns at once, with
    // r0 never set.
    let mut unchecked = b.clone();
    let entry = unchecked.entry().expect("entry").to_string();
    let e = unchecked.image.entry(&entry).expect("entry function");
    let start = unchecked.image.functions[e.function].start;
    let mut slot = 0;
    let i = unchecked
        .image
        .insns
        .iter()
        .position(|x| {
            let here = slot == start;
            slot += x.slots();
            here
        })
        .expect("entry's first instruction");
    unchecked.image.insns[i] = nfkit_isa::Insn::Exit;
    let unchecked = object_of(&unchecked);
    // Compiled for XDP, not the switch.
    let xdp = nfkit_lang::compile(
        "B.py",
        &script('B'),
        &nfkit_lang::Options {
            hook: Some(nfkit_abi::Hook::Xdp),
            ..nfkit_lang::Options::default()
        },
    )
    .expect("compile for xdp");
    let xdp = object_of(&xdp);
    let cases: [(&str, Vec<u8>, &str); 8] = [
        (
            "truncated headers",
            good[..good.len() - 10].to_vec(),
            "malformed",
        ),
        ("truncated code", good[..200].to_vec(), "malformed"),
        ("garbled", garbled, "malformed"),
        ("not an ELF", b"def main(): pass".to_vec(), "not an ELF"),
        ("no manifest", plain, "not a chain object"),
        ("bad manifest", manifest, "bad chain manifest"),
        ("refused by the VM", unchecked, "r0"),
        ("another hook", xdp, "hook xdp"),
    ];
    for (what, bytes, why) in cases {
        let m = object_update("sw0", 2, bytes).seal(&k).expect("seal");
        let e = sw
            .update(&m, "hostile", Instant::now(), &no_compile)
            .expect_err(what);
        assert_eq!(e.reason(), "rejected", "{what}: {e}");
        let text = e.to_string();
        println!("{what}: {text}");
        assert!(
            text.to_lowercase().contains(&why.to_lowercase()),
            "{what}: `{text}` should say `{why}`"
        );
        assert_eq!(sw.stats().version, 1, "{what}: nothing changed");
    }
    let s = sw.stats();
    assert_eq!(s.updates.refused, 8);
    assert_eq!(s.updates.reasons.get("rejected"), Some(&8));
    assert_eq!(sw.refusals().len(), 8);
    // Version 2 was not spent: the good object applies as version 2.
    let m = object_update("sw0", 2, good).seal(&k).expect("seal");
    let r = sw
        .update(&m, "test", Instant::now(), &no_compile)
        .expect("the good object");
    assert_eq!((r.version, r.previous), (2, 1));
    while sw.stats().versions.last().map(|v| v.frames).unwrap_or(0) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (given, stats, out) = finish(sw, &traffic);
    assert_each_once(&out, given);
    // Until version 2, every frame ran version 1 (A).
    let v1 = stats
        .versions
        .iter()
        .find(|v| v.version == 1)
        .map(|v| v.frames);
    let a = out.iter().filter(|(_, m)| *m == b'A').count() as u64;
    assert_eq!(Some(a), v1);
}

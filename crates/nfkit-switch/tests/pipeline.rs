//! Pipeline positions in the switch: a script with tables, `pre` and
//! `post` runs on pcap ports; `post` runs on every frame sent out of a
//! port, before transmission, with the ingress program's maps (one
//! counter map shared by both), and a DROP there keeps the frame off its
//! port.

mod common;
use common::*;
use nfkit_switch::port::any;
use nfkit_switch::{Switch, SwitchConfig};
use std::time::Duration;

const SCRIPT: &str = r#"
seen = ArrayMap(u64, 4)     # 0: pre ran, 1: post ran, 2: post dropped

def pre() -> u64:
    seen[0] += 1
    return 0

def post() -> u64:
    seen[1] += 1
    if Packet.read_u8(14 + 8) == 63:     # frames routed with TTL 64 -> 63 ...
        if Packet.read_u8(14 + 19) == 9:  # ... to 198.18.2.9 are dropped at egress
            seen[2] += 1
            return DROP
    return PASS

def route(port: u64) -> u64:
    Packet.write_u8(14 + 8, Packet.read_u8(14 + 8) - 1)
    return port

ROUTES = Table(keys={"ip.dst": "lpm"}, actions=[route, DROP], size=16, default=DROP,
               entries=[("198.18.1.0/24", route, 2), ("198.18.2.0/24", route, 3)])

pipeline(pre=pre, tables=[ROUTES], post=post)
attach("sw0", "switch")
"#;

#[test]
fn post_runs_per_output_port_with_the_ingress_maps() {
    let c = compile_switch("pipeline.py", SCRIPT);
    let dsts: [[u8; 4]; 5] = [
        [198, 18, 1, 1],
        [198, 18, 2, 1],
        [198, 18, 2, 9],
        [198, 18, 3, 1],
        [198, 18, 1, 7],
    ];
    let packets: Vec<nfkit_pcap::Packet> = (0..20u64)
        .map(|i| {
            let d = dsts[i as usize % dsts.len()];
            nfkit_pcap::Packet::new(
                1_000_000_000 + i * 1000,
                udp4([198, 18, 0, 1], d, 1000, 2000, 0, 64, b"p"),
            )
        })
        .collect();
    let dir = scratch("pipeline-post");
    let input = dir.join("in.pcap");
    nfkit_pcap::write_file(&input, &packets).expect("write input");
    let specs = pcap_ports(&dir, &input);
    let ports = any::open_all(&specs, 1).expect("open ports");
    let cfg = SwitchConfig {
        workers: 1,
        pin: false,
        host_port: Some(HOST),
        ..SwitchConfig::default()
    };
    let sw = Switch::start(&c, ports, &cfg).expect("start");
    while !sw.is_done() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ver = sw.script();
    let post = ver.post(1).expect("the script has a post program");
    let seen = ver.vm.map("seen").expect("seen");
    let slot = |k: u32| {
        let v = seen
            .lookup(&k.to_le_bytes())
            .expect("lookup")
            .expect("slot");
        u64::from_le_bytes(v[..8].try_into().expect("8 bytes"))
    };
    // 20 frames in; 4 unrouted (198.18.3.1); 16 routed, 4 of them to
    // 198.18.2.9 dropped by post.
    assert_eq!(slot(0), 20, "pre ran on every frame");
    assert_eq!(slot(1), 16, "post ran on every routed frame (shared map)");
    assert_eq!(slot(2), 4);
    assert_eq!(post.dropped(), 4);
    drop(ver);
    sw.finish().expect("finish");
    let out = |p: usize| {
        nfkit_pcap::read_file(dir.join(format!("out{p}.pcap")))
            .expect("read output")
            .into_iter()
            .map(|p| p.data)
            .collect::<Vec<_>>()
    };
    let (p2, p3) = (out(2), out(3));
    assert_eq!(p2.len(), 8, "198.18.1.0/24 to port 2");
    assert_eq!(
        p3.len(),
        4,
        "198.18.2.1 to port 3, 198.18.2.9 dropped by post"
    );
    assert!(
        p2.iter().chain(&p3).all(|f| f[22] == 63),
        "TTL written by route"
    );
    assert!(p3.iter().all(|f| f[33] == 1));
}

/// Authenticated updates at position `table:ROUTES` write entries of the
/// table's maps (a new route, then its deletion); an entry for a map of
/// another table, and a replayed version, are refused.
#[test]
fn signed_updates_write_table_entries() {
    use nfkit_update::{Body, Key, Message, Position};
    use std::time::Instant;
    let c = compile_switch("pipeline.py", SCRIPT);
    let dir = scratch("pipeline-update");
    let input = dir.join("in.pcap");
    let one = nfkit_pcap::Packet::new(1, udp4([198, 18, 0, 1], [198, 18, 1, 1], 1, 2, 0, 64, b"p"));
    nfkit_pcap::write_file(&input, &[one]).expect("write input");
    let specs = pcap_ports(&dir, &input);
    let key = Key::new(1, [7; 32]).expect("key");
    let cfg = one_worker_keyed(&key);
    let sw = Switch::start(&c, any::open_all(&specs, 1).expect("ports"), &cfg).expect("start");
    let compile = |n: &str, s: &str| {
        nfkit_lang::compile(n, s, &nfkit_lang::Options::default()).map_err(|e| e.to_string())
    };
    // 198.18.9.0/24 -> route(4): the LPM key (prefix length, address in
    // network order), the action word (action 0 << 56 | 4).
    let mut k = 24u32.to_le_bytes().to_vec();
    k.extend_from_slice(&[198, 18, 9, 0]);
    let send = |version: u64, body: Body| {
        let m =
            Message::new("sw0", Position::Table("ROUTES".into()), version, body).expect("message");
        sw.update(
            &m.seal(&key).expect("seal"),
            "test",
            Instant::now(),
            &compile,
        )
    };
    send(
        1,
        Body::EntrySet {
            map: "ROUTES_lpm".into(),
            key: k.clone(),
            value: 4u64.to_le_bytes().to_vec(),
        },
    )
    .expect("entry set");
    let lookup = |k: &[u8]| {
        sw.script()
            .vm
            .map("ROUTES_lpm")
            .expect("map")
            .lookup(k)
            .expect("lookup")
    };
    assert_eq!(lookup(&k), Some(4u64.to_le_bytes().to_vec()));
    let e = send(
        2,
        Body::EntrySet {
            map: "seen".into(),
            key: 0u32.to_le_bytes().to_vec(),
            value: 1u64.to_le_bytes().to_vec(),
        },
    )
    .expect_err("not a map of ROUTES");
    assert_eq!(e.reason(), "rejected", "{e}");
    let e = send(
        1,
        Body::EntryDelete {
            map: "ROUTES_lpm".into(),
            key: k.clone(),
        },
    )
    .expect_err("replayed version");
    assert_ne!(e.reason(), "rejected", "{e}");
    send(
        2,
        Body::EntryDelete {
            map: "ROUTES_lpm".into(),
            key: k.clone(),
        },
    )
    .expect("entry delete");
    assert_eq!(lookup(&k), None);
    let s = sw.stats();
    assert_eq!((s.updates.applied, s.updates.refused), (2, 2));
    sw.finish().expect("finish");
}

/// A table's default action is map state (`T_default[0]`): a signed
/// update at `table:T` setting it changes what frames that match no
/// entry do, from the next frame on, under numbered traffic (one worker,
/// one queue: frames run in number order). Every frame to 10.2.0.1
/// misses T; declared default DROP, then `(act, 1)` (out of port 1,
/// marked `D`), then DROP again.
#[test]
fn signed_updates_change_the_default_action() {
    use common::numbered::Traffic;
    use nfkit_update::{Body, Key, Message, Position};
    use std::time::Instant;
    const MISSES: &str = r#"
def act(port: u64) -> u64:
    Packet.write_u8(46, u8(68))
    return port

T = Table(keys={"ip.dst": "exact"}, actions=[act, DROP], size=16, default=DROP,
          entries=[("10.9.9.9", act, 1)])
pipeline(tables=[T])
attach("sw0", "switch")
"#;
    let c = compile_switch("misses.py", MISSES);
    let key = Key::new(1, [5; 32]).expect("key");
    let (traffic, port) = Traffic::port(1, 1, 100, 2_000_000);
    let cfg = one_worker_keyed(&key);
    let sw = Switch::start(&c, vec![port], &cfg).expect("start");
    let compile = |n: &str, s: &str| {
        nfkit_lang::compile(n, s, &nfkit_lang::Options::default()).map_err(|e| e.to_string())
    };
    let set_default = |version: u64, word: u64| {
        let m = Message::new(
            "sw0",
            Position::Table("T".into()),
            version,
            Body::EntrySet {
                map: "T_default".into(),
                key: 0u32.to_le_bytes().to_vec(),
                value: word.to_le_bytes().to_vec(),
            },
        )
        .expect("message");
        sw.update(
            &m.seal(&key).expect("seal"),
            "test",
            Instant::now(),
            &compile,
        )
        .expect("default set");
    };
    // Frames that ran (every verdict counted), in number order.
    let ran = || -> u64 { sw.stats().actions.iter().map(|(_, n)| n).sum() };
    let wait_ran = |n: u64| {
        let t = Instant::now();
        while ran() < n {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "frames stopped running"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait_ran(200);
    let dropped_before = ran();
    set_default(1, 1); // action 0 (act), argument 1
    let first_after = traffic.given();
    wait_ran(first_after + 300);
    let ran_redirected = ran();
    set_default(2, 1 << 56); // action 1 (DROP)
    let first_dropped = traffic.given();
    wait_ran(first_dropped + 300);
    traffic.stop();
    sw.stop();
    let (stats, _) = sw.finish().expect("finish");
    let out = traffic.out();
    let nums: Vec<u32> = out.iter().map(|(n, _)| *n).collect();
    assert!(
        out.iter().all(|(_, m)| *m == b'D'),
        "every frame out ran the default action"
    );
    assert!(
        nums.iter().all(|&n| u64::from(n) >= dropped_before && u64::from(n) < first_dropped),
        "frames that ran under a DROP default stayed in: out {}..{}, DROP before {dropped_before}, from {first_dropped}",
        nums.first().copied().unwrap_or(0),
        nums.last().copied().unwrap_or(0)
    );
    for n in first_after..ran_redirected {
        assert!(
            nums.binary_search(&(n as u32)).is_ok(),
            "frame {n} ran after the default became (act, 1) but did not go out"
        );
    }
    assert_eq!((stats.updates.applied, stats.updates.refused), (2, 0));
}

/// One worker, not pinned, switch "sw0" taking updates signed with `key`.
fn one_worker_keyed(key: &nfkit_update::Key) -> SwitchConfig {
    SwitchConfig {
        workers: 1,
        pin: false,
        auth: Some(nfkit_switch::UpdateAuth {
            switch_id: "sw0".into(),
            keys: nfkit_update::KeyRing::new([key.clone()]),
        }),
        ..SwitchConfig::default()
    }
}

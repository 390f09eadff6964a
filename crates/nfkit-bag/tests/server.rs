//! The bag server in a fresh network namespace: filters swapped at
//! runtime without losing a valid request, and loss counted exactly
//! (sent - received sequence numbers = the socket's overflow drops =
//! the namespace's UDP RcvbufErrors).
//! Needs root (skipped otherwise).

use nfkit_bag::client::{self, Behaviour, ClientConfig, ClientReport};
use nfkit_bag::filter::{KernelFilter, FILTER_V1, FILTER_V2};
use nfkit_bag::server::{FilterMode, Log, ServeConfig, Server, ServerReport};
use nfkit_kernel::netns::enter_netns;
use nfkit_kernel::testbed::Netns;
use std::net::SocketAddr;
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn filters() -> (Arc<KernelFilter>, Arc<KernelFilter>) {
    let v1 = KernelFilter::compile("filter.py", FILTER_V1).unwrap_or_else(|e| panic!("{e}"));
    let v2 = KernelFilter::compile("filter_v2.py", FILTER_V2).unwrap_or_else(|e| panic!("{e}"));
    (Arc::new(v1), Arc::new(v2))
}

/// Runs a server with `cfg` and a client made by `client` (given the
/// server's address) in namespace `ns`; `before_run` is called between
/// bind and serve, with the address (to send while nobody reads).
fn run_pair(
    ns: &str,
    cfg: ServeConfig,
    filters: (Arc<KernelFilter>, Arc<KernelFilter>),
    client_cfg: impl FnOnce(SocketAddr) -> ClientConfig + Send,
    client_first: bool,
) -> (ServerReport, ClientReport) {
    let (addr_tx, addr_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let server = s.spawn(move || {
            enter_netns(ns).expect("enter netns");
            let mut srv = Server::bind(cfg, Some(filters.0), Some(filters.1)).expect("bind");
            addr_tx.send(srv.local_addr().expect("addr")).expect("addr");
            if client_first {
                go_rx.recv().expect("client done");
            }
            srv.run().expect("serve")
        });
        let addr = addr_rx.recv().expect("server bound");
        let client = s.spawn(move || {
            enter_netns(ns).expect("enter netns");
            let rep = client::run(&client_cfg(addr)).expect("client");
            let _ = go_tx.send(());
            rep
        });
        let c = client.join().expect("client thread");
        (server.join().expect("server thread"), c)
    })
}

fn base_cfg(mode: FilterMode) -> ServeConfig {
    ServeConfig {
        addr: "127.0.0.1:0".parse().expect("addr"),
        mode,
        idle_timeout: Duration::from_millis(500),
        start_timeout: Some(Duration::from_secs(10)),
        rcvbuf: Some(8 << 20),
        ..ServeConfig::default()
    }
}

#[test]
fn filter_swaps_lose_no_valid_request() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let ns = Netns::new("bagswap").expect("netns");
    let (v1, v2) = filters();
    for mode in [FilterMode::Kernel, FilterMode::User] {
        let cfg = ServeConfig {
            swaps: vec![4000, 8000, 12000, 16000, 20000],
            ..base_cfg(mode)
        };
        let (srv, cl) = run_pair(
            ns.name(),
            cfg,
            (v1.clone(), v2.clone()),
            |addr| ClientConfig {
                packets: Some(30_000),
                invalid_percent: 20,
                rate: Some(100_000),
                ..ClientConfig::new(addr, Behaviour::Frigg)
            },
            false,
        );
        let m = mode.name();
        assert_eq!(cl.send_errors, 0, "{m}");
        assert_eq!(srv.swaps, 5, "{m}: swaps done");
        assert!(srv.stopped, "{m}: STOP arrived");
        assert_eq!(srv.seqs, cl.puts, "{m}: every valid request arrived");
        assert_eq!(srv.dup_seqs, 0, "{m}");
        assert_eq!(srv.valid, cl.valid, "{m}");
        assert_eq!(srv.overflow_drops(), 0, "{m}: no overflow");
        if mode == FilterMode::Kernel {
            let c = srv.filter.expect("counters");
            assert_eq!(
                c.invalid, cl.invalid,
                "{m}: the filters dropped the invalid"
            );
            // Both versions saw traffic: the swaps took effect.
            let (c1, c2) = (v1.counters().expect("v1"), v2.counters().expect("v2"));
            assert!(c1.total() > 1000 && c2.total() > 1000, "{c1:?} {c2:?}");
            assert_eq!(c1.over_limit + c2.over_limit, 0);
        } else {
            assert_eq!(srv.user_invalid, cl.invalid, "{m}");
        }
    }
}

#[test]
fn swapped_in_v2_rejects_keys_over_its_limit() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let ns = Netns::new("bagv2").expect("netns");
    let (v1, v2) = filters();
    // v1 for the first 2000 datagrams, v2 (key limit 1000) after.
    let cfg = ServeConfig {
        swaps: vec![2000],
        ..base_cfg(FilterMode::Kernel)
    };
    let (srv, cl) = run_pair(
        ns.name(),
        cfg,
        (v1.clone(), v2.clone()),
        |addr| ClientConfig {
            packets: Some(6000),
            rate: Some(100_000),
            keys: 2000,
            ..ClientConfig::new(addr, Behaviour::Thor)
        },
        false,
    );
    let c2 = v2.counters().expect("v2");
    // Keys seq % 2000: after the swap, half are over the limit.
    assert!(c2.over_limit > 1500 && c2.over_limit < 2500, "{c2:?}");
    assert_eq!(srv.valid + c2.over_limit, cl.valid);
}

#[test]
fn loss_is_counted_exactly() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let ns = Netns::new("bagloss").expect("netns");
    let (v1, v2) = filters();
    for mode in [FilterMode::Kernel, FilterMode::User] {
        // A small receive queue nobody reads while the client sends:
        // most datagrams overflow; the idle timeout ends the run.
        let cfg = ServeConfig {
            rcvbuf: Some(16 << 10),
            ..base_cfg(mode)
        };
        let (srv, cl) = run_pair(
            ns.name(),
            cfg,
            (v1.clone(), v2.clone()),
            |addr| ClientConfig {
                packets: Some(5000),
                invalid_percent: 30,
                stop: false,
                ..ClientConfig::new(addr, Behaviour::Frigg)
            },
            true,
        );
        let m = mode.name();
        assert_eq!(cl.send_errors, 0, "{m}");
        let lost = cl.puts - srv.seqs;
        assert!(lost > 1000, "{m}: the test loses datagrams ({lost})");
        assert!(srv.seqs > 0, "{m}");
        // The kernel's own count of queue overflows agrees.
        assert_eq!(
            srv.rcvbuf_errors,
            Some(srv.overflow_drops()),
            "{m}: /proc/net/snmp RcvbufErrors"
        );
        match mode {
            FilterMode::Kernel => {
                // Only valid datagrams reach the queue: each overflow
                // drop is a lost request.
                let c = srv.filter.expect("counters");
                assert_eq!(c.valid, cl.valid, "{m}: the filter passed every valid one");
                assert_eq!(c.invalid, cl.invalid, "{m}");
                assert_eq!(lost, srv.overflow_drops(), "{m}: lost = overflow drops");
                assert_eq!(srv.socket_drops, lost + cl.invalid, "{m}");
            }
            _ => {
                let lost_invalid = cl.invalid - srv.user_invalid;
                assert_eq!(
                    lost + lost_invalid,
                    srv.socket_drops,
                    "{m}: lost = overflow drops"
                );
            }
        }
    }
}

#[test]
fn a_watched_script_is_swapped_in_live() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let ns = Netns::new("bagwatch").expect("netns");
    let dir = std::env::temp_dir().join(format!("nfkit-bagwatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let script = dir.join("filter.py");
    std::fs::write(&script, FILTER_V1).expect("write v1");
    let v1 = Arc::new(KernelFilter::from_file(&script).expect("v1"));
    let (said_tx, said_rx) = mpsc::channel::<String>();
    let said_tx = std::sync::Mutex::new(said_tx);
    let cfg = ServeConfig {
        watch: Some(script.clone()),
        idle_timeout: Duration::from_secs(20),
        log: Some(Log(Arc::new(move |m: &str| {
            if let Ok(tx) = said_tx.lock() {
                let _ = tx.send(m.to_string());
            }
        }))),
        ..base_cfg(FilterMode::Kernel)
    };
    let (addr_tx, addr_rx) = mpsc::channel();
    let nsn = ns.name();
    let (srv, sent) = std::thread::scope(|s| {
        let server = s.spawn(move || {
            enter_netns(nsn).expect("enter netns");
            let mut srv = Server::bind(cfg, Some(v1), None).expect("bind");
            addr_tx.send(srv.local_addr().expect("addr")).expect("addr");
            srv.run().expect("serve")
        });
        let addr = addr_rx.recv().expect("bound");
        enter_netns(nsn).expect("enter netns (client)");
        let phase = |stop: bool| ClientConfig {
            packets: Some(3000),
            rate: Some(50_000),
            keys: 2000,
            stop,
            ..ClientConfig::new(addr, Behaviour::Thor)
        };
        // Phase 1 under v1; then v2 replaces the file (atomically);
        // phase 2 once the server says it swapped.
        let a = client::run(&phase(false)).expect("phase 1");
        let tmp = dir.join("filter.py.new");
        std::fs::write(&tmp, FILTER_V2).expect("write v2");
        std::fs::rename(&tmp, &script).expect("rename");
        let said = said_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the server swaps");
        assert!(said.contains("swapped in"), "{said}");
        let b = client::run(&phase(true)).expect("phase 2");
        (server.join().expect("server"), a.valid + b.valid)
    });
    let _ = std::fs::remove_dir_all(&dir);
    let c = srv.filter.expect("counters");
    assert_eq!(srv.swaps, 1);
    assert_eq!(srv.swap_errors, 0);
    // Phase 2 keys seq % 2000 for seq 0..3000: 1000..1999 are over v2's limit.
    assert_eq!(c.over_limit, 1000, "{c:?}");
    assert_eq!(srv.valid + c.over_limit, sent, "no valid request lost");
    assert_eq!(srv.overflow_drops(), 0);
}

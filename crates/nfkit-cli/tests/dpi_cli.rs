//! `nfkit dpi compile` and `nfkit dpi test`, run as a user runs them, on
//! captures built here: the NF's answer per packet (in the VM) must be
//! the pattern and end the reference scan (`Dfa::scan`, itself checked
//! against the `regex` crate in nfkit-dpi) gives for the payload.

use nfkit_corpus::Xorshift as Gen;
use nfkit_dpi::{catalogue, compile, Dfa, Options};
use nfkit_pcap::Packet;
use nfkit_traffic::{build, FrameSpec, Mac, Proto};
use std::path::PathBuf;
use std::process::{Command, Output};

fn nfkit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nfkit"))
        .args(args)
        .env_remove("NFKIT_NF_PATH")
        .output()
        .expect("run nfkit")
}

/// A directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("nfkit-dpi-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn frame(payload: &[u8], tcp: bool, v6: bool) -> Vec<u8> {
    let (src, dst) = if v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    } else {
        ("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
    };
    build(&FrameSpec {
        src_mac: Mac([2, 0, 0, 0, 0, 1]),
        dst_mac: Mac([2, 0, 0, 0, 0, 2]),
        src,
        dst,
        proto: if tcp {
            Proto::Tcp { flags: 0x18 }
        } else {
            Proto::Udp
        },
        sport: 40000,
        dport: 80,
        ttl: 64,
        tos: 0,
        payload: payload.to_vec(),
    })
    .expect("frame")
}

fn write_pcap(path: &str, payloads: &[Vec<u8>]) {
    let pk: Vec<Packet> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| Packet::new(i as u64 * 1000, frame(p, i % 2 == 0, i % 3 == 0)))
        .collect();
    nfkit_pcap::write_file(path, &pk).expect("pcap");
}

/// Protocol samples, SQL injections and noise, some with pieces of
/// patterns at random places.
fn payloads() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = vec![
        b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\n".to_vec(),
        b"SSH-2.0-OpenSSH_9.6\r\n".to_vec(),
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03rest".to_vec(),
        b"GET /?id=1 UNION SELECT password FROM users HTTP/1.1\r\n".to_vec(),
        b"id=1'+or+1=1--".to_vec(),
        b"\x13BitTorrent protocol\0\0\0\0\0\0\0\0".to_vec(),
        b"plain text, nothing here".to_vec(),
    ];
    let pieces: &[&[u8]] = &[
        b"GET / HTTP/1.0\r\n",
        b"union select",
        b"SSH-1.99-",
        b" or 2=2",
        b"';drop table",
        b"sleep(",
        b"HTTP/1.0 404 ",
    ];
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    for _ in 0..60 {
        let mut p = Vec::new();
        for _ in 0..g.next() % 5 {
            if g.next().is_multiple_of(2) {
                p.extend_from_slice(pieces[(g.next() % pieces.len() as u64) as usize]);
            } else {
                for _ in 0..g.next() % 40 {
                    {
                        const A: &[u8] = b"ab '=1+ ;%-\x16\x03";
                        p.push(A[(g.next() % A.len() as u64) as usize]);
                    }
                }
            }
        }
        if p.is_empty() {
            p.push(b'x');
        }
        v.push(p);
    }
    v
}

fn test_json(args: &[&str]) -> serde_json::Value {
    let o = nfkit(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// Each packet's answer in `v` equals the reference scan of its payload.
fn assert_matches_scan(
    v: &serde_json::Value,
    dfa: &Dfa,
    payloads: &[Vec<u8>],
    limit: usize,
) -> usize {
    let pk = v["packets"].as_array().expect("packets");
    assert_eq!(pk.len(), payloads.len());
    let mut matched = 0;
    for (i, (p, r)) in payloads.iter().zip(pk).enumerate() {
        let want = dfa.scan(p, limit);
        let got = r["match"].as_object().map(|m| {
            (
                m["pattern"].as_u64().expect("pattern") as usize,
                m["end"].as_u64().expect("end") as usize,
            )
        });
        assert_eq!(
            got,
            want.map(|m| (m.pattern, m.end)),
            "packet {} payload {:?}",
            i + 1,
            String::from_utf8_lossy(p)
        );
        matched += usize::from(want.is_some());
    }
    matched
}

#[test]
fn dpi_test_gives_the_scan_of_each_catalogue_set_on_every_packet() {
    let t = TempDir::new("sets");
    let pcap = t.path("in.pcap");
    let payloads = payloads();
    write_pcap(&pcap, &payloads);
    let mut total = 0;
    for set in catalogue::ALL {
        let dfa = compile(set.patterns, &Options::default()).expect("compile");
        for hook in ["xdp", "tc", "socket"] {
            let v = test_json(&[
                "dpi", "test", set.name, "--pcap", &pcap, "--hook", hook, "--json",
            ]);
            assert_eq!(v["dfa"]["states"].as_u64(), Some(dfa.states() as u64));
            assert_eq!(v["faults"].as_u64(), Some(0));
            total += assert_matches_scan(&v, &dfa, &payloads, 2048);
        }
    }
    assert!(total >= 20, "only {total} matches over the sets");
    // Known answers, independent of the scan.
    let v = test_json(&["dpi", "test", "protocols", "--pcap", &pcap, "--json"]);
    let m = |i: usize| v["packets"][i]["match"].clone();
    assert_eq!(m(0)["pattern"], 0); // GET ... HTTP/1.1\r\n
    assert_eq!(m(0)["end"], 26);
    assert_eq!(m(1)["pattern"], 1);
    assert_eq!(m(2)["pattern"], 3);
    assert_eq!(m(2)["end"], 8);
    assert_eq!(m(3)["pattern"], 2);
    assert!(m(7).is_null());
    let v = test_json(&["dpi", "test", "sqli", "--pcap", &pcap, "--json"]);
    assert_eq!(v["packets"][4]["match"]["pattern"], 0);
    assert_eq!(v["packets"][4]["match"]["end"], 23);
}

#[test]
fn a_pattern_file_with_comments_and_a_limit() {
    let t = TempDir::new("file");
    let pcap = t.path("in.pcap");
    let payloads = payloads();
    write_pcap(&pcap, &payloads);
    let pats = t.path("pats.txt");
    std::fs::write(
        &pats,
        "# two patterns\n\n(?i)select\\s+\\w+\n  # indented comment\n[0-9]{2}=\r\n",
    )
    .expect("write");
    let dfa = compile(&[r"(?i)select\s+\w+", "[0-9]{2}="], &Options::default()).expect("dfa");
    for limit in [0usize, 10, 30] {
        let v = test_json(&[
            "dpi",
            "test",
            &pats,
            "--pcap",
            &pcap,
            "--limit",
            &limit.to_string(),
            "--json",
        ]);
        assert_eq!(v["dfa"]["patterns"].as_array().map(Vec::len), Some(2));
        let eff = if limit == 0 { 2048 } else { limit };
        let n = assert_matches_scan(&v, &dfa, &payloads, eff);
        if limit == 0 {
            assert!(n > 0);
        }
    }
    // Text output names the pattern and where it ends.
    let o = nfkit(&["dpi", "test", &pats, "--pcap", &pcap]);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("packet 5: pattern 0 `(?i)select\\s+\\w+` ends at payload byte 25"),
        "{s}"
    );
    assert!(s.contains("packet 1: no match"), "{s}");
}

#[test]
fn compile_writes_tables_that_test_loads() {
    let t = TempDir::new("tables");
    let pcap = t.path("in.pcap");
    let payloads = payloads();
    write_pcap(&pcap, &payloads);
    let file = t.path("sqli.dfa");
    let v = test_json(&["dpi", "compile", "sqli", "-o", &file, "--json"]);
    let dfa = compile(catalogue::SQLI.patterns, &Options::default()).expect("dfa");
    assert_eq!(v["states"].as_u64(), Some(dfa.states() as u64));
    assert_eq!(
        v["table_bytes"].as_u64(),
        Some(dfa.states() as u64 * 258 * 2)
    );
    let bytes = std::fs::read(&file).expect("read");
    assert_eq!(Dfa::from_bytes(&bytes).expect("file"), dfa);
    let a = test_json(&["dpi", "test", "--tables", &file, "--pcap", &pcap, "--json"]);
    let b = test_json(&["dpi", "test", "sqli", "--pcap", &pcap, "--json"]);
    assert_eq!(a, b);
    assert!(assert_matches_scan(&a, &dfa, &payloads, 2048) > 0);

    // A damaged file is refused with where it is wrong.
    let mut bad = bytes.clone();
    bad[20] = 0xff;
    bad[21] = 0x7f;
    std::fs::write(&file, &bad).expect("write");
    let o = nfkit(&["dpi", "test", "--tables", &file, "--pcap", &pcap]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("byte 20: transition to state 32767"), "{e}");
    std::fs::write(&file, &bytes[..100]).expect("write");
    let e = String::from_utf8_lossy(
        &nfkit(&["dpi", "test", "--tables", &file, "--pcap", &pcap]).stderr,
    )
    .into_owned();
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn compile_refuses_naming_the_pattern() {
    let t = TempDir::new("bad");
    let pats = t.path("pats.txt");
    std::fs::write(&pats, "abc\n(a|b)*a(a|b){11}\n").expect("write");
    let o = nfkit(&["dpi", "compile", &pats]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("pattern 1 `(a|b)*a(a|b){11}` makes the DFA too large"),
        "{e}"
    );
    std::fs::write(&pats, "abc\nab(c\n").expect("write");
    let e = String::from_utf8_lossy(&nfkit(&["dpi", "compile", &pats]).stderr).into_owned();
    assert!(e.contains("pattern 1 `ab(c`"), "{e}");
    let o = nfkit(&["dpi", "compile", "nosuchset"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("not a catalogue set (sqli, bittorrent, protocols, tls_sni)"),
        "{e}"
    );
}

/// `compile -o NF.o --hook H` writes an object that alone drops the
/// packets the set matches (`nfkit run` in the VM: no tables given).
#[test]
fn compile_writes_an_nf_object_that_drops_what_matches() {
    let t = TempDir::new("object");
    let pcap = t.path("in.pcap");
    let payloads = payloads();
    write_pcap(&pcap, &payloads);
    let dfa = compile(catalogue::SQLI.patterns, &Options::default()).expect("dfa");
    let want = payloads
        .iter()
        .filter(|p| dfa.scan(p, 2048).is_some())
        .count();
    assert!(want > 0 && want < payloads.len());
    for (hook, drop_line) in [
        ("xdp", "XDP_DROP"),
        ("tc", "TC_ACT_SHOT"),
        ("socket", "drop"),
    ] {
        let obj = t.path(&format!("sqli_{hook}.o"));
        let o = nfkit(&["dpi", "compile", "sqli", "-o", &obj, "--hook", hook]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = nfkit(&["run", &obj, "--pcap", &pcap]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let s = String::from_utf8_lossy(&o.stdout);
        let dropped: usize = s
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some(drop_line)).then(|| w.next()?.parse().ok())?
            })
            .unwrap_or(0);
        assert_eq!(dropped, want, "{hook}: {s}");
    }
    let o = nfkit(&[
        "dpi",
        "compile",
        "sqli",
        "-o",
        &t.path("x.o"),
        "--hook",
        "lwt",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--hook lwt"));
}

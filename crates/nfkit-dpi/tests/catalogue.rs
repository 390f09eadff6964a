//! The shipped pattern sets compile within the budget (together too, as
//! one table) and tell their samples from benign traffic.

use nfkit_dpi::catalogue::{self, ALL};
use nfkit_dpi::{compile, Options, Tables};

fn first(set: &catalogue::Set, payload: &[u8]) -> Option<usize> {
    let d = compile(set.patterns, &Options::default()).expect("compiles");
    d.scan(payload, usize::MAX).map(|m| m.pattern)
}

#[test]
fn every_set_compiles_and_all_fit_one_table() {
    let dfas: Vec<_> = ALL
        .iter()
        .map(|s| {
            compile(s.patterns, &Options::default()).unwrap_or_else(|e| panic!("{}: {e}", s.name))
        })
        .collect();
    for (s, d) in ALL.iter().zip(&dfas) {
        println!(
            "{}: {} patterns, {} states",
            s.name,
            s.patterns.len(),
            d.states()
        );
    }
    Tables::build(&dfas).expect("the shipped sets fit the NF's tables together");
    assert!(catalogue::find("sqli").is_some() && catalogue::find("nope").is_none());
}

#[test]
fn sqli_samples() {
    let s = &catalogue::SQLI;
    let hits: &[(&[u8], usize)] = &[
        (
            b"GET /item?id=1+UNION+ALL+SELECT+user,pass+FROM+users HTTP/1.1\r\n",
            0,
        ),
        (b"GET /item?id=1%20union/**/select%20 HTTP/1.1", 0),
        (b"POST /login HTTP/1.1\r\n\r\nuser=admin' OR 1=1", 1),
        (b"q=x'+or+'a'='a", 2),
        (b"id=5;DROP TABLE users", 3),
        (b"name=admin'-- ", 4),
        (b"id=1 AND SLEEP(5)", 5),
    ];
    for (p, want) in hits {
        assert_eq!(first(s, p), Some(*want), "{}", String::from_utf8_lossy(p));
    }
    let benign: &[&[u8]] = &[
        b"GET /union/selection.html HTTP/1.1\r\nHost: example.org\r\n\r\n",
        b"POST /form HTTP/1.1\r\n\r\ncolor=orange&size=10",
        b"GET /search?q=drop+shipping HTTP/1.1",
    ];
    for p in benign {
        assert_eq!(first(s, p), None, "{}", String::from_utf8_lossy(p));
    }
}

#[test]
fn bittorrent_samples() {
    let s = &catalogue::BITTORRENT;
    let mut handshake = b"\x13BitTorrent protocol".to_vec();
    handshake.extend([0u8; 8]);
    handshake.extend([0xab; 40]);
    assert_eq!(first(s, &handshake), Some(0));
    let ping = b"d1:ad2:id20:abcdefghij0123456789e1:q4:ping1:t2:aa1:y1:qe";
    assert_eq!(first(s, ping), Some(1));
    let reply = b"d1:rd2:id20:mnopqrstuvwxyz123456e1:t2:aa1:y1:re";
    assert_eq!(first(s, reply), Some(2));
    assert_eq!(first(s, b"GET /announce?info_hash=x HTTP/1.1"), None);
    assert_eq!(
        first(s, b"xx\x13BitTorrent protocol"),
        None,
        "only at the start"
    );
}

#[test]
fn protocol_samples() {
    let s = &catalogue::PROTOCOLS;
    assert_eq!(
        first(s, b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n"),
        Some(0)
    );
    assert_eq!(first(s, b"HTTP/1.1 404 Not Found\r\n"), Some(1));
    assert_eq!(first(s, b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n"), Some(3));
    // The start of a TLS 1.2 ClientHello with server_name "a.io".
    let mut hello = vec![
        0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3c, 0x03, 0x03,
    ];
    hello.extend([0x11; 32]); // random
    hello.extend([0x00, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00]); // session id, suites, compression
    hello.extend([
        0x00, 0x0d, 0x00, 0x00, 0x00, 0x09, 0x00, 0x07, 0x00, 0x00, 0x04,
    ]);
    hello.extend(b"a.io");
    assert_eq!(first(s, &hello), Some(2));
    assert_eq!(first(s, b"GETX / HTTP/1.1\r\n"), None);
    let mut server_hello = hello.clone();
    server_hello[5] = 0x02;
    assert_eq!(first(s, &server_hello), None);
    assert_eq!(first(s, b"\x17\x03\x03\x00\x20application data"), None);
}

/// The start of a TLS 1.2 ClientHello with a session id, an extension
/// before server_name, and server_name "www.example.com".
fn client_hello(name: &[u8]) -> Vec<u8> {
    let mut h = vec![
        0x16, 0x03, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x7c, 0x03, 0x03,
    ];
    h.extend([0x5a; 32]); // random
    h.push(32);
    h.extend([0x00; 32]); // session id, zeros
    h.extend([0x00, 0x04, 0x13, 0x01, 0x13, 0x02, 0x01, 0x00]); // suites, compression
    let list = name.len() as u8 + 3;
    h.extend([0x00, 0x30]); // extensions length
    h.extend([0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]); // ec_point_formats
    h.extend([
        0x00,
        0x00,
        0x00,
        list + 2,
        0x00,
        list,
        0x00,
        0x00,
        name.len() as u8,
    ]);
    h.extend(name);
    h
}

#[test]
fn tls_sni_samples() {
    let s = &catalogue::TLS_SNI;
    let d = compile(s.patterns, &Options::default()).expect("compiles");
    let h = client_hello(b"www.example.com");
    let name_at = h.len() - 15;
    let m = d.scan(&h, usize::MAX).expect("SNI found");
    assert_eq!((m.pattern, m.end), (0, name_at + 1));
    // Not a ClientHello: a ServerHello, application data.
    let mut server = h.clone();
    server[5] = 0x02;
    assert_eq!(d.scan(&server, usize::MAX), None);
    let mut data = h.clone();
    data[0] = 0x17;
    assert_eq!(d.scan(&data, usize::MAX), None);
    // A ClientHello without server_name (the extension cut off).
    assert_eq!(d.scan(&h[..name_at - 9], usize::MAX), None);
    // An empty name does not count.
    let mut empty = client_hello(b"");
    empty.extend(b"\x00\x0d");
    assert_eq!(d.scan(&empty, usize::MAX), None);
    // The regex crate agrees.
    let re = regex::bytes::RegexBuilder::new(s.patterns[0])
        .unicode(false)
        .build()
        .expect("regex");
    assert_eq!(re.shortest_match(&h), Some(name_at + 1));
}

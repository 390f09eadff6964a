//! Pattern sets nfkit ships, by name: the detectors eBPFlow built by
//! hand from re2c output (SQL injection, BitTorrent) and a few protocol
//! identifiers. Each is a list of patterns in this crate's syntax; a
//! set's match names the pattern by its index here.

/// A named pattern set.
#[derive(Clone, Copy, Debug)]
pub struct Set {
    pub name: &'static str,
    pub doc: &'static str,
    pub patterns: &'static [&'static str],
}

/// SQL-injection keywords as they appear in HTTP requests (query strings
/// and bodies, `+` or `%20` for spaces, any case).
pub const SQLI: Set = Set {
    name: "sqli",
    doc: "SQL-injection fragments in HTTP requests: UNION SELECT, tautologies \
          (OR 1=1, OR 'a'='a'), stacked DROP/DELETE/INSERT, comment-terminated \
          quotes, SLEEP/BENCHMARK timing probes; spaces as ' ', '+', %20 or /**/",
    patterns: &[
        r"(?i)union(\s|\+|%20|/\*\*/)+(all(\s|\+|%20|/\*\*/)+)?select",
        r"(?i)(\s|\+|%20|')or(\s|\+|%20)+'?\d+'?(\s|\+|%20)*(=|%3d)(\s|\+|%20)*'?\d+",
        r"(?i)(\s|\+|%20|')or(\s|\+|%20)+'[a-z]+'(\s|\+|%20)*(=|%3d)(\s|\+|%20)*'[a-z]+",
        r"(?i)(;|%3b)(\s|\+|%20)*(drop|delete|insert|update)(\s|\+|%20)+",
        r"(?i)('|%27)(\s|\+|%20)*(--|#|%23|/\*)",
        r"(?i)(sleep|benchmark|pg_sleep|waitfor(\s|\+|%20)+delay)(\s|\+|%20)*(\(|%28|')",
    ],
};

/// BitTorrent: the peer-wire handshake and DHT (KRPC over bencoding)
/// messages.
pub const BITTORRENT: Set = Set {
    name: "bittorrent",
    doc: "BitTorrent peer-wire handshake (\\x13BitTorrent protocol at the payload's start) \
          and DHT KRPC queries and replies (bencoded dictionaries with an id of 20 bytes)",
    patterns: &[
        r"^\x13BitTorrent protocol",
        r"^d1:ad2:id20:",
        r"^d1:rd2:id20:",
        r"^d1:eli20[0-9]",
        r"1:y1:[qre]e$",
    ],
};

/// Protocol identifiers at the start of a TCP payload.
pub const PROTOCOLS: Set = Set {
    name: "protocols",
    doc: "HTTP/1.x request methods, an HTTP response status line, the start of a TLS \
          ClientHello (a handshake record of versions 3.0-3.4 whose first message is a \
          ClientHello), and an SSH banner",
    patterns: &[
        r"^(GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH|CONNECT|TRACE) [^ ]+ HTTP/1\.[01]\r\n",
        r"^HTTP/1\.[01] [1-5][0-9][0-9] ",
        r"^\x16\x03[\x00-\x04][\x00-\xff][\x00-\xff]\x01[\x00-\xff]{3}\x03[\x00-\x04]",
        r"^SSH-(1\.99|2\.0)-",
    ],
};

/// The server name (SNI) of a TLS ClientHello. A set of its own: in
/// `protocols`, the ClientHello start (pattern 2) ends first and would
/// always be the match reported.
pub const TLS_SNI: Set = Set {
    name: "tls_sni",
    doc: "A TLS ClientHello (handshake record, versions 3.0-3.4) carrying a server_name \
          extension: the extension's type 0 and lengths, a host_name entry (type 0) of \
          at least one byte; the match ends just after the name's first character",
    patterns: &[
        r"^\x16\x03[\x00-\x04][\x00-\xff]{2}\x01[\x00-\xff]{3}\x03[\x00-\x04][\x00-\xff]*\x00\x00\x00[\x05-\xff]\x00[\x03-\xff]\x00\x00[\x01-\xff][a-zA-Z0-9]",
    ],
};

/// Every set, in the order `nfkit nf show dpi` lists them.
pub const ALL: &[Set] = &[SQLI, BITTORRENT, PROTOCOLS, TLS_SNI];

/// The set called `name`.
pub fn find(name: &str) -> Option<&'static Set> {
    ALL.iter().find(|s| s.name == name)
}

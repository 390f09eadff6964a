//! The route and neighbour table `bpf_fib_lookup` consults in the VM
//! ([`FibTable`]), its text form (what `ip -o link`, `ip route` and
//! `ip neigh` print, so a user can paste them), and the lookup with the
//! kernel's result codes (`net/core/filter.c`, `bpf_ipv4_fib_lookup` /
//! `bpf_ipv6_fib_lookup`).

#![forbid(unsafe_code)]

use std::net::IpAddr;

/// A network device: what the lookup reports as the egress (`smac`, MTU).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub name: String,
    pub mac: [u8; 6],
    pub mtu: u32,
    /// IP forwarding is on for the device (`net.ipv4.conf.DEV.forwarding`
    /// and its IPv6 twin); off gives `FWD_DISABLED`.
    pub forwarding: bool,
}

/// What a route does with matching packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteType {
    Unicast,
    Local,
    Broadcast,
    Multicast,
    Anycast,
    Blackhole,
    Unreachable,
    Prohibit,
    Throw,
}

/// One route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub dst: IpAddr,
    pub prefix: u8,
    pub kind: RouteType,
    pub via: Option<IpAddr>,
    pub dev: Option<u32>,
    /// The route's MTU metric: lookups use it only when it is locked
    /// (`mtu lock N`), as the kernel's `ip_mtu_from_fib_result` and
    /// `ip6_mtu_from_fib6` do (without `ip_fwd_use_pmtu`); else the
    /// device's MTU counts.
    pub mtu: Option<u32>,
    pub mtu_lock: bool,
    pub metric: u32,
    /// Routing table id (main = 254; local = 255 is looked up with main).
    pub table: u32,
    /// Preferred source address (`src`).
    pub src: Option<IpAddr>,
}

/// One neighbour entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neigh {
    pub addr: IpAddr,
    pub dev: u32,
    pub mac: Option<[u8; 6]>,
    /// In a valid NUD state (not FAILED / INCOMPLETE).
    pub valid: bool,
}

/// Devices, routes and neighbours of one network namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FibTable {
    pub links: Vec<Link>,
    pub routes: Vec<Route>,
    pub neighs: Vec<Neigh>,
}

/// A line of a table file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct FibParseError {
    pub line: usize,
    pub why: String,
}

/// `bpf_fib_lookup` result codes (`BPF_FIB_LKUP_RET_*`).
pub mod ret {
    pub const SUCCESS: u64 = 0;
    pub const BLACKHOLE: u64 = 1;
    pub const UNREACHABLE: u64 = 2;
    pub const PROHIBIT: u64 = 3;
    pub const NOT_FWDED: u64 = 4;
    pub const FWD_DISABLED: u64 = 5;
    pub const NO_NEIGH: u64 = 7;
    pub const FRAG_NEEDED: u64 = 8;
    pub const NO_SRC_ADDR: u64 = 9;
}

/// `bpf_fib_lookup` flags (`BPF_FIB_LOOKUP_*`).
pub mod flag {
    pub const DIRECT: u32 = 1;
    pub const OUTPUT: u32 = 2;
    pub const SKIP_NEIGH: u32 = 4;
    pub const TBID: u32 = 8;
    pub const SRC: u32 = 16;
    pub const MARK: u32 = 32;
    pub const ALL: u32 = 63;
}

const MAIN: u32 = 254;
const LOCAL: u32 = 255;

fn mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn table_id(s: &str) -> Option<u32> {
    match s {
        "main" => Some(MAIN),
        "local" => Some(LOCAL),
        "default" => Some(253),
        n => n.parse().ok(),
    }
}

/// Neighbour states `ip neigh` prints; FAILED and INCOMPLETE are not valid.
const NUD_STATES: &[&str] = &[
    "PERMANENT",
    "NOARP",
    "REACHABLE",
    "STALE",
    "DELAY",
    "PROBE",
    "FAILED",
    "INCOMPLETE",
    "NONE",
];

impl FibTable {
    /// Reads a table file: one device, route or neighbour per line; `#`
    /// starts a comment. Devices: `link IFINDEX [NAME] [mtu N] [lladdr
    /// MAC] [noforward]` or an `ip -o link` line (`3: veth0@if2: <...> mtu
    /// 1500 ... link/ether MAC ...`). Routes: `ip route` / `ip -6 route`
    /// lines (`198.18.0.0/24 dev 3 via 198.18.0.1 mtu 1500`, `default via
    /// ...`, `blackhole 198.18.9.0/24`, `table 100`), optionally after
    /// `route`. Neighbours: `ip neigh` lines (`198.18.0.1 dev veth0 lladdr
    /// 02:00:00:00:00:01 PERMANENT`), or after `neigh`. `dev` takes a
    /// device name from a link line or an ifindex; an ifindex no link line
    /// names is a device with MAC 00:00:00:00:00:00 and MTU 1500.
    pub fn parse(text: &str) -> Result<FibTable, FibParseError> {
        let mut t = FibTable::default();
        let lines: Vec<(usize, Vec<&str>)> = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("")))
            .map(|(i, l)| (i, l.split_whitespace().collect::<Vec<_>>()))
            .filter(|(_, w)| !w.is_empty())
            .collect();
        // Devices first: routes and neighbours name them.
        for (line, w) in &lines {
            let err = |why: String| FibParseError { line: *line, why };
            if w[0] == "link" {
                t.links.push(parse_link(&w[1..]).map_err(err)?);
            } else if w[0].ends_with(':') && w[0].trim_end_matches(':').parse::<u32>().is_ok() {
                t.links.push(parse_ip_link(w).map_err(err)?);
            }
        }
        for (line, w) in &lines {
            let err = |why: String| FibParseError { line: *line, why };
            let first = w[0];
            if first == "link" || first.ends_with(':') {
                continue;
            }
            let neigh = first == "neigh"
                || (first != "route"
                    && (w.contains(&"lladdr") || w.last().is_some_and(|s| NUD_STATES.contains(s))));
            let w: &[&str] = if first == "neigh" || first == "route" {
                &w[1..]
            } else {
                w
            };
            if neigh {
                let n = t.parse_neigh(w).map_err(err)?;
                t.neighs.push(n);
            } else {
                let r = t.parse_route(w).map_err(err)?;
                t.routes.push(r);
            }
        }
        Ok(t)
    }

    fn dev(&mut self, s: &str) -> Result<u32, String> {
        if let Some(l) = self.links.iter().find(|l| l.name == s) {
            return Ok(l.ifindex);
        }
        let i: u32 = s
            .parse()
            .map_err(|_| format!("device `{s}` is neither an ifindex nor named by a link line"))?;
        if !self.links.iter().any(|l| l.ifindex == i) {
            self.links.push(Link {
                ifindex: i,
                name: String::new(),
                mac: [0; 6],
                mtu: 1500,
                forwarding: true,
            });
        }
        Ok(i)
    }

    fn parse_neigh(&mut self, w: &[&str]) -> Result<Neigh, String> {
        let addr: IpAddr = w
            .first()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("`{}` is not an address", w.first().unwrap_or(&"")))?;
        let mut n = Neigh {
            addr,
            dev: 0,
            mac: None,
            valid: true,
        };
        let mut dev = None;
        let mut i = 1;
        while i < w.len() {
            let val = w.get(i + 1).copied();
            match w[i] {
                "dev" => dev = Some(self.dev(val.ok_or("`dev` without a device")?)?),
                "lladdr" => {
                    let v = val.ok_or("`lladdr` without a MAC")?;
                    n.mac = Some(mac(v).ok_or_else(|| format!("`{v}` is not a MAC"))?);
                }
                "router" | "proxy" | "extern_learn" | "managed" => {
                    i += 1;
                    continue;
                }
                s if NUD_STATES.contains(&s) => {
                    n.valid = !matches!(s, "FAILED" | "INCOMPLETE" | "NONE");
                    i += 1;
                    continue;
                }
                other => return Err(format!("unknown neighbour attribute `{other}`")),
            }
            i += 2;
        }
        n.dev = dev.ok_or("a neighbour needs `dev`")?;
        if n.mac.is_none() {
            n.valid = false;
        }
        Ok(n)
    }

    fn parse_route(&mut self, w: &[&str]) -> Result<Route, String> {
        let kinds = [
            ("unicast", RouteType::Unicast),
            ("local", RouteType::Local),
            ("broadcast", RouteType::Broadcast),
            ("multicast", RouteType::Multicast),
            ("anycast", RouteType::Anycast),
            ("blackhole", RouteType::Blackhole),
            ("unreachable", RouteType::Unreachable),
            ("prohibit", RouteType::Prohibit),
            ("throw", RouteType::Throw),
        ];
        let mut w = w;
        let mut kind = RouteType::Unicast;
        if let Some((_, k)) = kinds.iter().find(|(n, _)| w.first() == Some(n)) {
            kind = *k;
            w = &w[1..];
        }
        let dst_text = w.first().ok_or("a route needs a destination")?;
        let (dst, prefix) = parse_prefix(dst_text)?;
        let mut r = Route {
            dst,
            prefix,
            kind,
            via: None,
            dev: None,
            mtu: None,
            mtu_lock: false,
            metric: if dst.is_ipv6() { 1024 } else { 0 },
            table: MAIN,
            src: None,
        };
        let mut i = 1;
        while i < w.len() {
            let val = w.get(i + 1).copied();
            let need = |what: &str| val.ok_or_else(|| format!("`{what}` without a value"));
            match w[i] {
                "via" => {
                    let v = need("via")?;
                    let v = v.strip_prefix("inet6 ").unwrap_or(v);
                    r.via = Some(v.parse().map_err(|_| format!("`{v}` is not an address"))?);
                }
                "dev" => r.dev = Some(self.dev(need("dev")?)?),
                "mtu" => {
                    let mut v = need("mtu")?;
                    if v == "lock" {
                        r.mtu_lock = true;
                        i += 1;
                        v = w.get(i + 1).copied().ok_or("`mtu lock` without a value")?;
                    }
                    r.mtu = Some(v.parse().map_err(|_| format!("bad mtu `{v}`"))?);
                }
                "metric" | "priority" | "preference" => {
                    let v = need("metric")?;
                    r.metric = v.parse().map_err(|_| format!("bad metric `{v}`"))?;
                }
                "table" => {
                    let v = need("table")?;
                    r.table = table_id(v).ok_or_else(|| format!("bad table `{v}`"))?;
                }
                "src" => {
                    let v = need("src")?;
                    r.src = Some(v.parse().map_err(|_| format!("`{v}` is not an address"))?);
                }
                "proto" | "scope" | "pref" | "expires" | "realm" | "advmss" | "hoplimit"
                | "weight" | "initcwnd" | "initrwnd" | "nhid" | "tos" | "dsfield" | "rto_min"
                | "congctl" | "features" | "quickack" | "fastopen_no_cookie" => {}
                "onlink" | "linkdown" | "dead" | "pervasive" | "offload" | "trap" | "notify"
                | "rt_offload" | "rt_trap" => {
                    i += 1;
                    continue;
                }
                other => return Err(format!("unknown route attribute `{other}`")),
            }
            i += 2;
        }
        // `default` takes the gateway's family.
        if *dst_text == "default" && r.via.is_some_and(|v| v.is_ipv6()) {
            r.dst = IpAddr::from([0u16; 8]);
        }
        if r.kind == RouteType::Unicast && r.dev.is_none() && r.via.is_none() {
            return Err("a unicast route needs `dev` or `via`".into());
        }
        Ok(r)
    }

    /// The device `ifindex`.
    pub fn link(&self, ifindex: u32) -> Option<&Link> {
        self.links.iter().find(|l| l.ifindex == ifindex)
    }

    /// The best route to `dst`: longest prefix, then lowest metric, among
    /// routes of table `table` (local and main are one table, as the
    /// kernel merges them while no policy rules exist). `None` for the
    /// table means the rule lookup: local+main, then default.
    /// With `oif` (an output lookup), only routes through that device
    /// (or through none) match.
    fn route(&self, dst: IpAddr, table: Option<u32>, oif: Option<u32>) -> Option<&Route> {
        let tables: &[&[u32]] = match table {
            Some(MAIN) | Some(LOCAL) => &[&[MAIN, LOCAL]],
            Some(t) => return self.best(dst, &[t], oif),
            None => &[&[MAIN, LOCAL], &[253]],
        };
        tables.iter().find_map(|ts| self.best(dst, ts, oif))
    }

    fn best(&self, dst: IpAddr, tables: &[u32], oif: Option<u32>) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| tables.contains(&r.table) && covers(r, dst))
            .filter(|r| oif.is_none() || r.dev.is_none() || r.dev == oif)
            .min_by_key(|r| (std::cmp::Reverse(r.prefix), r.metric))
    }

    fn has_table(&self, t: u32) -> bool {
        t == MAIN || t == LOCAL || self.routes.iter().any(|r| r.table == t)
    }

    fn neigh(&self, addr: IpAddr, dev: u32) -> Option<&Neigh> {
        self.neighs.iter().find(|n| n.addr == addr && n.dev == dev)
    }
}

fn parse_prefix(text: &str) -> Result<(IpAddr, u8), String> {
    if text == "default" {
        return Ok((IpAddr::from([0u8; 4]), 0));
    }
    let (a, p) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("`{text}` is not an address or prefix"))?;
    let max = if addr.is_ipv6() { 128 } else { 32 };
    let prefix = match p {
        Some(p) => p
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("bad prefix length in `{text}`"))?,
        None => max,
    };
    Ok((addr, prefix))
}

fn parse_link(w: &[&str]) -> Result<Link, String> {
    let ifindex: u32 = w
        .first()
        .and_then(|s| s.parse().ok())
        .ok_or("`link` needs an ifindex")?;
    let mut l = Link {
        ifindex,
        name: String::new(),
        mac: [0; 6],
        mtu: 1500,
        forwarding: true,
    };
    let mut i = 1;
    while i < w.len() {
        let val = w.get(i + 1).copied();
        match w[i] {
            "mtu" => {
                let v = val.ok_or("`mtu` without a value")?;
                l.mtu = v.parse().map_err(|_| format!("bad mtu `{v}`"))?;
            }
            "lladdr" | "address" => {
                let v = val.ok_or("`lladdr` without a MAC")?;
                l.mac = mac(v).ok_or_else(|| format!("`{v}` is not a MAC"))?;
            }
            "noforward" => {
                l.forwarding = false;
                i += 1;
                continue;
            }
            name if i == 1 => {
                l.name = name.to_string();
                i += 1;
                continue;
            }
            other => return Err(format!("unknown link attribute `{other}`")),
        }
        i += 2;
    }
    Ok(l)
}

/// An `ip -o link` line: `3: veth0@if2: <FLAGS> mtu 1500 ... link/ether MAC ...`.
fn parse_ip_link(w: &[&str]) -> Result<Link, String> {
    let ifindex: u32 = w[0]
        .trim_end_matches(':')
        .parse()
        .map_err(|_| "bad ifindex".to_string())?;
    let name = w.get(1).ok_or("`ip link` line without a name")?;
    let name = name.trim_end_matches(':');
    let name = name.split('@').next().unwrap_or(name).to_string();
    let mut l = Link {
        ifindex,
        name,
        mac: [0; 6],
        mtu: 1500,
        forwarding: true,
    };
    for (i, s) in w.iter().enumerate() {
        let val = w.get(i + 1);
        match *s {
            "mtu" => {
                if let Some(v) = val.and_then(|v| v.parse().ok()) {
                    l.mtu = v;
                }
            }
            "link/ether" => {
                if let Some(m) = val.and_then(|v| mac(v)) {
                    l.mac = m;
                }
            }
            _ => {}
        }
    }
    Ok(l)
}

fn covers(r: &Route, dst: IpAddr) -> bool {
    let bits = |a: IpAddr| -> u128 {
        match a {
            IpAddr::V4(v) => u128::from(u32::from(v)) << 96,
            IpAddr::V6(v) => u128::from(v),
        }
    };
    if r.dst.is_ipv6() != dst.is_ipv6() {
        return false;
    }
    if r.prefix == 0 {
        return true;
    }
    let p = u32::from(r.prefix);
    let width = if dst.is_ipv6() { p } else { p.min(32) };
    let mask = u128::MAX << (128 - width);
    bits(r.dst) & mask == bits(dst) & mask
}

/// `struct bpf_fib_lookup` offsets.
mod off {
    pub const FAMILY: usize = 0;
    pub const TOT_LEN: usize = 6;
    pub const IFINDEX: usize = 8;
    pub const METRIC: usize = 12;
    pub const SRC: usize = 16;
    pub const DST: usize = 32;
    pub const VLAN: usize = 48;
    pub const SMAC: usize = 52;
    pub const DMAC: usize = 58;
}

/// Size of `struct bpf_fib_lookup`.
pub const PARAMS_SIZE: usize = 64;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// What a lookup decided: the result code, or a negative errno.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Code(u64),
    Errno(i64),
}

/// Why the VM cannot answer a lookup as the kernel would.
pub type Unsupported = String;

/// One lookup in `t` on `params` (changed in place as the kernel changes
/// them). `skb_len`: the packet length when called from TC (the MTU
/// check without `tot_len`), `None` from XDP.
pub fn lookup(
    t: &FibTable,
    p: &mut [u8; PARAMS_SIZE],
    flags: u32,
    skb_len: Option<usize>,
) -> Result<Lookup, Unsupported> {
    let tot_len = u16::from_le_bytes([p[off::TOT_LEN], p[off::TOT_LEN + 1]]);
    let check_mtu = skb_len.is_none() || tot_len != 0;
    let rc = match p[off::FAMILY] {
        AF_INET | AF_INET6 => route_lookup(t, p, flags, check_mtu)?,
        _ => return Ok(Lookup::Errno(97)), // EAFNOSUPPORT
    };
    if let (Lookup::Code(ret::SUCCESS), Some(len), false) = (&rc, skb_len, check_mtu) {
        let ifindex = rd32(p, off::IFINDEX);
        let mtu = t.link(ifindex).map_or(1500, |l| l.mtu);
        // is_skb_forwardable: the frame may carry an Ethernet and a VLAN
        // header beyond the MTU.
        let rc = if len > mtu as usize + 14 + 4 {
            Lookup::Code(ret::FRAG_NEEDED)
        } else {
            rc
        };
        p[off::TOT_LEN..off::TOT_LEN + 2].copy_from_slice(&(mtu as u16).to_le_bytes());
        return Ok(rc);
    }
    Ok(rc)
}

fn rd32(p: &[u8; PARAMS_SIZE], at: usize) -> u32 {
    u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

fn addr_at(p: &[u8; PARAMS_SIZE], at: usize, v6: bool) -> IpAddr {
    if v6 {
        let mut b = [0u8; 16];
        b.copy_from_slice(&p[at..at + 16]);
        IpAddr::from(b)
    } else {
        IpAddr::from([p[at], p[at + 1], p[at + 2], p[at + 3]])
    }
}

fn put_addr(p: &mut [u8; PARAMS_SIZE], at: usize, a: IpAddr) {
    match a {
        IpAddr::V4(v) => p[at..at + 4].copy_from_slice(&v.octets()),
        IpAddr::V6(v) => p[at..at + 16].copy_from_slice(&v.octets()),
    }
}

/// Addresses IPv6 never forwards (`rt6_need_strict`): multicast,
/// link-local, loopback.
fn strict6(a: IpAddr) -> bool {
    match a {
        IpAddr::V6(v) => {
            v.is_multicast() || v.is_loopback() || (v.segments()[0] & 0xffc0) == 0xfe80
        }
        IpAddr::V4(_) => false,
    }
}

fn route_lookup(
    t: &FibTable,
    p: &mut [u8; PARAMS_SIZE],
    flags: u32,
    check_mtu: bool,
) -> Result<Lookup, Unsupported> {
    let v6 = p[off::FAMILY] == AF_INET6;
    let dst = addr_at(p, off::DST, v6);
    let src = addr_at(p, off::SRC, v6);
    if v6 && (strict6(dst) || strict6(src)) {
        return Ok(Lookup::Code(ret::NOT_FWDED));
    }
    let Some(dev) = t.link(rd32(p, off::IFINDEX)) else {
        return Ok(Lookup::Errno(19)); // ENODEV
    };
    if !dev.forwarding {
        return Ok(Lookup::Code(ret::FWD_DISABLED));
    }
    let table = if flags & flag::DIRECT != 0 {
        let mut tbid = MAIN;
        if flags & flag::TBID != 0 {
            tbid = rd32(p, off::VLAN);
            p[off::VLAN..off::VLAN + 4].fill(0);
        }
        if !t.has_table(tbid) {
            return Ok(Lookup::Code(ret::NOT_FWDED));
        }
        Some(tbid)
    } else {
        None
    };
    let in_dev = dev.ifindex;
    let oif = (flags & flag::OUTPUT != 0).then_some(in_dev);
    let Some(r) = t.route(dst, table, oif) else {
        return Ok(Lookup::Code(ret::NOT_FWDED));
    };
    match r.kind {
        RouteType::Unicast => {}
        RouteType::Blackhole => return Ok(Lookup::Code(ret::BLACKHOLE)),
        RouteType::Unreachable => return Ok(Lookup::Code(ret::UNREACHABLE)),
        RouteType::Prohibit => return Ok(Lookup::Code(ret::PROHIBIT)),
        _ => return Ok(Lookup::Code(ret::NOT_FWDED)),
    }
    let out_dev = r.dev.and_then(|i| t.link(i)).or_else(|| {
        // A route by gateway only: the device of the route covering it.
        let gw = r.via?;
        t.route(gw, table, oif)
            .and_then(|g| g.dev)
            .and_then(|i| t.link(i))
    });
    let Some(out_dev) = out_dev else {
        return Ok(Lookup::Code(ret::NOT_FWDED));
    };
    let mut mtu = 0u32;
    if check_mtu {
        mtu = match r.mtu {
            Some(m) if r.mtu_lock => m,
            _ => out_dev.mtu,
        };
        let tot_len = u16::from_le_bytes([p[off::TOT_LEN], p[off::TOT_LEN + 1]]);
        if u32::from(tot_len) > mtu {
            p[off::TOT_LEN..off::TOT_LEN + 2].copy_from_slice(&(mtu as u16).to_le_bytes());
            return Ok(Lookup::Code(ret::FRAG_NEEDED));
        }
    }
    p[off::METRIC..off::METRIC + 4].copy_from_slice(&r.metric.to_le_bytes());
    p[off::IFINDEX..off::IFINDEX + 4].copy_from_slice(&out_dev.ifindex.to_le_bytes());
    if flags & flag::SRC != 0 {
        match r.src {
            Some(s) if s.is_ipv6() == v6 => put_addr(p, off::SRC, s),
            _ if v6 => return Ok(Lookup::Code(ret::NO_SRC_ADDR)),
            _ => {
                return Err(
                    "BPF_FIB_LOOKUP_SRC on a route without `src`: the VM knows no device addresses"
                        .into(),
                )
            }
        }
    }
    let mut next = dst;
    if let Some(gw) = r.via {
        if gw.is_ipv6() && !v6 {
            p[off::FAMILY] = AF_INET6;
        }
        put_addr(p, off::DST, gw);
        next = gw;
    }
    if flags & flag::SKIP_NEIGH == 0 {
        match t.neigh(next, out_dev.ifindex) {
            Some(Neigh {
                mac: Some(m),
                valid: true,
                ..
            }) => {
                p[off::DMAC..off::DMAC + 6].copy_from_slice(m);
                p[off::SMAC..off::SMAC + 6].copy_from_slice(&out_dev.mac);
            }
            _ => return Ok(Lookup::Code(ret::NO_NEIGH)),
        }
    }
    p[off::VLAN..off::VLAN + 4].fill(0);
    if mtu != 0 {
        p[off::TOT_LEN..off::TOT_LEN + 2].copy_from_slice(&(mtu as u16).to_le_bytes());
    }
    Ok(Lookup::Code(ret::SUCCESS))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "
        3: v0@if4: <BROADCAST,UP> mtu 1500 qdisc noqueue link/ether 02:00:00:00:00:03 brd ff:ff:ff:ff:ff:ff
        link 4 v1 mtu 1400 lladdr 02:00:00:00:00:04
        198.18.0.0/24 dev v0 proto kernel scope link src 198.18.0.1
        198.18.5.0/24 via 198.18.1.2 dev v1 mtu lock 1300
        198.18.1.0/24 dev 4
        blackhole 198.18.6.0/24
        local 198.18.0.1 dev v0 table local proto kernel scope host src 198.18.0.1
        198.18.1.2 dev v1 lladdr 02:00:00:00:00:aa PERMANENT
        neigh 198.18.0.9 dev 3 lladdr 02:00:00:00:00:09
        198.18.0.7 dev v0 FAILED
    ";

    fn params(dst: [u8; 4], ifindex: u32) -> [u8; PARAMS_SIZE] {
        let mut p = [0u8; PARAMS_SIZE];
        p[0] = AF_INET;
        p[8..12].copy_from_slice(&ifindex.to_le_bytes());
        p[32..36].copy_from_slice(&dst);
        p
    }

    #[test]
    fn parses_ip_output() {
        let t = FibTable::parse(TABLE).expect("parse");
        assert_eq!(t.links.len(), 2);
        assert_eq!(t.links[0].name, "v0");
        assert_eq!(t.links[0].mac, [2, 0, 0, 0, 0, 3]);
        assert_eq!(t.routes.len(), 5);
        assert_eq!(t.routes[1].mtu, Some(1300));
        assert_eq!(t.routes[4].table, LOCAL);
        assert_eq!(t.neighs.len(), 3);
        assert!(!t.neighs[2].valid);
        let e = FibTable::parse("198.18.0.0/24 dev nosuch").expect_err("bad dev");
        assert_eq!(e.line, 1);
        assert!(e.why.contains("nosuch"), "{e}");
    }

    #[test]
    fn gateway_route_fills_the_params() {
        let t = FibTable::parse(TABLE).expect("parse");
        let mut p = params([198, 18, 5, 7], 3);
        assert_eq!(lookup(&t, &mut p, 0, None), Ok(Lookup::Code(ret::SUCCESS)));
        assert_eq!(rd32(&p, off::IFINDEX), 4);
        assert_eq!(&p[32..36], &[198, 18, 1, 2]);
        assert_eq!(&p[off::SMAC..off::SMAC + 6], &[2, 0, 0, 0, 0, 4]);
        assert_eq!(&p[off::DMAC..off::DMAC + 6], &[2, 0, 0, 0, 0, 0xaa]);
        assert_eq!(u16::from_le_bytes([p[6], p[7]]), 1300);
    }

    #[test]
    fn result_codes() {
        let t = FibTable::parse(TABLE).expect("parse");
        let code = |dst, flags| lookup(&t, &mut params(dst, 3), flags, None);
        assert_eq!(code([198, 18, 6, 1], 0), Ok(Lookup::Code(ret::BLACKHOLE)));
        assert_eq!(code([198, 18, 0, 1], 0), Ok(Lookup::Code(ret::NOT_FWDED)));
        assert_eq!(code([198, 18, 0, 7], 0), Ok(Lookup::Code(ret::NO_NEIGH)));
        assert_eq!(code([198, 18, 0, 8], 0), Ok(Lookup::Code(ret::NO_NEIGH)));
        assert_eq!(
            code([198, 18, 0, 8], flag::SKIP_NEIGH),
            Ok(Lookup::Code(ret::SUCCESS))
        );
        assert_eq!(code([10, 0, 0, 1], 0), Ok(Lookup::Code(ret::NOT_FWDED)));
        let mut p = params([198, 18, 5, 7], 3);
        p[6..8].copy_from_slice(&1400u16.to_le_bytes());
        assert_eq!(
            lookup(&t, &mut p, 0, None),
            Ok(Lookup::Code(ret::FRAG_NEEDED))
        );
        assert_eq!(u16::from_le_bytes([p[6], p[7]]), 1300);
        let mut p = params([198, 18, 5, 7], 9);
        assert_eq!(lookup(&t, &mut p, 0, None), Ok(Lookup::Errno(19)));
    }

    #[test]
    fn forwarding_off_tables_and_direct_lookups() {
        let mut t = FibTable::parse(TABLE).expect("parse");
        t.routes.push(
            FibTable::parse("link 3\n198.18.9.0/24 dev 3 table 100")
                .expect("route")
                .routes[0]
                .clone(),
        );
        let code = |t: &FibTable, p: &mut [u8; PARAMS_SIZE], flags| lookup(t, p, flags, None);
        // Table 100 only with DIRECT|TBID; its field is cleared.
        let mut p = params([198, 18, 9, 1], 3);
        p[48..52].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(
            code(&t, &mut p, flag::DIRECT | flag::TBID),
            Ok(Lookup::Code(ret::NO_NEIGH))
        );
        assert_eq!(&p[48..52], &[0; 4]);
        let mut p = params([198, 18, 9, 1], 3);
        assert_eq!(code(&t, &mut p, 0), Ok(Lookup::Code(ret::NOT_FWDED)));
        let mut p = params([198, 18, 9, 1], 3);
        p[48..52].copy_from_slice(&7u32.to_le_bytes());
        assert_eq!(
            code(&t, &mut p, flag::DIRECT | flag::TBID),
            Ok(Lookup::Code(ret::NOT_FWDED))
        );
        // A device with forwarding off.
        let off = FibTable::parse("link 3 v0 noforward\n198.18.0.0/24 dev v0").expect("parse");
        let mut p = params([198, 18, 0, 2], 3);
        assert_eq!(code(&off, &mut p, 0), Ok(Lookup::Code(ret::FWD_DISABLED)));
        // SRC: the route's, or a fault naming the flag.
        let mut p = params([198, 18, 0, 9], 3);
        assert_eq!(code(&t, &mut p, flag::SRC), Ok(Lookup::Code(ret::SUCCESS)));
        assert_eq!(&p[16..20], &[198, 18, 0, 1]);
        let mut p = params([198, 18, 5, 7], 3);
        let err = code(&t, &mut p, flag::SRC).expect_err("no src");
        assert!(err.contains("BPF_FIB_LOOKUP_SRC"), "{err}");
    }
}

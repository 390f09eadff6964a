//! Match-action tables (docs/language.md, "Pipelines"): a `Table(...)`
//! declaration read from the script, the maps and chains it becomes (as
//! chain-language source), and the map writes of its initial entries.
//!
//! * exact keys only: a hash map, key the fields (a tuple for several);
//! * one `lpm` key (and exact ones): an LPM trie keyed
//!   `(prefixlen, exact fields..., lpm field in network order)`;
//! * any `ternary` key: arrays of rules `(value, mask)` per key, a
//!   priority and an action word, scanned in a bounded loop (the rule of
//!   highest priority wins, the first of equal ones); `T_n[0]` rules are
//!   in use.
//!
//! An action word (u64) is `action index << 56 | argument` (56 bits).
//! Every layout also has `T_default`, a one-slot array holding the
//! action word of a miss (the declared `default=` to begin with), so the
//! control plane changes the default at runtime like an entry.

use crate::ir::key_layout;
use crate::types::Ty;
use std::fmt::Write;

/// Most entries of a table.
pub const MAX_SIZE: u32 = 65536;
/// Most rules of a ternary table (the scan is a bounded loop).
pub const MAX_TERNARY: u32 = 4096;
/// Largest action argument (56 bits).
pub const MAX_ARG: u64 = (1 << 56) - 1;
/// What an exact or LPM lookup gives on a miss: action 255, which no
/// table has (at most 255 actions), so never an entry's word.
const MISS: u64 = u64::MAX;

/// How a key field matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
}

impl MatchKind {
    pub fn from_name(s: &str) -> Option<MatchKind> {
        match s {
            "exact" => Some(MatchKind::Exact),
            "lpm" => Some(MatchKind::Lpm),
            "ternary" => Some(MatchKind::Ternary),
            _ => None,
        }
    }
}

/// A header field or metadata a table can match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: &'static str,
    pub ty: Ty,
    /// Chain-language expression of the field (0 when absent).
    pub expr: &'static str,
    /// Written as a dotted IPv4 address in entries.
    pub ipv4: bool,
    /// Written as a MAC address in entries.
    pub mac: bool,
}

const fn f(name: &'static str, ty: Ty, expr: &'static str) -> Field {
    Field {
        name,
        ty,
        expr,
        ipv4: false,
        mac: false,
    }
}

/// The fields tables match on.
pub const FIELDS: &[Field] = &[
    Field {
        ipv4: true,
        ..f(
            "ip.src",
            Ty::U32,
            "(Packet.read_u32(u64(Packet.l3_off) + 12) if Packet.ip_version == 4 else u32(0))",
        )
    },
    Field {
        ipv4: true,
        ..f(
            "ip.dst",
            Ty::U32,
            "(Packet.read_u32(u64(Packet.l3_off) + 16) if Packet.ip_version == 4 else u32(0))",
        )
    },
    f("ip.proto", Ty::U8, "u8(Packet.l4_proto)"),
    f("ip.dscp", Ty::U8, "u8(Packet.tos >> 2)"),
    f("ip.ttl", Ty::U8, "u8(Packet.ttl)"),
    f("l4.sport", Ty::U16, "u16(Packet.sport)"),
    f("l4.dport", Ty::U16, "u16(Packet.dport)"),
    f("eth.type", Ty::U16, "u16(Packet.eth_proto)"),
    Field {
        mac: true,
        ..f(
            "eth.dst",
            Ty::U64,
            "((u64(Packet.read_u32(0)) << 16) | u64(Packet.read_u16(4)))",
        )
    },
    Field {
        mac: true,
        ..f(
            "eth.src",
            Ty::U64,
            "((u64(Packet.read_u32(6)) << 16) | u64(Packet.read_u16(10)))",
        )
    },
    f("in_port", Ty::U32, "u32(Packet.in_port)"),
];

/// The field named `name`.
pub fn field(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.name == name)
}

/// An action of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// A verdict without argument (`DROP`, `PASS`, `TX`, `ABORTED`, `FLOOD`).
    Verdict(String),
    /// `REDIRECT`: to the port (ifindex) in the entry's argument.
    Redirect,
    /// `NoAction`: the table's value is 0.
    NoAction,
    /// A chain taking the entry's argument (`arity` 1) or nothing.
    Chain { name: String, arity: usize },
}

impl Action {
    pub fn name(&self) -> &str {
        match self {
            Action::Verdict(v) => v,
            Action::Redirect => "REDIRECT",
            Action::NoAction => "NoAction",
            Action::Chain { name, .. } => name,
        }
    }
}

/// One key value of an entry: `value`, and `mask` (ternary) or prefix
/// length (lpm); exact keys have a full mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyMatch {
    pub value: u64,
    pub mask: u64,
    pub prefix: u32,
}

/// An entry: one match per key, the action word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub keys: Vec<KeyMatch>,
    pub action: usize,
    pub arg: u64,
    pub line: u32,
}

/// A checked `Table(...)` declaration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub keys: Vec<(&'static Field, MatchKind)>,
    pub actions: Vec<Action>,
    pub size: u32,
    /// Action word of a miss.
    pub default: u64,
    pub entries: Vec<Entry>,
    pub line: u32,
}

/// How the table is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Hash,
    Lpm,
    Ternary,
}

/// A map write of the control plane: (map, key bytes, value bytes).
pub type Write3 = (String, Vec<u8>, Vec<u8>);

/// `action << 56 | arg`.
pub fn word(action: usize, arg: u64) -> u64 {
    ((action as u64) << 56) | (arg & MAX_ARG)
}

fn bytes_le(ty: Ty, v: u64) -> Vec<u8> {
    v.to_le_bytes()[..ty.bytes() as usize].to_vec()
}

fn bytes_be(ty: Ty, v: u64) -> Vec<u8> {
    let n = ty.bytes() as usize;
    v.to_be_bytes()[8 - n..].to_vec()
}

impl Table {
    pub fn layout(&self) -> Layout {
        if self.keys.iter().any(|(_, k)| *k == MatchKind::Ternary) {
            Layout::Ternary
        } else if self.keys.iter().any(|(_, k)| *k == MatchKind::Lpm) {
            Layout::Lpm
        } else {
            Layout::Hash
        }
    }

    /// Key indices in map-key order (LPM: the lpm key last).
    fn order(&self) -> Vec<usize> {
        let mut o: Vec<usize> = (0..self.keys.len()).collect();
        if self.layout() == Layout::Lpm {
            o.sort_by_key(|&i| self.keys[i].1 == MatchKind::Lpm);
        }
        o
    }

    /// Names of the maps that hold the table (the default's last).
    pub fn maps(&self) -> Vec<String> {
        let n = &self.name;
        let mut v = match self.layout() {
            Layout::Hash => vec![format!("{n}_exact")],
            Layout::Lpm => vec![format!("{n}_lpm")],
            Layout::Ternary => {
                let mut v = Vec::new();
                for j in 0..self.keys.len() {
                    v.push(format!("{n}_v{j}"));
                    v.push(format!("{n}_m{j}"));
                }
                v.extend([format!("{n}_prio"), format!("{n}_act"), format!("{n}_n")]);
                v
            }
        };
        v.push(self.default_map());
        v
    }

    /// The one-slot array (`u64` at index 0) holding the miss's action word.
    pub fn default_map(&self) -> String {
        format!("{}_default", self.name)
    }

    /// The map write that sets the miss's action word to `word`.
    pub fn default_write(&self, word: u64) -> Write3 {
        (
            self.default_map(),
            0u32.to_le_bytes().to_vec(),
            word.to_le_bytes().to_vec(),
        )
    }

    /// The maps and chains of the table, as chain-language source:
    /// `NAME_apply()` gives the action's value.
    pub fn source(&self) -> String {
        let n = &self.name;
        let mut s = String::new();
        let size = self.size;
        let tuple = |tys: &[Ty]| {
            if tys.len() == 1 {
                tys[0].to_string()
            } else {
                format!(
                    "({})",
                    tys.iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        };
        let _ = writeln!(s, "\n# table {n} (line {})", self.line);
        let _ = writeln!(s, "{n}_default = ArrayMap(u64, 1)");
        // A hit gives the entry's word; a miss (MISS, never a word: at most
        // 255 actions) reads the default's.
        let miss = format!("    if _w == {MISS:#x}:\n        _w = {n}_default[0]");
        match self.layout() {
            Layout::Hash => {
                let tys: Vec<Ty> = self.keys.iter().map(|(f, _)| f.ty).collect();
                let _ = writeln!(s, "{n}_exact = HashMap({}, u64, {size})", tuple(&tys));
                let _ = writeln!(s, "def {n}_apply() -> u64:");
                let ks: Vec<&str> = self.keys.iter().map(|(f, _)| f.expr).collect();
                let key = if ks.len() == 1 {
                    ks[0].to_string()
                } else {
                    format!("({})", ks.join(", "))
                };
                let _ = writeln!(s, "    _w: u64 = {n}_exact.get({key}, {MISS:#x})");
                let _ = writeln!(s, "{miss}");
                let _ = writeln!(s, "    return {n}_run(_w)");
            }
            Layout::Lpm => {
                let order = self.order();
                let mut tys = vec![Ty::U32];
                tys.extend(order.iter().map(|&i| self.keys[i].0.ty));
                let (_, ksize) = key_layout(&tys);
                let _ = writeln!(s, "{n}_lpm = LpmTrieMap({}, u64, {size})", tuple(&tys));
                let _ = writeln!(s, "def {n}_apply() -> u64:");
                let mut parts = vec![format!("{}", (ksize - 4) * 8)];
                for &i in &order {
                    let (f, k) = self.keys[i];
                    let _ = writeln!(s, "    _k{i}: {} = {}", f.ty, f.expr);
                    if k == MatchKind::Lpm {
                        parts.push(bswap(&format!("_k{i}"), f.ty));
                    } else {
                        parts.push(format!("_k{i}"));
                    }
                }
                let _ = writeln!(
                    s,
                    "    _w: u64 = {n}_lpm.get(({}), {MISS:#x})",
                    parts.join(", ")
                );
                let _ = writeln!(s, "{miss}");
                let _ = writeln!(s, "    return {n}_run(_w)");
            }
            Layout::Ternary => {
                for j in 0..self.keys.len() {
                    let _ = writeln!(s, "{n}_v{j} = ArrayMap(u64, {size})");
                    let _ = writeln!(s, "{n}_m{j} = ArrayMap(u64, {size})");
                }
                let _ = writeln!(s, "{n}_prio = ArrayMap(u32, {size})");
                let _ = writeln!(s, "{n}_act = ArrayMap(u64, {size})");
                let _ = writeln!(s, "{n}_n = ArrayMap(u32, 1)");
                let _ = writeln!(s, "def {n}_apply() -> u64:");
                for (j, (f, _)) in self.keys.iter().enumerate() {
                    let _ = writeln!(s, "    _k{j}: u64 = u64({})", f.expr);
                }
                let _ = writeln!(s, "    _n: u32 = {n}_n[0]");
                let _ = writeln!(s, "    _best: u32 = 0");
                let _ = writeln!(s, "    _w: u64 = {n}_default[0]");
                // Through bpf_loop (a cap above 1024): the verifier checks
                // the body once, whatever the number of rules.
                let _ = writeln!(s, "    if _n > {size}:");
                let _ = writeln!(s, "        _n = {size}");
                let cap = size.max(crate::check::BPF_LOOP_ABOVE + 1);
                let _ = writeln!(s, "    for _i in range(_n, cap={cap}):");
                // The keys first: a rule that does not match costs one
                // lookup per key up to the first mismatch.
                let conds: Vec<String> = (0..self.keys.len())
                    .map(|j| format!("(_k{j} & {n}_m{j}[_i]) == {n}_v{j}[_i]"))
                    .collect();
                let _ = writeln!(s, "        if {}:", conds.join(" and "));
                let _ = writeln!(s, "            _p: u32 = {n}_prio[_i]");
                let _ = writeln!(s, "            if _p > _best:");
                let _ = writeln!(s, "                _best = _p");
                let _ = writeln!(s, "                _w = {n}_act[_i]");
                let _ = writeln!(s, "    return {n}_run(_w)");
            }
        }
        // The action dispatch.
        let _ = writeln!(s, "def {n}_run(_w: u64) -> u64:");
        let _ = writeln!(s, "    _a: u64 = _w >> 56");
        let _ = writeln!(s, "    _arg: u64 = _w & {MAX_ARG:#x}");
        for (i, a) in self.actions.iter().enumerate() {
            let _ = writeln!(s, "    if _a == {i}:");
            let body = match a {
                Action::Verdict(v) => format!("return {v}"),
                Action::Redirect => "return REDIRECT(_arg)".to_string(),
                Action::NoAction => "return 0".to_string(),
                Action::Chain { name, arity: 0 } => format!("return {name}()"),
                Action::Chain { name, .. } => format!("return {name}(_arg)"),
            };
            let _ = writeln!(s, "        {body}");
        }
        let _ = writeln!(s, "    return 0");
        s
    }

    /// The map writes that install the declared default and entries.
    pub fn writes(&self) -> Vec<Write3> {
        let mut out = vec![self.default_write(self.default)];
        let n = &self.name;
        match self.layout() {
            Layout::Hash => {
                let tys: Vec<Ty> = self.keys.iter().map(|(f, _)| f.ty).collect();
                let (offs, size) = key_layout(&tys);
                for e in &self.entries {
                    let mut k = vec![0u8; size as usize];
                    for (j, km) in e.keys.iter().enumerate() {
                        let b = bytes_le(tys[j], km.value);
                        k[offs[j] as usize..offs[j] as usize + b.len()].copy_from_slice(&b);
                    }
                    out.push((
                        format!("{n}_exact"),
                        k,
                        word(e.action, e.arg).to_le_bytes().to_vec(),
                    ));
                }
            }
            Layout::Lpm => {
                let order = self.order();
                let mut tys = vec![Ty::U32];
                tys.extend(order.iter().map(|&i| self.keys[i].0.ty));
                let (offs, size) = key_layout(&tys);
                for e in &self.entries {
                    let mut k = vec![0u8; size as usize];
                    let mut plen = 0u32;
                    for (slot, &i) in order.iter().enumerate() {
                        let (f, kind) = self.keys[i];
                        let at = offs[slot + 1] as usize;
                        let km = e.keys[i];
                        let b = if kind == MatchKind::Lpm {
                            plen = (at as u32 - 4) * 8 + km.prefix;
                            bytes_be(f.ty, km.value)
                        } else {
                            bytes_le(f.ty, km.value)
                        };
                        k[at..at + b.len()].copy_from_slice(&b);
                    }
                    k[..4].copy_from_slice(&plen.to_le_bytes());
                    out.push((
                        format!("{n}_lpm"),
                        k,
                        word(e.action, e.arg).to_le_bytes().to_vec(),
                    ));
                }
            }
            Layout::Ternary => {
                let count = self.entries.len() as u32;
                for (i, e) in self.entries.iter().enumerate() {
                    let idx = (i as u32).to_le_bytes().to_vec();
                    for (j, km) in e.keys.iter().enumerate() {
                        out.push((
                            format!("{n}_v{j}"),
                            idx.clone(),
                            (km.value & km.mask).to_le_bytes().to_vec(),
                        ));
                        out.push((
                            format!("{n}_m{j}"),
                            idx.clone(),
                            km.mask.to_le_bytes().to_vec(),
                        ));
                    }
                    // The first entry has the highest priority.
                    out.push((
                        format!("{n}_prio"),
                        idx.clone(),
                        (count - i as u32).to_le_bytes().to_vec(),
                    ));
                    out.push((
                        format!("{n}_act"),
                        idx,
                        word(e.action, e.arg).to_le_bytes().to_vec(),
                    ));
                }
                out.push((
                    format!("{n}_n"),
                    0u32.to_le_bytes().to_vec(),
                    count.to_le_bytes().to_vec(),
                ));
            }
        }
        out
    }
}

/// `x` (of type `ty`) with its bytes reversed, as an expression.
fn bswap(x: &str, ty: Ty) -> String {
    let n = ty.bytes();
    if n == 1 {
        return x.to_string();
    }
    let parts: Vec<String> = (0..n)
        .map(|i| format!("(((({x}) >> {}) & 0xff) << {})", 8 * i, 8 * (n - 1 - i)))
        .collect();
    format!("{ty}({})", parts.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_words_pack_index_and_argument() {
        assert_eq!(word(2, 7), (2 << 56) | 7);
        assert_eq!(word(1, u64::MAX), (1 << 56) | MAX_ARG);
    }

    #[test]
    fn bswap_reverses_bytes() {
        assert_eq!(bswap("x", Ty::U8), "x");
        assert!(bswap("x", Ty::U16).starts_with("u16("));
    }
}

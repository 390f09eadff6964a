//! Map keys and values as people write and read them: [`parse`] turns
//! text into the map's bytes, [`show`] bytes into text and JSON, both
//! by the [`ValueType`] (docs/abi.md "Map keys and values").

use super::types::{Field, ValueType};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, Ipv6Addr};

/// All ones: a time that never comes (`NF_SET_NO_EXPIRY`).
pub const NEVER: u64 = u64::MAX;

/// Text that is not a value of its type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a {want}: {hint}")]
pub struct ParseError {
    pub text: String,
    /// The type wanted ([`ValueType::describe`]).
    pub want: String,
    /// What would be accepted.
    pub hint: String,
}

fn err(text: &str, ty: &ValueType, hint: impl Into<String>) -> ParseError {
    ParseError {
        text: text.to_string(),
        want: ty.describe(),
        hint: hint.into(),
    }
}

/// `text` as the bytes of a value of type `ty`. Hex bytes of exactly the
/// type's size are accepted for every type.
pub fn parse(ty: &ValueType, text: &str) -> Result<Vec<u8>, ParseError> {
    let t = text.trim();
    match parse_typed(ty, t) {
        Ok(b) => Ok(b),
        Err(e) => hex_bytes(t, ty.size() as usize).ok_or(e),
    }
}

fn parse_typed(ty: &ValueType, t: &str) -> Result<Vec<u8>, ParseError> {
    let n = ty.size() as usize;
    match ty {
        ValueType::Int { size, signed } => {
            let v = int_text(t)
                .or_else(|| (*size >= 4).then(|| ipv4_number(t)).flatten())
                .ok_or_else(|| err(t, ty, int_hint(n, *size >= 4)))?;
            fit(v, *size, *signed)
                .map(|v| le_bytes(v, n))
                .ok_or_else(|| err(t, ty, format!("out of range for {}", ty.describe())))
        }
        ValueType::BeInt { size } => {
            if let (4, Ok(a)) = (size, t.parse::<Ipv4Addr>()) {
                return Ok(a.octets().to_vec());
            }
            let v = int_text(t).ok_or_else(|| err(t, ty, int_hint(n, *size == 4)))?;
            let v = fit(v, *size, false).ok_or_else(|| err(t, ty, "out of range"))?;
            Ok(be_bytes(v, n))
        }
        ValueType::Port { be } => {
            let v = int_text(t)
                .and_then(|v| fit(v, 2, false))
                .ok_or_else(|| err(t, ty, "a number 0..65535"))?;
            Ok(if *be { be_bytes(v, 2) } else { le_bytes(v, 2) })
        }
        ValueType::Ipv4 => t
            .parse::<Ipv4Addr>()
            .map(|a| a.octets().to_vec())
            .map_err(|_| err(t, ty, "a dotted IPv4 address or 4 hex bytes")),
        ValueType::Ipv6 => parse_ipv6(t).ok_or_else(|| {
            err(
                t,
                ty,
                "an IPv6 address, an IPv4 address (stored IPv4-mapped) or 16 hex bytes",
            )
        }),
        ValueType::Time { .. } => {
            if t.eq_ignore_ascii_case("never") {
                return Ok(NEVER.to_le_bytes().to_vec());
            }
            let v = int_text(t)
                .and_then(|v| fit(v, 8, false))
                .ok_or_else(|| err(t, ty, "ns on CLOCK_MONOTONIC, or `never`"))?;
            Ok(le_bytes(v, 8))
        }
        ValueType::Bytes { size } => Err(err(
            t,
            ty,
            format!("{size} hex bytes (`0a0b..` or `0a:0b:..`)"),
        )),
        ValueType::Tuple { size, fields } => parse_tuple(ty, *size, fields, t),
        ValueType::Struct { size, fields, .. } => parse_struct(ty, *size, fields, t),
    }
}

fn int_hint(n: usize, addr: bool) -> String {
    let a = if addr { ", an IPv4 address" } else { "" };
    format!("give an integer (decimal or 0x..){a} or {n} hex bytes as aa:bb:..")
}

fn parse_ipv6(t: &str) -> Option<Vec<u8>> {
    if let Ok(a) = t.parse::<Ipv4Addr>() {
        return Some(a.to_ipv6_mapped().octets().to_vec());
    }
    t.parse::<Ipv6Addr>().ok().map(|a| a.octets().to_vec())
}

/// `(a, b)` or `a,b`: each field parsed by its own type.
fn parse_tuple(
    ty: &ValueType,
    size: u32,
    fields: &[Field],
    t: &str,
) -> Result<Vec<u8>, ParseError> {
    let inner = t
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(t);
    let parts = split_top(inner);
    if parts.len() != fields.len() {
        return Err(err(
            t,
            ty,
            format!("give {} values as (a, b, ..)", fields.len()),
        ));
    }
    let mut out = vec![0u8; size as usize];
    for (f, p) in fields.iter().zip(parts) {
        place(&mut out, f, &parse(&f.ty, p)?);
    }
    Ok(out)
}

/// `field=value,...` (fields left out are zero); a struct of one field
/// also takes the bare value.
fn parse_struct(
    ty: &ValueType,
    size: u32,
    fields: &[Field],
    t: &str,
) -> Result<Vec<u8>, ParseError> {
    let mut out = vec![0u8; size as usize];
    if let ([f], false) = (fields, t.contains('=')) {
        place(&mut out, f, &parse(&f.ty, t)?);
        return Ok(out);
    }
    let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
    let hint = || format!("give field=value,... with fields {}", names.join(", "));
    for part in split_top(t) {
        let (name, v) = part.split_once('=').ok_or_else(|| err(t, ty, hint()))?;
        let f = fields
            .iter()
            .find(|f| f.name == name.trim())
            .ok_or_else(|| err(t, ty, hint()))?;
        place(&mut out, f, &parse(&f.ty, v)?);
    }
    Ok(out)
}

fn place(out: &mut [u8], f: &Field, b: &[u8]) {
    let at = f.offset as usize;
    if let Some(d) = out.get_mut(at..at + b.len()) {
        d.copy_from_slice(b);
    }
}

/// Splits at commas outside parentheses.
fn split_top(t: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
    for (i, c) in t.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(t[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = t[start..].trim();
    if !last.is_empty() || !out.is_empty() {
        out.push(last);
    }
    out
}

/// A decimal, `0x` hex or `0b` binary integer, maybe negative, `_` allowed.
fn int_text(t: &str) -> Option<i128> {
    let t = t.replace('_', "");
    let (neg, m) = match t.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, t.as_str()),
    };
    let v = if let Some(h) = m.strip_prefix("0x").or_else(|| m.strip_prefix("0X")) {
        i128::from_str_radix(h, 16).ok()?
    } else if let Some(b) = m.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()?
    } else if !m.is_empty() && m.bytes().all(|c| c.is_ascii_digit()) {
        m.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -v } else { v })
}

/// A dotted IPv4 address as its numeric value (198.18.0.1 -> 0xC6120001),
/// what `Packet.read_u32` gives for it.
fn ipv4_number(t: &str) -> Option<i128> {
    t.parse::<Ipv4Addr>().ok().map(|a| i128::from(u32::from(a)))
}

/// `v` as the bit pattern of a `size`-byte integer, if it fits.
fn fit(v: i128, size: u32, signed: bool) -> Option<u64> {
    let bits = size * 8;
    let ok = if signed {
        v >= -(1i128 << (bits - 1)) && v < (1i128 << bits)
    } else {
        v >= 0 && v < (1i128 << bits)
    };
    ok.then_some(v as u64)
}

fn le_bytes(v: u64, n: usize) -> Vec<u8> {
    v.to_le_bytes().iter().take(n).copied().collect()
}

fn be_bytes(v: u64, n: usize) -> Vec<u8> {
    let mut b = le_bytes(v, n);
    b.reverse();
    b
}

/// Hex bytes (`0a0b`, `0x0a0b`, `0a:0b`, `0a 0b`) of exactly `n` bytes.
fn hex_bytes(t: &str, n: usize) -> Option<Vec<u8>> {
    let h: String = t
        .chars()
        .filter(|c| !matches!(c, ' ' | ':' | '-'))
        .collect();
    let h = h.strip_prefix("0x").unwrap_or(&h);
    let b = decode_hex(h)?;
    (b.len() == n).then_some(b)
}

/// Decodes an even number of hex digits.
pub fn decode_hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) || !h.is_ascii() {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

/// Bytes as lowercase hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Up to 8 little-endian bytes as an integer.
pub fn le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(a)
}

fn sign_extend(v: u64, size: u32) -> i64 {
    let shift = 64 - size.min(8) * 8;
    ((v << shift) as i64) >> shift
}

/// `b` (a value of type `ty`) as text and JSON; times relative to
/// `now_ns` when given (CLOCK_MONOTONIC, or a VM run's last packet).
pub fn show(ty: &ValueType, b: &[u8], now_ns: Option<u64>) -> (String, Value) {
    if b.len() != ty.size() as usize {
        return (hex(b), json!(hex(b)));
    }
    match ty {
        ValueType::Int { size, signed: true } => {
            let v = sign_extend(le(b), *size);
            (v.to_string(), json!(v))
        }
        ValueType::Int { .. } | ValueType::Port { be: false } => {
            let v = le(b);
            (v.to_string(), json!(v))
        }
        ValueType::BeInt { .. } | ValueType::Port { be: true } => {
            let v = b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x));
            (v.to_string(), json!(v))
        }
        ValueType::Ipv4 | ValueType::Ipv6 => {
            let a = address(b);
            (a.clone(), json!(a))
        }
        ValueType::Time { expiry } => show_time(le(b), *expiry, now_ns),
        ValueType::Bytes { .. } => (hex(b), json!(hex(b))),
        ValueType::Tuple { fields, .. } => {
            let (t, j): (Vec<String>, Vec<Value>) =
                fields.iter().map(|f| show_field(f, b, now_ns)).unzip();
            (format!("({})", t.join(", ")), Value::Array(j))
        }
        ValueType::Struct { fields, .. } => match fields.as_slice() {
            [one] => show_field(one, b, now_ns),
            _ => {
                let mut text = Vec::new();
                let mut obj = serde_json::Map::new();
                for f in fields {
                    let (t, j) = show_field(f, b, now_ns);
                    text.push(format!("{}={t}", f.name));
                    obj.insert(f.name.clone(), j);
                }
                (text.join(", "), Value::Object(obj))
            }
        },
    }
}

fn show_field(f: &Field, b: &[u8], now_ns: Option<u64>) -> (String, Value) {
    let at = f.offset as usize;
    let part = b.get(at..at + f.ty.size() as usize).unwrap_or_default();
    show(&f.ty, part, now_ns)
}

/// A 4- or 16-byte address; IPv4-mapped IPv6 shows as IPv4.
fn address(b: &[u8]) -> String {
    if let Ok(a) = <[u8; 4]>::try_from(b) {
        return Ipv4Addr::from(a).to_string();
    }
    match <[u8; 16]>::try_from(b).map(Ipv6Addr::from) {
        Ok(a) => a
            .to_ipv4_mapped()
            .map_or_else(|| a.to_string(), |v4| v4.to_string()),
        Err(_) => hex(b),
    }
}

/// `expires in 12.3 s`, `expired 4.0 s ago`, `never` (expiries);
/// `in 1.0 s`, `4.0 s ago` (other times). JSON: raw ns and the
/// seconds from now (negative: past).
fn show_time(ns: u64, expiry: bool, now_ns: Option<u64>) -> (String, Value) {
    if ns == NEVER {
        return ("never".into(), json!({"ns": ns, "never": true}));
    }
    let Some(now) = now_ns else {
        return (format!("{ns} ns"), json!({ "ns": ns }));
    };
    let d = (i128::from(ns) - i128::from(now)) as f64 / 1e9;
    let rounded = (d * 1000.0).round() / 1000.0 + 0.0;
    let a = d.abs();
    let text = match (expiry, d > 0.0) {
        (true, true) => format!("expires in {a:.1} s"),
        (true, false) => format!("expired {a:.1} s ago"),
        (false, true) => format!("in {a:.1} s"),
        (false, false) => format!("{a:.1} s ago"),
    };
    (text, json!({"ns": ns, "in_s": rounded}))
}

/// A value read from a map: one copy, or one per CPU. Integers' per-CPU
/// copies are summed in the text, listed in the JSON.
pub fn show_values(ty: &ValueType, vals: &[Vec<u8>], now_ns: Option<u64>) -> (String, Value) {
    if let [one] = vals {
        return show(ty, one, now_ns);
    }
    if let ValueType::Int { .. } = ty {
        let per: Vec<u64> = vals.iter().map(|v| le(v)).collect();
        let sum = per.iter().fold(0u64, |a, b| a.wrapping_add(*b));
        return (
            format!("{sum} (per CPU {per:?})"),
            json!({"total": sum, "per_cpu": per}),
        );
    }
    let (t, j): (Vec<String>, Vec<Value>) = vals.iter().map(|v| show(ty, v, now_ns)).unzip();
    (
        format!("per CPU {}", t.join(" | ")),
        json!({ "per_cpu": j }),
    )
}

/// A sort key for values of `ty`: integers by number, tuples and
/// structs field by field, the rest by bytes.
pub fn sort_key(ty: &ValueType, b: &[u8]) -> Vec<u64> {
    match ty {
        ValueType::Int { size, signed: true } => {
            vec![(sign_extend(le(b), *size) as u64) ^ (1 << 63)]
        }
        ValueType::Int { .. } | ValueType::Port { be: false } | ValueType::Time { .. } => {
            vec![le(b)]
        }
        ValueType::BeInt { .. } | ValueType::Port { be: true } => {
            vec![b.iter().fold(0u64, |a, &x| (a << 8) | u64::from(x))]
        }
        ValueType::Tuple { fields, .. } | ValueType::Struct { fields, .. } => fields
            .iter()
            .flat_map(|f| {
                let at = f.offset as usize;
                sort_key(
                    &f.ty,
                    b.get(at..at + f.ty.size() as usize).unwrap_or_default(),
                )
            })
            .collect(),
        _ => b.iter().map(|&x| u64::from(x)).collect(),
    }
}

/// Per-CPU copies of an integer added up into one value of its size
/// (`None` for other types).
pub fn sum(ty: &ValueType, vals: &[Vec<u8>]) -> Option<Vec<u8>> {
    let ValueType::Int { size, .. } = ty else {
        return None;
    };
    let total = vals.iter().fold(0u64, |a, v| a.wrapping_add(le(v)));
    Some(le_bytes(total, *size as usize))
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;

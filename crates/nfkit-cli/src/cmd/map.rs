//! `nfkit map list|dump|get|set|delete`: the maps of deployed chains
//! (found through the state file, opened from their pins). Keys and
//! values are written as people write them: integers (decimal or 0x..,
//! little-endian in the map, as the programs store them), IPv4/IPv6
//! addresses (network order, for 4- and 16-byte types whose BTF name
//! says so, or when typed as an address), else hex bytes.

use anyhow::{anyhow, bail};
use nfkit_abi::AttachPoint as Hook;
use nfkit_kernel::deploy::{self, MapRecord, Paths};
use serde_json::{json, Value};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List the deployed maps.
    List(ListArgs),
    /// Print every entry of a map.
    Dump(MapArgs),
    /// Print the value of one key.
    Get(KeyArgs),
    /// Set one key to a value.
    Set(SetArgs),
    /// Delete one key.
    Delete(KeyArgs),
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Only maps deployed on this interface.
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// Only maps deployed at this hook.
    #[arg(long, value_name = "HOOK")]
    hook: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct MapArgs {
    /// The map's name (as in the script).
    map: String,
    /// The interface, when the map is deployed on several.
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    /// The hook (xdp, xdp-generic, tc-ingress, tc-egress), when the
    /// map is deployed at several on one interface.
    #[arg(long, value_name = "HOOK")]
    hook: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct KeyArgs {
    #[command(flatten)]
    map: MapArgs,
    /// The key: an integer, an IP address, or hex bytes.
    key: String,
}

#[derive(clap::Args)]
pub struct SetArgs {
    #[command(flatten)]
    map: MapArgs,
    key: String,
    /// The value: an integer, an IP address, or hex bytes.
    value: String,
}

/// How bytes of one type are read and written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Int,
    Ipv4,
    Ipv6,
    Bytes,
}

fn shape(size: u32, btf: Option<&str>) -> Shape {
    let name = btf.unwrap_or("").to_ascii_lowercase();
    let addr = name.contains("addr") || name.contains("ip");
    match size {
        4 if addr => Shape::Ipv4,
        16 if addr => Shape::Ipv6,
        1 | 2 | 4 | 8 if !name.starts_with("struct") && !name.contains('[') => Shape::Int,
        _ => Shape::Bytes,
    }
}

/// Parses `text` into `size` bytes of type `btf`.
fn parse(text: &str, size: u32, btf: Option<&str>, what: &str) -> anyhow::Result<Vec<u8>> {
    let n = size as usize;
    let t = text.trim();
    if let (4, Ok(a)) = (n, t.parse::<Ipv4Addr>()) {
        return Ok(a.octets().to_vec());
    }
    if let (16, Ok(a)) = (n, t.parse::<Ipv6Addr>()) {
        return Ok(a.octets().to_vec());
    }
    if shape(size, btf) == Shape::Int || (matches!(n, 1 | 2 | 4 | 8) && !t.contains(':')) {
        let v = if let Some(h) = t.strip_prefix("0x") {
            u64::from_str_radix(h, 16)
        } else {
            t.parse::<u64>()
        };
        if let Ok(v) = v {
            if n < 8 && v >> (8 * n) != 0 {
                bail!("{what} `{t}` does not fit in {n} bytes");
            }
            return Ok(v.to_le_bytes().get(..n).unwrap_or_default().to_vec());
        }
    }
    let hex: String = t
        .chars()
        .filter(|c| !matches!(c, ' ' | ':' | '-'))
        .collect();
    let hex = hex.strip_prefix("0x").unwrap_or(&hex);
    let bytes = decode_hex(hex)
        .ok_or_else(|| anyhow!("{what} `{t}`: not an integer, an IP address or hex bytes"))?;
    if bytes.len() != n {
        bail!("{what} `{t}` has {} bytes, the map's take {n}", bytes.len());
    }
    Ok(bytes)
}

pub fn decode_hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) || !h.is_ascii() {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| h.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()))
        .collect()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn int_of(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    for (d, s) in v.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(v)
}

/// `b` as text and as JSON.
fn show(b: &[u8], btf: Option<&str>) -> (String, Value) {
    match shape(b.len() as u32, btf) {
        Shape::Int => {
            let v = int_of(b);
            (v.to_string(), json!(v))
        }
        Shape::Ipv4 => {
            let a = <[u8; 4]>::try_from(b).map(Ipv4Addr::from);
            a.map_or_else(|_| (hex(b), json!(hex(b))), |a| (a.to_string(), json!(a)))
        }
        Shape::Ipv6 => {
            let a = <[u8; 16]>::try_from(b).map(Ipv6Addr::from);
            a.map_or_else(|_| (hex(b), json!(hex(b))), |a| (a.to_string(), json!(a)))
        }
        Shape::Bytes => (hex(b), json!(hex(b))),
    }
}

/// One value (per-CPU values summed when they are integers).
fn show_values(vals: &[Vec<u8>], rec: &MapRecord) -> (String, Value) {
    let t = rec.value_type.as_deref();
    if let [one] = vals {
        return show(one, t);
    }
    if shape(rec.value_size, t) == Shape::Int {
        let per: Vec<u64> = vals.iter().map(|v| int_of(v)).collect();
        let sum: u64 = per.iter().fold(0u64, |a, b| a.wrapping_add(*b));
        return (
            format!("{sum} (per CPU {per:?})"),
            json!({"total": sum, "per_cpu": per}),
        );
    }
    let per: Vec<String> = vals.iter().map(|v| hex(v)).collect();
    (
        format!("per CPU {}", per.join(" ")),
        json!({ "per_cpu": per }),
    )
}

/// The deployed map `a` names (by name, device and hook).
fn find(paths: &Paths, a: &MapArgs) -> anyhow::Result<(MapRecord, nfkit_kernel::KMap)> {
    let hook = a.hook.as_deref().map(str::parse::<Hook>).transpose()?;
    let (_, rec, m) = deploy::find_map_at(paths, &a.map, a.dev.as_deref(), hook)?;
    Ok((rec, m))
}

fn values(m: &nfkit_kernel::KMap, key: &[u8]) -> anyhow::Result<Option<Vec<Vec<u8>>>> {
    Ok(if m.is_percpu() {
        m.lookup_percpu(key)?
    } else {
        m.lookup(key)?.map(|v| vec![v])
    })
}

pub fn run(c: Command) -> anyhow::Result<ExitCode> {
    let paths = Paths::from_env();
    match c {
        Command::List(a) => {
            let st = deploy::status(&paths)?;
            let hook = a.hook.as_deref().map(str::parse::<Hook>).transpose()?;
            let mut rows = Vec::new();
            for s in st.iter().filter(|s| {
                a.dev.as_ref().is_none_or(|d| *d == s.deployment.dev)
                    && hook.is_none_or(|h| h == s.deployment.hook)
            }) {
                for m in &s.deployment.maps {
                    rows.push(json!({
                        "dev": s.deployment.dev, "hook": s.deployment.hook.name(),
                        "name": m.name, "type": m.map_type, "key_size": m.key_size,
                        "value_size": m.value_size, "max_entries": m.max_entries,
                        "key_type": m.key_type, "value_type": m.value_type,
                    }));
                    if !a.json {
                        println!(
                            "{} {} {} {} key {} ({} B) value {} ({} B) max {}",
                            s.deployment.dev,
                            s.deployment.hook.name(),
                            m.name,
                            m.map_type,
                            m.key_type.as_deref().unwrap_or("?"),
                            m.key_size,
                            m.value_type.as_deref().unwrap_or("?"),
                            m.value_size,
                            m.max_entries
                        );
                    }
                }
            }
            if a.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
        }
        Command::Dump(a) => {
            let (rec, m) = find(&paths, &a)?;
            let mut rows = Vec::new();
            for k in m.keys() {
                let Some(v) = values(&m, &k)? else { continue };
                let (kt, kj) = show(&k, rec.key_type.as_deref());
                let (vt, vj) = show_values(&v, &rec);
                if a.json {
                    rows.push(json!({"key": kj, "value": vj}));
                } else {
                    println!("{kt}: {vt}");
                }
            }
            if a.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
        }
        Command::Get(a) => {
            let (rec, m) = find(&paths, &a.map)?;
            let k = parse(&a.key, rec.key_size, rec.key_type.as_deref(), "key")?;
            let Some(v) = values(&m, &k)? else {
                eprintln!("error: map `{}`: no key {}", a.map.map, a.key);
                return Ok(ExitCode::from(1));
            };
            let (vt, vj) = show_values(&v, &rec);
            if a.map.json {
                println!(
                    "{}",
                    json!({"key": show(&k, rec.key_type.as_deref()).1, "value": vj})
                );
            } else {
                println!("{vt}");
            }
        }
        Command::Set(a) => {
            let (rec, m) = find(&paths, &a.map)?;
            let k = parse(&a.key, rec.key_size, rec.key_type.as_deref(), "key")?;
            let v = parse(&a.value, rec.value_size, rec.value_type.as_deref(), "value")?;
            if m.is_percpu() {
                let n = nfkit_kernel::possible_cpus()?;
                m.update_percpu(&k, &vec![v; n], 0)?;
            } else {
                m.update(&k, &v, 0)?;
            }
        }
        Command::Delete(a) => {
            let (rec, m) = find(&paths, &a.map)?;
            let k = parse(&a.key, rec.key_size, rec.key_type.as_deref(), "key")?;
            m.delete(&k)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_people_write_them() {
        assert_eq!(parse("53", 2, Some("__u16"), "k").unwrap(), vec![53, 0]);
        assert_eq!(parse("0x1234", 2, None, "k").unwrap(), vec![0x34, 0x12]);
        assert_eq!(
            parse("198.18.0.1", 4, Some("__u32"), "k").unwrap(),
            vec![198, 18, 0, 1]
        );
        assert_eq!(
            parse("aa:bb:cc", 3, None, "k").unwrap(),
            vec![0xaa, 0xbb, 0xcc]
        );
        assert!(parse("70000", 2, None, "k").is_err());
        assert!(parse("zz", 3, None, "k").is_err());
        assert_eq!(show(&[198, 18, 0, 1], Some("ip4_addr")).0, "198.18.0.1");
        assert_eq!(show(&[5, 1], Some("__u16")).0, "261");
    }
}

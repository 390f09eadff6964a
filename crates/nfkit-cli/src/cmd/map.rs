//! `nfkit map list|dump|get|set|delete`: the maps of deployed chains
//! (found through the state file, opened from their pins), read and
//! written through nfkit-control's typed map access: keys and values
//! follow docs/abi.md "Map keys and values".

use anyhow::anyhow;
use nfkit_abi::AttachPoint as Hook;
use nfkit_control::maps::{self, access, DumpOptions, KernelMap, MapError, Row};
use nfkit_kernel::deploy::{self, Paths};
use serde_json::{json, Value};
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

/// The deployed map `a` names (by name, device and hook).
fn find(paths: &Paths, a: &MapArgs) -> anyhow::Result<KernelMap> {
    let hook = a.hook.as_deref().map(str::parse::<Hook>).transpose()?;
    Ok(KernelMap::find(paths, &a.map, a.dev.as_deref(), hook)?)
}

/// `map `NAME`: ERROR`, the way every map error is told.
fn in_map(name: &str) -> impl FnOnce(MapError) -> anyhow::Error + '_ {
    move |e| anyhow!("map `{name}`: {e}")
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
                    let (kt, vt) = maps::kernel::record_types(m);
                    rows.push(json!({
                        "dev": s.deployment.dev, "hook": s.deployment.hook.name(),
                        "name": m.name, "type": m.map_type, "key_size": m.key_size,
                        "value_size": m.value_size, "max_entries": m.max_entries,
                        "key_type": m.key_type, "value_type": m.value_type,
                        "key": kt, "value": vt,
                    }));
                    if !a.json {
                        println!(
                            "{} {} {} {} key {} ({} B) value {} ({} B) max {}",
                            s.deployment.dev,
                            s.deployment.hook.name(),
                            m.name,
                            m.map_type,
                            kt.describe(),
                            m.key_size,
                            vt.describe(),
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
            let m = find(&paths, &a)?;
            let rows = maps::dump(&m, DumpOptions::default()).map_err(in_map(&a.map))?;
            if a.json {
                let rows: Vec<Value> = rows.iter().map(Row::json).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for r in rows {
                    println!("{}", r.text());
                }
            }
        }
        Command::Get(a) => {
            let m = find(&paths, &a.map)?;
            let r = access::get(&m, &a.key).map_err(in_map(&a.map.map))?;
            if a.map.json {
                println!("{}", r.json());
            } else {
                println!("{}", r.value_text);
            }
        }
        Command::Set(a) => {
            let m = find(&paths, &a.map)?;
            access::set(&m, &a.key, &a.value).map_err(in_map(&a.map.map))?;
        }
        Command::Delete(a) => {
            let m = find(&paths, &a.map)?;
            access::delete(&m, &a.key).map_err(in_map(&a.map.map))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

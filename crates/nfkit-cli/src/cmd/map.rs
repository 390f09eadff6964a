//! `nfkit map list|dump|get|set|delete`: the maps of deployed chains
//! (found through the state file, opened from their pins), read and
//! written through nfkit-control's typed map access: keys and values
//! follow docs/abi.md "Map keys and values". With nfkitd running (see
//! [`super::daemon`]) they go through its MapService, with the same
//! output.

use anyhow::anyhow;
use nfkit_abi::AttachPoint as Hook;
use nfkit_control::maps::{self, access, DumpOptions, KernelMap, MapError, Row};
use nfkit_kernel::deploy::{self, Paths};
use serde_json::{json, Value};
use std::process::ExitCode;

#[path = "map_switch.rs"]
pub mod map_switch;

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
    /// Print every entry, then each change (`+ key: value`, `- key`).
    Watch(WatchArgs),
}

#[derive(clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    map: MapArgs,
    /// Check every MS milliseconds (100 to 60000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(100..=60_000))]
    interval: u32,
    /// Stop after N reports, the first included (default: never).
    #[arg(long, value_name = "N")]
    count: Option<u32>,
}

/// One report of `map watch`: entries set (key, value text and JSON)
/// and keys removed.
struct Change {
    initial: bool,
    set: Vec<(String, String, Value, Value)>,
    removed: Vec<(String, Value)>,
}

fn print_change(c: &Change, json: bool) {
    if json {
        let set: Vec<Value> = c
            .set
            .iter()
            .map(|(_, _, k, v)| json!({"key": k, "value": v}))
            .collect();
        let removed: Vec<&Value> = c.removed.iter().map(|(_, k)| k).collect();
        println!(
            "{}",
            json!({"initial": c.initial, "set": set, "removed": removed})
        );
        return;
    }
    for (k, v, _, _) in &c.set {
        println!("{}{k}: {v}", if c.initial { "" } else { "+ " });
    }
    for (k, _) in &c.removed {
        println!("- {k}");
    }
    if c.initial {
        println!("--");
    }
}

/// `map watch` directly: the map dumped every interval, changes printed.
fn watch_direct(paths: &Paths, a: &WatchArgs) -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    let m = find(paths, &a.map)?;
    let mut last: Option<BTreeMap<Vec<u8>, Row>> = None;
    let mut sent = 0u32;
    loop {
        let now: BTreeMap<Vec<u8>, Row> = maps::dump(&m, DumpOptions::default())
            .map_err(in_map(&a.map.map))?
            .into_iter()
            .map(|r| (r.key.clone(), r))
            .collect();
        let row = |r: &Row| {
            (
                r.key_text.clone(),
                r.value_text.clone(),
                r.key_json.clone(),
                r.value_json.clone(),
            )
        };
        let c = match &last {
            None => Some(Change {
                initial: true,
                set: now.values().map(row).collect(),
                removed: Vec::new(),
            }),
            Some(old) => {
                let set: Vec<_> = now
                    .iter()
                    .filter(|(k, r)| old.get(*k).is_none_or(|o| o.values != r.values))
                    .map(|(_, r)| row(r))
                    .collect();
                let removed: Vec<_> = old
                    .iter()
                    .filter(|(k, _)| !now.contains_key(*k))
                    .map(|(_, r)| (r.key_text.clone(), r.key_json.clone()))
                    .collect();
                (!set.is_empty() || !removed.is_empty()).then_some(Change {
                    initial: false,
                    set,
                    removed,
                })
            }
        };
        last = Some(now);
        if let Some(c) = c {
            print_change(&c, a.map.json);
            sent += 1;
            if a.count.is_some_and(|n| sent >= n) {
                return Ok(());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(a.interval.into()));
    }
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
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
    #[command(flatten)]
    switch: map_switch::SwitchArg,
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
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
    #[command(flatten)]
    switch: map_switch::SwitchArg,
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
    if let Some(code) = map_switch::route(&c)? {
        return Ok(code);
    }
    let daemon = match &c {
        Command::List(a) => &a.daemon,
        Command::Dump(a) => &a.daemon,
        Command::Get(a) | Command::Delete(a) => &a.map.daemon,
        Command::Set(a) => &a.map.daemon,
        Command::Watch(a) => &a.map.daemon,
    };
    if let Some(client) = daemon.client()? {
        return via_daemon(&client, c);
    }
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
        Command::Watch(a) => watch_direct(&paths, &a)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The API's reference to the map `a` names.
fn map_ref(a: &MapArgs) -> anyhow::Result<nfkit_daemon::proto::MapRef> {
    let hook = a.hook.as_deref().map(str::parse::<Hook>).transpose()?;
    Ok(nfkit_daemon::proto::MapRef {
        name: a.map.clone(),
        dev: a.dev.clone().unwrap_or_default(),
        attach: hook.map_or(0, nfkit_daemon::validate::attach_wire),
    })
}

/// JSON text from a reply, as a value.
fn value(text: &str) -> anyhow::Result<Value> {
    Ok(serde_json::from_str(text)?)
}

/// `nfkit map ...` through nfkitd, printing what the direct path prints.
fn via_daemon(c: &nfkit_daemon::Client, cmd: Command) -> anyhow::Result<ExitCode> {
    use nfkit_daemon::proto::{self, map_service_client::MapServiceClient};
    use nfkit_daemon::validate::attach_wire;
    let err = super::daemon::status_error;
    let mut m = MapServiceClient::new(c.channel());
    match cmd {
        Command::List(a) => {
            let hook = a.hook.as_deref().map(str::parse::<Hook>).transpose()?;
            let r = c
                .block_on(m.list_maps(proto::ListMapsRequest {
                    dev: a.dev.clone().unwrap_or_default(),
                    attach: hook.map_or(0, attach_wire),
                }))
                .map_err(err)?
                .into_inner();
            let mut rows = Vec::new();
            for i in &r.maps {
                let kt: maps::ValueType = serde_json::from_str(&i.key_json)?;
                let vt: maps::ValueType = serde_json::from_str(&i.value_json)?;
                let hook_name = nfkit_daemon::validate::attach("attach", i.attach)
                    .ok()
                    .flatten()
                    .map_or("?", |h| h.name());
                let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
                rows.push(json!({
                    "dev": i.dev, "hook": hook_name,
                    "name": i.name, "type": i.map_type, "key_size": i.key_size,
                    "value_size": i.value_size, "max_entries": i.max_entries,
                    "key_type": opt(&i.key_type), "value_type": opt(&i.value_type),
                    "key": kt, "value": vt,
                }));
                if !a.json {
                    println!(
                        "{} {} {} {} key {} ({} B) value {} ({} B) max {}",
                        i.dev,
                        hook_name,
                        i.name,
                        i.map_type,
                        kt.describe(),
                        i.key_size,
                        vt.describe(),
                        i.value_size,
                        i.max_entries
                    );
                }
            }
            if a.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            }
        }
        Command::Dump(a) => {
            let r = c
                .block_on(m.dump_map(proto::DumpMapRequest {
                    map: Some(map_ref(&a)?),
                }))
                .map_err(err)?
                .into_inner();
            if a.json {
                let rows = r
                    .entries
                    .iter()
                    .map(|e| {
                        Ok(json!({"key": value(&e.key_json)?, "value": value(&e.value_json)?}))
                    })
                    .collect::<anyhow::Result<Vec<Value>>>()?;
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for e in &r.entries {
                    println!("{}: {}", e.key_text, e.value_text);
                }
            }
        }
        Command::Get(a) => {
            let e = c
                .block_on(m.get_entry(proto::GetEntryRequest {
                    map: Some(map_ref(&a.map)?),
                    key: a.key.clone(),
                }))
                .map_err(err)?
                .into_inner();
            if a.map.json {
                println!(
                    "{}",
                    json!({"key": value(&e.key_json)?, "value": value(&e.value_json)?})
                );
            } else {
                println!("{}", e.value_text);
            }
        }
        Command::Set(a) => {
            c.block_on(m.set_entry(proto::SetEntryRequest {
                map: Some(map_ref(&a.map)?),
                key: a.key.clone(),
                value: a.value.clone(),
            }))
            .map_err(err)?;
        }
        Command::Delete(a) => {
            c.block_on(m.delete_entry(proto::DeleteEntryRequest {
                map: Some(map_ref(&a.map)?),
                key: a.key.clone(),
            }))
            .map_err(err)?;
        }
        Command::Watch(a) => {
            let mut st = c
                .block_on(m.watch_map(proto::WatchMapRequest {
                    map: Some(map_ref(&a.map)?),
                    interval_ms: a.interval,
                    count: a.count.unwrap_or(0),
                }))
                .map_err(err)?
                .into_inner();
            while let Some(ch) = c.block_on(st.message()).map_err(err)? {
                let set = ch
                    .set
                    .iter()
                    .map(|e| {
                        Ok((
                            e.key_text.clone(),
                            e.value_text.clone(),
                            value(&e.key_json)?,
                            value(&e.value_json)?,
                        ))
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                let removed = ch
                    .removed
                    .iter()
                    .map(|e| Ok((e.key_text.clone(), value(&e.key_json)?)))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                print_change(
                    &Change {
                        initial: ch.initial,
                        set,
                        removed,
                    },
                    a.map.json,
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

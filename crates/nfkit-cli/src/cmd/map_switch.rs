//! `nfkit map list|dump|get|set|delete --switch NAME`: the maps of a
//! running switch's chain (its running version), through the switch's
//! control socket (`switch_ctl`): `{"op":"map_list"}`,
//! `{"op":"map_dump","map":M}`, `{"op":"map_get","map":M,"key":K}`,
//! `{"op":"map_set","map":M,"key":K,"value":V}`,
//! `{"op":"map_delete","map":M,"key":K}`, keys and values as text
//! (docs/abi.md "Map keys and values"). [`answer`] is the switch's side.
//!
//! A switch started with `--key` takes reads, and refuses writes here
//! (counted as unauthenticated refusals, like a plain reload): writes
//! then go through `nfkit switch update --set/--delete`, signed; the
//! refusal gives the command with the key and value as hex bytes.

use super::{Command, MapArgs};
use anyhow::bail;
use nfkit_control::maps::{text, Row};
use nfkit_switch::Switch;
use serde_json::{json, Value};
use std::process::ExitCode;

/// `--switch NAME` of `nfkit map` commands.
#[derive(clap::Args, Default)]
pub struct SwitchArg {
    /// A running switch's maps (`nfkit switch run --name NAME`) instead
    /// of deployed ones.
    #[arg(long = "switch", value_name = "NAME", conflicts_with_all = ["dev", "hook"])]
    pub switch: Option<String>,
}

/// Runs `c` on the switch it names; `None` without `--switch`.
pub fn route(c: &Command) -> anyhow::Result<Option<ExitCode>> {
    let name = match c {
        Command::List(a) => a.switch.switch.as_deref(),
        Command::Dump(a) => a.switch.switch.as_deref(),
        Command::Get(a) | Command::Delete(a) => a.map.switch.switch.as_deref(),
        Command::Set(a) => a.map.switch.switch.as_deref(),
        Command::Watch(a) => a.map.switch.switch.as_deref(),
    };
    let Some(name) = name else {
        return Ok(None);
    };
    let daemon = match c {
        Command::List(a) => &a.daemon,
        Command::Dump(a) => &a.daemon,
        Command::Get(a) | Command::Delete(a) => &a.map.daemon,
        Command::Set(a) => &a.map.daemon,
        Command::Watch(a) => &a.map.daemon,
    }
    .client()?;
    let ask = |req: Value| -> anyhow::Result<Value> {
        let v = crate::cmd::switch_via::request(daemon.as_ref(), name, &req)?;
        if v["ok"] != true {
            bail!(
                "switch {name}: {}",
                v["error"].as_str().unwrap_or("refused")
            );
        }
        Ok(v)
    };
    let op = |m: &MapArgs, op: &str| json!({"op": op, "map": m.map});
    match c {
        Command::List(a) => {
            let v = ask(json!({"op": "map_list"}))?;
            let maps = v["maps"].as_array().cloned().unwrap_or_default();
            if a.json {
                println!("{}", serde_json::to_string_pretty(&maps)?);
            } else {
                for m in &maps {
                    println!(
                        "{} {} key {} ({} B) value {} ({} B) max {}",
                        m["name"].as_str().unwrap_or("?"),
                        m["map_type"].as_str().unwrap_or("?"),
                        m["key_text"].as_str().unwrap_or("?"),
                        m["key_size"],
                        m["value_text"].as_str().unwrap_or("?"),
                        m["value_size"],
                        m["max_entries"]
                    );
                }
            }
        }
        Command::Dump(a) => {
            let v = ask(op(a, "map_dump"))?;
            let rows = v["rows"].as_array().cloned().unwrap_or_default();
            if a.json {
                let rows: Vec<Value> = rows
                    .iter()
                    .map(|r| json!({"key": r["key"], "value": r["value"]}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for r in &rows {
                    println!("{}", r["text"].as_str().unwrap_or_default());
                }
            }
        }
        Command::Get(a) => {
            let mut req = op(&a.map, "map_get");
            req["key"] = a.key.clone().into();
            let r = &ask(req)?["row"];
            if a.map.json {
                println!("{}", json!({"key": r["key"], "value": r["value"]}));
            } else {
                println!("{}", r["value_text"].as_str().unwrap_or_default());
            }
        }
        Command::Set(a) => {
            let mut req = op(&a.map, "map_set");
            req["key"] = a.key.clone().into();
            req["value"] = a.value.clone().into();
            ask(req)?;
        }
        Command::Delete(a) => {
            let mut req = op(&a.map, "map_delete");
            req["key"] = a.key.clone().into();
            ask(req)?;
        }
        Command::Watch(_) => bail!(
            "map watch --switch {name}: not supported yet; `nfkit map dump --switch {name} MAP` reads it"
        ),
    }
    Ok(Some(ExitCode::SUCCESS))
}

fn row_json(r: &Row) -> Value {
    json!({
        "key": r.key_json,
        "value": r.value_json,
        "value_text": r.value_text,
        "text": r.text(),
    })
}

/// The switch's answer to map request `op` (`map_list`, `map_dump`,
/// `map_get`, `map_set`, `map_delete`) from `source`.
pub fn answer(op: &str, req: &Value, sw: &Switch, source: &str, name: &str) -> Value {
    let map = req["map"].as_str().unwrap_or_default();
    let key = req["key"].as_str();
    let fail = |e: &dyn std::fmt::Display| json!({"ok": false, "error": e.to_string()});
    let need = |what: &str| json!({"ok": false, "error": format!("{op}: no \"{what}\"")});
    match op {
        "map_list" => {
            let maps: Vec<Value> = sw
                .map_list()
                .iter()
                .map(|i| {
                    let mut v = serde_json::to_value(i).unwrap_or_default();
                    v["key_text"] = i.key.describe().into();
                    v["value_text"] = i.value.describe().into();
                    v
                })
                .collect();
            json!({"ok": true, "maps": maps})
        }
        "map_dump" => match sw.map_dump(map) {
            Ok(rows) => json!({
                "ok": true,
                "map": map,
                "rows": rows.iter().map(row_json).collect::<Vec<_>>(),
            }),
            Err(e) => fail(&e),
        },
        "map_get" => {
            let Some(key) = key else { return need("key") };
            match sw.map_get(map, key) {
                Ok(r) => json!({"ok": true, "row": row_json(&r)}),
                Err(e) => fail(&e),
            }
        }
        "map_set" | "map_delete" if sw.takes_updates() => {
            let e = sw.refuse_unauthenticated(&format!("{source} ({op})"));
            eprintln!(
                "switch {name}: {op} of map `{map}` from {source} refused ({}): this switch takes authenticated updates only",
                e.reason()
            );
            json!({"ok": false, "reason": e.reason(), "error": format!(
                "{e}: this switch takes authenticated writes only; {}",
                signed_hint(sw, name, op, map, key, req["value"].as_str())
            )})
        }
        "map_set" => {
            let (Some(key), Some(value)) = (key, req["value"].as_str()) else {
                return need("key\" and \"value");
            };
            match sw.map_set(map, key, value) {
                Ok(()) => json!({"ok": true}),
                Err(e) => fail(&e),
            }
        }
        "map_delete" => {
            let Some(key) = key else { return need("key") };
            match sw.map_delete(map, key) {
                Ok(()) => json!({"ok": true}),
                Err(e) => fail(&e),
            }
        }
        _ => fail(&format!("unknown request {op}")),
    }
}

/// The signed command doing what a refused write asked, the key and
/// value as hex bytes (typed per the map, when they parse).
fn signed_hint(
    sw: &Switch,
    name: &str,
    op: &str,
    map: &str,
    key: Option<&str>,
    value: Option<&str>,
) -> String {
    let info = sw.map_list().into_iter().find(|i| i.name == map);
    let hex = |text: Option<&str>, ty: Option<&nfkit_control::maps::ValueType>| -> String {
        match (text, ty) {
            (Some(t), Some(ty)) => text::parse(ty, t)
                .map(|b| text::hex(&b))
                .unwrap_or_else(|_| "HEX".into()),
            _ => "HEX".into(),
        }
    };
    let k = hex(key, info.as_ref().map(|i| &i.key));
    if op == "map_set" {
        let v = hex(value, info.as_ref().map(|i| &i.value));
        format!("use nfkit switch update --switch {name} --set {map} {k} {v} --key FILE")
    } else {
        format!("use nfkit switch update --switch {name} --delete {map} {k} --key FILE")
    }
}

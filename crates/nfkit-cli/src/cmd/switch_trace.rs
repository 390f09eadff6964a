//! `nfkit switch trace NAME [--count N] [--all] [--json]`: the frames a
//! running switch's chain sends to the controller (`CONTROLLER(reason)`),
//! read from another process through the control socket. The switch
//! numbers the frames it takes off its controller channel and keeps the
//! latest 4096 (their first 64 bytes); the trace asks for those after
//! the last one it printed (`{"op":"trace","from":SEQ}`) every 50 ms
//! while none come, and says on standard error how many it missed when
//! more came between two asks than the switch keeps.

use anyhow::bail;
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Frames asked for at once.
const BATCH: u64 = 256;

pub fn trace(
    daemon: Option<&nfkit_daemon::Client>,
    name: String,
    count: Option<u64>,
    all: bool,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let ask = |req: Value| -> anyhow::Result<Value> {
        let v = super::switch_via::request(daemon, &name, &req)?;
        if v["ok"] != true {
            bail!(
                "switch {name}: trace refused: {}",
                v["error"].as_str().unwrap_or("?")
            );
        }
        Ok(v)
    };
    let first = ask(json!({"op": "trace", "all": all, "max": 0}))?;
    let mut from = first["next"].as_u64().unwrap_or(0);
    let mut shown: u64 = 0;
    let mut missed: u64 = 0;
    let out = std::io::stdout();
    loop {
        if count.is_some_and(|c| shown >= c) {
            break;
        }
        let max = count.map_or(BATCH, |c| (c - shown).min(BATCH));
        let v = match ask(json!({"op": "trace", "from": from, "max": max})) {
            Ok(v) => v,
            Err(e) => {
                // It answered the first ask: the switch stopped since.
                if let Some(c) = count {
                    eprintln!("switch {name}: stopped after {shown} of {c} frames");
                    return Ok(ExitCode::from(1));
                }
                eprintln!("switch {name}: stopped ({e:#})");
                break;
            }
        };
        let m = v["missed"].as_u64().unwrap_or(0);
        if m > 0 {
            missed += m;
            eprintln!(
                "switch {name}: {m} controller frames missed (the switch keeps its latest 4096)"
            );
        }
        let frames = v["frames"].as_array().cloned().unwrap_or_default();
        from = v["next"].as_u64().unwrap_or(from);
        let mut w = out.lock();
        for f in &frames {
            if as_json {
                writeln!(w, "{f}")?;
            } else {
                writeln!(w, "{}", line(f))?;
            }
            shown += 1;
        }
        w.flush()?;
        drop(w);
        if frames.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    if missed > 0 {
        eprintln!("switch {name}: {shown} frames shown, {missed} missed");
    }
    Ok(ExitCode::SUCCESS)
}

/// `#SEQ port P reason R len L: HEX` (the first bytes, in groups of 2).
fn line(f: &Value) -> String {
    let head = f["head"].as_str().unwrap_or_default();
    let grouped: Vec<&str> = head
        .as_bytes()
        .chunks(4)
        .filter_map(|c| std::str::from_utf8(c).ok())
        .collect();
    let len = f["len"].as_u64().unwrap_or(0);
    format!(
        "#{} {:.6} port {} reason {} len {}: {}{}",
        f["seq"],
        f["arrival_ns"].as_u64().unwrap_or(0) as f64 / 1e9,
        f["in_port"],
        f["reason"],
        len,
        grouped.join(" "),
        if (head.len() / 2) < len as usize {
            " ..."
        } else {
            ""
        }
    )
}

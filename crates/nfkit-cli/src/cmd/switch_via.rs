//! A request to a switch's control socket (`switch_ctl`), through nfkitd
//! when one runs: reads (`status`, `map_*` reads, `trace`) by its
//! SwitchService/QuerySwitch, changes (`map_set`, `map_delete`, a signed
//! `update`) by ChangeSwitch, `rekey` by RekeySwitch; the answer is the
//! switch's, as it gives it directly, so the commands print the same.

use super::switch_ctl;
use anyhow::Context;
use nfkit_daemon::proto::{
    switch_service_client::SwitchServiceClient, RekeySwitchRequest, SwitchControlRequest,
};
use serde_json::Value;

/// Sends `req` to switch `name`, through `daemon` when given.
pub fn request(
    daemon: Option<&nfkit_daemon::Client>,
    name: &str,
    req: &Value,
) -> anyhow::Result<Value> {
    let Some(c) = daemon else {
        return switch_ctl::request(name, req);
    };
    let mut svc = SwitchServiceClient::new(c.channel());
    let control = SwitchControlRequest {
        name: name.to_string(),
        request_json: req.to_string(),
    };
    let answer = match req["op"].as_str() {
        Some("rekey") => c.block_on(svc.rekey_switch(RekeySwitchRequest {
            name: name.to_string(),
        })),
        Some("map_set" | "map_delete" | "update") => c.block_on(svc.change_switch(control)),
        _ => c.block_on(svc.query_switch(control)),
    }
    .map_err(super::daemon::status_error)?
    .into_inner();
    serde_json::from_str(&answer.answer_json)
        .with_context(|| format!("switch {name}: a bad answer through nfkitd"))
}

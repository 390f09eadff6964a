//! Pipeline positions in the switch (docs/language.md, "Pipelines"):
//! `pre` and the tables run in the version's program; the `post` program
//! ([`nfkit_lang::pipeline::post_of`]) runs on every frame a worker
//! stages for an output port, before transmission, with the version's
//! maps (loaded keeping them): a verdict of DROP or ABORTED there drops
//! the frame (counted per worker), anything else sends it.
//!
//! Authenticated updates at position `table:NAME` write entries of the
//! maps of table NAME ([`is_table_map`]; docs/language.md, "Pipelines").

use crate::counters::Counter;
use crate::reload::lock;
use crate::SwitchError;
use nfkit_abi::verdict::{self, Action};
use nfkit_control::runner::ScriptVm;
use nfkit_lang::Compiled;
use nfkit_vm::ctx::{XdpMd, XDP_HEADROOM};
use nfkit_vm::{PacketCtx, RunOptions, Runner, VmConfig};
use std::sync::Mutex;

/// A version's `post` program: loaded, one runner per worker.
pub struct Post {
    pub script: ScriptVm,
    entry: usize,
    runners: Vec<Mutex<Option<Runner>>>,
    /// Frames the post program dropped, per worker.
    pub dropped: Vec<Counter>,
}

impl Post {
    /// The post program of `compiled` (none without a pipeline `post`),
    /// loaded with the maps of `ingress` (the same version's program).
    pub fn load(
        compiled: &Compiled,
        ingress: &ScriptVm,
        config: VmConfig,
        workers: usize,
    ) -> Result<Option<Post>, SwitchError> {
        let opts = nfkit_lang::Options {
            hook: Some(compiled.hook),
            ..nfkit_lang::Options::default()
        };
        let pc = nfkit_lang::pipeline::post_of(compiled, &opts)
            .map_err(|e| SwitchError::Post(e.to_string()))?;
        let Some(pc) = pc else {
            return Ok(None);
        };
        let script = ScriptVm::new_keeping(&pc, config, ingress)?;
        let entry = script
            .vm
            .entry_index(script.entry())
            .ok_or(nfkit_control::runner::RunError::NoClassifier)?;
        let runners = (0..workers)
            .map(|_| Mutex::new(Some(script.vm.runner())))
            .collect();
        Ok(Some(Post {
            script,
            entry,
            runners,
            dropped: (0..workers).map(|_| Counter::default()).collect(),
        }))
    }

    /// Worker `id`'s runner and the entry.
    pub(crate) fn take(&self, id: usize) -> PostRunner {
        let runner = self
            .runners
            .get(id)
            .and_then(|r| lock(r).take())
            .unwrap_or_else(|| self.script.vm.runner());
        PostRunner {
            runner,
            entry: self.entry,
        }
    }

    /// Frames dropped by the post program, all workers.
    pub fn dropped(&self) -> u64 {
        self.dropped.iter().map(Counter::get).sum()
    }
}

/// A worker's runner of the post program.
pub(crate) struct PostRunner {
    runner: Runner,
    entry: usize,
}

impl PostRunner {
    /// Runs the post program on `frame` (in place) leaving through port
    /// index `out` after coming in on `ingress`: whether to send it.
    pub(crate) fn run(
        &mut self,
        frame: &mut Vec<u8>,
        ingress: usize,
        out: usize,
        opts: &RunOptions,
    ) -> bool {
        let md = XdpMd {
            packet: &[],
            meta: &[],
            ingress_ifindex: ingress as u32 + 1,
            rx_queue_index: 0,
            egress_ifindex: out as u32 + 1,
            headroom: XDP_HEADROOM,
            tailroom: 4096usize
                .saturating_sub(XDP_HEADROOM + 320)
                .saturating_sub(frame.len()),
        };
        let r = self
            .runner
            .run_packet(self.entry, frame, PacketCtx::XdpWith(&md), opts);
        !matches!(
            r.result.ok().and_then(verdict::decode),
            Some((Action::Drop | Action::Aborted, _))
        )
    }
}

/// Whether `map` holds entries of table `table` (the maps
/// [`nfkit_lang::table::Table::maps`] names: `T_exact`, `T_lpm`, or the
/// rule arrays `T_v<j>`, `T_m<j>`, `T_prio`, `T_act`, `T_n`).
pub fn is_table_map(table: &str, map: &str) -> bool {
    let Some(rest) = map.strip_prefix(table).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    let indexed = |p: char| {
        rest.strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(rest, "exact" | "lpm" | "prio" | "act" | "n") || indexed('v') || indexed('m')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_maps_by_name() {
        assert!(is_table_map("ACL", "ACL_v0"));
        assert!(is_table_map("ACL", "ACL_m12"));
        assert!(is_table_map("ROUTES", "ROUTES_lpm"));
        assert!(!is_table_map("ACL", "ACL_v"));
        assert!(!is_table_map("ACL", "ROUTES_lpm"));
        assert!(!is_table_map("ACL", "ACLx_n"));
        assert!(!is_table_map("ACL", "stats"));
    }
}

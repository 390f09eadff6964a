//! Pipeline positions in the switch (docs/language.md, "Pipelines"):
//! `pre` and the tables run in the version's program; the `post` program
//! ([`nfkit_lang::pipeline::post_of`]) runs on every frame a worker
//! stages for an output port, before transmission, with the version's
//! maps (loaded keeping them): a verdict of DROP or ABORTED there drops
//! the frame (counted per worker), anything else sends it.
//!
//! Each output port has its own post program slot ([`crate::Version::posts`]),
//! the script's post program unless an update at `post:PORT` replaced
//! it. Authenticated updates at position `table:NAME` write entries of
//! the maps of table NAME ([`is_table_map`]) or replace the ingress code
//! (the chains the table's actions call) with code that keeps the
//! table's maps ([`keeps_table`]); docs/update.md.

use crate::code::Code;
use crate::counters::Counter;
use crate::reload::{lock, VersionFrames};
use crate::SwitchError;
use nfkit_abi::verdict::{self, Action};
use nfkit_control::runner::ScriptVm;
use nfkit_vm::ctx::{XdpMd, XDP_HEADROOM};
use nfkit_vm::{PacketCtx, RunOptions, Runner, VmConfig};
use std::sync::{Arc, Mutex};

/// A `post` program: loaded, one runner per worker and output port.
pub struct Post {
    pub script: ScriptVm,
    entry: usize,
    /// Output ports (runners are per worker and port).
    ports: usize,
    runners: Vec<Mutex<Option<Runner>>>,
    /// Frames the post program dropped, per worker.
    pub dropped: Vec<Counter>,
    /// Frames it ran, per worker, under its position and version.
    pub frames: Arc<VersionFrames>,
}

impl Post {
    /// The post program of `code` (none without a pipeline `post`),
    /// loaded with the maps of `ingress` (the same version's program),
    /// counted as position `post`, version `number`.
    pub fn load(
        code: Code<'_>,
        ingress: &ScriptVm,
        config: VmConfig,
        workers: usize,
        ports: usize,
        number: u64,
    ) -> Result<Option<Post>, SwitchError> {
        let Some(pc) = code.post()? else {
            return Ok(None);
        };
        let frames = VersionFrames::new("post", number, workers);
        Post::load_program(pc.code(), ingress, config, workers, ports, frames).map(Some)
    }

    /// `program` (a chain compiled for the switch: its entry is the post
    /// program) loaded with the maps of `ingress`, counting into
    /// `frames` (a `post:PORT` update).
    pub fn load_program(
        program: Code<'_>,
        ingress: &ScriptVm,
        config: VmConfig,
        workers: usize,
        ports: usize,
        frames: Arc<VersionFrames>,
    ) -> Result<Post, SwitchError> {
        let script = program.load(config, Some(ingress))?;
        let entry = script
            .vm
            .entry_index(script.entry())
            .ok_or(nfkit_control::runner::RunError::NoClassifier)?;
        let runners = (0..workers * ports)
            .map(|_| Mutex::new(Some(script.vm.runner())))
            .collect();
        Ok(Post {
            script,
            entry,
            ports,
            runners,
            dropped: (0..workers).map(|_| Counter::default()).collect(),
            frames,
        })
    }

    /// Worker `id`'s runner for output port `port`.
    pub(crate) fn take(&self, id: usize, port: usize) -> PostRunner {
        let runner = self
            .runners
            .get(id * self.ports + port)
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

/// A worker's runner of a post program.
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

/// Whether the ingress program `new` keeps every map of table `table`
/// that `old` has (same definition, so the same entries); why not (the
/// first map it does not keep, or no such table in `old`) otherwise.
pub(crate) fn keeps_table(table: &str, old: &ScriptVm, new: &ScriptVm) -> Result<(), String> {
    let mut any = false;
    for m in old.vm.maps().iter() {
        if !is_table_map(table, m.name()) {
            continue;
        }
        any = true;
        let kept = new.vm.map(m.name()).is_some_and(|n| n.same_store(m));
        if !kept {
            return Err(format!(
                "the new code does not keep table `{table}`'s map `{}` (missing or defined otherwise)",
                m.name()
            ));
        }
    }
    if any {
        Ok(())
    } else {
        Err(format!("no table `{table}` in the running version"))
    }
}

/// Whether `map` holds entries of table `table` (the maps
/// [`nfkit_lang::table::Table::maps`] names: `T_exact`, `T_lpm`, or the
/// rule arrays `T_v<j>`, `T_m<j>`, `T_prio`, `T_act`, `T_n`; and
/// `T_default`, the action word of a miss).
pub fn is_table_map(table: &str, map: &str) -> bool {
    let Some(rest) = map.strip_prefix(table).and_then(|r| r.strip_prefix('_')) else {
        return false;
    };
    let indexed = |p: char| {
        rest.strip_prefix(p)
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(rest, "exact" | "lpm" | "prio" | "act" | "n" | "default")
        || indexed('v')
        || indexed('m')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_maps_by_name() {
        assert!(is_table_map("ACL", "ACL_v0"));
        assert!(is_table_map("ACL", "ACL_m12"));
        assert!(is_table_map("ROUTES", "ROUTES_lpm"));
        assert!(is_table_map("ROUTES", "ROUTES_default"));
        assert!(!is_table_map("ACL", "ACL_v"));
        assert!(!is_table_map("ACL", "ROUTES_lpm"));
        assert!(!is_table_map("ACL", "ACLx_n"));
        assert!(!is_table_map("ACL", "stats"));
    }
}

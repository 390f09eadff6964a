//! `nfkit offload SCRIPT|OBJ --dev IFACE [--netns NS] [--skip-sw|--skip-hw]
//! [--max-rules N] [--dry-run] [--json]`, `nfkit offload status`,
//! `nfkit offload remove --dev IFACE`: an XDP program's stateless paths
//! as tc flower rules at the device's ingress (nfkit-offload), the rest
//! left to the program. Map contents come from the program deployed on
//! the device (its pinned maps) when there is one, else from the
//! object's or script's initial state. The install is recorded in
//! `offload.json` next to the deployment state (`NFKIT_STATE_DIR`).

use anyhow::{anyhow, bail, Context};
use nfkit_kernel::deploy::{open_pinned_map, AttachPoint, Paths, State};
use nfkit_kernel::netns::in_netns;
use nfkit_kernel::KMap;
use nfkit_object::Image;
use nfkit_offload::rules::Fallback;
use nfkit_offload::{
    flower, switch, Deriver, Installed, Limits, MapSource, OffloadState, RuleSet, RulesOptions, Tc,
};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    install: InstallArgs,
}

#[derive(clap::Subcommand)]
pub enum Command {
    /// What `nfkit offload` installed, with each rule's packet count.
    Status(StatusArgs),
    /// Delete the offloaded rules of a device.
    Remove(RemoveArgs),
    /// Check the rules on this kernel's flower (a veth pair): per frame,
    /// flower then the program must decide like the program alone.
    Check(super::offload_check::CheckArgs),
}

#[derive(clap::Args)]
pub struct InstallArgs {
    /// The chain script (.chain or .py) or eBPF ELF object to offload.
    #[arg(required = true)]
    source: Option<PathBuf>,
    /// The device whose ingress gets the rules.
    #[arg(long, value_name = "IFACE", required = true)]
    dev: Option<String>,
    /// The named network namespace (`ip netns`) IFACE is in.
    #[arg(long, value_name = "NS")]
    netns: Option<String>,
    /// Rules in the NIC only (`skip_sw`): what it cannot take is refused.
    #[arg(long, conflicts_with = "skip_hw")]
    skip_sw: bool,
    /// Rules in the kernel's software flower only (`skip_hw`).
    #[arg(long)]
    skip_hw: bool,
    /// At most N rules: the least specific paths fall back to software.
    #[arg(long, value_name = "N")]
    max_rules: Option<usize>,
    /// Print the equivalent `tc filter add` lines; install nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
    /// Then keep the rules in step with the deployed program's maps:
    /// poll them every `--interval` ms, re-derive the rules and apply
    /// what changed (one line per change, with its latency).
    #[arg(long)]
    watch: bool,
    /// Polling interval of `--watch`, in milliseconds (1 to 60000).
    #[arg(long, value_name = "MS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    interval: u64,
    /// Also expand lookups in maps the program writes itself (a
    /// blacklist the data path fills), with the clock as of each
    /// derivation: sound only while `--watch` keeps the rules in step,
    /// so it requires `--watch` (rules lag a change by at most the
    /// interval plus the switch).
    #[arg(long, requires = "watch")]
    data_path_maps: bool,
    /// Stop watching after this many seconds (default: until killed).
    #[arg(long, value_name = "S")]
    watch_for: Option<u64>,
    /// Object only: the program, by section or function name.
    #[arg(long, value_name = "NAME")]
    section: Option<String>,
    /// Object only: take untyped sections as this type.
    #[arg(long = "type", value_enum)]
    prog_type: Option<super::RunType>,
    /// Directories with users' NF objects (also NFKIT_NF_PATH).
    #[arg(long = "nf-path", value_name = "DIR")]
    nf_path: Vec<String>,
}

#[derive(clap::Args)]
pub struct StatusArgs {
    /// Only this device.
    #[arg(long, value_name = "IFACE")]
    dev: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct RemoveArgs {
    /// The device whose offloaded rules go.
    #[arg(long, value_name = "IFACE")]
    dev: String,
    #[arg(long, value_name = "NS")]
    netns: Option<String>,
    #[arg(long)]
    json: bool,
}

/// The offload state file: `offload.json` beside nfkit's state file.
pub fn state_path() -> PathBuf {
    nfkit_offload::record::state_file_beside(&Paths::from_env().state_file)
}

/// The maps of a deployed program, opened from their pins.
struct PinnedMaps(Vec<(String, KMap)>);

impl MapSource for PinnedMaps {
    fn entries(&self, map: &str) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let (_, m) = self.0.iter().find(|(n, _)| n == map)?;
        m.entries().ok()
    }

    fn lookup(&self, map: &str, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let (_, m) = self
            .0
            .iter()
            .find(|(n, _)| n == map)
            .ok_or_else(|| format!("no map {map}"))?;
        m.lookup(key).map_err(|e| e.to_string())
    }
}

/// The program to offload: its image and XDP entry.
pub struct Program {
    pub image: Image,
    pub entry: String,
    pub compiled: Option<nfkit_lang::Compiled>,
}

impl Program {
    /// The program's maps in their initial state (a script's as its
    /// runner sets them up, an object's as loaded), for the analysis.
    pub fn initial_vm(&self, shown: &str) -> anyhow::Result<nfkit_vm::Vm> {
        Ok(match &self.compiled {
            Some(c) => {
                nfkit_control::runner::ScriptVm::new(c)
                    .map_err(|e| anyhow!("{shown}: {e}"))?
                    .vm
            }
            None => nfkit_vm::Vm::new(&self.image, nfkit_vm::VmConfig::kernel())
                .map_err(|e| anyhow!("{shown}: {e}"))?,
        })
    }
}

/// Reads an object (its program `section`, untyped sections as
/// `prog_type`) or compiles a script for XDP; `None` when the script
/// has errors (printed).
pub fn load_program(
    path: &std::path::Path,
    section: Option<&str>,
    prog_type: Option<super::RunType>,
    nf_path: &[String],
) -> anyhow::Result<Option<Program>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("reading {shown}"))?;
    if bytes.starts_with(b"\x7fELF") {
        let image = super::read_image(&bytes, &shown, prog_type)?;
        let i = super::run::pick_entry(&image, section)?;
        let entry = image.entries[i].name.clone();
        return Ok(Some(Program {
            image,
            entry,
            compiled: None,
        }));
    }
    let source = String::from_utf8(bytes)
        .map_err(|_| anyhow!("{shown}: neither an ELF object nor a UTF-8 script"))?;
    let Some(c) =
        super::deploy::compile_script(&shown, &source, nf_path, Some(nfkit_nf::Hook::Xdp))?
    else {
        return Ok(None);
    };
    let entry = c
        .entry()
        .ok_or_else(|| {
            anyhow!("{shown}: the script configures no classifier (nothing to offload)")
        })?
        .to_string();
    Ok(Some(Program {
        image: c.image.clone(),
        entry,
        compiled: Some(c),
    }))
}

/// The deployed XDP program on `dev` (in `netns`), if nfkit deployed one.
fn deployed_maps(
    dev: &str,
    netns: Option<&str>,
    image: &Image,
) -> anyhow::Result<Option<PinnedMaps>> {
    let state = State::load(&Paths::from_env())?;
    let Some(d) = state.deployments.iter().find(|d| {
        d.dev == dev
            && d.netns.as_deref() == netns
            && matches!(d.hook, AttachPoint::Xdp | AttachPoint::XdpGeneric)
    }) else {
        return Ok(None);
    };
    let mut maps = Vec::new();
    for rec in &d.maps {
        if image.maps.iter().any(|m| m.name == rec.name) {
            let m = open_pinned_map(&rec.name, &rec.pin).with_context(|| {
                format!("the map `{}` of the program deployed on {dev}", rec.name)
            })?;
            maps.push((rec.name.clone(), m));
        }
    }
    Ok(Some(PinnedMaps(maps)))
}

fn ifname_of(ifindex: u32) -> String {
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else {
        return format!("if{ifindex}");
    };
    for e in dir.flatten() {
        let idx = std::fs::read_to_string(e.path().join("ifindex")).unwrap_or_default();
        if idx.trim().parse::<u32>().ok() == Some(ifindex) {
            return e.file_name().to_string_lossy().into_owned();
        }
    }
    format!("if{ifindex}")
}

fn fallback_text(f: &Fallback, max: Option<usize>) -> String {
    match f {
        Fallback::Software(why) => format!("software: {why}"),
        Fallback::Inexpressible(why) => format!("not expressible in flower: {why}"),
        Fallback::OverBudget => format!(
            "over the rule budget (--max-rules {}): falls back to software",
            max.unwrap_or(0)
        ),
    }
}

fn rules_json(rules: &RuleSet, lines: &[String]) -> Vec<serde_json::Value> {
    rules
        .rules
        .iter()
        .zip(lines)
        .map(|(r, l)| {
            json!({
                "prio": r.prio, "action": r.action.to_string(), "paths": r.paths,
                "pattern": r.pattern.to_string(), "tc": l,
            })
        })
        .collect()
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match a.command {
        Some(Command::Status(s)) => status(s),
        Some(Command::Remove(r)) => remove(r),
        Some(Command::Check(c)) => super::offload_check::run(c),
        None => install(a.install),
    }
}

fn install(a: InstallArgs) -> anyhow::Result<ExitCode> {
    let (Some(path), Some(dev)) = (a.source.clone(), a.dev.clone()) else {
        bail!("give SCRIPT|OBJ and --dev IFACE");
    };
    let shown = path.display().to_string();
    let Some(prog) = load_program(&path, a.section.as_deref(), a.prog_type, &a.nf_path)? else {
        return Ok(ExitCode::from(1));
    };
    let netns = a.netns.as_deref();
    let t0 = std::time::Instant::now();
    let mut deriver = Deriver::new();
    let (rules, maps_from) = derive(&a, &shown, &prog, &dev, &mut deriver)?;
    let took = t0.elapsed();
    let skip = if a.skip_sw {
        "skip_sw"
    } else if a.skip_hw {
        "skip_hw"
    } else {
        ""
    };
    let lines = rules.to_tc_lines(&dev, skip, &ifname_of);
    let fallbacks: Vec<serde_json::Value> = rules
        .fallbacks
        .iter()
        .map(|(p, f)| json!({"path": p, "why": fallback_text(f, a.max_rules)}))
        .collect();
    let over_budget = rules
        .fallbacks
        .iter()
        .filter(|f| f.1 == Fallback::OverBudget)
        .count();
    let summary = json!({
        "source": shown, "entry": prog.entry, "dev": dev, "netns": netns,
        "maps_from": maps_from, "paths": rules.paths, "offloaded": rules.offloaded,
        "passed": rules.passed, "over_budget": over_budget,
        "rules_before_merge": rules.before_merge, "rules": rules.rules.len(),
        "offloading_rules": rules.offloading_rules(),
        "generation_us": took.as_micros() as u64,
        "dry_run": a.dry_run,
        "rule_list": rules_json(&rules, &lines), "fallbacks": fallbacks,
    });
    if !a.dry_run {
        apply(&a, &dev, &prog, &rules, &lines, maps_from, skip)?;
    }
    if a.json {
        if a.watch {
            println!("{summary}");
            use std::io::Write;
            let _ = std::io::stdout().flush();
            watch(&a, &shown, &prog, &dev, skip, lines, deriver)?;
        } else {
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.dry_run {
        for l in &lines {
            println!("{l}");
        }
    }
    eprintln!(
        "{shown} ({}): {} paths, {} offloaded, {} pass, {} to software; {} rules ({} before merging), maps from {maps_from}, {:?}",
        prog.entry,
        rules.paths,
        rules.offloaded,
        rules.passed,
        rules.fallbacks.len(),
        rules.rules.len(),
        rules.before_merge,
        took
    );
    for (p, f) in &rules.fallbacks {
        eprintln!("  path {p}: {}", fallback_text(f, a.max_rules));
    }
    if !a.dry_run {
        eprintln!("installed {} rules at ingress of {dev}", rules.rules.len());
    }
    if a.watch {
        watch(&a, &shown, &prog, &dev, skip, lines, deriver)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The rules for the program now: its analysis over the deployed
/// program's pinned maps when there is one, else its initial state.
/// With data-path maps, uniform regions (a blacklisted source) are
/// hoisted before all paths, their analyses kept in `deriver` from one
/// derivation to the next (`--watch`).
fn derive(
    a: &InstallArgs,
    shown: &str,
    prog: &Program,
    dev: &str,
    deriver: &mut Deriver,
) -> anyhow::Result<(RuleSet, &'static str)> {
    let limits = Limits {
        data_path_maps: a.data_path_maps,
        now_ns: a.data_path_maps.then(nfkit_kernel::monotonic_ns),
        ..Limits::default()
    };
    let options = RulesOptions {
        max_rules: a.max_rules,
    };
    let mut run =
        |maps: &dyn MapSource| deriver.derive(&prog.image, &prog.entry, maps, &limits, &options);
    let (derivation, maps_from) = match deployed_maps(dev, a.netns.as_deref(), &prog.image)? {
        Some(pinned) => (run(&pinned), "pinned maps"),
        None => {
            let vm = prog.initial_vm(shown)?;
            (run(&vm), "initial state")
        }
    };
    let derivation = derivation.map_err(|e| anyhow!("{shown}: {e}"))?;
    let mut rules = derivation.rules;
    // Flower redirects only to a device that is there (a devmap entry
    // or a bpf_redirect target may name one that is not): those rules
    // pass, the program decides.
    let targets: Vec<u32> = rules
        .rules
        .iter()
        .filter_map(|r| match r.action {
            nfkit_offload::RuleAction::Redirect(i) => Some(i),
            _ => None,
        })
        .collect();
    if !targets.is_empty() {
        let present = in_netns(a.netns.as_deref(), || {
            Ok(Tc::open()
                .map(|mut tc| {
                    targets
                        .iter()
                        .filter(|i| tc.link_exists(**i))
                        .copied()
                        .collect::<Vec<u32>>()
                })
                .ok())
        })
        .ok()
        .flatten();
        if let Some(present) = present {
            for i in rules.demote_missing_targets(&|i| present.contains(&i)) {
                eprintln!("warning: ifindex {i} (a redirect target) is no device here: its rules pass to the program");
            }
        }
    }
    Ok((rules, maps_from))
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `--watch`: polls the deployed program's maps, and when the rules
/// they give differ, switches to the new rules without a window
/// ([`switch::plan`]: the new set added at fresh priorities in
/// first-match order, then the old one deleted last to first, so every
/// packet meets either the old rules or the new ones).
fn watch(
    a: &InstallArgs,
    shown: &str,
    prog: &Program,
    dev: &str,
    skip: &str,
    mut lines: Vec<String>,
    mut deriver: Deriver,
) -> anyhow::Result<()> {
    if deployed_maps(dev, a.netns.as_deref(), &prog.image)?.is_none() {
        bail!("--watch: no XDP program deployed on {dev} (`nfkit deploy`): its pinned maps are what is watched");
    }
    let flags = match skip {
        "skip_sw" => flower::SKIP_SW,
        "skip_hw" => flower::SKIP_HW,
        _ => 0,
    };
    let end = a
        .watch_for
        .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    let sp = state_path();
    // The priorities installed now (as generated: 1..N, until a switch).
    let mut prios: Vec<u32> = (1..=lines.len() as u32).collect();
    if !a.dry_run {
        let state = OffloadState::load(&sp).map_err(|e| anyhow!("{e}"))?;
        if let Some(i) = state.find(dev, a.netns.as_deref()) {
            prios = state.installs[i].prios.clone();
        }
    }
    let key = |l: &str| {
        l.split_once(" flower")
            .map_or(l.to_string(), |x| x.1.to_string())
    };
    loop {
        if end.is_some_and(|e| std::time::Instant::now() >= e) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(a.interval));
        let seen_ns = unix_ns();
        let t = std::time::Instant::now();
        let (mut rules, _) = derive(a, shown, prog, dev, &mut deriver)?;
        let derive_us = t.elapsed().as_micros() as u64;
        let new = rules.to_tc_lines(dev, skip, &ifname_of);
        if new == lines {
            continue;
        }
        let plan = switch::plan(&prios, rules.rules.len()).map_err(|e| anyhow!("{dev}: {e}"))?;
        for (r, &p) in rules.rules.iter_mut().zip(&plan.prios) {
            r.prio = p;
        }
        let placed = rules.to_tc_lines(dev, skip, &ifname_of);
        let old_keys: std::collections::BTreeSet<String> =
            lines.iter().map(|l| key(l.as_str())).collect();
        let new_keys: std::collections::BTreeSet<String> =
            new.iter().map(|l| key(l.as_str())).collect();
        let changed: Vec<&String> = placed
            .iter()
            .filter(|l| !old_keys.contains(&key(l.as_str())))
            .collect();
        let removed = old_keys.difference(&new_keys).count();
        let added = new_keys.difference(&old_keys).count();
        if !a.dry_run {
            let dev_s = dev.to_string();
            in_netns(a.netns.as_deref(), || {
                Ok(run_switch(&dev_s, &rules, &plan, flags))
            })?
            .map_err(|e| anyhow!("offload on {dev}: {e}"))?;
            let mut state = OffloadState::load(&sp).map_err(|e| anyhow!("{e}"))?;
            if let Some(i) = state.find(dev, a.netns.as_deref()) {
                state.installs[i].prios = plan.prios.clone();
                state.installs[i].tc_lines = placed.clone();
                state.installs[i].counts = rules.rules.iter().map(|r| r.counts.clone()).collect();
                state.installs[i].offloaded = rules.offloaded;
                state.installs[i].paths = rules.paths;
                state.installs[i].fallbacks = rules.fallbacks.len();
                state.save(&sp).map_err(|e| anyhow!("{e}"))?;
            }
        }
        let applied_ns = unix_ns();
        let steps: Vec<String> = plan
            .steps
            .iter()
            .map(|s| match *s {
                switch::Step::Add { rule, .. } => placed.get(rule).cloned().unwrap_or_default(),
                switch::Step::Delete { prio } => {
                    format!("tc filter del dev {dev} ingress prio {prio}")
                }
            })
            .collect();
        let ev = json!({
            "event": "rules changed", "seen_unix_ns": seen_ns, "applied_unix_ns": applied_ns,
            "derive_us": derive_us, "apply_us": (applied_ns - seen_ns) / 1000,
            "removed": removed, "added": added, "rules": new.len(),
            "changed": changed,
            "prios": plan.prios, "switch": steps,
            "dry_run": a.dry_run,
        });
        if a.json {
            println!("{ev}");
        } else {
            println!(
                "# maps changed: {removed} rules out, {added} in ({} now), derived in {derive_us} µs, switched {} µs after the change was seen",
                new.len(),
                (applied_ns - seen_ns) / 1000
            );
            for l in &steps {
                println!("{l}");
            }
        }
        use std::io::Write;
        let _ = std::io::stdout().flush();
        lines = new;
        prios = plan.prios;
    }
}

/// Carries out a switch on `dev`: adds the new rules (`rules`, at the
/// plan's priorities), then deletes the old ones. When an add fails the
/// added ones go again (the old set never left): nothing changed. Once
/// the new set is complete, an old rule that cannot be deleted (gone
/// already) is reported, not fatal.
fn run_switch(
    dev: &str,
    rules: &RuleSet,
    plan: &switch::SwitchPlan,
    flags: u32,
) -> Result<Vec<String>, String> {
    let mut tc = Tc::open().map_err(|e| e.to_string())?;
    let idx = tc.ifindex(dev).map_err(|e| e.to_string())?;
    let mut added = Vec::new();
    let mut warnings = Vec::new();
    for s in &plan.steps {
        let res = match *s {
            switch::Step::Add { rule, prio } => rules
                .rules
                .get(rule)
                .ok_or_else(|| format!("no rule {rule}"))
                .and_then(|r| {
                    flower::encode(r, flags, idx).map_err(|e| format!("rule prio {prio}: {e}"))
                })
                .and_then(|f| tc.add_flower(idx, &f).map_err(|e| e.to_string()))
                .map(|()| added.push(prio)),
            switch::Step::Delete { prio } => {
                if let Err(e) = tc.delete_prio(idx, prio) {
                    warnings.push(format!("deleting old rule prio {prio}: {e}"));
                }
                Ok(())
            }
        };
        if let Err(e) = res {
            for &p in &added {
                let _ = tc.delete_prio(idx, p);
            }
            return Err(e);
        }
    }
    Ok(warnings)
}

/// Installs the rules (replacing an earlier offload on the device);
/// on a failure, what was added is taken back.
fn apply(
    a: &InstallArgs,
    dev: &str,
    prog: &Program,
    rules: &RuleSet,
    lines: &[String],
    maps_from: &str,
    skip: &str,
) -> anyhow::Result<()> {
    let netns = a.netns.clone();
    let sp = state_path();
    let mut state = OffloadState::load(&sp).map_err(|e| anyhow!("{e}"))?;
    let old = state
        .find(dev, netns.as_deref())
        .map(|i| state.installs.remove(i));
    let flags = match skip {
        "skip_sw" => flower::SKIP_SW,
        "skip_hw" => flower::SKIP_HW,
        _ => 0,
    };
    // Over an earlier offload, the switch: new rules at fresh priorities
    // before the old ones go, so no packet meets a mix.
    let plan = switch::plan(
        old.as_ref().map_or(&[][..], |o| &o.prios[..]),
        rules.rules.len(),
    )
    .map_err(|e| anyhow!("offload on {dev}: {e}"))?;
    let mut rules = rules.clone();
    for (r, &p) in rules.rules.iter_mut().zip(&plan.prios) {
        r.prio = p;
    }
    let lines = if old.is_some() {
        rules.to_tc_lines(dev, skip, &ifname_of)
    } else {
        lines.to_vec()
    };
    let dev_s = dev.to_string();
    let (ifindex, created) = in_netns(netns.as_deref(), || {
        Ok(install_rules(&dev_s, &rules, &plan, flags))
    })?
    .map_err(|e| anyhow!("offload on {dev}: {e}"))?;
    state.installs.push(Installed {
        dev: dev.to_string(),
        netns,
        ifindex,
        source: std::fs::canonicalize(a.source.as_ref().map_or(&PathBuf::new(), |p| p))
            .unwrap_or_default()
            .display()
            .to_string(),
        entry: prog.entry.clone(),
        skip: skip.to_string(),
        prios: rules.rules.iter().map(|r| r.prio).collect(),
        counts: rules.rules.iter().map(|r| r.counts.clone()).collect(),
        qdisc_created: created || old.as_ref().is_some_and(|o| o.qdisc_created),
        installed_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        paths: rules.paths,
        offloaded: rules.offloaded,
        fallbacks: rules.fallbacks.len(),
        maps_from: maps_from.to_string(),
        tc_lines: lines,
    });
    state.save(&sp).map_err(|e| anyhow!("{e}"))
}

fn install_rules(
    dev: &str,
    rules: &RuleSet,
    plan: &switch::SwitchPlan,
    flags: u32,
) -> Result<(u32, bool), String> {
    let mut tc = Tc::open().map_err(|e| e.to_string())?;
    let idx = tc.ifindex(dev).map_err(|e| e.to_string())?;
    let created = tc.ensure_clsact(idx).map_err(|e| e.to_string())?;
    match run_switch(dev, rules, plan, flags) {
        Ok(warnings) => {
            for w in warnings {
                eprintln!("warning: {dev}: {w}");
            }
            Ok((idx, created))
        }
        Err(e) => {
            if created {
                let _ = tc.delete_clsact(idx);
            }
            Err(e)
        }
    }
}

fn status(a: StatusArgs) -> anyhow::Result<ExitCode> {
    let state = OffloadState::load(&state_path()).map_err(|e| anyhow!("{e}"))?;
    let mut out = Vec::new();
    for i in state
        .installs
        .iter()
        .filter(|i| a.dev.as_ref().is_none_or(|d| *d == i.dev))
    {
        let dev = i.dev.clone();
        let idx = i.ifindex;
        let filters = in_netns(i.netns.as_deref(), || {
            Ok(Tc::open().and_then(|mut tc| tc.filters(idx)))
        })?;
        let (rules, err): (Vec<serde_json::Value>, Option<String>) = match filters {
            Ok(fs) => (
                fs.iter()
                    .filter(|f| i.prios.contains(&f.prio))
                    .map(|f| {
                        let d = flower::decode(f.protocol, &f.options, idx);
                        // A u32 guard: its byte matches, decoded.
                        let (u32_match, guards) = if f.kind == "u32" {
                            let (t, m) = nfkit_offload::guard::describe_u32(&f.u32_keys, f.protocol);
                            // A guard keys byte 0 alone; a rule's keys
                            // are its pattern's ([`u32match`]).
                            let guard = f.u32_keys.iter().all(|k| k.2 == 0);
                            (Some(t), Some(if guard { m } else { String::new() }))
                        } else {
                            (None, None)
                        };
                        let pattern = match &u32_match {
                            Some(t) => format!("match {t}"),
                            None => d.as_ref().map(|x| x.pattern.to_string()).unwrap_or_default(),
                        };
                        json!({
                            "prio": f.prio, "kind": f.kind,
                            "protocol": nfkit_offload::netlink::protocol_name(f.protocol),
                            "action": d.as_ref().map(|x| x.action.to_string()).unwrap_or_else(|e| e.to_string()),
                            "pattern": pattern,
                            "u32_match": u32_match,
                            "guards": guards,
                            "packets": d.as_ref().ok().and_then(|x| x.packets),
                        })
                    })
                    .collect(),
                None,
            ),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        // Each rule's packets times its counts, as the program would
        // have counted them.
        let folded = fold_counts(i, &rules);
        if !a.json {
            println!(
                "{dev}{}: {} ({}), {} rules{}, {} paths, {} offloaded, {} to software, maps from {}",
                i.netns.as_ref().map(|n| format!(" (netns {n})")).unwrap_or_default(),
                i.source,
                i.entry,
                i.prios.len(),
                if i.skip.is_empty() { String::new() } else { format!(" {}", i.skip) },
                i.paths,
                i.offloaded,
                i.fallbacks,
                i.maps_from
            );
            if let Some(e) = &err {
                println!("  cannot list the rules: {e}");
            }
            for r in &rules {
                println!(
                    "  prio {} {} {} {} packets {}{}",
                    r["prio"],
                    r["protocol"].as_str().unwrap_or(""),
                    r["pattern"].as_str().unwrap_or(""),
                    r["action"].as_str().unwrap_or(""),
                    r["packets"],
                    match r["guards"].as_str() {
                        Some(g) if !g.is_empty() => format!(" (u32 guard: {g})"),
                        _ => String::new(),
                    }
                );
            }
            for (c, n) in &folded {
                println!(
                    "  folded into {} key {} offset {}: +{n} (rule packets times the program's addend)",
                    c.map,
                    hex(&c.key),
                    c.off
                );
            }
            if err.is_none() && rules.len() != i.prios.len() {
                println!(
                    "  {} of {} rules are missing from the device",
                    i.prios.len() - rules.len(),
                    i.prios.len()
                );
            }
        }
        out.push(json!({
            "dev": dev, "netns": i.netns, "source": i.source, "entry": i.entry,
            "skip": i.skip, "paths": i.paths, "offloaded": i.offloaded,
            "fallbacks": i.fallbacks, "maps_from": i.maps_from,
            "installed_at": i.installed_at, "rules": rules, "error": err,
            "expected_rules": i.prios.len(),
            "folded": folded.iter().map(|(c, n)| json!({
                "map": c.map, "key": hex(&c.key), "off": c.off, "size": c.size, "add": n,
            })).collect::<Vec<_>>(),
        }));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else if out.is_empty() {
        println!("nothing offloaded");
    }
    Ok(ExitCode::SUCCESS)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The program's counters the rules of `i` add to, from the packet
/// counts read back (`rules`: prio and packets per rule).
fn fold_counts(
    i: &Installed,
    rules: &[serde_json::Value],
) -> std::collections::BTreeMap<nfkit_offload::fold::Counter, u64> {
    let packets = |prio: u32| {
        rules
            .iter()
            .find(|r| r["prio"].as_u64() == Some(u64::from(prio)))
            .and_then(|r| r["packets"].as_u64())
            .unwrap_or(0)
    };
    nfkit_offload::fold::fold(
        i.prios
            .iter()
            .zip(&i.counts)
            .map(|(&p, c)| (&c[..], packets(p))),
    )
}

fn remove(a: RemoveArgs) -> anyhow::Result<ExitCode> {
    let sp = state_path();
    let mut state = OffloadState::load(&sp).map_err(|e| anyhow!("{e}"))?;
    let Some(pos) = state.find(&a.dev, a.netns.as_deref()) else {
        bail!(
            "nothing offloaded on {} (see `nfkit offload status`)",
            a.dev
        );
    };
    let i = state.installs[pos].clone();
    let removed = in_netns(i.netns.as_deref(), || {
        Ok((|| -> Result<usize, nfkit_offload::NetlinkError> {
            let mut tc = Tc::open()?;
            let mut n = 0;
            for &p in &i.prios {
                if tc.delete_prio(i.ifindex, p).is_ok() {
                    n += 1;
                }
            }
            if i.qdisc_created && tc.filters(i.ifindex)?.is_empty() {
                tc.delete_clsact(i.ifindex)?;
            }
            Ok(n)
        })())
    })?
    .map_err(|e| anyhow!("remove on {}: {e}", a.dev))?;
    state.installs.remove(pos);
    state.save(&sp).map_err(|e| anyhow!("{e}"))?;
    if a.json {
        println!(
            "{}",
            json!({"dev": a.dev, "removed": removed, "expected": i.prios.len()})
        );
    } else {
        println!(
            "removed {removed} of {} rules from {}",
            i.prios.len(),
            a.dev
        );
    }
    Ok(ExitCode::SUCCESS)
}

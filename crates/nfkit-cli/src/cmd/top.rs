//! `nfkit top [--once] [--interval MS]`: a live view of what is deployed
//! (ratatui): per chain and verdict, packets and packets per second, and
//! the top entries of each map, refreshed every interval; `q` quits.
//! `--once` prints one frame as text (two samples an interval apart, for
//! the rates). Reads through nfkitd when one runs, directly otherwise.

use anyhow::Context as _;
use nfkit_control::maps::{self, DumpOptions, KernelMap};
use nfkit_daemon::proto;
use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Row, Table};
use ratatui::{Frame, Terminal};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Print one frame as text and exit.
    #[arg(long)]
    once: bool,
    /// Refresh period in milliseconds (100 to 60000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    interval: u64,
    /// Entries shown per map.
    #[arg(long, default_value_t = 5)]
    entries: usize,
    /// Width and height of the `--once` frame.
    #[arg(long, default_value_t = 100)]
    width: u16,
    #[arg(long, default_value_t = 40)]
    height: u16,
    #[command(flatten)]
    daemon: super::daemon::DaemonArg,
}

/// One map's top entries.
struct MapTop {
    name: String,
    entries: Vec<(String, String)>,
    total: usize,
}

/// One deployment, sampled.
struct Dep {
    dev: String,
    hook: String,
    chains: Vec<(String, BTreeMap<String, u64>)>,
    maps: Vec<MapTop>,
}

struct Sample {
    at: Instant,
    deps: Vec<Dep>,
}

/// The largest `n` entries by value (values that are not integers keep
/// the key order).
fn top(rows: Vec<(String, String)>, n: usize) -> MapTop {
    let total = rows.len();
    let mut rows = rows;
    rows.sort_by_key(|(_, v)| std::cmp::Reverse(v.parse::<u128>().unwrap_or(0)));
    rows.truncate(n);
    MapTop {
        name: String::new(),
        entries: rows,
        total,
    }
}

/// Where samples come from.
enum Source {
    Direct(nfkit_kernel::deploy::Paths),
    Daemon(nfkit_daemon::Client),
}

impl Source {
    fn sample(&self, n: usize) -> anyhow::Result<Sample> {
        let at = Instant::now();
        let deps = match self {
            Source::Direct(paths) => nfkit_control::status::status(paths)?
                .into_iter()
                .map(|s| {
                    let d = &s.status.deployment;
                    let maps = d
                        .maps
                        .iter()
                        .filter(|m| !m.name.starts_with("nfkit_") && !m.name.starts_with('.'))
                        .filter_map(|rec| {
                            let k =
                                nfkit_kernel::deploy::open_pinned_map(&rec.name, &rec.pin).ok()?;
                            let m = KernelMap::from_record(rec, k);
                            let opts = DumpOptions {
                                skip_zero_array: true,
                                sum_per_cpu: true,
                            };
                            let rows = maps::dump(&m, opts).ok()?;
                            let mut t = top(
                                rows.into_iter()
                                    .map(|r| (r.key_text, r.value_text))
                                    .collect(),
                                n,
                            );
                            t.name.clone_from(&rec.name);
                            Some(t)
                        })
                        .collect();
                    Dep {
                        dev: d.dev.clone(),
                        hook: d.hook.name().to_string(),
                        chains: s
                            .verdicts
                            .iter()
                            .map(|c| (c.chain.clone(), c.counts.clone()))
                            .collect(),
                        maps,
                    }
                })
                .collect(),
            Source::Daemon(c) => {
                use proto::deployment_service_client::DeploymentServiceClient;
                use proto::map_service_client::MapServiceClient;
                let list = c
                    .block_on(
                        DeploymentServiceClient::new(c.channel())
                            .list_deployments(proto::ListDeploymentsRequest {}),
                    )
                    .map_err(super::daemon::status_error)?
                    .into_inner();
                let mut deps = Vec::new();
                for d in list.deployments {
                    let mut maps = Vec::new();
                    for name in d
                        .maps
                        .iter()
                        .filter(|m| !m.starts_with("nfkit_") && !m.starts_with('.'))
                    {
                        let r = c.block_on(MapServiceClient::new(c.channel()).dump_map(
                            proto::DumpMapRequest {
                                map: Some(proto::MapRef {
                                    name: name.clone(),
                                    dev: d.dev.clone(),
                                    attach: d.attach,
                                }),
                            },
                        ));
                        let Ok(r) = r else { continue };
                        let rows = r
                            .into_inner()
                            .entries
                            .into_iter()
                            .filter(|e| e.values.iter().any(|v| v.iter().any(|&b| b != 0)))
                            .map(|e| (e.key_text, e.value_text))
                            .collect();
                        let mut t = top(rows, n);
                        t.name.clone_from(name);
                        maps.push(t);
                    }
                    let hook = nfkit_daemon::validate::attach("attach", d.attach)
                        .ok()
                        .flatten()
                        .map_or("?", |h| h.name())
                        .to_string();
                    deps.push(Dep {
                        dev: d.dev,
                        hook,
                        chains: d
                            .verdicts
                            .into_iter()
                            .map(|c| (c.chain, c.counts.into_iter().collect()))
                            .collect(),
                        maps,
                    });
                }
                deps
            }
        };
        Ok(Sample { at, deps })
    }
}

/// Draws `now` (rates against `before`); maps without entries are left out.
fn draw(f: &mut Frame, now: &Sample, before: Option<&Sample>, via: &str) {
    let secs = before.map_or(0.0, |b| now.at.duration_since(b.at).as_secs_f64());
    let mut rows = Vec::new();
    for d in &now.deps {
        let old = before.and_then(|b| b.deps.iter().find(|x| x.dev == d.dev && x.hook == d.hook));
        for (chain, counts) in &d.chains {
            for (verdict, n) in counts {
                let prev = old
                    .and_then(|o| o.chains.iter().find(|(c, _)| c == chain))
                    .and_then(|(_, c)| c.get(verdict))
                    .copied();
                let rate = match prev {
                    Some(p) if secs > 0.0 => format!("{:.1}", n.saturating_sub(p) as f64 / secs),
                    _ => "-".into(),
                };
                rows.push(Row::new(vec![
                    d.dev.clone(),
                    d.hook.clone(),
                    chain.clone(),
                    verdict.clone(),
                    n.to_string(),
                    rate,
                ]));
            }
        }
    }
    let n_maps: usize = now.deps.iter().map(|d| d.maps.len()).sum();
    let shown = |m: &&MapTop| m.total > 0;
    let areas = Layout::vertical(
        std::iter::once(Constraint::Length(rows.len() as u16 + 3))
            .chain(now.deps.iter().flat_map(|d| {
                d.maps
                    .iter()
                    .filter(shown)
                    .map(|m| Constraint::Length(m.entries.len() as u16 + 3))
            }))
            .chain(std::iter::once(Constraint::Min(0))),
    )
    .split(f.area());
    let title = format!(
        " nfkit top: {} deployments, {} maps ({via}) - q quits ",
        now.deps.len(),
        n_maps
    );
    let bold = Style::default().add_modifier(Modifier::BOLD);
    let chains = Table::new(
        rows,
        [
            Constraint::Length(16),
            Constraint::Length(12),
            Constraint::Length(18),
            Constraint::Length(10),
            Constraint::Length(14),
            Constraint::Length(12),
        ],
    )
    .header(Row::new(vec!["DEV", "HOOK", "CHAIN", "VERDICT", "PACKETS", "PKT/S"]).style(bold))
    .block(Block::bordered().title(title));
    f.render_widget(chains, areas[0]);
    let mut k = 1;
    for d in &now.deps {
        for m in d.maps.iter().filter(shown) {
            let rows = m
                .entries
                .iter()
                .map(|(key, v)| Row::new(vec![key.clone(), v.clone()]));
            let t = Table::new(
                rows,
                [Constraint::Percentage(50), Constraint::Percentage(50)],
            )
            .header(Row::new(vec!["KEY", "VALUE"]).style(bold))
            .block(Block::bordered().title(format!(
                " map {} on {} {}: top {} of {} entries ",
                m.name,
                d.dev,
                d.hook,
                m.entries.len(),
                m.total
            )));
            if let Some(a) = areas.get(k) {
                f.render_widget(t, *a);
            }
            k += 1;
        }
    }
}

pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let (src, via) = match a.daemon.client()? {
        Some(c) => {
            let via = format!("via nfkitd {}", c.socket().display());
            (Source::Daemon(c), via)
        }
        None => (
            Source::Direct(nfkit_kernel::deploy::Paths::from_env()),
            "direct".to_string(),
        ),
    };
    let every = Duration::from_millis(a.interval);
    if a.once {
        let before = src.sample(a.entries)?;
        std::thread::sleep(every);
        let now = src.sample(a.entries)?;
        let mut t = Terminal::new(TestBackend::new(a.width, a.height))?;
        t.draw(|f| draw(f, &now, Some(&before), &via))?;
        let buf = t.backend().buffer();
        let w = usize::from(buf.area.width);
        let lines: Vec<String> = buf
            .content
            .chunks(w)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>())
            .map(|l| l.trim_end().to_string())
            .collect();
        let end = lines
            .iter()
            .rposition(|l| !l.is_empty())
            .map_or(0, |i| i + 1);
        println!("{}", lines[..end].join("\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let mut term = ratatui::try_init().context("setting up the terminal")?;
    let res = (|| -> anyhow::Result<()> {
        use ratatui::crossterm::event::{self, Event, KeyCode};
        let mut before: Option<Sample> = None;
        loop {
            let now = src.sample(a.entries)?;
            term.draw(|f| draw(f, &now, before.as_ref(), &via))?;
            before = Some(now);
            let until = Instant::now() + every;
            while let Some(left) = until.checked_duration_since(Instant::now()) {
                if event::poll(left)? {
                    if let Event::Key(k) = event::read()? {
                        if matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                            return Ok(());
                        }
                    }
                }
            }
        }
    })();
    ratatui::restore();
    res?;
    Ok(ExitCode::SUCCESS)
}

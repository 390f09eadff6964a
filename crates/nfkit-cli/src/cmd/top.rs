//! `nfkit top [--once] [--interval MS]`: a live view of what is deployed
//! (ratatui): per chain and verdict, packets and packets per second, and
//! the top entries of each map, refreshed every interval; `q` quits.
//! `--once` prints one frame as text (two samples an interval apart, for
//! the rates). Through nfkitd when one runs: fed by its stats stream
//! (WatchStats with the maps' top entries, one snapshot per interval,
//! shared with every other subscriber), directly otherwise.

use anyhow::Context as _;
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

/// One deployment, sampled.
struct Dep {
    dev: String,
    hook: String,
    chains: Vec<(String, BTreeMap<String, u64>)>,
    maps: Vec<proto::MapTop>,
}

struct Sample {
    /// Unix milliseconds of the read.
    at_ms: u64,
    deps: Vec<Dep>,
}

/// Where samples come from: read directly every interval, or nfkitd's
/// stats stream (one snapshot per interval, with the maps' top entries).
enum Source {
    Direct(nfkit_kernel::deploy::Paths),
    Daemon(
        nfkit_daemon::Client,
        Box<tonic::Streaming<proto::StatsSnapshot>>,
    ),
}

/// The software switches answering in the switch directory, as rows
/// (hook `switch`; their maps are not shown).
fn switch_deps() -> Vec<Dep> {
    let dir = super::switch_ctl::run_dir();
    nfkit_daemon::switches::names(&dir)
        .into_iter()
        .filter_map(|n| {
            let st = nfkit_daemon::switches::status(&dir, &n).ok()?;
            Some(Dep {
                dev: n,
                hook: "switch".to_string(),
                chains: nfkit_daemon::switches::counters(&st)
                    .into_iter()
                    .map(|c| (c.chain, c.counts.into_iter().collect()))
                    .collect(),
                maps: Vec::new(),
            })
        })
        .collect()
}

impl Source {
    fn open(a: &Args) -> anyhow::Result<(Source, String)> {
        let Some(c) = a.daemon.client()? else {
            let paths = nfkit_kernel::deploy::Paths::from_env();
            return Ok((Source::Direct(paths), "direct".to_string()));
        };
        use proto::stats_service_client::StatsServiceClient;
        let stream = c
            .block_on(
                StatsServiceClient::new(c.channel()).watch_stats(proto::WatchStatsRequest {
                    interval_ms: a.interval as u32,
                    count: 0,
                    dev: String::new(),
                    top_entries: a.entries.min(100) as u32,
                }),
            )
            .map_err(super::daemon::status_error)?
            .into_inner();
        let via = format!("via nfkitd {}", c.socket().display());
        Ok((Source::Daemon(c, Box::new(stream)), via))
    }

    /// The next sample: read now (direct), or the stream's next snapshot.
    fn sample(&mut self, n: usize) -> anyhow::Result<Sample> {
        match self {
            Source::Direct(paths) => {
                let at_ms = nfkit_daemon::audit::now_ms();
                let deps = nfkit_control::status::status(paths)?
                    .into_iter()
                    .map(|s| {
                        let d = &s.status.deployment;
                        Dep {
                            dev: d.dev.clone(),
                            hook: d.hook.name().to_string(),
                            chains: s
                                .verdicts
                                .iter()
                                .map(|c| (c.chain.clone(), c.counts.clone()))
                                .collect(),
                            maps: nfkit_daemon::stats_hub::map_tops(d, n),
                        }
                    })
                    .chain(switch_deps())
                    .collect();
                Ok(Sample { at_ms, deps })
            }
            Source::Daemon(c, stream) => {
                let snap = c
                    .block_on(stream.message())
                    .map_err(super::daemon::status_error)?
                    .ok_or_else(|| anyhow::anyhow!("nfkitd ended the stats stream"))?;
                let deps = snap
                    .deployments
                    .into_iter()
                    .map(|d| Dep {
                        hook: if d.switch_name.is_empty() {
                            nfkit_daemon::validate::attach("attach", d.attach)
                                .ok()
                                .flatten()
                                .map_or("?", |h| h.name())
                                .to_string()
                        } else {
                            "switch".to_string()
                        },
                        dev: if d.switch_name.is_empty() {
                            d.dev
                        } else {
                            d.switch_name
                        },
                        chains: d
                            .chains
                            .into_iter()
                            .map(|c| (c.chain, c.counts.into_iter().collect()))
                            .collect(),
                        maps: d.maps,
                    })
                    .collect();
                Ok(Sample {
                    at_ms: snap.unix_ms,
                    deps,
                })
            }
        }
    }
}

/// Draws `now` (rates against `before`); maps without entries are left out.
fn draw(f: &mut Frame, now: &Sample, before: Option<&Sample>, via: &str) {
    let secs = before.map_or(0.0, |b| now.at_ms.saturating_sub(b.at_ms) as f64 / 1e3);
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
    let shown = |m: &&proto::MapTop| m.total > 0;
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
                .map(|e| Row::new(vec![e.key_text.clone(), e.value_text.clone()]));
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
    let (mut src, via) = Source::open(&a)?;
    let streamed = matches!(src, Source::Daemon(..));
    let every = Duration::from_millis(a.interval);
    if a.once {
        let before = src.sample(a.entries)?;
        if !streamed {
            std::thread::sleep(every);
        }
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
            // The stream's next snapshot comes on its own: keys are
            // watched until shortly before it.
            let wait = if streamed {
                every.saturating_sub(Duration::from_millis(50))
            } else {
                every
            };
            let until = Instant::now() + wait;
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

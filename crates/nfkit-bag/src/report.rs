//! The experiment's plots and its Markdown report: the headline numbers
//! and, for each hypothesis of the seed, whether the data support it,
//! decided from the 95 % confidence intervals.

use crate::error::BagError;
use crate::experiment::{Cell, ExperimentConfig, Point, Run, Sweep, Table};
use crate::plot::{self, Panel, Series};
use crate::server::FilterMode;
use crate::stats::{MannWhitney, Summary};
use std::fmt::Write as _;
use std::time::Duration;

/// The cells of one sweep and mode, in x order.
fn cells(t: &Table, sweep: Sweep, mode: FilterMode) -> Vec<(Point, &Cell)> {
    let mut v: Vec<(Point, &Cell)> = t
        .iter()
        .filter(|((p, m), _)| p.sweep == sweep && *m == mode)
        .map(|((p, _), c)| (*p, c))
        .collect();
    v.sort_by_key(|(p, _)| {
        (
            p.packets,
            p.invalid_percent,
            if p.rate == 0 { u64::MAX } else { p.rate },
        )
    });
    v
}

fn series(
    t: &Table,
    modes: &[FilterMode],
    sweep: Sweep,
    x: &dyn Fn(&Point, &Cell) -> f64,
    y: &dyn Fn(&Cell) -> Summary,
) -> Vec<Series> {
    modes
        .iter()
        .map(|m| Series {
            name: m.name().to_string(),
            points: cells(t, sweep, *m)
                .into_iter()
                .map(|(p, c)| (x(&p, c), y(c)))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn panel(title: &str, x_label: &str, y_label: &str, log_x: bool, series: Vec<Series>) -> Panel {
    Panel {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        log_x,
        series,
    }
}

/// Writes main.svg, packets.svg, rate.svg and loss.svg into the output
/// directory.
pub fn plots(cfg: &ExperimentConfig, t: &Table) -> Result<(), BagError> {
    let m = &cfg.modes;
    let share = |p: &Point, _: &Cell| f64::from(p.invalid_percent);
    let npk = |p: &Point, _: &Cell| p.packets as f64;
    let kpps = |_: &Point, c: &Cell| c.send_kpps.mean;
    let total_cpu = |c: &Cell| sum(&c.server_cpu_ms, &c.client_cpu_ms);
    plot::svg(
        &cfg.out.join("main.svg"),
        &format!(
            "Kernel vs user filtering (mean, 95 % CI, n = {}): top {} datagrams unpaced, bottom {} at {} k/s",
            cfg.reps,
            cfg.share_packets,
            cfg.paced_packets,
            cfg.paced_rate / 1000
        ),
        &[
            panel(
                "unpaced: receive time (first to last datagram)",
                "invalid datagrams (%)",
                "ms",
                false,
                series(t, m, Sweep::Share, &share, &|c| c.receive_ms),
            ),
            panel(
                "unpaced: server thread CPU (user + system)",
                "invalid datagrams (%)",
                "ms",
                false,
                series(t, m, Sweep::Share, &share, &|c| c.server_cpu_ms),
            ),
            panel(
                "unpaced: valid requests lost",
                "invalid datagrams (%)",
                "%",
                false,
                series(t, m, Sweep::Share, &share, &|c| c.loss_percent),
            ),
            panel(
                "paced: receive time",
                "invalid datagrams (%)",
                "ms",
                false,
                series(t, m, Sweep::SharePaced, &share, &|c| c.receive_ms),
            ),
            panel(
                "paced: server thread CPU",
                "invalid datagrams (%)",
                "ms",
                false,
                series(t, m, Sweep::SharePaced, &share, &|c| c.server_cpu_ms),
            ),
            panel(
                "paced: server + client CPU (loopback rx + filter on client)",
                "invalid datagrams (%)",
                "ms",
                false,
                series(t, m, Sweep::SharePaced, &share, &total_cpu),
            ),
        ],
        3,
    )?;
    plot::svg(
        &cfg.out.join("packets.svg"),
        "Number of datagrams, 1 % invalid, unpaced",
        &[
            panel(
                "receive time",
                "datagrams",
                "ms",
                true,
                series(t, m, Sweep::Packets, &npk, &|c| c.receive_ms),
            ),
            panel(
                "valid requests lost",
                "datagrams",
                "%",
                true,
                series(t, m, Sweep::Packets, &npk, &|c| c.loss_percent),
            ),
        ],
        2,
    )?;
    plot::svg(
        &cfg.out.join("rate.svg"),
        &format!(
            "Offered rate, {} datagrams, {} % invalid",
            cfg.rate_packets, cfg.rate_invalid
        ),
        &[
            panel(
                "valid requests lost",
                "achieved sending rate (k datagrams/s)",
                "%",
                false,
                series(t, m, Sweep::Rate, &kpps, &|c| c.loss_percent),
            ),
            panel(
                "server thread CPU",
                "achieved sending rate (k datagrams/s)",
                "ms",
                false,
                series(t, m, Sweep::Rate, &kpps, &|c| c.server_cpu_ms),
            ),
        ],
        2,
    )?;
    plot::svg(
        &cfg.out.join("loss.svg"),
        &format!("Loss and memory, {} datagrams, unpaced", cfg.share_packets),
        &[
            panel(
                "valid requests lost",
                "invalid datagrams (%)",
                "%",
                false,
                series(t, m, Sweep::Share, &share, &|c| c.loss_percent),
            ),
            panel(
                "peak RSS of the process",
                "invalid datagrams (%)",
                "kB",
                false,
                series(t, m, Sweep::Share, &share, &|c| c.vm_hwm_kb),
            ),
        ],
        2,
    )?;
    Ok(())
}

/// The summary of `a + b` (CI half-widths added: conservative).
fn sum(a: &Summary, b: &Summary) -> Summary {
    Summary {
        n: a.n.min(b.n),
        mean: a.mean + b.mean,
        sd: 0.0,
        ci: a.ci + b.ci,
    }
}

/// A hypothesis's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Supported,
    NotSupported,
    Inconclusive,
}

impl Verdict {
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::NotSupported => "not supported",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

fn fmt(s: &Summary) -> String {
    if s.mean.abs() >= 100.0 {
        format!("{:.0} ± {:.0}", s.mean, s.ci)
    } else {
        format!("{:.3} ± {:.3}", s.mean, s.ci)
    }
}

/// How two cells are compared on one measure.
enum Measure<'a> {
    /// By the 95 % CIs of the means: different when they do not overlap.
    Ci(&'a dyn Fn(&Cell) -> Summary),
    /// By a two-sided Mann-Whitney U test at 5 % on the per-run values
    /// (for loss: mostly zeros, a few large values); shown as mean ± CI.
    Rank(&'a dyn Fn(&Cell) -> &[f64], &'a dyn Fn(&Cell) -> Summary),
}

impl Measure<'_> {
    fn summary(&self, c: &Cell) -> Summary {
        match self {
            Measure::Ci(f) | Measure::Rank(_, f) => f(c),
        }
    }

    /// `Less` when `a` is lower than `b` beyond chance, `Greater` when
    /// higher, `Equal` when no difference is detected; and a note.
    fn cmp(&self, a: &Cell, b: &Cell) -> (std::cmp::Ordering, String) {
        use std::cmp::Ordering::*;
        match self {
            Measure::Ci(f) => {
                let (ya, yb) = (f(a), f(b));
                let o = if ya.clearly_below(&yb) {
                    Less
                } else if yb.clearly_below(&ya) {
                    Greater
                } else {
                    Equal
                };
                (o, String::new())
            }
            Measure::Rank(v, _) => {
                let t = MannWhitney::test(v(a), v(b));
                let o = match (t.p < 0.05, t.a_lower) {
                    (false, _) => Equal,
                    (true, true) => Less,
                    (true, false) => Greater,
                };
                (o, format!(" (U test p = {:.3})", t.p))
            }
        }
    }

    fn all_zero(&self, cells: &[(Point, &Cell)]) -> bool {
        cells.iter().all(|(_, c)| self.summary(c).mean == 0.0)
    }
}

fn sign(o: std::cmp::Ordering) -> &'static str {
    match o {
        std::cmp::Ordering::Less => "<",
        std::cmp::Ordering::Greater => ">",
        std::cmp::Ordering::Equal => "≈",
    }
}

/// "An increase of x increases y": for each mode, y at the largest x
/// above y at the smallest beyond chance.
fn increases(t: &Table, modes: &[FilterMode], sweep: Sweep, m: &Measure) -> (Verdict, String) {
    let mut up = 0;
    let mut down = 0;
    let mut zero = true;
    let mut why = Vec::new();
    for &mode in modes {
        let c = cells(t, sweep, mode);
        zero &= m.all_zero(&c);
        let (Some(a), Some(b)) = (c.first(), c.last()) else {
            continue;
        };
        let (o, note) = m.cmp(a.1, b.1);
        match o {
            std::cmp::Ordering::Less => up += 1,
            std::cmp::Ordering::Greater => down += 1,
            std::cmp::Ordering::Equal => {}
        }
        why.push(format!(
            "{}: {} at {} {} {} at {}{note}",
            mode.name(),
            fmt(&m.summary(a.1)),
            a.0.packets,
            sign(o),
            fmt(&m.summary(b.1)),
            b.0.packets
        ));
    }
    let v = if up == modes.len() {
        Verdict::Supported
    } else if down > 0 || zero {
        Verdict::NotSupported
    } else {
        Verdict::Inconclusive
    };
    (v, why.join("; "))
}

/// "Kernel ≤ user" over the points of `sweep` (shares from
/// `from_share`): supported when the kernel is lower beyond chance
/// somewhere and nowhere higher; not supported when higher somewhere;
/// inconclusive when no difference is detected anywhere.
fn kernel_le_user(t: &Table, sweep: Sweep, from_share: u32, m: &Measure) -> (Verdict, String) {
    let k = cells(t, sweep, FilterMode::Kernel);
    let u = cells(t, sweep, FilterMode::User);
    let mut lower = 0;
    let mut higher = 0;
    let mut why = Vec::new();
    for ((p, ck), (_, cu)) in k.iter().zip(u.iter()) {
        if matches!(sweep, Sweep::Share | Sweep::SharePaced) && p.invalid_percent < from_share {
            continue;
        }
        let (o, note) = m.cmp(ck, cu);
        match o {
            std::cmp::Ordering::Less => lower += 1,
            std::cmp::Ordering::Greater => higher += 1,
            std::cmp::Ordering::Equal => {}
        }
        let x = match sweep {
            Sweep::Share | Sweep::SharePaced => format!("{} %", p.invalid_percent),
            Sweep::Packets => format!("{} dgrams", p.packets),
            Sweep::Rate => {
                if p.rate == 0 {
                    "unpaced".to_string()
                } else {
                    format!("{} kpps", p.rate / 1000)
                }
            }
        };
        why.push(format!(
            "{x}: kernel {} {} user {}{note}",
            fmt(&m.summary(ck)),
            sign(o),
            fmt(&m.summary(cu))
        ));
    }
    let v = if higher > 0 {
        Verdict::NotSupported
    } else if lower > 0 {
        Verdict::Supported
    } else {
        Verdict::Inconclusive
    };
    (v, why.join("; "))
}

/// Equivalence margin of "negligible": ± this share of the user mean.
const NEGLIGIBLE: f64 = 0.10;

/// "Negligible" (an equivalence test) at the lowest share of `sweep`:
/// supported when the 95 % CI of the difference kernel − user lies
/// within ± [`NEGLIGIBLE`] of the user mean; not supported when it lies
/// wholly outside; inconclusive otherwise (too noisy to tell).
fn negligible(t: &Table, sweep: Sweep, y: &dyn Fn(&Cell) -> Summary) -> (Verdict, String) {
    let k = cells(t, sweep, FilterMode::Kernel);
    let u = cells(t, sweep, FilterMode::User);
    let (Some((p, ck)), Some((_, cu))) = (k.first(), u.first()) else {
        return (Verdict::Inconclusive, "no data".into());
    };
    let (yk, yu) = (y(ck), y(cu));
    let d = yk.mean - yu.mean;
    // Half-width of the difference's CI (the two intervals combined).
    let hw = (yk.ci * yk.ci + yu.ci * yu.ci).sqrt();
    let margin = NEGLIGIBLE * yu.mean.abs();
    let v = if d.abs() + hw <= margin {
        Verdict::Supported
    } else if d.abs() - hw > margin {
        Verdict::NotSupported
    } else {
        Verdict::Inconclusive
    };
    let pct = |x: f64| {
        if yu.mean != 0.0 {
            x / yu.mean * 100.0
        } else {
            0.0
        }
    };
    (
        v,
        format!(
            "at {} % invalid: kernel {} vs user {} ms, difference {:+.1} % ± {:.1} % (margin ± {:.0} %)",
            p.invalid_percent,
            fmt(&yk),
            fmt(&yu),
            pct(d),
            pct(hw),
            NEGLIGIBLE * 100.0
        ),
    )
}

/// The report.
pub fn markdown(cfg: &ExperimentConfig, t: &Table, runs: &[Run], took: Duration) -> String {
    let mut s = String::new();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let ncpu = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        s,
        "# Bag-server experiment: kernel vs user-space filtering\n"
    );
    let _ = writeln!(
        s,
        "Generated by `nfkit bag experiment` (method: docs/bag.md). Linux {}, {ncpu} CPUs; \
server pinned to CPU {}, client to CPU {}; {} repetitions per point and mode, interleaved; \
{} runs in {:.0} s. Client behaviour Frigg (invalid datagrams spread evenly, \
`BAD` + 12 bytes: as long as a PUT). Means ± 95 % CI half-widths (Student t).\n",
        kernel.trim(),
        cfg.server_cpu,
        cfg.client_cpu,
        cfg.reps,
        runs.len(),
        took.as_secs_f64()
    );
    let _ = writeln!(s, "Files: `runs.csv` (every run), `summary.csv`, `main.svg`, `packets.svg`, `rate.svg`, `loss.svg`.\n");
    let _ = writeln!(s, "![kernel vs user](main.svg)\n");

    let _ = writeln!(s, "## In short\n");
    let pk = cells(t, Sweep::SharePaced, FilterMode::Kernel);
    let pu = cells(t, Sweep::SharePaced, FilterMode::User);
    if let (Some((lo, kl)), Some((_, ul)), Some((hi, kh)), Some((_, uh))) =
        (pk.first(), pu.first(), pk.last(), pu.last())
    {
        let invalid = lo.packets as f64 * f64::from(hi.invalid_percent) / 100.0;
        let saved_us = (uh.server_cpu_ms.mean - kh.server_cpu_ms.mean) * 1e3 / invalid.max(1.0);
        let cost_ns =
            (kl.client_cpu_ms.mean - ul.client_cpu_ms.mean) * 1e6 / (lo.packets as f64).max(1.0);
        let _ = writeln!(
            s,
            "* Paced ({} datagrams at {}/s): at {} % invalid the kernel filter cuts the server's CPU \
time from {} to {} ms, {saved_us:.2} µs per invalid datagram not received; server + client CPU \
from {} to {} ms. At {} % invalid the filter's own cost shows on the client's CPU (where \
loopback runs it): {} vs {} ms, about {cost_ns:.0} ns per datagram.",
            lo.packets,
            cfg.paced_rate,
            hi.invalid_percent,
            fmt(&uh.server_cpu_ms),
            fmt(&kh.server_cpu_ms),
            fmt(&sum(&uh.server_cpu_ms, &uh.client_cpu_ms)),
            fmt(&sum(&kh.server_cpu_ms, &kh.client_cpu_ms)),
            lo.invalid_percent,
            fmt(&kl.client_cpu_ms),
            fmt(&ul.client_cpu_ms),
        );
    }
    let sk = cells(t, Sweep::Share, FilterMode::Kernel);
    let su = cells(t, Sweep::Share, FilterMode::User);
    if let (Some((hi, kh)), Some((_, uh))) = (sk.last(), su.last()) {
        let _ = writeln!(
            s,
            "* Unpaced ({} datagrams): at {} % invalid, receive time kernel {} vs user {} ms, \
valid requests lost kernel {} vs user {} %.",
            hi.packets,
            hi.invalid_percent,
            fmt(&kh.receive_ms),
            fmt(&uh.receive_ms),
            fmt(&kh.loss_percent),
            fmt(&uh.loss_percent),
        );
    }
    let _ = writeln!(
        s,
        "* Paced below saturation the receive time is the client's sending time in every mode: \
wall-clock time shows a filter's benefit only where the server is the bottleneck (the seed's \
times, about 2 s for 100 and for 100,000 datagrams alike, were dominated by something else); CPU \
time and, at saturation, loss show it.\n"
    );
    let _ = writeln!(s, "## Headline: {} datagrams, unpaced\n", cfg.share_packets);
    let _ = writeln!(
        s,
        "| invalid % | mode | receive ms | server CPU ms | client CPU ms | loss % | peak RSS kB |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for ((p, m), c) in t.iter().filter(|((p, _), _)| p.sweep == Sweep::Share) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            p.invalid_percent,
            m.name(),
            fmt(&c.receive_ms),
            fmt(&c.server_cpu_ms),
            fmt(&c.client_cpu_ms),
            fmt(&c.loss_percent),
            fmt(&c.vm_hwm_kb)
        );
    }
    let _ = writeln!(
        s,
        "\n## Paced: {} datagrams at {} datagrams/s\n",
        cfg.paced_packets, cfg.paced_rate
    );
    let _ = writeln!(
        s,
        "| invalid % | mode | receive ms | server CPU ms | client CPU ms | loss % |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for ((p, m), c) in t.iter().filter(|((p, _), _)| p.sweep == Sweep::SharePaced) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            p.invalid_percent,
            m.name(),
            fmt(&c.receive_ms),
            fmt(&c.server_cpu_ms),
            fmt(&c.client_cpu_ms),
            fmt(&c.loss_percent),
        );
    }
    let _ = writeln!(
        s,
        "\n## Offered rate ({} datagrams, {} % invalid)\n",
        cfg.rate_packets, cfg.rate_invalid
    );
    let _ = writeln!(
        s,
        "| rate | mode | achieved kpps | loss % | server CPU ms | runs ended by STOP |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for ((p, m), c) in t.iter().filter(|((p, _), _)| p.sweep == Sweep::Rate) {
        let rate = if p.rate == 0 {
            "unpaced".to_string()
        } else {
            format!("{} kpps", p.rate / 1000)
        };
        let _ = writeln!(
            s,
            "| {rate} | {} | {} | {} | {} | {}/{} |",
            m.name(),
            fmt(&c.send_kpps),
            fmt(&c.loss_percent),
            fmt(&c.server_cpu_ms),
            c.stopped,
            c.runs
        );
    }

    let _ = writeln!(s, "\n## The seed's hypotheses\n");
    let _ = writeln!(
        s,
        "Rules: \"supported\" when the data differ beyond chance in the hypothesis's direction (and \
nowhere against it), \"not supported\" when they differ against it (or, for \"more ... loses \
more\", when nothing is lost at all), \"inconclusive\" when no difference is detected. Times, \
CPU and memory: the 95 % CIs of the means do not overlap. Loss (mostly zeros, a few large \
values, where a t interval means little): a two-sided Mann-Whitney U test at 5 %. T2 asks for a \
*negligible* difference, an equivalence test: supported when the 95 % CI of the difference lies \
within ± 10 % of the user mean, not supported when it lies wholly outside, inconclusive otherwise.\n"
    );
    let modes = &cfg.modes;
    let mut row = |name: &str, text: &str, (v, why): (Verdict, String)| {
        let _ = writeln!(s, "* **{name}** {text} — **{}**. {why}.", v.word());
    };
    row(
        "T1",
        "More datagrams take longer to receive.",
        increases(t, modes, Sweep::Packets, &Measure::Ci(&|c| c.receive_ms)),
    );
    row(
        "T2",
        "The filter's work has negligible impact on the receive time (1 % invalid, unpaced).",
        negligible(t, Sweep::Share, &|c| c.receive_ms),
    );
    row(
        "T2-cpu",
        "... and on the CPU time, server plus client, where the filter's work is done (1 % invalid, paced).",
        negligible(t, Sweep::SharePaced, &|c| sum(&c.server_cpu_ms, &c.client_cpu_ms)),
    );
    row(
        "T3",
        "As the invalid share grows, receiving with the kernel filter takes no longer than with the user-space check (shares ≥ 25 %).",
        kernel_le_user(t, Sweep::Share, 25, &Measure::Ci(&|c| c.receive_ms)),
    );
    row(
        "T3-cpu",
        "(the seed's \"performance is time and memory\") The server's CPU time with the kernel filter is no higher than with the user check (shares ≥ 25 %, paced: no loss to mix in).",
        kernel_le_user(t, Sweep::SharePaced, 25, &Measure::Ci(&|c| c.server_cpu_ms)),
    );
    row(
        "T3-total-cpu",
        "Server plus client CPU (the loopback receive path and the filter run on the sender's CPU) is no higher with the kernel filter (shares ≥ 25 %, paced).",
        kernel_le_user(
            t,
            Sweep::SharePaced,
            25,
            &Measure::Ci(&|c| sum(&c.server_cpu_ms, &c.client_cpu_ms)),
        ),
    );
    row(
        "T3-mem",
        "Peak memory is no higher with the kernel filter (shares ≥ 25 %).",
        kernel_le_user(t, Sweep::Share, 25, &Measure::Ci(&|c| c.vm_hwm_kb)),
    );
    row(
        "L1",
        "More datagrams lose a larger share of valid requests.",
        increases(
            t,
            modes,
            Sweep::Packets,
            &Measure::Rank(&|c| &c.loss_values, &|c| c.loss_percent),
        ),
    );
    row(
        "L2",
        "As the invalid share grows, the kernel filter loses no more valid requests than the user check (shares ≥ 25 %).",
        kernel_le_user(
            t,
            Sweep::Share,
            25,
            &Measure::Rank(&|c| &c.loss_values, &|c| c.loss_percent),
        ),
    );
    row(
        "L2-rate",
        "Across offered rates (50 % invalid), the kernel filter loses no more valid requests than the user check.",
        kernel_le_user(
            t,
            Sweep::Rate,
            0,
            &Measure::Rank(&|c| &c.loss_values, &|c| c.loss_percent),
        ),
    );
    let total_lost: u64 = runs.iter().map(|r| r.lost()).sum();
    let total_overflow: u64 = runs.iter().map(|r| r.server.overflow_drops()).sum();
    // The overflow drops also count the client's STOPs (three) that
    // found the queue full.
    let kernel_ok = runs
        .iter()
        .filter(|r| r.mode == FilterMode::Kernel)
        .all(|r| (r.lost()..=r.lost() + 3).contains(&r.server.overflow_drops()));
    let _ = writeln!(
        s,
        "\n## Loss accounting\n\nValid requests lost over all runs: {total_lost} (sent − distinct \
sequence numbers received); overflow drops of the server sockets (socket drop counter − the \
filter's drops): {total_overflow}. In kernel mode only valid datagrams reach the queue, so each \
overflow drop is a lost request or one of the client's three STOPs: {}.",
        if kernel_ok {
            "lost ≤ overflow drops ≤ lost + 3 in every kernel run"
        } else {
            "**not so in some kernel run** (see runs.csv)"
        }
    );
    let snmp: u64 = runs.iter().filter_map(|r| r.server.rcvbuf_errors).sum();
    let snmp_ok = runs.iter().all(|r| {
        r.server
            .rcvbuf_errors
            .is_none_or(|e| e == r.server.overflow_drops())
    });
    let _ = writeln!(
        s,
        "\nThe namespace's UDP `RcvbufErrors` (/proc/net/snmp, the kernel's count of datagrams \
dropped for a full queue) sum to {snmp}: {}.",
        if snmp_ok {
            "equal to the socket's overflow drops in every run"
        } else {
            "**different from the socket's overflow drops in some run** (see runs.csv)"
        }
    );
    let unstopped: usize = t.values().map(|c| c.runs - c.stopped).sum();
    if unstopped > 0 {
        let _ = writeln!(
            s,
            "\n{unstopped} runs ended by the idle timeout (all three STOPs lost to a full queue); \
their receive time ends at the last datagram received, as for the others."
        );
    }
    s
}

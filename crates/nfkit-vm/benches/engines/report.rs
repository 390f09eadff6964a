//! The engines table and the goals of issue 14, as Markdown (printed and
//! written to `vm-engines.md`) and JSON (`vm-engines.json`).

use crate::rows::COLUMNS;
use crate::Bench;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `target/nfkit-bench` (or under `CARGO_TARGET_DIR`).
pub fn out_dir() -> PathBuf {
    nfkit_corpus::bench_dir()
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One program's medians.
struct Line {
    name: String,
    insns: f64,
    /// (column, median ns, what ran), in [`COLUMNS`] order.
    cells: Vec<(&'static str, Option<f64>, Option<String>)>,
    /// The fastest round of each column (steadier than the median on a
    /// loaded machine).
    best: Vec<Option<f64>>,
    notes: Vec<String>,
}

impl Line {
    fn insns_cell(&self) -> String {
        if self.insns.is_finite() {
            format!("{:.0}", self.insns)
        } else {
            "-".into()
        }
    }

    fn ns(&self, column: &str) -> Option<f64> {
        self.cells.iter().find(|c| c.0 == column).and_then(|c| c.1)
    }
    fn ran(&self, column: &str) -> Option<&str> {
        self.cells
            .iter()
            .find(|c| c.0 == column)
            .and_then(|c| c.2.as_deref())
    }
}

/// A goal of the issue against one program.
struct Goal {
    goal: String,
    program: String,
    /// The measured factor, and the bound it must meet.
    factor: Option<f64>,
    bound: f64,
    /// Met when the factor is at most the bound (else: at least).
    at_most: bool,
    /// "x" for a ratio, " ns" for a time.
    unit: &'static str,
}

impl Goal {
    fn met(&self) -> Option<bool> {
        self.factor.map(|f| {
            if self.at_most {
                f <= self.bound
            } else {
                f >= self.bound
            }
        })
    }
}

pub struct Report {
    lines: Vec<Line>,
    goals: Vec<Goal>,
    rounds: usize,
    batch: Duration,
    quick: bool,
    cpu: String,
    /// The machine's load at the end of the run.
    load: String,
    /// Engines missing or partial, and why.
    notes: Vec<String>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The 1-minute load average and the CPU count: how shared the machine was.
fn load() -> String {
    let avg = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("load average {avg} on {cpus} CPUs")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

impl Report {
    pub fn new(
        benches: &[Bench],
        rounds: usize,
        batch: Duration,
        quick: bool,
        notes: Vec<String>,
    ) -> Report {
        let lines: Vec<Line> = benches
            .iter()
            .map(|b| Line {
                name: b.name.clone(),
                insns: b.insns,
                cells: COLUMNS
                    .iter()
                    .map(|&c| {
                        let row = b.rows.iter().find(|r| r.column == c);
                        (
                            c,
                            row.and_then(|r| median(&r.samples)),
                            row.map(|r| r.ran.clone()),
                        )
                    })
                    .collect(),
                best: COLUMNS
                    .iter()
                    .map(|&c| {
                        let row = b.rows.iter().find(|r| r.column == c)?;
                        row.samples.iter().copied().min_by(f64::total_cmp)
                    })
                    .collect(),
                notes: b.notes.clone(),
            })
            .collect();
        let goals = goals(&lines);
        Report {
            lines,
            goals,
            rounds,
            batch,
            quick,
            cpu: cpu_model(),
            load: load(),
            notes,
        }
    }

    pub fn markdown(&self) -> String {
        let mut s = String::from("## nfkit VM engines (issue 14)\n\n");
        s.push_str(&format!(
            "{} ({}); median ns per run over {} interleaved rounds of {} ms batches{}; \
             native C: clang {}.\n\n",
            self.cpu,
            self.load,
            self.rounds,
            self.batch.as_millis(),
            if self.quick { " (quick mode)" } else { "" },
            crate::native::FLAGS.join(" "),
        ));
        s.push_str(&self.table());
        s.push_str(&format!(
            "\nFastest round of each (ns per run; steadier than the median when the \
             machine is shared):\n\n{}",
            self.best_table()
        ));
        s.push('\n');
        for l in &self.lines {
            if let Some(ran) = l.ran("nfkit JIT").filter(|r| *r != "jit") {
                s.push_str(&format!("* {}: the nfkit JIT row ran {ran}.\n", l.name));
            }
            for n in &l.notes {
                s.push_str(&format!("* {}: {n}\n", l.name));
            }
        }
        for n in &self.notes {
            s.push_str(&format!("* {n}.\n"));
        }
        s.push_str("\n### Goals\n\n");
        for g in &self.goals {
            let state = match g.met() {
                Some(true) => "met",
                Some(false) => "missed",
                None => "not measured",
            };
            s.push_str(&format!(
                "* {} on {}: **{state}** ({}{u}, goal {}{}{u})\n",
                g.goal,
                g.program,
                fmt(g.factor, 2),
                if g.at_most { "<= " } else { ">= " },
                g.bound,
                u = g.unit,
            ));
        }
        s
    }

    /// Header and alignment rows over the engine columns and `extra`.
    fn header(extra: &[&str]) -> String {
        let mut s = String::from("| program | insns/run |");
        for c in COLUMNS.iter().chain(extra) {
            s.push_str(&format!(" {c} |"));
        }
        s.push_str("\n|---|---:|");
        for _ in COLUMNS.iter().chain(extra) {
            s.push_str("---:|");
        }
        s.push('\n');
        s
    }

    /// The medians, with the ratios the goals name.
    fn table(&self) -> String {
        let mut s = Self::header(&["JIT / native", "rbpf interp / nfkit interp"]);
        for l in &self.lines {
            s.push_str(&format!("| {} | {} |", l.name, l.insns_cell()));
            for c in &l.cells {
                s.push_str(&format!(" {} |", fmt(c.1, 1)));
            }
            s.push_str(&format!(
                " {} | {} |\n",
                fmt(ratio(l.ns("nfkit JIT"), l.ns("native C")), 2),
                fmt(ratio(l.ns("rbpf interp"), l.ns("nfkit interp")), 2),
            ));
        }
        s
    }

    /// The fastest round of every engine.
    fn best_table(&self) -> String {
        let mut s = Self::header(&[]);
        for l in &self.lines {
            s.push_str(&format!("| {} | {} |", l.name, l.insns_cell()));
            for b in &l.best {
                s.push_str(&format!(" {} |", fmt(*b, 1)));
            }
            s.push('\n');
        }
        s
    }

    fn json(&self) -> Value {
        let programs: Vec<Value> = self
            .lines
            .iter()
            .map(|l| {
                let engines: serde_json::Map<String, Value> = l
                    .cells
                    .iter()
                    .zip(&l.best)
                    .map(|((c, ns, ran), best)| {
                        let cell = json!({ "ns_per_run": ns, "best_round_ns": best, "ran": ran });
                        (c.to_string(), cell)
                    })
                    .collect();
                json!({
                    "program": l.name,
                    "insns_per_run": l.insns.is_finite().then_some(l.insns),
                    "engines": engines,
                    "jit_over_native": ratio(l.ns("nfkit JIT"), l.ns("native C")),
                    "rbpf_interp_over_nfkit_interp": ratio(l.ns("rbpf interp"), l.ns("nfkit interp")),
                    "notes": l.notes,
                })
            })
            .collect();
        let goals: Vec<Value> = self
            .goals
            .iter()
            .map(|g| {
                json!({
                    "goal": g.goal, "program": g.program, "factor": g.factor,
                    "bound": g.bound, "at_most": g.at_most, "met": g.met(),
                    "unit": g.unit.trim(),
                })
            })
            .collect();
        json!({
            "cpu": self.cpu, "load": self.load, "quick": self.quick, "rounds": self.rounds,
            "batch_ms": self.batch.as_millis() as u64,
            "programs": programs, "goals": goals, "engine_notes": self.notes,
        })
    }

    /// Writes `vm-engines.md` and `vm-engines.json` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let md = dir.join("vm-engines.md");
        std::fs::write(&md, self.markdown()).map_err(|e| format!("{}: {e}", md.display()))?;
        let js = dir.join("vm-engines.json");
        let text = serde_json::to_string_pretty(&self.json()).map_err(|e| e.to_string())?;
        std::fs::write(&js, text + "\n").map_err(|e| format!("{}: {e}", js.display()))?;
        println!("engines: wrote {} and {}", md.display(), js.display());
        Ok(())
    }
}

fn fmt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

/// The goals of the issue against the measured lines (uBPF is absent, so
/// its goals are measured against rbpf, and say so).
fn goals(lines: &[Line]) -> Vec<Goal> {
    let mut goals = Vec::new();
    let find = |prefix: &str| lines.iter().find(|l| l.name.starts_with(prefix));
    for p in ["(a)", "(b)", "(c)"] {
        if let Some(l) = find(p) {
            goals.push(Goal {
                goal: "nfkit JIT <= 1.1x native C".into(),
                program: l.name.clone(),
                factor: ratio(l.ns("nfkit JIT"), l.ns("native C")),
                bound: 1.1,
                at_most: true,
                unit: "x",
            });
        }
    }
    for path in ["legit", "flood"] {
        let chain = find(&format!("(d) ddos {path}"));
        let helpers = lines
            .iter()
            .find(|l| l.name.starts_with("(d) helpers") && l.name.ends_with(&format!("({path})")));
        if let (Some(c), Some(h)) = (chain, helpers) {
            goals.push(Goal {
                goal: format!(
                    "nfkit JIT on the chain <= 0.5x uBPF JIT's helper calls (uBPF absent: rbpf JIT on {})",
                    h.name
                ),
                program: c.name.clone(),
                factor: ratio(c.ns("nfkit JIT"), h.ns("rbpf JIT")),
                bound: 0.5,
                at_most: true,
                unit: "x",
            });
        }
    }
    if let Some(l) = find("(a)") {
        goals.push(Goal {
            goal: "nfkit interp >= 3x faster than uBPF's interpreter (uBPF absent: rbpf interp / nfkit interp)".into(),
            program: l.name.clone(),
            factor: ratio(l.ns("rbpf interp"), l.ns("nfkit interp")),
            bound: 3.0,
            at_most: false,
            unit: "x",
        });
    }
    if let Some(l) = find("exit_only") {
        goals.push(Goal {
            goal: "nfkit interp fixed cost per run <= 30 ns".into(),
            program: l.name.clone(),
            factor: l.ns("nfkit interp"),
            bound: 30.0,
            at_most: true,
            unit: " ns",
        });
    }
    if let Some(l) = find("(b)") {
        goals.push(Goal {
            goal: "nfkit interp <= 1.5 ns per instruction on ALU-heavy code".into(),
            program: l.name.clone(),
            factor: l.ns("nfkit interp").map(|ns| ns / l.insns),
            bound: 1.5,
            at_most: true,
            unit: " ns",
        });
    }
    goals
}

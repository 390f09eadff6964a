//! The experiment (docs/bag.md): three sweeps, each point repeated,
//! server and client on their own CPUs in a fresh network namespace,
//! the repetitions of all points and modes interleaved so that drift of
//! the machine spreads over them alike.
//!
//! * `packets`: 100 ... 10^5 (10^6 with `full`) datagrams, 1 % invalid,
//!   unpaced (the seed's first experiment);
//! * `share`: 1 ... 99 % invalid, 10^5 datagrams, unpaced (its second);
//! * `share-paced`: the same shares at 50,000 datagrams/s, where the
//!   server keeps up, so CPU cost is not mixed with loss;
//! * `rate`: offered rates up to unpaced, 50 % invalid (the threat the
//!   seed named but did not test).
//!
//! Results: `runs.csv` (one row per run), `summary.csv` (mean and 95 %
//! CI per point), SVG plots and `report.md`.

use crate::client::{self, Behaviour, ClientConfig, ClientReport};
use crate::error::{io, BagError};
use crate::filter::{KernelFilter, FILTER_V1};
use crate::server::{FilterMode, ServeConfig, Server, ServerReport};
use crate::stats::Summary;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Which sweep a run belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sweep {
    Packets,
    Share,
    /// The share sweep at an offered rate the server keeps up with.
    SharePaced,
    Rate,
}

impl Sweep {
    pub fn name(&self) -> &'static str {
        match self {
            Sweep::Packets => "packets",
            Sweep::Share => "share",
            Sweep::SharePaced => "share-paced",
            Sweep::Rate => "rate",
        }
    }
}

/// One point of a sweep (a run is a point, a mode and a repetition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub sweep: Sweep,
    pub packets: u64,
    pub invalid_percent: u32,
    /// Offered datagrams per second; 0: unpaced.
    pub rate: u64,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct ExperimentConfig {
    pub out: PathBuf,
    /// Repetitions of each point and mode.
    pub reps: usize,
    pub modes: Vec<FilterMode>,
    /// The packets sweep (1 % invalid, unpaced).
    pub packets: Vec<u64>,
    /// The share sweep (`share_packets` datagrams, unpaced).
    pub shares: Vec<u32>,
    pub share_packets: u64,
    /// The paced share sweep: datagrams and rate (empty shares: none).
    pub paced_packets: u64,
    pub paced_rate: u64,
    /// The rate sweep (0: unpaced), `rate_packets` datagrams at
    /// `rate_invalid` % invalid.
    pub rates: Vec<u64>,
    pub rate_packets: u64,
    pub rate_invalid: u32,
    pub server_cpu: usize,
    pub client_cpu: usize,
    /// `SO_RCVBUF` of the server (`None`: the system's default, about
    /// 300 small datagrams; the reduced sweep asks for 4 MiB, so that a
    /// few milliseconds of preemption on a shared machine lose nothing).
    pub rcvbuf: Option<i32>,
}

impl ExperimentConfig {
    /// The reduced sweep of `make experiment` (a few minutes).
    pub fn reduced(out: PathBuf) -> ExperimentConfig {
        ExperimentConfig {
            out,
            reps: 10,
            modes: vec![FilterMode::Kernel, FilterMode::User, FilterMode::None],
            packets: vec![100, 1000, 10_000, 100_000],
            shares: vec![1, 25, 50, 75, 99],
            share_packets: 100_000,
            paced_packets: 25_000,
            paced_rate: 50_000,
            rates: vec![50_000, 100_000, 200_000, 400_000, 0],
            rate_packets: 50_000,
            rate_invalid: 50,
            server_cpu: 0,
            client_cpu: 1,
            rcvbuf: Some(4 << 20),
        }
    }

    /// The full sweep: 10^6 datagrams too, 20 repetitions.
    pub fn full(out: PathBuf) -> ExperimentConfig {
        ExperimentConfig {
            reps: 20,
            packets: vec![100, 1000, 10_000, 100_000, 1_000_000],
            rate_packets: 200_000,
            paced_packets: 100_000,
            ..ExperimentConfig::reduced(out)
        }
    }

    /// Every point, in sweep order.
    pub fn points(&self) -> Vec<Point> {
        let mut v = Vec::new();
        for &packets in &self.packets {
            v.push(Point {
                sweep: Sweep::Packets,
                packets,
                invalid_percent: 1,
                rate: 0,
            });
        }
        for &invalid_percent in &self.shares {
            v.push(Point {
                sweep: Sweep::Share,
                packets: self.share_packets,
                invalid_percent,
                rate: 0,
            });
        }
        for &invalid_percent in &self.shares {
            if self.paced_packets > 0 {
                v.push(Point {
                    sweep: Sweep::SharePaced,
                    packets: self.paced_packets,
                    invalid_percent,
                    rate: self.paced_rate,
                });
            }
        }
        for &rate in &self.rates {
            v.push(Point {
                sweep: Sweep::Rate,
                packets: self.rate_packets,
                invalid_percent: self.rate_invalid,
                rate,
            });
        }
        v
    }
}

/// One run's measurements.
#[derive(Clone, Debug)]
pub struct Run {
    pub point: Point,
    pub mode: FilterMode,
    pub rep: usize,
    pub client: ClientReport,
    pub server: ServerReport,
    /// Peak resident memory of the process over the run (kB).
    pub vm_hwm_kb: u64,
}

impl Run {
    /// Valid requests sent but not received.
    pub fn lost(&self) -> u64 {
        self.client.puts.saturating_sub(self.server.seqs)
    }

    /// `lost` in % of the valid requests sent.
    pub fn loss_percent(&self) -> f64 {
        if self.client.puts == 0 {
            0.0
        } else {
            100.0 * self.lost() as f64 / self.client.puts as f64
        }
    }

    pub fn receive_ms(&self) -> f64 {
        self.server.receive_time.as_secs_f64() * 1e3
    }

    pub fn server_cpu_ms(&self) -> f64 {
        (self.server.cpu.user + self.server.cpu.sys).as_secs_f64() * 1e3
    }

    pub fn client_cpu_ms(&self) -> f64 {
        (self.client.cpu.user + self.client.cpu.sys).as_secs_f64() * 1e3
    }

    /// The CSV header of [`Run::csv`].
    pub const CSV_HEADER: &'static str = "sweep,mode,packets,invalid_percent,rate,rep,\
sent_valid,sent_invalid,send_errors,client_send_s,client_user_s,client_sys_s,\
received,server_valid,user_invalid,seqs,dup_seqs,lost_valid,loss_percent,\
socket_drops,overflow_drops,rcvbuf_errors,filter_valid,filter_invalid,stopped,\
receive_s,server_user_s,server_sys_s,vm_hwm_kb";

    /// The run as a CSV row.
    pub fn csv(&self) -> String {
        let s = &self.server;
        let c = &self.client;
        let f = s.filter.unwrap_or_default();
        let fv = |x: u64| {
            if s.filter.is_some() {
                x.to_string()
            } else {
                String::new()
            }
        };
        format!(
            "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{},{},{},{},{},{},{:.4},{},{},{},{},{},{},{:.6},{:.6},{:.6},{}",
            self.point.sweep.name(),
            self.mode.name(),
            self.point.packets,
            self.point.invalid_percent,
            self.point.rate,
            self.rep,
            c.valid,
            c.invalid,
            c.send_errors,
            c.elapsed.as_secs_f64(),
            c.cpu.user.as_secs_f64(),
            c.cpu.sys.as_secs_f64(),
            s.received,
            s.valid,
            s.user_invalid,
            s.seqs,
            s.dup_seqs,
            self.lost(),
            self.loss_percent(),
            s.socket_drops,
            s.overflow_drops(),
            s.rcvbuf_errors.map_or(String::new(), |x| x.to_string()),
            fv(f.valid),
            fv(f.invalid),
            s.stopped,
            s.receive_time.as_secs_f64(),
            s.cpu.user.as_secs_f64(),
            s.cpu.sys.as_secs_f64(),
            self.vm_hwm_kb,
        )
    }
}

/// Resets the process's peak RSS to its current RSS (`clear_refs` 5).
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak RSS in kB (`VmHWM`).
fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// One run: a fresh server socket (port chosen by the kernel) on the
/// server CPU, the client on the client CPU, both in namespace `ns`.
pub fn run_once(
    cfg: &ExperimentConfig,
    ns: &str,
    filter: &Arc<KernelFilter>,
    point: Point,
    mode: FilterMode,
    rep: usize,
) -> Result<Run, BagError> {
    let scfg = ServeConfig {
        addr: "127.0.0.1:0"
            .parse()
            .map_err(|_| BagError::Config("address".into()))?,
        mode,
        idle_timeout: Duration::from_millis(500),
        start_timeout: Some(Duration::from_secs(10)),
        rcvbuf: cfg.rcvbuf,
        cpu: Some(cfg.server_cpu),
        ..ServeConfig::default()
    };
    let (addr_tx, addr_rx) = mpsc::channel();
    reset_hwm();
    let (server, client) = std::thread::scope(|s| {
        let server = s.spawn(move || -> Result<ServerReport, BagError> {
            nfkit_kernel::netns::enter_netns(ns)?;
            let v1 = (mode == FilterMode::Kernel).then(|| filter.clone());
            let bound = Server::bind(scfg, v1, None).and_then(|srv| Ok((srv.local_addr()?, srv)));
            match bound {
                Ok((addr, mut srv)) => {
                    let _ = addr_tx.send(Some(addr));
                    srv.run()
                }
                Err(e) => {
                    let _ = addr_tx.send(None);
                    Err(e)
                }
            }
        });
        let client = match addr_rx.recv() {
            Ok(Some(addr)) => {
                let ccfg = ClientConfig {
                    packets: Some(point.packets),
                    invalid_percent: point.invalid_percent,
                    rate: (point.rate > 0).then_some(point.rate),
                    cpu: Some(cfg.client_cpu),
                    ..ClientConfig::new(addr, Behaviour::Frigg)
                };
                s.spawn(move || -> Result<ClientReport, BagError> {
                    nfkit_kernel::netns::enter_netns(ns)?;
                    client::run(&ccfg)
                })
                .join()
                .unwrap_or(Err(BagError::Thread("client panicked")))
            }
            _ => Err(BagError::Thread("server did not start")),
        };
        let server = server
            .join()
            .unwrap_or(Err(BagError::Thread("server panicked")));
        (server, client)
    });
    Ok(Run {
        point,
        mode,
        rep,
        client: client?,
        server: server?,
        vm_hwm_kb: vm_hwm_kb(),
    })
}

/// Runs the whole experiment and writes its files; `progress` gets a
/// line now and then.
pub fn run(cfg: &ExperimentConfig, progress: &mut dyn FnMut(&str)) -> Result<Vec<Run>, BagError> {
    std::fs::create_dir_all(&cfg.out).map_err(io(format!("create {}", cfg.out.display())))?;
    let ns = nfkit_kernel::testbed::Netns::new("bag")?;
    let filter = Arc::new(KernelFilter::compile("filter.py", FILTER_V1)?);
    let points = cfg.points();
    let total = points.len() * cfg.modes.len() * cfg.reps;
    let t0 = Instant::now();
    let mut runs = Vec::with_capacity(total);
    let mut csv = String::from(Run::CSV_HEADER);
    csv.push('\n');
    for rep in 0..cfg.reps {
        for &p in &points {
            // Alternate the order of the modes between repetitions.
            let mut modes = cfg.modes.clone();
            if rep % 2 == 1 {
                modes.reverse();
            }
            for mode in modes {
                let r = run_once(cfg, ns.name(), &filter, p, mode, rep)?;
                csv.push_str(&r.csv());
                csv.push('\n');
                runs.push(r);
            }
        }
        progress(&format!(
            "repetition {}/{} done ({} runs, {:.0} s)",
            rep + 1,
            cfg.reps,
            runs.len(),
            t0.elapsed().as_secs_f64()
        ));
    }
    let runs_csv = cfg.out.join("runs.csv");
    std::fs::write(&runs_csv, csv).map_err(io(format!("write {}", runs_csv.display())))?;
    let table = summarise(&runs);
    let sum_csv = cfg.out.join("summary.csv");
    std::fs::write(&sum_csv, summary_csv(&table))
        .map_err(io(format!("write {}", sum_csv.display())))?;
    crate::report::plots(cfg, &table)?;
    let md = crate::report::markdown(cfg, &table, &runs, t0.elapsed());
    let rep_md = cfg.out.join("report.md");
    std::fs::write(&rep_md, md).map_err(io(format!("write {}", rep_md.display())))?;
    Ok(runs)
}

/// The measures summarised per point and mode.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub receive_ms: Summary,
    pub server_cpu_ms: Summary,
    pub client_cpu_ms: Summary,
    pub loss_percent: Summary,
    /// The loss of each run (for rank tests).
    pub loss_values: Vec<f64>,
    pub overflow_drops: Summary,
    pub vm_hwm_kb: Summary,
    /// Achieved sending rate, thousands of datagrams per second.
    pub send_kpps: Summary,
    /// Runs that ended by STOP (else by the idle timeout).
    pub stopped: usize,
    pub runs: usize,
}

/// Summaries per (point, mode).
pub type Table = BTreeMap<(Point, FilterMode), Cell>;

/// Groups `runs` by point and mode and summarises each measure.
pub fn summarise(runs: &[Run]) -> Table {
    let mut groups: BTreeMap<(Point, FilterMode), Vec<&Run>> = BTreeMap::new();
    for r in runs {
        groups.entry((r.point, r.mode)).or_default().push(r);
    }
    groups
        .into_iter()
        .map(|(k, rs)| {
            let of =
                |f: &dyn Fn(&Run) -> f64| Summary::of(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
            let cell = Cell {
                receive_ms: of(&|r| r.receive_ms()),
                server_cpu_ms: of(&|r| r.server_cpu_ms()),
                client_cpu_ms: of(&|r| r.client_cpu_ms()),
                loss_percent: of(&|r| r.loss_percent()),
                loss_values: rs.iter().map(|r| r.loss_percent()).collect(),
                overflow_drops: of(&|r| r.server.overflow_drops() as f64),
                vm_hwm_kb: of(&|r| r.vm_hwm_kb as f64),
                send_kpps: of(&|r| {
                    let t = r.client.elapsed.as_secs_f64();
                    if t > 0.0 {
                        (r.client.valid + r.client.invalid) as f64 / t / 1e3
                    } else {
                        0.0
                    }
                }),
                stopped: rs.iter().filter(|r| r.server.stopped).count(),
                runs: rs.len(),
            };
            (k, cell)
        })
        .collect()
}

fn summary_csv(t: &Table) -> String {
    let mut s = String::from(
        "sweep,mode,packets,invalid_percent,rate,n,\
receive_ms,receive_ci,server_cpu_ms,server_cpu_ci,client_cpu_ms,client_cpu_ci,\
loss_percent,loss_ci,overflow_drops,overflow_ci,vm_hwm_kb,vm_hwm_ci,stopped\n",
    );
    for ((p, m), c) in t {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.1},{:.1},{:.0},{:.0},{}",
            p.sweep.name(),
            m.name(),
            p.packets,
            p.invalid_percent,
            p.rate,
            c.runs,
            c.receive_ms.mean,
            c.receive_ms.ci,
            c.server_cpu_ms.mean,
            c.server_cpu_ms.ci,
            c.client_cpu_ms.mean,
            c.client_cpu_ms.ci,
            c.loss_percent.mean,
            c.loss_percent.ci,
            c.overflow_drops.mean,
            c.overflow_drops.ci,
            c.vm_hwm_kb.mean,
            c.vm_hwm_kb.ci,
            c.stopped,
        );
    }
    s
}

//! Pcap ports (`NAME:pcap=IN.pcap[,out=OUT.pcap]`, `NAME:pcap,out=OUT.pcap`):
//! offline replay. The input file is read whole when the port opens and
//! given out by one [`RxQueue`] (the engine dispatches its frames to the
//! other workers), each frame with its record's time as arrival time;
//! the queue is [`finished`](RxQueue::finished) at the end of the file.
//! Output is collected per worker (no lock per frame: a worker's queue
//! hands its frames over at each flush) and written when the port
//! closes: each record with the time of the input frame it came from,
//! ordered by arrival time (with one worker, exactly the processing
//! order). A pcap port without `out=` discards what is sent to it and
//! says so (`send` takes nothing: the engine counts `tx_dropped`).

use super::{Batch, OpenPort, OutFrame, PortError, PortSpec, PortStats, RxQueue, TxQueue, BATCH};
use nfkit_pcap::Packet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Opens pcap port `spec` for `workers` workers: one receive queue when
/// it has an input, one transmit queue per worker.
pub fn open(spec: &PortSpec, workers: usize) -> Result<OpenPort, PortError> {
    let PortSpec::Pcap {
        name,
        input,
        output,
    } = spec
    else {
        return Err(PortError::Spec {
            spec: spec.to_string(),
            why: "not a pcap port".into(),
        });
    };
    let mut rx: Vec<Box<dyn RxQueue>> = Vec::new();
    if let Some(path) = input {
        let packets = nfkit_pcap::read_file(path).map_err(|e| PortError::Other {
            port: name.clone(),
            why: format!("reading {}: {e}", path.display()),
        })?;
        rx.push(Box::new(PcapRx { packets, next: 0 }));
    }
    let sink = Arc::new(Sink {
        per_worker: Mutex::new(vec![Vec::new(); workers.max(1)]),
    });
    let tx: Vec<Box<dyn TxQueue>> = (0..workers.max(1))
        .map(|w| -> Box<dyn TxQueue> {
            Box::new(PcapTx {
                worker: w,
                enabled: output.is_some(),
                pending: Vec::new(),
                sink: Arc::clone(&sink),
            })
        })
        .collect();
    let close_name = name.clone();
    let close_out = output.clone();
    Ok(OpenPort {
        spec: spec.clone(),
        ifindex: 0,
        rx,
        tx,
        close: Some(Box::new(move || {
            if let Some(path) = close_out {
                write_output(&close_name, &path, &sink)?;
            }
            Ok(PortStats::default())
        })),
    })
}

/// One input file, given out in batches.
struct PcapRx {
    packets: Vec<Packet>,
    next: usize,
}

impl RxQueue for PcapRx {
    fn recv(&mut self, batch: &mut Batch, _timeout: Duration) -> Result<usize, PortError> {
        batch.len = 0;
        while batch.len < BATCH && batch.len < batch.frames.len() {
            let Some(p) = self.packets.get(self.next) else {
                break;
            };
            let buf = &mut batch.frames[batch.len];
            buf.clear();
            buf.extend_from_slice(&p.data);
            batch.arrival_ns[batch.len] = p.ts_ns;
            batch.len += 1;
            self.next += 1;
        }
        Ok(batch.len)
    }

    fn finished(&self) -> bool {
        self.next >= self.packets.len()
    }
}

/// A recorded output frame: arrival time and bytes.
type Record = (u64, Vec<u8>);

/// What the workers' transmit queues collected, per worker.
struct Sink {
    per_worker: Mutex<Vec<Vec<Record>>>,
}

/// One worker's transmit queue on a pcap port.
struct PcapTx {
    worker: usize,
    /// False for a port without `out=`: frames sent to it are refused.
    enabled: bool,
    pending: Vec<Record>,
    sink: Arc<Sink>,
}

impl TxQueue for PcapTx {
    fn send(&mut self, frames: &[OutFrame<'_>]) -> Result<usize, PortError> {
        if !self.enabled {
            return Ok(0);
        }
        self.pending
            .extend(frames.iter().map(|f| (f.arrival_ns, f.data.to_vec())));
        Ok(frames.len())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut all = self
            .sink
            .per_worker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(mine) = all.get_mut(self.worker) {
            mine.append(&mut self.pending);
        }
        Ok(())
    }
}

impl Drop for PcapTx {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

/// Writes what the workers sent: one worker's frames in its order; the
/// frames of several workers merged by arrival time (stable: a worker's
/// own order is kept among equal times).
fn write_output(name: &str, path: &Path, sink: &Sink) -> Result<(), PortError> {
    let lists = std::mem::take(
        &mut *sink
            .per_worker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    );
    let busy = lists.iter().filter(|l| !l.is_empty()).count();
    let mut all: Vec<Record> = lists.into_iter().flatten().collect();
    if busy > 1 {
        all.sort_by_key(|r| r.0);
    }
    let packets: Vec<Packet> = all.into_iter().map(|(t, d)| Packet::new(t, d)).collect();
    nfkit_pcap::write_file(path, &packets).map_err(|e| PortError::Other {
        port: name.to_string(),
        why: format!("writing {}: {e}", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replays_and_writes() {
        let dir = std::env::temp_dir().join(format!("nfkit-switch-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.pcap");
        let output = dir.join("out.pcap");
        let packets: Vec<Packet> = (0..100u64)
            .map(|i| Packet::new(1_000 + i, vec![i as u8; 60]))
            .collect();
        nfkit_pcap::write_file(&input, &packets).unwrap();
        let spec: PortSpec = format!("p:pcap={},out={}", input.display(), output.display())
            .parse()
            .unwrap();
        let mut port = open(&spec, 2).unwrap();
        assert_eq!(port.rx.len(), 1);
        assert_eq!(port.tx.len(), 2);
        let mut batch = Batch::new();
        let mut got = Vec::new();
        while !port.rx[0].finished() {
            let n = port.rx[0].recv(&mut batch, Duration::ZERO).unwrap();
            assert!(n <= BATCH);
            for i in 0..n {
                got.push((batch.arrival_ns[i], batch.frames[i].clone()));
            }
        }
        assert_eq!(got.len(), 100);
        // Worker 1 sends the odd frames, worker 0 the even ones.
        for (i, (t, d)) in got.iter().enumerate() {
            let f = [OutFrame {
                data: d,
                arrival_ns: *t,
            }];
            assert_eq!(port.tx[i % 2].send(&f).unwrap(), 1);
        }
        for tx in &mut port.tx {
            tx.flush().unwrap();
        }
        port.shut().unwrap();
        let back = nfkit_pcap::read_file(&output).unwrap();
        assert_eq!(back, packets);
        std::fs::remove_dir_all(&dir).ok();
    }
}

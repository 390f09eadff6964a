//! Records a loaded object's programs write with `bpf_perf_event_output`:
//! one perf buffer (libbpf's, one ring per CPU) per `perf_event_array`
//! map, read after each test run so `nfkit prog test` can show them as
//! `nfkit run` shows the VM's.

use crate::error::KernelError;
use crate::load::Loaded;
use libbpf_rs::{PerfBuffer, PerfBufferBuilder};
use nfkit_object::MapType;
use std::sync::{Arc, Mutex};

/// One record as the ring holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfRecord {
    pub map: String,
    pub cpu: u32,
    /// The sample: the program's data, then the packet bytes it asked
    /// for, padded so that with its 4-byte size it fills 8-byte words.
    pub data: Vec<u8>,
}

/// Perf buffers on every `perf_event_array` of an object.
pub struct PerfReader {
    bufs: Vec<PerfBuffer<'static>>,
    sink: Arc<Mutex<Vec<PerfRecord>>>,
}

impl PerfReader {
    /// Opens a perf buffer on each `perf_event_array` map of `loaded`
    /// (none: a reader that never has records).
    pub fn open(loaded: &Loaded) -> Result<PerfReader, KernelError> {
        let sink: Arc<Mutex<Vec<PerfRecord>>> = Arc::default();
        let mut bufs = Vec::new();
        for m in loaded.maps() {
            if m.map_type() != MapType::PerfEventArray {
                continue;
            }
            let (name, out) = (m.name().to_string(), sink.clone());
            let buf = PerfBufferBuilder::new(m.handle())
                .sample_cb(move |cpu: i32, data: &[u8]| {
                    if let Ok(mut v) = out.lock() {
                        v.push(PerfRecord {
                            map: name.clone(),
                            cpu: cpu as u32,
                            data: data.to_vec(),
                        });
                    }
                })
                .build()
                .map_err(|cause| KernelError::MapOp {
                    map: m.name().to_string(),
                    op: "open a perf buffer",
                    cause,
                })?;
            bufs.push(buf);
        }
        Ok(PerfReader { bufs, sink })
    }

    /// The records written since the last call, oldest first per ring.
    pub fn drain(&self) -> Vec<PerfRecord> {
        for b in &self.bufs {
            let _ = b.consume();
        }
        self.sink
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

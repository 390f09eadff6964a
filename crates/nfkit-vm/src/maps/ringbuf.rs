//! Ring buffer (`BPF_MAP_TYPE_RINGBUF`): programs reserve a record, fill
//! it in place and submit or discard it (or copy one in with `output`);
//! Rust consumes submitted records in order. Like the kernel's, each
//! record takes an 8-byte header plus its data rounded up to 8 bytes of
//! the ring's `max_entries` bytes. The buffer is twice the ring's size so
//! that a record that starts near the end stays contiguous (the kernel
//! maps its data pages twice for the same effect).

#![forbid(unsafe_code)]

use crate::mem::GuardedBuf;
use nfkit_object::MapSpec;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

const HDR: usize = 8;
const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Busy,
    Ready,
    Discarded,
}

#[derive(Debug)]
struct Rec {
    pos: u64,
    len: u32,
    status: Status,
}

#[derive(Debug, Default)]
struct State {
    prod: u64,
    cons: u64,
    recs: VecDeque<Rec>,
}

#[derive(Debug)]
pub struct RingBuf {
    pub buf: Arc<GuardedBuf>,
    cap: u64,
    state: Mutex<State>,
}

fn rec_size(len: u32) -> u64 {
    (len as u64 + HDR as u64).div_ceil(8) * 8
}

impl RingBuf {
    pub fn new(spec: &MapSpec) -> Result<RingBuf, String> {
        let cap = spec.max_entries as u64;
        if cap < 16 || !cap.is_power_of_two() || cap > 1 << 30 {
            return Err(format!(
                "ring buffer size {cap} must be a power of two >= 16"
            ));
        }
        Ok(RingBuf {
            buf: Arc::new(GuardedBuf::new(2 * cap as usize).map_err(|e| e.to_string())?),
            cap,
            state: Mutex::new(State::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves `len` bytes; returns the offset of the record's data in
    /// [`RingBuf::buf`], or `None` when the ring is full.
    pub fn reserve(&self, len: u64) -> Option<usize> {
        if len == 0 || len + HDR as u64 > self.cap {
            return None;
        }
        let len = len as u32;
        let mut st = self.lock();
        let size = rec_size(len);
        if st.prod - st.cons + size > self.cap {
            return None;
        }
        let pos = st.prod;
        let off = (pos % self.cap) as usize;
        let _ = self.buf.store(off, 4, (len | BUSY) as u64);
        let _ = self.buf.store(off + 4, 4, 0);
        st.prod += size;
        st.recs.push_back(Rec {
            pos,
            len,
            status: Status::Busy,
        });
        Some(off + HDR)
    }

    /// Submits (or discards) the reserved record whose data starts at
    /// `data_off`; false if there is no such reservation.
    pub fn commit(&self, data_off: usize, discard: bool) -> bool {
        let mut st = self.lock();
        let cap = self.cap;
        match st
            .recs
            .iter_mut()
            .find(|r| (r.pos % cap) as usize + HDR == data_off && r.status == Status::Busy)
        {
            Some(r) => {
                r.status = if discard {
                    Status::Discarded
                } else {
                    Status::Ready
                };
                let hdr = r.len | if discard { DISCARD } else { 0 };
                let _ = self.buf.store((r.pos % cap) as usize, 4, hdr as u64);
                true
            }
            None => false,
        }
    }

    /// `bpf_ringbuf_query`: 0 available data, 1 ring size, 2 consumer
    /// position, 3 producer position.
    pub fn query(&self, what: u64) -> u64 {
        let st = self.lock();
        match what {
            0 => st.prod - st.cons,
            1 => self.cap,
            2 => st.cons,
            3 => st.prod,
            _ => 0,
        }
    }

    /// Takes every submitted record, oldest first, up to the first one
    /// still reserved.
    pub fn consume(&self) -> Vec<Vec<u8>> {
        let mut st = self.lock();
        let mut out = Vec::new();
        while let Some(r) = st.recs.front() {
            match r.status {
                Status::Busy => break,
                Status::Ready => {
                    let mut v = vec![0u8; r.len as usize];
                    let _ = self.buf.read((r.pos % self.cap) as usize + HDR, &mut v);
                    out.push(v);
                }
                Status::Discarded => {}
            }
            let size = rec_size(r.len);
            st.cons += size;
            st.recs.pop_front();
        }
        out
    }
}

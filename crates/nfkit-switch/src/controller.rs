//! The controller channel: frames a chain sent with `CONTROLLER(reason)`,
//! with the reason and the input port, in a bounded lock-free queue.
//! Buffers come from a free list allocated once; a frame that finds no
//! free buffer or a full queue is dropped and counted (`controller_full`).
//! [`Recent`] keeps the latest frames the controller's reader took,
//! numbered, for readers in other processes (`nfkit switch trace`).

use crossbeam_queue::ArrayQueue;
use serde::Serialize;
use std::collections::VecDeque;

/// One frame for the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerFrame {
    /// The verdict's argument.
    pub reason: u32,
    /// The port it came in on (from 1).
    pub in_port: u32,
    pub arrival_ns: u64,
    /// The frame as the chain left it.
    pub data: Vec<u8>,
}

/// The bounded queue between workers and the controller's reader.
pub struct Controller {
    ready: ArrayQueue<ControllerFrame>,
    free: ArrayQueue<Vec<u8>>,
}

impl Controller {
    /// A channel of `capacity` frames (at least 1) of up to `room` bytes
    /// each (longer frames grow their buffer).
    pub fn new(capacity: usize, room: usize) -> Controller {
        let capacity = capacity.max(1);
        let free = ArrayQueue::new(capacity);
        for _ in 0..capacity {
            let _ = free.push(Vec::with_capacity(room));
        }
        Controller {
            ready: ArrayQueue::new(capacity),
            free,
        }
    }

    /// Queues a copy of `data`; false when the channel is full.
    pub fn offer(&self, reason: u32, in_port: u32, arrival_ns: u64, data: &[u8]) -> bool {
        let Some(mut buf) = self.free.pop() else {
            return false;
        };
        buf.clear();
        buf.extend_from_slice(data);
        let f = ControllerFrame {
            reason,
            in_port,
            arrival_ns,
            data: buf,
        };
        match self.ready.push(f) {
            Ok(()) => true,
            Err(f) => {
                let _ = self.free.push(f.data);
                false
            }
        }
    }

    /// Takes every queued frame, oldest first, giving each to `f` (its
    /// buffer goes back to the free list afterwards).
    pub fn drain(&self, mut f: impl FnMut(&ControllerFrame)) -> usize {
        let mut n = 0;
        while let Some(frame) = self.ready.pop() {
            f(&frame);
            let _ = self.free.push(frame.data);
            n += 1;
        }
        n
    }

    /// Frames waiting.
    pub fn len(&self) -> usize {
        self.ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }
}

/// Bytes of each frame [`Recent`] keeps.
pub const TRACE_HEAD: usize = 64;

/// A controller frame as a trace shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Traced {
    /// Its number among the frames the reader took (from 0).
    pub seq: u64,
    pub reason: u32,
    /// The port it came in on (from 1).
    pub in_port: u32,
    pub arrival_ns: u64,
    /// The frame's length.
    pub len: usize,
    /// Its first [`TRACE_HEAD`] bytes.
    #[serde(serialize_with = "hex")]
    pub head: Vec<u8>,
}

fn hex<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>())
}

/// The latest `keep` frames taken from the controller, numbered in the
/// order taken (the oldest leave first).
#[derive(Debug)]
pub struct Recent {
    frames: VecDeque<Traced>,
    keep: usize,
    next: u64,
}

impl Recent {
    pub fn new(keep: usize) -> Recent {
        let keep = keep.max(1);
        Recent {
            frames: VecDeque::with_capacity(keep),
            keep,
            next: 0,
        }
    }

    /// Keeps `f` (its head), numbered next.
    pub fn push(&mut self, f: &ControllerFrame) {
        if self.frames.len() >= self.keep {
            self.frames.pop_front();
        }
        self.frames.push_back(Traced {
            seq: self.next,
            reason: f.reason,
            in_port: f.in_port,
            arrival_ns: f.arrival_ns,
            len: f.data.len(),
            head: f.data[..f.data.len().min(TRACE_HEAD)].to_vec(),
        });
        self.next += 1;
    }

    /// The number the next frame gets.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// The number of the oldest frame kept (`next_seq` when none).
    pub fn oldest_seq(&self) -> u64 {
        self.frames.front().map_or(self.next, |f| f.seq)
    }

    /// Up to `max` frames numbered from `from` on, and how many numbered
    /// from `from` are gone already (left before being read).
    pub fn since(&self, from: u64, max: usize) -> (Vec<Traced>, u64) {
        let missed = self.oldest_seq().saturating_sub(from);
        let frames = self
            .frames
            .iter()
            .filter(|f| f.seq >= from)
            .take(max)
            .cloned()
            .collect();
        (frames, missed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_numbers_keeps_the_latest_and_tells_what_was_missed() {
        let mut r = Recent::new(2);
        let frame = |reason: u32, len: usize| ControllerFrame {
            reason,
            in_port: 1,
            arrival_ns: 0,
            data: vec![0xab; len],
        };
        assert_eq!(r.since(0, 10), (vec![], 0));
        r.push(&frame(1, 10));
        r.push(&frame(2, 100));
        let (got, missed) = r.since(0, 10);
        assert_eq!(missed, 0);
        assert_eq!(got.iter().map(|f| f.seq).collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!((got[1].len, got[1].head.len()), (100, TRACE_HEAD));
        r.push(&frame(3, 5));
        let (got, missed) = r.since(0, 10);
        assert_eq!(missed, 1);
        assert_eq!(got.iter().map(|f| f.reason).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(r.since(2, 10).0.len(), 1);
        assert_eq!(r.since(3, 10), (vec![], 0));
        assert_eq!(r.since(1, 1).0.len(), 1);
    }

    #[test]
    fn bounded_and_recycled() {
        let c = Controller::new(2, 64);
        assert!(c.offer(1, 1, 10, b"a"));
        assert!(c.offer(2, 2, 20, b"bb"));
        assert!(!c.offer(3, 1, 30, b"c"));
        let mut got = Vec::new();
        assert_eq!(
            c.drain(|f| got.push((f.reason, f.in_port, f.data.clone()))),
            2
        );
        assert_eq!(got, vec![(1, 1, b"a".to_vec()), (2, 2, b"bb".to_vec())]);
        assert!(c.offer(4, 1, 40, b"d"));
        assert_eq!(c.len(), 1);
    }
}

//! The controller channel: frames a chain sent with `CONTROLLER(reason)`,
//! with the reason and the input port, in a bounded lock-free queue.
//! Buffers come from a free list allocated once; a frame that finds no
//! free buffer or a full queue is dropped and counted (`controller_full`).

use crossbeam_queue::ArrayQueue;

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

#[cfg(test)]
mod tests {
    use super::*;

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

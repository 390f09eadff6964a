//! Pinning a worker thread to a CPU: worker `i` runs on the `i`-th CPU
//! (round robin) of those the process may use; and its nice value.

/// Pins the calling thread to the `worker`-th allowed CPU (modulo their
/// count). Returns the CPU, or `None` when the system refused.
pub fn pin_current(worker: usize) -> Option<usize> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: cpu_set_t is plain data (all zeros is the empty set), and
    // the pointers passed are to live sets of the size given.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &allowed))
            .collect();
        let cpu = *cpus.get(worker % cpus.len().max(1))?;
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        (libc::sched_setaffinity(0, size, &one) == 0).then_some(cpu)
    }
}

/// Sets the calling thread's nice value (Linux: per thread; below 0
/// needs CAP_SYS_NICE). True when the system took it.
pub fn nice_current(nice: i32) -> bool {
    // SAFETY: plain system calls on the calling thread's id.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) == 0
    }
}

/// The real-time priority (`SCHED_FIFO`) a verified update is applied
/// at ([`Realtime::raise`]): the lowest, enough to run before every
/// normal thread (workers, builds) until the new version is published.
pub const UPDATE_PRIORITY: i32 = 1;

/// The calling thread raised to `SCHED_FIFO` while this lives; dropped,
/// it goes back to the normal policy (`SCHED_OTHER`, its nice value
/// unchanged). On a machine with fewer CPUs than runnable threads an
/// update applied at normal priority is preempted in the middle of a
/// stage for milliseconds (docs/update.md, "Swap time").
pub struct Realtime {
    raised: bool,
}

thread_local! {
    /// This thread is at the priority a [`Realtime`] raised it to.
    static RAISED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Realtime {
    /// Raises the calling thread to `SCHED_FIFO` priority `prio`; when
    /// the system refuses (no CAP_SYS_NICE, no real-time budget, ...),
    /// the guard does nothing and the error says why.
    pub fn raise(prio: i32) -> (Realtime, Option<std::io::Error>) {
        let param = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: a system call on the calling thread (pid 0) with a
        // pointer to a live parameter block.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        if rc == 0 {
            RAISED.with(|r| r.set(true));
            (Realtime { raised: true }, None)
        } else {
            (
                Realtime { raised: false },
                Some(std::io::Error::last_os_error()),
            )
        }
    }

    /// Whether the thread was raised to the real-time priority.
    pub fn raised(&self) -> bool {
        self.raised
    }

    /// Ends the calling thread's real-time priority early, if a live
    /// [`Realtime`] raised it (otherwise nothing changes): the switch
    /// does so once the new version is published, before waiting for
    /// the workers, which must not wait for this thread's CPU.
    pub fn lower() {
        if RAISED.with(|r| r.replace(false)) {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: as in `raise`. Going back to SCHED_OTHER keeps
            // the thread's nice value (Linux keeps its static priority).
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        }
    }
}

impl Drop for Realtime {
    fn drop(&mut self) {
        if self.raised {
            Realtime::lower();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> i32 {
        // SAFETY: a query of the calling thread's policy.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn realtime_is_raised_and_restored() {
        let before = policy();
        let (rt, err) = Realtime::raise(UPDATE_PRIORITY);
        match err {
            None => {
                assert!(rt.raised());
                assert_eq!(policy(), libc::SCHED_FIFO);
            }
            // Not allowed here: nothing changed.
            Some(_) => {
                assert!(!rt.raised());
                assert_eq!(policy(), before);
            }
        }
        drop(rt);
        assert_eq!(policy(), before);
        // Lowered early, then dropped: back once, and only then.
        let (rt, err) = Realtime::raise(UPDATE_PRIORITY);
        Realtime::lower();
        assert_eq!(policy(), before, "{err:?}");
        drop(rt);
        assert_eq!(policy(), before);
        // Nothing raised: lowering changes nothing.
        Realtime::lower();
        assert_eq!(policy(), before);
    }
}

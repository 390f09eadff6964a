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

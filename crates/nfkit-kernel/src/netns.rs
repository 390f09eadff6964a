//! Named network namespaces (`ip netns`), in one place: entering one,
//! running work inside one, finding which has an interface.

use crate::error::{KernelError, NetnsProblem};
use crate::sys;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Moves the calling thread into network namespace `name` (as made by
/// `ip netns add`), keeping its mount namespace: pins under /sys/fs/bpf
/// then outlive the process, unlike under `ip netns exec`, which mounts
/// a fresh /sys.
pub fn enter_netns(name: &str) -> Result<(), KernelError> {
    if name.is_empty() || name.contains('/') {
        return Err(KernelError::Netns {
            name: name.to_string(),
            why: NetnsProblem::BadName,
        });
    }
    let path = Path::new("/run/netns").join(name);
    let f = std::fs::File::open(&path).map_err(|source| KernelError::Netns {
        name: name.to_string(),
        why: NetnsProblem::Open {
            path: path.clone(),
            cause: source,
        },
    })?;
    sys::setns_net(f.as_raw_fd()).map_err(|errno| KernelError::Os {
        what: format!("enter netns `{name}`"),
        errno,
    })
}

/// Runs `f` in named network namespace `netns` (a thread of its own
/// enters it), or here when `None`.
pub fn in_netns<T: Send>(
    netns: Option<&str>,
    f: impl FnOnce() -> Result<T, KernelError> + Send,
) -> Result<T, KernelError> {
    let Some(ns) = netns else {
        return f();
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_netns(ns)?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(KernelError::Internal("netns worker panicked")))
    })
}

/// The named network namespaces (`/run/netns/*`) that have an interface
/// `dev`, for the hint of [`KernelError::NoInterface`]. Each is looked
/// into from a thread of its own ([`in_netns`]).
pub fn netns_with_interface(dev: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter(|ns| in_netns(Some(ns), || Ok(sys::if_nametoindex(dev).is_some())).unwrap_or(false))
        .collect()
}

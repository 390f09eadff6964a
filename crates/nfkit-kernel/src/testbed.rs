//! Network-namespace testbed for kernel tests: RAII network namespaces
//! ([`Netns`]) and veth pairs ([`Veth`]) made with `ip`, addresses in
//! 198.18.0.0/15 only. Dropping a guard removes what it created, also
//! when a test panics (drop runs during unwinding); [`Testbed`] bundles
//! two namespaces joined by one veth pair; [`XdpLink`] attaches a
//! test's own XDP program (a receiver, a probe) until it is dropped.

use crate::error::KernelError;
use crate::load::Prog;
use crate::sys;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

static SERIAL: AtomicU32 = AtomicU32::new(0);

/// A short name unique to this process and call: `nfk<pid><n><suffix>`,
/// at most 15 bytes (interface name limit).
fn unique(suffix: &str) -> String {
    let n = SERIAL.fetch_add(1, Ordering::Relaxed);
    let mut s = format!("nfk{}x{}{}", std::process::id() % 100_000, n % 1000, suffix);
    s.truncate(15);
    s
}

/// Runs `ip ARGS`; its standard output, or an error with its stderr.
pub fn ip(args: &[&str]) -> Result<String, KernelError> {
    let cmd = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| KernelError::Command {
            cmd: cmd.clone(),
            msg: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(KernelError::Command {
            cmd,
            msg: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace, deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace with a fresh name (containing `tag`) and
    /// brings its loopback up.
    pub fn new(tag: &str) -> Result<Netns, KernelError> {
        let name = format!("{}-{tag}", unique(""));
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<String, KernelError> {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all)
    }

    /// Runs a command inside the namespace (`ip netns exec`).
    pub fn exec(&self, argv: &[&str]) -> Result<String, KernelError> {
        let mut all = vec!["netns", "exec", self.name.as_str()];
        all.extend_from_slice(argv);
        ip(&all)
    }

    /// The ifindex of interface `dev` in this namespace.
    pub fn ifindex(&self, dev: &str) -> Result<u32, KernelError> {
        let out = self.ip(&["-o", "link", "show", "dev", dev])?;
        out.split(':')
            .next()
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| KernelError::Command {
                cmd: format!("ip -n {} -o link show dev {dev}", self.name),
                msg: format!("no ifindex in {out:?}"),
            })
    }

    /// Does a namespace called `name` exist?
    pub fn exists(name: &str) -> bool {
        ip(&["netns", "list"])
            .map(|l| l.lines().any(|x| x.split_whitespace().next() == Some(name)))
            .unwrap_or(false)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// One end of a veth pair: its name, namespace and address.
#[derive(Clone, Debug)]
pub struct VethEnd {
    pub dev: String,
    /// Namespace name; `None` for the namespace of the caller.
    pub netns: Option<String>,
    /// `a.b.c.d/len`, inside 198.18.0.0/15.
    pub addr: Option<String>,
}

/// A veth pair, deleted on drop (deleting one end removes both).
#[derive(Debug)]
pub struct Veth {
    pub a: VethEnd,
    pub b: VethEnd,
}

/// Is `cidr` (`a.b.c.d/len`) inside 198.18.0.0/15?
pub fn in_test_range(cidr: &str) -> bool {
    let addr = cidr.split('/').next().unwrap_or("");
    let parts: Vec<u8> = addr.split('.').filter_map(|p| p.parse().ok()).collect();
    parts.len() == 4 && parts.first() == Some(&198) && matches!(parts.get(1), Some(18) | Some(19))
}

impl Veth {
    /// Creates a veth pair with ends in `ns_a` / `ns_b` (or here when
    /// `None`), gives them the addresses (which must be in
    /// 198.18.0.0/15) and brings both up.
    pub fn new(
        ns_a: Option<&Netns>,
        addr_a: Option<&str>,
        ns_b: Option<&Netns>,
        addr_b: Option<&str>,
    ) -> Result<Veth, KernelError> {
        for a in [addr_a, addr_b].into_iter().flatten() {
            if !in_test_range(a) {
                return Err(KernelError::Command {
                    cmd: "testbed address".into(),
                    msg: format!("{a} is outside 198.18.0.0/15"),
                });
            }
        }
        let da = unique("a");
        let db = unique("b");
        ip(&["link", "add", &da, "type", "veth", "peer", "name", &db])?;
        let veth = Veth {
            a: VethEnd {
                dev: da,
                netns: None,
                addr: addr_a.map(String::from),
            },
            b: VethEnd {
                dev: db,
                netns: None,
                addr: addr_b.map(String::from),
            },
        };
        // From here on, `veth` is dropped (and removed) on any error.
        let mut veth = veth;
        for (end, ns) in [(&mut veth.a, ns_a), (&mut veth.b, ns_b)] {
            if let Some(ns) = ns {
                ip(&["link", "set", &end.dev, "netns", ns.name()])?;
                end.netns = Some(ns.name().to_string());
            }
        }
        for end in [&veth.a, &veth.b] {
            if let Some(addr) = &end.addr {
                end_ip(end, &["addr", "add", addr, "dev", &end.dev])?;
            }
            end_ip(end, &["link", "set", &end.dev, "up"])?;
        }
        // The kernel activates a device's queue (and reports it UP) from
        // its link-watch work, up to a second after the carrier came:
        // frames sent before that are dropped. Wait for both ends.
        let t0 = std::time::Instant::now();
        for end in [&veth.a, &veth.b] {
            while !end_ip(end, &["-o", "link", "show", "dev", &end.dev])?.contains("state UP")
                && t0.elapsed() < std::time::Duration::from_secs(3)
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        Ok(veth)
    }
}

/// `ip [-n NS] ARGS` for one end.
pub fn end_ip(end: &VethEnd, args: &[&str]) -> Result<String, KernelError> {
    let mut all: Vec<&str> = Vec::new();
    if let Some(ns) = &end.netns {
        all.extend(["-n", ns.as_str()]);
    }
    all.extend_from_slice(args);
    ip(&all)
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = end_ip(&self.a, &["link", "del", &self.a.dev]);
    }
}

/// Two namespaces joined by a veth pair: `a` (198.18.<n>.1/30) and
/// `b` (198.18.<n>.2/30). Dropped in order: the pair, then the
/// namespaces.
#[derive(Debug)]
pub struct Testbed {
    pub veth: Veth,
    pub ns_a: Netns,
    pub ns_b: Netns,
}

impl Testbed {
    /// Creates the two namespaces and the pair.
    pub fn pair() -> Result<Testbed, KernelError> {
        let ns_a = Netns::new("a")?;
        let ns_b = Netns::new("b")?;
        let n = SERIAL.fetch_add(1, Ordering::Relaxed) % 64;
        let (aa, ab) = (format!("198.18.{n}.1/30"), format!("198.18.{n}.2/30"));
        let veth = Veth::new(Some(&ns_a), Some(&aa), Some(&ns_b), Some(&ab))?;
        Ok(Testbed { veth, ns_a, ns_b })
    }
}

/// A program attached at a device's XDP hook through a bpf_link that is
/// not pinned: the program is detached when this is dropped (or the
/// process ends).
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    id: u32,
}

impl XdpLink {
    /// Attaches `prog` (an XDP program) to `dev` in namespace `netns`
    /// (the caller's when `None`), in the driver (`generic` false) or
    /// in the generic skb path. The calling thread stays where it is.
    pub fn attach(
        prog: &Prog,
        netns: Option<&Netns>,
        dev: &str,
        generic: bool,
    ) -> Result<XdpLink, KernelError> {
        const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
        const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
        let flags = if generic {
            XDP_FLAGS_SKB_MODE
        } else {
            XDP_FLAGS_DRV_MODE
        };
        let fd = prog.fd();
        let ns_path = netns.map(|n| std::path::Path::new("/run/netns").join(n.name()));
        let what = format!("attach XDP program `{}` to {dev}", prog.name());
        let os = |errno| KernelError::Os {
            what: what.clone(),
            errno,
        };
        // A thread of its own enters the namespace (for the ifindex and
        // the attach) and ends there; the link fd is the process's.
        std::thread::scope(|s| {
            s.spawn(|| -> Result<XdpLink, KernelError> {
                if let Some(p) = &ns_path {
                    let f = std::fs::File::open(p).map_err(|e| KernelError::Command {
                        cmd: format!("open {}", p.display()),
                        msg: e.to_string(),
                    })?;
                    sys::setns_net(f.as_raw_fd()).map_err(os)?;
                }
                let ifindex = sys::if_nametoindex(dev).ok_or_else(|| os(libc::ENODEV))?;
                let fd =
                    sys::link_create(fd, ifindex as i32, libbpf_sys::BPF_XDP, flags).map_err(os)?;
                let id = sys::link_info(fd.as_raw_fd()).map_err(os)?.id;
                Ok(XdpLink { fd, id })
            })
            .join()
            .map_err(|_| os(libc::EIO))?
        })
    }

    /// The kernel's id of the link.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The link's fd (valid while this lives).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

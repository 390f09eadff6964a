//! nfkitd's configuration: a TOML file (`--config`), every field
//! optional. Where things live, who may do what, and the request limits.
//!
//! ```toml
//! socket = "/run/nfkit/nfkitd.sock"   # default: $NFKIT_RUN_DIR/nfkitd.sock
//! socket_mode = 0o660                  # the socket file's permissions
//! run_dir = "/run/nfkit"               # records of deployments ($NFKIT_RUN_DIR)
//! data_dir = "/var/lib/nfkit"          # chain registry, audit log ($NFKIT_DATA_DIR)
//! audit_log = "/var/lib/nfkit/audit.log"
//! max_request_bytes = 1048576
//! nf_path = ["/opt/nfs"]              # users' NF objects
//! pin_root = "/sys/fs/bpf/nfkit"      # default: $NFKIT_PIN_ROOT or that
//! state_dir = "/run/nfkit"            # nfkit's state.json ($NFKIT_STATE_DIR)
//! metrics = "127.0.0.1:9464"          # Prometheus text at GET /metrics (off by default)
//! switch_dir = "/run/nfkit/switch"    # switches' control sockets ($NFKIT_RUN_DIR, as `nfkit switch`)
//! nfkit = "/usr/bin/nfkit"             # runs the switches (default: nfkit beside nfkitd)
//!
//! [tls]                                # TCP with mutual TLS (off by default)
//! listen = "0.0.0.0:7443"              # or `nfkitd --listen tcp:ADDR`
//! cert = "/etc/nfkit/tls/server.crt"   # the server's chain (PEM)
//! key = "/etc/nfkit/tls/server.key"    # its private key (PEM)
//! client_ca = "/etc/nfkit/tls/ca.crt"  # clients' certificates must chain to it
//! crl = "/etc/nfkit/tls/ca.crl"        # revoked client certificates (optional, PEM)
//!
//! [roles]                              # by peer uid or gid, or TLS name; highest wins
//! admin = { uids = [0] }               # the default; everyone else is refused
//! deploy = { gids = [1001], names = ["ci"] }
//! read_only = { uids = [1002], names = ["grafana"] }
//! ```
//!
//! A TLS client's names are its certificate's subject CN and its
//! subject alternative names (DNS, email, URI).
//!
//! SIGHUP or the Reload RPC (`nfkit daemon reload`) read the file again
//! and take its `[roles]` and its `[tls]` files (certificate, key,
//! client CA, CRL); the rest is read at start only
//! ([`crate::reload`]).

use crate::auth::Role;
use crate::error::DaemonError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The default run directory (socket, records).
pub const RUN_DIR: &str = "/run/nfkit";
/// The default data directory (chains, audit log).
pub const DATA_DIR: &str = "/var/lib/nfkit";
/// The socket's file name in the run directory.
pub const SOCKET_NAME: &str = "nfkitd.sock";

/// The run directory: `$NFKIT_RUN_DIR`, else `/run/nfkit`.
pub fn run_dir_from_env() -> PathBuf {
    std::env::var_os("NFKIT_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(RUN_DIR))
}

/// Where a client finds the daemon when told nothing:
/// `$NFKIT_RUN_DIR/nfkitd.sock`, else `/run/nfkit/nfkitd.sock`.
pub fn default_socket() -> PathBuf {
    run_dir_from_env().join(SOCKET_NAME)
}

/// Who holds a role: peer uids and gids (Unix socket), certificate
/// names (TLS).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Members {
    #[serde(default)]
    pub uids: Vec<u32>,
    #[serde(default)]
    pub gids: Vec<u32>,
    #[serde(default)]
    pub names: Vec<String>,
}

impl Members {
    fn has(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }

    fn has_name(&self, names: &[String]) -> bool {
        names.iter().any(|n| self.names.contains(n))
    }
}

fn root_only() -> Members {
    Members {
        uids: vec![0],
        ..Members::default()
    }
}

/// The roles (docs/daemon.md "Roles").
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    #[serde(default = "root_only")]
    pub admin: Members,
    #[serde(default)]
    pub deploy: Members,
    #[serde(default)]
    pub read_only: Members,
}

impl Default for Roles {
    fn default() -> Roles {
        Roles {
            admin: root_only(),
            deploy: Members::default(),
            read_only: Members::default(),
        }
    }
}

impl Roles {
    /// The highest role of a peer; `None`: refused.
    pub fn role_of(&self, uid: u32, gid: u32) -> Option<Role> {
        if self.admin.has(uid, gid) {
            Some(Role::Admin)
        } else if self.deploy.has(uid, gid) {
            Some(Role::Deploy)
        } else if self.read_only.has(uid, gid) {
            Some(Role::ReadOnly)
        } else {
            None
        }
    }
}

impl Roles {
    /// The highest role of a TLS client whose verified certificate has
    /// `names`; `None`: refused.
    pub fn role_of_names(&self, names: &[String]) -> Option<Role> {
        if self.admin.has_name(names) {
            Some(Role::Admin)
        } else if self.deploy.has_name(names) {
            Some(Role::Deploy)
        } else if self.read_only.has_name(names) {
            Some(Role::ReadOnly)
        } else {
            None
        }
    }
}

/// The `[tls]` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    listen: Option<std::net::SocketAddr>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    crl: Option<PathBuf>,
}

/// TCP with mutual TLS (see [`crate::tls`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// Where to listen; `None`: not on TCP.
    pub listen: Option<std::net::SocketAddr>,
    /// The server's certificate chain, PEM.
    pub cert: Option<PathBuf>,
    /// Its private key, PEM.
    pub key: Option<PathBuf>,
    /// The CA the clients' certificates must chain to, PEM.
    pub client_ca: Option<PathBuf>,
    /// Revoked client certificates: a CRL from the client CA, PEM
    /// (`nfkit daemon certs --revoke`); `None`: none revoked.
    pub crl: Option<PathBuf>,
}

/// The file as written (every field optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    socket: Option<PathBuf>,
    socket_mode: Option<u32>,
    run_dir: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    max_request_bytes: Option<usize>,
    nf_path: Option<Vec<String>>,
    pin_root: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    metrics: Option<std::net::SocketAddr>,
    switch_dir: Option<PathBuf>,
    nfkit: Option<PathBuf>,
    tls: Option<TlsFile>,
    roles: Option<Roles>,
}

/// The configuration in force.
#[derive(Clone, Debug)]
pub struct Config {
    pub socket: PathBuf,
    pub socket_mode: u32,
    pub run_dir: PathBuf,
    pub data_dir: PathBuf,
    pub audit_log: PathBuf,
    /// Requests whose encoded size is larger are refused.
    pub max_request_bytes: usize,
    pub nf_path: Vec<String>,
    /// nfkit's pins and state file.
    pub paths: nfkit_kernel::deploy::Paths,
    /// Serve Prometheus metrics here (plain HTTP, no authentication:
    /// bind it to loopback or a management network).
    pub metrics: Option<std::net::SocketAddr>,
    /// TCP with mutual TLS: listened on when `tls.listen` is set.
    pub tls: TlsConfig,
    pub roles: Roles,
    /// The software switches' control sockets (where `nfkit switch`
    /// looks: `$NFKIT_RUN_DIR`, else `/run/nfkit/switch`).
    pub switch_dir: PathBuf,
    /// The program that runs switches (`nfkit switch run`).
    pub nfkit: PathBuf,
    /// The file this was read from (read again on reload); `None`: the
    /// defaults.
    pub origin: Option<PathBuf>,
}

impl Config {
    /// The defaults (with the environment's directories).
    pub fn from_env() -> Config {
        Config::from_file(File::default())
    }

    /// Reads `path`; unknown keys and bad values are errors that say where.
    pub fn load(path: &Path) -> Result<Config, DaemonError> {
        let text = std::fs::read_to_string(path).map_err(|e| DaemonError::Io {
            what: "read config",
            path: path.to_path_buf(),
            cause: e,
        })?;
        let mut cfg = Config::parse(&text, path)?;
        cfg.origin = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(cfg)
    }

    /// What `nfkitd` and `nfkit daemon run` serve with: the file at
    /// `config` (else the defaults), then the command line's socket and
    /// metrics address over it.
    pub fn resolve(
        config: Option<&Path>,
        socket: Option<PathBuf>,
        metrics: Option<std::net::SocketAddr>,
    ) -> Result<Config, DaemonError> {
        let mut cfg = match config {
            Some(p) => Config::load(p)?,
            None => Config::from_env(),
        };
        if let Some(s) = socket {
            cfg.socket = s;
        }
        if metrics.is_some() {
            cfg.metrics = metrics;
        }
        Ok(cfg)
    }

    /// Listens on `listen` too: `tcp:ADDR` (TLS, with the `[tls]`
    /// table's certificates); anything else is refused (no plain TCP).
    pub fn listen(&mut self, listen: &str) -> Result<(), DaemonError> {
        let bad = |msg: String| DaemonError::Config {
            path: PathBuf::from("--listen"),
            msg,
        };
        let addr = listen
            .strip_prefix("tcp:")
            .or_else(|| listen.strip_prefix("https://"))
            .ok_or_else(|| {
                bad(format!(
                    "{listen:?}: give tcp:ADDR:PORT (served with mutual TLS; \
                     nfkitd never serves plain TCP)"
                ))
            })?;
        self.tls.listen = Some(
            addr.parse()
                .map_err(|e| bad(format!("{addr:?}: not an address and port: {e}")))?,
        );
        Ok(())
    }

    /// Parses config text (`origin` names it in errors).
    pub fn parse(text: &str, origin: &Path) -> Result<Config, DaemonError> {
        let f: File = toml::from_str(text).map_err(|e| DaemonError::Config {
            path: origin.to_path_buf(),
            msg: e.to_string(),
        })?;
        if let Some(m) = f.socket_mode.filter(|m| *m > 0o777) {
            return Err(DaemonError::Config {
                path: origin.to_path_buf(),
                msg: format!("socket_mode {m:#o}: permissions are at most 0o777"),
            });
        }
        if let Some(t) = f.tls.as_ref().filter(|t| t.listen.is_some()) {
            for (key, v) in [
                ("cert", &t.cert),
                ("key", &t.key),
                ("client_ca", &t.client_ca),
            ] {
                if v.is_none() {
                    return Err(DaemonError::Config {
                        path: origin.to_path_buf(),
                        msg: format!(
                            "[tls] listen needs {key} too (cert, key and client_ca: \
                             nfkitd serves TCP only with mutual TLS)"
                        ),
                    });
                }
            }
        }
        if f.max_request_bytes == Some(0) {
            return Err(DaemonError::Config {
                path: origin.to_path_buf(),
                msg: "max_request_bytes must be more than 0".into(),
            });
        }
        Ok(Config::from_file(f))
    }

    fn from_file(f: File) -> Config {
        let run_dir = f.run_dir.unwrap_or_else(run_dir_from_env);
        let data_dir = f.data_dir.unwrap_or_else(|| {
            std::env::var_os("NFKIT_DATA_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DATA_DIR))
        });
        let mut paths = nfkit_kernel::deploy::Paths::from_env();
        if let Some(p) = f.pin_root {
            paths.pin_root = p;
        }
        if let Some(d) = f.state_dir {
            paths.state_file = d.join("state.json");
        }
        Config {
            socket: f.socket.unwrap_or_else(|| run_dir.join(SOCKET_NAME)),
            socket_mode: f.socket_mode.unwrap_or(0o660),
            audit_log: f.audit_log.unwrap_or_else(|| data_dir.join("audit.log")),
            run_dir,
            data_dir,
            max_request_bytes: f.max_request_bytes.unwrap_or(1 << 20),
            nf_path: f.nf_path.unwrap_or_default(),
            paths,
            metrics: f.metrics,
            tls: f.tls.map_or_else(TlsConfig::default, |t| TlsConfig {
                listen: t.listen,
                cert: t.cert,
                key: t.key,
                client_ca: t.client_ca,
                crl: t.crl,
            }),
            roles: f.roles.unwrap_or_default(),
            switch_dir: f.switch_dir.unwrap_or_else(|| {
                std::env::var_os("NFKIT_RUN_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(RUN_DIR).join("switch"))
            }),
            nfkit: f.nfkit.unwrap_or_else(crate::switches::program),
            origin: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_default_to_root_only_and_the_highest_wins() {
        let c = Config::parse("", Path::new("x.toml")).unwrap();
        assert_eq!(c.roles.role_of(0, 0), Some(Role::Admin));
        assert_eq!(c.roles.role_of(1000, 1000), None);
        let c = Config::parse(
            "[roles]\ndeploy = { gids = [50] }\nread_only = { uids = [7, 8] }\n",
            Path::new("x.toml"),
        )
        .unwrap();
        assert_eq!(c.roles.role_of(0, 0), Some(Role::Admin));
        assert_eq!(c.roles.role_of(7, 50), Some(Role::Deploy));
        assert_eq!(c.roles.role_of(8, 1), Some(Role::ReadOnly));
        assert_eq!(c.roles.role_of(9, 1), None);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_with_the_file_name() {
        let e = Config::parse("sockt = \"/x\"\n", Path::new("a.toml")).unwrap_err();
        assert!(e.to_string().contains("a.toml") && e.to_string().contains("sockt"));
        let e = Config::parse("socket_mode = 0o1777\n", Path::new("a.toml")).unwrap_err();
        assert!(e.to_string().contains("0o777"), "{e}");
        assert!(Config::parse("[roles]\nadmn = {}\n", Path::new("a.toml")).is_err());
    }

    #[test]
    fn tls_names_map_to_roles_and_tcp_needs_all_three_files() {
        let c = Config::parse(
            "[roles]\ndeploy = { names = [\"ci\"] }\nread_only = { names = [\"graf\", \"ci\"] }\n",
            Path::new("x.toml"),
        )
        .unwrap();
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(c.roles.role_of_names(&n(&["ci"])), Some(Role::Deploy));
        assert_eq!(
            c.roles.role_of_names(&n(&["x", "graf"])),
            Some(Role::ReadOnly)
        );
        assert_eq!(c.roles.role_of_names(&n(&["root"])), None);
        assert_eq!(c.roles.role_of_names(&[]), None);
        let e = Config::parse(
            "[tls]\nlisten = \"127.0.0.1:1\"\ncert = \"a\"\nkey = \"b\"\n",
            Path::new("t.toml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("client_ca"), "{e}");
        let mut c = Config::parse("", Path::new("x.toml")).unwrap();
        assert!(c.listen("127.0.0.1:7443").is_err());
        assert!(c.listen("tcp:nowhere").is_err());
        c.listen("tcp:127.0.0.1:7443").unwrap();
        assert_eq!(c.tls.listen, Some("127.0.0.1:7443".parse().unwrap()));
    }
}

//! What a reload changes while nfkitd runs (SIGHUP, or the Reload RPC
//! of `nfkit daemon reload`): the `[roles]` table and the TLS material
//! (server certificate and key, client CA, CRL), read again from the
//! config file. The new material is built whole before anything is
//! replaced: a file that cannot be read or parsed leaves all of the old
//! in force, and the error names the file and says why. Requests read
//! the roles when they start and handshakes read the TLS material, so
//! open connections keep being served and deployments are not touched.
//! Other config keys are read at start only.

use crate::config::{Config, Roles};
use crate::error::DaemonError;
use crate::tls::ServerTls;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// The material a reload replaces.
pub struct Live {
    roles: RwLock<Arc<Roles>>,
    /// `None`: nfkitd does not listen on TCP.
    tls: RwLock<Option<Arc<ServerTls>>>,
}

/// What a reload took.
#[derive(Debug)]
pub struct Reloaded {
    /// The config file read.
    pub config: PathBuf,
    /// The TLS files read (none when nfkitd does not listen on TCP).
    pub tls_files: Vec<PathBuf>,
    /// Certificates the CRL lists.
    pub revoked: usize,
}

impl Reloaded {
    /// `roles and TLS from F (server.crt, ...; CRL: 1 revoked)`.
    pub fn describe(&self) -> String {
        let files: Vec<String> = self
            .tls_files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        if files.is_empty() {
            format!("roles from {}", self.config.display())
        } else {
            format!(
                "roles and TLS from {} ({}; {} revoked)",
                self.config.display(),
                files.join(", "),
                self.revoked
            )
        }
    }
}

impl Live {
    pub fn new(roles: Roles, tls: Option<ServerTls>) -> Live {
        Live {
            roles: RwLock::new(Arc::new(roles)),
            tls: RwLock::new(tls.map(Arc::new)),
        }
    }

    /// The roles in force.
    pub fn roles(&self) -> Arc<Roles> {
        match self.roles.read() {
            Ok(r) => r.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The TLS material in force; `None`: not listening on TCP.
    pub fn tls(&self) -> Option<Arc<ServerTls>> {
        match self.tls.read() {
            Ok(t) => t.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Reads `cfg`'s file again and puts its roles and TLS material in
    /// force, or nothing of it.
    pub fn reload(&self, cfg: &Config) -> Result<Reloaded, DaemonError> {
        let Some(path) = &cfg.origin else {
            return Err(DaemonError::Config {
                path: PathBuf::from("(no config file)"),
                msg: "nfkitd was started without --config: there is nothing to read again".into(),
            });
        };
        let new = Config::load(path)?;
        let listening = self.tls().is_some();
        let tls = if listening {
            Some(ServerTls::new(&new.tls)?)
        } else {
            None
        };
        let done = Reloaded {
            config: path.clone(),
            tls_files: tls.as_ref().map(|t| t.files.clone()).unwrap_or_default(),
            revoked: tls.as_ref().map_or(0, |t| t.revoked),
        };
        if let Some(t) = tls {
            let mut w = self.tls.write().unwrap_or_else(|p| p.into_inner());
            *w = Some(Arc::new(t));
        }
        let mut w = self.roles.write().unwrap_or_else(|p| p.into_inner());
        *w = Arc::new(new.roles);
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Role;

    #[test]
    fn a_reload_takes_the_new_roles_and_a_broken_file_keeps_the_old() {
        let dir = std::env::temp_dir().join(format!("nfkit-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nfkitd.toml");
        std::fs::write(&path, "[roles]\ndeploy = { uids = [7] }\n").unwrap();
        let cfg = Config::load(&path).unwrap();
        let live = Live::new(cfg.roles.clone(), None);
        assert_eq!(live.roles().role_of(7, 7), Some(Role::Deploy));
        std::fs::write(&path, "[roles]\nread_only = { uids = [7] }\n").unwrap();
        let r = live.reload(&cfg).unwrap();
        assert_eq!(r.config, std::fs::canonicalize(&path).unwrap());
        assert!(r.tls_files.is_empty());
        assert_eq!(live.roles().role_of(7, 7), Some(Role::ReadOnly));
        std::fs::write(&path, "[roles]\nread_only = { uidz = [7] }\n").unwrap();
        let e = live.reload(&cfg).unwrap_err().to_string();
        assert!(e.contains("nfkitd.toml") && e.contains("uidz"), "{e}");
        assert_eq!(live.roles().role_of(7, 7), Some(Role::ReadOnly));
        let e = live.reload(&Config::from_env()).unwrap_err().to_string();
        assert!(e.contains("without --config"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

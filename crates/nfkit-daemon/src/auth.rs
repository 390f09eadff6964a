//! Who is calling and what they may do: the Unix peer credentials of the
//! connection (uid, gid, pid, as the kernel gives them at accept) or the
//! names of a TLS client's verified certificate, mapped to a [`Role`] by
//! the config; each RPC needs a role ([`Rpc`]).

use crate::config::Roles;
use serde::Serialize;
use tonic::transport::server::UdsConnectInfo;

/// What a caller may do; each role may do what the ones below it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// List, show, get, dump, check, watch.
    ReadOnly,
    /// Register chains, deploy, undeploy, set and delete map entries.
    Deploy,
    /// Everything, and stopping the daemon.
    Admin,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::Deploy => "deploy",
            Role::Admin => "admin",
        }
    }
}

/// How a caller reached the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Peer {
    /// On the Unix socket: its peer credentials (pid 0: the kernel did
    /// not say).
    Unix { uid: u32, gid: u32, pid: i32 },
    /// Over TCP with TLS: its address and its certificate's names
    /// (subject CN, then SANs; empty: no certificate).
    Tls {
        addr: std::net::SocketAddr,
        names: Vec<String>,
        /// Why the certificate was not accepted (then the caller has no
        /// role): none given, expired, not from the client CA, ...
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
}

/// The caller of one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Identity {
    #[serde(flatten)]
    pub peer: Peer,
    /// `None`: not in any role.
    pub role: Option<Role>,
}

impl Identity {
    /// `uid 1000 gid 1000 pid 42 (deploy)`, `certificate ci from
    /// 127.0.0.1:40000 (deploy)`.
    pub fn describe(&self) -> String {
        let role = self.role.map_or("no role", Role::name);
        match &self.peer {
            Peer::Unix { uid, gid, pid } => format!("uid {uid} gid {gid} pid {pid} ({role})"),
            Peer::Tls { addr, .. } => format!("{} from {addr} ({role})", self.name()),
        }
    }

    /// Who, briefly: `uid 1000`, `certificate ci`.
    pub fn name(&self) -> String {
        match &self.peer {
            Peer::Unix { uid, .. } => format!("uid {uid}"),
            Peer::Tls { names, .. } => match names.first() {
                Some(n) => format!("certificate {n}"),
                None => "a TLS client without certificate".into(),
            },
        }
    }

    /// Why the caller is not authenticated, when it is not (a TLS client
    /// whose certificate was refused or missing).
    pub fn unauthenticated(&self) -> Option<&str> {
        match &self.peer {
            Peer::Tls {
                refused: Some(why), ..
            } => Some(why),
            _ => None,
        }
    }
}

/// The caller of `req`: its connection's peer credentials (Unix socket)
/// or its client certificate (TLS, see [`crate::tls`]); `None` when the
/// connection has neither.
pub fn identify<T>(req: &tonic::Request<T>, roles: &Roles) -> Option<Identity> {
    let ext = req.extensions();
    identify_from(
        ext.get::<crate::tls::TlsPeer>(),
        ext.get::<UdsConnectInfo>(),
        roles,
    )
}

/// [`identify`] from a connection's TLS peer or Unix peer credentials
/// (also used by [`crate::gate`] on requests no service saw).
pub fn identify_from(
    tls: Option<&crate::tls::TlsPeer>,
    uds: Option<&UdsConnectInfo>,
    roles: &Roles,
) -> Option<Identity> {
    if let Some(t) = tls {
        let (names, refused) = match &t.cert {
            Ok(names) => (names.clone(), None),
            Err(why) => (Vec::new(), Some(why.clone())),
        };
        let role = match refused {
            None => roles.role_of_names(&names),
            Some(_) => None,
        };
        return Some(Identity {
            peer: Peer::Tls {
                addr: t.addr,
                names,
                refused,
            },
            role,
        });
    }
    let cred = uds?.peer_cred?;
    Some(Identity {
        peer: Peer::Unix {
            uid: cred.uid(),
            gid: cred.gid(),
            pid: cred.pid().unwrap_or(0),
        },
        role: roles.role_of(cred.uid(), cred.gid()),
    })
}

/// An RPC: its full name, the role it needs, whether it changes anything.
#[derive(Clone, Copy, Debug)]
pub struct Rpc {
    pub name: &'static str,
    pub needs: Role,
    pub changes: bool,
}

macro_rules! rpcs {
    ($($id:ident = $name:literal, $role:ident, $changes:literal;)*) => {
        $(pub const $id: Rpc = Rpc { name: $name, needs: Role::$role, changes: $changes };)*
        /// Every RPC the daemon serves.
        pub const ALL: &[Rpc] = &[$($id),*];
    };
}

/// The RPCs, by name.
pub mod rpc {
    use super::{Role, Rpc};
    rpcs! {
        LIST_NFS = "nfkit.v1.NfService/ListNfs", ReadOnly, false;
        SHOW_NF = "nfkit.v1.NfService/ShowNf", ReadOnly, false;
        REGISTER_NF = "nfkit.v1.NfService/RegisterNf", Deploy, true;
        REGISTER_CHAIN = "nfkit.v1.ChainService/RegisterChain", Deploy, true;
        LIST_CHAINS = "nfkit.v1.ChainService/ListChains", ReadOnly, false;
        GET_CHAIN = "nfkit.v1.ChainService/GetChain", ReadOnly, false;
        CHECK_CHAIN = "nfkit.v1.ChainService/CheckChain", ReadOnly, false;
        DEPLOY = "nfkit.v1.DeploymentService/Deploy", Deploy, true;
        REDEPLOY = "nfkit.v1.DeploymentService/Redeploy", Deploy, true;
        UNDEPLOY = "nfkit.v1.DeploymentService/Undeploy", Deploy, true;
        LIST_DEPLOYMENTS = "nfkit.v1.DeploymentService/ListDeployments", ReadOnly, false;
        LIST_MAPS = "nfkit.v1.MapService/ListMaps", ReadOnly, false;
        GET_ENTRY = "nfkit.v1.MapService/GetEntry", ReadOnly, false;
        SET_ENTRY = "nfkit.v1.MapService/SetEntry", Deploy, true;
        DELETE_ENTRY = "nfkit.v1.MapService/DeleteEntry", Deploy, true;
        DUMP_MAP = "nfkit.v1.MapService/DumpMap", ReadOnly, false;
        WATCH_MAP = "nfkit.v1.MapService/WatchMap", ReadOnly, false;
        WATCH_STATS = "nfkit.v1.StatsService/WatchStats", ReadOnly, false;
        GET_INFO = "nfkit.v1.DaemonService/GetInfo", ReadOnly, false;
        SHUTDOWN = "nfkit.v1.DaemonService/Shutdown", Admin, true;
        RELOAD = "nfkit.v1.DaemonService/Reload", Admin, true;
        DEPLOY_SWITCH = "nfkit.v1.SwitchService/DeploySwitch", Deploy, true;
        REDEPLOY_SWITCH = "nfkit.v1.SwitchService/RedeploySwitch", Deploy, true;
        UNDEPLOY_SWITCH = "nfkit.v1.SwitchService/UndeploySwitch", Deploy, true;
        LIST_SWITCHES = "nfkit.v1.SwitchService/ListSwitches", ReadOnly, false;
        QUERY_SWITCH = "nfkit.v1.SwitchService/QuerySwitch", ReadOnly, false;
        CHANGE_SWITCH = "nfkit.v1.SwitchService/ChangeSwitch", Deploy, true;
        REKEY_SWITCH = "nfkit.v1.SwitchService/RekeySwitch", Admin, true;
    }
}

//! Who is calling and what they may do: the Unix peer credentials of the
//! connection (uid, gid, pid, as the kernel gives them at accept) mapped
//! to a [`Role`] by the config; each RPC needs a role ([`Rpc`]).

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

/// The caller of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// 0 when the kernel did not say.
    pub pid: i32,
    /// `None`: not in any role.
    pub role: Option<Role>,
}

impl Identity {
    /// `uid 1000 gid 1000 pid 42 (deploy)`.
    pub fn describe(&self) -> String {
        format!(
            "uid {} gid {} pid {} ({})",
            self.uid,
            self.gid,
            self.pid,
            self.role.map_or("no role", Role::name)
        )
    }
}

/// The caller of `req`, from its connection's peer credentials; `None`
/// when the connection has none (not a Unix socket).
pub fn identify<T>(req: &tonic::Request<T>, roles: &Roles) -> Option<Identity> {
    let info = req.extensions().get::<UdsConnectInfo>()?;
    let cred = info.peer_cred?;
    Some(Identity {
        uid: cred.uid(),
        gid: cred.gid(),
        pid: cred.pid().unwrap_or(0),
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
    }
}

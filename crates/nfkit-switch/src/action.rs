//! What the switch does with a resolved verdict (docs/abi.md 1, the
//! "software switch" column; docs/switch.md): ports are numbered from 1
//! in `--port` order, and internally indexed from 0.

use nfkit_abi::verdict::{self, Action};

/// Where a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// ABORTED, DROP: dropped, counted by action.
    Drop,
    /// Out of port index `p` (TX: the ingress port; REDIRECT(p + 1);
    /// PASS and HOST: the host port).
    Port(usize),
    /// Out of every port but the ingress one.
    Flood,
    /// To the controller channel, with the reason.
    Controller(u32),
    /// PASS or HOST without a host port: dropped, counted.
    NoHostPort,
    /// REDIRECT to a port number that does not exist: dropped, counted.
    NoSuchPort,
}

/// The decision for verdict `(action, arg)` of a frame that came in on
/// port index `ingress`, with `nports` ports and the host queues `hosts`
/// (port indexes; PASS goes out of queue 0, `HOST(q)` out of queue `q`,
/// or queue 0 when there is no queue `q`).
pub fn decide(
    action: Action,
    arg: u32,
    ingress: usize,
    nports: usize,
    hosts: &[usize],
) -> Decision {
    let host = |q: usize| hosts.get(q).or(hosts.first()).copied();
    match action {
        Action::Aborted | Action::Drop => Decision::Drop,
        Action::Pass => host(0).map_or(Decision::NoHostPort, Decision::Port),
        Action::Host => host(arg as usize).map_or(Decision::NoHostPort, Decision::Port),
        Action::Tx => Decision::Port(ingress),
        Action::Redirect => match usize::try_from(arg) {
            Ok(n) if n >= 1 && n <= nports => Decision::Port(n - 1),
            _ => Decision::NoSuchPort,
        },
        Action::Flood => Decision::Flood,
        Action::Controller => Decision::Controller(arg),
    }
}

/// The verdict a run's `r0` stands for: itself when it is a verdict,
/// else `fault` (and `true`: a fault to count). The switch classifier
/// always returns a verdict; anything else is a broken program.
pub fn resolve(r0: Option<u64>, fault: u64) -> (Action, u32, bool) {
    match r0.and_then(verdict::decode) {
        Some((a, arg)) => (a, arg, false),
        None => {
            let (a, arg) = verdict::decode(fault).unwrap_or((Action::Drop, 0));
            (a, arg, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        assert_eq!(decide(Action::Drop, 0, 0, 3, &[]), Decision::Drop);
        assert_eq!(decide(Action::Pass, 0, 0, 3, &[]), Decision::NoHostPort);
        assert_eq!(decide(Action::Host, 2, 0, 3, &[2]), Decision::Port(2));
        // Host queues: PASS and HOST(0) to the first, HOST(q) to the
        // q-th, a queue that does not exist to the first.
        let hosts = [2, 0, 1];
        assert_eq!(decide(Action::Pass, 0, 0, 3, &hosts), Decision::Port(2));
        assert_eq!(decide(Action::Host, 0, 0, 3, &hosts), Decision::Port(2));
        assert_eq!(decide(Action::Host, 1, 0, 3, &hosts), Decision::Port(0));
        assert_eq!(decide(Action::Host, 2, 0, 3, &hosts), Decision::Port(1));
        assert_eq!(decide(Action::Host, 9, 0, 3, &hosts), Decision::Port(2));
        assert_eq!(decide(Action::Host, 1, 0, 3, &[]), Decision::NoHostPort);
        assert_eq!(decide(Action::Tx, 0, 1, 3, &[]), Decision::Port(1));
        assert_eq!(decide(Action::Redirect, 3, 0, 3, &[]), Decision::Port(2));
        assert_eq!(decide(Action::Redirect, 4, 0, 3, &[]), Decision::NoSuchPort);
        assert_eq!(decide(Action::Redirect, 0, 0, 3, &[]), Decision::NoSuchPort);
        assert_eq!(decide(Action::Flood, 0, 0, 3, &[]), Decision::Flood);
        assert_eq!(
            decide(Action::Controller, 9, 0, 3, &[]),
            Decision::Controller(9)
        );
        let drop = Action::Drop.verdict(0);
        assert_eq!(
            resolve(Some(Action::Tx.verdict(0)), drop),
            (Action::Tx, 0, false)
        );
        assert_eq!(resolve(Some(5), drop), (Action::Drop, 0, true));
        assert_eq!(resolve(None, drop), (Action::Drop, 0, true));
    }
}

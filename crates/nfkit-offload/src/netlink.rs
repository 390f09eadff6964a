//! The rtnetlink side: a clsact qdisc on a device, flower filters added
//! at its ingress, listed with their packet counts, and deleted
//! (netlink-packet-route messages over a netlink-sys socket).

use crate::flower::{FlowerRule, ETH_P_ALL};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL,
    NLM_F_REQUEST,
};
use netlink_packet_route::tc::{
    TcAttribute, TcFilterFlowerOption, TcFilterU32Option, TcHandle, TcMessage, TcOption, TcU32Key,
    TcU32OptionFlags, TcU32Selector, TcU32SelectorFlags,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// A netlink failure: what was asked, the errno and the kernel's
/// extended-ack text when it gave one.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("netlink socket: {0}")]
    Socket(std::io::Error),
    #[error("{what}: {}{}", std::io::Error::from_raw_os_error(*errno), ext.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Kernel {
        what: String,
        errno: i32,
        ext: Option<String>,
    },
    #[error("{what}: kernel lacks cls_flower (`tc ... flower` is not available: CONFIG_NET_CLS_FLOWER unset or the module missing){}", ext.as_ref().map(|m| format!("; kernel says: {m}")).unwrap_or_default())]
    NoFlower { what: String, ext: Option<String> },
    #[error("{what}: kernel lacks the tc action the rules need (act_gact or act_mirred){}", ext.as_ref().map(|m| format!("; kernel says: {m}")).unwrap_or_default())]
    NoAction { what: String, ext: Option<String> },
    #[error("{what}: bad netlink reply: {cause}")]
    Decode { what: String, cause: String },
}

/// The ingress parent of a clsact (or ingress) qdisc: `ffff:fff2`.
const INGRESS_PARENT: TcHandle = TcHandle {
    major: 0xffff,
    minor: TcHandle::MIN_INGRESS,
};

/// One filter at a device's ingress, as a dump shows it.
#[derive(Clone, Debug)]
pub struct Filter {
    pub prio: u32,
    pub protocol: u16,
    pub handle: u32,
    pub kind: String,
    /// Flower options (empty for other kinds).
    pub options: Vec<TcFilterFlowerOption>,
    /// A `u32` filter's keys: `(value, mask, offset)`, the 32-bit word
    /// at `offset` from the network header (host order, first byte
    /// most significant).
    pub u32_keys: Vec<(u32, u32, i32)>,
}

/// A route netlink socket.
pub struct Tc {
    sock: Socket,
    seq: u32,
}

impl Tc {
    /// Opens one (in the calling thread's network namespace).
    pub fn open() -> Result<Tc, NetlinkError> {
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(NetlinkError::Socket)?;
        sock.bind_auto().map_err(NetlinkError::Socket)?;
        sock.connect(&SocketAddr::new(0, 0))
            .map_err(NetlinkError::Socket)?;
        // Best effort: the extended-ack text makes errors say why.
        let _ = sock.set_ext_ack(true);
        let _ = sock.set_cap_ack(true);
        Ok(Tc { sock, seq: 1 })
    }

    /// Sends `msg` with `flags` and collects the replies until the ack
    /// (or the end of a dump).
    fn request(
        &mut self,
        what: &str,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>, NetlinkError> {
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_REQUEST | flags;
        self.seq = self.seq.wrapping_add(1);
        hdr.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
        req.finalize();
        let mut buf = vec![0u8; req.header.length as usize];
        req.serialize(&mut buf);
        self.sock.send(&buf, 0).map_err(NetlinkError::Socket)?;
        let dump = flags & NLM_F_DUMP == NLM_F_DUMP;
        let mut out = Vec::new();
        loop {
            let (data, _) = self.sock.recv_from_full().map_err(NetlinkError::Socket)?;
            let mut off = 0;
            while off < data.len() {
                let m: NetlinkMessage<RouteNetlinkMessage> =
                    NetlinkMessage::deserialize(&data[off..]).map_err(|e| {
                        NetlinkError::Decode {
                            what: what.to_string(),
                            cause: e.to_string(),
                        }
                    })?;
                let len = m.header.length as usize;
                if m.header.sequence_number == self.seq {
                    match m.payload {
                        NetlinkPayload::Done(_) => return Ok(out),
                        NetlinkPayload::Error(e) => match e.code {
                            None => return Ok(out),
                            Some(code) => {
                                return Err(NetlinkError::Kernel {
                                    what: what.to_string(),
                                    errno: -code.get(),
                                    ext: ext_ack(&e.header),
                                })
                            }
                        },
                        NetlinkPayload::InnerMessage(i) => {
                            out.push(i);
                            if !dump {
                                // A reply without ack: keep reading.
                            }
                        }
                        _ => {}
                    }
                }
                if len == 0 {
                    break;
                }
                off += len;
            }
        }
    }

    /// The ifindex of device `dev` (in this thread's namespace).
    pub fn ifindex(&mut self, dev: &str) -> Result<u32, NetlinkError> {
        use netlink_packet_route::link::{LinkAttribute, LinkMessage};
        let mut m = LinkMessage::default();
        m.attributes.push(LinkAttribute::IfName(dev.to_string()));
        let what = format!("find interface `{dev}`");
        let replies = self.request(&what, RouteNetlinkMessage::GetLink(m), NLM_F_ACK)?;
        replies
            .iter()
            .find_map(|r| match r {
                RouteNetlinkMessage::NewLink(l) => Some(l.header.index),
                _ => None,
            })
            .ok_or(NetlinkError::Decode {
                what,
                cause: "no link in the reply".into(),
            })
    }

    /// Whether a device with `ifindex` exists in this namespace.
    pub fn link_exists(&mut self, ifindex: u32) -> bool {
        use netlink_packet_route::link::LinkMessage;
        let mut m = LinkMessage::default();
        m.header.index = ifindex;
        self.request("find interface", RouteNetlinkMessage::GetLink(m), NLM_F_ACK)
            .is_ok_and(|r| {
                r.iter().any(
                    |x| matches!(x, RouteNetlinkMessage::NewLink(l) if l.header.index == ifindex),
                )
            })
    }

    /// Adds a clsact qdisc to `ifindex`; false when one (or an ingress
    /// qdisc) is there already.
    pub fn ensure_clsact(&mut self, ifindex: u32) -> Result<bool, NetlinkError> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = TcHandle::CLSACT;
        m.header.handle = TcHandle {
            major: 0xffff,
            minor: 0,
        };
        m.attributes.push(TcAttribute::Kind("clsact".into()));
        match self.request(
            "add clsact qdisc",
            RouteNetlinkMessage::NewQueueDiscipline(m),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        ) {
            Ok(_) => Ok(true),
            Err(NetlinkError::Kernel { errno, .. }) if errno == libc_eexist() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes the clsact qdisc of `ifindex` (and every filter in it).
    pub fn delete_clsact(&mut self, ifindex: u32) -> Result<(), NetlinkError> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = TcHandle::CLSACT;
        m.header.handle = TcHandle {
            major: 0xffff,
            minor: 0,
        };
        m.attributes.push(TcAttribute::Kind("clsact".into()));
        self.request(
            "delete clsact qdisc",
            RouteNetlinkMessage::DelQueueDiscipline(m),
            NLM_F_ACK,
        )
        .map(|_| ())
    }

    /// Adds `rule` at the ingress of `ifindex`.
    pub fn add_flower(&mut self, ifindex: u32, rule: &FlowerRule) -> Result<(), NetlinkError> {
        let mut m = filter_message(ifindex, rule, 0);
        if let Some(u) = &rule.u32_filter {
            if u.total_length {
                return self.add_u32_total_length(ifindex, rule, u);
            }
            let o = u32_options(
                selector(&u.keys, true),
                u.flags,
                None,
                Some(&u.actions),
                None,
            );
            m.attributes.push(TcAttribute::Kind("u32".into()));
            m.attributes.push(TcAttribute::Options(
                o.into_iter().map(TcOption::U32).collect(),
            ));
        } else {
            m.attributes.push(TcAttribute::Kind("flower".into()));
            m.attributes.push(TcAttribute::Options(
                rule.options.iter().cloned().map(TcOption::Flower).collect(),
            ));
        }
        let kind = if rule.u32_filter.is_some() {
            "u32 filter"
        } else {
            "flower rule"
        };
        let what = format!("add {kind} prio {}", rule.prio);
        match self.request(
            &what,
            RouteNetlinkMessage::NewTrafficFilter(m),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        ) {
            Ok(_) => Ok(()),
            // tc_new_tfilter answers ENOENT when no classifier of the
            // kind is registered (and cannot be loaded).
            Err(NetlinkError::Kernel { errno, ext, .. })
                if errno == 2 && ext.as_deref().is_none_or(|m| m.contains("classifier")) =>
            {
                Err(NetlinkError::NoFlower { what, ext })
            }
            Err(NetlinkError::Kernel { errno, ext, .. })
                if errno == 2 && ext.as_deref().is_some_and(|m| m.contains("action module")) =>
            {
                Err(NetlinkError::NoAction { what, ext })
            }
            Err(e) => Err(e),
        }
    }

    /// A `u32` rule that matches only frames holding their IPv4 total
    /// length ([`crate::u32match::total_length_nodes`]): a hash table of
    /// its own, one node in it per `tot_len & 3` that checks a mask-0 key
    /// ending at the total length (found through the variable offset)
    /// and runs the actions, then the root node with the rule's keys
    /// that links to it.
    fn add_u32_total_length(
        &mut self,
        ifindex: u32,
        rule: &FlowerRule,
        u: &crate::flower::U32Filter,
    ) -> Result<(), NetlinkError> {
        let ht = crate::u32match::table_id(rule.prio);
        let send = |tc: &mut Tc, what: String, handle: u32, o: Vec<TcFilterU32Option>| {
            let mut m = filter_message(ifindex, rule, handle);
            m.attributes.push(TcAttribute::Kind("u32".into()));
            m.attributes.push(TcAttribute::Options(
                o.into_iter().map(TcOption::U32).collect(),
            ));
            tc.request(
                &what,
                RouteNetlinkMessage::NewTrafficFilter(m),
                NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
            )
            .map(|_| ())
        };
        send(
            self,
            format!("add u32 hash table {:#x} prio {}", ht >> 20, rule.prio),
            ht,
            vec![TcFilterU32Option::Divisor(1)],
        )?;
        for (i, (keys, nexthdr)) in crate::u32match::total_length_nodes().iter().enumerate() {
            let mut sel = selector(keys, true);
            // A mask-0 key at `nexthdr+N`: off2 added (offmask all ones).
            let mut key = TcU32Key::default();
            key.off = *nexthdr;
            key.offmask = -1;
            sel.keys.push(key);
            sel.nkeys += 1;
            let o = u32_options(sel, u.flags, None, Some(&u.actions), Some(ht));
            send(
                self,
                format!("add u32 total-length node {i} prio {}", rule.prio),
                ht | (i as u32 + 1),
                o,
            )?;
        }
        let mut sel = selector(&u.keys, false);
        // off2 = (0 + 3 + tot_len) & ~3, read at network byte 2.
        sel.flags = TcU32SelectorFlags::VarOffset;
        sel.offoff = 2;
        sel.offmask = 0xffff;
        sel.offshift = 0;
        sel.off = 0;
        let o = u32_options(sel, u.flags, Some(ht), None, None);
        send(self, format!("add u32 rule prio {}", rule.prio), 0, o)
    }

    /// Deletes the filters of priority `prio` at the ingress of `ifindex`.
    pub fn delete_prio(&mut self, ifindex: u32, prio: u32) -> Result<(), NetlinkError> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = INGRESS_PARENT;
        m.header.info = prio << 16;
        self.request(
            &format!("delete filter prio {prio}"),
            RouteNetlinkMessage::DelTrafficFilter(m),
            NLM_F_ACK,
        )
        .map(|_| ())
    }

    /// Every filter at the ingress of `ifindex`, in priority order.
    pub fn filters(&mut self, ifindex: u32) -> Result<Vec<Filter>, NetlinkError> {
        let mut m = TcMessage::with_index(ifindex as i32);
        m.header.parent = INGRESS_PARENT;
        let replies = match self.request(
            "list ingress filters",
            RouteNetlinkMessage::GetTrafficFilter(m),
            NLM_F_DUMP,
        ) {
            Ok(r) => r,
            // No clsact/ingress qdisc: no filters.
            Err(NetlinkError::Kernel { errno, .. }) if errno == 22 || errno == 2 => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for r in replies {
            let RouteNetlinkMessage::NewTrafficFilter(f) = r else {
                continue;
            };
            let kind = f
                .attributes
                .iter()
                .find_map(|a| match a {
                    TcAttribute::Kind(k) => Some(k.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let opts: Vec<&TcOption> = f
                .attributes
                .iter()
                .filter_map(|a| match a {
                    TcAttribute::Options(o) => Some(o),
                    _ => None,
                })
                .flatten()
                .collect();
            let options = opts
                .iter()
                .filter_map(|o| match o {
                    TcOption::Flower(x) => Some(x.clone()),
                    // A u32 guard's actions, read like a flower rule's
                    // (their packet counts).
                    TcOption::U32(TcFilterU32Option::Action(a)) => {
                        Some(TcFilterFlowerOption::Actions(a.clone()))
                    }
                    _ => None,
                })
                .collect();
            let handle = u32::from(f.header.handle.major) << 16 | u32::from(f.header.handle.minor);
            if handle == 0 {
                // The chain/priority header entry, not a filter.
                continue;
            }
            let u32_key = opts
                .iter()
                .any(|o| matches!(o, TcOption::U32(TcFilterU32Option::Selector(_))));
            if kind == "u32" && !u32_key {
                // A u32 filter's hash table node, not a key.
                continue;
            }
            let u32_keys = opts
                .iter()
                .filter_map(|o| match o {
                    TcOption::U32(TcFilterU32Option::Selector(sel)) => Some(
                        sel.keys
                            .iter()
                            .map(|k| (k.val, k.mask, k.off))
                            .collect::<Vec<_>>(),
                    ),
                    _ => None,
                })
                .flatten()
                .collect();
            out.push(Filter {
                u32_keys,
                prio: f.header.info >> 16,
                protocol: u16::from_be((f.header.info & 0xffff) as u16),
                handle,
                kind,
                options,
            });
        }
        out.sort_by_key(|f| f.prio);
        Ok(out)
    }
}

fn libc_eexist() -> i32 {
    17
}

/// The `NLMSGERR_ATTR_MSG` text of an error's payload (after the
/// capped request header), if any.
fn ext_ack(payload: &[u8]) -> Option<String> {
    let mut off = 16; // the request's nlmsghdr (NETLINK_CAP_ACK)
    while off + 4 <= payload.len() {
        let len = u16::from_ne_bytes([payload[off], payload[off + 1]]) as usize;
        let kind = u16::from_ne_bytes([payload[off + 2], payload[off + 3]]) & 0x3fff;
        if len < 4 || off + len > payload.len() {
            break;
        }
        if kind == 1 {
            let s = &payload[off + 4..off + len];
            let s = s.split(|&b| b == 0).next().unwrap_or(s);
            return Some(String::from_utf8_lossy(s).into_owned());
        }
        off += (len + 3) & !3;
    }
    None
}

/// `ETH_P_ALL` in filter listings.
pub fn protocol_name(p: u16) -> String {
    match p {
        ETH_P_ALL => "all".into(),
        0x0800 => "ip".into(),
        0x86dd => "ipv6".into(),
        p => format!("0x{p:04x}"),
    }
}

/// A new filter at the ingress of `ifindex` with `rule`'s priority and
/// protocol, and `handle` (0: the kernel picks it).
fn filter_message(ifindex: u32, rule: &FlowerRule, handle: u32) -> TcMessage {
    let mut m = TcMessage::with_index(ifindex as i32);
    m.header.parent = INGRESS_PARENT;
    m.header.info = (rule.prio << 16) | u32::from(rule.protocol.to_be());
    m.header.handle = TcHandle {
        major: (handle >> 16) as u16,
        minor: handle as u16,
    };
    m
}

/// A `u32` selector with `keys`, terminal (its node runs its actions)
/// or not (it links to a table).
fn selector(keys: &[crate::u32match::Key], terminal: bool) -> TcU32Selector {
    let mut sel = TcU32Selector::default();
    if terminal {
        sel.flags = TcU32SelectorFlags::Terminal;
    }
    sel.nkeys = keys.len() as u8;
    sel.keys = keys
        .iter()
        .map(|&(v, mask, off)| {
            let mut key = TcU32Key::default();
            key.val = v;
            key.mask = mask;
            key.off = off;
            key
        })
        .collect();
    sel
}

/// A `u32` node's options: its selector, the skip flags, the link, the
/// actions, and the table it goes in.
fn u32_options(
    sel: TcU32Selector,
    flags: u32,
    link: Option<u32>,
    actions: Option<&Vec<netlink_packet_route::tc::TcAction>>,
    hash: Option<u32>,
) -> Vec<TcFilterU32Option> {
    let mut o = Vec::new();
    if let Some(h) = hash {
        o.push(TcFilterU32Option::Hash(h));
    }
    o.push(TcFilterU32Option::Selector(sel));
    if let Some(l) = link {
        o.push(TcFilterU32Option::Link(l));
    }
    if flags != 0 {
        o.push(TcFilterU32Option::Flags(
            TcU32OptionFlags::from_bits_retain(flags),
        ));
    }
    if let Some(a) = actions {
        o.push(TcFilterU32Option::Action(a.clone()));
    }
    o
}

//! MapService: the maps of deployed chains, typed as `nfkit map` types
//! them (found through nfkit's state file, opened from their pins).

use super::{blocking, Daemon};
use crate::auth::rpc;
use crate::convert::{in_map, kernel_error, map_error};
use crate::proto::map_service_server::MapService;
use crate::proto::{self, MapRef};
use crate::validate::{self, attach_wire};
use nfkit_control::maps::{self, access, DumpOptions, KernelMap, MapAccess, Row};
use nfkit_kernel::deploy as kdeploy;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The service.
pub struct Maps(pub Arc<Daemon>);

/// A checked map reference: (name, dev, attach).
struct Ref {
    name: String,
    dev: Option<String>,
    attach: Option<nfkit_abi::AttachPoint>,
}

impl Ref {
    fn new(m: Option<MapRef>) -> Result<Ref, Status> {
        let m = m.ok_or_else(|| Status::invalid_argument("map: a map reference is needed"))?;
        Ok(Ref {
            name: validate::map_name(&m.name)?,
            dev: validate::dev(&m.dev, true)?,
            attach: validate::attach("map.attach", m.attach)?,
        })
    }

    fn target(&self) -> String {
        format!(
            "map {} {} {}",
            self.name,
            self.dev.as_deref().unwrap_or("*"),
            self.attach.map_or("*", |a| a.name())
        )
    }

    fn open(&self, paths: &kdeploy::Paths) -> Result<KernelMap, Status> {
        KernelMap::find(paths, &self.name, self.dev.as_deref(), self.attach).map_err(map_error)
    }

    /// The map, from the daemon's cache of open maps.
    fn cached(
        &self,
        cache: &crate::map_cache::MapCache,
        paths: &kdeploy::Paths,
    ) -> Result<Arc<KernelMap>, Status> {
        cache
            .open(paths, &self.name, self.dev.as_deref(), self.attach)
            .map_err(map_error)
    }
}

fn entry(r: &Row) -> proto::MapEntry {
    proto::MapEntry {
        key: r.key.clone(),
        values: r.values.clone(),
        key_text: r.key_text.clone(),
        value_text: r.value_text.clone(),
        key_json: r.key_json.to_string(),
        value_json: r.value_json.to_string(),
    }
}

fn info(dev: &str, at: nfkit_abi::AttachPoint, m: &kdeploy::MapRecord) -> proto::MapInfo {
    let (kt, vt) = maps::kernel::record_types(m);
    proto::MapInfo {
        dev: dev.to_string(),
        attach: attach_wire(at),
        name: m.name.clone(),
        map_type: m.map_type.clone(),
        key_size: m.key_size,
        value_size: m.value_size,
        max_entries: m.max_entries,
        key_type: m.key_type.clone().unwrap_or_default(),
        value_type: m.value_type.clone().unwrap_or_default(),
        key_desc: kt.describe(),
        value_desc: vt.describe(),
        key_json: serde_json::to_string(&kt).unwrap_or_default(),
        value_json: serde_json::to_string(&vt).unwrap_or_default(),
    }
}

type ChangeStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<proto::MapChanges, Status>> + Send>>;

/// Every entry of the map `m` refers to, by key bytes.
async fn read_all(
    m: Arc<Ref>,
    paths: kdeploy::Paths,
) -> Result<std::collections::BTreeMap<Vec<u8>, proto::MapEntry>, Status> {
    blocking(move || {
        let km = m.open(&paths)?;
        let rows = maps::dump(&km, DumpOptions::default()).map_err(|e| in_map(&m.name, e))?;
        Ok(rows.iter().map(|r| (r.key.clone(), entry(r))).collect())
    })
    .await?
}

#[tonic::async_trait]
impl MapService for Maps {
    type WatchMapStream = ChangeStream;

    async fn watch_map(
        &self,
        req: Request<proto::WatchMapRequest>,
    ) -> Result<Response<ChangeStream>, Status> {
        let call = self.0.begin(&req, rpc::WATCH_MAP)?;
        let r = req.into_inner();
        let checked = (|| {
            let m = Ref::new(r.map)?;
            let every = validate::interval_ms(r.interval_ms)?;
            Ok((Arc::new(m), every))
        })();
        let (m, every) = match checked {
            Ok(x) => x,
            Err(e) => return call.done("", "", Err(e)),
        };
        // The map must be there now: a bad name fails the call itself.
        let paths = self.0.cfg.paths.clone();
        let first = match read_all(m.clone(), paths.clone()).await {
            Ok(f) => f,
            Err(e) => return call.done("", "", Err(e)),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let count = u64::from(r.count);
        tokio::spawn(async move {
            let mut seq = 0u64;
            let mut last = first;
            let initial = proto::MapChanges {
                seq,
                unix_ms: crate::audit::now_ms(),
                initial: true,
                set: last.values().cloned().collect(),
                removed: Vec::new(),
            };
            if tx.send(Ok(initial)).await.is_err() {
                return;
            }
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(every.into()));
            tick.tick().await;
            while count == 0 || seq + 1 < count {
                tick.tick().await;
                let now = match read_all(m.clone(), paths.clone()).await {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                let set: Vec<proto::MapEntry> = now
                    .iter()
                    .filter(|(k, e)| last.get(*k).is_none_or(|o| o.values != e.values))
                    .map(|(_, e)| e.clone())
                    .collect();
                let removed: Vec<proto::MapEntry> = last
                    .iter()
                    .filter(|(k, _)| !now.contains_key(*k))
                    .map(|(_, e)| proto::MapEntry {
                        values: Vec::new(),
                        value_text: String::new(),
                        value_json: String::new(),
                        ..e.clone()
                    })
                    .collect();
                last = now;
                if set.is_empty() && removed.is_empty() {
                    continue;
                }
                seq += 1;
                let msg = proto::MapChanges {
                    seq,
                    unix_ms: crate::audit::now_ms(),
                    initial: false,
                    set,
                    removed,
                };
                if tx.send(Ok(msg)).await.is_err() {
                    return;
                }
            }
        });
        let out: ChangeStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx));
        call.done("", "", Ok(out))
    }

    async fn list_maps(
        &self,
        req: Request<proto::ListMapsRequest>,
    ) -> Result<Response<proto::ListMapsResponse>, Status> {
        let call = self.0.begin(&req, rpc::LIST_MAPS)?;
        let r = req.into_inner();
        let res = async {
            let dev = validate::dev(&r.dev, true)?;
            let attach = validate::attach("attach", r.attach)?;
            let paths = self.0.cfg.paths.clone();
            let st = blocking(move || kdeploy::status(&paths))
                .await?
                .map_err(kernel_error)?;
            let maps = st
                .iter()
                .map(|s| &s.deployment)
                .filter(|d| {
                    dev.as_ref().is_none_or(|x| *x == d.dev) && attach.is_none_or(|a| a == d.hook)
                })
                .flat_map(|d| d.maps.iter().map(move |m| info(&d.dev, d.hook, m)))
                .collect();
            Ok(proto::ListMapsResponse { maps })
        }
        .await;
        call.done("", "", res)
    }

    async fn get_entry(
        &self,
        req: Request<proto::GetEntryRequest>,
    ) -> Result<Response<proto::MapEntry>, Status> {
        let call = self.0.begin(&req, rpc::GET_ENTRY)?;
        let r = req.into_inner();
        let res = async {
            let m = Ref::new(r.map)?;
            let key = validate::text("key", &r.key)?;
            // Once the map is open, a read is one lookup syscall: done
            // here rather than handed to the blocking pool.
            let km = m.cached(&self.0.maps, &self.0.cfg.paths)?;
            access::get(&*km, &key)
                .map(|row| entry(&row))
                .map_err(|e| in_map(&m.name, e))
        }
        .await;
        call.done("", "", res)
    }

    async fn set_entry(
        &self,
        req: Request<proto::SetEntryRequest>,
    ) -> Result<Response<proto::SetEntryResponse>, Status> {
        let call = self.0.begin(&req, rpc::SET_ENTRY)?;
        let r = req.into_inner();
        let mut target = String::new();
        let res = async {
            let m = Ref::new(r.map)?;
            let key = validate::text("key", &r.key)?;
            let value = validate::text("value", &r.value)?;
            target = format!("{} key {key} value {value}", m.target());
            let paths = self.0.cfg.paths.clone();
            let cache = self.0.maps.clone();
            blocking(move || {
                let km = m.cached(&cache, &paths)?;
                let km = &*km;
                access::set(km, &key, &value).map_err(|e| in_map(&m.name, e))
            })
            .await??;
            Ok(proto::SetEntryResponse {})
        }
        .await;
        call.done(&target, "", res)
    }

    async fn delete_entry(
        &self,
        req: Request<proto::DeleteEntryRequest>,
    ) -> Result<Response<proto::DeleteEntryResponse>, Status> {
        let call = self.0.begin(&req, rpc::DELETE_ENTRY)?;
        let r = req.into_inner();
        let mut target = String::new();
        let res = async {
            let m = Ref::new(r.map)?;
            let key = validate::text("key", &r.key)?;
            target = format!("{} key {key}", m.target());
            let paths = self.0.cfg.paths.clone();
            let cache = self.0.maps.clone();
            blocking(move || {
                let km = m.cached(&cache, &paths)?;
                let km = &*km;
                access::delete(km, &key).map_err(|e| in_map(&m.name, e))
            })
            .await??;
            Ok(proto::DeleteEntryResponse {})
        }
        .await;
        call.done(&target, "", res)
    }

    async fn dump_map(
        &self,
        req: Request<proto::DumpMapRequest>,
    ) -> Result<Response<proto::DumpMapResponse>, Status> {
        let call = self.0.begin(&req, rpc::DUMP_MAP)?;
        let r = req.into_inner();
        let res = async {
            let m = Ref::new(r.map)?;
            let paths = self.0.cfg.paths.clone();
            let cache = self.0.maps.clone();
            blocking(move || {
                let km = m.cached(&cache, &paths)?;
                let km = &*km;
                let rows =
                    maps::dump(km, DumpOptions::default()).map_err(|e| in_map(&m.name, e))?;
                let i = km.info();
                let kt = &i.key;
                let vt = &i.value;
                Ok(proto::DumpMapResponse {
                    info: Some(proto::MapInfo {
                        name: i.name.clone(),
                        map_type: i.map_type.clone(),
                        key_size: i.key_size,
                        value_size: i.value_size,
                        max_entries: i.max_entries,
                        key_desc: kt.describe(),
                        value_desc: vt.describe(),
                        key_json: serde_json::to_string(kt).unwrap_or_default(),
                        value_json: serde_json::to_string(vt).unwrap_or_default(),
                        ..Default::default()
                    }),
                    entries: rows.iter().map(entry).collect(),
                })
            })
            .await?
        }
        .await;
        call.done("", "", res)
    }
}

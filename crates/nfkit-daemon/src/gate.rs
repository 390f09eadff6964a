//! Refusals before the services: a tower layer in front of every
//! service that audits the requests tonic answers itself — an unknown
//! service or method, a message over the decoding limit, bytes that are
//! not the request's protobuf — with the caller's identity, as
//! [`crate::service::Daemon::begin`] does for the requests that reach a
//! handler. A handler marks its request as reached ([`Reached`]), so
//! nothing is audited twice.

use crate::audit::{now_ms, Record};
use crate::service::{code_name, Daemon};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::codegen::http;
use tonic::transport::server::UdsConnectInfo;

/// Set by the handler a request reached (in the request's extensions).
#[derive(Clone, Debug, Default)]
pub struct Reached(Arc<AtomicBool>);

impl Reached {
    /// The handler has the request: it audits the result itself.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The layer ([`tonic::transport::Server::layer`]).
#[derive(Clone)]
pub struct GateLayer(pub Arc<Daemon>);

impl<S> tower::Layer<S> for GateLayer {
    type Service = Gate<S>;
    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            d: self.0.clone(),
        }
    }
}

/// The service the layer wraps around the router.
#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    d: Arc<Daemon>,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> tower::Service<http::Request<B>> for Gate<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The clone that was made ready goes with this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let reached = Reached::default();
        req.extensions_mut().insert(reached.clone());
        let who = crate::auth::identify_from(
            req.extensions().get::<crate::tls::TlsPeer>(),
            req.extensions().get::<UdsConnectInfo>(),
            &self.d.live.roles(),
        );
        let path = req.uri().path().to_string();
        let d = self.d.clone();
        Box::pin(async move {
            let resp = inner.call(req).await?;
            if !reached.is_set() {
                refused_early(&d, who, &path, resp.headers());
            }
            Ok(resp)
        })
    }
}

/// Audits a request tonic refused before any handler saw it (a
/// `grpc-status` other than OK in the response's headers).
fn refused_early(
    d: &Daemon,
    who: Option<crate::auth::Identity>,
    path: &str,
    headers: &http::HeaderMap,
) {
    let Some(code) = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from_i32)
    else {
        return;
    };
    if code == tonic::Code::Ok {
        return;
    }
    let given = headers
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(percent_decode)
        .unwrap_or_default();
    let message = if given.is_empty() {
        format!("{path}: no such method in nfkitd's API (nfkit.v1)")
    } else {
        given
    };
    let rpc = crate::auth::rpc::ALL
        .iter()
        .find(|r| path.strip_prefix('/') == Some(r.name))
        .map_or("(unknown)", |r| r.name);
    d.metrics.request(rpc, code_name(code));
    let target = if rpc == "(unknown)" { path } else { "" };
    d.audit.write(&Record {
        ts_ms: now_ms(),
        who,
        rpc,
        target,
        digest: "",
        result: "refused",
        code: code_name(code),
        message: &message,
    });
}

/// `grpc-message` is percent-encoded (gRPC over HTTP/2).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(super::percent_decode("a%20b%25c"), "a b%c");
        assert_eq!(super::percent_decode("bad%2"), "bad%2");
        assert_eq!(super::percent_decode("%C3%A9"), "é");
    }
}

//! TCP with mutual TLS (rustls through tokio-rustls; the config's
//! `[tls]` table): nfkitd accepts and handshakes the connections itself,
//! so every refusal reaches the audit log.
//!
//! * A connection whose handshake fails (no TLS, a certificate whose
//!   key the client does not hold, a protocol error) is closed and
//!   audited as `tls-handshake` `UNAUTHENTICATED`.
//! * During the handshake a client certificate is asked for and its
//!   signature checked, but its chain is verified after it, against
//!   `client_ca` ([`TlsPeer::cert`]): a connection with no certificate,
//!   an expired one or one from another CA is served only refusals —
//!   each request gets `UNAUTHENTICATED` saying why, and its audit
//!   record — never a result.
//! * A verified certificate's names (subject CN, SANs) are mapped to a
//!   role by `[roles] names` ([`crate::config::Roles::role_of_names`]).
//! * A certificate the `[tls] crl` lists is refused as revoked.
//! * Each handshake takes the material in force ([`crate::reload`]): a
//!   reload changes what new connections get, not the open ones.
//!
//! Plain TCP is never served: the listener only hands TLS connections on.

use crate::audit::{now_ms, Record};
use crate::auth::{Identity, Peer};
use crate::config::TlsConfig;
use crate::error::DaemonError;
use crate::service::Daemon;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, UnixTime};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls::{
    self,
    client::danger::HandshakeSignatureValid,
    server::danger::{ClientCertVerified, ClientCertVerifier},
    server::WebPkiClientVerifier,
    DigitallySignedStruct, DistinguishedName, SignatureScheme,
};

/// How long a client may take to start and finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections accepted but not yet handed to the server.
const BACKLOG: usize = 256;

/// The RPC name of handshake refusals in the audit log and the metrics.
pub const HANDSHAKE: &str = "tls-handshake";

/// What the server knows of a TLS client; a request extension.
#[derive(Clone, Debug)]
pub struct TlsPeer {
    pub addr: SocketAddr,
    /// Its verified certificate's names (CN, then SANs), or why there is
    /// none.
    pub cert: Result<Vec<String>, String>,
}

/// The server's TLS: its acceptor and the client CA's verifier.
pub struct ServerTls {
    acceptor: tokio_rustls::TlsAcceptor,
    verifier: Arc<dyn ClientCertVerifier>,
    /// The files it was read from.
    pub files: Vec<PathBuf>,
    /// Certificates the CRL lists.
    pub revoked: usize,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_error(path: &Path, msg: impl std::fmt::Display) -> DaemonError {
    DaemonError::Config {
        path: path.to_path_buf(),
        msg: msg.to_string(),
    }
}

/// The PEM certificates in `path` (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, DaemonError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, format!("reading certificates: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(path, format!("reading certificates: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(path, "no PEM CERTIFICATE in it"));
    }
    Ok(certs)
}

/// The PEM CRLs in `path` (at least one).
pub fn load_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, DaemonError> {
    let crls: Vec<_> = CertificateRevocationListDer::pem_file_iter(path)
        .map_err(|e| file_error(path, format!("reading the CRL: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(path, format!("reading the CRL: {e}")))?;
    if crls.is_empty() {
        return Err(file_error(path, "no PEM X509 CRL in it"));
    }
    Ok(crls)
}

/// The PEM private key in `path`.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, DaemonError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| file_error(path, format!("reading the private key: {e}")))
}

fn need<'a>(v: &'a Option<PathBuf>, key: &str) -> Result<&'a Path, DaemonError> {
    v.as_deref().ok_or_else(|| DaemonError::Config {
        path: PathBuf::from("[tls]"),
        msg: format!("{key} is needed to serve TCP (mutual TLS only)"),
    })
}

impl ServerTls {
    /// Reads the server's certificate and key, the client CA and the
    /// CRL; an error names the file and says why.
    pub fn new(cfg: &TlsConfig) -> Result<ServerTls, DaemonError> {
        let (cert, key, ca) = (
            need(&cfg.cert, "cert")?,
            need(&cfg.key, "key")?,
            need(&cfg.client_ca, "client_ca")?,
        );
        let mut roots = rustls::RootCertStore::empty();
        let ca_certs = load_certs(ca)?;
        for c in ca_certs.iter().cloned() {
            roots
                .add(c)
                .map_err(|e| file_error(ca, format!("not a CA certificate: {e}")))?;
        }
        let mut builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
        let mut revoked = 0;
        if let Some(crl) = &cfg.crl {
            let crls = load_crls(crl)?;
            for c in &crls {
                revoked += crl_entries(crl, c, &ca_certs, ca)?;
            }
            builder = builder.with_crls(crls);
        }
        let verifier = builder.build().map_err(|e| {
            let at = match (&e, &cfg.crl) {
                (rustls::server::VerifierBuilderError::InvalidCrl(_), Some(crl)) => crl,
                _ => ca,
            };
            file_error(at, e)
        })?;
        let mut sc = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| file_error(cert, e))?
            .with_client_cert_verifier(Arc::new(Deferred(verifier.clone())))
            .with_single_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| file_error(key, format!("with {}: {e}", cert.display())))?;
        sc.alpn_protocols = vec![b"h2".to_vec()];
        let mut files = vec![cert.to_path_buf(), key.to_path_buf(), ca.to_path_buf()];
        files.extend(cfg.crl.clone());
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(sc)),
            verifier,
            files,
            revoked,
        })
    }

    /// The client's certificate after the handshake: verified against
    /// the client CA now, its names; or why it is refused.
    fn check(&self, conn: &rustls::ServerConnection) -> Result<Vec<String>, String> {
        let Some((ee, rest)) = conn.peer_certificates().and_then(|c| c.split_first()) else {
            return Err(
                "no client certificate: nfkitd's TCP clients authenticate with a \
                        certificate from its client CA (nfkit --cert/--key)"
                    .into(),
            );
        };
        self.verifier
            .verify_client_cert(ee, rest, UnixTime::now())
            .map_err(|e| match e {
                rustls::Error::InvalidCertificate(rustls::CertificateError::Revoked) => {
                    "client certificate refused: it is revoked (listed in nfkitd's [tls] crl)"
                        .to_string()
                }
                e => format!("client certificate refused: {e}"),
            })?;
        cert_names(ee)
    }
}

/// How many certificates a CRL lists; an error when it does not parse
/// or was not issued by the client CA (its revocations would not apply,
/// and every client would be refused for want of a revocation status).
fn crl_entries(
    path: &Path,
    der: &[u8],
    cas: &[CertificateDer<'_>],
    ca_path: &Path,
) -> Result<usize, DaemonError> {
    let (_, crl) = x509_parser::parse_x509_crl(der)
        .map_err(|e| file_error(path, format!("not a CRL: {e}")))?;
    let issuer = crl.issuer();
    let from_ca = cas.iter().any(|c| {
        x509_parser::parse_x509_certificate(c).is_ok_and(|(_, c)| {
            c.subject().as_raw() == issuer.as_raw() && crl.verify_signature(c.public_key()).is_ok()
        })
    });
    if !from_ca {
        return Err(file_error(
            path,
            format!(
                "the CRL (issuer {issuer}) is not signed by the client CA of {}",
                ca_path.display()
            ),
        ));
    }
    Ok(crl.iter_revoked_certificates().count())
}

/// A certificate's subject CN, then its DNS, email and URI SANs.
pub fn cert_names(der: &[u8]) -> Result<Vec<String>, String> {
    use x509_parser::extensions::GeneralName;
    let (_, c) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("client certificate unreadable: {e}"))?;
    let mut names: Vec<String> = c
        .subject()
        .iter_common_name()
        .filter_map(|a| a.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for g in &san.value.general_names {
            if let GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) = g {
                if !names.iter().any(|n| n == s) {
                    names.push(s.to_string());
                }
            }
        }
    }
    Ok(names)
}

/// Asks for a client certificate and checks the handshake's signature
/// with it (the client holds its key), leaving the chain to
/// [`ServerTls::check`] so that a refusal is a gRPC status and an audit
/// record rather than a closed connection.
#[derive(Debug)]
struct Deferred(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for Deferred {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// One TLS connection, as the gRPC server sees it.
pub struct TlsConn {
    stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    peer: TlsPeer,
}

impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = TlsPeer;

    fn connect_info(&self) -> TlsPeer {
        self.peer.clone()
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The handshaken connections of a listener, for tonic's
/// `serve_with_incoming`.
pub type Incoming = tokio_stream::wrappers::ReceiverStream<std::io::Result<TlsConn>>;

/// Binds `addr` (the port is chosen when it is 0: see the returned
/// address) and accepts TLS clients in the background with the TLS
/// material in force ([`crate::reload::Live::tls`]); handshake failures
/// are audited on `d`.
pub async fn listen(
    addr: SocketAddr,
    d: Arc<Daemon>,
) -> Result<(SocketAddr, Incoming), DaemonError> {
    let io = |what: &'static str| {
        move |e| DaemonError::Io {
            what,
            path: PathBuf::from(format!("tcp:{addr}")),
            cause: e,
        }
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(io("bind"))?;
    let local = listener.local_addr().map_err(io("bind"))?;
    let (tx, rx) = tokio::sync::mpsc::channel(BACKLOG);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors and the like: wait, go on.
                    eprintln!("nfkitd: accepting on tcp:{local}: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if tx.is_closed() {
                return;
            }
            let Some(tls) = d.live.tls() else {
                return;
            };
            let (d, tx) = (d.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&tls, tcp, peer)).await {
                    Ok(Ok(Some(conn))) => {
                        let _ = tx.send(Ok(conn)).await;
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(why)) => refused(&d, local, peer, &why),
                    Err(_) => refused(
                        &d,
                        local,
                        peer,
                        &format!("no TLS handshake within {} s", HANDSHAKE_TIMEOUT.as_secs()),
                    ),
                }
            });
        }
    });
    Ok((local, tokio_stream::wrappers::ReceiverStream::new(rx)))
}

/// Handshakes one client; `None`: it closed before sending anything (a
/// port probe, not a request).
async fn handshake(
    tls: &ServerTls,
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
) -> Result<Option<TlsConn>, String> {
    let mut first = [0u8; 1];
    if tcp.peek(&mut first).await.map_err(|e| e.to_string())? == 0 {
        return Ok(None);
    }
    let _ = tcp.set_nodelay(true);
    let stream = tls
        .acceptor
        .accept(tcp)
        .await
        .map_err(|e| format!("TLS handshake failed: {e}"))?;
    let cert = tls.check(stream.get_ref().1);
    Ok(Some(TlsConn {
        stream,
        peer: TlsPeer { addr, cert },
    }))
}

/// Audits a connection refused at its handshake.
fn refused(d: &Daemon, local: SocketAddr, addr: SocketAddr, why: &str) {
    d.metrics.request(HANDSHAKE, "UNAUTHENTICATED");
    let who = Identity {
        peer: Peer::Tls {
            addr,
            names: Vec::new(),
            refused: Some(why.to_string()),
        },
        role: None,
    };
    d.audit.write(&Record {
        ts_ms: now_ms(),
        who: Some(who),
        rpc: HANDSHAKE,
        target: &format!("tcp:{local}"),
        digest: "",
        result: "refused",
        code: "UNAUTHENTICATED",
        message: why,
    });
}

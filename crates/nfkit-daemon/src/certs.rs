//! Test certificates for nfkitd's TCP listener (`nfkit daemon certs`):
//! a CA, a server certificate for given names and addresses, client
//! certificates whose subject CN is the name `[roles] names` maps to a
//! role. ECDSA P-256 keys, made with rcgen. Private keys are written
//! mode 0600 and files are never overwritten, except the CA's CRL
//! (`ca.crl`, nfkitd's `[tls] crl`), which [`revoke`] replaces
//! atomically with one listing one more client.

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CertifiedIssuer,
    DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair,
    KeyUsagePurpose, RevokedCertParams, SerialNumber, SigningKey,
};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Why certificates could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("making a certificate: {0}")]
    Make(#[from] rcgen::Error),
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{0}: exists already (certificates are never overwritten; choose another --out)")]
    Exists(PathBuf),
    #[error("client name {0:?}: use 1 to 64 of [A-Za-z0-9_.-] (it names the files)")]
    BadName(String),
    #[error("{path}: {msg}")]
    Bad { path: PathBuf, msg: String },
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> CertError {
    CertError::Bad {
        path: path.to_path_buf(),
        msg: msg.to_string(),
    }
}

/// A certificate and its private key, PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority that signs server and client certificates.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
    key_pem: String,
}

/// `days` days from now (from a minute ago, for clocks a little behind).
pub fn valid_for(days: u32) -> std::ops::Range<SystemTime> {
    let now = SystemTime::now();
    now - Duration::from_secs(60)..now + Duration::from_secs(u64::from(days) * 86_400)
}

fn dn(cn: &str) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::OrganizationName, "nfkit");
    d.push(DnType::CommonName, cn);
    d
}

fn set_validity(p: &mut CertificateParams, valid: &std::ops::Range<SystemTime>) {
    p.not_before = time::OffsetDateTime::from(valid.start);
    p.not_after = time::OffsetDateTime::from(valid.end);
}

impl Ca {
    /// A new self-signed CA named `cn`.
    pub fn new(cn: &str, valid: std::ops::Range<SystemTime>) -> Result<Ca, CertError> {
        let key = KeyPair::generate()?;
        let key_pem = key.serialize_pem();
        let mut p = CertificateParams::default();
        p.distinguished_name = dn(cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut p, &valid);
        Ok(Ca {
            issuer: CertifiedIssuer::self_signed(p, key)?,
            key_pem,
        })
    }

    /// The CA's certificate and key.
    pub fn issued(&self) -> Issued {
        Issued {
            cert_pem: self.issuer.pem(),
            key_pem: self.key_pem.clone(),
        }
    }

    fn sign(
        &self,
        mut p: CertificateParams,
        cn: &str,
        usage: ExtendedKeyUsagePurpose,
        valid: std::ops::Range<SystemTime>,
    ) -> Result<Issued, CertError> {
        let key = KeyPair::generate()?;
        p.distinguished_name = dn(cn);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![usage];
        p.use_authority_key_identifier_extension = true;
        set_validity(&mut p, &valid);
        let cert = p.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A server certificate for `localhost`, `127.0.0.1`, `::1` and
    /// `names` (host names or IP addresses).
    pub fn server(
        &self,
        names: &[String],
        valid: std::ops::Range<SystemTime>,
    ) -> Result<Issued, CertError> {
        let mut sans: Vec<String> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for n in names {
            if !sans.contains(n) {
                sans.push(n.clone());
            }
        }
        let p = CertificateParams::new(sans)?;
        self.sign(p, "nfkitd", ExtendedKeyUsagePurpose::ServerAuth, valid)
    }

    /// A client certificate whose subject CN is `name`.
    pub fn client(
        &self,
        name: &str,
        valid: std::ops::Range<SystemTime>,
    ) -> Result<Issued, CertError> {
        check_name(name)?;
        let p = CertificateParams::default();
        self.sign(p, name, ExtendedKeyUsagePurpose::ClientAuth, valid)
    }
}

/// One certificate a CRL lists.
struct Listed {
    serial: Vec<u8>,
    at: time::OffsetDateTime,
}

/// A CRL signed by `issuer` listing `revoked`, number `number`, valid
/// `days` days; PEM.
fn crl_pem(
    issuer: &Issuer<'_, impl SigningKey>,
    revoked: &[Listed],
    number: u64,
    days: u32,
) -> Result<String, CertError> {
    let valid = valid_for(days);
    let p = CertificateRevocationListParams {
        this_update: time::OffsetDateTime::from(valid.start),
        next_update: time::OffsetDateTime::from(valid.end),
        crl_number: SerialNumber::from(number),
        issuing_distribution_point: None,
        revoked_certs: revoked
            .iter()
            .map(|r| RevokedCertParams {
                serial_number: SerialNumber::from_slice(&r.serial),
                revocation_time: r.at,
                reason_code: None,
                invalidity_date: None,
            })
            .collect(),
        key_identifier_method: KeyIdMethod::Sha256,
    };
    Ok(p.signed_by(issuer)?.pem()?)
}

/// What [`revoke`] did.
#[derive(Debug, serde::Serialize)]
pub struct Revoked {
    pub crl: PathBuf,
    pub name: String,
    /// The certificate's serial number, hex.
    pub serial: String,
    /// It was listed already (the CRL is unchanged).
    pub already: bool,
    /// How many certificates the CRL lists now.
    pub listed: usize,
}

fn read(path: &Path) -> Result<String, CertError> {
    std::fs::read_to_string(path).map_err(|cause| CertError::Io {
        path: path.to_path_buf(),
        cause,
    })
}

fn der_of(path: &Path, text: &str, label: &str) -> Result<Vec<u8>, CertError> {
    let p = rustls_pki_types::pem::PemObject::from_pem_slice(text.as_bytes())
        .map(|c: rustls_pki_types::CertificateDer<'static>| c.to_vec());
    match label {
        "CERTIFICATE" => p.map_err(|e| bad(path, format!("no PEM certificate: {e}"))),
        _ => rustls_pki_types::pem::PemObject::from_pem_slice(text.as_bytes())
            .map(|c: rustls_pki_types::CertificateRevocationListDer<'static>| c.to_vec())
            .map_err(|e| bad(path, format!("no PEM X509 CRL: {e}"))),
    }
}

/// Revokes client `name` of the CA in `out` (`ca.crt`, `ca.key`,
/// `NAME.crt`): `out/ca.crl` is replaced (atomically) by a CRL signed
/// by the CA that lists what it listed and `NAME.crt`'s serial, with
/// the next CRL number, valid `days` days. nfkitd refuses the
/// certificate once it reloads (`nfkit daemon reload`, SIGHUP).
pub fn revoke(out: &Path, name: &str, days: u32) -> Result<Revoked, CertError> {
    check_name(name)?;
    let (ca_crt, ca_key, crt, crl) = (
        out.join("ca.crt"),
        out.join("ca.key"),
        out.join(format!("{name}.crt")),
        out.join("ca.crl"),
    );
    let ca_pem = read(&ca_crt)?;
    let key = KeyPair::from_pem(&read(&ca_key)?)
        .map_err(|e| bad(&ca_key, format!("not a private key: {e}")))?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, key)
        .map_err(|e| bad(&ca_crt, format!("not a CA certificate: {e}")))?;
    let ca_der = der_of(&ca_crt, &ca_pem, "CERTIFICATE")?;
    let (_, ca) = x509_parser::parse_x509_certificate(&ca_der)
        .map_err(|e| bad(&ca_crt, format!("not a certificate: {e}")))?;
    let der = der_of(&crt, &read(&crt)?, "CERTIFICATE")?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| bad(&crt, format!("not a certificate: {e}")))?;
    if cert.issuer().as_raw() != ca.subject().as_raw() {
        return Err(bad(
            &crt,
            format!(
                "issued by {}, not by this CA ({})",
                cert.issuer(),
                ca.subject()
            ),
        ));
    }
    let serial = cert.raw_serial().to_vec();
    let (mut listed, number) = if crl.exists() {
        let der = der_of(&crl, &read(&crl)?, "X509 CRL")?;
        let (_, old) =
            x509_parser::parse_x509_crl(&der).map_err(|e| bad(&crl, format!("not a CRL: {e}")))?;
        if old.issuer().as_raw() != ca.subject().as_raw() {
            return Err(bad(
                &crl,
                format!("issued by {}, not by this CA", old.issuer()),
            ));
        }
        let listed = old
            .iter_revoked_certificates()
            .map(|r| {
                Ok(Listed {
                    serial: r.raw_serial().to_vec(),
                    at: time::OffsetDateTime::from_unix_timestamp(r.revocation_date.timestamp())
                        .map_err(|e| bad(&crl, format!("a revocation date: {e}")))?,
                })
            })
            .collect::<Result<Vec<_>, CertError>>()?;
        let number = old
            .crl_number()
            .and_then(|n| n.to_u64_digits().first().copied())
            .unwrap_or(0);
        (listed, number)
    } else {
        (Vec::new(), 0)
    };
    let hex: String = serial.iter().map(|b| format!("{b:02x}")).collect();
    if listed.iter().any(|l| l.serial == serial) {
        return Ok(Revoked {
            crl,
            name: name.to_string(),
            serial: hex,
            already: true,
            listed: listed.len(),
        });
    }
    listed.push(Listed {
        serial,
        at: time::OffsetDateTime::now_utc(),
    });
    let pem = crl_pem(&issuer, &listed, number + 1, days)?;
    let tmp = out.join(format!(".ca.crl.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    write_new(&tmp, &pem, 0o644)?;
    std::fs::rename(&tmp, &crl).map_err(|cause| CertError::Io {
        path: crl.clone(),
        cause,
    })?;
    Ok(Revoked {
        crl,
        name: name.to_string(),
        serial: hex,
        already: false,
        listed: listed.len(),
    })
}

fn check_name(name: &str) -> Result<(), CertError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(CertError::BadName(name.to_string()))
    }
}

/// Writes `text` to a new file `path` with `mode`.
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), CertError> {
    let io = |cause: std::io::Error| {
        if cause.kind() == std::io::ErrorKind::AlreadyExists {
            CertError::Exists(path.to_path_buf())
        } else {
            CertError::Io {
                path: path.to_path_buf(),
                cause,
            }
        }
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)
}

/// What [`write_set`] wrote.
#[derive(Debug, serde::Serialize)]
pub struct Written {
    pub ca: PathBuf,
    /// The CA's CRL, listing none yet ([`revoke`]).
    pub crl: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// (name, certificate, key) of each client.
    pub clients: Vec<(String, PathBuf, PathBuf)>,
}

/// Makes a CA, a server certificate (`server_names` beside localhost)
/// and a certificate per client, valid `days` days, into `out`:
/// `ca.crt`, `ca.key`, `ca.crl` (listing none), `server.crt`,
/// `server.key`, `NAME.crt`, `NAME.key`.
/// Names are checked and files checked absent before anything is written.
pub fn write_set(
    out: &Path,
    server_names: &[String],
    clients: &[String],
    days: u32,
) -> Result<Written, CertError> {
    for c in clients {
        check_name(c)?;
        if matches!(c.as_str(), "ca" | "server") {
            return Err(CertError::BadName(c.clone()));
        }
    }
    let mut files = vec!["ca.crt", "ca.key", "server.crt", "server.key", "ca.crl"]
        .into_iter()
        .map(|f| out.join(f))
        .collect::<Vec<_>>();
    for c in clients {
        files.push(out.join(format!("{c}.crt")));
        files.push(out.join(format!("{c}.key")));
    }
    let first_client = 5;
    if let Some(f) = files.iter().find(|f| f.exists()) {
        return Err(CertError::Exists(f.clone()));
    }
    std::fs::create_dir_all(out).map_err(|cause| CertError::Io {
        path: out.to_path_buf(),
        cause,
    })?;
    let ca = Ca::new("nfkit test CA", valid_for(days))?;
    let server = ca.server(server_names, valid_for(days))?;
    let cai = ca.issued();
    write_new(&files[0], &cai.cert_pem, 0o644)?;
    write_new(&files[1], &cai.key_pem, 0o600)?;
    write_new(&files[2], &server.cert_pem, 0o644)?;
    write_new(&files[3], &server.key_pem, 0o600)?;
    write_new(&files[4], &crl_pem(&ca.issuer, &[], 1, days)?, 0o644)?;
    let mut written = Written {
        ca: files[0].clone(),
        crl: files[4].clone(),
        server_cert: files[2].clone(),
        server_key: files[3].clone(),
        clients: Vec::new(),
    };
    for (i, c) in clients.iter().enumerate() {
        let is = ca.client(c, valid_for(days))?;
        let (crt, key) = (
            &files[first_client + 2 * i],
            &files[first_client + 1 + 2 * i],
        );
        write_new(crt, &is.cert_pem, 0o644)?;
        write_new(key, &is.key_pem, 0o600)?;
        written.clients.push((c.clone(), crt.clone(), key.clone()));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_set_has_the_names_and_private_keys_are_0600() {
        let dir = std::env::temp_dir().join(format!("nfkit-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let w = write_set(
            &dir,
            &["nfkit.example".into(), "198.18.0.1".into()],
            &["ci".into(), "grafana".into()],
            3,
        )
        .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("ca.key")), 0o600);
        assert_eq!(mode(&w.server_key), 0o600);
        assert_eq!(mode(&w.clients[1].2), 0o600);
        assert_eq!(mode(&w.ca), 0o644);
        let der = crate::tls::load_certs(&w.clients[0].1).unwrap();
        assert_eq!(crate::tls::cert_names(&der[0]).unwrap(), ["ci"]);
        let der = crate::tls::load_certs(&w.server_cert).unwrap();
        let (_, c) = x509_parser::parse_x509_certificate(&der[0]).unwrap();
        let san = format!("{:?}", c.subject_alternative_name().unwrap().unwrap().value);
        for n in ["localhost", "nfkit.example", "198.18.0.1"] {
            assert!(
                san.contains(n) || san.contains(&n.replace('.', ", ")),
                "{n} in {san}"
            );
        }
        // Never overwritten; bad names refused before anything is written.
        assert!(matches!(
            write_set(&dir, &[], &[], 3),
            Err(CertError::Exists(_))
        ));
        assert!(matches!(
            write_set(&dir.join("x"), &[], &["../x".into()], 3),
            Err(CertError::BadName(_))
        ));
        assert!(!dir.join("x").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn revoking_adds_to_the_crl_that_nfkitd_loads_and_a_bad_crl_is_named() {
        let dir = std::env::temp_dir().join(format!("nfkit-revoke-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let w = write_set(&dir, &[], &["ci".into(), "ops".into()], 3).unwrap();
        let tls = |crl: &Path| crate::config::TlsConfig {
            listen: None,
            cert: Some(w.server_cert.clone()),
            key: Some(w.server_key.clone()),
            client_ca: Some(w.ca.clone()),
            crl: Some(crl.to_path_buf()),
        };
        let st = crate::tls::ServerTls::new(&tls(&w.crl)).unwrap();
        assert_eq!(st.revoked, 0);
        let r = revoke(&dir, "ops", 3).unwrap();
        assert!(!r.already && r.listed == 1, "{r:?}");
        let r = revoke(&dir, "ops", 3).unwrap();
        assert!(r.already && r.listed == 1, "{r:?}");
        assert_eq!(revoke(&dir, "ci", 3).unwrap().listed, 2);
        assert_eq!(crate::tls::ServerTls::new(&tls(&w.crl)).unwrap().revoked, 2);
        assert!(matches!(
            revoke(&dir, "nobody", 3),
            Err(CertError::Io { .. })
        ));
        // Garbage, and a CRL of another CA: refused, the file named.
        let junk = dir.join("junk.crl");
        std::fs::write(
            &junk,
            "-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n",
        )
        .unwrap();
        let e = crate::tls::ServerTls::new(&tls(&junk))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("junk.crl"), "{e}");
        let other = dir.join("other");
        write_set(&other, &[], &[], 3).unwrap();
        let e = crate::tls::ServerTls::new(&tls(&other.join("ca.crl")))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("other/ca.crl") && e.contains("not signed by the client CA"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

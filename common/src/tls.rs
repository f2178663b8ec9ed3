//! TLS between machines, the parts all three programs share: reading PEM files with
//! errors that name the file, the client side's `[tls]` settings (karl-agent and karl-ctl
//! both dial the coordinator through one [`CoordAddr`]), and naming a failed TLS
//! connection in words that say what to fix ([`TlsFailure`]).
//!
//! An address decides: `https://HOST:PORT` dials with TLS, `HOST:PORT` and `http://` stay
//! plaintext. With no private CA configured, a TLS client trusts the operating system's
//! certificate store. The shared token is sent either way; TLS adds privacy and, with a
//! client certificate (mTLS), a second proof of who is calling.

use std::error::Error as StdError;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{AlertDescription, CertificateError, RootCertStore};
use serde::Deserialize;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use crate::error::{Error, Result};

/// Bound on a TLS handshake: a server that accepts TCP and then says nothing must not
/// hold a client forever (the connect timeout covers only TCP).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The `[tls]` table of `karl-agent.toml` and `karl-ctl.toml`, and the `--tls-*` flags:
/// how a client dials a coordinator at an `https://` address.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTlsFiles {
    /// PEM file of the CA that signed the coordinator's certificate. Unset: the
    /// operating system's trusted CAs.
    pub ca: Option<PathBuf>,
    /// This client's certificate (PEM), for a coordinator that requires one (mTLS).
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM).
    pub key: Option<PathBuf>,
    /// The name to check the coordinator's certificate against, when it is not the host
    /// in the address (e.g. dialing an IP address the certificate does not list).
    pub domain: Option<String>,
}

impl ClientTlsFiles {
    /// Every field set in `self` wins over `other`'s: flags and env over the file.
    pub fn or(self, other: ClientTlsFiles) -> ClientTlsFiles {
        ClientTlsFiles {
            ca: self.ca.or(other.ca),
            cert: self.cert.or(other.cert),
            key: self.key.or(other.key),
            domain: self.domain.or(other.domain),
        }
    }

    pub fn is_empty(&self) -> bool {
        self == &ClientTlsFiles::default()
    }

    /// The client side's TLS settings, files read and checked.
    fn client_config(&self) -> Result<ClientTlsConfig> {
        let mut cfg = ClientTlsConfig::new().timeout(HANDSHAKE_TIMEOUT);
        cfg = match &self.ca {
            Some(ca) => cfg.ca_certificate(Certificate::from_pem(read_ca(ca)?)),
            None => cfg.with_native_roots(),
        };
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                cfg = cfg.identity(Identity::from_pem(read_certs(cert)?, read_key(key)?));
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(Error::TlsConfig(
                    "a client certificate ([tls] cert / --tls-cert) needs its private key: set [tls] key / --tls-key too".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(Error::TlsConfig(
                    "a client key ([tls] key / --tls-key) needs its certificate: set [tls] cert / --tls-cert too".into(),
                ))
            }
        }
        if let Some(domain) = &self.domain {
            cfg = cfg.domain_name(domain.clone());
        }
        Ok(cfg)
    }
}

/// Reads a PEM file whole; `what` names its role in the error.
fn read_pem(path: &Path, what: &'static str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::TlsFile {
        what,
        path: path.display().to_string(),
        why: format!("cannot read it: {e}"),
    })
}

fn bad_pem(path: &Path, what: &'static str, why: impl Into<String>) -> Error {
    Error::TlsFile {
        what,
        path: path.display().to_string(),
        why: why.into(),
    }
}

fn parse_certs(
    path: &Path,
    what: &'static str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, pem::Error>>()
        .map_err(|e| bad_pem(path, what, format!("not valid PEM ({e})")))?;
    if certs.is_empty() {
        return Err(bad_pem(
            path,
            what,
            "holds no certificate (expected a PEM file with -----BEGIN CERTIFICATE----- blocks)",
        ));
    }
    Ok(certs)
}

/// Reads a PEM certificate chain (a server's or a client's own certificate) and checks
/// that it holds at least one certificate; returns the file's bytes.
pub fn read_certs(path: &Path) -> Result<Vec<u8>> {
    const WHAT: &str = "TLS certificate";
    let pem = read_pem(path, WHAT)?;
    parse_certs(path, WHAT, &pem)?;
    Ok(pem)
}

/// Reads a PEM file of CA certificates to trust and checks that at least one of them
/// is usable as a trust anchor; returns the file's bytes.
pub fn read_ca(path: &Path) -> Result<Vec<u8>> {
    const WHAT: &str = "TLS CA file";
    let pem = read_pem(path, WHAT)?;
    let certs = parse_certs(path, WHAT, &pem)?;
    let (usable, _) = RootCertStore::empty().add_parsable_certificates(certs);
    if usable == 0 {
        return Err(bad_pem(
            path,
            WHAT,
            "holds no usable CA certificate (the PEM blocks do not parse as X.509)",
        ));
    }
    Ok(pem)
}

/// Reads a PEM private key (PKCS#8, PKCS#1 or SEC1) and checks that there is one;
/// returns the file's bytes.
pub fn read_key(path: &Path) -> Result<Vec<u8>> {
    const WHAT: &str = "TLS private key";
    let pem = read_pem(path, WHAT)?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(_) => Ok(pem),
        Err(pem::Error::NoItemsFound) => Err(bad_pem(
            path,
            WHAT,
            "holds no private key (expected -----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY)",
        )),
        Err(e) => Err(bad_pem(path, WHAT, format!("not valid PEM ({e})"))),
    }
}

/// The coordinator as a client dials it: its URL, and an endpoint with TLS set up when
/// the address says `https://`. Built once at start, so a bad address or an unreadable
/// PEM file stops the program with a clear message instead of failing every reconnect.
#[derive(Clone)]
pub struct CoordAddr {
    url: String,
    endpoint: Endpoint,
    tls: Option<ClientTlsFiles>,
}

impl CoordAddr {
    /// `addr` is `HOST:PORT` or `http://HOST:PORT` (plaintext) or `https://HOST:PORT`
    /// (TLS with `tls`). TLS settings with a plaintext address are an error: the
    /// operator meant TLS and would otherwise get none.
    pub fn new(addr: &str, tls: &ClientTlsFiles) -> Result<CoordAddr> {
        let addr = addr.trim();
        let url = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let bad = |why: &str| Error::CoordAddress {
            addr: addr.to_string(),
            why: why.to_string(),
        };
        let endpoint = Endpoint::from_shared(url.clone()).map_err(|_| bad("not a URL"))?;
        if endpoint.uri().host().is_none_or(str::is_empty) {
            return Err(bad("no host"));
        }
        match endpoint.uri().scheme_str() {
            Some("http") => {
                if !tls.is_empty() {
                    return Err(Error::TlsConfig(format!(
                        "TLS settings ([tls] / --tls-*) are given but the coordinator address {url} is plaintext: write it as https://HOST:PORT"
                    )));
                }
                Ok(CoordAddr {
                    url,
                    endpoint,
                    tls: None,
                })
            }
            Some("https") => {
                let endpoint = endpoint.tls_config(tls.client_config()?).map_err(|e| {
                    // tonic's own words ("transport error") say nothing; its source does.
                    let detail = e.source().map_or_else(|| e.to_string(), chain);
                    let hint = if detail.contains("native certs") {
                        "this system's trust store holds no CA certificates: set [tls] ca / --tls-ca to the CA that signed the coordinator's certificate"
                    } else if tls.cert.is_some() {
                        "check that [tls] key / --tls-key is the private key of [tls] cert / --tls-cert, an X.509 v3 certificate"
                    } else {
                        "check the files named in [tls] / --tls-*"
                    };
                    Error::TlsConfig(format!(
                        "TLS settings for {url} are unusable ({detail}): {hint}"
                    ))
                })?;
                Ok(CoordAddr {
                    url,
                    endpoint,
                    tls: Some(tls.clone()),
                })
            }
            _ => Err(bad("unsupported scheme")),
        }
    }

    /// A plaintext or system-roots address with no TLS files, e.g. a loopback URL.
    pub fn parse(addr: &str) -> Result<CoordAddr> {
        Self::new(addr, &ClientTlsFiles::default())
    }

    /// The URL dialed, e.g. `https://mac5.local:7400`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The endpoint to dial (a copy: callers add their own timeouts).
    pub fn endpoint(&self) -> Endpoint {
        self.endpoint.clone()
    }

    /// What TLS, or its absence, says about a failed connection or a failed first call
    /// on a new connection; `None` when it says nothing (the caller reports "cannot
    /// reach" as before). Only meant for those two moments: the heuristics for a
    /// connection that closes at once would mislead about one that served for hours.
    pub fn explain(&self, err: &(dyn StdError + 'static)) -> Option<Diagnosis> {
        let url = &self.url;
        let Some(tls) = &self.tls else {
            // A TLS server's alert, read as an HTTP/2 frame, has an impossible size; or
            // the server hung up on our plaintext before its alert was read.
            let hint = "dial it as https://HOST:PORT (and set [tls] ca / --tls-ca if its certificate comes from a private CA)";
            if chain(err).contains("frame with invalid size") {
                return Some(Diagnosis::certain(format!(
                    "the coordinator at {url} answered in TLS, not plaintext: {hint}"
                )));
            }
            return closed_at_once(err).then(|| {
                Diagnosis::likely(format!(
                    "the coordinator at {url} closed the connection at once; if it serves TLS, {hint}"
                ))
            });
        };
        let no_cert = tls.cert.is_none();
        let mtls_hint = if no_cert {
            "the coordinator requires a client certificate (mTLS) and this client has none: set [tls] cert and key / --tls-cert and --tls-key to a certificate signed by the coordinator's client CA"
        } else {
            "the coordinator refused this client's certificate: use one signed by the CA in the coordinator's [tls] client_ca / --tls-client-ca"
        };
        let Some(failure) = TlsFailure::find(err) else {
            // Under TLS 1.3 the server judges the client's certificate after the client
            // has finished its side of the handshake, and its alert races our first
            // request: often all the client sees is the connection going away.
            return closed_at_once(err).then(|| {
                Diagnosis::likely(format!(
                    "the coordinator at {url} closed the connection right after the TLS handshake; most likely {mtls_hint}"
                ))
            });
        };
        let trust_hint = match &tls.ca {
            Some(ca) => format!(
                "[tls] ca / --tls-ca is {}: point it at the CA that signed the coordinator's certificate",
                ca.display()
            ),
            None => "set [tls] ca / --tls-ca to the CA that signed the coordinator's certificate".into(),
        };
        Some(Diagnosis::certain(match failure {
            TlsFailure::Untrusted(d) => {
                format!("the coordinator's certificate at {url} is not trusted ({d}): {trust_hint}")
            }
            TlsFailure::WrongName(d) => format!(
                "the coordinator's certificate does not match the host in {url} ({d}): dial a name the certificate lists, or set [tls] domain / --tls-domain to one"
            ),
            TlsFailure::Expired(d) => format!(
                "the coordinator's certificate at {url} is expired or not yet valid ({d}): renew it, or check the clocks of both machines"
            ),
            TlsFailure::ClientCertRequired(d) | TlsFailure::ClientCertRejected(d) => {
                format!("TLS with {url} failed ({d}): {mtls_hint}")
            }
            TlsFailure::NotTls(d) => format!(
                "the coordinator at {url} does not speak TLS ({d}): dial it as http://HOST:PORT, or give the coordinator [tls] cert and key"
            ),
            TlsFailure::Other(d) => format!("TLS with the coordinator at {url} failed: {d}"),
        }))
    }
}

impl fmt::Debug for CoordAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoordAddr")
            .field("url", &self.url)
            .field("tls", &self.tls)
            .finish()
    }
}

impl fmt::Display for CoordAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url)
    }
}

/// An explained connection failure: one sentence that says what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub message: String,
    /// The error itself names the problem (rustls reported it). Otherwise the
    /// connection only closed at a moment that points there, and the caller should
    /// retry as for any lost connection.
    pub certain: bool,
}

impl Diagnosis {
    fn certain(message: String) -> Self {
        Diagnosis {
            message,
            certain: true,
        }
    }

    fn likely(message: String) -> Self {
        Diagnosis {
            message,
            certain: false,
        }
    }
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why a TLS connection failed, sorted by what the operator has to fix. Each variant
/// carries rustls's own words for the detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsFailure {
    /// The peer's certificate does not chain to a CA this side trusts.
    Untrusted(String),
    /// The peer's certificate does not name the host that was dialed.
    WrongName(String),
    /// The peer's certificate is expired or not valid yet.
    Expired(String),
    /// The server wants a client certificate (mTLS) and got none.
    ClientCertRequired(String),
    /// The server refused the client certificate it was shown.
    ClientCertRejected(String),
    /// The peer answered, but not in TLS: a plaintext server.
    NotTls(String),
    /// Any other TLS error.
    Other(String),
}

impl TlsFailure {
    /// Finds the TLS error in an error's source chain, if there is one. tonic and
    /// reqwest wrap rustls's error in `std::io::Error`s, whose `source()` skips the
    /// wrapped error, so each link is also opened with `get_ref`; and h2 keeps only the
    /// text of an I/O error that ends a connection, so rustls's words are read too.
    pub fn find(err: &(dyn StdError + 'static)) -> Option<TlsFailure> {
        let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
        while let Some(e) = cur {
            if let Some(r) = e.downcast_ref::<rustls::Error>() {
                return Some(Self::classify(r));
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if let Some(r) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                    return Some(Self::classify(r));
                }
                if io.kind() == std::io::ErrorKind::UnexpectedEof
                    && io.to_string().contains("tls handshake eof")
                {
                    return Some(TlsFailure::NotTls(
                        "the connection closed during the TLS handshake".into(),
                    ));
                }
            }
            if let Some(f) = Self::from_text(&e.to_string()) {
                return Some(f);
            }
            cur = e.source();
        }
        None
    }

    /// Reads rustls's `Display` of an alert or a certificate error.
    fn from_text(text: &str) -> Option<TlsFailure> {
        // The words may sit inside another error's debug output: keep only rustls's.
        if let Some(at) = text.find("received fatal alert: ") {
            let alert: String = text[at + "received fatal alert: ".len()..]
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            let d = format!("received fatal alert: {alert}");
            let rejected = [
                "BadCertificate",
                "UnknownCA",
                "CertificateUnknown",
                "UnsupportedCertificate",
                "CertificateRevoked",
                "CertificateExpired",
                "AccessDenied",
            ];
            return Some(if alert.starts_with("CertificateRequired") {
                TlsFailure::ClientCertRequired(d)
            } else if rejected.iter().any(|a| alert.starts_with(a)) {
                TlsFailure::ClientCertRejected(d)
            } else {
                TlsFailure::Other(d)
            });
        }
        if let Some(at) = text.find("invalid peer certificate: ") {
            let d = rustls_words(&text[at..]);
            let lower = d.to_ascii_lowercase();
            return Some(
                if lower.contains("notvalidforname") || lower.contains("not valid for name") {
                    TlsFailure::WrongName(d)
                } else if lower.contains("expired")
                    || lower.contains("notvalidyet")
                    || lower.contains("not valid yet")
                {
                    TlsFailure::Expired(d)
                } else {
                    TlsFailure::Untrusted(d)
                },
            );
        }
        text.find("received corrupt message")
            .map(|at| TlsFailure::NotTls(rustls_words(&text[at..])))
    }

    fn classify(e: &rustls::Error) -> TlsFailure {
        let d = e.to_string();
        match e {
            rustls::Error::InvalidCertificate(c) => match c {
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => TlsFailure::WrongName(d),
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => TlsFailure::Expired(d),
                _ => TlsFailure::Untrusted(d),
            },
            rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
                TlsFailure::ClientCertRequired(d)
            }
            rustls::Error::AlertReceived(
                AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::CertificateRevoked
                | AlertDescription::CertificateExpired
                | AlertDescription::AccessDenied,
            ) => TlsFailure::ClientCertRejected(d),
            rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
                TlsFailure::NotTls(d)
            }
            _ => TlsFailure::Other(d),
        }
    }
}

/// rustls's message at the start of `text`, without what an enclosing debug output
/// adds after it.
fn rustls_words(text: &str) -> String {
    let end = ["\" }", "\n"]
        .iter()
        .filter_map(|m| text.find(m))
        .min()
        .unwrap_or(text.len());
    text[..end].to_string()
}

/// Whether the peer hung up (closed, reset, broken pipe) rather than refused the
/// connection or timed out.
fn closed_at_once(err: &(dyn StdError + 'static)) -> bool {
    use std::io::ErrorKind;
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                ErrorKind::BrokenPipe
                    | ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::UnexpectedEof
            ) {
                return true;
            }
        }
        cur = e.source();
    }
    // hyper and h2 report a connection that ended under a pending request in words only.
    let text = chain(err).to_ascii_lowercase();
    ["connection closed", "broken pipe", "connection reset"]
        .iter()
        .any(|w| text.contains(w))
}

/// An error and its sources on one line.
fn chain(err: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = vec![err.to_string()];
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = e.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn files(dir: &Path) -> (PathBuf, PathBuf) {
        let garbage = dir.join("garbage.pem");
        std::fs::write(&garbage, "not a pem file\n").unwrap();
        let truncated = dir.join("truncated.pem");
        std::fs::write(&truncated, "-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap();
        (garbage, truncated)
    }

    #[test]
    fn pem_errors_name_the_file_and_what_was_expected() {
        let dir = tempfile::tempdir().unwrap();
        let (garbage, truncated) = files(dir.path());
        let missing = dir.path().join("missing.pem");
        let err = read_certs(&missing).unwrap_err().to_string();
        assert!(
            err.contains("missing.pem") && err.contains("cannot read"),
            "{err}"
        );
        let err = read_certs(&garbage).unwrap_err().to_string();
        assert!(
            err.contains("garbage.pem") && err.contains("no certificate"),
            "{err}"
        );
        let err = read_ca(&truncated).unwrap_err().to_string();
        assert!(
            err.contains("truncated.pem") && err.contains("not valid PEM"),
            "{err}"
        );
        let err = read_key(&garbage).unwrap_err().to_string();
        assert!(
            err.contains("garbage.pem") && err.contains("no private key"),
            "{err}"
        );
    }

    #[test]
    fn addresses_pick_plaintext_or_tls() {
        let plain = CoordAddr::parse("mac5.local:7400").unwrap();
        assert_eq!(plain.url(), "http://mac5.local:7400");
        assert!(!plain.is_tls());
        assert_eq!(
            CoordAddr::parse(" http://127.0.0.1:7400 ").unwrap().url(),
            "http://127.0.0.1:7400"
        );
        for bad in ["ftp://mac5:7400", "http://", "mac 5:7400"] {
            assert!(
                matches!(CoordAddr::parse(bad), Err(Error::CoordAddress { .. })),
                "{bad}"
            );
        }
        // TLS files with a plaintext address: the operator meant TLS.
        let tls = ClientTlsFiles {
            ca: Some("/etc/karl/ca.pem".into()),
            ..ClientTlsFiles::default()
        };
        let err = CoordAddr::new("mac5:7400", &tls).unwrap_err().to_string();
        assert!(err.contains("https://HOST:PORT"), "{err}");
        // A client certificate needs its key, and the other way round.
        let half = ClientTlsFiles {
            cert: Some("c.pem".into()),
            ..ClientTlsFiles::default()
        };
        let err = CoordAddr::new("https://mac5:7400", &half)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--tls-key"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let (garbage, _) = files(dir.path());
        let bad_ca = ClientTlsFiles {
            ca: Some(garbage),
            ..ClientTlsFiles::default()
        };
        let err = CoordAddr::new("https://mac5:7400", &bad_ca)
            .unwrap_err()
            .to_string();
        assert!(err.contains("garbage.pem"), "{err}");
    }

    #[test]
    fn flags_win_over_the_file_field_by_field() {
        let flags = ClientTlsFiles {
            ca: Some("flag-ca.pem".into()),
            ..ClientTlsFiles::default()
        };
        let file = ClientTlsFiles {
            ca: Some("file-ca.pem".into()),
            domain: Some("mac5.local".into()),
            ..ClientTlsFiles::default()
        };
        let merged = flags.or(file);
        assert_eq!(merged.ca, Some(PathBuf::from("flag-ca.pem")));
        assert_eq!(merged.domain.as_deref(), Some("mac5.local"));
        assert!(ClientTlsFiles::default().is_empty() && !merged.is_empty());
        assert!(toml::from_str::<ClientTlsFiles>("cert = \"c\"\nclient_ca = \"x\"").is_err());
    }

    #[test]
    fn failures_read_from_rustls_words() {
        let text = |t: &str| TlsFailure::from_text(t);
        assert_eq!(
            text("hyper: Custom { kind: InvalidData, error: \"received fatal alert: CertificateRequired\" }"),
            Some(TlsFailure::ClientCertRequired(
                "received fatal alert: CertificateRequired".into()
            ))
        );
        assert_eq!(
            text("received fatal alert: UnknownCA"),
            Some(TlsFailure::ClientCertRejected(
                "received fatal alert: UnknownCA".into()
            ))
        );
        assert!(matches!(
            text("received fatal alert: ProtocolVersion"),
            Some(TlsFailure::Other(_))
        ));
        assert_eq!(
            text("io: invalid peer certificate: UnknownIssuer\" })"),
            Some(TlsFailure::Untrusted(
                "invalid peer certificate: UnknownIssuer".into()
            ))
        );
        assert!(matches!(
            text("invalid peer certificate: certificate not valid for name \"x\""),
            Some(TlsFailure::WrongName(_))
        ));
        assert!(matches!(
            text("invalid peer certificate: certificate expired: verification time 2, but certificate is not valid after 1"),
            Some(TlsFailure::Expired(_))
        ));
        assert!(matches!(
            text("received corrupt message of type InvalidContentType"),
            Some(TlsFailure::NotTls(_))
        ));
        assert_eq!(text("connection refused"), None);
    }

    #[test]
    fn typed_rustls_errors_are_found_inside_io_errors() {
        let inner = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, inner);
        assert!(matches!(
            TlsFailure::find(&io),
            Some(TlsFailure::Untrusted(_))
        ));
        let alert = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        assert!(matches!(
            TlsFailure::find(&alert),
            Some(TlsFailure::ClientCertRequired(_))
        ));
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(TlsFailure::find(&refused), None);
        assert!(!closed_at_once(&refused));
        let pipe = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "gone");
        assert!(closed_at_once(&pipe));
    }

    #[test]
    fn a_plaintext_client_is_told_about_tls_only_when_it_fits() {
        let plain = CoordAddr::parse("127.0.0.1:7400").unwrap();
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(plain.explain(&refused), None);
        let frame = std::io::Error::other("connection error detected: frame with invalid size");
        let d = plain.explain(&frame).unwrap();
        assert!(d.certain && d.message.contains("https://HOST:PORT"), "{d}");
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        let d = plain.explain(&reset).unwrap();
        assert!(!d.certain && d.message.contains("if it serves TLS"), "{d}");
    }
}

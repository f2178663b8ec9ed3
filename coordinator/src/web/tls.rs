//! HTTPS for the dashboard, from the coordinator's own `[tls]` settings: the same
//! certificate and key as the gRPC port, and with `client_ca` the same mTLS — a browser
//! must then present a certificate that CA signed, and that certificate is its login.
//!
//! axum's own `serve` speaks plain TCP only, so the accept loop is here: each connection
//! is a TLS handshake (bounded in time), then HTTP/1.1 over hyper into the same router.
//! Not here: the routes and their auth ([`super::auth`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::config::ServerTls;
use crate::error::{CoordError, Result};

/// Bound on a browser's TLS handshake, so half-open connections do not pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may finish once the coordinator stops.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The dashboard's TLS acceptor from the coordinator's certificate, key and client CA.
pub fn acceptor(tls: &ServerTls) -> Result<TlsAcceptor> {
    let bad = |what: &str, path: &std::path::Path, e: &dyn std::fmt::Display| {
        CoordError::InvalidArgument(format!("dashboard TLS: {what} {}: {e}", path.display()))
    };
    let certs = CertificateDer::pem_slice_iter(&karl_common::tls::read_certs(&tls.cert)?)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad("certificate", &tls.cert, &e))?;
    let key = PrivateKeyDer::from_pem_slice(&karl_common::tls::read_key(&tls.key)?)
        .map_err(|e| bad("key", &tls.key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| CoordError::Internal(format!("dashboard TLS: {e}")))?;
    let builder = match &tls.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&karl_common::tls::read_ca(ca)?) {
                let cert = cert.map_err(|e| bad("client CA", ca, &e))?;
                roots.add(cert).map_err(|e| bad("client CA", ca, &e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| bad("client CA", ca, &e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| bad("certificate and key", &tls.cert, &e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves `app` over TLS on `listener` until `shutdown` completes; requests in flight then
/// get [`CLOSE_GRACE`] to finish (live feeds end on their own when the coordinator closes).
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let acceptor = acceptor.clone();
                    let service = TowerToHyperService::new(app.clone());
                    conns.spawn(async move {
                        let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(target: "coord.web", %peer, error = %e, "dashboard TLS handshake failed");
                                return;
                            }
                            Err(_) => return,
                        };
                        // A browser that hangs up mid-reply ends its connection; nothing to report.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of descriptors or similar: pause rather than spin.
                Err(e) => {
                    tracing::warn!(target: "coord.web", error = %e, "dashboard accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    let drain = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(CLOSE_GRACE, drain).await.is_err() {
        conns.abort_all();
    }
}

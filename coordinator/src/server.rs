//! Serving both gRPC services on one listener, with the cross-cutting concerns as
//! tower layers: the shared-token check, a per-request timeout (which bounds only the
//! time to response headers, so long-lived streams are unaffected), a concurrency limit,
//! and HTTP/2 keepalive so a vanished agent's stream is noticed. With `[tls]` set the
//! listener speaks only TLS (tonic's rustls), and with `client_ca` only to clients whose
//! certificate that CA signed; the token is checked either way.
//!
//! Stopping: when the shutdown future completes, every long-lived stream (agent links,
//! pane watches, session follows) ends through [`Closing`], so graceful shutdown has
//! nothing to wait for; connections still open after [`SHUTDOWN_GRACE`] are dropped.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use karl_common::auth::{check_bearer, AUTH_HEADER};
use karl_common::pb;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::InterceptorLayer;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Status};

use crate::config::ServerTls;
use crate::control::ControlService;
use crate::engine::Engine;
use crate::error::{CoordError, Result};
use crate::link::AgentLinkService;
use crate::registry::Registry;

/// How long open connections get to finish once the server is told to stop. Streams end
/// at once, so this only bounds a peer that does not close its side.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The server is stopping: long-lived response streams end when this fires. Cheap to
/// clone; every stream holds one.
#[derive(Debug, Clone)]
pub struct Closing(tokio::sync::watch::Receiver<bool>);

impl Closing {
    /// A signal and the sender that fires it.
    pub fn new() -> (tokio::sync::watch::Sender<bool>, Closing) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (tx, Closing(rx))
    }

    /// Completes once the server is stopping (or its sender is gone).
    pub async fn closed(mut self) {
        let _ = self.0.wait_for(|closing| *closing).await;
    }

    /// `stream`, ending when the server stops.
    pub fn end_stream<S>(&self, stream: S) -> impl futures::Stream<Item = S::Item> + Send + Unpin
    where
        S: futures::Stream + Send + Unpin + 'static,
    {
        futures::StreamExt::take_until(stream, Box::pin(self.clone().closed()))
    }
}

/// What the server needs: shared state built by the caller (so tests and
/// `--local-agent` can reach it).
#[derive(Clone)]
pub struct ServerState {
    pub registry: Arc<Registry>,
    pub engine: Arc<Engine>,
    pub notifier: Arc<crate::notify::Notifier>,
    pub token: Option<String>,
    /// TLS for the listener, from [`tls_config`]; `None` serves plaintext.
    pub tls: Option<ServerTlsConfig>,
}

/// Bound on a client's TLS handshake, so half-open connections do not pile up.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the coordinator's certificate, key and client CA and checks that they make a
/// working TLS setup, so a key that does not belong to the certificate stops startup
/// with a message naming both files rather than failing every handshake.
pub fn tls_config(tls: &ServerTls) -> Result<ServerTlsConfig> {
    let cert = karl_common::tls::read_certs(&tls.cert)?;
    let key = karl_common::tls::read_key(&tls.key)?;
    let mut cfg = ServerTlsConfig::new()
        .identity(Identity::from_pem(cert, key))
        .timeout(TLS_HANDSHAKE_TIMEOUT);
    if let Some(ca) = &tls.client_ca {
        cfg = cfg.client_ca_root(Certificate::from_pem(karl_common::tls::read_ca(ca)?));
    }
    Server::builder().tls_config(cfg.clone()).map_err(|e| {
        CoordError::InvalidArgument(format!(
            "TLS certificate {} and key {} do not make a usable pair ({}): check that the key belongs to the certificate",
            tls.cert.display(),
            tls.key.display(),
            error_chain(&e)
        ))
    })?;
    Ok(cfg)
}

/// An error and its sources on one line.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        src = s.source();
    }
    parts.join(": ")
}

/// Builds the token interceptor. With no token configured (loopback-only use, enforced
/// by config validation) every call passes.
pub fn auth_interceptor(
    token: Option<String>,
) -> impl Fn(Request<()>) -> Result<Request<()>, Status> + Clone + Send + Sync + 'static {
    move |req: Request<()>| {
        let Some(expected) = token.as_deref() else {
            return Ok(req);
        };
        let given = req
            .metadata()
            .get(AUTH_HEADER)
            .and_then(|v| v.to_str().ok());
        if check_bearer(given, expected) {
            Ok(req)
        } else if given.is_none() {
            Err(Status::unauthenticated(
                "no token given: pass --token or set KARL_TOKEN to the coordinator's token",
            ))
        } else {
            Err(Status::unauthenticated(
                "wrong token: check --token / KARL_TOKEN against the coordinator's",
            ))
        }
    }
}

/// Serves until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send,
) -> std::result::Result<(), tonic::transport::Error> {
    let (close, closing) = Closing::new();
    let layer = tower::ServiceBuilder::new()
        .layer(InterceptorLayer::new(auth_interceptor(state.token.clone())))
        .into_inner();
    let mut builder = Server::builder();
    if let Some(tls) = state.tls.clone() {
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        .timeout(Duration::from_secs(60))
        .concurrency_limit_per_connection(256)
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .tcp_nodelay(true)
        .layer(layer)
        .add_service(pb::agent_link_server::AgentLinkServer::new(
            AgentLinkService::new(state.registry.clone(), closing.clone()),
        ))
        .add_service(pb::control_server::ControlServer::new(ControlService::new(
            state.registry.clone(),
            state.engine.clone(),
            state.notifier.clone(),
            closing.clone(),
        )))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
            shutdown.await;
            tracing::info!(target: "coord", "stopping: closing streams");
            let _ = close.send(true);
        });
    tokio::pin!(server);
    tokio::select! {
        served = &mut server => served,
        () = async {
            closing.closed().await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {
            tracing::warn!(target: "coord", grace = ?SHUTDOWN_GRACE, "connections still open after the grace period; dropping them");
            Ok(())
        }
    }
}

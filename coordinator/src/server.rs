//! Serving both gRPC services on one listener, with the cross-cutting concerns as
//! tower layers: the shared-token check, a per-request timeout (which bounds only the
//! time to response headers, so long-lived streams are unaffected), a concurrency limit,
//! and HTTP/2 keepalive so a vanished agent's stream is noticed.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use karl_common::auth::{check_bearer, AUTH_HEADER};
use karl_common::pb;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::InterceptorLayer;
use tonic::transport::Server;
use tonic::{Request, Status};

use crate::control::ControlService;
use crate::engine::Engine;
use crate::link::AgentLinkService;
use crate::registry::Registry;

/// What the server needs: shared state built by the caller (so tests and
/// `--local-agent` can reach it).
#[derive(Clone)]
pub struct ServerState {
    pub registry: Arc<Registry>,
    pub engine: Arc<Engine>,
    pub token: Option<String>,
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
) -> Result<(), tonic::transport::Error> {
    let layer = tower::ServiceBuilder::new()
        .layer(InterceptorLayer::new(auth_interceptor(state.token.clone())))
        .into_inner();
    Server::builder()
        .timeout(Duration::from_secs(60))
        .concurrency_limit_per_connection(256)
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
        .tcp_nodelay(true)
        .layer(layer)
        .add_service(pb::agent_link_server::AgentLinkServer::new(
            AgentLinkService::new(state.registry.clone()),
        ))
        .add_service(pb::control_server::ControlServer::new(ControlService::new(
            state.registry.clone(),
            state.engine.clone(),
        )))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await
}

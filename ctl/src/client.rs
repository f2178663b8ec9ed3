//! Connecting karl-ctl to the coordinator: endpoint timeouts, TLS (from the
//! [`CoordAddr`]), the token header, and turning transport and status errors into one
//! plain sentence for the operator.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use karl_common::auth::{bearer, AUTH_HEADER};
use karl_common::pb::control_client::ControlClient;
use karl_common::tls::CoordAddr;
use tonic::body::Body;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tower::Service;

/// The interceptor that adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct TokenInterceptor {
    header: Option<MetadataValue<tonic::metadata::Ascii>>,
}

impl TokenInterceptor {
    pub fn new(token: Option<&str>) -> anyhow::Result<Self> {
        let header = match token {
            Some(t) => Some(bearer(t).parse().map_err(|_| {
                anyhow::anyhow!(
                    "the token holds characters that cannot go in a header; use printable ASCII"
                )
            })?),
            None => None,
        };
        Ok(TokenInterceptor { header })
    }
}

impl tonic::service::Interceptor for TokenInterceptor {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        if let Some(h) = &self.header {
            req.metadata_mut().insert(AUTH_HEADER, h.clone());
        }
        Ok(req)
    }
}

/// The channel, with a failed call explained by TLS (or its absence) until one call
/// has gone through. Under TLS 1.3 the coordinator judges a client certificate after
/// the client's side of the handshake is done, so a refused certificate surfaces on
/// the first call rather than in [`connect`]; once a call succeeded, later failures are
/// something else and keep their own words.
#[derive(Clone)]
pub struct ExplainedChannel {
    inner: Channel,
    coord: CoordAddr,
    answered: Arc<AtomicBool>,
}

/// A failed call as the sentence that says what to fix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Explained(String);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl ExplainedChannel {
    fn explain(coord: &CoordAddr, answered: &AtomicBool, e: tonic::transport::Error) -> BoxError {
        if answered.load(Ordering::Relaxed) {
            return Box::new(e);
        }
        match coord.explain(&e) {
            Some(d) => Box::new(Explained(d.message)),
            None => Box::new(e),
        }
    }
}

impl Service<http::Request<Body>> for ExplainedChannel {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let (coord, answered) = (&self.coord, &self.answered);
        self.inner
            .poll_ready(cx)
            .map_err(|e| Self::explain(coord, answered, e))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let call = self.inner.call(req);
        let coord = self.coord.clone();
        let answered = self.answered.clone();
        Box::pin(async move {
            match call.await {
                Ok(resp) => {
                    answered.store(true, Ordering::Relaxed);
                    Ok(resp)
                }
                Err(e) => Err(Self::explain(&coord, &answered, e)),
            }
        })
    }
}

pub type Client = ControlClient<InterceptedService<ExplainedChannel, TokenInterceptor>>;

/// Connects, or explains in one line which address could not be reached, or why TLS
/// with it failed.
pub async fn connect(coord: &CoordAddr, token: Option<&str>) -> anyhow::Result<Client> {
    let endpoint = coord
        .endpoint()
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true);
    let channel = endpoint.connect().await.map_err(|e| match coord.explain(&e) {
        Some(d) => anyhow::anyhow!(d.message),
        None => anyhow::anyhow!(
            "cannot reach the coordinator at {coord} ({}): start karl-coord there or point --coord / KARL_COORD at it",
            root_cause(&e)
        ),
    })?;
    let channel = ExplainedChannel {
        inner: channel,
        coord: coord.clone(),
        answered: Arc::new(AtomicBool::new(false)),
    };
    Ok(
        ControlClient::with_interceptor(channel, TokenInterceptor::new(token)?)
            .max_decoding_message_size(64 * 1024 * 1024),
    )
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// One sentence for a failed call.
pub fn explain(status: Status) -> anyhow::Error {
    match status.code() {
        Code::Unauthenticated => {
            anyhow::anyhow!("the coordinator refused the call: {}", status.message())
        }
        Code::Unavailable => {
            anyhow::anyhow!("the coordinator is unavailable: {}", status.message())
        }
        _ => anyhow::anyhow!("{}", status.message()),
    }
}

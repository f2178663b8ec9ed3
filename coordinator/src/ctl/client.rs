//! Connecting karl-ctl to the coordinator: endpoint timeouts, the token header, and
//! turning transport and status errors into one plain sentence for the operator.

use std::time::Duration;

use karl_common::auth::{bearer, AUTH_HEADER};
use karl_common::pb::control_client::ControlClient;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Status};

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

pub type Client = ControlClient<InterceptedService<Channel, TokenInterceptor>>;

/// Connects, or explains in one line which address could not be reached.
pub async fn connect(coord: &str, token: Option<&str>) -> anyhow::Result<Client> {
    let url = normalize_url(coord);
    let endpoint = Endpoint::from_shared(url.clone())
        .map_err(|_| {
            anyhow::anyhow!("invalid coordinator address {coord:?}: write it as http://HOST:PORT")
        })?
        .connect_timeout(Duration::from_secs(3))
        .timeout(Duration::from_secs(60))
        .tcp_nodelay(true);
    let channel = endpoint.connect().await.map_err(|e| {
        anyhow::anyhow!(
            "cannot reach the coordinator at {url} ({}): start karl-coord there or point --coord / KARL_COORD at it",
            root_cause(&e)
        )
    })?;
    Ok(
        ControlClient::with_interceptor(channel, TokenInterceptor::new(token)?)
            .max_decoding_message_size(64 * 1024 * 1024),
    )
}

/// `host:port` → `http://host:port`.
pub fn normalize_url(coord: &str) -> String {
    if coord.contains("://") {
        coord.to_string()
    } else {
        format!("http://{coord}")
    }
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

//! What the two stub servers (the OpenAI-compatible model and the Anthropic Messages API)
//! share: the response body type, a plain response, and the accept loop that serves
//! HTTP/1.1 connections until shutdown. What each replies lives in its own module.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

/// A response body: whole or streamed.
pub type Body = BoxBody<Bytes, Infallible>;

/// A whole response with a status and a content type.
pub fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()).boxed());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// Serves connections on `listener` with `handle` until `shutdown` fires (or its sender
/// is dropped); open connections are then aborted.
pub async fn serve<H, F>(listener: TcpListener, mut shutdown: oneshot::Receiver<()>, handle: H)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let handle = handle.clone();
                    conns.spawn(async move {
                        // A client that hangs up mid-reply ends its connection; nothing
                        // to report.
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service_fn(handle))
                            .await;
                    });
                }
                // Out of descriptors or similar: pause rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
}

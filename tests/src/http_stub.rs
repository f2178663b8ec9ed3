//! What the stub servers (the OpenAI-compatible model, the Anthropic Messages API and the
//! OpenAI Responses API) share: the response body type, a plain response, server-sent
//! event streams, and the accept loop that serves
//! HTTP/1.1 connections — plain, or over TLS with a [`TlsAcceptor`] — until shutdown.
//! What each replies lives in its own module.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
pub use tokio_rustls::TlsAcceptor;

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

/// A scripted reply for turns whose prompt contains `when`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule<R> {
    pub when: String,
    pub reply: R,
}

/// What a model stub answers to turn requests, for its own reply type `R` (each stub sets
/// the defaults by implementing `Default` for `Script<its Reply>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Script<R> {
    /// Tried in order; the first whose `when` is in the prompt answers.
    pub rules: Vec<Rule<R>>,
    /// For prompts no rule matches.
    pub default: R,
    /// For a request answering a tool call (the stub says what it fills in).
    pub after_tool: R,
}

impl<R> Script<R>
where
    Script<R>: Default,
{
    /// The stub's defaults: each prompt echoed back (`Done: …`).
    pub fn new() -> Self {
        Script::default()
    }
}

impl<R> Script<R> {
    /// Adds a rule: prompts containing `when` get `reply`.
    pub fn on(mut self, when: impl Into<String>, reply: R) -> Self {
        self.rules.push(Rule {
            when: when.into(),
            reply,
        });
        self
    }

    pub fn default_reply(mut self, reply: R) -> Self {
        self.default = reply;
        self
    }

    /// The reply for `prompt`: the first matching rule's, else the default.
    pub fn pick(&self, prompt: &str) -> &R {
        self.rules
            .iter()
            .find(|r| prompt.contains(&r.when))
            .map(|r| &r.reply)
            .unwrap_or(&self.default)
    }
}

/// A stub server on `127.0.0.1:0` with a tokio runtime of its own, so plain `#[test]`
/// functions can hold it; stops when dropped (open streams are abandoned, not awaited:
/// the client may hold them).
pub struct Served {
    addr: std::net::SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Served {
    /// Starts serving with `handle`; call it from synchronous code, not from inside a
    /// tokio runtime. `name` names the runtime's thread.
    pub fn start<H, F>(name: &str, handle: H) -> std::io::Result<Served>
    where
        H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
        F: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(name)
            .enable_all()
            .build()?;
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (tx, rx) = oneshot::channel();
        let listener = {
            let _guard = runtime.enter();
            TcpListener::from_std(std_listener)?
        };
        runtime.spawn(serve(listener, None, rx, handle));
        Ok(Served {
            addr,
            shutdown: Some(tx),
            runtime: Some(runtime),
        })
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// One server-sent event.
pub fn sse(event: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// Text split after each space, so a slow stream arrives word by word.
pub fn text_pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        cur.push(c);
        if c == ' ' {
            pieces.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() || pieces.is_empty() {
        pieces.push(cur);
    }
    pieces
}

/// A `text/event-stream` response sending `events` in order, each after its pause (ms),
/// from a task of its own; a client that hangs up ends it.
pub fn event_stream(events: Vec<(u64, Bytes)>) -> Response<Body> {
    let (tx, rx) = mpsc::channel(8);
    tokio::spawn(async move {
        for (pause, bytes) in events {
            if pause > 0 {
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            if tx.send(bytes).await.is_err() {
                return;
            }
        }
    });
    let mut resp = Response::new(ChannelBody(rx).boxed());
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    resp
}

/// A body fed by a task, one chunk per event, ending when the sender is dropped.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

/// A TLS acceptor for a stub server from a PEM certificate chain and key (rustls with
/// the ring provider, HTTP/1.1 over ALPN).
pub fn tls_acceptor(cert_pem: &[u8], key_pem: &[u8]) -> std::io::Result<TlsAcceptor> {
    let bad = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| bad(format!("key: {e}")))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| bad(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| bad(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves connections on `listener` with `handle` until `shutdown` fires (or its sender
/// is dropped); open connections are then aborted. With `tls`, each connection is a TLS
/// handshake first; one that fails is dropped.
pub async fn serve<H, F>(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    mut shutdown: oneshot::Receiver<()>,
    handle: H,
) where
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
                    let tls = tls.clone();
                    conns.spawn(async move {
                        match tls {
                            Some(acceptor) => {
                                if let Ok(stream) = acceptor.accept(stream).await {
                                    serve_connection(stream, handle).await;
                                }
                            }
                            None => serve_connection(stream, handle).await,
                        }
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

async fn serve_connection<IO, H, F>(io: IO, handle: H)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    // A client that hangs up mid-reply ends its connection; nothing to report.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), service_fn(handle))
        .await;
}

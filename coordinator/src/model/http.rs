//! [`HttpModelClient`]: OpenAI-compatible chat completions over HTTP or HTTPS (reqwest
//! with rustls; the system's CAs plus an optional private one — see
//! [`super::ModelConfig`]).
//!
//! Each request tries the endpoints in order — primary first, except that endpoints
//! which recently failed as unavailable go to the back for `cooldown_ms` — with up to
//! `retries` extra attempts per endpoint and capped exponential backoff with full jitter
//! between them. Every attempt is bounded by `timeout_ms` as a whole (connect, send, read), and
//! replies are read in chunks up to `max_reply_bytes`, so a hung or flooding server
//! costs a bounded time and memory. No reply body can make it panic: anything that is
//! not a chat completion with text is a [`ModelError`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use backon::Retryable as _;
use karl_common::tls::TlsFailure;
use rand::Rng;
use reqwest::header::CONTENT_TYPE;
use reqwest::{StatusCode, Url};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{
    ChatMessage, ChatReply, ChatRequest, Health, ModelClient, ModelConfig, ModelError, ModelFuture,
};

/// Bytes of an error body kept for the error message.
const ERROR_BODY_BYTES: usize = 4096;
const ERROR_EXCERPT_CHARS: usize = 300;
/// Health checks are quick questions; a slow server is still reported quickly.
const HEALTH_TIMEOUT_CAP: Duration = Duration::from_secs(10);

/// One configured endpoint.
#[derive(Debug, Clone)]
struct Endpoint {
    /// Normalized base URL (`http://host:port/v1`), used in errors and replies.
    base: String,
    chat: Url,
    models: Url,
}

/// What a successful attempt yields before timing is added.
#[derive(Debug)]
struct Completion {
    text: String,
    prompt_tokens: Option<u32>,
    cached_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    model: Option<String>,
    finish_reason: Option<String>,
}

#[derive(Serialize)]
struct WireRequest<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    messages: &'a [ChatMessage],
    temperature: f32,
    max_tokens: u32,
    stream: bool,
}

/// The OpenAI-compatible HTTP model client.
pub struct HttpModelClient {
    config: ModelConfig,
    endpoints: Vec<Endpoint>,
    http: reqwest::Client,
    /// Per endpoint: deprioritized until this instant after failing as unavailable.
    cooldown: Mutex<Vec<Option<Instant>>>,
}

impl std::fmt::Debug for HttpModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpModelClient")
            .field("endpoints", &self.endpoints())
            .field("config", &self.config)
            .finish()
    }
}

impl HttpModelClient {
    /// Builds a client; fails on an empty URL list, an unusable URL, an unreadable or
    /// empty `ca` file, or out-of-range settings.
    pub fn new(config: ModelConfig) -> Result<Self, ModelError> {
        config.validate()?;
        let endpoints = config
            .urls
            .iter()
            .map(|u| parse_endpoint(u))
            .collect::<Result<Vec<_>, _>>()?;
        let mut builder = reqwest::Client::builder();
        if let Some(ca) = &config.ca {
            let pem = karl_common::tls::read_ca(ca)
                .map_err(|e| ModelError::BadConfig(format!("[model] ca: {e}")))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                ModelError::BadConfig(format!("[model] ca {}: {}", ca.display(), error_chain(&e)))
            })? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .connect_timeout(config.connect_timeout())
            // The model server is on a trusted network; an environment proxy would only
            // break loopback and LAN addresses.
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("karl-coord/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ModelError::BadConfig(format!("HTTP client: {}", error_chain(&e))))?;
        let n = endpoints.len();
        Ok(HttpModelClient {
            config,
            endpoints,
            http,
            cooldown: Mutex::new(vec![None; n]),
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Normalized base URLs, primary first.
    pub fn endpoints(&self) -> Vec<&str> {
        self.endpoints.iter().map(|e| e.base.as_str()).collect()
    }

    /// One chat completion with retries and fallback; on failure, the last error seen.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatReply, ModelError> {
        let wire = WireRequest {
            model: self.config.model.as_deref(),
            messages: &request.messages,
            temperature: request.temperature.unwrap_or(self.config.temperature),
            max_tokens: request.max_tokens.unwrap_or(self.config.max_tokens),
            stream: false,
        };
        let body = serde_json::to_vec(&wire)
            .map_err(|e| ModelError::BadConfig(format!("request does not serialize: {e}")))?;
        let attempts = AtomicU32::new(0);
        let mut last = ModelError::NoEndpoints;
        for idx in self.order() {
            let ep = &self.endpoints[idx];
            let outcome = (|| async {
                let attempt = attempts.fetch_add(1, Ordering::Relaxed).saturating_add(1);
                let started = Instant::now();
                let result = self.attempt_chat(ep, &body).await;
                if let Err(e) = &result {
                    tracing::warn!(target: "coord.model", endpoint = %ep.base, attempt, error = %e, "model call failed");
                }
                result.map(|c| (c, started.elapsed()))
            })
            .retry(self.config.retry_schedule())
            .when(ModelError::is_retryable)
            // backon's own jitter (1.6) lands in [d, 2d): full jitter is drawn here.
            .adjust(|_, ceiling| ceiling.map(full_jitter))
            .await;
            match outcome {
                Ok((c, latency)) => {
                    self.mark(idx, None);
                    let attempts = attempts.load(Ordering::Relaxed);
                    tracing::debug!(target: "coord.model", endpoint = %ep.base, attempts, latency_ms = latency.as_millis() as u64, prompt_tokens = ?c.prompt_tokens, "model replied");
                    return Ok(ChatReply {
                        text: c.text,
                        prompt_tokens: c.prompt_tokens,
                        cached_tokens: c.cached_tokens,
                        completion_tokens: c.completion_tokens,
                        latency,
                        endpoint: ep.base.clone(),
                        model: c.model,
                        finish_reason: c.finish_reason,
                        attempts,
                    });
                }
                Err(e) => last = e,
            }
            if last.is_unavailable() {
                self.mark(
                    idx,
                    Some(Instant::now() + Duration::from_millis(self.config.cooldown_ms)),
                );
            }
        }
        Err(last)
    }

    /// Finds an endpoint that answers: `GET {base}/models`, or — for servers without
    /// that route (404/405/501) — a one-token completion. Returns the first that
    /// answers, or the last error.
    pub async fn check_health(&self) -> Result<Health, ModelError> {
        let mut last = ModelError::NoEndpoints;
        for idx in self.order() {
            let ep = &self.endpoints[idx];
            let started = Instant::now();
            match self.probe(ep).await {
                Ok(models) => {
                    self.mark(idx, None);
                    return Ok(Health {
                        endpoint: ep.base.clone(),
                        models,
                        latency: started.elapsed(),
                    });
                }
                Err(e) => {
                    tracing::warn!(target: "coord.model", endpoint = %ep.base, error = %e, "model health check failed");
                    if e.is_unavailable() {
                        self.mark(
                            idx,
                            Some(Instant::now() + Duration::from_millis(self.config.cooldown_ms)),
                        );
                    }
                    last = e;
                }
            }
        }
        Err(last)
    }

    async fn probe(&self, ep: &Endpoint) -> Result<Vec<String>, ModelError> {
        let bound = self.config.timeout().min(HEALTH_TIMEOUT_CAP);
        let probe = async {
            let mut rb = self.http.get(ep.models.clone());
            if let Some(key) = &self.config.api_key {
                rb = rb.bearer_auth(key);
            }
            let resp = rb
                .send()
                .await
                .map_err(|e| send_error(&ep.base, &e, bound))?;
            let status = resp.status();
            if status.is_success() {
                let bytes = read_body(&ep.base, resp, self.config.max_reply_bytes).await?;
                return Ok(model_ids(&bytes));
            }
            if matches!(
                status,
                StatusCode::NOT_FOUND
                    | StatusCode::METHOD_NOT_ALLOWED
                    | StatusCode::NOT_IMPLEMENTED
            ) {
                let tiny = serde_json::to_vec(&WireRequest {
                    model: self.config.model.as_deref(),
                    messages: &[ChatMessage::user("ping")],
                    temperature: 0.0,
                    max_tokens: 1,
                    stream: false,
                })
                .map_err(|e| ModelError::BadConfig(e.to_string()))?;
                return match self.attempt_chat(ep, &tiny).await {
                    // A one-token reply may well be empty; the server answered.
                    Ok(_) | Err(ModelError::Empty { .. }) => Ok(Vec::new()),
                    Err(e) => Err(e),
                };
            }
            Err(status_error(&ep.base, status, resp).await)
        };
        match tokio::time::timeout(bound, probe).await {
            Ok(r) => r,
            Err(_) => Err(ModelError::Timeout {
                endpoint: ep.base.clone(),
                after: bound,
            }),
        }
    }

    async fn attempt_chat(&self, ep: &Endpoint, body: &[u8]) -> Result<Completion, ModelError> {
        let bound = self.config.timeout();
        let attempt = async {
            let mut rb = self
                .http
                .post(ep.chat.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_vec());
            if let Some(key) = &self.config.api_key {
                rb = rb.bearer_auth(key);
            }
            let resp = rb
                .send()
                .await
                .map_err(|e| send_error(&ep.base, &e, bound))?;
            let status = resp.status();
            if !status.is_success() {
                return Err(status_error(&ep.base, status, resp).await);
            }
            let bytes = read_body(&ep.base, resp, self.config.max_reply_bytes).await?;
            parse_completion(&ep.base, &bytes)
        };
        match tokio::time::timeout(bound, attempt).await {
            Ok(r) => r,
            Err(_) => Err(ModelError::Timeout {
                endpoint: ep.base.clone(),
                after: bound,
            }),
        }
    }

    /// Endpoint indices to try: those not cooling down in configured order, then the
    /// cooling ones (still tried: a fallback that is down too must not end the search).
    fn order(&self) -> Vec<usize> {
        let now = Instant::now();
        let cooling = self.cooldown.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut up, down): (Vec<usize>, Vec<usize>) = (0..self.endpoints.len())
            .partition(|&i| cooling.get(i).copied().flatten().is_none_or(|t| t <= now));
        up.extend(down);
        up
    }

    fn mark(&self, idx: usize, until: Option<Instant>) {
        let mut cooling = self.cooldown.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = cooling.get_mut(idx) {
            *slot = until;
        }
    }
}

/// Full jitter: a delay uniform in `[0, ceiling]`, so sessions that failed together do
/// not retry together.
fn full_jitter(ceiling: Duration) -> Duration {
    rand::thread_rng().gen_range(Duration::ZERO..=ceiling)
}

impl ModelClient for HttpModelClient {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ModelFuture<'a, ChatReply> {
        Box::pin(self.chat(request))
    }

    fn health(&self) -> ModelFuture<'_, Health> {
        Box::pin(self.check_health())
    }
}

/// Normalizes a configured URL into an endpoint. Accepts `http://host:port/v1`,
/// `http://host:port` (`/v1` added) and a full `…/chat/completions` URL.
fn parse_endpoint(raw: &str) -> Result<Endpoint, ModelError> {
    let bad = |reason: &str| ModelError::BadUrl {
        url: raw.to_string(),
        reason: reason.to_string(),
    };
    let mut url = Url::parse(raw.trim()).map_err(|e| bad(&e.to_string()))?;
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(bad(&format!(
                "unsupported scheme {other:?}, expected http or https"
            )))
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("credentials in the URL; set api_key instead"));
    }
    let mut path = url.path().trim_end_matches('/').to_string();
    if let Some(stripped) = path.strip_suffix("/chat/completions") {
        path = stripped.to_string();
    }
    if path.is_empty() {
        path = "/v1".to_string();
    }
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    let base = url.as_str().trim_end_matches('/').to_string();
    let join =
        |suffix: &str| Url::parse(&format!("{base}/{suffix}")).map_err(|e| bad(&e.to_string()));
    Ok(Endpoint {
        chat: join("chat/completions")?,
        models: join("models")?,
        base,
    })
}

fn send_error(endpoint: &str, e: &reqwest::Error, bound: Duration) -> ModelError {
    if let Some(failure) = TlsFailure::find(e) {
        return ModelError::Tls {
            endpoint: endpoint.to_string(),
            detail: tls_advice(failure),
        };
    }
    let endpoint = endpoint.to_string();
    // A connect timeout is a host that is not there: unreachable, like a refusal.
    if e.is_connect() {
        ModelError::Unreachable {
            endpoint,
            detail: error_chain(e),
        }
    } else if e.is_timeout() {
        ModelError::Timeout {
            endpoint,
            after: bound,
        }
    } else {
        ModelError::Transport {
            endpoint,
            detail: error_chain(e),
        }
    }
}

/// What to do about a TLS failure with a model server.
fn tls_advice(failure: TlsFailure) -> String {
    match failure {
        TlsFailure::Untrusted(d) => format!(
            "its certificate is not trusted ({d}): set [model] ca / KARL_MODEL_CA to the CA that signed it"
        ),
        TlsFailure::WrongName(d) => format!(
            "its certificate is not valid for the host in the URL ({d}): use a name the certificate lists"
        ),
        TlsFailure::Expired(d) => format!(
            "its certificate is expired or not yet valid ({d}): renew it, or check the clocks"
        ),
        TlsFailure::NotTls(d) => {
            format!("it does not speak TLS ({d}): use an http:// URL for it")
        }
        TlsFailure::ClientCertRequired(d) => {
            format!("it requires a client certificate, which KARL does not send ({d})")
        }
        TlsFailure::ClientCertRejected(d) | TlsFailure::Other(d) => d,
    }
}

/// An error and its sources on one line (reqwest's own message names only the URL).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut src = e.source();
    while let Some(s) = src {
        let text = s.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        src = s.source();
    }
    parts.join(": ")
}

async fn status_error(
    endpoint: &str,
    status: StatusCode,
    mut resp: reqwest::Response,
) -> ModelError {
    // The body only explains the status: read a little, ignore read errors.
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match resp.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            _ => break,
        }
    }
    ModelError::Status {
        endpoint: endpoint.to_string(),
        status: status.as_u16(),
        body: excerpt(&body),
    }
}

/// Reads a reply body of at most `limit` bytes, refusing more without reading it all.
async fn read_body(
    endpoint: &str,
    mut resp: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, ModelError> {
    let too_large = || ModelError::TooLarge {
        endpoint: endpoint.to_string(),
        limit,
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(resp.content_length().map_or(8192, |n| n as usize));
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => {
                return Err(ModelError::Transport {
                    endpoint: endpoint.to_string(),
                    detail: format!("reading the reply: {}", error_chain(&e)),
                })
            }
        }
    }
}

/// The start of a body as one printable line.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(ERROR_BODY_BYTES)]);
    let flat: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if flat.chars().count() > ERROR_EXCERPT_CHARS {
        let cut: String = flat.chars().take(ERROR_EXCERPT_CHARS).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// An OpenAI-style chat completion as servers send it. Only `choices` decides whether
/// a reply is usable; every other field is read leniently: a field of an unexpected type
/// counts as absent, so a quirk of one server costs a token count, not the reply.
#[derive(Debug, Deserialize)]
struct WireReply {
    choices: Option<Vec<Lenient<WireChoice>>>,
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<WireUsage>,
    #[serde(default, deserialize_with = "lenient")]
    model: Option<String>,
    /// llama.cpp's server: `timings.cache_n`, the prompt tokens its cache held.
    #[serde(default, deserialize_with = "lenient")]
    timings: Option<WireTimings>,
    error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
struct WireTimings {
    #[serde(default, deserialize_with = "token_count")]
    cache_n: Option<u32>,
}

/// OpenAI's `usage.prompt_tokens_details` (also sent by vLLM and MLX's server).
#[derive(Debug, Deserialize)]
struct WirePromptDetails {
    #[serde(default, deserialize_with = "token_count")]
    cached_tokens: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default, deserialize_with = "lenient")]
    message: Option<WireMessage>,
    /// Legacy completions put the text here.
    #[serde(default, deserialize_with = "lenient")]
    text: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    content: Option<WireContent>,
}

/// `message.content`: a string, or text parts (`{"type":"text","text":…}` or bare strings).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum WireContent {
    Text(String),
    Parts(Vec<WirePart>),
    Other(IgnoredAny),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum WirePart {
    Text { text: String },
    Bare(String),
    Other(IgnoredAny),
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "token_count")]
    prompt_tokens: Option<u32>,
    #[serde(default, deserialize_with = "token_count")]
    completion_tokens: Option<u32>,
    #[serde(default, deserialize_with = "lenient")]
    prompt_tokens_details: Option<WirePromptDetails>,
}

/// An `error` body in place of choices: `{"message": …}`, a bare string, or anything else
/// (shown as its JSON text).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum WireError {
    Message { message: String },
    Text(String),
    Other(serde_json::Value),
}

/// A token count: an integer, or a float some servers send (`1.0e2`); negative or
/// non-numeric counts are absent.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum WireCount {
    Int(u64),
    Float(f64),
    Other(IgnoredAny),
}

/// A `/models` reply (`{"data": [{"id": …}]}`).
#[derive(Debug, Deserialize)]
struct WireModels {
    data: Vec<Lenient<WireModel>>,
}

#[derive(Debug, Deserialize)]
struct WireModel {
    id: String,
}

/// A value of the expected shape, or whatever else stood there.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Lenient<T> {
    Ok(T),
    Junk(IgnoredAny),
}

impl<T> Lenient<T> {
    fn ok(self) -> Option<T> {
        match self {
            Lenient::Ok(v) => Some(v),
            Lenient::Junk(_) => None,
        }
    }
}

fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Lenient<T>>::deserialize(d)?.and_then(Lenient::ok))
}

fn token_count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = match Option::<WireCount>::deserialize(d)? {
        Some(WireCount::Int(n)) => n,
        Some(WireCount::Float(f)) if f.is_finite() && f >= 0.0 => f as u64,
        _ => return Ok(None),
    };
    Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)))
}

/// Parses an OpenAI-style chat completion: the text of `choices[0]` (`message.content`
/// as a string or as text parts, or legacy `text`), usage, model, finish reason.
fn parse_completion(endpoint: &str, body: &[u8]) -> Result<Completion, ModelError> {
    let malformed = |detail: String| ModelError::Malformed {
        endpoint: endpoint.to_string(),
        detail,
    };
    let reply: WireReply = serde_json::from_slice(body).map_err(|e| {
        malformed(if e.is_data() {
            if body.trim_ascii_start().first() == Some(&b'{') {
                format!("not a chat completion: {e}")
            } else {
                "not a JSON object".to_string()
            }
        } else {
            format!(
                "not JSON ({e}); body starts {:?}",
                excerpt(&body[..body.len().min(120)])
            )
        })
    })?;
    let Some(choices) = reply.choices else {
        return Err(malformed(match reply.error {
            Some(err) => {
                let msg = match err {
                    WireError::Message { message } | WireError::Text(message) => message,
                    WireError::Other(v) => v.to_string(),
                };
                format!("server error: {}", excerpt(msg.as_bytes()))
            }
            None => "no \"choices\" array".into(),
        }));
    };
    let empty = || ModelError::Empty {
        endpoint: endpoint.to_string(),
    };
    let first = choices
        .into_iter()
        .next()
        .and_then(Lenient::ok)
        .ok_or_else(empty)?;
    let text = match first.message.and_then(|m| m.content) {
        Some(WireContent::Text(s)) => s,
        Some(WireContent::Parts(parts)) => parts
            .into_iter()
            .filter_map(|p| match p {
                WirePart::Text { text } | WirePart::Bare(text) => Some(text),
                WirePart::Other(_) => None,
            })
            .collect(),
        Some(WireContent::Other(_)) | None => first.text.unwrap_or_default(),
    };
    if text.trim().is_empty() {
        return Err(empty());
    }
    Ok(Completion {
        text,
        prompt_tokens: reply.usage.as_ref().and_then(|u| u.prompt_tokens),
        cached_tokens: reply
            .usage
            .as_ref()
            .and_then(|u| u.prompt_tokens_details.as_ref())
            .and_then(|d| d.cached_tokens)
            .or_else(|| reply.timings.as_ref().and_then(|t| t.cache_n)),
        completion_tokens: reply.usage.as_ref().and_then(|u| u.completion_tokens),
        model: reply.model,
        finish_reason: first.finish_reason,
    })
}

/// Model ids of a `/models` reply; an unexpected shape is still a live server, with no
/// ids.
fn model_ids(body: &[u8]) -> Vec<String> {
    serde_json::from_slice::<WireModels>(body)
        .map(|m| {
            m.data
                .into_iter()
                .filter_map(|e| e.ok().map(|m| m.id))
                .take(64)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn endpoint_normalization() {
        let e = parse_endpoint("http://127.0.0.1:8100/v1").unwrap();
        assert_eq!(e.base, "http://127.0.0.1:8100/v1");
        assert_eq!(e.chat.as_str(), "http://127.0.0.1:8100/v1/chat/completions");
        assert_eq!(e.models.as_str(), "http://127.0.0.1:8100/v1/models");
        assert_eq!(
            parse_endpoint("http://mac5:8100").unwrap().base,
            "http://mac5:8100/v1"
        );
        assert_eq!(
            parse_endpoint("http://mac5:8100/v1/").unwrap().base,
            "http://mac5:8100/v1"
        );
        assert_eq!(
            parse_endpoint(" http://mac5:8100/v1/chat/completions?x=1 ")
                .unwrap()
                .base,
            "http://mac5:8100/v1"
        );
        assert_eq!(
            parse_endpoint("http://h/api/openai/v1")
                .unwrap()
                .chat
                .as_str(),
            "http://h/api/openai/v1/chat/completions"
        );
        assert_eq!(
            parse_endpoint("https://mac5:8443").unwrap().chat.as_str(),
            "https://mac5:8443/v1/chat/completions"
        );
        for bad in [
            "ftp://h/v1",
            "not a url",
            "",
            "http://u:p@h/v1",
            "unix:/tmp/sock",
        ] {
            assert!(
                matches!(parse_endpoint(bad), Err(ModelError::BadUrl { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn completion_parsing() {
        let ok = br#"{"model":"qwen","choices":[{"message":{"role":"assistant","content":"Run the tests."},"finish_reason":"stop"}],"usage":{"prompt_tokens":812,"completion_tokens":6}}"#;
        let c = parse_completion("e", ok).unwrap();
        assert_eq!(c.text, "Run the tests.");
        assert_eq!((c.prompt_tokens, c.completion_tokens), (Some(812), Some(6)));
        assert_eq!(c.model.as_deref(), Some("qwen"));
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        let parts = br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}],"usage":{"prompt_tokens":1.0e2}}"#;
        let c = parse_completion("e", parts).unwrap();
        assert_eq!((c.text.as_str(), c.prompt_tokens), ("ab", Some(100)));
        let legacy = br#"{"choices":[{"text":"go"}]}"#;
        assert_eq!(parse_completion("e", legacy).unwrap().text, "go");
        assert_eq!(parse_completion("e", legacy).unwrap().cached_tokens, None);
        // The prefix cache's share, as OpenAI-style servers and llama.cpp's report it.
        let openai = br#"{"choices":[{"text":"go"}],"usage":{"prompt_tokens":900,"prompt_tokens_details":{"cached_tokens":640}}}"#;
        assert_eq!(
            parse_completion("e", openai).unwrap().cached_tokens,
            Some(640)
        );
        let llama = br#"{"choices":[{"text":"go"}],"timings":{"cache_n":512,"prompt_n":40}}"#;
        assert_eq!(
            parse_completion("e", llama).unwrap().cached_tokens,
            Some(512)
        );
        let odd =
            br#"{"choices":[{"text":"go"}],"usage":{"prompt_tokens_details":"x"},"timings":[]}"#;
        assert_eq!(parse_completion("e", odd).unwrap().cached_tokens, None);
    }

    #[test]
    fn bad_bodies_are_errors_not_panics() {
        let kind = |b: &[u8]| parse_completion("e", b).err().map(|e| e.kind());
        assert_eq!(kind(b"<html>502 Bad Gateway</html>"), Some("malformed"));
        assert_eq!(kind(b""), Some("malformed"));
        assert_eq!(kind(b"[1,2]"), Some("malformed"));
        assert_eq!(kind(br#"{"object":"x"}"#), Some("malformed"));
        assert_eq!(kind(br#"{"choices":[]}"#), Some("empty"));
        assert_eq!(
            kind(br#"{"choices":[{"message":{"content":null}}]}"#),
            Some("empty")
        );
        assert_eq!(
            kind(br#"{"choices":[{"message":{"content":"   "}}]}"#),
            Some("empty")
        );
        assert_eq!(kind(br#"{"choices":"nope"}"#), Some("malformed"));
        assert_eq!(kind(br#"{"choices":[7]}"#), Some("empty"));
        let err =
            parse_completion("e", br#"{"error":{"message":"model not loaded"}}"#).unwrap_err();
        assert!(err.to_string().contains("model not loaded"), "{err}");
        let usage = br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-5,"completion_tokens":"many"}}"#;
        let c = parse_completion("e", usage).unwrap();
        assert_eq!((c.prompt_tokens, c.completion_tokens), (None, None));
        let err = parse_completion("e", br#"{"error":"no such model"}"#).unwrap_err();
        assert!(
            err.to_string().contains("server error: no such model"),
            "{err}"
        );
        let err = parse_completion("e", br#"{"choices":"nope"}"#).unwrap_err();
        assert!(err.to_string().contains("not a chat completion"), "{err}");
        let err = parse_completion("e", b"[1,2]").unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        // Quirks of one field cost that field, not the reply.
        let odd = br#"{"model":7,"choices":[{"message":{"content":[{"type":"image"},"a",{"text":"b"}]},"finish_reason":{}}],"usage":"n/a"}"#;
        let c = parse_completion("e", odd).unwrap();
        assert_eq!(c.text, "ab");
        assert_eq!(
            (c.model, c.finish_reason, c.prompt_tokens),
            (None, None, None)
        );
        let huge =
            br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":99999999999}}"#;
        assert_eq!(
            parse_completion("e", huge).unwrap().prompt_tokens,
            Some(u32::MAX)
        );
        let binary: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        assert_eq!(kind(&binary), Some("malformed"));
    }

    #[test]
    fn excerpts_are_short_single_lines() {
        let e = excerpt(format!("line one\n\tline two\u{7}{}", "x".repeat(10_000)).as_bytes());
        assert!(e.starts_with("line one line two"));
        assert!(e.chars().count() <= ERROR_EXCERPT_CHARS + 1);
        assert_eq!(excerpt(&[0xff, 0xfe, b'a']), "\u{fffd}\u{fffd}a");
    }

    #[test]
    fn model_listing() {
        assert_eq!(
            model_ids(br#"{"data":[{"id":"a"},{"id":"b"},{"x":1}]}"#),
            ["a", "b"]
        );
        assert!(model_ids(b"<html>").is_empty());
    }

    #[test]
    fn wire_request_leaves_out_an_unset_model() {
        let msgs = [ChatMessage::user("hi")];
        let w = WireRequest {
            model: None,
            messages: &msgs,
            temperature: 0.5,
            max_tokens: 7,
            stream: false,
        };
        let v: Value = serde_json::to_value(&w).unwrap();
        assert!(v.get("model").is_none());
        assert_eq!(v["messages"][0]["role"], "user");
        assert_eq!(v["max_tokens"], 7);
    }

    #[tokio::test]
    async fn unreachable_endpoint_fails_fast_and_cools_down() {
        // Ports nothing listens on: bind, learn the port, close.
        let dead = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port())
        };
        let client = HttpModelClient::new(ModelConfig {
            urls: vec![dead(), dead()],
            retries: 1,
            backoff_ms: 1,
            ..ModelConfig::default()
        })
        .unwrap();
        let err = client
            .chat(&ChatRequest::new(vec![ChatMessage::user("x")]))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "unreachable", "{err}");
        // Both endpoints are now cooling; order keeps config order among them.
        assert_eq!(client.order(), [0, 1]);
        client.mark(1, None);
        assert_eq!(client.order(), [1, 0]);
    }
}

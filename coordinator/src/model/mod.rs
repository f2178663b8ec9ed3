//! The model boundary: chat types, the [`ModelClient`] trait the engine calls, its
//! error type and configuration. [`HttpModelClient`] speaks OpenAI-compatible
//! `/v1/chat/completions` to the twin's server (an MLX server on mac5 by default) with
//! retries, backoff and fallback endpoints; [`ScriptedModel`] answers from a list, for
//! engine tests that need no network.
//!
//! Not here: what the messages say ([`crate::context`]) and what is done with a reply
//! (the engine and the gate).

mod http;
mod scripted;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use http::HttpModelClient;
pub use scripted::{ScriptedModel, SCRIPTED_ENDPOINT};

pub use karl_common::context::{ChatMessage, Role};

/// A completion request; unset sampling fields take the client's configured values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }

    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }
}

/// A successful completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatReply {
    /// The assistant's text, as sent (clean it with [`crate::context::clean_reply`]).
    pub text: String,
    /// `usage.prompt_tokens`, when the server reports it (feeds token calibration).
    pub prompt_tokens: Option<u32>,
    /// Prompt tokens the server's prefix cache already held, when it says
    /// (`usage.prompt_tokens_details.cached_tokens`, llama.cpp's `timings.cache_n`).
    pub cached_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Wall time of the successful attempt.
    pub latency: Duration,
    /// Base URL of the endpoint that answered.
    pub endpoint: String,
    /// The model name the server reported.
    pub model: Option<String>,
    pub finish_reason: Option<String>,
    /// Attempts spent on this request across all endpoints, this one included.
    pub attempts: u32,
}

/// An endpoint that answered a health check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// Base URL of the endpoint.
    pub endpoint: String,
    /// Model ids it lists (empty when it has no `/models` or lists none).
    pub models: Vec<String>,
    pub latency: Duration,
}

/// Why a model call failed. `Display` is one line fit for a log or an escalation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("no model endpoint configured")]
    NoEndpoints,
    #[error("bad model endpoint {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("bad model setting: {0}")]
    BadConfig(String),
    #[error("model endpoint {endpoint} unreachable: {detail}")]
    Unreachable { endpoint: String, detail: String },
    #[error("model endpoint {endpoint} connection failed: {detail}")]
    Transport { endpoint: String, detail: String },
    /// TLS with an `https://` endpoint failed; `detail` says what to fix.
    #[error("model endpoint {endpoint}: TLS failed: {detail}")]
    Tls { endpoint: String, detail: String },
    #[error("model endpoint {endpoint} did not answer within {} ms", after.as_millis())]
    Timeout { endpoint: String, after: Duration },
    #[error("model endpoint {endpoint} answered HTTP {status}: {body}")]
    Status {
        endpoint: String,
        status: u16,
        /// The start of the response body.
        body: String,
    },
    #[error("model endpoint {endpoint} sent a malformed reply: {detail}")]
    Malformed { endpoint: String, detail: String },
    #[error("model endpoint {endpoint} sent a reply with no text")]
    Empty { endpoint: String },
    #[error("model endpoint {endpoint} sent more than {limit} bytes")]
    TooLarge { endpoint: String, limit: usize },
}

impl ModelError {
    /// A short stable name for counters and the audit log.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::NoEndpoints => "no_endpoints",
            ModelError::BadUrl { .. } => "bad_url",
            ModelError::BadConfig(_) => "bad_config",
            ModelError::Unreachable { .. } => "unreachable",
            ModelError::Transport { .. } => "transport",
            ModelError::Tls { .. } => "tls",
            ModelError::Timeout { .. } => "timeout",
            ModelError::Status { .. } => "status",
            ModelError::Malformed { .. } => "malformed",
            ModelError::Empty { .. } => "empty",
            ModelError::TooLarge { .. } => "too_large",
        }
    }

    /// The endpoint the error came from, if any.
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            ModelError::Unreachable { endpoint, .. }
            | ModelError::Transport { endpoint, .. }
            | ModelError::Tls { endpoint, .. }
            | ModelError::Timeout { endpoint, .. }
            | ModelError::Status { endpoint, .. }
            | ModelError::Malformed { endpoint, .. }
            | ModelError::Empty { endpoint }
            | ModelError::TooLarge { endpoint, .. } => Some(endpoint),
            ModelError::NoEndpoints | ModelError::BadUrl { .. } | ModelError::BadConfig(_) => None,
        }
    }

    /// Worth another attempt at the same endpoint: the server may answer differently
    /// (a restart, a transient overload, a sampling fluke). A 4xx other than 408/429
    /// will not change, and neither do configuration errors or a certificate this side
    /// does not trust.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Unreachable { .. }
            | ModelError::Transport { .. }
            | ModelError::Timeout { .. }
            | ModelError::Malformed { .. }
            | ModelError::Empty { .. }
            | ModelError::TooLarge { .. } => true,
            ModelError::Status { status, .. } => *status >= 500 || *status == 408 || *status == 429,
            ModelError::NoEndpoints
            | ModelError::BadUrl { .. }
            | ModelError::BadConfig(_)
            | ModelError::Tls { .. } => false,
        }
    }

    /// The endpoint is down or overloaded (as opposed to answering badly): the client
    /// tries the other endpoints first for a while, and a session with no endpoint up
    /// runs plan-only. An endpoint whose TLS fails is as unusable as a down one.
    pub fn is_unavailable(&self) -> bool {
        match self {
            ModelError::Unreachable { .. }
            | ModelError::Transport { .. }
            | ModelError::Tls { .. }
            | ModelError::Timeout { .. } => true,
            ModelError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }
}

/// A boxed future returned by [`ModelClient`] methods (the trait stays object-safe, so
/// the engine holds an `Arc<dyn ModelClient>`).
pub type ModelFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ModelError>> + Send + 'a>>;

/// The engine's view of the twin model.
pub trait ModelClient: Send + Sync {
    /// One chat completion, with whatever retries and fallbacks the client does.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ModelFuture<'a, ChatReply>;

    /// Checks that some endpoint answers (called when a session starts).
    fn health(&self) -> ModelFuture<'_, Health>;
}

/// Default base URL: the MLX server beside the coordinator.
pub const DEFAULT_MODEL_URL: &str = "http://127.0.0.1:8100/v1";

/// Model client settings (the `[model]` table of the coordinator's config;
/// `--model-url` / `KARL_MODEL_URL` / `--model` override it).
///
/// Endpoints are base URLs such as `http://mac5:8100/v1` or `https://mac5:8443/v1`.
/// `https://` endpoints are checked against the system's trusted CAs plus `ca`, when set
/// (a private CA's PEM), so a model server with a self-made certificate works.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Base URLs; the first is primary, the rest are fallbacks in order.
    pub urls: Vec<String>,
    /// Model name sent in requests; `None` leaves the field out, which single-model
    /// servers (MLX, llama.cpp) answer with the model they serve.
    pub model: Option<String>,
    pub temperature: f32,
    pub max_tokens: u32,
    /// Bound on one attempt: connect, send, and read the whole reply.
    pub timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// Extra attempts per endpoint after the first.
    pub retries: u32,
    /// First backoff between attempts; doubles each retry up to `max_backoff_ms`.
    pub backoff_ms: u64,
    pub max_backoff_ms: u64,
    /// After an endpoint fails as unavailable, the others are tried first for this long.
    pub cooldown_ms: u64,
    /// Replies larger than this are refused unread.
    pub max_reply_bytes: usize,
    /// Sent as `Authorization: Bearer …` when set (servers started with an API key).
    pub api_key: Option<String>,
    /// PEM of a private CA to trust for `https://` endpoints, besides the system's CAs
    /// (`KARL_MODEL_CA`, `--model-ca`).
    pub ca: Option<PathBuf>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            urls: vec![DEFAULT_MODEL_URL.to_string()],
            model: None,
            temperature: 0.5,
            max_tokens: 200,
            timeout_ms: 30_000,
            connect_timeout_ms: 2_000,
            retries: 2,
            backoff_ms: 250,
            max_backoff_ms: 4_000,
            cooldown_ms: 30_000,
            max_reply_bytes: 1 << 20,
            api_key: None,
            ca: None,
        }
    }
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelConfig")
            .field("urls", &self.urls)
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("timeout_ms", &self.timeout_ms)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("retries", &self.retries)
            .field("backoff_ms", &self.backoff_ms)
            .field("max_backoff_ms", &self.max_backoff_ms)
            .field("cooldown_ms", &self.cooldown_ms)
            .field("max_reply_bytes", &self.max_reply_bytes)
            .field("api_key", &self.api_key.as_ref().map(|_| "[set]"))
            .field("ca", &self.ca)
            .finish()
    }
}

impl ModelConfig {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    /// The backoff ceilings between attempts at one endpoint: `backoff_ms`, doubling up to
    /// `max_backoff_ms`, one for each of the `retries` (the client draws full jitter
    /// under each).
    pub fn retry_schedule(&self) -> backon::ExponentialBuilder {
        backon::ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(self.backoff_ms))
            .with_max_delay(Duration::from_millis(
                self.max_backoff_ms.max(self.backoff_ms),
            ))
            .with_factor(2.0)
            .with_max_times(self.retries as usize)
    }

    /// Checks the numbers (URLs are checked when the client parses them).
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.urls.is_empty() {
            return Err(ModelError::NoEndpoints);
        }
        if !self.temperature.is_finite() || !(0.0..=2.0).contains(&self.temperature) {
            return Err(ModelError::BadConfig(format!(
                "temperature {} is outside 0..=2",
                self.temperature
            )));
        }
        if self.max_tokens == 0 {
            return Err(ModelError::BadConfig(
                "max_tokens must be at least 1".into(),
            ));
        }
        if self.timeout_ms == 0 || self.connect_timeout_ms == 0 {
            return Err(ModelError::BadConfig("timeouts must be above zero".into()));
        }
        if self.max_reply_bytes < 1024 {
            return Err(ModelError::BadConfig(
                "max_reply_bytes must be at least 1024".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_toml() {
        let c: ModelConfig = toml::from_str(
            "urls = [\"http://mac5:8100/v1\", \"http://mac4:8100/v1\"]\nretries = 0\n",
        )
        .unwrap();
        assert_eq!(c.urls.len(), 2);
        assert_eq!(c.retries, 0);
        assert_eq!(c.max_tokens, 200);
        assert!(c.validate().is_ok());
        assert_eq!(ModelConfig::default().urls, [DEFAULT_MODEL_URL]);
        assert!(toml::from_str::<ModelConfig>("url = \"x\"").is_err());
        let c: ModelConfig =
            toml::from_str("urls = [\"https://mac5:8443/v1\"]\nca = \"/etc/karl/ca.pem\"").unwrap();
        assert_eq!(
            c.ca.as_deref(),
            Some(std::path::Path::new("/etc/karl/ca.pem"))
        );
    }

    #[test]
    fn backoff_doubles_and_caps() {
        use backon::BackoffBuilder as _;
        let c = ModelConfig::default();
        assert_eq!(c.retry_schedule().build().count(), c.retries as usize);
        let ms: Vec<u128> = c
            .retry_schedule()
            .with_max_times(7)
            .build()
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 4000, 4000]);
    }

    #[test]
    fn validation() {
        let bad = |f: fn(&mut ModelConfig)| {
            let mut c = ModelConfig::default();
            f(&mut c);
            c.validate().is_err()
        };
        assert!(bad(|c| c.urls.clear()));
        assert!(bad(|c| c.temperature = f32::NAN));
        assert!(bad(|c| c.temperature = 3.0));
        assert!(bad(|c| c.max_tokens = 0));
        assert!(bad(|c| c.timeout_ms = 0));
        assert!(bad(|c| c.max_reply_bytes = 10));
    }

    #[test]
    fn api_key_stays_out_of_debug_output() {
        let c = ModelConfig {
            api_key: Some("sk-secret-value".into()),
            ..ModelConfig::default()
        };
        assert!(!format!("{c:?}").contains("sk-secret"));
    }

    #[test]
    fn error_classes() {
        let ep = || "http://x/v1".to_string();
        let status = |s| ModelError::Status {
            endpoint: ep(),
            status: s,
            body: String::new(),
        };
        assert!(status(500).is_retryable() && status(500).is_unavailable());
        assert!(status(429).is_retryable());
        assert!(!status(400).is_retryable() && !status(404).is_unavailable());
        assert!(ModelError::Empty { endpoint: ep() }.is_retryable());
        assert!(!ModelError::Empty { endpoint: ep() }.is_unavailable());
        assert_eq!(
            ModelError::TooLarge {
                endpoint: ep(),
                limit: 1
            }
            .kind(),
            "too_large"
        );
        assert_eq!(ModelError::NoEndpoints.endpoint(), None);
        assert_eq!(status(500).endpoint(), Some("http://x/v1"));
    }
}

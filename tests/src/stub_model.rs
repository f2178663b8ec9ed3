//! `StubModel`: an OpenAI-compatible model server for tests, in-process on loopback.
//!
//! It answers `POST …/chat/completions` and `GET …/models` (hyper 1, HTTP/1.1, plain or
//! over TLS with [`StubModel::start_tls`]) from a script of replies — text with usage,
//! slow text, HTTP errors, a hang, a non-JSON body, empty choices or content, a huge
//! body — consumed one per chat request; when the script runs out it falls back to a
//! default behaviour, [`StubReply::Echo`], which answers like a cooperative small model:
//!
//! - a plan request (the system message asks for a plan of numbered steps) gets six
//!   numbered steps built from the `Goal:` line;
//! - an auto-detect request (the system message asks for JSON with `project` and
//!   `goal`) gets that JSON, the project taken from the `Working directory:` line;
//! - any other request gets one imperative instruction about the `Active:` task (or
//!   the `Goal:`) of the briefing, rotating through distinct actions so consecutive
//!   turns do not repeat each other.
//!
//! Every chat request body is logged for assertions. `karl-stub-model` wraps this for
//! tests that need it as a separate process.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;

use crate::http_stub::{full, Body};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Request bodies larger than this are refused (413).
const MAX_REQUEST_BYTES: usize = 8 << 20;
/// Chunk size of streamed huge bodies.
const CHUNK_BYTES: usize = 64 << 10;

/// One scripted answer to a chat request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StubReply {
    /// A completion with this text. `prompt_tokens` defaults to an estimate from the
    /// request (characters / 4 plus template overhead); `delay_ms` makes it slow.
    Text {
        text: String,
        #[serde(default)]
        prompt_tokens: Option<u32>,
        #[serde(default)]
        delay_ms: u64,
    },
    /// An HTTP error status with a JSON error body.
    Status {
        code: u16,
        #[serde(default)]
        message: Option<String>,
    },
    /// Never answers (until the client gives up or the stub shuts down).
    Hang,
    /// 200 with an HTML body.
    Malformed,
    /// 200 with `"choices": []`.
    EmptyChoices,
    /// 200 with an empty `content`.
    EmptyContent,
    /// 200 with a valid completion padded to `bytes`; `chunked` streams it without a
    /// content length (the client must stop reading on its own).
    Huge {
        #[serde(default = "default_huge_bytes")]
        bytes: usize,
        #[serde(default = "default_true")]
        chunked: bool,
    },
    /// The cooperative default (module docs).
    Echo,
    /// A numbered plan, whatever was asked.
    Plan,
}

fn default_huge_bytes() -> usize {
    2 << 20
}

fn default_true() -> bool {
    true
}

impl StubReply {
    pub fn text(text: impl Into<String>) -> Self {
        StubReply::Text {
            text: text.into(),
            prompt_tokens: None,
            delay_ms: 0,
        }
    }

    /// A text reply that reports `prompt_tokens` as its usage.
    pub fn text_with_usage(text: impl Into<String>, prompt_tokens: u32) -> Self {
        StubReply::Text {
            text: text.into(),
            prompt_tokens: Some(prompt_tokens),
            delay_ms: 0,
        }
    }

    /// A text reply sent after `delay_ms`.
    pub fn slow(delay_ms: u64, text: impl Into<String>) -> Self {
        StubReply::Text {
            text: text.into(),
            prompt_tokens: None,
            delay_ms,
        }
    }

    pub fn status(code: u16) -> Self {
        StubReply::Status {
            code,
            message: None,
        }
    }

    pub fn huge(bytes: usize, chunked: bool) -> Self {
        StubReply::Huge { bytes, chunked }
    }
}

/// What the stub answers: scripted replies first, then `then` for every request after.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StubScript {
    pub replies: Vec<StubReply>,
    pub then: StubReply,
    /// Status of `GET …/models` (200 lists `model`; 404 makes clients fall back to a
    /// tiny completion for their health check).
    pub models_status: u16,
    /// The model name the stub reports.
    pub model: String,
}

impl Default for StubScript {
    fn default() -> Self {
        StubScript {
            replies: Vec::new(),
            then: StubReply::Echo,
            models_status: 200,
            model: "karl-stub".to_string(),
        }
    }
}

impl StubScript {
    /// The cooperative default for every request.
    pub fn echo() -> Self {
        StubScript::default()
    }

    /// These replies in order, then echo.
    pub fn replies(replies: impl IntoIterator<Item = StubReply>) -> Self {
        StubScript {
            replies: replies.into_iter().collect(),
            ..StubScript::default()
        }
    }

    /// What to answer once the scripted replies are used up.
    pub fn then(mut self, reply: StubReply) -> Self {
        self.then = reply;
        self
    }

    pub fn models_status(mut self, status: u16) -> Self {
        self.models_status = status;
        self
    }

    /// A script file: either a JSON array of replies or an object with `replies`,
    /// `then`, `models_status` and `model`. Each reply is an object with a `kind`
    /// (`text`, `status`, `hang`, `malformed`, `empty_choices`, `empty_content`,
    /// `huge`, `echo`, `plan`) and that kind's fields.
    pub fn from_json(text: &str) -> Result<StubScript, serde_json::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum File {
            List(Vec<StubReply>),
            Full(StubScript),
        }
        Ok(match serde_json::from_str::<File>(text)? {
            File::List(replies) => StubScript::replies(replies),
            File::Full(script) => script,
        })
    }
}

#[derive(Debug)]
struct State {
    script: Mutex<VecDeque<StubReply>>,
    then: StubReply,
    models_status: u16,
    model: String,
    requests: Mutex<Vec<Value>>,
    /// Chat requests answered in echo mode (rotates the instruction templates).
    echoes: AtomicU64,
    model_checks: AtomicU64,
}

impl State {
    fn next_reply(&self) -> StubReply {
        self.script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or_else(|| self.then.clone())
    }
}

/// A running stub server; shuts down when dropped.
#[derive(Debug)]
pub struct StubModel {
    addr: SocketAddr,
    scheme: &'static str,
    state: Arc<State>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl StubModel {
    /// Starts on `127.0.0.1:0` (a free port).
    pub async fn start(script: StubScript) -> std::io::Result<StubModel> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), script).await
    }

    /// Starts on `addr`.
    pub async fn start_on(addr: SocketAddr, script: StubScript) -> std::io::Result<StubModel> {
        Self::start_with(addr, None, script).await
    }

    /// Starts on `127.0.0.1:0` serving HTTPS with this certificate chain and key (PEM);
    /// [`StubModel::base_url`] is then `https://…`.
    pub async fn start_tls(
        script: StubScript,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> std::io::Result<StubModel> {
        let tls = crate::http_stub::tls_acceptor(cert_pem, key_pem)?;
        Self::start_with(SocketAddr::from(([127, 0, 0, 1], 0)), Some(tls), script).await
    }

    async fn start_with(
        addr: SocketAddr,
        tls: Option<crate::http_stub::TlsAcceptor>,
        script: StubScript,
    ) -> std::io::Result<StubModel> {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            script: Mutex::new(script.replies.into_iter().collect()),
            then: script.then,
            models_status: script.models_status,
            model: script.model,
            requests: Mutex::new(Vec::new()),
            echoes: AtomicU64::new(0),
            model_checks: AtomicU64::new(0),
        });
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(crate::http_stub::serve(listener, tls, rx, {
            let state = Arc::clone(&state);
            move |req| handle(Arc::clone(&state), req)
        }));
        Ok(StubModel {
            addr,
            scheme,
            state,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/v1` (`https://` when serving TLS), what a client's `--model-url` takes.
    pub fn base_url(&self) -> String {
        format!("{}://{}/v1", self.scheme, self.addr)
    }

    /// The JSON bodies of the chat requests received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn request_count(&self) -> usize {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// `GET …/models` requests received.
    pub fn model_checks(&self) -> u64 {
        self.state.model_checks.load(Ordering::Relaxed)
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: StubReply) {
        self.state
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(reply);
    }

    /// Stops accepting, drops open connections (hung requests included) and waits for
    /// the server task to end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for StubModel {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    full(status, "application/json", v.to_string())
}

fn error_response(status: StatusCode, message: &str) -> Response<Body> {
    json_response(
        status,
        &json!({"error": {"message": message, "type": "stub_error", "code": status.as_u16()}}),
    )
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let method = req.method().clone();
    if method == Method::GET && path.ends_with("/models") {
        state.model_checks.fetch_add(1, Ordering::Relaxed);
        let status = StatusCode::from_u16(state.models_status).unwrap_or(StatusCode::OK);
        return Ok(if status == StatusCode::OK {
            json_response(
                status,
                &json!({"object": "list", "data": [{"id": state.model, "object": "model", "owned_by": "karl-tests"}]}),
            )
        } else {
            error_response(status, "models listing is scripted off")
        });
    }
    if method != Method::POST || !path.ends_with("/chat/completions") {
        return Ok(error_response(StatusCode::NOT_FOUND, "no such route"));
    }
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return Ok(error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                "request too large",
            ))
        }
    };
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return Ok(error_response(
                StatusCode::BAD_REQUEST,
                &format!("request is not JSON: {e}"),
            ))
        }
    };
    state
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request.clone());
    let reply = state.next_reply();
    Ok(answer(&state, &request, reply).await)
}

async fn answer(state: &State, request: &Value, reply: StubReply) -> Response<Body> {
    match reply {
        StubReply::Text {
            text,
            prompt_tokens,
            delay_ms,
        } => {
            if delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            }
            completion(state, request, &text, prompt_tokens)
        }
        StubReply::Status { code, message } => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error_response(status, message.as_deref().unwrap_or("scripted failure"))
        }
        StubReply::Hang => {
            std::future::pending::<()>().await;
            error_response(StatusCode::SERVICE_UNAVAILABLE, "unreachable")
        }
        StubReply::Malformed => full(
            StatusCode::OK,
            "text/html",
            "<html><body><h1>502 Bad Gateway</h1>upstream went away {\"choices\": [</body></html>",
        ),
        StubReply::EmptyChoices => json_response(
            StatusCode::OK,
            &json!({"id": "stub-empty", "object": "chat.completion", "model": state.model, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}),
        ),
        StubReply::EmptyContent => completion_value(state, "", Some(1)),
        StubReply::Huge { bytes, chunked } => huge(bytes, chunked),
        StubReply::Echo => {
            let text = echo(state, request);
            completion(state, request, &text, None)
        }
        StubReply::Plan => {
            let text = plan_reply(&goal_of(request));
            completion(state, request, &text, None)
        }
    }
}

fn completion(
    state: &State,
    request: &Value,
    text: &str,
    prompt_tokens: Option<u32>,
) -> Response<Body> {
    completion_value(
        state,
        text,
        Some(prompt_tokens.unwrap_or_else(|| estimate_prompt_tokens(request))),
    )
}

fn completion_value(state: &State, text: &str, prompt_tokens: Option<u32>) -> Response<Body> {
    let completion_tokens = (text.chars().count() / 4) as u32;
    json_response(
        StatusCode::OK,
        &json!({
            "id": "stub-completion",
            "object": "chat.completion",
            "created": 0,
            "model": state.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens.unwrap_or(0) + completion_tokens},
        }),
    )
}

/// A stand-in tokenizer: characters / 4, plus 4 per message and 3 for the reply.
fn estimate_prompt_tokens(request: &Value) -> u32 {
    let msgs = messages(request);
    let chars: usize = msgs.iter().map(|(_, c)| c.chars().count()).sum();
    (chars / 4 + 4 * msgs.len() + 3) as u32
}

/// A valid completion padded to about `bytes`.
fn huge(bytes: usize, chunked: bool) -> Response<Body> {
    let head =
        Bytes::from_static(br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#);
    let tail = Bytes::from_static(br#""},"finish_reason":"stop"}]}"#);
    let pad = bytes.saturating_sub(head.len() + tail.len());
    if !chunked {
        let mut v = Vec::with_capacity(bytes);
        v.extend_from_slice(&head);
        v.resize(head.len() + pad, b'x');
        v.extend_from_slice(&tail);
        return full(StatusCode::OK, "application/json", v);
    }
    let chunk = Bytes::from(vec![b'x'; CHUNK_BYTES]);
    let mut parts = VecDeque::new();
    parts.push_back(head);
    let mut left = pad;
    while left > 0 {
        let n = left.min(CHUNK_BYTES);
        parts.push_back(chunk.slice(..n));
        left -= n;
    }
    parts.push_back(tail);
    let mut resp = Response::new(Chunks(parts).boxed());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A body sent as separate chunks with no declared length (chunked encoding).
struct Chunks(VecDeque<Bytes>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

/// `(role, content)` of each message of a request (malformed entries skipped).
fn messages(request: &Value) -> Vec<(String, String)> {
    request
        .get("messages")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| {
                    let role = m.get("role")?.as_str()?.to_string();
                    let content = m.get("content")?.as_str()?.to_string();
                    Some((role, content))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn system_of(request: &Value) -> String {
    messages(request)
        .into_iter()
        .filter(|(r, _)| r == "system")
        .map(|(_, c)| c)
        .collect::<Vec<_>>()
        .join("\n")
}

fn last_user(request: &Value) -> String {
    messages(request)
        .into_iter()
        .rev()
        .find(|(r, _)| r == "user")
        .map(|(_, c)| c)
        .unwrap_or_default()
}

/// The value of the first `Key: value` line of the last user message.
fn field_of(request: &Value, key: &str) -> Option<String> {
    let prefix = format!("{key}:");
    last_user(request).lines().find_map(|l| {
        l.trim()
            .strip_prefix(&prefix)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

fn goal_of(request: &Value) -> String {
    field_of(request, "Goal").unwrap_or_else(|| "finish the work in progress".to_string())
}

fn plan_reply(goal: &str) -> String {
    let goal = goal.trim_end_matches('.');
    format!(
        "1. Read the code involved in: {goal}\n2. Write a failing test that captures: {goal}\n3. Implement the change for: {goal}\n4. Run the full test suite and fix what fails\n5. Update the documentation for the change\n6. Commit the work with a descriptive message"
    )
}

/// Distinct actions the echo mode rotates through; `{}` is the task.
const ECHO_ACTIONS: &[&str] = &[
    "Work on {}: make the smallest change that moves it forward, then run the relevant tests.",
    "Write a focused unit test for {} and run it.",
    "Read the code behind {} and fix the first problem you find.",
    "Run the whole test suite and fix any failure related to {}.",
    "Add error handling for the edge cases of {}.",
    "Refactor what you just changed for {} so it reads clearly, keeping the tests green.",
    "Document {} in the README with a short usage example.",
    "Resolve the warning or error the terminal shows for {}.",
];

fn echo(state: &State, request: &Value) -> String {
    let system = system_of(request).to_ascii_lowercase();
    if system.contains("plan") && system.contains("steps") {
        return plan_reply(&goal_of(request));
    }
    if system.contains("json") && system.contains("project") && system.contains("goal") {
        let project = field_of(request, "Working directory")
            .and_then(|d| {
                d.trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .map(str::to_string)
            })
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "demo".to_string());
        return json!({"project": project, "goal": "Continue the work shown on the screen and get the tests passing"}).to_string();
    }
    let task = field_of(request, "Active")
        .map(|a| match a.rfind(" (") {
            Some(i) if a.ends_with("turns on it)") => a[..i].to_string(),
            _ => a,
        })
        .filter(|a| !a.starts_with("none"))
        .unwrap_or_else(|| goal_of(request));
    let n = state.echoes.fetch_add(1, Ordering::Relaxed) as usize;
    ECHO_ACTIONS[n % ECHO_ACTIONS.len()].replace("{}", task.trim_end_matches('.'))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn script_files_parse_in_both_shapes() {
        let list = StubScript::from_json(
            r#"[{"kind":"text","text":"run it","prompt_tokens":12},{"kind":"status","code":500},{"kind":"hang"},{"kind":"huge"},{"kind":"text","text":"slow","delay_ms":50}]"#,
        )
        .unwrap();
        assert_eq!(list.replies.len(), 5);
        assert_eq!(list.replies[3], StubReply::huge(2 << 20, true));
        assert_eq!(list.then, StubReply::Echo);
        let full = StubScript::from_json(
            r#"{"replies":[{"kind":"malformed"}],"then":{"kind":"plan"},"models_status":404}"#,
        )
        .unwrap();
        assert_eq!(full.then, StubReply::Plan);
        assert_eq!(full.models_status, 404);
        assert!(StubScript::from_json(r#"[{"kind":"nonsense"}]"#).is_err());
        assert!(StubScript::from_json(r#"{"replies":[],"bogus":1}"#).is_err());
    }

    #[test]
    fn echo_follows_the_briefing() {
        let state = State {
            script: Mutex::new(VecDeque::new()),
            then: StubReply::Echo,
            models_status: 200,
            model: "m".into(),
            requests: Mutex::new(Vec::new()),
            echoes: AtomicU64::new(0),
            model_checks: AtomicU64::new(0),
        };
        let turn = json!({"messages": [
            {"role": "system", "content": "You are the developer."},
            {"role": "user", "content": "## Session\nGoal: add a health endpoint\n## Tasks\nActive: write the handler (3 turns on it)\n"}]});
        let a = echo(&state, &turn);
        let b = echo(&state, &turn);
        assert!(
            a.contains("write the handler") && !a.contains("turns on it"),
            "{a}"
        );
        assert_ne!(a, b);
        let plan = json!({"messages": [{"role": "system", "content": "Reply with 5 to 8 numbered steps of a plan."}, {"role": "user", "content": "Goal: ship it."}]});
        assert!(echo(&state, &plan).starts_with("1. Read the code involved in: ship it\n"));
        let detect = json!({"messages": [{"role": "system", "content": "Reply with JSON: project, goal."}, {"role": "user", "content": "Working directory: /Users/k/meshd/\nScreen:"}]});
        let v: Value = serde_json::from_str(&echo(&state, &detect)).unwrap();
        assert_eq!(v["project"], "meshd");
        assert!(!echo(&state, &json!("garbage")).is_empty());
    }
}

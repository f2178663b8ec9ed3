//! `AnthropicStub`: a scripted server speaking the Anthropic Messages API, in-process
//! on loopback, so the real Claude Code CLI runs offline against it
//! (`ANTHROPIC_BASE_URL=http://ADDR`).
//!
//! What it answers (hyper 1, HTTP/1.1, one tokio runtime of its own so plain `#[test]`
//! functions can hold it):
//!
//! - `POST /v1/messages` with `"stream": true`: server-sent events in the API's order
//!   (`message_start`, `ping`, `content_block_start`, `content_block_delta` with
//!   `text_delta` or `input_json_delta`, `content_block_stop`, `message_delta` with the
//!   `stop_reason`, `message_stop`); without `stream`, the same message as one JSON
//!   body.
//! - `POST /v1/messages/count_tokens`: an estimate; `HEAD /` (the CLI's connectivity
//!   probe): 200; anything else: 404 with an Anthropic error body, recorded as
//!   [`Kind::Other`] so a test can see what the CLI asked for.
//!
//! A *turn request* is one that offers tools: the CLI's main conversation. Its answer is
//! chosen from the last user message: the prompt in it (the last text block that is not
//! a `<system-reminder>` or an interruption marker) picks the first [`Rule`] whose
//! `when` it contains, else the script's default; a user message holding only tool
//! results gets [`Script::after_tool`]. Every other request (title generation, topic
//! detection) is a side call and gets a short title. Matching on the prompt, not on the
//! request count, keeps the script deterministic when the CLI retries a failed request.
//!
//! Everything received is recorded; [`AnthropicStub::conversation`] gives the user
//! prompts of the newest turn request, which is the whole conversation as the CLI last
//! sent it — a prompt typed twice shows up there twice, a CLI retry does not.
//! What does not live here: starting the CLI, its home directory and tmux (the
//! compatibility tests do that).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;

use crate::http_stub::{event_stream, full, sse, text_pieces, Body, Served};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

/// Request bodies larger than this are refused (413). The CLI's turn requests carry the
/// system prompt and ~30 tool schemas, a few hundred kilobytes.
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// The model name the stub reports when a request names none.
const MODEL: &str = "claude-stub";

/// One scripted answer to a turn request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Assistant text; `{prompt}` is replaced by the turn's prompt. `delay_ms` passes
    /// before the first event, `chunk_ms` between words (a slow stream).
    Text {
        text: String,
        delay_ms: u64,
        chunk_ms: u64,
    },
    /// A short lead-in text, then a tool call with this JSON input (`Bash` with a
    /// `command`, `Write` with a `file_path` and `content`, …); stop reason `tool_use`.
    ToolUse { name: String, input: Value },
    /// An HTTP error with an Anthropic error body (`{"type":"error","error":{…}}`).
    Error {
        status: u16,
        error_type: String,
        message: String,
    },
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Text {
            text: text.into(),
            delay_ms: 0,
            chunk_ms: 0,
        }
    }

    /// Text streamed word by word, `chunk_ms` apart.
    pub fn slow(text: impl Into<String>, chunk_ms: u64) -> Self {
        Reply::Text {
            text: text.into(),
            delay_ms: 0,
            chunk_ms,
        }
    }

    /// A `Bash` tool call running `command`.
    pub fn bash(command: impl Into<String>) -> Self {
        Reply::ToolUse {
            name: "Bash".into(),
            input: json!({"command": command.into(), "description": "Run the requested command"}),
        }
    }

    /// A `Write` tool call creating `file_path` with `content`.
    pub fn write_file(file_path: impl Into<String>, content: impl Into<String>) -> Self {
        Reply::ToolUse {
            name: "Write".into(),
            input: json!({"file_path": file_path.into(), "content": content.into()}),
        }
    }

    /// An HTTP error; the error type follows the status the way the API names it.
    pub fn error(status: u16) -> Self {
        let (error_type, message) = match status {
            400 => ("invalid_request_error", "Invalid request"),
            401 => ("authentication_error", "invalid x-api-key"),
            429 => (
                "rate_limit_error",
                "Number of requests has exceeded your rate limit",
            ),
            529 => ("overloaded_error", "Overloaded"),
            _ => ("api_error", "Internal server error"),
        };
        Reply::Error {
            status,
            error_type: error_type.into(),
            message: message.into(),
        }
    }
}

/// What the stub answers to turn requests. `after_tool` answers a user message holding
/// only tool results; `{result}` becomes `ok` or `error` after the first result's
/// `is_error`.
pub type Script = crate::http_stub::Script<Reply>;
pub type Rule = crate::http_stub::Rule<Reply>;

impl Default for Script {
    fn default() -> Self {
        Script {
            rules: Vec::new(),
            default: Reply::text("Done: {prompt}"),
            after_tool: Reply::text("The tool finished ({result})."),
        }
    }
}

/// What a recorded request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `POST /v1/messages` offering tools: the CLI's conversation.
    Turn,
    /// Any other `POST /v1/messages` (titles, topic detection) or token count.
    Side,
    /// A path the stub does not serve (and the `HEAD /` probe).
    Other,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub kind: Kind,
    pub method: String,
    /// Path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// The JSON body (`Null` when there was none or it was not JSON).
    pub body: Value,
    /// The HTTP status answered.
    pub status: u16,
}

/// A tool result the CLI sent back.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub tool_use_id: String,
    pub is_error: bool,
    /// The result's text (text blocks joined when it is a list).
    pub content: String,
}

struct State {
    script: Mutex<Script>,
    requests: Mutex<Vec<Recorded>>,
    seq: AtomicU64,
}

impl State {
    fn record(&self, r: Recorded) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(r);
    }
}

/// A running stub; stops when dropped.
pub struct AnthropicStub {
    server: Served,
    state: Arc<State>,
}

impl AnthropicStub {
    /// Starts on `127.0.0.1:0` with a runtime of its own. Call it from synchronous code
    /// (a plain `#[test]`), not from inside a tokio runtime.
    pub fn start(script: Script) -> std::io::Result<AnthropicStub> {
        let state = Arc::new(State {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
        });
        let server = Served::start("anthropic-stub", {
            let state = Arc::clone(&state);
            move |req| handle(Arc::clone(&state), req)
        })?;
        Ok(AnthropicStub { server, state })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// `http://ADDR`, what `ANTHROPIC_BASE_URL` takes.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// Replaces the script (for requests from now on).
    pub fn set_script(&self, script: Script) {
        *self
            .state
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = script;
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The turn requests' bodies, in order.
    pub fn turn_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.kind == Kind::Turn)
            .map(|r| r.body)
            .collect()
    }

    /// Requests to paths the stub does not serve, as `METHOD path` (the `HEAD /`
    /// connectivity probe left out).
    pub fn unknown(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.kind == Kind::Other && !(r.method == "HEAD" && r.path == "/"))
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// The user prompts of the conversation as the CLI last sent it (the newest turn
    /// request), oldest first. Empty before the first turn.
    pub fn conversation(&self) -> Vec<String> {
        self.turn_requests()
            .last()
            .map(conversation_prompts)
            .unwrap_or_default()
    }

    /// How many turn requests ended with `prompt` as their newest user prompt (a CLI
    /// retry of a failed request counts again).
    pub fn attempts(&self, prompt: &str) -> usize {
        self.turn_requests()
            .iter()
            .filter(|b| last_prompt(b).as_deref() == Some(prompt))
            .count()
    }

    /// Every tool result the CLI sent, first sighting of each `tool_use_id`.
    pub fn tool_results(&self) -> Vec<ToolResult> {
        let mut seen: Vec<ToolResult> = Vec::new();
        for body in self.turn_requests() {
            for r in tool_results(&body) {
                if !seen.iter().any(|s| s.tool_use_id == r.tool_use_id) {
                    seen.push(r);
                }
            }
        }
        seen
    }
}

// ---------------------------------------------------------------------------------
// Pure request reading.

fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn blocks(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

/// Text blocks the CLI adds around what was typed, which are not prompts.
fn is_cli_text(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("<system-reminder>")
        || t.starts_with("[Request interrupted")
        || t.starts_with("<command-name>")
        || t.starts_with("<local-command-")
}

/// The typed prompts in one user message, in order.
pub fn user_prompts(message: &Value) -> Vec<String> {
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return Vec::new();
    }
    blocks(message)
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .filter(|t| !is_cli_text(t))
        .map(String::from)
        .collect()
}

/// Every typed prompt in a request's conversation, oldest first.
pub fn conversation_prompts(body: &Value) -> Vec<String> {
    messages(body).iter().flat_map(user_prompts).collect()
}

fn last_user(body: &Value) -> Option<&Value> {
    messages(body)
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
}

/// The newest prompt of a request: the last prompt of its last user message.
pub fn last_prompt(body: &Value) -> Option<String> {
    last_user(body).and_then(|m| user_prompts(m).pop())
}

/// The tool results in a request's conversation.
pub fn tool_results(body: &Value) -> Vec<ToolResult> {
    messages(body)
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .flat_map(blocks)
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .map(|b| ToolResult {
            tool_use_id: b
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            content: match b.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(|x| x.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            },
        })
        .collect()
}

/// A turn request offers tools; side calls (titles, topics) do not.
pub fn is_turn_request(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

/// The reply a turn request gets under `script`.
pub fn choose(script: &Script, body: &Value) -> Reply {
    if let Some(prompt) = last_prompt(body) {
        return fill(script.pick(&prompt), "{prompt}", &prompt);
    }
    let results = last_user(body)
        .map(|m| {
            blocks(m)
                .into_iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    match results.first() {
        Some(r) => {
            let err = r.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            fill(
                &script.after_tool,
                "{result}",
                if err { "error" } else { "ok" },
            )
        }
        None => fill(&script.default, "{prompt}", ""),
    }
}

fn fill(reply: &Reply, key: &str, value: &str) -> Reply {
    match reply {
        Reply::Text {
            text,
            delay_ms,
            chunk_ms,
        } => Reply::Text {
            text: text.replace(key, value),
            delay_ms: *delay_ms,
            chunk_ms: *chunk_ms,
        },
        other => other.clone(),
    }
}

/// Characters / 4 of the whole body: a stand-in for the token count.
fn estimate_tokens(body: &Value) -> u64 {
    (body.to_string().len() / 4) as u64
}

// ---------------------------------------------------------------------------------
// Answers.

/// The content blocks of a reply, as the final message holds them.
fn content_blocks(reply: &Reply, seq: u64) -> (Vec<Value>, &'static str) {
    match reply {
        Reply::Text { text, .. } => (vec![json!({"type": "text", "text": text})], "end_turn"),
        Reply::ToolUse { name, input } => (
            vec![
                json!({"type": "text", "text": format!("I'll use the {name} tool.")}),
                json!({"type": "tool_use", "id": format!("toolu_stub_{seq:04}"), "name": name, "input": input}),
            ],
            "tool_use",
        ),
        Reply::Error { .. } => (Vec::new(), "end_turn"),
    }
}

/// The server-sent events of one streamed message, with the pause before each.
pub fn stream_events(reply: &Reply, model: &str, seq: u64, input_tokens: u64) -> Vec<(u64, Bytes)> {
    let (content, stop) = content_blocks(reply, seq);
    let (delay_ms, chunk_ms) = match reply {
        Reply::Text {
            delay_ms, chunk_ms, ..
        } => (*delay_ms, *chunk_ms),
        _ => (0, 0),
    };
    let mut out = vec![(
        delay_ms,
        sse(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": format!("msg_stub_{seq:04}"), "type": "message", "role": "assistant",
                "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ),
    )];
    out.push((0, sse("ping", &json!({"type": "ping"}))));
    let mut output_tokens = 0u64;
    for (index, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let mut start = block.clone();
                start["input"] = json!({});
                out.push((
                    0,
                    sse(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": index, "content_block": start}),
                    ),
                ));
                // The input arrives as partial JSON; split it so the CLI must join it.
                let input = block.get("input").cloned().unwrap_or(json!({})).to_string();
                let mid = input
                    .char_indices()
                    .map(|(i, _)| i)
                    .nth(input.chars().count() / 2)
                    .unwrap_or(0);
                for part in [&input[..mid], &input[mid..]] {
                    out.push((
                        0,
                        sse(
                            "content_block_delta",
                            &json!({"type": "content_block_delta", "index": index,
                                    "delta": {"type": "input_json_delta", "partial_json": part}}),
                        ),
                    ));
                }
                output_tokens += (input.len() / 4) as u64 + 1;
            }
            _ => {
                out.push((
                    0,
                    sse(
                        "content_block_start",
                        &json!({"type": "content_block_start", "index": index,
                                "content_block": {"type": "text", "text": ""}}),
                    ),
                ));
                let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                for piece in text_pieces(text) {
                    out.push((
                        chunk_ms,
                        sse(
                            "content_block_delta",
                            &json!({"type": "content_block_delta", "index": index,
                                    "delta": {"type": "text_delta", "text": piece}}),
                        ),
                    ));
                }
                output_tokens += (text.len() / 4) as u64 + 1;
            }
        }
        out.push((
            0,
            sse(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ),
        ));
    }
    out.push((
        0,
        sse(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": output_tokens}}),
        ),
    ));
    out.push((0, sse("message_stop", &json!({"type": "message_stop"}))));
    out
}

/// The non-streamed message for a reply.
fn message_json(reply: &Reply, model: &str, seq: u64, input_tokens: u64) -> Value {
    let (content, stop) = content_blocks(reply, seq);
    json!({
        "id": format!("msg_stub_{seq:04}"), "type": "message", "role": "assistant",
        "model": model, "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 8,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    })
}

fn error_body(error_type: &str, message: &str, seq: u64) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message},
           "request_id": format!("req_stub_{seq:04}")})
}

fn json_response(status: StatusCode, v: &Value, seq: u64) -> Response<Body> {
    let mut resp = full(status, "application/json", v.to_string());
    if let Ok(id) = HeaderValue::from_str(&format!("req_stub_{seq:04}")) {
        resp.headers_mut().insert("request-id", id);
    }
    resp
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let seq = state.seq.fetch_add(1, Ordering::Relaxed) + 1;
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let route = req.uri().path().trim_end_matches('/').to_string();
    let bytes = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let mut rec = Recorded {
        kind: Kind::Other,
        method: method.to_string(),
        path,
        body: body.clone(),
        status: 404,
    };
    let resp = if method == Method::HEAD && route.is_empty() {
        rec.status = 200;
        full(StatusCode::OK, "text/plain", Bytes::new())
    } else if method == Method::POST && route == "/v1/messages/count_tokens" {
        rec.kind = Kind::Side;
        rec.status = 200;
        json_response(
            StatusCode::OK,
            &json!({"input_tokens": estimate_tokens(&body)}),
            seq,
        )
    } else if method == Method::POST && route == "/v1/messages" {
        let model = body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(MODEL)
            .to_string();
        let reply = if is_turn_request(&body) {
            rec.kind = Kind::Turn;
            let script = state.script.lock().unwrap_or_else(PoisonError::into_inner);
            choose(&script, &body)
        } else {
            rec.kind = Kind::Side;
            Reply::text("Scripted session")
        };
        let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
        let input_tokens = estimate_tokens(&body);
        match reply {
            Reply::Error {
                status,
                error_type,
                message,
            } => {
                rec.status = status;
                let code =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                json_response(code, &error_body(&error_type, &message, seq), seq)
            }
            reply if stream => {
                rec.status = 200;
                let mut resp = event_stream(stream_events(&reply, &model, seq, input_tokens));
                let h = resp.headers_mut();
                if let Ok(id) = HeaderValue::from_str(&format!("req_stub_{seq:04}")) {
                    h.insert("request-id", id);
                }
                resp
            }
            reply => {
                rec.status = 200;
                if let Reply::Text { delay_ms, .. } = &reply {
                    if *delay_ms > 0 {
                        tokio::time::sleep(Duration::from_millis(*delay_ms)).await;
                    }
                }
                json_response(
                    StatusCode::OK,
                    &message_json(&reply, &model, seq, input_tokens),
                    seq,
                )
            }
        }
    } else {
        json_response(
            StatusCode::NOT_FOUND,
            &error_body("not_found_error", "no such route in the stub", seq),
            seq,
        )
    };
    state.record(rec);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn turn(messages: Value) -> Value {
        json!({"model": "m", "stream": true, "tools": [{"name": "Bash"}], "messages": messages})
    }

    #[test]
    fn prompts_skip_the_cli_reminders_and_markers() {
        let body = turn(json!([
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\ncontext\n</system-reminder>"},
                {"type": "text", "text": "Write the parser."}]},
            {"role": "system", "content": "Available agent types"},
            {"role": "assistant", "content": [{"type": "text", "text": "Done"}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "denied", "is_error": true},
                {"type": "text", "text": "[Request interrupted by user for tool use]"},
                {"type": "text", "text": "Add tests."}]},
        ]));
        assert_eq!(
            conversation_prompts(&body),
            vec!["Write the parser.".to_string(), "Add tests.".to_string()]
        );
        assert_eq!(last_prompt(&body).as_deref(), Some("Add tests."));
        let r = tool_results(&body);
        assert_eq!(r.len(), 1);
        assert!(r[0].is_error);
        assert_eq!(r[0].content, "denied");
    }

    #[test]
    fn the_newest_prompt_picks_the_rule_and_tool_results_get_the_follow_up() {
        let script = Script::new()
            .on("FAIL", Reply::error(500))
            .on("RUN", Reply::bash("touch x"));
        // An earlier failed prompt in the same message does not pick the reply.
        let body = turn(json!([{"role": "user", "content": [
            {"type": "text", "text": "please FAIL"}, {"type": "text", "text": "now RUN it"}]}]));
        assert_eq!(choose(&script, &body), Reply::bash("touch x"));
        let body = turn(json!([{"role": "user", "content": "plain words"}]));
        assert_eq!(choose(&script, &body), Reply::text("Done: plain words"));
        let body = turn(json!([{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "x", "is_error": true}]}]));
        assert_eq!(
            choose(&script, &body),
            Reply::text("The tool finished (error).")
        );
        assert!(is_turn_request(&body));
        assert!(!is_turn_request(&json!({"messages": [], "tools": []})));
    }

    #[test]
    fn a_stream_follows_the_api_event_order_and_carries_the_whole_reply() {
        let events = stream_events(&Reply::bash("ls -la"), "m", 7, 10);
        let text: Vec<String> = events
            .iter()
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .collect();
        let names: Vec<&str> = text
            .iter()
            .map(|e| e.lines().next().unwrap().trim_start_matches("event: "))
            .collect();
        assert_eq!(names.first(), Some(&"message_start"));
        assert_eq!(names.last(), Some(&"message_stop"));
        assert_eq!(names[names.len() - 2], "message_delta");
        assert!(text[text.len() - 2].contains(r#""stop_reason":"tool_use""#));
        // The partial JSON pieces join to the tool input.
        let json: String = text
            .iter()
            .filter_map(|e| {
                let data: Value =
                    serde_json::from_str(e.lines().nth(1)?.trim_start_matches("data: ")).ok()?;
                data["delta"]["partial_json"].as_str().map(String::from)
            })
            .collect();
        let input: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(input["command"], "ls -la");
        // Text streams word by word, pausing between words.
        let slow = stream_events(&Reply::slow("one two three", 40), "m", 1, 1);
        let deltas: Vec<&(u64, Bytes)> = slow
            .iter()
            .filter(|(_, b)| String::from_utf8_lossy(b).contains("text_delta"))
            .collect();
        assert_eq!(deltas.len(), 3);
        assert!(deltas.iter().all(|(p, _)| *p == 40));
    }

    #[test]
    fn serves_streams_errors_and_records_over_http() {
        let stub = AnthropicStub::start(Script::new().on("boom", Reply::error(529))).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let addr = stub.addr();
        let (ok, err, missing) = rt.block_on(async move {
            async fn post(addr: SocketAddr, path: &str, body: &Value) -> (u16, String) {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                let b = body.to_string();
                let req = format!(
                    "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
                    b.len()
                );
                s.write_all(req.as_bytes()).await.unwrap();
                let mut out = String::new();
                s.read_to_string(&mut out).await.unwrap();
                let status = out[9..12].parse().unwrap();
                (status, out)
            }
            let ok = post(
                addr,
                "/v1/messages?beta=true",
                &turn(json!([{"role": "user", "content": "hello"}])),
            )
            .await;
            let err = post(
                addr,
                "/v1/messages",
                &turn(json!([{"role": "user", "content": "boom"}])),
            )
            .await;
            let missing = post(addr, "/v1/other", &json!({})).await;
            (ok, err, missing)
        });
        assert_eq!(ok.0, 200);
        assert!(ok.1.contains("event: message_stop"), "{}", ok.1);
        assert!(ok.1.contains(r#""text":"Done: ""#), "{}", ok.1);
        assert!(ok.1.contains(r#""text":"hello""#), "{}", ok.1);
        assert_eq!(err.0, 529);
        assert!(err.1.contains("overloaded_error"));
        assert_eq!(missing.0, 404);
        assert_eq!(stub.conversation(), vec!["boom".to_string()]);
        assert_eq!(stub.attempts("boom"), 1);
        assert_eq!(stub.unknown(), vec!["POST /v1/other".to_string()]);
    }
}

//! `ResponsesStub`: a scripted server speaking the OpenAI Responses API, in-process on
//! loopback, so the real Codex CLI runs offline against it (a `model_providers` entry in
//! its `config.toml` with `base_url = "http://ADDR/v1"` and `wire_api = "responses"`).
//!
//! What it answers (hyper 1, HTTP/1.1, a tokio runtime of its own so plain `#[test]`
//! functions can hold it):
//!
//! - `POST /v1/responses`: server-sent events in the API's order (`response.created`,
//!   `response.output_item.added`, `response.output_text.delta` word by word for text,
//!   `response.output_item.done`, `response.completed` with usage); or an HTTP error with
//!   an OpenAI error body.
//! - `GET /v1/models`: an empty list; anything else: 404, recorded so a test can see it.
//!
//! A *turn request* offers tools: Codex's conversation. Its answer is chosen from the last
//! input item: a typed user message (Codex's injected `<environment_context>`,
//! `<turn_aborted>` and similar are not prompts) picks the first [`Rule`] whose `when` it
//! contains, else the script's default; a `function_call_output` gets
//! [`Script::after_tool`]. A request without tools (the title Codex asks for) is a side
//! call and gets a short title. What does not live here: Codex's home, config and tmux
//! (the compatibility tests do that).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::http_stub::{event_stream, full, sse, text_pieces, Body, Served};

/// Codex sends its whole conversation, instructions and tool schemas each turn.
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// One scripted answer to a turn request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Assistant text; `{prompt}` is replaced by the prompt. `delay_ms` passes before the
    /// first event, `chunk_ms` between words.
    Text {
        text: String,
        delay_ms: u64,
        chunk_ms: u64,
    },
    /// An `exec_command` call running `cmd`; `escalated` asks to run it outside the
    /// sandbox, which Codex puts to the user first.
    Exec { cmd: String, escalated: bool },
    /// An HTTP error with an OpenAI error body of this `type`.
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

    /// A command run in Codex's sandbox without asking.
    pub fn exec(cmd: impl Into<String>) -> Self {
        Reply::Exec {
            cmd: cmd.into(),
            escalated: false,
        }
    }

    /// A command Codex must ask the user to approve.
    pub fn escalated(cmd: impl Into<String>) -> Self {
        Reply::Exec {
            cmd: cmd.into(),
            escalated: true,
        }
    }

    /// An HTTP error; 429 is Codex's usage limit.
    pub fn error(status: u16) -> Self {
        let (error_type, message) = match status {
            429 => ("usage_limit_reached", "You've hit your usage limit."),
            401 => ("invalid_request_error", "Incorrect API key provided"),
            _ => (
                "server_error",
                "The server had an error processing your request.",
            ),
        };
        Reply::Error {
            status,
            error_type: error_type.into(),
            message: message.into(),
        }
    }
}

/// What the stub answers to turn requests; `after_tool` answers a request whose last
/// input is a tool's output.
pub type Script = crate::http_stub::Script<Reply>;
pub type Rule = crate::http_stub::Rule<Reply>;

impl Default for Script {
    fn default() -> Self {
        Script {
            rules: Vec::new(),
            default: Reply::text("Done: {prompt}"),
            after_tool: Reply::text("The command finished."),
        }
    }
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub turn: bool,
    pub method: String,
    pub path: String,
    pub body: Value,
    pub status: u16,
}

struct State {
    script: Mutex<Script>,
    requests: Mutex<Vec<Recorded>>,
    seq: AtomicU64,
}

/// A running stub; stops when dropped.
pub struct ResponsesStub {
    server: Served,
    state: Arc<State>,
}

impl ResponsesStub {
    /// Starts on `127.0.0.1:0` with a runtime of its own; call it from synchronous code.
    pub fn start(script: Script) -> std::io::Result<ResponsesStub> {
        let state = Arc::new(State {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
        });
        let server = Served::start("responses-stub", {
            let state = Arc::clone(&state);
            move |req| handle(Arc::clone(&state), req)
        })?;
        Ok(ResponsesStub { server, state })
    }

    /// `http://ADDR/v1`, what a model provider's `base_url` takes.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.server.addr())
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The typed prompts of the conversation as Codex last sent it, oldest first.
    pub fn conversation(&self) -> Vec<String> {
        self.requests()
            .iter()
            .rev()
            .find(|r| r.turn)
            .map(|r| prompts(&r.body))
            .unwrap_or_default()
    }

    /// Requests to paths the stub does not serve, as `METHOD path`.
    pub fn unknown(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.status == 404)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }
}

fn input(body: &Value) -> &[Value] {
    body.get("input")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A typed prompt in an input item: a user message whose text is not one of Codex's
/// injected `<…>` blocks.
fn prompt_of(item: &Value) -> Option<String> {
    if item.get("type").and_then(Value::as_str) != Some("message")
        || item.get("role").and_then(Value::as_str) != Some("user")
    {
        return None;
    }
    let text: Vec<&str> = item
        .get("content")
        .and_then(Value::as_array)?
        .iter()
        .filter(|c| c.get("type").and_then(Value::as_str) == Some("input_text"))
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .filter(|t| !t.trim_start().starts_with('<'))
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

/// Every typed prompt of a request, oldest first.
pub fn prompts(body: &Value) -> Vec<String> {
    input(body).iter().filter_map(prompt_of).collect()
}

/// A turn request offers tools; the title request does not.
pub fn is_turn_request(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

/// The reply a turn request gets under `script`.
pub fn choose(script: &Script, body: &Value) -> Reply {
    let last = input(body).last();
    if last.and_then(|i| i.get("type")).and_then(Value::as_str) == Some("function_call_output") {
        return script.after_tool.clone();
    }
    let prompt = input(body)
        .iter()
        .rev()
        .find_map(prompt_of)
        .unwrap_or_default();
    match script.pick(&prompt) {
        Reply::Text {
            text,
            delay_ms,
            chunk_ms,
        } => Reply::Text {
            text: text.replace("{prompt}", &prompt),
            delay_ms: *delay_ms,
            chunk_ms: *chunk_ms,
        },
        other => other.clone(),
    }
}

/// The events of one streamed response, with the pause before each.
pub fn stream_events(reply: &Reply, seq: u64) -> Vec<(u64, Bytes)> {
    let id = format!("resp_stub_{seq:04}");
    let mut out = vec![(
        0,
        sse(
            "response.created",
            &json!({"type": "response.created", "response": {"id": id}}),
        ),
    )];
    let item = match reply {
        Reply::Text {
            text,
            delay_ms,
            chunk_ms,
        } => {
            let item_id = format!("msg_stub_{seq:04}");
            let added =
                json!({"type": "message", "role": "assistant", "id": item_id, "content": []});
            out.push((
                *delay_ms,
                sse(
                    "response.output_item.added",
                    &json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
                ),
            ));
            for piece in text_pieces(text) {
                out.push((
                    *chunk_ms,
                    sse(
                        "response.output_text.delta",
                        &json!({"type": "response.output_text.delta", "item_id": item_id,
                                "output_index": 0, "content_index": 0, "delta": piece}),
                    ),
                ));
            }
            json!({"type": "message", "role": "assistant", "id": item_id,
                   "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
        Reply::Exec { cmd, escalated } => {
            let mut args = json!({"cmd": cmd});
            if *escalated {
                args["sandbox_permissions"] = "require_escalated".into();
                args["justification"] = format!("May I run {cmd}?").into();
            }
            let item = json!({"type": "function_call", "id": format!("fc_stub_{seq:04}"),
                "call_id": format!("call_stub_{seq:04}"), "name": "exec_command",
                "arguments": args.to_string()});
            out.push((
                0,
                sse(
                    "response.output_item.added",
                    &json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
                ),
            ));
            item
        }
        Reply::Error { .. } => return Vec::new(),
    };
    out.push((
        0,
        sse(
            "response.output_item.done",
            &json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        ),
    ));
    out.push((
        0,
        sse(
            "response.completed",
            &json!({"type": "response.completed", "response": {"id": id, "usage": {
                "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 110}}}),
        ),
    ));
    out
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
    let bytes = Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let mut rec = Recorded {
        turn: false,
        method: method.to_string(),
        path,
        body: body.clone(),
        status: 404,
    };
    let resp = if method == Method::GET && route == "/v1/models" {
        rec.status = 200;
        full(
            StatusCode::OK,
            "application/json",
            json!({"object": "list", "data": []}).to_string(),
        )
    } else if method == Method::POST && route == "/v1/responses" {
        let reply = if is_turn_request(&body) {
            rec.turn = true;
            let script = state.script.lock().unwrap_or_else(PoisonError::into_inner);
            choose(&script, &body)
        } else {
            Reply::text("Scripted session")
        };
        match reply {
            Reply::Error {
                status,
                error_type,
                message,
            } => {
                rec.status = status;
                full(
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    "application/json",
                    json!({"error": {"type": error_type, "message": message}}).to_string(),
                )
            }
            reply => {
                rec.status = 200;
                if let Reply::Text { delay_ms, .. } = &reply {
                    // The pause before the first item is in the stream; hold the headers
                    // back too, as a model that is thinking does.
                    tokio::time::sleep(Duration::from_millis(*delay_ms / 2)).await;
                }
                event_stream(stream_events(&reply, seq))
            }
        }
    } else {
        full(
            StatusCode::NOT_FOUND,
            "application/json",
            Bytes::from_static(
                br#"{"error":{"type":"not_found","message":"no such route in the stub"}}"#,
            ),
        )
    };
    state
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(rec);
    Ok(resp)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn turn(input: Value) -> Value {
        json!({"model": "m", "stream": true, "tools": [{"type": "function", "name": "exec_command"}], "input": input})
    }

    #[test]
    fn prompts_skip_codex_context_and_tool_outputs_get_the_follow_up() {
        let body = turn(json!([
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "RUN the tests"}]},
        ]));
        assert_eq!(prompts(&body), ["RUN the tests"]);
        let script = Script::new().on("RUN", Reply::exec("cargo test"));
        assert_eq!(choose(&script, &body), Reply::exec("cargo test"));
        let mut after = body.clone();
        after["input"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "function_call_output", "call_id": "c", "output": "ok"}));
        assert_eq!(choose(&script, &after), script.after_tool);
        let plain = turn(
            json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]),
        );
        assert_eq!(choose(&script, &plain), Reply::text("Done: hi"));
        assert!(!is_turn_request(&json!({"tools": [], "input": []})));
    }

    #[test]
    fn a_stream_ends_with_the_completed_response_and_carries_the_call() {
        let events = stream_events(&Reply::escalated("touch x"), 3);
        let names: Vec<String> = events
            .iter()
            .map(|(_, b)| {
                String::from_utf8_lossy(b)
                    .lines()
                    .next()
                    .unwrap()
                    .trim_start_matches("event: ")
                    .to_string()
            })
            .collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.output_item.added",
                "response.output_item.done",
                "response.completed"
            ]
        );
        let done = String::from_utf8_lossy(&events[2].1).into_owned();
        assert!(done.contains("require_escalated"), "{done}");
        let slow = stream_events(&Reply::slow("one two three", 40), 1);
        assert_eq!(
            slow.iter()
                .filter(
                    |(p, b)| *p == 40 && String::from_utf8_lossy(b).contains("output_text.delta")
                )
                .count(),
            3
        );
        assert!(stream_events(&Reply::error(429), 1).is_empty());
    }
}

//! Codex's own files, read as facts: rollout lines, their `session_meta` head, and which
//! rollout belongs to a running process.
//!
//! Seen on 0.169.0 (fixtures in `common/tests/fixtures/evidence/codex-0.169.0/`): a rollout
//! is `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<thread id>.jsonl`, one
//! `{timestamp, type, payload}` object a line, written by Codex's app-server (not by the TUI
//! process in the pane), created with the conversation's first prompt and appended to by
//! every later turn (`/resume` appends to the old file). The first line is `session_meta`
//! (`id`, `cwd`, `cli_version`, `timestamp`).
//!
//! What counts: `event_msg` `item_completed` with a `UserMessage` item (0.169) or
//! `user_message` (older releases) is the prompt — the `response_item` user messages also
//! carry Codex's injected context and are not; `response_item` `message` from the
//! assistant is its text; `function_call` / `custom_tool_call` / `local_shell_call` are
//! tool calls and their `*_output` the results (failed when the output states a non-zero
//! exit or the user aborted it); `task_complete` ends a turn — with an `error`
//! (`codex_error_info` `usage_limit_exceeded`, …) it is an API failure; `turn_aborted`
//! is an interrupt; `compacted` and `context_compacted` are compactions. Everything else
//! (`turn_context`, `world_state`, `token_count`, `thread_settings_applied`, …) is
//! bookkeeping and ignored.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{clip, object, parse_utc_ms, Entry, Fact, ParseError, Stamped, TurnEnd};

/// Bound on text carried in one fact, as for Claude's transcript.
const MAX_TEXT: usize = 2000;

/// The facts in one rollout line (often none).
pub fn parse_line(line: &str) -> Result<Vec<Stamped>, ParseError> {
    parse_entry(line).map(|e| e.facts)
}

/// One rollout line. Codex only appends and writes no per-line id, so `id` is `None`.
pub fn parse_entry(line: &str) -> Result<Entry, ParseError> {
    let o = object(line)?;
    let written_ms = o
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(parse_utc_ms)
        .unwrap_or(0);
    let payload = o.get("payload").unwrap_or(&Value::Null);
    let facts = match o.get("type").and_then(Value::as_str).unwrap_or("") {
        "event_msg" => event_facts(payload),
        "response_item" => item_facts(payload),
        "compacted" => vec![Fact::Compacted],
        _ => Vec::new(),
    };
    Ok(Entry {
        id: None,
        facts: facts
            .into_iter()
            .map(|fact| Stamped { fact, written_ms })
            .collect(),
    })
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// The text of content items of the given `kinds`, joined.
fn content_text(content: Option<&Value>, kinds: &[&str]) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .filter(|i| kinds.contains(&str_of(i, "type")))
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn event_facts(p: &Value) -> Vec<Fact> {
    match str_of(p, "type") {
        "user_message" => prompt(str_of(p, "message")),
        "item_completed" => {
            let item = p.get("item").unwrap_or(&Value::Null);
            match str_of(item, "type") {
                "UserMessage" => prompt(&content_text(item.get("content"), &["text"])),
                _ => Vec::new(),
            }
        }
        "task_complete" => match p.get("error").filter(|e| !e.is_null()) {
            Some(err) => {
                let message = match err {
                    Value::String(s) => s.clone(),
                    _ => str_of(err, "message").to_string(),
                };
                api_error(&message, &error_info(err))
            }
            None => vec![Fact::TurnEnded {
                how: TurnEnd::Completed,
            }],
        },
        "turn_aborted" => vec![Fact::TurnEnded {
            how: TurnEnd::Interrupted,
        }],
        // Older releases report a failed request as its own event before the turn ends.
        "error" | "stream_error" => {
            let mut facts = api_error(str_of(p, "message"), &error_info(p));
            facts.truncate(1);
            facts
        }
        "context_compacted" => vec![Fact::Compacted],
        _ => Vec::new(),
    }
}

/// `codex_error_info` as text: a name (`usage_limit_exceeded`) or its JSON
/// (`{"http_connection_failed":{…}}`); empty when absent.
fn error_info(v: &Value) -> String {
    match v.get("codex_error_info") {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn prompt(text: &str) -> Vec<Fact> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    vec![Fact::Prompt {
        text: text.to_string(),
    }]
}

/// An API failure and the end of its turn. `info` is Codex's `codex_error_info`.
fn api_error(message: &str, info: &str) -> Vec<Fact> {
    let lower = format!("{message} {info}").to_ascii_lowercase();
    let limit = lower.contains("usage_limit")
        || lower.contains("usage limit")
        || lower.contains("rate_limit")
        || lower.contains("rate limit")
        || lower.contains("too many requests");
    let status = if limit {
        429
    } else {
        status_in(info).unwrap_or(0)
    };
    vec![
        Fact::ApiError {
            status,
            message: clip(message, MAX_TEXT),
            limit,
            resets: limit.then(|| resets_in(message)).flatten(),
        },
        Fact::TurnEnded {
            how: TurnEnd::ApiError,
        },
    ]
}

/// An HTTP status named in `codex_error_info` (`{"http_connection_failed":{"http_status_code":502}}`).
fn status_in(info: &str) -> Option<u16> {
    let v: Value = serde_json::from_str(info).ok()?;
    fn find(v: &Value) -> Option<u16> {
        match v {
            Value::Object(m) => m.iter().find_map(|(k, v)| {
                if k.contains("status") {
                    v.as_u64().and_then(|n| u16::try_from(n).ok())
                } else {
                    find(v)
                }
            }),
            _ => None,
        }
    }
    find(&v)
}

/// The reset a limit message states: `try again at 3:15 PM`, `try again in 2 hours`.
fn resets_in(message: &str) -> Option<String> {
    let lower = message.to_ascii_lowercase();
    let at = lower.find("try again ")?;
    let rest = &message[at + "try again ".len()..];
    let when: String = rest
        .chars()
        .take_while(|c| !matches!(c, '.' | ',' | '\n'))
        .collect();
    let when = when.trim();
    (!when.is_empty() && when != "later").then(|| when.to_string())
}

fn item_facts(p: &Value) -> Vec<Fact> {
    match str_of(p, "type") {
        "message" if str_of(p, "role") == "assistant" => {
            let text = content_text(p.get("content"), &["output_text", "text"]);
            if text.trim().is_empty() {
                Vec::new()
            } else {
                vec![Fact::AssistantText {
                    text: clip(&text, MAX_TEXT),
                }]
            }
        }
        "function_call" => vec![Fact::ToolCall {
            id: str_of(p, "call_id").to_string(),
            name: str_of(p, "name").to_string(),
            input: str_of(p, "arguments").to_string(),
        }],
        "custom_tool_call" => vec![Fact::ToolCall {
            id: str_of(p, "call_id").to_string(),
            name: str_of(p, "name").to_string(),
            input: str_of(p, "input").to_string(),
        }],
        "local_shell_call" => vec![Fact::ToolCall {
            id: str_of(p, "call_id").to_string(),
            name: "shell".into(),
            input: p
                .get("action")
                .map(Value::to_string)
                .unwrap_or_else(|| "{}".into()),
        }],
        "function_call_output" | "custom_tool_call_output" => {
            let output = match p.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(v @ Value::Array(_)) => content_text(Some(v), &["input_text", "text"]),
                Some(v) => str_of(v, "content").to_string(),
                None => String::new(),
            };
            vec![Fact::ToolResult {
                id: str_of(p, "call_id").to_string(),
                ok: output_ok(&output),
                output: clip(&output, MAX_TEXT),
            }]
        }
        _ => Vec::new(),
    }
}

/// Whether a tool's output says it worked: the exit code it states (`Process exited with
/// code N` on 0.169; a JSON `{"output", "metadata": {"exit_code"}}` on older releases), and
/// not aborted or rejected by the user.
pub fn output_ok(output: &str) -> bool {
    if let Ok(v) = serde_json::from_str::<Value>(output) {
        if let Some(code) = v.pointer("/metadata/exit_code").and_then(Value::as_i64) {
            return code == 0;
        }
    }
    for line in output.lines() {
        let line = line.trim();
        if let Some(code) = line.strip_prefix("Process exited with code ") {
            return code.trim() == "0";
        }
        if line == "aborted by user" || line.starts_with("exec command rejected by user") {
            return false;
        }
    }
    true
}

/// A rollout's first line: which conversation, where, and when it began.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionMeta {
    pub id: String,
    pub cwd: String,
    pub cli_version: String,
    pub started_ms: u64,
}

impl SessionMeta {
    /// The `session_meta` line; `None` for any other line.
    pub fn parse(line: &str) -> Result<Option<SessionMeta>, ParseError> {
        let o = object(line)?;
        if o.get("type").and_then(Value::as_str) != Some("session_meta") {
            return Ok(None);
        }
        let p = o.get("payload").unwrap_or(&Value::Null);
        let id = match str_of(p, "id") {
            "" => str_of(p, "session_id"),
            id => id,
        };
        Ok(Some(SessionMeta {
            id: id.to_string(),
            cwd: str_of(p, "cwd").to_string(),
            cli_version: str_of(p, "cli_version").to_string(),
            started_ms: parse_utc_ms(str_of(p, "timestamp"))
                .or_else(|| {
                    o.get("timestamp")
                        .and_then(Value::as_str)
                        .and_then(parse_utc_ms)
                })
                .unwrap_or(0),
        }))
    }
}

/// Codex's home for a process environment: `CODEX_HOME` when set, else `$HOME/.codex`.
pub fn codex_home(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = env("CODEX_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".codex"))
}

/// Where rollouts live under a Codex home.
pub fn sessions_dir(home: &Path) -> PathBuf {
    home.join("sessions")
}

/// Whether a file name is a rollout's (`rollout-….jsonl`).
pub fn is_rollout_name(name: &str) -> bool {
    name.starts_with("rollout-") && name.ends_with(".jsonl")
}

/// A rollout found on disk, with what its head says and when it last changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollout {
    pub path: PathBuf,
    pub meta: SessionMeta,
    pub modified_ms: u64,
}

/// How much earlier than the process a rollout may have begun and still be its own (clock
/// granularity between the process table and the file's timestamp).
pub const START_SLACK_MS: u64 = 2_000;

/// The rollout a Codex process started at `started_ms` in `cwd` is writing: among the
/// rollouts of that cwd, those begun since the process started, or written to since then
/// (a `/resume`d conversation), the one written to last. `None` when none qualifies — a
/// Codex that has not been given its first prompt has no rollout yet.
///
/// Two Codex processes in one directory cannot be told apart this way; the one written
/// to last wins for both.
pub fn pick_rollout<'a>(
    rollouts: &'a [Rollout],
    cwd: &str,
    started_ms: u64,
) -> Option<&'a Rollout> {
    let since = started_ms.saturating_sub(START_SLACK_MS);
    rollouts
        .iter()
        .filter(|r| same_dir(&r.meta.cwd, cwd))
        .filter(|r| r.meta.started_ms >= since || r.modified_ms >= since)
        .max_by_key(|r| (r.modified_ms, r.meta.started_ms))
}

/// Directories compared without a trailing slash.
fn same_dir(a: &str, b: &str) -> bool {
    let trim = |s: &str| {
        if s.len() > 1 {
            s.trim_end_matches('/').to_string()
        } else {
            s.to_string()
        }
    };
    !a.is_empty() && trim(a) == trim(b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn line(ty: &str, payload: Value) -> String {
        serde_json::json!({"timestamp": "2026-11-24T03:26:42.439Z", "type": ty, "payload": payload})
            .to_string()
    }

    #[test]
    fn prompts_come_from_the_user_events_not_the_injected_context() {
        let injected = line(
            "response_item",
            serde_json::json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>\n</environment_context>"}]}),
        );
        assert!(parse_line(&injected).unwrap().is_empty());
        let item = line(
            "event_msg",
            serde_json::json!({"type": "item_completed", "item": {"type": "UserMessage",
                "content": [{"type": "text", "text": "Fix the build.", "text_elements": []}]}}),
        );
        let facts = parse_line(&item).unwrap();
        assert_eq!(
            facts,
            vec![Stamped {
                fact: Fact::Prompt {
                    text: "Fix the build.".into()
                },
                written_ms: 1_795_490_802_439
            }]
        );
        let older = line(
            "event_msg",
            serde_json::json!({"type": "user_message", "message": "Add tests.", "images": []}),
        );
        assert_eq!(
            parse_line(&older).unwrap()[0].fact,
            Fact::Prompt {
                text: "Add tests.".into()
            }
        );
    }

    #[test]
    fn turn_ends_errors_and_interrupts() {
        let done = line(
            "event_msg",
            serde_json::json!({"type": "task_complete", "last_agent_message": "Done"}),
        );
        assert_eq!(
            parse_line(&done).unwrap()[0].fact,
            Fact::TurnEnded {
                how: TurnEnd::Completed
            }
        );
        let limit = line(
            "event_msg",
            serde_json::json!({"type": "task_complete", "last_agent_message": null,
                "error": {"message": "You've hit your usage limit. Try again at 3:15 PM.",
                          "codex_error_info": "usage_limit_exceeded"}}),
        );
        let facts: Vec<Fact> = parse_line(&limit)
            .unwrap()
            .into_iter()
            .map(|s| s.fact)
            .collect();
        assert_eq!(
            facts,
            vec![
                Fact::ApiError {
                    status: 429,
                    message: "You've hit your usage limit. Try again at 3:15 PM.".into(),
                    limit: true,
                    resets: Some("at 3:15 PM".into()),
                },
                Fact::TurnEnded {
                    how: TurnEnd::ApiError
                }
            ]
        );
        let failed = line(
            "event_msg",
            serde_json::json!({"type": "task_complete", "error": {"message": "bad gateway",
                "codex_error_info": {"http_connection_failed": {"http_status_code": 502}}}}),
        );
        match &parse_line(&failed).unwrap()[0].fact {
            Fact::ApiError { status, limit, .. } => {
                assert_eq!(*status, 502);
                assert!(!limit);
            }
            other => panic!("{other:?}"),
        }
        let aborted = line(
            "event_msg",
            serde_json::json!({"type": "turn_aborted", "reason": "interrupted"}),
        );
        assert_eq!(
            parse_line(&aborted).unwrap()[0].fact,
            Fact::TurnEnded {
                how: TurnEnd::Interrupted
            }
        );
    }

    #[test]
    fn tool_calls_and_their_results() {
        let call = line(
            "response_item",
            serde_json::json!({"type": "function_call", "name": "exec_command",
                "arguments": "{\"cmd\": \"cargo test\"}", "call_id": "call_1"}),
        );
        let f = parse_line(&call).unwrap();
        assert_eq!(
            f[0].fact,
            Fact::ToolCall {
                id: "call_1".into(),
                name: "exec_command".into(),
                input: "{\"cmd\": \"cargo test\"}".into()
            }
        );
        for (output, ok) in [
            (
                "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOutput:\n",
                true,
            ),
            (
                "Wall time: 0.2 seconds\nProcess exited with code 101\nOutput:\nFAILED",
                false,
            ),
            ("Wall time: 3.0 seconds\naborted by user", false),
            (
                r#"{"output":"ok","metadata":{"exit_code":0,"duration_seconds":0.1}}"#,
                true,
            ),
            (r#"{"output":"no","metadata":{"exit_code":2}}"#, false),
            ("Success. Updated the following files:\nM src/lib.rs", true),
        ] {
            assert_eq!(output_ok(output), ok, "{output}");
        }
        let result = line(
            "response_item",
            serde_json::json!({"type": "function_call_output", "call_id": "call_1",
                "output": "Process exited with code 1\nOutput:\nerror"}),
        );
        match &parse_line(&result).unwrap()[0].fact {
            Fact::ToolResult { id, ok, .. } => {
                assert_eq!(id, "call_1");
                assert!(!ok);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bookkeeping_and_bad_lines() {
        for ty in ["turn_context", "world_state", "token_usage_record"] {
            assert!(parse_line(&line(ty, serde_json::json!({"x": 1})))
                .unwrap()
                .is_empty());
        }
        assert!(parse_line("not json").is_err());
        assert!(parse_line("[1]").is_err());
        assert!(parse_line(r#"{"type":"event_msg"}"#).unwrap().is_empty());
    }

    fn rollout(name: &str, cwd: &str, started_ms: u64, modified_ms: u64) -> Rollout {
        Rollout {
            path: PathBuf::from(name),
            meta: SessionMeta {
                id: name.into(),
                cwd: cwd.into(),
                cli_version: "0.169.0".into(),
                started_ms,
            },
            modified_ms,
        }
    }

    #[test]
    fn the_rollout_of_a_process_is_its_cwds_newest_since_it_started() {
        let rs = [
            rollout("old", "/p", 1_000, 5_000),
            rollout("other-dir", "/q", 100_000, 200_000),
            rollout("new", "/p/", 100_500, 150_000),
            rollout("resumed", "/p", 1_000, 160_000),
        ];
        // Started at 100 s: the new one and the resumed one qualify; the last written wins.
        assert_eq!(
            pick_rollout(&rs, "/p", 100_000).map(|r| r.meta.id.as_str()),
            Some("resumed")
        );
        assert_eq!(
            pick_rollout(&rs[..3], "/p", 100_000).map(|r| r.meta.id.as_str()),
            Some("new")
        );
        // Nothing written since the process started: no rollout yet.
        assert_eq!(pick_rollout(&rs[..1], "/p", 100_000), None);
        assert_eq!(pick_rollout(&rs, "/elsewhere", 0), None);
    }

    #[test]
    fn session_meta_and_home() {
        let head = r#"{"timestamp":"2026-11-24T03:26:42.382Z","type":"session_meta","payload":{"id":"01a2","timestamp":"2026-11-24T03:26:37.874Z","cwd":"/tmp/p","cli_version":"0.169.0"}}"#;
        let meta = SessionMeta::parse(head).unwrap().unwrap();
        assert_eq!(meta.id, "01a2");
        assert_eq!(meta.cwd, "/tmp/p");
        assert_eq!(meta.started_ms, 1_795_490_797_874);
        assert_eq!(
            SessionMeta::parse(&line("event_msg", Value::Null)).unwrap(),
            None
        );
        let env = |k: &str| match k {
            "HOME" => Some("/Users/dev".to_string()),
            _ => None,
        };
        assert_eq!(codex_home(&env), Some(PathBuf::from("/Users/dev/.codex")));
        let env = |k: &str| (k == "CODEX_HOME").then(|| "/x/codex".to_string());
        assert_eq!(codex_home(&env), Some(PathBuf::from("/x/codex")));
        assert!(is_rollout_name("rollout-2026-11-24T03-26-37-01a2.jsonl"));
        assert!(!is_rollout_name("history.jsonl"));
    }
}

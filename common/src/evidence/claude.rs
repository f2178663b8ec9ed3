//! Claude Code's own files, read as facts: transcript lines and the live session file.
//!
//! Seen on 2.1.197 and 2.1.330 (fixtures in `common/tests/fixtures/evidence/`): a
//! transcript line is one JSON object with a `type`. `user` lines with string content (or
//! text blocks) are prompts; `user` lines with `tool_result` blocks are tool results;
//! `assistant` lines carry one content block each (`text`, `tool_use`, `thinking`), and an
//! `assistant` line with `isApiErrorMessage` is the CLI's report of a failed request
//! (`apiErrorStatus`, `error`: `rate_limit`, `server_error`, …); `system` with
//! `subtype: "turn_duration"` closes a turn (2.1.330 writes none after an API error: the
//! error line ends the turn there); `compact_boundary` marks a compaction. Everything
//! else (`attachment`, `file-history-snapshot`, `api-request*`, `mode`, `last-prompt`, …)
//! is bookkeeping and ignored. Unknown fields are ignored; a line that is not JSON is an
//! error the caller logs and skips.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{clip, object, parse_utc_ms, CliStatus, Fact, Stamped, TurnEnd};
pub use super::{Entry, ParseError};

/// Bound on text carried in one fact (assistant text, tool output): the engine needs
/// the gist, the transcript keeps the rest.
const MAX_TEXT: usize = 2000;

/// The facts in one transcript line (often none: most lines are bookkeeping).
pub fn parse_line(line: &str) -> Result<Vec<Stamped>, ParseError> {
    parse_entry(line).map(|e| e.facts)
}

/// One transcript line with its `uuid` as the entry id: a reader keeps the ids it has
/// seen, so a file the CLI rewrites (2.1.197 does, reordering lines) is never read twice.
pub fn parse_entry(line: &str) -> Result<Entry, ParseError> {
    let o = object(line)?;
    let id = o
        .get("uuid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .map(str::to_string);
    Ok(Entry {
        id,
        facts: entry_facts(&o),
    })
}

fn entry_facts(o: &serde_json::Map<String, Value>) -> Vec<Stamped> {
    let written_ms = o
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(parse_utc_ms)
        .unwrap_or(0);
    let stamp = |fact| Stamped { fact, written_ms };
    let ty = o.get("type").and_then(Value::as_str).unwrap_or("");
    // Sub-agents write into the same file; their turns are not the session's.
    if o.get("isSidechain").and_then(Value::as_bool) == Some(true) {
        return Vec::new();
    }
    let facts = match ty {
        "user" => user_facts(o),
        "assistant" => assistant_facts(o),
        "system" => match o.get("subtype").and_then(Value::as_str) {
            Some("turn_duration") => vec![Fact::TurnEnded {
                how: TurnEnd::Completed,
            }],
            Some("compact_boundary") => vec![Fact::Compacted],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    facts.into_iter().map(stamp).collect()
}

/// The text of a message's content: a string, or its `text` blocks joined.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

fn user_facts(o: &serde_json::Map<String, Value>) -> Vec<Fact> {
    let Some(content) = o.get("message").and_then(|m| m.get("content")) else {
        return Vec::new();
    };
    if let Some(blocks) = content.as_array() {
        let results: Vec<Fact> = blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
            .map(|b| Fact::ToolResult {
                id: str_field(b, "tool_use_id"),
                ok: b.get("is_error").and_then(Value::as_bool) != Some(true),
                output: clip(&tool_output(b.get("content")), MAX_TEXT),
            })
            .collect();
        if !results.is_empty() {
            return results;
        }
    }
    let Some(text) = content_text(content) else {
        return Vec::new();
    };
    // The CLI's own notes in the user role: meta lines, compaction summaries, slash-command
    // echoes, and the interrupt marker.
    if text.starts_with("[Request interrupted by user") {
        return vec![Fact::TurnEnded {
            how: TurnEnd::Interrupted,
        }];
    }
    let flag = |k: &str| o.get(k).and_then(Value::as_bool) == Some(true);
    if flag("isMeta") || flag("isCompactSummary") || flag("isVisibleInTranscriptOnly") {
        return Vec::new();
    }
    // Slash commands, `!` shell mode and their output are the CLI's own notes, not turns.
    const NOTES: [&str; 8] = [
        "<command-name>",
        "<command-message>",
        "<local-command-stdout>",
        "<local-command-stderr>",
        "<bash-input>",
        "<bash-stdout>",
        "<bash-stderr>",
        "Caveat: The messages below",
    ];
    if NOTES.iter().any(|n| text.trim_start().starts_with(n)) {
        return Vec::new();
    }
    vec![Fact::Prompt { text }]
}

fn tool_output(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Array(_)) => content_text(v).unwrap_or_default(),
        _ => String::new(),
    }
}

fn str_field(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

fn assistant_facts(o: &serde_json::Map<String, Value>) -> Vec<Fact> {
    let message = o.get("message");
    if o.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true) {
        let text = message
            .and_then(|m| m.get("content"))
            .and_then(content_text)
            .unwrap_or_default();
        let status = o
            .get("apiErrorStatus")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(0);
        let kind = o.get("error").and_then(Value::as_str).unwrap_or("");
        let lower = text.to_ascii_lowercase();
        let limit = status == 429
            || kind == "rate_limit"
            || lower.contains("usage limit")
            || lower.contains("limit reached");
        return vec![
            Fact::ApiError {
                status,
                resets: limit.then(|| resets_at(&text)).flatten(),
                message: clip(&text, MAX_TEXT),
                limit,
            },
            Fact::TurnEnded {
                how: TurnEnd::ApiError,
            },
        ];
    }
    let Some(blocks) = message
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = b.get("text").and_then(Value::as_str)?;
                (!text.trim().is_empty()).then(|| Fact::AssistantText {
                    text: clip(text, MAX_TEXT),
                })
            }
            Some("tool_use") => Some(Fact::ToolCall {
                id: str_field(b, "id"),
                name: str_field(b, "name"),
                input: b
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into()),
            }),
            _ => None,
        })
        .collect()
}

/// The reset time a limit message states: `resets 3pm`, `resets at 15:00`, or the old
/// `…limit reached|1767225600` epoch suffix.
fn resets_at(text: &str) -> Option<String> {
    if let Some((_, epoch)) = text.rsplit_once('|') {
        let epoch = epoch.trim();
        if !epoch.is_empty() && epoch.chars().all(|c| c.is_ascii_digit()) {
            return Some(epoch.to_string());
        }
    }
    let lower = text.to_ascii_lowercase();
    let at = lower.find("resets")?;
    let rest = text[at + "resets".len()..]
        .trim_start()
        .trim_start_matches("at ")
        .trim();
    let when: String = rest
        .chars()
        .take_while(|c| !matches!(c, '.' | ',' | '\n' | '·'))
        .collect();
    let when = when.trim();
    (!when.is_empty()).then(|| when.to_string())
}

/// What `~/.claude/sessions/<pid>.json` says.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFile {
    pub pid: u32,
    pub session_id: String,
    pub cwd: String,
    pub version: String,
    pub status: CliStatus,
    pub status_updated_ms: u64,
    /// `session:@window.%pane` when the CLI knows it runs in tmux (2.1.330 on).
    pub tmux: Option<String>,
    pub started_ms: u64,
}

impl SessionFile {
    pub fn parse(text: &str) -> Result<SessionFile, ParseError> {
        let o = object(text)?;
        let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
        let status = match o.get("status").and_then(Value::as_str) {
            Some("busy") => CliStatus::Busy,
            Some("idle") => CliStatus::Idle,
            Some("waiting") => CliStatus::Waiting,
            _ => CliStatus::Unknown,
        };
        Ok(SessionFile {
            pid: u32::try_from(n("pid")).unwrap_or(0),
            session_id: s("sessionId"),
            cwd: s("cwd"),
            version: s("version"),
            status,
            status_updated_ms: n("statusUpdatedAt").max(n("updatedAt")),
            tmux: o
                .get("tmux")
                .and_then(Value::as_str)
                .map(str::to_string)
                .filter(|t| !t.is_empty()),
            started_ms: n("startedAt"),
        })
    }

    /// The pane id (`%3`) the CLI names in its `tmux` field.
    pub fn tmux_pane(&self) -> Option<&str> {
        let t = self.tmux.as_deref()?;
        let at = t.rfind('%')?;
        Some(&t[at..])
    }
}

/// The project directory name Claude Code keys transcripts by: the cwd with every
/// character that is not ASCII alphanumeric replaced by `-` (`/Users/dev/src/proj` →
/// `-Users-dev-src-proj`; a `.` becomes `-` too, as in `/tmp/.x` → `-tmp--x`).
pub fn project_dir_name(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Where a session's transcript lives under a config dir (`~/.claude`).
pub fn transcript_path(config_dir: &Path, cwd: &str, session_id: &str) -> PathBuf {
    config_dir
        .join("projects")
        .join(project_dir_name(cwd))
        .join(format!("{session_id}.jsonl"))
}

/// Where the live session file of process `pid` lives.
pub fn session_file_path(config_dir: &Path, pid: u32) -> PathBuf {
    config_dir.join("sessions").join(format!("{pid}.json"))
}

/// The CLI's config dir for a process environment: `CLAUDE_CONFIG_DIR` when set, else
/// `$HOME/.claude`.
pub fn config_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = env("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn project_dirs_replace_every_non_alphanumeric() {
        assert_eq!(
            project_dir_name("/Users/dev/src/proj"),
            "-Users-dev-src-proj"
        );
        assert_eq!(
            project_dir_name("/tmp/.tmpAfunMZ/proj"),
            "-tmp--tmpAfunMZ-proj"
        );
        assert_eq!(project_dir_name("/a/my_app.rs"), "-a-my-app-rs");
    }

    #[test]
    fn odd_lines_are_errors_or_nothing() {
        assert!(matches!(parse_line("{"), Err(ParseError::NotJson(_))));
        assert_eq!(parse_line("[1]"), Err(ParseError::NotObject));
        assert_eq!(parse_line(r#"{"type":"user"}"#), Ok(vec![]));
        assert_eq!(
            parse_line(r#"{"type":"assistant","message":7}"#),
            Ok(vec![])
        );
        assert_eq!(parse_line(r#"{"type":"weird-new-kind","x":1}"#), Ok(vec![]));
    }

    #[test]
    fn interrupts_meta_and_command_echoes_are_not_prompts() {
        let facts =
            |l: &str| -> Vec<Fact> { parse_line(l).unwrap().into_iter().map(|s| s.fact).collect() };
        assert_eq!(
            facts(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}}"#
            ),
            [Fact::TurnEnded {
                how: TurnEnd::Interrupted
            }]
        );
        assert!(
            facts(r#"{"type":"user","isMeta":true,"message":{"content":"Caveat"}}"#).is_empty()
        );
        assert!(facts(
            r#"{"type":"user","message":{"content":"<command-name>/clear</command-name>"}}"#
        )
        .is_empty());
        for note in [
            "<bash-input>ls</bash-input>",
            "<bash-stdout>a.txt</bash-stdout><bash-stderr></bash-stderr>",
            "<local-command-stderr>oops</local-command-stderr>",
        ] {
            let line = serde_json::json!({"type": "user", "message": {"content": note}});
            assert!(facts(&line.to_string()).is_empty(), "{note}");
        }
        assert!(facts(
            r#"{"type":"user","isSidechain":true,"message":{"content":"sub-agent task"}}"#
        )
        .is_empty());
        assert_eq!(
            facts(r#"{"type":"system","subtype":"compact_boundary"}"#),
            [Fact::Compacted]
        );
    }

    #[test]
    fn limit_messages_state_their_reset() {
        assert_eq!(
            resets_at("Claude AI usage limit reached|1767225600").as_deref(),
            Some("1767225600")
        );
        assert_eq!(
            resets_at("5-hour limit reached · resets 3pm (Europe/Berlin)").as_deref(),
            Some("3pm (Europe/Berlin)")
        );
        assert_eq!(
            resets_at("You've hit your limit · resets at 15:00.").as_deref(),
            Some("15:00")
        );
        assert_eq!(
            resets_at("Number of requests has exceeded your rate limit"),
            None
        );
    }

    #[test]
    fn session_file_names_its_pane() {
        let f = SessionFile::parse(r#"{"pid":7,"sessionId":"s","cwd":"/p","status":"waiting","tmux":"work:@0.%12","statusUpdatedAt":5}"#).unwrap();
        assert_eq!(f.status, CliStatus::Waiting);
        assert_eq!(f.tmux_pane(), Some("%12"));
        assert_eq!(f.status_updated_ms, 5);
        assert!(SessionFile::parse("nope").is_err());
    }
}

//! Evidence beyond the screen: what an agent CLI writes about itself, read as typed facts.
//!
//! - [`claude`]: Claude Code's transcript lines (`~/.claude/projects/<dir>/<session>.jsonl`)
//!   and live session file (`~/.claude/sessions/<pid>.json`), and where to find them.
//! - [`codex`]: Codex's rollout lines (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`),
//!   their `session_meta` head, and which rollout belongs to a process.
//! - [`turn`]: [`TurnState`], the fold of facts into "is a turn in flight, what was asked,
//!   which tool call waits" — the question the engine asks before it trusts an idle screen.
//! - [`lines`]: [`LineBuffer`], complete lines out of a growing file's new bytes (partial
//!   last lines held back).
//! - [`wire`]: facts to and from their `karl.v1` messages.
//!
//! Everything here is pure: finding the files and following them is karl-agent's
//! (`agent/src/evidence/`), acting on the facts is the coordinator's engine.

pub mod claude;
pub mod codex;
pub mod lines;
pub mod turn;
pub mod wire;

pub use lines::LineBuffer;
pub use turn::{ToolCall, TurnState};

/// Where a piece of evidence came from. The screen is the fallback every pane has.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    #[default]
    Screen,
    Transcript,
    SessionFile,
    Hook,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Screen => "screen",
            Source::Transcript => "transcript",
            Source::SessionFile => "session-file",
            Source::Hook => "hook",
        }
    }
}

/// How a turn ended, as the CLI wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnEnd {
    /// The CLI closed the turn (Claude: `system`/`turn_duration`).
    Completed,
    /// The developer (or KARL) interrupted it.
    Interrupted,
    /// The API failed after the CLI's own retries; the turn is over.
    ApiError,
}

/// What the live session file says the CLI is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CliStatus {
    Busy,
    Idle,
    /// Waiting on the user: a permission prompt or a question.
    Waiting,
    Unknown,
}

/// One fact an agent CLI wrote about itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "fact", rename_all = "kebab-case")]
pub enum Fact {
    /// A prompt reached the CLI and opened a turn (typed or pasted by anyone).
    Prompt { text: String },
    /// Text the assistant wrote.
    AssistantText { text: String },
    /// The assistant called a tool; `input` is the tool's JSON input as written.
    ToolCall {
        id: String,
        name: String,
        input: String,
    },
    /// A tool's result came back.
    ToolResult {
        id: String,
        ok: bool,
        output: String,
    },
    /// The turn is over.
    TurnEnded { how: TurnEnd },
    /// The API failed; `limit` when it was a rate or usage limit, with the reset time
    /// when the message states one.
    ApiError {
        status: u16,
        message: String,
        limit: bool,
        resets: Option<String>,
    },
    /// The conversation was compacted (older turns summarised).
    Compacted,
    /// The session file's status changed.
    Status { status: CliStatus },
}

impl Fact {
    /// A one-line description for logs and `karl-ctl logs`.
    pub fn describe(&self) -> String {
        match self {
            Fact::Prompt { text } => format!("prompt received: {}", clip(text, 80)),
            Fact::AssistantText { text } => format!("assistant: {}", clip(text, 80)),
            Fact::ToolCall { name, input, .. } => format!("tool call {name} {}", clip(input, 80)),
            Fact::ToolResult { ok, output, .. } => format!(
                "tool result {}: {}",
                if *ok { "ok" } else { "error" },
                clip(output, 60)
            ),
            Fact::TurnEnded { how } => format!("turn ended ({how:?})").to_lowercase(),
            Fact::ApiError {
                status, message, ..
            } => format!("API error {status}: {}", clip(message, 80)),
            Fact::Compacted => "conversation compacted".into(),
            Fact::Status { status } => format!("status {status:?}").to_lowercase(),
        }
    }
}

/// A transcript or session-file line that could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON object")]
    NotObject,
}

fn object(line: &str) -> Result<serde_json::Map<String, serde_json::Value>, ParseError> {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(ParseError::NotObject),
        Err(e) => Err(ParseError::NotJson(e.to_string())),
    }
}

/// One line of a CLI's transcript: the CLI's id for it, when it writes one, and its facts.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub id: Option<String>,
    pub facts: Vec<Stamped>,
}

/// Which agent CLI wrote a transcript, hence how its lines read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cli {
    Claude,
    Codex,
}

impl Cli {
    pub fn label(self) -> &'static str {
        match self {
            Cli::Claude => "Claude Code",
            Cli::Codex => "Codex",
        }
    }

    /// One transcript line of this CLI, read.
    pub fn parse_entry(self, line: &str) -> Result<Entry, ParseError> {
        match self {
            Cli::Claude => claude::parse_entry(line),
            Cli::Codex => codex::parse_entry(line),
        }
    }
}

/// A fact with the time the CLI wrote it (Unix ms; 0 when the line had no timestamp).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stamped {
    pub fact: Fact,
    pub written_ms: u64,
}

/// The first `max` characters of `s` on one line, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut out: String = one_line.chars().take(max).collect();
        out.push('…');
        out
    }
}

/// Parses an RFC 3339 UTC timestamp as the CLIs write it (`2026-11-24T00:43:17.159Z`) to
/// Unix milliseconds. `None` for anything else (offsets other than `Z` included).
pub fn parse_utc_ms(s: &str) -> Option<u64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    if !(1970..=9999).contains(&year) {
        return None;
    }
    let month: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.splitn(3, ':');
    let hour: u64 = t.next()?.parse().ok()?;
    let minute: u64 = t.next()?.parse().ok()?;
    let second: u64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let millis: u64 = format!("{frac:0<3}")[..3].parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let days = u64::try_from(days).ok()?;
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

/// Formats Unix milliseconds the way the CLIs write timestamps
/// (`2026-11-24T00:43:17.159Z`); the inverse of [`parse_utc_ms`].
pub fn format_utc_ms(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    let rem = ms % 86_400_000;
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting_is_the_inverse_of_parsing() {
        assert_eq!(format_utc_ms(1_795_480_997_159), "2026-11-24T00:43:17.159Z");
        assert_eq!(format_utc_ms(0), "1970-01-01T00:00:00.000Z");
        for ms in [0, 951_782_400_000, 1_709_208_000_123, 4_102_444_799_999] {
            assert_eq!(parse_utc_ms(&format_utc_ms(ms)), Some(ms), "{ms}");
        }
    }

    #[test]
    fn utc_timestamps_parse_to_unix_ms() {
        assert_eq!(parse_utc_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            parse_utc_ms("2026-11-24T00:43:17.159Z"),
            Some(1_795_480_997_159)
        );
        assert_eq!(
            parse_utc_ms("2024-02-29T12:00:00Z"),
            Some(1_709_208_000_000)
        );
        assert_eq!(
            parse_utc_ms("2026-11-24T00:43:17.1Z"),
            Some(1_795_480_997_100)
        );
        for bad in [
            "",
            "2026-11-24",
            "2026-13-01T00:00:00Z",
            "2026-11-24T00:43:17+01:00",
            "x",
            "99999999999999999-01-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_utc_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn clip_keeps_one_line() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 3), "abc…");
    }
}

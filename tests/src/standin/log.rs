//! The stand-in's event log: one JSON object per line, appended to the `--log` file,
//! so tests can check what arrived in the pane (each prompt exactly once, byte for
//! byte; each permission decision) without reading the screen.
//!
//! Every line carries `"event"` (the kind) and `"unix_ms"`; a prompt line is
//! `{"event":"prompt","n":1,"prompt":"…","busy":false,"unix_ms":…}`, a permission
//! decision `{"event":"permission","permission":"approved","choice":1,…}`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Something the stand-in did or received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LogEvent {
    /// The program is up and drew its first screen.
    Started { pid: u32, width: u16, height: u16 },
    /// A prompt was submitted (Enter with a non-blank draft). `busy`: it arrived
    /// while a turn was still running (it is queued, as the real CLI does).
    Prompt { n: u64, prompt: String, busy: bool },
    /// An Enter was ignored on purpose (`--drop-first-enter`).
    DroppedEnter,
    /// A turn finished; `outcome` is `answer`, `done`, `error`, `permission_denied`,
    /// `limit` or `exit`.
    TurnEnd { n: u64, outcome: String },
    /// A running turn was interrupted (Escape or Ctrl-C).
    Interrupted { n: u64 },
    /// A permission menu was answered: `permission` is `approved` or `denied`;
    /// `choice` the option (1–3, 0 for Escape); `target` the command or path.
    Permission {
        permission: String,
        choice: u8,
        tool: String,
        target: String,
    },
    /// The folder-trust dialog was answered: `choice` is `accepted` or `declined`.
    Dialog { dialog: String, choice: String },
    /// The usage-limit menu was answered (1, 2, or 0 for Escape).
    LimitMenu { choice: u8 },
    /// Input that did nothing because a menu or dialog was showing; `mode` names it.
    /// A prompt typed into a dialog shows up here and never as `prompt`.
    Stray { mode: String, text: String },
    /// The program is exiting; `reason` is `script`, `command`, `keys`, `declined`,
    /// `eof` or `signal`.
    Exit { code: i32, reason: String },
}

/// One log line: the event and when it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    #[serde(flatten)]
    pub event: LogEvent,
    pub unix_ms: u64,
}

/// Appends log lines to a file, one `write` per line so a reader never sees half a
/// line from a finished write. Without a file, events are dropped.
#[derive(Debug)]
pub struct LogWriter {
    file: Option<File>,
}

impl LogWriter {
    pub fn open(path: Option<&Path>) -> std::io::Result<LogWriter> {
        let file = match path {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        Ok(LogWriter { file })
    }

    pub fn write(&mut self, event: LogEvent) -> std::io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let line = LogLine {
            event,
            unix_ms: karl_common::unix_ms(),
        };
        let mut text = serde_json::to_string(&line).map_err(std::io::Error::other)?;
        text.push('\n');
        file.write_all(text.as_bytes())
    }
}

/// Reads a log file; a missing file is an empty log, an unreadable line is skipped
/// (the last line may be in the middle of being written).
pub fn read_log(path: &Path) -> Vec<LogLine> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The prompts in a log, in order of arrival.
pub fn prompts(path: &Path) -> Vec<String> {
    read_log(path)
        .into_iter()
        .filter_map(|l| match l.event {
            LogEvent::Prompt { prompt, .. } => Some(prompt),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn prompt_line_has_the_documented_shape() {
        let line = LogLine {
            event: LogEvent::Prompt {
                n: 1,
                prompt: "a\n\"b\"\t$(c)".into(),
                busy: false,
            },
            unix_ms: 5,
        };
        let text = serde_json::to_string(&line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["event"], "prompt");
        assert_eq!(v["n"], 1);
        assert_eq!(v["prompt"], "a\n\"b\"\t$(c)");
        assert_eq!(v["unix_ms"], 5);
        let back: LogLine = serde_json::from_str(&text).unwrap();
        assert_eq!(back, line);
    }

    #[test]
    fn writer_appends_and_reader_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let mut w = LogWriter::open(Some(&path)).unwrap();
        w.write(LogEvent::Prompt {
            n: 1,
            prompt: "x".into(),
            busy: false,
        })
        .unwrap();
        w.write(LogEvent::Permission {
            permission: "approved".into(),
            choice: 1,
            tool: "bash".into(),
            target: "ls".into(),
        })
        .unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"event\":\"pro")
            .unwrap();
        assert_eq!(read_log(&path).len(), 2);
        assert_eq!(prompts(&path), vec!["x".to_string()]);
        let v: serde_json::Value = serde_json::from_str(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .nth(1)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(v["permission"], "approved");
    }
}

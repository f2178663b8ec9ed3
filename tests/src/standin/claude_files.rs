//! The files Claude Code writes about itself, written by the stand-in when
//! `CLAUDE_CONFIG_DIR` is set, so karl-agent's transcript follower has something to follow
//! in tests, the demo and the benchmarks without the real CLI (the compatibility tier
//! covers the real one).
//!
//! As 2.1.330 writes them (see `common/tests/fixtures/evidence/`): a live session file
//! `$CLAUDE_CONFIG_DIR/sessions/<pid>.json` (`pid`, `sessionId`, `cwd`, `version`,
//! `status` busy/idle, `statusUpdatedAt`, `tmux` when `TMUX_PANE` is set), removed on
//! exit; and a transcript `$CLAUDE_CONFIG_DIR/projects/<cwd as dir>/<session>.jsonl`
//! with a `user` line per prompt, an `assistant` line and a `system`/`turn_duration` line
//! per finished turn, an API-error line for an `error` turn, and the interrupt marker.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use karl_common::evidence::claude::{project_dir_name, session_file_path, transcript_path};
use karl_common::evidence::format_utc_ms;
use karl_common::unix_ms;
use serde_json::json;

use super::log::LogEvent;

pub struct ClaudeFiles {
    session_path: PathBuf,
    transcript: File,
    session: serde_json::Value,
    prompt_ms: u64,
}

impl ClaudeFiles {
    /// Starts writing when `CLAUDE_CONFIG_DIR` is set; `None` otherwise or when the
    /// files cannot be created (the stand-in then runs without them).
    pub fn from_env(session_id: &str) -> Option<ClaudeFiles> {
        let dir = PathBuf::from(std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty())?);
        let cwd = std::env::current_dir().ok()?.display().to_string();
        let pid = std::process::id();
        let transcript_file = transcript_path(&dir, &cwd, session_id);
        std::fs::create_dir_all(dir.join("projects").join(project_dir_name(&cwd))).ok()?;
        std::fs::create_dir_all(dir.join("sessions")).ok()?;
        let transcript = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&transcript_file)
            .ok()?;
        let mut session = json!({
            "pid": pid,
            "sessionId": session_id,
            "cwd": cwd,
            "startedAt": unix_ms(),
            "version": "standin",
            "kind": "interactive",
            "status": "idle",
            "statusUpdatedAt": unix_ms(),
        });
        if let Ok(pane) = std::env::var("TMUX_PANE") {
            session["tmux"] = format!("standin:@0.{pane}").into();
        }
        let files = ClaudeFiles {
            session_path: session_file_path(&dir, pid),
            transcript,
            session,
            prompt_ms: 0,
        };
        files.write_session();
        Some(files)
    }

    fn write_session(&self) {
        // Written whole and renamed into place, so a reader never sees half a file.
        let tmp = self.session_path.with_extension("json.tmp");
        if std::fs::write(&tmp, self.session.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, &self.session_path);
        }
    }

    fn status(&mut self, status: &str) {
        self.session["status"] = status.into();
        self.session["statusUpdatedAt"] = unix_ms().into();
        self.write_session();
    }

    fn line(&mut self, mut v: serde_json::Value) {
        v["timestamp"] = format_utc_ms(unix_ms()).into();
        v["sessionId"] = self.session["sessionId"].clone();
        v["cwd"] = self.session["cwd"].clone();
        // One write per line: a follower never sees half a line from a finished write.
        let _ = self.transcript.write_all(format!("{v}\n").as_bytes());
    }

    /// Writes what one stand-in event means in the CLI's own files.
    pub fn on_event(&mut self, event: &LogEvent) {
        match event {
            LogEvent::Prompt { prompt, .. } => {
                self.prompt_ms = unix_ms();
                self.line(json!({
                    "type": "user",
                    "message": {"role": "user", "content": prompt},
                    "promptSource": "typed",
                }));
                self.status("busy");
            }
            // The interrupt marker closed it already.
            LogEvent::TurnEnd { outcome, .. } if outcome == "interrupted" => self.status("idle"),
            LogEvent::TurnEnd { n, outcome } => {
                if outcome == "error" {
                    self.line(json!({
                        "type": "assistant",
                        "isApiErrorMessage": true,
                        "apiErrorStatus": 500,
                        "error": "server_error",
                        "message": {"role": "assistant", "stop_reason": "stop_sequence",
                            "content": [{"type": "text", "text": "API Error: 500 Internal server error"}]},
                    }));
                } else {
                    self.line(json!({
                        "type": "assistant",
                        "message": {"role": "assistant", "stop_reason": "end_turn",
                            "content": [{"type": "text", "text": format!("Turn {n}: {outcome}.")}]},
                    }));
                    self.line(json!({
                        "type": "system",
                        "subtype": "turn_duration",
                        "durationMs": unix_ms().saturating_sub(self.prompt_ms),
                    }));
                }
                self.status("idle");
            }
            LogEvent::Interrupted { .. } => {
                self.line(json!({
                    "type": "user",
                    "message": {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]},
                }));
            }
            _ => {}
        }
    }
}

impl Drop for ClaudeFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.session_path);
    }
}

//! Recorded session timelines: a developer's session with a coding agent, turn by turn —
//! the project and goal it was for, and the pane as it looked after every turn.
//!
//! A [`SessionScript`] is what a session consisted of (the developer's prompts and the
//! agent's answers, written as data); [`super::record`] plays it through the stand-in
//! agent in a real tmux pane and keeps each screen as a [`Capture`] of a [`Timeline`].
//! This module is the file formats and their checks; nothing here touches tmux.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Who, where and what a session was for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub id: String,
    pub project: String,
    /// As the developer would write it (`~/Desktop/MotionMix`).
    pub path: String,
    pub machine: String,
    /// The tmux target it ran in (`work:1.2`).
    pub pane: String,
    pub goal: String,
    /// The session that ran at the same time on the same machine, if any.
    #[serde(default)]
    pub concurrent_with: Option<String>,
    /// Names and paths that belong to this project only: finding one in another
    /// session's prompt is cross-contamination.
    pub vocabulary: Vec<String>,
}

/// One recorded turn as written: what the developer typed, what the agent answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    pub prompt: String,
    pub answer: Vec<String>,
}

/// A session as data, before it is played.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionScript {
    #[serde(flatten)]
    pub meta: SessionMeta,
    pub turns: Vec<ScriptTurn>,
}

/// The pane after a turn, as KARL's agent would have captured it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    /// Turns the developer had typed when this was taken (0: before the first).
    pub after_turn: u32,
    /// What the developer typed next (`None` after the last turn).
    #[serde(default)]
    pub next_prompt: Option<String>,
    pub text: String,
    pub current_command: String,
    #[serde(default)]
    pub title: String,
    pub cursor_x: u32,
    pub cursor_y: u32,
    pub width: u32,
    pub height: u32,
}

/// How a timeline was recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// `tmux -V` of the server the pane ran in.
    pub tmux: String,
    /// The agent whose screens these are.
    pub agent: String,
}

/// A played session: its metadata and every screen, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    #[serde(flatten)]
    pub meta: SessionMeta,
    pub recorded: Recorded,
    pub captures: Vec<Capture>,
}

/// Why a script or timeline cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid file of its kind: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {why}")]
    Invalid { path: PathBuf, why: String },
}

impl SessionMeta {
    /// What a usable session must have; `what` names the file for the message.
    pub fn check(&self) -> Result<(), String> {
        for (field, value) in [
            ("id", &self.id),
            ("project", &self.project),
            ("path", &self.path),
            ("machine", &self.machine),
            ("goal", &self.goal),
        ] {
            if value.trim().is_empty() {
                return Err(format!("`{field}` is empty"));
            }
        }
        if self.vocabulary.iter().all(|v| v.trim().is_empty()) {
            return Err("`vocabulary` lists no names of the project".into());
        }
        Ok(())
    }
}

impl SessionScript {
    pub fn check(&self) -> Result<(), String> {
        self.meta.check()?;
        if self.turns.is_empty() {
            return Err("the script has no turns".into());
        }
        if let Some(i) = self.turns.iter().position(|t| t.prompt.trim().is_empty()) {
            return Err(format!("turn {} has an empty prompt", i + 1));
        }
        Ok(())
    }
}

impl Timeline {
    pub fn check(&self) -> Result<(), String> {
        self.meta.check()?;
        if self.captures.is_empty() {
            return Err("the timeline has no captures".into());
        }
        Ok(())
    }
}

/// Every `*.json` file in `dir` as `T`, checked, in file-name order.
pub fn load_dir<T: DeserializeOwned>(
    dir: &Path,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<Vec<T>, TimelineError> {
    let read = |path: &Path| -> Result<T, TimelineError> {
        let text = std::fs::read_to_string(path).map_err(|source| TimelineError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let value: T = serde_json::from_str(&text).map_err(|source| TimelineError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        check(&value).map_err(|why| TimelineError::Invalid {
            path: path.to_path_buf(),
            why,
        })?;
        Ok(value)
    };
    let entries = std::fs::read_dir(dir).map_err(|source| TimelineError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|p| read(p)).collect()
}

/// The recorded timelines shipped with the tests.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/twin-timelines")
}

/// The session scripts they were recorded from.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/twin-sessions")
}

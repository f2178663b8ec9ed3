//! Recording a timeline: play a [`SessionScript`] through `karl-standin` in a real tmux
//! pane — type each prompt the way KARL's agent does, wait for the turn to end, capture
//! the settled screen.
//!
//! The pane runs in a scratch home whose layout matches the session's `path`, so the
//! banner shows the project's directory as the developer's screen would.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::timeline::{Capture, Recorded, SessionScript, Timeline};
use crate::standin::log::LogEvent;
use crate::standin::tmux::{wait_for, StandinPane, StandinSpec};
use crate::tmux_server::TmuxServer;

/// How long the stand-in "works" on each turn: enough for a spinner frame or two.
const WORK_MS: u64 = 300;

/// Why a recording failed.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("tmux: {0}")]
    Tmux(#[from] std::io::Error),
    #[error("session {id}: {why}")]
    Stuck { id: String, why: String },
}

/// Plays `script` in a new pane of `server` with the stand-in at `standin`.
pub fn record(
    script: &SessionScript,
    standin: &Path,
    server: &TmuxServer,
) -> Result<Timeline, RecordError> {
    let stuck = |why: String| RecordError::Stuck {
        id: script.meta.id.clone(),
        why,
    };
    let home = tempfile::tempdir()?;
    let relative = script
        .meta
        .path
        .trim_start_matches("~/")
        .trim_start_matches('/');
    let cwd = home.path().join(relative);
    std::fs::create_dir_all(&cwd)?;
    let turns: Vec<serde_json::Value> = script
        .turns
        .iter()
        .map(|t| json!({"work_ms": WORK_MS, "reply": {"answer": t.answer}}))
        .collect();
    let pane = StandinSpec::new(standin)
        .script(&json!({ "turns": turns }).to_string())
        .cwd(&cwd)
        .env("HOME", &home.path().display().to_string())
        .size(120, 40)
        .start(server)?;
    wait_for(
        "the stand-in to start",
        Duration::from_secs(20),
        || {
            pane.log()
                .iter()
                .any(|l| matches!(l.event, LogEvent::Started { .. }))
                .then_some(())
        },
        || pane.screen().unwrap_or_default(),
    )
    .map_err(stuck)?;
    let mut captures = vec![settled(&pane, 0, script.turns.first().map(|t| &t.prompt))?];
    for (i, turn) in script.turns.iter().enumerate() {
        let n = i as u64 + 1;
        pane.submit(&turn.prompt)?;
        wait_for(
            &format!("turn {n} to end"),
            Duration::from_secs(30),
            || {
                pane.log()
                    .iter()
                    .any(|l| matches!(&l.event, LogEvent::TurnEnd { n: m, .. } if *m == n))
                    .then_some(())
            },
            || pane.screen().unwrap_or_default(),
        )
        .map_err(stuck)?;
        let next = script.turns.get(i + 1).map(|t| &t.prompt);
        captures.push(settled(&pane, n as u32, next)?);
    }
    let tmux = server.run(&["-V"]).unwrap_or_default().trim().to_string();
    Ok(Timeline {
        meta: script.meta.clone(),
        recorded: Recorded {
            tmux,
            agent: "karl-standin (Claude Code 2.1.197 screens)".into(),
        },
        captures,
    })
}

/// The screen once two captures 150 ms apart agree.
fn settled(
    pane: &StandinPane<'_>,
    after_turn: u32,
    next_prompt: Option<&String>,
) -> Result<Capture, RecordError> {
    let mut last = pane.screen()?;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(150));
        let now = pane.screen()?;
        if now == last {
            break;
        }
        last = now;
    }
    let s = pane.snapshot()?;
    Ok(Capture {
        after_turn,
        next_prompt: next_prompt.cloned(),
        text: s.text,
        current_command: s.current_command,
        title: s.title,
        cursor_x: s.cursor_x,
        cursor_y: s.cursor_y,
        width: s.width,
        height: s.height,
    })
}

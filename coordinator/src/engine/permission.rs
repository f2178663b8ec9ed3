//! Answering a permission prompt by the label of the option meant: move the menu's
//! selection there, check on fresh captures that it landed (for up to two seconds), then
//! press Enter. A menu KARL cannot read, or a selection that does not land, is escalated
//! — never answered with a guessed key. `impl Session` over the machine's state; no IO.

use std::time::Duration;

use karl_common::detect::PaneState;

use super::decide::{permission_answer, PermissionAnswer};
use super::machine::{Effect, Event, Flow, Session};
use crate::records::{AuditKind, Status};

/// How long a permission menu's selection may take to show where KARL moved it.
pub const SELECTION_TIMEOUT_MS: u64 = 2_000;

/// How often the selection is looked at while it has not landed.
const SELECTION_POLL: Duration = Duration::from_millis(100);

/// An answer under way.
#[derive(Debug, Clone)]
pub struct Selecting {
    answer: PermissionAnswer,
    /// When the answer began: a hook answer after it means the CLI closes the prompt itself.
    started_ms: u64,
    approve: bool,
    by: String,
    what: String,
    stage: Stage,
}

#[derive(Debug, Clone, Copy)]
enum Stage {
    /// The Up/Down presses are being sent.
    Moving,
    /// Captures are being read until the selection shows on the answer.
    Checking { deadline_ms: u64 },
    /// Enter is being pressed.
    Confirming,
}

impl Session {
    pub(super) fn answer_permission(&mut self, approve: bool, by: &str) {
        let req = self.rec.pending_permission.clone().unwrap_or_default();
        let what = format!("{} {}", req.tool, req.action).trim().to_string();
        match permission_answer(&req, approve) {
            Err(why) => self.answered(approve, by, &what, Err(why)),
            Ok(answer) => {
                let mut s = Selecting {
                    started_ms: self.now,
                    approve,
                    by: by.to_string(),
                    what,
                    stage: Stage::Moving,
                    answer,
                };
                if s.answer.moves.is_empty() {
                    s.stage = Stage::Checking {
                        deadline_ms: self.now + SELECTION_TIMEOUT_MS,
                    };
                    self.call(Effect::Capture, Flow::Selecting(s));
                } else {
                    let moves = s.answer.moves.clone();
                    self.call(Effect::SendKeys(moves), Flow::Selecting(s));
                }
            }
        }
    }

    pub(super) fn selecting(&mut self, mut s: Selecting, event: Event) {
        let result = match (s.stage, event) {
            (Stage::Moving, Event::KeysSent(Err(e))) => {
                Err(format!("moving the selection failed: {e}"))
            }
            (Stage::Moving, Event::KeysSent(Ok(()))) => {
                s.stage = Stage::Checking {
                    deadline_ms: self.now + SELECTION_TIMEOUT_MS,
                };
                return self.call(Effect::Capture, Flow::Selecting(s));
            }
            (Stage::Checking { .. }, Event::Woke) => {
                return self.call(Effect::Capture, Flow::Selecting(s));
            }
            (Stage::Checking { .. }, Event::Captured(Err(e))) => {
                Err(format!("the pane could not be read: {e}"))
            }
            (Stage::Checking { .. }, Event::Captured(Ok(_)))
                if self.hook_answered_ms >= s.started_ms.max(1) =>
            {
                // The hook answered while the screen path was moving: the CLI closes its
                // prompt itself, and an Enter now would land on whatever comes next.
                tracing::info!(target: "coord.engine", session = %self.rec.id, what = %s.what, "the hook answered the permission; the screen answer is dropped");
                self.rec.pending_permission = None;
                self.save(false);
                return;
            }
            (Stage::Checking { deadline_ms }, Event::Captured(Ok(snap))) => {
                let d = self.deps.detect(&snap);
                let seen = match (d.state, d.permission) {
                    (PaneState::Permission, Some(p)) => {
                        p.selected.and_then(|i| p.options.get(i).cloned())
                    }
                    (state, _) => {
                        let why = format!("the prompt went away (the pane is {state})");
                        return self.answered(s.approve, &s.by, &s.what, Err(why));
                    }
                };
                if seen.as_deref() == Some(s.answer.label.as_str()) {
                    s.stage = Stage::Confirming;
                    return self.call(Effect::SendKeys(vec!["Enter".into()]), Flow::Selecting(s));
                }
                if self.now >= deadline_ms {
                    Err(format!(
                        "the selection did not reach {:?} (it shows {:?})",
                        s.answer.label,
                        seen.unwrap_or_default()
                    ))
                } else {
                    return self.call(Effect::Sleep(SELECTION_POLL), Flow::Selecting(s));
                }
            }
            (Stage::Confirming, Event::KeysSent(r)) => {
                r.map_err(|e| format!("confirming failed: {e}"))
            }
            (stage, other) => {
                tracing::warn!(target: "coord.engine", session = %self.rec.id, ?stage, ?other, "unexpected event while answering a permission; ignored");
                self.flow = Flow::Selecting(s);
                return;
            }
        };
        let (approve, by, what) = (s.approve, s.by.clone(), s.what.clone());
        self.answered(approve, &by, &what, result.map(|()| s.answer));
    }

    fn answered(
        &mut self,
        approve: bool,
        by: &str,
        what: &str,
        result: Result<PermissionAnswer, String>,
    ) {
        let verb = if approve { "approve" } else { "deny" };
        let detail = match &result {
            Ok(a) => format!(
                "{} by {by}: {what} (chose {:?}{})",
                if approve { "approved" } else { "denied" },
                a.label,
                if a.moves.is_empty() {
                    String::new()
                } else {
                    format!(" after {}×{}", a.moves.len(), a.moves[0])
                }
            ),
            Err(why) => format!("could not {verb} for {by}: {what}: {why}"),
        };
        self.audit(AuditKind::Permission, what, detail.clone());
        if result.is_err() {
            self.set_status(
                Status::Escalated,
                format!("{detail}; answer it in the pane"),
                true,
            );
            return;
        }
        self.rec.pending_permission = None;
        if self.rec.status == Status::Escalated {
            self.rec.status = Status::Running;
            self.rec.reason = detail.clone();
        }
        self.save(false);
        self.publish(None, &detail);
    }
}

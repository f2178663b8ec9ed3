//! Done means verified: a session with `--verify CMD` ends `done` only after karl-agent
//! ran the command in the pane's directory (outside the pane) and it exited 0. A failing
//! run becomes the next turn's work — a task "make `CMD` pass" with the failure's last
//! line, and the output's tail in the digest — up to [`MAX_VERIFY_FAILURES`] times, then a
//! human is asked; the same failure again after a fix turn is a loop and asks at once.
//! `impl Session`; no IO.

use karl_common::context::{Task, TaskStatus};
use karl_common::evidence::clip;
use karl_common::pb;

use super::machine::{Effect, Flow, Session};
use crate::records::{AuditKind, Status};

/// Failed verify runs before the session escalates.
pub const MAX_VERIFY_FAILURES: u32 = 3;

impl Session {
    /// The session would be done: run the verify command first, if it has one.
    pub(super) fn done_or_verify(&mut self, reason: String) {
        if self.rec.verify.trim().is_empty() || self.rec.dry_run {
            return self.finish(Status::Done, reason);
        }
        tracing::info!(target: "coord.engine", session = %self.rec.id, command = %self.rec.verify, "running the verify command before the session is done");
        self.call(
            Effect::RunCheck(self.rec.verify.clone()),
            Flow::Verifying(reason),
        );
    }

    pub(super) fn verified(&mut self, reason: String, r: Result<pb::CheckResult, String>) {
        let cmd = self.rec.verify.clone();
        self.rec.verify_runs += 1;
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                self.audit(AuditKind::Verify, &cmd, format!("could not run: {e}"));
                return self.set_status(
                    Status::Escalated,
                    format!("the verify command `{cmd}` could not run: {e}"),
                    false,
                );
            }
        };
        let last = r
            .output
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        let how = if r.timed_out {
            format!("timed out after {} s", r.elapsed_ms / 1000)
        } else {
            format!("exited {}", r.exit_code)
        };
        self.audit(
            AuditKind::Verify,
            &cmd,
            format!(
                "{how} in {} ms in {}: {}",
                r.elapsed_ms,
                r.cwd,
                clip(&last, 200)
            ),
        );
        if r.exit_code == 0 && !r.timed_out {
            self.rec.verify_failures = 0;
            self.rec.verify_last.clear();
            return self.finish(
                Status::Done,
                format!("{reason}; verified: `{cmd}` exited 0"),
            );
        }
        self.rec.verify_failures += 1;
        let repeated = self.rec.verify_failures > 1 && self.rec.verify_last == last;
        self.rec.verify_last = last.clone();
        let n = self.rec.turns;
        self.rec
            .digest
            .add_milestone(n, format!("verify `{cmd}` {how}: {}", clip(&last, 80)));
        if repeated {
            return self.set_status(
                Status::Escalated,
                format!(
                    "`{cmd}` failed the same way after the fix turn: {}",
                    clip(&last, 160)
                ),
                false,
            );
        }
        if self.rec.verify_failures >= MAX_VERIFY_FAILURES || self.rec.turns >= self.rec.max_turns {
            return self.set_status(
                Status::Escalated,
                format!(
                    "the agent's work does not pass `{cmd}` ({how} {} time(s); last: {})",
                    self.rec.verify_failures,
                    clip(&last, 120)
                ),
                false,
            );
        }
        let title = format!(
            "Make `{cmd}` pass: it {how}{}",
            if last.is_empty() {
                String::new()
            } else {
                format!(" with: {}", clip(&last, 160))
            }
        );
        // The fix is the task now: the next turn's plan step and the model's focus.
        let mut task = Task::new(title);
        task.status = TaskStatus::Active;
        task.started_turn = Some(n);
        self.rec.tasks.tasks.push(task);
        self.set_status(
            Status::Running,
            format!("`{cmd}` {how}; the next turn fixes it"),
            false,
        );
        // A fresh look at the pane fires the next turn.
        self.call(Effect::Capture, Flow::Capturing);
    }
}

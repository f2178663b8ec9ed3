//! A settled snapshot, end to end: note what it shows on the record, judge the last
//! turn, ask [`super::decide`] what to do, and act on the decision. `impl Session` over
//! the machine's state; no IO.

use std::sync::Arc;

use karl_common::detect::{AgentKind, Detection, PaneState};
use karl_common::gate::{GateContext, Rule};
use karl_common::pb;

use super::decide::{
    decide, note_driven_agent, overrule, Decision, SnapshotFacts, HOOK_ANSWER_GRACE_MS,
    HOOK_WAIT_MS,
};
use super::machine::{Effect, Flow, Session};
use crate::records::{AuditKind, Status};

impl Session {
    /// A settled snapshot: note what it shows, judge the last turn, decide, act.
    pub(super) fn on_snapshot(&mut self, snap: Arc<pb::PaneSnapshot>) {
        // Taken before our last typing finished, however late it came: the pane from
        // before, which would read as still waiting for the prompt just typed.
        if snap.seq != 0 && snap.seq <= self.rec.typed_at_seq {
            tracing::debug!(target: "coord.engine", session = %self.rec.id, seq = snap.seq, typed_at = self.rec.typed_at_seq, "ignoring a snapshot from before our typing");
            return;
        }
        let now = self.now;
        let d = self.note_snapshot(&snap);
        if self.launch_step(&d) {
            return;
        }
        self.weigh(&d);
        // The gate judges what the prompt shows and, when the transcript has it, the
        // pending tool call's exact input: both must be safe (the screen may wrap or cut
        // the command; the transcript's last call may not be the one asked about).
        let safe = |a: &str| {
            let v = self.deps.gate.check(a, &GateContext::default());
            !v.has(Rule::Destructive) && v.doubt.is_none()
        };
        let permission_safe = d.permission.as_ref().is_some_and(|p| {
            let exact = self.pending_tool_action();
            if let Some(x) = &exact {
                if !x.contains(p.action.trim()) {
                    tracing::info!(target: "coord.engine", session = %self.rec.id, screen = %p.action, transcript = %x, "the permission prompt and the transcript name different actions; both are judged");
                }
            }
            safe(&p.action) && exact.as_deref().is_none_or(safe)
        });
        let facts = SnapshotFacts {
            detection: &d,
            stable_hash: if self.rec.dry_run {
                ""
            } else {
                &snap.stable_hash
            },
            now_ms: now,
            permission_safe,
            hook_answered_ms: self.hook_answered_ms,
            hook_due_ms: self.hook_due_ms(&d),
            cli: self.cli.facts(),
        };
        let mut decision = decide(&self.rec, &facts, &self.deps.cfg.limits);
        // Dry run: the pane never changes, so pace recorded turns by settle_ms instead.
        if self.rec.dry_run && decision == Decision::Fire && self.next_dry_fire_ms > now {
            decision = Decision::Wait("dry run pacing");
        }
        self.act(decision, snap, d);
    }

    /// Until when a Claude Code permission prompt on screen is left to KARL's hook: set
    /// while the hook is expected and has not reached KARL for this prompt (a hook may
    /// come a little before the prompt is drawn).
    fn hook_due_ms(&self, d: &Detection) -> u64 {
        let spoke = self.hook_seen_ms != 0
            && self.hook_seen_ms + HOOK_ANSWER_GRACE_MS > self.permission_since_ms;
        let waiting = self.hooks_expected
            && d.agent == AgentKind::Claude
            && self.permission_since_ms != 0
            && !spoke;
        if waiting {
            self.permission_since_ms + HOOK_WAIT_MS
        } else {
            0
        }
    }

    /// Records what the snapshot shows on the session; returns its detection.
    fn note_snapshot(&mut self, snap: &Arc<pb::PaneSnapshot>) -> Detection {
        let now = self.now;
        let mut d = self.deps.detect(snap);
        let processes = snap
            .pane
            .as_ref()
            .map(|p| p.processes.as_slice())
            .unwrap_or_default();
        let rec = &mut self.rec;
        note_driven_agent(rec, &d, processes);
        overrule(rec, &mut d, processes);
        tracing::debug!(target: "coord.engine", session = %rec.id, state = %d.state, rule = d.rule.as_deref().unwrap_or("-"), hash = %snap.stable_hash, reason = snap.reason, seq = snap.seq, "snapshot");
        tracing::trace!(target: "coord.engine.screen", session = %rec.id, "screen:\n{}", snap.text);
        rec.agent_kind = d.agent;
        if snap.stable_hash != rec.last_hash {
            rec.last_hash = snap.stable_hash.clone();
            rec.last_change_ms = now;
        }
        rec.last_state = d.state;
        rec.last_error = d.error;
        rec.unknown_since_ms = since(d.state == PaneState::Unknown, rec.unknown_since_ms, now);
        // The pane turned busy, or changed into something other than our prompt still
        // sitting in the box (a capture taken mid-injection shows exactly that).
        if d.state == PaneState::Working
            || (rec.awaiting_busy
                && snap.stable_hash != rec.inject_hash
                && d.state != PaneState::Draft)
        {
            rec.awaiting_busy = false;
        }
        rec.pending_permission =
            (d.state == PaneState::Permission).then(|| d.permission.clone().unwrap_or_default());
        self.permission_since_ms = since(
            d.state == PaneState::Permission,
            self.permission_since_ms,
            now,
        );
        self.last_snapshot = Some(snap.clone());
        self.judge_outcome(snap, &d);
        d
    }

    fn act(&mut self, decision: Decision, snap: Arc<pb::PaneSnapshot>, d: Detection) {
        let now = self.now;
        match decision {
            Decision::Wait(why) => {
                if self.waiting_for_agent && d.state != PaneState::Limited {
                    self.waiting_for_agent = false;
                    self.set_status(Status::Running, format!("pane is {}", d.state), false);
                }
                tracing::debug!(target: "coord.engine", session = %self.rec.id, state = %d.state, why, "waiting");
                self.save(false);
            }
            Decision::Fire => self.fire(snap, d),
            Decision::Throttle { until_ms, why } => {
                self.recheck_at_ms = until_ms;
                if self.rec.throttled_until_ms != until_ms {
                    self.rec.throttled_until_ms = until_ms;
                    let secs = until_ms.saturating_sub(now).div_ceil(1000);
                    self.set_status(
                        Status::Running,
                        format!("{why} (next turn in {secs} s)"),
                        false,
                    );
                } else {
                    self.save(false);
                }
            }
            Decision::Recheck(why) => {
                tracing::debug!(target: "coord.engine", session = %self.rec.id, why, "rechecking shortly");
                self.recheck_at_ms = now + 750;
                self.save(false);
            }
            Decision::ResendEnter => {
                self.rec.enter_resent = true;
                self.call(Effect::SendKeys(vec!["Enter".into()]), Flow::Entering);
            }
            Decision::Permission { approve, why } => {
                self.answer_permission(approve, &format!("policy ({why})"))
            }
            Decision::Escalate(reason) => {
                let auto = matches!(
                    d.state,
                    PaneState::Dialog | PaneState::Permission | PaneState::Draft
                );
                self.set_status(Status::Escalated, reason, auto);
            }
            Decision::Limited(reset) => {
                self.recheck_at_ms = now + 60_000;
                self.set_status(
                    Status::Waiting,
                    format!("usage limit reached; resets {reset}"),
                    true,
                );
            }
            Decision::Exited if !self.rec.launch.is_empty() => {
                let cmd = self.rec.launch.clone();
                self.call(Effect::Launch(cmd.clone()), Flow::Restarting(cmd))
            }
            Decision::Exited => match self.deps.cfg.restart_command.clone() {
                Some(cmd) => self.call(
                    Effect::Type {
                        text: cmd.clone(),
                        force: true,
                    },
                    Flow::Restarting(cmd),
                ),
                None => self.set_status(
                    Status::Escalated,
                    "the agent exited; a shell prompt shows".into(),
                    true,
                ),
            },
            Decision::Done(reason) => self.done_or_verify(reason),
        }
    }

    pub(super) fn entered(&mut self, r: Result<(), String>) {
        let failed = r
            .err()
            .map(|e| format!(" — failed: {e}"))
            .unwrap_or_default();
        let why = if self.cli.attached {
            "the agent's transcript does not show our prompt"
        } else {
            "our prompt sat unsent"
        };
        self.audit(
            AuditKind::Enter,
            "",
            format!("{why}; pressed Enter once{failed}"),
        );
        self.save(false);
    }

    pub(super) fn restarted(&mut self, cmd: &str, r: Result<pb::InjectResult, String>) {
        if let Ok(i) = &r {
            self.rec.typed_at_seq = self.rec.typed_at_seq.max(i.snapshot_seq);
        }
        let detail = match &r {
            Ok(i) => super::inject_label(i),
            Err(e) => format!("failed: {e}"),
        };
        self.audit(AuditKind::Restart, cmd, detail.clone());
        self.set_status(
            Status::Running,
            format!("the agent exited; restarted it ({detail})"),
            false,
        );
    }
}

/// Since when a condition has held: `prev` while it goes on, `now` when it begins, 0 when
/// it does not hold.
fn since(holds: bool, prev: u64, now: u64) -> u64 {
    match (holds, prev) {
        (false, _) => 0,
        (true, 0) => now,
        (true, t) => t,
    }
}

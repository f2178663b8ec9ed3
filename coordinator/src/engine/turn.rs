//! A turn, from the decision to fire to its judged outcome: find a prompt
//! ([`super::prompt`]), commit the turn to disk *before* typing it, type it, record what
//! the agent said, and judge it from the first settled snapshot after
//! ([`super::outcome`]). `impl Session` over the machine's state; no IO.
//!
//! Exactly-once typing across crashes: a turn is committed as `pending` and flushed
//! before the agent is asked to type it. A restarted coordinator that finds a pending
//! turn never retypes it (see [`super::Engine::resume_live`]).

use std::sync::Arc;

use karl_common::detect::Detection;
use karl_common::pb;

use super::evidence::Awaiting;
use super::machine::{Effect, Flow, Session};
use super::outcome;
use super::prompt::{Candidate, ModelAnswer, PromptSearch, Step};
use crate::context::TurnNote;
use crate::records::{AuditKind, InjectStatus, Status, TurnOutcome, TurnRecord, TurnSource};

impl Session {
    /// The pane is ready for the next prompt.
    pub(super) fn fire(&mut self, snap: Arc<pb::PaneSnapshot>, d: Detection) {
        if self.rec.throttled_until_ms != 0 {
            self.rec.throttled_until_ms = 0;
            self.set_status(
                Status::Running,
                "the rate limit allows the next turn".into(),
                false,
            );
        }
        if self.rec.status != Status::Running {
            self.set_status(Status::Running, format!("pane is {} again", d.state), false);
        }
        let mut search = PromptSearch::new(&snap.text, d.error);
        let step = search.start(&mut self.rec, &self.deps);
        self.step(step, search, snap, d);
    }

    pub(super) fn model_replied(
        &mut self,
        mut search: PromptSearch,
        snap: Arc<pb::PaneSnapshot>,
        d: Detection,
        reply: Result<ModelAnswer, String>,
    ) {
        let step = match reply {
            Ok(answer) => search.on_reply(&mut self.rec, &self.deps, answer),
            Err(e) => {
                tracing::warn!(target: "coord.engine", session = %self.rec.id, error = %e, "model call failed; falling back to the plan");
                search.on_error(&mut self.rec, &self.deps, &e)
            }
        };
        self.step(step, search, snap, d);
    }

    fn step(
        &mut self,
        step: Step,
        search: PromptSearch,
        snap: Arc<pb::PaneSnapshot>,
        d: Detection,
    ) {
        match step {
            Step::Ask(req) => self.call(Effect::AskModel(req), Flow::Prompting(search, snap, d)),
            Step::Chosen(c) => self.commit(c, &snap, &d),
            Step::Exhausted => self.set_status(
                Status::Escalated,
                "no acceptable prompt: the model, the plan and the escape prompts were all refused by the gate".into(),
                false,
            ),
        }
    }

    /// Records the turn and commits it, durably, before anything is typed.
    fn commit(&mut self, c: Candidate, snap: &pb::PaneSnapshot, d: &Detection) {
        let now = self.now;
        let n = self.rec.turns + 1;
        let phase = self.deps.cfg.context.phases.phase_at(n, self.rec.max_turns);
        let rec = &mut self.rec;
        crate::summary::note_phase(&mut rec.phases, n, phase);
        let turn = TurnRecord {
            n,
            prompt: c.prompt.clone(),
            source: c.source,
            gate: c.gate,
            model_latency_ms: c.latency_ms,
            prompt_tokens: c.prompt_tokens,
            cached_tokens: c.cached_tokens,
            pane_hash: snap.stable_hash.clone(),
            outcome: TurnOutcome::Pending,
            inject: if rec.dry_run {
                InjectStatus::DryRun
            } else {
                InjectStatus::Pending
            },
            unix_ms: now,
            state: d.state,
            asked: c.asked,
            refused: c.refused,
            task: rec
                .tasks
                .active()
                .map(|t| t.title.clone())
                .unwrap_or_default(),
            ..Default::default()
        };
        rec.turns = n;
        rec.remember_prompt(&c.prompt);
        rec.inject_hash = snap.stable_hash.clone();
        rec.note_injection(now);
        rec.awaiting_outcome = true;
        rec.awaiting_busy = !rec.dry_run;
        rec.enter_resent = false;
        rec.tasks.note_turn(n);
        rec.last_source = Some(c.source);
        // A plan step is done once typed: the next turn moves on to the next step.
        if c.source == TurnSource::Plan {
            if let Some(title) = rec.tasks.advance(n) {
                rec.digest.add_milestone(n, format!("sent: {title}"));
            }
        }
        rec.updated_ms = now;
        if !rec.dry_run {
            self.cli.awaiting = Some(Awaiting {
                n,
                text: c.prompt.clone(),
            });
        }
        let rec = &mut self.rec;
        let kind = if rec.dry_run {
            AuditKind::DryRun
        } else {
            AuditKind::Intent
        };
        let audit = self.audit_entry(kind, &c.prompt, format!("turn {n} ({})", c.source.as_str()));
        self.remember(turn.clone());
        self.call(
            Effect::CommitTurn {
                record: self.rec.clone(),
                turn: turn.clone(),
                audit: vec![audit],
                durable: true,
                ack: true,
            },
            Flow::Committing(turn),
        );
    }

    pub(super) fn committed(&mut self, turn: TurnRecord, r: Result<(), String>) {
        let n = turn.n;
        if let Err(e) = r {
            self.finish(Status::Failed, format!("cannot record turn {n}: {e}"));
            return;
        }
        if self.rec.dry_run {
            self.next_dry_fire_ms = self.now + u64::from(self.deps.cfg.limits.settle_ms);
            let event = format!("turn {n} (dry run): {}", turn.prompt);
            self.publish(Some(turn), &event);
            return;
        }
        let text = turn.prompt.clone();
        self.call(Effect::Type { text, force: false }, Flow::Typing(turn));
    }

    /// The agent answered the injection: record it, durably (an operator may already
    /// have seen it), and escalate when nothing certain reached the pane.
    pub(super) fn typed(&mut self, mut turn: TurnRecord, r: Result<pb::InjectResult, String>) {
        let n = turn.n;
        match &r {
            Ok(i) => {
                self.rec.typed_at_seq = self.rec.typed_at_seq.max(i.snapshot_seq);
                (turn.inject, turn.reason) = super::inject_status(i);
            }
            Err(e) => (turn.inject, turn.reason) = (InjectStatus::Failed, e.clone()),
        }
        let ok = turn.inject.landed();
        let label = turn.inject_label();
        if !ok {
            self.cli.awaiting = None;
            self.rec.awaiting_busy = false;
            turn.outcome = TurnOutcome::Blocked;
            self.rec.awaiting_outcome = false;
            // Nothing (or nothing certain) reached the pane: do not wait for it to change.
            self.rec.inject_hash.clear();
        }
        let kind = if ok {
            AuditKind::Inject
        } else {
            AuditKind::Refused
        };
        let audit = self.audit_entry(kind, &turn.prompt, format!("turn {n}: {label}"));
        self.save(false);
        self.remember(turn.clone());
        self.out.push(Effect::CommitTurn {
            record: self.rec.clone(),
            turn: turn.clone(),
            audit: vec![audit],
            durable: true,
            ack: false,
        });
        self.publish(Some(turn), &format!("turn {n}: {label}"));
        if !ok {
            self.set_status(
                Status::Escalated,
                format!("could not type turn {n}: {label}"),
                true,
            );
        }
    }

    /// Judges the last typed turn from the first settled snapshot after it.
    pub(super) fn judge_outcome(&mut self, snap: &pb::PaneSnapshot, d: &Detection) {
        // The CLI has not started the turn (our prompt is not in its transcript yet) or
        // not closed it: whatever the screen shows, it is not over.
        if self.cli.facts().is_some_and(|c| c.busy || !c.prompt_landed) {
            return;
        }
        let Some(mut verdict) = outcome::judge(&self.rec, &snap.stable_hash, d) else {
            return;
        };
        let n = self.rec.turns;
        let Some(mut turn) = self.recent.iter().rev().find(|t| t.n == n).cloned() else {
            tracing::warn!(target: "coord.engine", session = %self.rec.id, turn = n, "judged a turn that is not on record");
            return;
        };
        // The agent's own account, when its transcript covers the turn: an API error
        // ended it whatever the screen shows, and its words say whether it is done.
        let lines = if self.transcript_turn(&mut turn) {
            if self.transcript_failed() {
                verdict = crate::context::Outcome::Error;
            } else if verdict == crate::context::Outcome::Error {
                tracing::info!(target: "coord.engine", session = %self.rec.id, turn = n, "the screen shows an error the transcript does not; judged on the transcript");
                verdict = crate::context::Outcome::Progress;
            }
            let lines = self.transcript_lines();
            if self.transcript_worked() {
                lines
            } else {
                if outcome::completion_signal(&lines) {
                    tracing::info!(target: "coord.engine", session = %self.rec.id, turn = n, "the agent says it is done but its transcript shows no successful tool call; the task stays open");
                }
                Vec::new()
            }
        } else {
            turn.judged_by = karl_common::evidence::Source::Screen;
            snap.new_lines.clone()
        };
        let judged = outcome::apply(&mut self.rec, verdict, &lines);
        turn.outcome = judged.into();
        if matches!(turn.outcome, TurnOutcome::Progress | TurnOutcome::Complete) {
            self.rec.progress_turns += 1;
        }
        self.remember(turn.clone());
        // Every 5 turns, fold the last five judged turns into the digest.
        if n.is_multiple_of(5) {
            let notes: Vec<TurnNote> = self
                .recent
                .iter()
                .filter(|x| x.n + 5 > n && x.n <= n)
                .map(|x| TurnNote {
                    turn: x.n,
                    prompt: x.prompt.clone(),
                    outcome: x
                        .outcome
                        .judged()
                        .unwrap_or(crate::context::Outcome::Progress),
                    response: x.response.clone(),
                })
                .collect();
            self.rec.digest.fold(&notes);
        }
        self.out.push(Effect::CommitTurn {
            record: self.rec.clone(),
            turn: turn.clone(),
            audit: Vec::new(),
            durable: false,
            ack: false,
        });
        let event = format!("turn {n} outcome: {}", turn.outcome.as_str());
        self.publish(Some(turn), &event);
    }

    /// Marks the last turn committed at or before `at_ms` as overridden by the operator,
    /// so it never becomes a training example (the first reason is kept).
    pub(super) fn overridden(&mut self, why: &str, at_ms: u64) {
        let Some(mut turn) = self
            .recent
            .iter()
            .rev()
            .find(|t| t.unix_ms <= at_ms)
            .cloned()
        else {
            return;
        };
        if !turn.overridden.is_empty() {
            return;
        }
        turn.overridden = why.to_string();
        self.remember(turn.clone());
        self.commit_quietly(turn);
    }

    /// Keeps the last five turns in memory (replacing an earlier copy of the same turn).
    fn remember(&mut self, turn: TurnRecord) {
        match self.recent.iter_mut().find(|t| t.n == turn.n) {
            Some(t) => *t = turn,
            None => {
                self.recent.push_back(turn);
                while self.recent.len() > 5 {
                    self.recent.pop_front();
                }
            }
        }
    }
}

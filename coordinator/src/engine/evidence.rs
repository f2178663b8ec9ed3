//! The agent CLI's own account of the session, weighed against the screen. `impl Session`
//! over the machine's state; no IO.
//!
//! karl-agent follows the CLI's transcript and session file and sends facts
//! ([`karl_common::evidence`]); here they become what the engine acts on:
//! - **Did my prompt land?** A typed prompt counts as delivered when the transcript shows
//!   it as a user message — once. A prompt KARL did not type, or one that lands twice, is
//!   audited.
//! - **Is the agent done?** [`CliView::facts`] gives `decide` the transcript's view; an
//!   idle screen while the transcript shows a turn in flight is never typed into, and the
//!   disagreement is audited with both pieces of evidence (the seed of a rule fix).
//! - **Act on the fact, confirm on the screen.** A turn end in the transcript asks for a
//!   capture at once instead of waiting for the screen to settle; the screen must agree
//!   before anything is typed.
//! - **What did the turn do?** The agent's own words and tool results fill the turn
//!   record ([`Session::transcript_turn`]).
//!
//! Without a transcript (other CLIs, remote shells, unreadable files) nothing here
//! applies and the screen decides exactly as before.

use std::sync::Arc;

use karl_common::detect::{Detection, PaneState};
use karl_common::evidence::{clip, wire, Fact, Source, TurnEnd, TurnState};
use karl_common::pb;

use super::decide::CliFacts;
use super::machine::{Effect, Flow, Session};
use crate::records::{push_latency, AuditKind, Status, TurnRecord};

/// Characters of the agent's own words kept on a turn record.
const RESPONSE_CHARS: usize = 600;

/// A typed prompt the transcript has not shown yet.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Awaiting {
    pub n: u32,
    pub text: String,
}

/// What the session knows from the agent CLI's own files (not stored: the agent sends
/// it again when a watch starts).
#[derive(Debug, Default)]
pub(super) struct CliView {
    pub attached: bool,
    pub turn: TurnState,
    pub awaiting: Option<Awaiting>,
    /// Turns whose prompt the transcript showed, newest last (for "landed twice").
    pub confirmed: Vec<(u32, String)>,
    /// When the screen started to look idle while the transcript showed a turn in flight
    /// (0: they agree).
    pub disagree_since_ms: u64,
    /// When the CLI wrote the turn end the engine has not decided on yet (0: none).
    pub ended_written_ms: u64,
    /// Watch again at the next quiet moment (reports were lost mid-call).
    pub rewatch: bool,
}

impl CliView {
    /// The transcript's view for `decide`; `None` when no transcript is followed.
    pub fn facts(&self) -> Option<CliFacts> {
        if !self.attached {
            return None;
        }
        Some(CliFacts {
            busy: self.turn.busy().unwrap_or(false),
            prompt_landed: self.awaiting.is_none(),
            disagree_since_ms: self.disagree_since_ms,
        })
    }
}

/// Whitespace-insensitive equality: the CLI may store a pasted prompt with its line
/// ends normalised. Exact otherwise: a short prompt ("Continue.") must not be confirmed
/// by a longer one that starts the same.
pub fn same_prompt(typed: &str, written: &str) -> bool {
    let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let (a, b) = (norm(typed), norm(written));
    !a.is_empty() && a == b
}

impl Session {
    /// Facts from the agent about the CLI in the pane.
    pub(super) fn on_evidence(&mut self, ev: Arc<pb::PaneEvidence>) {
        let facts: Vec<_> = ev.facts.iter().filter_map(wire::from_wire).collect();
        if ev.karl_hook {
            self.hooks_expected = true;
        }
        match ev.link() {
            pb::EvidenceLink::Attached => {
                self.cli.attached = true;
                self.cli.turn = TurnState::default();
                self.cli.disagree_since_ms = 0;
                for f in &facts {
                    self.cli.turn.apply(f);
                }
                self.rec.evidence = Source::Transcript;
                self.rec.cli_session = ev.cli_session.clone();
                self.rec.transcript = ev.path.clone();
                let detail = format!(
                    "following {}'s transcript {} (session {}); a turn is {}{}",
                    if ev.detail.is_empty() {
                        "the CLI"
                    } else {
                        &ev.detail
                    },
                    ev.path,
                    ev.cli_session,
                    if self.cli.turn.in_flight {
                        "in flight"
                    } else {
                        "not in flight"
                    },
                    if ev.karl_hook {
                        "; its settings run KARL's PermissionRequest hook"
                    } else {
                        ""
                    }
                );
                tracing::info!(target: "coord.engine", session = %self.rec.id, %detail, "evidence attached");
                self.audit(AuditKind::Evidence, "", detail);
                // The prompt we typed may already be in what was written before (the
                // agent found the file after we typed): it confirms ours, and nothing else
                // in a replay is news.
                if let (Some(text), Some(a)) = (self.cli.turn.prompt.clone(), &self.cli.awaiting) {
                    if same_prompt(&a.text, &text) {
                        self.prompt_seen(&text);
                    }
                }
                self.save(false);
            }
            pb::EvidenceLink::Detached => {
                self.cli.attached = false;
                self.cli.disagree_since_ms = 0;
                self.rec.evidence = Source::Screen;
                let detail = format!(
                    "stopped following the CLI's transcript ({}); the screen decides",
                    ev.detail
                );
                tracing::info!(target: "coord.engine", session = %self.rec.id, %detail, "evidence detached");
                self.audit(AuditKind::Evidence, "", detail);
                self.save(false);
            }
            pb::EvidenceLink::Facts => {
                if !self.cli.attached {
                    return;
                }
                let mut ended = false;
                for f in &facts {
                    let was_in_flight = self.cli.turn.in_flight;
                    self.cli.turn.apply(f);
                    tracing::debug!(target: "coord.engine", session = %self.rec.id, fact = %f.fact.describe(), "evidence");
                    match &f.fact {
                        Fact::Prompt { text } => self.prompt_seen(text),
                        Fact::TurnEnded { .. } if was_in_flight => ended = true,
                        _ => {}
                    }
                }
                if ended {
                    let written = facts.last().map(|f| f.written_ms).unwrap_or(0);
                    if written != 0 {
                        let seen = self.now.saturating_sub(written);
                        push_latency(&mut self.rec.turn_end_seen_ms, seen);
                        self.cli.ended_written_ms = written;
                        tracing::debug!(target: "coord.engine", session = %self.rec.id, seen_ms = seen, agent_ms = ev.observed_unix_ms.saturating_sub(written), "the transcript ended a turn; looking at the screen now");
                    }
                    self.look_now();
                }
            }
        }
    }

    /// Reports were lost: the transcript state cannot be trusted until the agent sends it
    /// whole again (on the next watch).
    pub(super) fn evidence_lost(&mut self) {
        if self.cli.attached {
            self.cli.attached = false;
            self.cli.disagree_since_ms = 0;
            self.rec.evidence = Source::Screen;
            tracing::warn!(target: "coord.engine", session = %self.rec.id, "transcript facts were lost; the screen decides until the agent resends the state");
        }
    }

    /// A prompt reached the CLI: ours (confirmed once), ours again, or someone else's.
    fn prompt_seen(&mut self, text: &str) {
        if let Some(a) = self.cli.awaiting.clone() {
            if same_prompt(&a.text, text) {
                self.cli.awaiting = None;
                self.cli.confirmed.push((a.n, a.text.clone()));
                if self.cli.confirmed.len() > 8 {
                    self.cli.confirmed.remove(0);
                }
                self.rec.confirmed += 1;
                tracing::info!(target: "coord.engine", session = %self.rec.id, turn = a.n, "the transcript shows the prompt landed");
                if let Some(t) = self.recent.iter_mut().find(|t| t.n == a.n) {
                    t.confirmed_by = Source::Transcript;
                    let turn = t.clone();
                    self.commit_quietly(turn);
                }
                return;
            }
        }
        if let Some((n, _)) = self
            .cli
            .confirmed
            .iter()
            .rev()
            .find(|(_, p)| same_prompt(p, text))
            .cloned()
        {
            tracing::warn!(target: "coord.engine", session = %self.rec.id, turn = n, "the transcript shows our prompt landed twice");
            self.audit(
                AuditKind::Evidence,
                text,
                format!("turn {n}'s prompt reached the CLI a second time"),
            );
            return;
        }
        self.audit(
            AuditKind::Evidence,
            text,
            "a prompt KARL did not type reached the CLI".into(),
        );
    }

    /// Records a turn change without waiting for the disk.
    pub(super) fn commit_quietly(&mut self, turn: TurnRecord) {
        self.out.push(Effect::CommitTurn {
            record: self.rec.clone(),
            turn,
            audit: Vec::new(),
            durable: false,
            ack: false,
        });
    }

    /// The transcript says something the screen should show now: capture instead of
    /// waiting for the pane to settle (when nothing else is in flight and the session acts).
    fn look_now(&mut self) {
        if self.busy() || self.rec.status != Status::Running {
            return;
        }
        self.call(Effect::Capture, Flow::Capturing);
    }

    /// Weighs the screen against the transcript after a snapshot's detection: a new
    /// disagreement is audited with both pieces of evidence; agreement clears it. The
    /// first screen that agrees with a turn end times the decision.
    pub(super) fn weigh(&mut self, d: &Detection) {
        let Some(cli) = self.cli.facts() else {
            return;
        };
        if self.cli.ended_written_ms != 0 && !cli.busy && d.state != PaneState::Working {
            let ms = self.now.saturating_sub(self.cli.ended_written_ms);
            push_latency(&mut self.rec.turn_end_decided_ms, ms);
            self.cli.ended_written_ms = 0;
        }
        let disagree = d.state == PaneState::Idle && cli.busy;
        if !disagree {
            if self.cli.disagree_since_ms != 0 {
                tracing::info!(target: "coord.engine", session = %self.rec.id, state = %d.state, "the screen and the transcript agree again");
            }
            self.cli.disagree_since_ms = 0;
            return;
        }
        if self.cli.disagree_since_ms != 0 {
            return;
        }
        self.cli.disagree_since_ms = self.now;
        self.rec.disagreements += 1;
        let screen = format!(
            "screen: idle by rule {}{}",
            d.rule.as_deref().unwrap_or("-"),
            d.evidence
                .first()
                .map(|e| format!(" ({:?})", e.line.trim()))
                .unwrap_or_default()
        );
        let t = &self.cli.turn;
        let transcript = format!(
            "transcript: a turn in flight since {} for prompt {:?}{}",
            t.prompt_ms,
            clip(t.prompt.as_deref().unwrap_or(""), 80),
            t.pending_tool()
                .map(|c| format!(", tool call {} waiting", c.name))
                .unwrap_or_default()
        );
        tracing::warn!(target: "coord.engine", session = %self.rec.id, %screen, %transcript, "the screen looks idle but the transcript shows a turn in flight; waiting");
        self.audit(
            AuditKind::Evidence,
            "",
            format!("disagreement — {screen}; {transcript}. Waiting on the transcript."),
        );
    }

    /// The command the pending tool call runs, from the transcript (the exact input the
    /// gate should judge), when one waits.
    pub(super) fn pending_tool_action(&self) -> Option<String> {
        if !self.cli.attached {
            return None;
        }
        self.cli.turn.pending_tool().map(|c| c.command())
    }

    /// Fills a judged turn from the transcript when it covers the turn's prompt: the
    /// agent's own words, its tools and their results. Returns whether it did.
    pub(super) fn transcript_turn(&self, turn: &mut TurnRecord) -> bool {
        let t = &self.cli.turn;
        if !self.cli.attached
            || t.in_flight
            || !t
                .prompt
                .as_deref()
                .is_some_and(|p| same_prompt(&turn.prompt, p))
        {
            return false;
        }
        turn.response = clip(&t.response.join("\n"), RESPONSE_CHARS);
        turn.tools = t
            .tools
            .iter()
            .map(|u| {
                let result = match u.ok {
                    Some(true) => "ok",
                    Some(false) => "error",
                    None => "no result",
                };
                format!("{} {}: {result}", u.call.name, clip(&u.call.command(), 80))
            })
            .collect();
        turn.judged_by = Source::Transcript;
        true
    }

    /// The transcript's verdict on its last turn: an API error ended it.
    pub(super) fn transcript_failed(&self) -> bool {
        self.cli.attached && self.cli.turn.last_end == Some(TurnEnd::ApiError)
    }

    /// Whether the agent's last turn did something that can be checked: a tool call
    /// that succeeded (a file written, a command that ran). A turn without one cannot
    /// close a task, whatever the agent says.
    pub(super) fn transcript_worked(&self) -> bool {
        self.cli.turn.tools.iter().any(|t| t.ok == Some(true))
    }

    /// The agent's own words of the last turn, as lines (for completion signals).
    pub(super) fn transcript_lines(&self) -> Vec<String> {
        self.cli
            .turn
            .response
            .iter()
            .flat_map(|r| r.lines().map(str::to_string).collect::<Vec<_>>())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::same_prompt;

    #[test]
    fn prompts_match_whatever_the_line_ends() {
        assert!(same_prompt("Fix the build.", "Fix the build."));
        assert!(same_prompt("Fix\nthe  build.", "Fix the build.\n"));
        assert!(!same_prompt("Fix the build.", "Fix the tests."));
        assert!(!same_prompt("", ""));
        assert!(!same_prompt(
            "Continue.",
            "Continue. Also delete the old branch."
        ));
    }
}

//! The durable records: what sled stores for a session, a turn and the audit log, with
//! every status, state, source and outcome as an enum (plain data, no IO).
//!
//! The wire forms live in [`crate::wire`]; the store in [`crate::store`] only knows keys
//! and JSON. Not here: what the engine does with a record ([`crate::engine`]).

use std::collections::BTreeMap;

use karl_common::detect::{AgentKind, PaneState, PermissionRequest};
use karl_common::evidence::Source;
use karl_common::gate::Rule;
use serde::{Deserialize, Serialize};

use crate::context::{ChatMessage, Digest, Outcome, TaskGraph};
use crate::summary::{PhaseSpan, SessionSummary};

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[default]
    Running,
    Paused,
    /// Waiting on something that resolves by itself (agent offline, usage limit, a busy pane).
    Waiting,
    /// Needs a human (dialog, permission under `escalate`, stuck, exited).
    Escalated,
    Done,
    Stopped,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Waiting => "waiting",
            Status::Escalated => "escalated",
            Status::Done => "done",
            Status::Stopped => "stopped",
            Status::Failed => "failed",
        }
    }

    /// A session that still owns its pane and may act.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            Status::Running | Status::Paused | Status::Waiting | Status::Escalated
        )
    }
}

/// What to do when the agent asks for a tool permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionPolicy {
    #[default]
    Escalate,
    ApproveSafe,
    Deny,
}

impl PermissionPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionPolicy::Escalate => "escalate",
            PermissionPolicy::ApproveSafe => "approve-safe",
            PermissionPolicy::Deny => "deny",
        }
    }
}

/// Where a typed prompt came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TurnSource {
    /// The twin model's first answer.
    #[default]
    Model,
    /// The model's answer after the gate refused an earlier one.
    Regenerated,
    /// The active task's plan step.
    Plan,
    /// A rotating escape prompt for the session's phase.
    Escape,
    /// Typed by the operator with `karl-ctl send`.
    Manual,
}

impl TurnSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnSource::Model => "model",
            TurnSource::Regenerated => "regenerated",
            TurnSource::Plan => "plan",
            TurnSource::Escape => "escape",
            TurnSource::Manual => "manual",
        }
    }
}

/// How a turn ended, judged from the first settled snapshot after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TurnOutcome {
    /// Not judged yet.
    #[default]
    Pending,
    Progress,
    Error,
    Blocked,
    Complete,
}

impl TurnOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnOutcome::Pending => "pending",
            TurnOutcome::Progress => "progress",
            TurnOutcome::Error => "error",
            TurnOutcome::Blocked => "blocked",
            TurnOutcome::Complete => "complete",
        }
    }

    /// The judged outcome, for the digest (`None` while pending).
    pub fn judged(self) -> Option<Outcome> {
        match self {
            TurnOutcome::Pending => None,
            TurnOutcome::Progress => Some(Outcome::Progress),
            TurnOutcome::Error => Some(Outcome::Error),
            TurnOutcome::Blocked => Some(Outcome::Blocked),
            TurnOutcome::Complete => Some(Outcome::Complete),
        }
    }
}

impl From<Outcome> for TurnOutcome {
    fn from(o: Outcome) -> Self {
        match o {
            Outcome::Progress => TurnOutcome::Progress,
            Outcome::Error => TurnOutcome::Error,
            Outcome::Blocked => TurnOutcome::Blocked,
            Outcome::Complete => TurnOutcome::Complete,
        }
    }
}

/// What became of typing a turn's prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum InjectStatus {
    /// Committed, the agent not asked yet (or its answer not recorded).
    #[default]
    Pending,
    /// Recorded only: a dry run types nothing.
    DryRun,
    Submitted,
    SubmittedAfterRetry,
    /// The agent would not type it (the turn's `reason` says why).
    Refused,
    /// Typing failed or its result is unknown (the turn's `reason` says why).
    Failed,
    /// The coordinator restarted before the agent confirmed it; never retyped.
    Unconfirmed,
}

impl InjectStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            InjectStatus::Pending => "pending",
            InjectStatus::DryRun => "dry-run",
            InjectStatus::Submitted => "submitted",
            InjectStatus::SubmittedAfterRetry => "submitted-after-retry",
            InjectStatus::Refused => "refused",
            InjectStatus::Failed => "failed",
            InjectStatus::Unconfirmed => "unconfirmed",
        }
    }

    /// `submitted`, `refused: the pane is busy`: the status with its reason, if any.
    pub fn label(self, reason: &str) -> String {
        if reason.is_empty() {
            self.as_str().to_string()
        } else {
            format!("{}: {reason}", self.as_str())
        }
    }

    /// The prompt reached the pane and was submitted.
    pub fn landed(self) -> bool {
        matches!(
            self,
            InjectStatus::Submitted | InjectStatus::SubmittedAfterRetry
        )
    }
}

/// What an audit line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditKind {
    /// A session started or ended.
    Session,
    /// A turn committed, before it is typed.
    Intent,
    /// A dry-run turn recorded.
    DryRun,
    /// A prompt typed.
    Inject,
    /// The agent refused or failed to type a turn.
    Refused,
    /// The gate blocked a manual send.
    Blocked,
    /// A manual send forced past the gate.
    Forced,
    /// A manual send that failed.
    Failed,
    /// A permission prompt answered (or not).
    Permission,
    Escalated,
    /// Enter pressed once on our unsent prompt.
    Enter,
    /// The restart command typed after the agent exited.
    Restart,
    /// What the agent CLI wrote about itself: a transcript followed or lost, and every
    /// disagreement between it and the screen (with both pieces of evidence).
    Evidence,
    /// The session's `--verify` command ran.
    Verify,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::Session => "session",
            AuditKind::Intent => "intent",
            AuditKind::DryRun => "dry-run",
            AuditKind::Inject => "inject",
            AuditKind::Refused => "refused",
            AuditKind::Blocked => "blocked",
            AuditKind::Forced => "forced",
            AuditKind::Failed => "failed",
            AuditKind::Permission => "permission",
            AuditKind::Escalated => "escalated",
            AuditKind::Enter => "enter",
            AuditKind::Restart => "restart",
            AuditKind::Evidence => "evidence",
            AuditKind::Verify => "verify",
        }
    }
}

/// One line of the audit log: every injection, refusal and permission decision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditEntry {
    pub unix_ms: u64,
    pub session: String,
    pub machine: String,
    pub pane: String,
    pub kind: AuditKind,
    pub text: String,
    pub detail: String,
}

/// The durable record of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SessionRecord {
    pub id: String,
    pub machine: String,
    pub target: String,
    pub pane_id: String,
    pub project: String,
    pub goal: String,
    pub path: String,
    pub tasks: TaskGraph,
    /// Compressed older turns and milestones.
    pub digest: Digest,
    pub status: Status,
    pub reason: String,
    pub dry_run: bool,
    pub max_turns: u32,
    pub permissions: PermissionPolicy,
    pub plan_only: bool,
    pub auto_detect: bool,
    /// Prompts typed (or, in dry run, recorded).
    pub turns: u32,
    /// Prompts the model offered that the gate refused.
    pub gated: u32,
    pub rejections: BTreeMap<Rule, u32>,
    pub fallbacks: u32,
    pub model_latencies_ms: Vec<u64>,
    pub model_errors: u32,
    /// The last 15 prompts, oldest first (the anti-repeat fence).
    pub history: Vec<String>,
    pub last_state: PaneState,
    pub last_error: bool,
    /// Stable hash of the pane when we last typed; a turn fires only after it changes.
    pub inject_hash: String,
    pub last_hash: String,
    pub last_change_ms: u64,
    pub inject_times_ms: Vec<u64>,
    /// Consecutive turns after which the pane showed no progress.
    pub stalled: u32,
    /// A typed prompt whose turn has not been judged yet.
    pub awaiting_outcome: bool,
    /// We typed and the pane has not turned busy or changed yet.
    pub awaiting_busy: bool,
    pub enter_resent: bool,
    pub pending_permission: Option<PermissionRequest>,
    /// The escalation clears by itself once the pane is idle again (dialogs,
    /// permissions, exits a human dealt with); stuck and stalled ones need `resume`.
    pub auto_resume: bool,
    /// The CLI the last snapshot showed.
    pub agent_kind: AgentKind,
    /// The agent CLI this session drives, from the first snapshot that named one
    /// (`shell` for a plain shell pane). Unlike `agent_kind`, it does not follow the
    /// screen: a shell prompt where Claude was means Claude exited.
    pub driven_agent: Option<AgentKind>,
    /// The pane's non-shell processes when the driven agent was first seen (e.g.
    /// `["claude"]`): when none of them is left in the pane, the agent is gone whatever
    /// its last frame on screen says.
    pub agent_processes: Vec<String>,
    /// A turn waits for the injection rate limit until this time (0 = not throttled).
    pub throttled_until_ms: u64,
    /// The pane's snapshot seq when our last typing finished: snapshots at or below it
    /// show the pane from before and are not acted on. Reset when the watch restarts
    /// (a new watch numbers its snapshots from 1).
    pub typed_at_seq: u64,
    pub unknown_since_ms: u64,
    pub started_ms: u64,
    pub updated_ms: u64,
    pub escape_rotation: u32,
    /// Where the last typed prompt came from.
    pub last_source: Option<TurnSource>,
    /// What decides "is the agent done" for this pane now: the CLI's transcript when
    /// the agent follows it, else the screen.
    pub evidence: Source,
    /// The agent CLI's own session id and transcript path, when followed.
    pub cli_session: String,
    pub transcript: String,
    /// Prompts the transcript showed landing, and times it and the screen disagreed.
    pub confirmed: u32,
    pub disagreements: u32,
    /// The last turn ends written in the transcript: ms from the CLI writing each to the
    /// coordinator seeing it, and to the engine's decision on the screen that agreed.
    pub turn_end_seen_ms: Vec<u64>,
    pub turn_end_decided_ms: Vec<u64>,
    /// `drive --verify`: must exit 0 in the pane's directory before the session is done.
    pub verify: String,
    /// Verify runs so far, and failures since the last pass.
    pub verify_runs: u32,
    pub verify_failures: u32,
    /// The last line of the last failing run (the same failure twice is a loop).
    pub verify_last: String,
    /// `drive --launch`: the command line KARL types at the shell prompt to start (and
    /// restart) the agent CLI; empty when the CLI was already running.
    pub launch: String,
    /// When KARL typed the launch command (0: not yet).
    pub launched_ms: u64,
    /// Turns judged progress or complete (the summary's efficiency).
    pub progress_turns: u32,
    /// The phases the turns were fired in, with their turn ranges.
    pub phases: Vec<PhaseSpan>,
    /// The summary, frozen when the session ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<SessionSummary>,
}

/// Latencies kept per session (newest last).
pub const KEEP_LATENCIES: usize = 64;

/// Appends a latency, keeping the last [`KEEP_LATENCIES`].
pub fn push_latency(v: &mut Vec<u64>, ms: u64) {
    v.push(ms);
    let excess = v.len().saturating_sub(KEEP_LATENCIES);
    v.drain(..excess);
}

/// One turn as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct TurnRecord {
    pub n: u32,
    pub prompt: String,
    pub source: TurnSource,
    /// The gate's verdict lines for each candidate tried.
    pub gate: Vec<String>,
    pub model_latency_ms: u64,
    pub prompt_tokens: u32,
    /// Prompt tokens the model server's prefix cache already held (0: not reported).
    pub cached_tokens: u32,
    pub pane_hash: String,
    pub outcome: TurnOutcome,
    pub inject: InjectStatus,
    pub unix_ms: u64,
    /// The pane state that fired the turn.
    pub state: PaneState,
    /// Why the injection was refused, failed or left unconfirmed.
    pub reason: String,
    /// What showed the prompt landed: the transcript (the CLI wrote it as a user
    /// message) or the screen (the agent's check after Enter).
    pub confirmed_by: Source,
    /// Tools the agent used in the turn, from its transcript (`Bash touch x: ok`).
    pub tools: Vec<String>,
    /// The agent's own words for the turn, from its transcript (capped).
    pub response: String,
    /// What the outcome was judged on.
    pub judged_by: Source,
    /// The exact messages of each request the turn made to the twin for a prompt, in
    /// order (second opinions are not kept). The last one produced the typed prompt when
    /// it came from the model. What `karl-ctl export` trains on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub asked: Vec<Vec<ChatMessage>>,
    /// The twin's candidates the gate refused in this turn, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedCandidate>,
    /// The active task when the turn was committed (its title; empty without a plan).
    pub task: String,
    /// Why an operator overrode the turn (typed into the pane or stopped the session
    /// before it was judged); empty when nobody did.
    pub overridden: String,
}

/// A candidate the gate refused, as the exporter needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RefusedCandidate {
    pub text: String,
    /// The rules that refused it (`destructive`, `status`, …).
    pub rules: Vec<String>,
    /// The gate's words (`status: asks for a status report; …`).
    pub reason: String,
    /// Which of the turn's requests ([`TurnRecord::asked`]) it answered.
    pub asked: u32,
}

impl TurnRecord {
    /// `submitted`, `refused: the pane is busy`, … — the injection as one phrase.
    pub fn inject_label(&self) -> String {
        self.inject.label(&self.reason)
    }
}

impl SessionRecord {
    /// `{machine}/{pane_id}`: the key of the one-writer-per-pane lock.
    pub fn pane_key(&self) -> String {
        pane_key(&self.machine, &self.pane_id)
    }

    pub fn remember_prompt(&mut self, prompt: &str) {
        self.history.push(prompt.to_string());
        let excess = self.history.len().saturating_sub(15);
        self.history.drain(..excess);
    }

    pub fn record_latency(&mut self, ms: u64) {
        self.model_latencies_ms.push(ms);
        let excess = self.model_latencies_ms.len().saturating_sub(500);
        self.model_latencies_ms.drain(..excess);
    }

    /// Remembers an injection time (only the last minute's matter to the loop limit).
    pub fn note_injection(&mut self, now_ms: u64) {
        self.inject_times_ms
            .retain(|t| now_ms.saturating_sub(*t) < karl_common::gate::limits::RATE_WINDOW_MS);
        self.inject_times_ms.push(now_ms);
    }

    /// The session in figures: as frozen when it ended, else as it stands.
    pub fn summary(&self) -> SessionSummary {
        match &self.summary {
            Some(s) if !self.status.is_live() => s.clone(),
            _ => SessionSummary::of(self),
        }
    }

    /// The summary on one line.
    pub fn end_summary(&self) -> String {
        self.summary().line()
    }
}

pub fn pane_key(machine: &str, pane_id: &str) -> String {
    format!("{machine}/{pane_id}")
}

/// Session ids: `{machine}_{pane}_{timestamp}` with the pane id's `%` dropped.
pub fn session_id(machine: &str, pane_id: &str, unix_ms: u64) -> String {
    format!("{machine}_{}_{unix_ms}", pane_id.trim_start_matches('%'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert_eq!(session_id("mac2", "%3", 17), "mac2_3_17");
        assert_eq!(pane_key("mac2", "%3"), "mac2/%3");
    }

    #[test]
    fn an_ended_session_shows_its_frozen_summary() {
        let mut s = SessionRecord {
            turns: 2,
            max_turns: 5,
            ..Default::default()
        };
        s.summary = Some(SessionSummary::of(&s));
        s.turns = 3;
        // Live: the summary follows the record.
        assert_eq!(s.summary().turns, 3);
        s.status = Status::Done;
        assert_eq!(s.summary().turns, 2);
        assert!(
            s.end_summary().contains("turns 2 of 5"),
            "{}",
            s.end_summary()
        );
    }

    #[test]
    fn enum_names_are_the_stored_names() {
        for (s, name) in [
            (
                InjectStatus::SubmittedAfterRetry,
                "\"submitted-after-retry\"",
            ),
            (InjectStatus::DryRun, "\"dry-run\""),
        ] {
            assert_eq!(serde_json::to_string(&s).ok().as_deref(), Some(name));
            assert_eq!(format!("\"{}\"", s.as_str()), name);
        }
        assert_eq!(
            serde_json::to_string(&AuditKind::DryRun).ok().as_deref(),
            Some("\"dry-run\"")
        );
    }
}

//! The session machine: `Session::on(now, Event) -> Vec<Effect>`, sans IO.
//!
//! Every transition of a driven session lives here — snapshots, pane and agent events,
//! operator commands, the clock, and the results of the effects it asked for (a capture,
//! a model reply, a commit, an injection, keys sent). Every action is an [`Effect`]: data
//! the shell in [`super::task`] carries out, in order, feeding each result back as an
//! event. A result-bearing effect (see [`Effect::answers`]) is always the last of a batch,
//! so the machine is never asked two things at once.
//!
//! Turn firing and injection live in [`super::turn`], permission answering in
//! [`super::permission`]; both are `impl Session` blocks over the same state.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use karl_common::detect::{Detection, DetectionInput, Detector};
use karl_common::gate::opinion::{Opinion, OpinionCache};
use karl_common::gate::{Gate, OtherSession};
use karl_common::pb;

use super::evidence::CliView;
use super::permission::Selecting;
use super::prompt::{ModelAnswer, PromptSearch};
use super::EngineConfig;
use crate::context::{Calibrations, Context, PaneSignal, Rejection};
use crate::model::ChatRequest;
use crate::records::{AuditEntry, AuditKind, SessionRecord, Status, TurnRecord};

/// The other live sessions' projects and paths, given a session id to leave out.
pub type Peers = Arc<dyn Fn(&str) -> Vec<OtherSession> + Send + Sync>;

/// What the machine reads but does not own: the classifier, the gate, the engine's
/// configuration, token calibration shared by all sessions, and the other live sessions.
#[derive(Clone)]
pub struct Deps {
    pub detector: Arc<Detector>,
    pub gate: Arc<Gate>,
    pub cfg: Arc<EngineConfig>,
    pub calibrations: Arc<Mutex<Calibrations>>,
    pub has_model: bool,
    /// The other live sessions' projects and paths (the cross-contamination fence).
    pub peers: Peers,
    /// Second opinions the model gave, by prompt text (shared by every session).
    pub opinions: Arc<Mutex<OpinionCache>>,
}

impl Deps {
    pub fn detect(&self, snap: &pb::PaneSnapshot) -> Detection {
        let pane = snap.pane.clone().unwrap_or_default();
        self.detector.detect(&DetectionInput {
            text: &snap.text,
            ansi: (!snap.ansi.is_empty()).then_some(snap.ansi.as_str()),
            current_command: &pane.current_command,
            title: &pane.title,
            cursor_x: Some(snap.cursor_x),
            cursor_y: Some(snap.cursor_y),
            width: Some(pane.width),
            height: Some(pane.height),
        })
    }

    /// The briefing the model gets for this session and screen.
    pub fn context(
        &self,
        rec: &SessionRecord,
        screen: &str,
        signal: PaneSignal,
        rejections: &[Rejection],
    ) -> Context {
        let estimator = super::lock(&self.calibrations).estimator(&self.cfg.model_name);
        super::session_context(
            rec,
            screen,
            signal,
            rejections,
            &self.cfg.context,
            &estimator,
        )
    }

    pub fn observe_tokens(&self, estimated: u32, actual: u32) {
        super::lock(&self.calibrations).observe(&self.cfg.model_name, estimated, actual);
    }

    /// The second opinion already given on this text, if any.
    pub fn known_opinion(&self, text: &str) -> Option<Opinion> {
        super::lock(&self.opinions).get(text).cloned()
    }

    pub fn remember_opinion(&self, text: &str, opinion: &Opinion) {
        super::lock(&self.opinions).insert(text, opinion.clone());
    }
}

/// Operator commands to a running session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Pause,
    Resume,
    Stop,
    /// Approve (true) or deny the pending permission prompt.
    Decide(bool),
    /// The operator typed into the pane (`karl-ctl send`) at this time: the last turn
    /// committed before it was overridden (a turn committed while the command waited
    /// for the session to be free is not the one overridden).
    Override {
        at_ms: u64,
    },
}

/// Why an agent call failed: `fatal` when the agent answered with a refusal (the pane
/// is gone), not when it could not be reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub fatal: bool,
    pub message: String,
}

/// Everything that happens to a session.
#[derive(Debug, Clone)]
pub enum Event {
    /// The task started; `connected` says whether the agent is online.
    Start {
        connected: bool,
    },
    Snapshot(Arc<pb::PaneSnapshot>),
    /// What the agent CLI wrote about itself (handled whatever is in flight).
    Evidence(Arc<pb::PaneEvidence>),
    /// A Claude Code hook event (handled whatever is in flight: a permission request
    /// waits on it).
    Hook(Arc<pb::HookEvent>),
    /// Some of the agent's reports were lost (the session fell behind): transcript facts
    /// are changes, so the screen decides until a new watch brings the whole state again.
    ReportsLost,
    /// The pane printed something (it is not waiting on our Enter any more).
    PaneOutput,
    PaneClosed,
    ServerGone,
    /// The agent (re)connected, or the tmux server came back: watch again.
    AgentConnected,
    AgentDisconnected,
    Operator(Command),
    /// The clock moved (rechecks, dry-run pacing).
    Tick,
    // Results of effects, each answering the one effect in flight.
    Watched(Result<(), CallError>),
    Captured(Result<Arc<pb::PaneSnapshot>, String>),
    ModelReplied(Result<ModelAnswer, String>),
    Committed(Result<(), String>),
    Typed(Result<pb::InjectResult, String>),
    KeysSent(Result<(), String>),
    Checked(Result<pb::CheckResult, String>),
    Woke,
}

/// What a session update says, for the operator's `follow`.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub record: SessionRecord,
    pub turn: Option<TurnRecord>,
    pub event: String,
}

/// Everything a session does, as data.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Ask the agent to watch the pane → [`Event::Watched`].
    Watch,
    /// A fresh capture of the pane → [`Event::Captured`].
    Capture,
    /// One model completion → [`Event::ModelReplied`].
    AskModel(ChatRequest),
    /// Type text into the pane and submit it → [`Event::Typed`].
    Type {
        text: String,
        force: bool,
    },
    /// Type a command line starting the agent CLI at the pane's shell prompt (the agent
    /// adds KARL's hooks to it) → [`Event::Typed`].
    Launch(String),
    /// Press keys in the pane → [`Event::KeysSent`].
    SendKeys(Vec<String>),
    /// Run the verify command in the pane's directory → [`Event::Checked`].
    RunCheck(String),
    /// Wait → [`Event::Woke`].
    Sleep(Duration),
    /// Write the session record; `durable` waits for the disk.
    Save {
        record: SessionRecord,
        durable: bool,
    },
    /// Write a turn, its session record and audit lines in one transaction; `durable`
    /// waits for the disk; `ack` answers with [`Event::Committed`] (the turn must be on
    /// disk before it is typed).
    CommitTurn {
        record: SessionRecord,
        turn: TurnRecord,
        audit: Vec<AuditEntry>,
        durable: bool,
        ack: bool,
    },
    Audit(AuditEntry),
    Publish(Update),
    /// Answer a waiting Claude Code hook.
    AnswerHook(pb::HookAnswer),
    /// The session ended: stop watching the pane and release its lock.
    Release,
}

impl Effect {
    /// Whether the shell feeds a result event back for this effect.
    pub fn answers(&self) -> bool {
        match self {
            Effect::Watch
            | Effect::Capture
            | Effect::AskModel(_)
            | Effect::Type { .. }
            | Effect::Launch(_)
            | Effect::SendKeys(_)
            | Effect::RunCheck(_)
            | Effect::Sleep(_) => true,
            Effect::CommitTurn { ack, .. } => *ack,
            Effect::Save { .. }
            | Effect::Audit(_)
            | Effect::Publish(_)
            | Effect::AnswerHook(_)
            | Effect::Release => false,
        }
    }
}

/// The one call in flight, and what its result continues.
#[derive(Debug, Default)]
pub(super) enum Flow {
    #[default]
    Idle,
    Watching,
    /// A capture whose snapshot is handled like any other.
    Capturing,
    Prompting(PromptSearch, Arc<pb::PaneSnapshot>, Detection),
    Committing(TurnRecord),
    Typing(TurnRecord),
    Selecting(Selecting),
    Restarting(String),
    Launching(String),
    Entering,
    /// The verify command runs; the reason the session would be done.
    Verifying(String),
}

/// One driven session: its record and the state not worth storing.
pub struct Session {
    pub(super) rec: SessionRecord,
    pub(super) deps: Deps,
    pub(super) now: u64,
    pub(super) out: Vec<Effect>,
    pub(super) flow: Flow,
    pub(super) last_snapshot: Option<Arc<pb::PaneSnapshot>>,
    /// The last judged or typed turns (at most 5), for outcomes and the digest.
    pub(super) recent: VecDeque<TurnRecord>,
    /// Dry run: when the next recorded turn may fire.
    pub(super) next_dry_fire_ms: u64,
    /// Rate limit, usage limit or a screen that may predate our Enter: look again then.
    pub(super) recheck_at_ms: u64,
    /// The session waits because its agent is offline (cleared by any snapshot).
    pub(super) waiting_for_agent: bool,
    /// What the agent CLI's own files say ([`super::evidence`]).
    pub(super) cli: CliView,
    /// When a `PermissionRequest` hook was last answered (0: never).
    pub(super) hook_answered_ms: u64,
    /// When a `PermissionRequest` hook last reached KARL, answered or not (0: never).
    pub(super) hook_seen_ms: u64,
    /// The CLI runs KARL's `PermissionRequest` hook: KARL launched it with the hook, its
    /// settings hold the hook, or a hook event came.
    pub(super) hooks_expected: bool,
    /// Since when the screen has shown a permission prompt (0: it does not).
    pub(super) permission_since_ms: u64,
}

impl Session {
    /// A session over `rec`, with its last few turns as stored.
    pub fn new(rec: SessionRecord, recent: Vec<TurnRecord>, deps: Deps) -> Self {
        let skip = recent.len().saturating_sub(5);
        Session {
            rec,
            deps,
            now: 0,
            out: Vec::new(),
            flow: Flow::Idle,
            last_snapshot: None,
            recent: recent.into_iter().skip(skip).collect(),
            next_dry_fire_ms: 0,
            recheck_at_ms: 0,
            waiting_for_agent: false,
            cli: CliView::default(),
            hook_answered_ms: 0,
            hook_seen_ms: 0,
            hooks_expected: false,
            permission_since_ms: 0,
        }
    }

    pub fn record(&self) -> &SessionRecord {
        &self.rec
    }

    pub fn last_snapshot(&self) -> Option<&Arc<pb::PaneSnapshot>> {
        self.last_snapshot.as_ref()
    }

    /// Whether a call is in flight (its result event is expected next).
    pub fn busy(&self) -> bool {
        !matches!(self.flow, Flow::Idle)
    }

    /// Feeds one event at time `now` (unix ms); returns what to do, in order.
    pub fn on(&mut self, now: u64, event: Event) -> Vec<Effect> {
        self.now = now;
        let flow = std::mem::take(&mut self.flow);
        match (flow, event) {
            (_, Event::Start { connected }) => self.start(connected),
            (flow, Event::Evidence(ev)) => {
                self.flow = flow;
                self.on_evidence(ev);
            }
            (flow, Event::Hook(h)) => {
                self.flow = flow;
                self.on_hook(h);
            }
            (flow, Event::ReportsLost) => {
                let idle = matches!(flow, Flow::Idle);
                self.flow = flow;
                self.evidence_lost();
                if idle && self.rec.status.is_live() {
                    self.watch();
                } else {
                    self.cli.rewatch = true;
                }
            }
            (Flow::Watching, Event::Watched(r)) => self.watched(r),
            (Flow::Capturing, Event::Captured(Ok(s))) => self.on_snapshot(s),
            (Flow::Capturing, Event::Captured(Err(e))) => {
                tracing::warn!(target: "coord.engine", session = %self.rec.id, error = %e, "capture failed");
            }
            (Flow::Prompting(search, snap, d), Event::ModelReplied(r)) => {
                self.model_replied(search, snap, d, r)
            }
            (Flow::Committing(turn), Event::Committed(r)) => self.committed(turn, r),
            (Flow::Typing(turn), Event::Typed(r)) => self.typed(turn, r),
            (Flow::Selecting(s), ev) => self.selecting(s, ev),
            (Flow::Restarting(cmd), Event::Typed(r)) => self.restarted(&cmd, r),
            (Flow::Launching(cmd), Event::Typed(r)) => self.launched(&cmd, r),
            (Flow::Entering, Event::KeysSent(r)) => self.entered(r),
            (Flow::Verifying(reason), Event::Checked(r)) => self.verified(reason, r),
            (Flow::Idle, ev) => self.on_idle(ev),
            (flow, ev) => {
                tracing::warn!(target: "coord.engine", session = %self.rec.id, ?ev, ?flow, "event out of turn; ignored");
                self.flow = flow;
            }
        }
        std::mem::take(&mut self.out)
    }

    fn on_idle(&mut self, event: Event) {
        match event {
            Event::Snapshot(s) => self.on_snapshot(s),
            Event::PaneOutput => self.rec.awaiting_busy = false,
            Event::PaneClosed => self.finish(Status::Failed, "the pane was closed".into()),
            Event::ServerGone => self.set_status(
                Status::Waiting,
                "the tmux server is gone; waiting for it to come back".into(),
                false,
            ),
            Event::AgentConnected => self.watch(),
            Event::AgentDisconnected => {
                let why = format!("agent {} disconnected; waiting for it", self.rec.machine);
                self.wait_for_agent(why);
            }
            Event::Operator(c) => self.operator(c),
            Event::Tick => self.tick(),
            other => {
                tracing::debug!(target: "coord.engine", session = %self.rec.id, ?other, "result with nothing in flight; ignored");
            }
        }
    }

    fn start(&mut self, connected: bool) {
        self.publish(None, "session running");
        if connected {
            self.watch();
        } else {
            let why = format!(
                "agent {} is not connected; waiting for it",
                self.rec.machine
            );
            self.wait_for_agent(why);
        }
    }

    fn wait_for_agent(&mut self, why: String) {
        self.set_status(Status::Waiting, why, false);
        self.waiting_for_agent = self.rec.status == Status::Waiting;
    }

    fn watch(&mut self) {
        // A new watch numbers its snapshots from 1 again.
        self.rec.typed_at_seq = 0;
        self.call(Effect::Watch, Flow::Watching);
    }

    fn watched(&mut self, r: Result<(), CallError>) {
        match r {
            Err(e) if e.fatal => self.finish(
                Status::Failed,
                format!("cannot watch pane {}: {}", self.rec.pane_id, e.message),
            ),
            Err(e) => self.set_status(
                Status::Waiting,
                format!("cannot watch the pane yet: {}", e.message),
                false,
            ),
            Ok(()) => {
                if self.rec.status == Status::Waiting {
                    self.waiting_for_agent = false;
                    self.set_status(Status::Running, "agent connected".into(), false);
                }
                self.call(Effect::Capture, Flow::Capturing);
            }
        }
    }

    fn operator(&mut self, c: Command) {
        match c {
            Command::Pause => {
                self.set_status(Status::Paused, "paused by the operator".into(), false)
            }
            Command::Resume => {
                // Leave the pause first: set_status holds a paused session as it is.
                if self.rec.status == Status::Paused {
                    self.rec.status = Status::Running;
                }
                self.rec.stalled = 0;
                if let Some(i) = self.rec.tasks.active_index() {
                    self.rec.tasks.tasks[i].turns_on_it = 0;
                }
                self.rec.unknown_since_ms = 0;
                // The operator looked: a disagreement with the transcript counts afresh.
                self.cli.disagree_since_ms = 0;
                self.set_status(Status::Running, "resumed by the operator".into(), false);
                if let Some(s) = self.last_snapshot.clone() {
                    self.on_snapshot(s);
                }
            }
            Command::Stop => {
                if self.rec.awaiting_outcome {
                    self.overridden(
                        "the operator stopped the session before the turn was judged",
                        u64::MAX,
                    );
                }
                self.finish(Status::Stopped, "stopped by the operator".into())
            }
            Command::Decide(approve) => self.answer_permission(approve, "the operator"),
            Command::Override { at_ms } => {
                self.overridden("the operator typed into the pane", at_ms)
            }
        }
    }

    fn tick(&mut self) {
        if self.cli.rewatch && self.rec.status.is_live() {
            self.cli.rewatch = false;
            return self.watch();
        }
        if self.recheck_at_ms != 0 && self.now >= self.recheck_at_ms {
            self.recheck_at_ms = 0;
            self.call(Effect::Capture, Flow::Capturing);
            return;
        }
        if self.rec.dry_run && self.next_dry_fire_ms != 0 && self.now >= self.next_dry_fire_ms {
            self.next_dry_fire_ms = 0;
            if let Some(s) = self.last_snapshot.clone() {
                self.on_snapshot(s);
            }
        }
    }

    // ───────────────────────── effects ─────────────────────────

    /// Asks for one result-bearing effect; its result continues `flow`.
    pub(super) fn call(&mut self, effect: Effect, flow: Flow) {
        debug_assert!(effect.answers());
        self.out.push(effect);
        self.flow = flow;
    }

    pub(super) fn publish(&mut self, turn: Option<TurnRecord>, event: &str) {
        self.out.push(Effect::Publish(Update {
            record: self.rec.clone(),
            turn,
            event: event.to_string(),
        }));
    }

    /// Saves the record and bumps its update time.
    pub(super) fn save(&mut self, durable: bool) {
        self.rec.updated_ms = self.now.max(self.rec.updated_ms + 1);
        self.out.push(Effect::Save {
            record: self.rec.clone(),
            durable,
        });
    }

    pub(super) fn audit_entry(&self, kind: AuditKind, text: &str, detail: String) -> AuditEntry {
        AuditEntry {
            unix_ms: self.now,
            session: self.rec.id.clone(),
            machine: self.rec.machine.clone(),
            pane: self.rec.pane_id.clone(),
            kind,
            text: text.to_string(),
            detail,
        }
    }

    pub(super) fn audit(&mut self, kind: AuditKind, text: &str, detail: String) {
        let entry = self.audit_entry(kind, text, detail);
        self.out.push(Effect::Audit(entry));
    }

    /// Changes the session's status. A paused session stays paused through whatever the
    /// pane or its agent does (dialogs, limits, disconnects, restarts); only the operator
    /// leaves a pause ([`Command::Resume`]), or the session ends.
    pub(super) fn set_status(&mut self, status: Status, reason: String, auto_resume: bool) {
        if self.rec.status == status && self.rec.reason == reason {
            return;
        }
        if self.rec.status == Status::Paused && status != Status::Paused && status.is_live() {
            tracing::debug!(target: "coord.engine", session = %self.rec.id, status = status.as_str(), %reason, "paused: status change held until resume");
            return;
        }
        tracing::info!(target: "coord.engine", session = %self.rec.id, status = status.as_str(), %reason, "session status");
        self.rec.status = status;
        self.rec.reason = reason.clone();
        self.rec.auto_resume = auto_resume;
        if status == Status::Escalated {
            self.audit(AuditKind::Escalated, "", reason.clone());
        }
        // Status changes are rare and an operator acts on them: make them durable now.
        self.save(true);
        self.publish(None, &reason);
    }

    /// Ends the session: the summary is audited, the record made durable, the pane freed.
    pub(super) fn finish(&mut self, status: Status, reason: String) {
        self.rec.status = status;
        self.rec.reason = reason;
        let mut frozen = crate::summary::SessionSummary::of(&self.rec);
        // The time `save` stamps the record with, below.
        frozen.ended_ms = self.now.max(self.rec.updated_ms + 1);
        self.rec.summary = Some(frozen);
        let summary = self.rec.end_summary();
        self.audit(AuditKind::Session, "", summary.clone());
        self.save(true);
        self.publish(None, &summary);
        self.out.push(Effect::Release);
    }
}

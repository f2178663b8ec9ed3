//! In-process tests of the session machine: a scripted pane (real captures from
//! `tests/fixtures/panes`), a scripted model and agent, and a virtual clock. Each test
//! feeds events and carries out effects the way [`super::task`] does, so every engine
//! behaviour is tested without tmux, gRPC or sled.

#![allow(clippy::unwrap_used)]

mod decide;
mod evidence;
mod flows;
mod shell;
mod table;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use karl_common::detect::{CaptureMeta, Detector};
use karl_common::gate::Gate;
use karl_common::pb;

use super::machine::{CallError, Deps, Effect, Event, Session};
use super::prompt::ModelAnswer;
use super::EngineConfig;
use crate::context::{Calibrations, TaskGraph};
use crate::records::{AuditEntry, AuditKind, SessionRecord, Status, TurnRecord};

/// Real captures, one per pane state.
pub const IDLE: &str = "cc330-basic-120x40__after-answer";
pub const WORKING: &str = "cc330-basic-120x40__streaming";
pub const PERMISSION: &str = "cc-sleep-tool-120x24__perm";
pub const DIALOG: &str = "cc330-apikey-120x40__apikey";
pub const DRAFT: &str = "cc330-basic-120x40__typed";
pub const EXITED: &str = "cc330-basic-120x40__exited";
pub const LIMITED: &str = "cc330-limit-5h-100x30__limit";
/// A blank pane: nothing to read.
pub const UNKNOWN: &str = "";

pub const T0: u64 = 1_800_000_000_000;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes")
}

/// A pane at a plain bash prompt, nothing running in it.
pub fn shell_snapshot(seq: u64) -> Arc<pb::PaneSnapshot> {
    Arc::new(pb::PaneSnapshot {
        pane: Some(pb::PaneInfo {
            pane_id: "%1".into(),
            current_command: "bash".into(),
            width: 120,
            height: 40,
            processes: vec!["bash".into()],
            ..Default::default()
        }),
        stable_hash: format!("shell#{seq}"),
        text: "dev@mac2 shop $ ".into(),
        cursor_x: 16,
        seq,
        ..Default::default()
    })
}

/// A snapshot of capture `name` as the agent would send it.
pub fn snapshot(name: &str, seq: u64) -> Arc<pb::PaneSnapshot> {
    let (text, ansi, meta) = if name.is_empty() {
        (String::new(), String::new(), CaptureMeta::default())
    } else {
        let read = |ext: &str| std::fs::read_to_string(fixtures().join(format!("{name}.{ext}")));
        let meta: CaptureMeta = serde_json::from_str(&read("json").unwrap()).unwrap();
        (read("txt").unwrap(), read("ansi").unwrap_or_default(), meta)
    };
    let command = meta.pane_current_command.clone().unwrap_or_default();
    // One pane throughout: the login shell, and Claude Code until it exits.
    let processes = if name == EXITED {
        vec!["zsh".to_string()]
    } else {
        vec!["zsh".to_string(), "claude".to_string()]
    };
    Arc::new(pb::PaneSnapshot {
        pane: Some(pb::PaneInfo {
            pane_id: "%1".into(),
            current_command: command,
            title: meta.pane_title.clone().unwrap_or_default(),
            width: meta.width.unwrap_or(80),
            height: meta.height.unwrap_or(24),
            processes,
            ..Default::default()
        }),
        stable_hash: format!("{name}#{seq}"),
        text,
        ansi,
        cursor_x: meta.cursor_x.unwrap_or(0),
        cursor_y: meta.cursor_y.unwrap_or(0),
        seq,
        ..Default::default()
    })
}

pub fn record() -> SessionRecord {
    SessionRecord {
        id: "mac2_1_1".into(),
        machine: "mac2".into(),
        target: "agent:1.1".into(),
        pane_id: "%1".into(),
        project: "shop".into(),
        goal: "add a health endpoint".into(),
        path: "/Users/dev/shop".into(),
        max_turns: 10,
        tasks: TaskGraph::from_steps([
            "Add a GET /health route that returns ok",
            "Write a test for the /health route",
        ]),
        status: Status::Running,
        ..Default::default()
    }
}

pub fn deps(cfg: EngineConfig) -> Deps {
    Deps {
        detector: Arc::new(Detector::embedded()),
        gate: Arc::new(Gate::new()),
        cfg: Arc::new(cfg),
        calibrations: Arc::new(Mutex::new(Calibrations::default())),
        has_model: true,
        peers: Arc::new(|_| Vec::new()),
        opinions: Arc::default(),
    }
}

/// A machine and the world around it, scripted.
pub struct Harness {
    pub s: Session,
    pub now: u64,
    seq: u64,
    /// What a capture returns.
    pub screen: Arc<pb::PaneSnapshot>,
    /// What the pane shows once a prompt is typed.
    pub after_typing: &'static str,
    pub model: VecDeque<Result<String, String>>,
    pub inject: VecDeque<Result<pb::InjectResult, String>>,
    pub commit_error: Option<String>,
    pub watch: Result<(), CallError>,
    /// What each verify run returns, in order.
    pub checks: VecDeque<Result<pb::CheckResult, String>>,
    /// Every effect carried out, in order.
    pub effects: Vec<Effect>,
}

/// Claude Code's `PermissionRequest` hook asking about a Bash `command`.
pub fn permission_hook(command: &str, request: u64) -> Event {
    Event::Hook(Arc::new(pb::HookEvent {
        hook_request: request,
        pane_id: "%1".into(),
        event: "PermissionRequest".into(),
        cli_session: "abc-123".into(),
        tool_name: "Bash".into(),
        tool_input: serde_json::json!({ "command": command }).to_string(),
        unix_ms: T0,
    }))
}

impl Harness {
    pub fn new(rec: SessionRecord) -> Self {
        Self::with(rec, EngineConfig::default())
    }

    pub fn with(rec: SessionRecord, cfg: EngineConfig) -> Self {
        Harness {
            s: Session::new(rec, Vec::new(), deps(cfg)),
            now: T0,
            seq: 1,
            screen: snapshot(IDLE, 1),
            after_typing: WORKING,
            model: VecDeque::new(),
            inject: VecDeque::new(),
            commit_error: None,
            watch: Ok(()),
            checks: VecDeque::new(),
            effects: Vec::new(),
        }
    }

    pub fn rec(&self) -> &SessionRecord {
        self.s.record()
    }

    /// Feeds one event and carries out the effects to completion.
    pub fn feed(&mut self, event: Event) {
        let mut queue: VecDeque<Effect> = self.s.on(self.now, event).into();
        while let Some(effect) = queue.pop_front() {
            let result = self.perform(&effect);
            self.effects.push(effect);
            if let Some(ev) = result {
                queue.extend(self.s.on(self.now, ev));
            }
        }
    }

    /// The pane settles on capture `name`; its snapshot arrives.
    pub fn show(&mut self, name: &str) {
        self.seq += 1;
        self.screen = snapshot(name, self.seq);
        let snap = self.screen.clone();
        self.feed(Event::Snapshot(snap));
    }

    /// The clock moves on by `ms`; one tick arrives.
    pub fn advance(&mut self, ms: u64) {
        self.now += ms;
        self.feed(Event::Tick);
    }

    fn perform(&mut self, effect: &Effect) -> Option<Event> {
        match effect {
            Effect::Watch => Some(Event::Watched(self.watch.clone())),
            Effect::Capture => Some(Event::Captured(Ok(self.screen.clone()))),
            Effect::AskModel(_) => {
                let reply = self
                    .model
                    .pop_front()
                    .unwrap_or(Err("no scripted reply".into()));
                Some(Event::ModelReplied(reply.map(|text| ModelAnswer {
                    text,
                    latency_ms: 40,
                    prompt_tokens: Some(900),
                    cached_tokens: Some(600),
                })))
            }
            Effect::Type { .. } | Effect::Launch(_) => {
                let default = Ok(pb::InjectResult {
                    outcome: pb::InjectOutcome::Submitted as i32,
                    snapshot_seq: self.seq,
                    ..Default::default()
                });
                let r = self.inject.pop_front().unwrap_or(default);
                if r.as_ref()
                    .is_ok_and(|i| i.outcome().eq(&pb::InjectOutcome::Submitted))
                {
                    self.seq += 1;
                    self.screen = snapshot(self.after_typing, self.seq);
                }
                Some(Event::Typed(r))
            }
            Effect::SendKeys(_) => Some(Event::KeysSent(Ok(()))),
            Effect::RunCheck(_) => Some(Event::Checked(
                self.checks
                    .pop_front()
                    .unwrap_or(Err("no scripted verify result".into())),
            )),
            Effect::Sleep(d) => {
                self.now += d.as_millis() as u64;
                Some(Event::Woke)
            }
            Effect::CommitTurn { ack: true, .. } => Some(Event::Committed(
                self.commit_error.clone().map_or(Ok(()), Err),
            )),
            Effect::CommitTurn { .. }
            | Effect::Save { .. }
            | Effect::Audit(_)
            | Effect::Publish(_)
            | Effect::AnswerHook(_)
            | Effect::Release => None,
        }
    }

    // ─── what happened ───

    pub fn typed(&self) -> Vec<String> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Type { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    /// Command lines typed to start the agent CLI.
    pub fn launched(&self) -> Vec<String> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::Launch(text) => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn keys(&self) -> Vec<Vec<String>> {
        self.effects
            .iter()
            .filter_map(|e| match e {
                Effect::SendKeys(k) => Some(k.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn audits(&self, kind: AuditKind) -> Vec<AuditEntry> {
        let mut out: Vec<AuditEntry> = Vec::new();
        for e in &self.effects {
            match e {
                Effect::Audit(a) if a.kind == kind => out.push(a.clone()),
                Effect::CommitTurn { audit, .. } => {
                    out.extend(audit.iter().filter(|a| a.kind == kind).cloned())
                }
                _ => {}
            }
        }
        out
    }

    /// The last version of every turn written.
    pub fn turns(&self) -> Vec<TurnRecord> {
        let mut out: Vec<TurnRecord> = Vec::new();
        for e in &self.effects {
            if let Effect::CommitTurn { turn, .. } = e {
                match out.iter_mut().find(|t| t.n == turn.n) {
                    Some(t) => *t = turn.clone(),
                    None => out.push(turn.clone()),
                }
            }
        }
        out
    }

    pub fn released(&self) -> bool {
        self.effects.iter().any(|e| matches!(e, Effect::Release))
    }

    /// Position of the first effect matching `f`.
    pub fn position(&self, f: impl Fn(&Effect) -> bool) -> Option<usize> {
        self.effects.iter().position(f)
    }
}

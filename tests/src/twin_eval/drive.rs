//! The two ways of driving a recorded session that the evaluation compares, each
//! against the same model server:
//!
//! - [`Style::Raw`], the previous driver: the last 80 lines of the pane under a generic
//!   system prompt, the reply typed as it comes (no memory, no gate).
//! - [`Style::Karl`]: KARL's own session machine in dry-run mode — the plan from the
//!   model, the context stack, the gate, regenerate → plan step → escape — fed the
//!   recorded screens one by one, the way `karl-ctl drive --dry-run` would see them.
//!   Two sessions recorded on one machine at the same time run interleaved, each the
//!   other's peer (the gate's cross-contamination fence).
//!
//! What each proposes per screen, and every model call's cost, is kept in a
//! [`SessionRun`]; scoring is [`super::score`]'s job.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karl_common::context::{clean_reply, plan_from_reply_guarded, plan_messages, PlanSource};
use karl_common::detect::Detector;
use karl_common::gate::{Gate, OtherSession};
use karl_common::pb;
use karl_coord::context::{Calibrations, TaskGraph, REPLY_MAX_CHARS};
use karl_coord::engine::{Deps, Effect, EngineConfig, Event, ModelAnswer, Session};
use karl_coord::model::{ChatMessage, ChatRequest, HttpModelClient};
use karl_coord::records::{SessionRecord, Status};
use serde::{Deserialize, Serialize};

use super::timeline::{Capture, Timeline};

/// The previous driver's system prompt: generic, no project, no plan.
pub const RAW_SYSTEM: &str = "You are a developer supervising an AI coding assistant in a \
terminal. Read the terminal output and write the next prompt you would send to the \
assistant. Reply with the prompt only.";

/// How many pane lines the previous driver sent.
pub const RAW_LINES: usize = 80;

/// How a session is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    Raw,
    Karl,
}

impl Style {
    pub fn label(self) -> &'static str {
        match self {
            Style::Raw => "previous driver (raw 80 lines, no gate)",
            Style::Karl => "KARL (context stack + gate)",
        }
    }
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// Which screen of the timeline it was for.
    pub capture: usize,
    pub latency_ms: u64,
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    /// The reply as sent, or empty when the call failed.
    pub reply: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a driver would have typed for one screen.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    pub capture: usize,
    /// The prompt that would have reached the pane.
    pub text: String,
    /// `raw`, or KARL's turn source (`model`, `regenerated`, `plan`, `escape`).
    pub source: String,
    /// What the gate said of each candidate tried (KARL only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gate: Vec<String>,
}

/// One session driven in one style.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRun {
    pub id: String,
    pub style: Style,
    pub proposals: Vec<Proposal>,
    pub calls: Vec<Call>,
    /// Candidates the gate refused, by rule (KARL only).
    pub blocked: BTreeMap<String, u32>,
    /// Where KARL's plan came from (`model` or `goal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Why the session stopped before its last screen, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

impl SessionRun {
    fn new(id: &str, style: Style) -> Self {
        SessionRun {
            id: id.to_string(),
            style,
            proposals: Vec::new(),
            calls: Vec::new(),
            blocked: BTreeMap::new(),
            plan: None,
            stopped: None,
        }
    }
}

/// The model server both styles ask.
pub struct Twin {
    client: HttpModelClient,
}

impl Twin {
    pub fn new(client: HttpModelClient) -> Self {
        Twin { client }
    }

    async fn ask(&self, capture: usize, req: &ChatRequest) -> Call {
        let started = Instant::now();
        let r = self.client.chat(req).await;
        let latency_ms = started.elapsed().as_millis() as u64;
        match r {
            Ok(reply) => Call {
                capture,
                latency_ms,
                prompt_tokens: reply.prompt_tokens.unwrap_or(0),
                cached_tokens: reply.cached_tokens.unwrap_or(0),
                reply: reply.text,
                error: None,
            },
            Err(e) => Call {
                capture,
                latency_ms,
                error: Some(e.to_string()),
                ..Call::default()
            },
        }
    }
}

/// The previous driver's request for one screen.
pub fn raw_messages(screen: &str) -> Vec<ChatMessage> {
    let lines: Vec<&str> = screen.trim_end().lines().collect();
    let tail = &lines[lines.len().saturating_sub(RAW_LINES)..];
    vec![
        ChatMessage::system(RAW_SYSTEM),
        ChatMessage::user(tail.join("\n")),
    ]
}

/// The previous driver typed the reply as it came, bar surrounding blanks and quotes.
pub fn raw_prompt(reply: &str) -> String {
    let t = reply.trim();
    let unquoted = t
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(t);
    unquoted.trim().to_string()
}

/// Drives `group` (one session, or sessions recorded side by side on one machine) in
/// the previous driver's style, screen by screen, interleaved.
pub async fn drive_raw(group: &[&Timeline], twin: &Twin, limit: usize) -> Vec<SessionRun> {
    let mut runs: Vec<SessionRun> = group
        .iter()
        .map(|t| SessionRun::new(&t.meta.id, Style::Raw))
        .collect();
    let steps = group.iter().map(|t| t.captures.len()).max().unwrap_or(0);
    for k in 0..steps.min(limit) {
        for (t, run) in group.iter().zip(runs.iter_mut()) {
            let Some(c) = t.captures.get(k) else { continue };
            let call = twin.ask(k, &ChatRequest::new(raw_messages(&c.text))).await;
            let text = raw_prompt(&call.reply);
            run.calls.push(call);
            run.proposals.push(Proposal {
                capture: k,
                text,
                source: "raw".into(),
                gate: Vec::new(),
            });
        }
    }
    runs
}

/// One recorded session inside KARL's session machine.
struct Driven<'a> {
    timeline: &'a Timeline,
    session: Session,
    run: SessionRun,
    seq: u64,
    current: Option<Arc<pb::PaneSnapshot>>,
    previous_text: String,
}

/// Virtual clock start (unix ms).
const T0: u64 = 1_800_000_000_000;
/// Virtual time between recorded screens: a typical agent turn, well past the engine's
/// dry-run pacing and its prompts-per-minute limit, so every screen may fire a turn.
const SCREEN_GAP_MS: u64 = 90_000;

/// Drives `group` with KARL's session machine (dry run), screen by screen, interleaved.
pub async fn drive_karl(
    group: &[&Timeline],
    twin: &Twin,
    gate: Arc<Gate>,
    limit: usize,
) -> Vec<SessionRun> {
    let cfg = EngineConfig {
        gate: gate.clone(),
        ..EngineConfig::default()
    };
    let gap = SCREEN_GAP_MS.max(u64::from(cfg.limits.settle_ms) + 1_000);
    let cfg = Arc::new(cfg);
    let detector = Arc::new(Detector::embedded());
    let calibrations = Arc::new(Mutex::new(Calibrations::default()));
    let steps = group
        .iter()
        .map(|t| t.captures.len())
        .max()
        .unwrap_or(0)
        .min(limit);
    let everyone: Vec<(String, OtherSession)> = group
        .iter()
        .map(|t| {
            (
                t.meta.id.clone(),
                OtherSession {
                    project: t.meta.project.clone(),
                    path: t.meta.path.clone(),
                },
            )
        })
        .collect();
    let mut driven = Vec::new();
    let opinions: Arc<std::sync::Mutex<karl_common::gate::opinion::OpinionCache>> = Arc::default();
    for t in group {
        let everyone = everyone.clone();
        let deps = Deps {
            detector: detector.clone(),
            gate: gate.clone(),
            cfg: cfg.clone(),
            calibrations: calibrations.clone(),
            has_model: true,
            peers: Arc::new(move |id: &str| {
                everyone
                    .iter()
                    .filter(|(other, _)| other != id)
                    .map(|(_, s)| s.clone())
                    .collect()
            }),
            opinions: opinions.clone(),
        };
        let mut run = SessionRun::new(&t.meta.id, Style::Karl);
        let first = t.captures.first().map(|c| c.text.as_str());
        let plan_req = ChatRequest::new(plan_messages(
            &t.meta.project,
            &t.meta.goal,
            &t.meta.path,
            first,
        ));
        let call = twin.ask(0, &plan_req).await;
        let plan = plan_from_reply_guarded(&call.reply, &t.meta.goal, &plan_req.messages);
        run.plan = Some(
            match plan.source {
                PlanSource::Model => "model",
                PlanSource::Goal => "goal",
            }
            .to_string(),
        );
        run.calls.push(call);
        let rec = SessionRecord {
            id: t.meta.id.clone(),
            machine: t.meta.machine.clone(),
            target: t.meta.pane.clone(),
            pane_id: format!("%{}", driven.len() + 1),
            project: t.meta.project.clone(),
            goal: t.meta.goal.clone(),
            path: t.meta.path.clone(),
            dry_run: true,
            max_turns: steps as u32,
            tasks: TaskGraph::from_steps(plan.steps),
            status: Status::Running,
            started_ms: T0,
            updated_ms: T0,
            last_change_ms: T0,
            ..SessionRecord::default()
        };
        driven.push(Driven {
            timeline: t,
            session: Session::new(rec, Vec::new(), deps),
            run,
            seq: 0,
            current: None,
            previous_text: String::new(),
        });
    }
    let mut now = T0;
    for k in 0..steps {
        now += gap;
        for d in driven.iter_mut() {
            let Some(c) = d.timeline.captures.get(k) else {
                continue;
            };
            if matches!(
                d.session.record().status,
                Status::Failed | Status::Done | Status::Stopped
            ) {
                continue;
            }
            d.seq += 1;
            let snap = Arc::new(snapshot(c, &d.previous_text, d.seq, &d.timeline.meta.id));
            d.previous_text = c.text.clone();
            d.current = Some(snap.clone());
            // The first screen is the one the session starts on (its first capture).
            let event = if k == 0 {
                Event::Start { connected: true }
            } else {
                Event::Snapshot(snap)
            };
            feed(d, now, event, twin, k).await;
            let rec = d.session.record();
            if d.run.stopped.is_none()
                && matches!(
                    rec.status,
                    Status::Escalated | Status::Failed | Status::Done | Status::Stopped
                )
            {
                d.run.stopped = Some(format!(
                    "screen {k}: {}: {}",
                    rec.status.as_str(),
                    rec.reason
                ));
            }
        }
    }
    driven
        .into_iter()
        .map(|mut d| {
            d.run.blocked = d
                .session
                .record()
                .rejections
                .iter()
                .map(|(rule, n)| (rule.as_str().to_string(), *n))
                .collect();
            d.run
        })
        .collect()
}

/// Feeds one event and carries out its effects to completion, as the engine's task
/// would for a dry run: model calls go to the twin, turns are recorded as proposals,
/// nothing is typed.
async fn feed(d: &mut Driven<'_>, now: u64, event: Event, twin: &Twin, k: usize) {
    let mut now = now;
    let mut queue: VecDeque<Effect> = d.session.on(now, event).into();
    while let Some(effect) = queue.pop_front() {
        let result = match effect {
            Effect::Watch => Some(Event::Watched(Ok(()))),
            Effect::Capture => d.current.clone().map(|s| Event::Captured(Ok(s))),
            Effect::AskModel(req) => {
                let call = twin.ask(k, &req).await;
                let answer = match &call.error {
                    None => Ok(ModelAnswer {
                        text: call.reply.clone(),
                        latency_ms: call.latency_ms,
                        prompt_tokens: (call.prompt_tokens > 0).then_some(call.prompt_tokens),
                        cached_tokens: (call.prompt_tokens > 0).then_some(call.cached_tokens),
                    }),
                    Some(e) => Err(e.clone()),
                };
                d.run.calls.push(call);
                Some(Event::ModelReplied(answer))
            }
            Effect::CommitTurn {
                turn, ack: true, ..
            } => {
                d.run.proposals.push(Proposal {
                    capture: k,
                    text: turn.prompt.clone(),
                    source: turn.source.as_str().to_string(),
                    gate: turn.gate.clone(),
                });
                Some(Event::Committed(Ok(())))
            }
            Effect::Type { .. } | Effect::Launch(_) => {
                Some(Event::Typed(Err("dry run: nothing is typed".into())))
            }
            Effect::SendKeys(_) => Some(Event::KeysSent(Ok(()))),
            Effect::RunCheck(_) => {
                Some(Event::Checked(Err("no verify command in a replay".into())))
            }
            Effect::Sleep(pause) => {
                now += pause.min(Duration::from_secs(60)).as_millis() as u64;
                Some(Event::Woke)
            }
            Effect::CommitTurn { .. }
            | Effect::Save { .. }
            | Effect::Audit(_)
            | Effect::Publish(_)
            | Effect::AnswerHook(_)
            | Effect::Release => None,
        };
        if let Some(ev) = result {
            queue.extend(d.session.on(now, ev));
        }
    }
}

/// A recorded screen as the agent would report it: the lines new since the last one
/// are the turn's output.
fn snapshot(c: &Capture, previous: &str, seq: u64, id: &str) -> pb::PaneSnapshot {
    let before: std::collections::HashSet<&str> = previous.lines().collect();
    let new_lines = c
        .text
        .lines()
        .filter(|l| !l.trim().is_empty() && !before.contains(l))
        .map(str::to_string)
        .collect();
    pb::PaneSnapshot {
        pane: Some(pb::PaneInfo {
            pane_id: id.to_string(),
            current_command: c.current_command.clone(),
            title: c.title.clone(),
            width: c.width,
            height: c.height,
            processes: vec!["zsh".into(), "claude".into()],
            ..Default::default()
        }),
        stable_hash: format!("{id}#{seq}"),
        text: c.text.clone(),
        cursor_x: c.cursor_x,
        cursor_y: c.cursor_y,
        seq,
        new_lines,
        ..Default::default()
    }
}

/// KARL's first model answer per screen, cleaned as the engine cleans it: what the
/// scaffolding alone made the model say, before the gate.
/// Each is `(screen, answer)`.
pub fn first_answers(run: &SessionRun) -> Vec<(usize, String)> {
    let mut seen = std::collections::HashSet::new();
    run.calls
        .iter()
        .skip(usize::from(run.plan.is_some()))
        .filter(|c| c.error.is_none() && seen.insert(c.capture))
        .map(|c| (c.capture, clean_reply(&c.reply, REPLY_MAX_CHARS)))
        .collect()
}

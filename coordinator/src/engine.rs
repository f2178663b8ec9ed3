//! The session engine: one tokio task per driven session, plus manual sends.
//!
//! A session task subscribes to its agent's reports, classifies every settled snapshot
//! of its pane, asks [`session::decide`] what to do, and carries that out: write the
//! next prompt (model → gate → regenerate → plan step → escape prompt), type it through
//! the agent, answer a permission by policy, escalate, wait out a usage limit, or end.
//!
//! Exactly-once typing across crashes: a turn is committed to sled as `pending`
//! *before* the agent is asked to type it, and updated with the agent's result after.
//! A restarted coordinator that finds a `pending` turn never retypes it: it marks it
//! `unconfirmed`, keeps it in the anti-repeat fence, and moves on.
//!
//! Not here: what a screen means ([`karl_common::detect`]), whether a prompt may be
//! typed ([`karl_common::gate`]), how the briefing is built ([`crate::context`]).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use karl_common::detect::{AgentKind, Detection, DetectionInput, Detector, PaneState};
use karl_common::gate::{Gate, GateContext, OtherSession, Verdict};
use karl_common::pb;
use karl_common::target::PaneTarget;
use karl_common::unix_ms;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use crate::context::{
    build_context, clean_reply, detect_messages, parse_detect, parse_plan, plan_messages,
    Calibrations, ContextConfig, ContextInput, Outcome, PaneSignal, Rejection, SessionBrief,
    TaskGraph, TurnNote, REPLY_MAX_CHARS,
};
use crate::error::{CoordError, Result};
use crate::model::{ChatRequest, ModelClient};
use crate::registry::{AgentReport, Registry, AGENT_CALL_TIMEOUT};
use crate::session::{
    decide, pane_key, permission_answer, session_id, Decision, Limits, PermissionAnswer,
    PermissionPolicy, SessionRecord, SnapshotFacts, Status, TurnRecord,
};
use crate::store::{AuditEntry, Store};

/// Everything the engine is configured with.
#[derive(Clone)]
pub struct EngineConfig {
    pub limits: Limits,
    pub context: ContextConfig,
    /// Name used for token calibration (the configured model, or "default").
    pub model_name: String,
    /// Typed into the pane's shell when the agent CLI exits; `None` escalates.
    pub restart_command: Option<String>,
    /// How often the safety timer asks the agent for a fresh capture of a driven pane.
    pub safety_secs: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            context: ContextConfig::default(),
            model_name: "default".into(),
            restart_command: None,
            safety_secs: 30,
        }
    }
}

/// Operator commands to a running session task.
enum Ctl {
    Pause,
    Resume,
    Stop,
    Decide(bool),
}

struct Handle {
    tx: mpsc::Sender<Ctl>,
    updates: broadcast::Sender<pb::SessionUpdate>,
    task: JoinHandle<()>,
}

pub struct Engine {
    registry: Arc<Registry>,
    store: Store,
    gate: Gate,
    detector: Arc<Detector>,
    model: Option<Arc<dyn ModelClient>>,
    cfg: EngineConfig,
    /// The latest record of every session this process knows, live or not.
    records: Mutex<HashMap<String, SessionRecord>>,
    handles: Mutex<HashMap<String, Handle>>,
    calibrations: Mutex<Calibrations>,
    /// The last screen each session saw (for `karl-ctl context`); not persisted.
    screens: Mutex<HashMap<String, Arc<pb::PaneSnapshot>>>,
    stop_tx: watch::Sender<bool>,
    /// Weak self-reference so `&self` methods can spawn session tasks.
    me: std::sync::Weak<Engine>,
}

/// How long a permission menu's selection may take to show where KARL moved it.
const SELECTION_TIMEOUT: Duration = Duration::from_secs(2);

/// How long session tasks get to leave on their own at shutdown.
const SESSION_STOP_GRACE: Duration = Duration::from_secs(2);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type UpdateStream =
    Pin<Box<dyn Stream<Item = std::result::Result<pb::SessionUpdate, tonic::Status>> + Send>>;

/// A prompt chosen for a turn, with how it was arrived at.
struct Candidate {
    prompt: String,
    source: &'static str,
    gate: Vec<String>,
    latency_ms: u64,
    prompt_tokens: u32,
}

impl Engine {
    pub fn new(
        registry: Arc<Registry>,
        store: Store,
        detector: Detector,
        model: Option<Arc<dyn ModelClient>>,
        cfg: EngineConfig,
    ) -> Arc<Self> {
        let records: HashMap<String, SessionRecord> = store
            .sessions::<SessionRecord>()
            .unwrap_or_else(|e| {
                tracing::error!(target: "coord.engine", error = %e, "cannot read stored sessions");
                Vec::new()
            })
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        Arc::new_cyclic(|me| Engine {
            registry,
            store,
            gate: Gate::new(),
            detector: Arc::new(detector),
            model,
            cfg,
            records: Mutex::new(records),
            handles: Mutex::new(HashMap::new()),
            calibrations: Mutex::new(Calibrations::default()),
            screens: Mutex::new(HashMap::new()),
            stop_tx: watch::channel(false).0,
            me: me.clone(),
        })
    }

    /// Restarts the tasks of every live session found in sled (after a coordinator
    /// restart). Each waits for its agent to reconnect.
    pub fn resume_live(&self) {
        let live: Vec<SessionRecord> = lock(&self.records)
            .values()
            .filter(|r| r.status.is_live())
            .cloned()
            .collect();
        for mut rec in live {
            self.reconcile_pending(&mut rec);
            tracing::info!(target: "coord.engine", session = %rec.id, "resuming session");
            self.spawn(rec);
        }
    }

    /// A turn left `pending` by a crash is never retyped: mark it unconfirmed.
    fn reconcile_pending(&self, rec: &mut SessionRecord) {
        let turns: Vec<TurnRecord> = self.store.turns(&rec.id).unwrap_or_default();
        for mut t in turns.into_iter().filter(|t| t.inject == "pending") {
            // The pane may or may not show this prompt: do not wait for it to change.
            rec.inject_hash.clear();
            t.inject = "unconfirmed".into();
            t.reason =
                "coordinator restarted before the agent confirmed this injection; not retyped"
                    .into();
            if let Err(e) = self.store.commit_turn(&rec.id, rec, t.n, &t, &[]) {
                tracing::error!(target: "coord.engine", session = %rec.id, error = %e, "cannot mark a pending turn");
            }
        }
        rec.awaiting_busy = false;
    }

    /// Stops every session task; records stay in sled and resume on the next start. Tasks
    /// leave at their next await point; one still busy after [`SESSION_STOP_GRACE`] (a
    /// model call in flight) is aborted, which is safe: a turn is committed as pending
    /// before it is typed, and a pending turn is never retyped.
    pub async fn shutdown(&self) {
        let _ = self.stop_tx.send(true);
        let tasks: Vec<JoinHandle<()>> = lock(&self.handles).drain().map(|(_, h)| h.task).collect();
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(SESSION_STOP_GRACE, futures::future::join_all(tasks))
            .await
            .is_err()
        {
            tracing::warn!(target: "coord.engine", "session tasks still busy at shutdown; aborting them");
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        if let Err(e) = self.store.flush() {
            tracing::error!(target: "coord.engine", error = %e, "cannot flush the store at shutdown");
        }
    }

    fn other_sessions(&self, except: &str) -> Vec<OtherSession> {
        lock(&self.records)
            .values()
            .filter(|r| r.id != except && r.status.is_live())
            .map(|r| OtherSession {
                project: r.project.clone(),
                path: r.path.clone(),
            })
            .collect()
    }

    fn is_live(&self, id: &str) -> bool {
        lock(&self.records)
            .get(id)
            .is_some_and(|r| r.status.is_live())
    }

    fn audit(
        &self,
        rec: &SessionRecord,
        kind: &str,
        text: &str,
        detail: impl Into<String>,
    ) -> AuditEntry {
        AuditEntry {
            unix_ms: unix_ms(),
            session: rec.id.clone(),
            machine: rec.machine.clone(),
            pane: rec.pane_id.clone(),
            kind: kind.to_string(),
            text: text.to_string(),
            detail: detail.into(),
        }
    }

    // ───────────────────────── operator surface ─────────────────────────

    /// `karl-ctl send`: one prompt typed into a pane outside any session, through the
    /// gate unless forced (a forced send is written to the audit log as such).
    pub async fn manual_send(
        &self,
        machine: &str,
        target: &PaneTarget,
        text: &str,
        force: bool,
    ) -> Result<pb::SendTextReply> {
        // A pane driven by a session is judged against that session's fence.
        let (history, project, path, others) = {
            let records = lock(&self.records);
            let s = records.values().find(|r| {
                r.status.is_live()
                    && r.machine == machine
                    && (r.pane_id == target.to_string() || r.target == target.to_string())
            });
            match s {
                Some(r) => (
                    r.history.clone(),
                    r.project.clone(),
                    r.path.clone(),
                    r.id.clone(),
                ),
                None => (Vec::new(), String::new(), String::new(), String::new()),
            }
        };
        let others = self.other_sessions(&others);
        let verdict = self.gate.check(
            text,
            &GateContext {
                project: &project,
                path: &path,
                history: &history,
                others: &others,
                ..Default::default()
            },
        );
        let reasons = verdict_lines(&verdict);
        let audit = |kind: &str, detail: String| AuditEntry {
            unix_ms: unix_ms(),
            session: String::new(),
            machine: machine.to_string(),
            pane: target.to_string(),
            kind: kind.to_string(),
            text: text.to_string(),
            detail,
        };
        if !verdict.pass && !force {
            self.store
                .append_audit(&audit("blocked", reasons.join("; ")))?;
            return Ok(pb::SendTextReply {
                result: Some(pb::InjectResult {
                    outcome: pb::InjectOutcome::Refused as i32,
                    reason: format!(
                        "blocked by the gate: {} (use --force to override; it is audited)",
                        reasons.join("; ")
                    ),
                    ..Default::default()
                }),
                gate_reasons: reasons,
            });
        }
        if force {
            self.store.append_audit(&audit(
                "forced",
                format!("gate overridden: {}", reasons.join("; ")),
            ))?;
        }
        let inject = match self.inject(machine, &target.to_string(), text, force).await {
            Ok(i) => i,
            Err(e) => {
                self.store.append_audit(&audit("failed", e.to_string()))?;
                return Err(e);
            }
        };
        self.store
            .append_audit(&audit("inject", inject_label(&inject)))?;
        Ok(pb::SendTextReply {
            result: Some(inject),
            gate_reasons: reasons,
        })
    }

    async fn inject(
        &self,
        machine: &str,
        target: &str,
        text: &str,
        force: bool,
    ) -> Result<pb::InjectResult> {
        let inject = pb::Inject {
            target: target.to_string(),
            text: text.to_string(),
            force,
            ..Default::default()
        };
        self.registry.inject(machine, inject).await
    }

    async fn capture(&self, machine: &str, target: &str) -> Result<pb::PaneSnapshot> {
        let capture = pb::Capture {
            target: target.to_string(),
            ansi: true,
            history_lines: 0,
        };
        self.registry.capture(machine, capture).await
    }

    /// `karl-ctl drive`: starts (or resumes) a session and returns once its task runs.
    pub async fn drive(&self, req: pb::DriveRequest) -> Result<pb::SessionSummary> {
        if !req.resume_id.is_empty() || req.resume_latest {
            return self.resume(&req).await;
        }
        let target = PaneTarget::parse(&req.target)?;
        let snap = self.capture(&req.machine, &target.to_string()).await?;
        let pane = snap.pane.clone().unwrap_or_default();
        if pane.pane_id.is_empty() {
            return Err(CoordError::Internal(
                "agent reported a pane without an id".into(),
            ));
        }
        let now = unix_ms();
        let mut rec = SessionRecord {
            id: session_id(&req.machine, &pane.pane_id, now),
            machine: req.machine.clone(),
            target: target.to_string(),
            pane_id: pane.pane_id.clone(),
            project: req.project.trim().to_string(),
            goal: req.goal.trim().to_string(),
            path: if req.path.is_empty() {
                pane.current_path.clone()
            } else {
                req.path.clone()
            },
            dry_run: req.dry_run,
            max_turns: if req.max_turns == 0 {
                self.cfg.limits.default_max_turns
            } else {
                req.max_turns
            },
            permissions: PermissionPolicy::from_pb(req.permissions),
            auto_detect: req.auto_detect,
            started_ms: now,
            updated_ms: now,
            last_change_ms: now,
            status: Status::Running,
            ..Default::default()
        };
        if rec.goal.is_empty() && !req.auto_detect && req.plan.is_empty() {
            return Err(CoordError::InvalidArgument(
                "give the session a goal (--goal \"…\"), a plan (--plan FILE) or --auto-detect"
                    .into(),
            ));
        }
        // One writer per pane: the lock is taken before anything else is written.
        self.store
            .lock_pane(&pane_key(&rec.machine, &rec.pane_id), &rec.id, |holder| {
                self.is_live(holder)
            })
            .map_err(|e| match e {
                crate::store::StoreError::PaneLocked { .. } => CoordError::Conflict(e.to_string()),
                other => CoordError::Store(other),
            })?;

        // Model health decides plan-only before any planning call.
        let healthy = match &self.model {
            Some(m) => match m.health().await {
                Ok(_) => true,
                Err(e) => {
                    rec.reason = format!(
                        "no model answered at {}: running plan-only (set --model-url / KARL_MODEL_URL)",
                        e.endpoint().unwrap_or("the configured endpoints")
                    );
                    false
                }
            },
            None => {
                rec.reason = "no model configured: running plan-only".into();
                false
            }
        };
        rec.plan_only = !healthy;

        if req.auto_detect && (rec.project.is_empty() || rec.goal.is_empty()) {
            let (project, goal) = self.auto_detect(&snap, healthy).await;
            if rec.project.is_empty() {
                rec.project = project;
            }
            if rec.goal.is_empty() {
                rec.goal = goal;
            }
        }
        if rec.project.is_empty() {
            rec.project = std::path::Path::new(&rec.path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "project".into());
        }
        let steps = if !req.plan.is_empty() {
            req.plan.clone()
        } else if healthy {
            self.generate_plan(&rec, &snap).await
        } else {
            Vec::new()
        };
        let steps = if steps.is_empty() {
            vec![rec.goal.clone()]
        } else {
            steps
        };
        rec.tasks = TaskGraph::from_steps(steps);
        self.store.put_session(&rec.id, &rec)?;
        self.store.append_audit(&self.audit(
            &rec,
            "session",
            &rec.goal,
            format!(
                "started{}{}",
                if rec.dry_run { " (dry run)" } else { "" },
                if rec.plan_only { " plan-only" } else { "" }
            ),
        ))?;
        let summary = rec.summary();
        self.spawn(rec);
        Ok(summary)
    }

    async fn resume(&self, req: &pb::DriveRequest) -> Result<pb::SessionSummary> {
        let id = if !req.resume_id.is_empty() {
            req.resume_id.clone()
        } else {
            let target = PaneTarget::parse(&req.target)?.to_string();
            lock(&self.records)
                .values()
                .filter(|r| r.machine == req.machine && (r.target == target || r.pane_id == target))
                .filter(|r| !matches!(r.status, Status::Done))
                .max_by_key(|r| r.started_ms)
                .map(|r| r.id.clone())
                .ok_or_else(|| {
                    CoordError::UnknownSession(format!("{}:{}", req.machine, req.target))
                })?
        };
        if lock(&self.handles)
            .get(&id)
            .is_some_and(|h| !h.task.is_finished())
        {
            return lock(&self.records)
                .get(&id)
                .map(|r| r.summary())
                .ok_or_else(|| CoordError::UnknownSession(id.clone()));
        }
        let mut rec = lock(&self.records)
            .get(&id)
            .cloned()
            .ok_or_else(|| CoordError::UnknownSession(id.clone()))?;
        self.store
            .lock_pane(&rec.pane_key(), &rec.id, |holder| self.is_live(holder))
            .map_err(|e| CoordError::Conflict(e.to_string()))?;
        self.reconcile_pending(&mut rec);
        rec.status = Status::Running;
        rec.reason = "resumed".into();
        if req.max_turns > 0 {
            rec.max_turns = rec.turns + req.max_turns;
        }
        self.store.put_session(&rec.id, &rec)?;
        let summary = rec.summary();
        self.spawn(rec);
        Ok(summary)
    }

    pub fn list(&self, all: bool) -> Result<Vec<pb::SessionSummary>> {
        let mut v: Vec<pb::SessionSummary> = lock(&self.records)
            .values()
            .filter(|r| all || r.status.is_live())
            .map(|r| r.summary())
            .collect();
        v.sort_by_key(|s| s.started_unix_ms);
        Ok(v)
    }

    fn record(&self, id: &str) -> Result<SessionRecord> {
        lock(&self.records)
            .get(id)
            .cloned()
            .ok_or_else(|| CoordError::UnknownSession(id.to_string()))
    }

    pub fn show(&self, id: &str) -> Result<pb::SessionDetail> {
        let rec = self.record(id)?;
        let turns: Vec<TurnRecord> = self.store.turns(id)?;
        let mut json = serde_json::to_value(&rec).unwrap_or_default();
        if let Some(o) = json.as_object_mut() {
            o.insert("summary_line".into(), rec.end_summary().into());
        }
        Ok(pb::SessionDetail {
            summary: Some(rec.summary()),
            json: json.to_string(),
            turns: turns.iter().map(TurnRecord::to_pb).collect(),
        })
    }

    pub fn follow(&self, id: &str, from_start: bool) -> Result<UpdateStream> {
        let rec = self.record(id)?;
        let rx = lock(&self.handles).get(id).map(|h| h.updates.subscribe());
        let backlog: Vec<pb::SessionUpdate> = if from_start {
            self.store
                .turns::<TurnRecord>(id)?
                .iter()
                .map(|t| pb::SessionUpdate {
                    session: Some(rec.summary()),
                    turn: Some(t.to_pb()),
                    event: format!("turn {}", t.n),
                    ended: false,
                })
                .collect()
        } else {
            Vec::new()
        };
        let ended_now = !rec.status.is_live() || rx.is_none();
        let (tx, out) = mpsc::channel(64);
        tokio::spawn(async move {
            for u in backlog {
                if tx.send(Ok(u)).await.is_err() {
                    return;
                }
            }
            let Some(mut rx) = rx.filter(|_| !ended_now) else {
                let _ = tx
                    .send(Ok(pb::SessionUpdate {
                        event: rec.end_summary(),
                        session: Some(rec.summary()),
                        turn: None,
                        ended: true,
                    }))
                    .await;
                return;
            };
            loop {
                match rx.recv().await {
                    Ok(u) => {
                        let ended = u.ended;
                        if tx.send(Ok(u)).await.is_err() || ended {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(out)))
    }

    pub async fn set_state(&self, id: &str, action: &str) -> Result<pb::SessionSummary> {
        let ctl = match action {
            "pause" => Ctl::Pause,
            "resume" => Ctl::Resume,
            "stop" => Ctl::Stop,
            other => {
                return Err(CoordError::InvalidArgument(format!(
                    "unknown action {other:?}: use pause, resume or stop"
                )))
            }
        };
        self.send_ctl(id, ctl).await
    }

    pub async fn decide(&self, id: &str, approve: bool) -> Result<pb::SessionSummary> {
        let rec = self.record(id)?;
        if rec.pending_permission.is_none() && rec.last_state != PaneState::Permission.as_str() {
            return Err(CoordError::FailedPrecondition(format!(
                "session {id} has no pending permission prompt (pane state: {})",
                rec.last_state
            )));
        }
        self.send_ctl(id, Ctl::Decide(approve)).await
    }

    async fn send_ctl(&self, id: &str, ctl: Ctl) -> Result<pb::SessionSummary> {
        let rec = self.record(id)?;
        let tx = lock(&self.handles).get(id).map(|h| h.tx.clone());
        match tx {
            Some(tx) if rec.status.is_live() => {
                tx.send(ctl).await.map_err(|_| {
                    CoordError::FailedPrecondition(format!("session {id} is not running"))
                })?;
                // The task applies it at once; give it a moment so the reply shows the effect.
                for _ in 0..40 {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                    let now = self.record(id)?;
                    if now.updated_ms != rec.updated_ms {
                        return Ok(now.summary());
                    }
                }
                Ok(self.record(id)?.summary())
            }
            _ => Err(CoordError::FailedPrecondition(format!(
                "session {id} is {} (resume it with karl-ctl drive --resume {id})",
                rec.status.as_str()
            ))),
        }
    }

    /// The newest `limit` audit entries (0 = 200), oldest first; `session` filters.
    pub fn audit_log(&self, session: &str, limit: u32) -> Result<Vec<pb::AuditRecord>> {
        let all = self.store.audit((!session.is_empty()).then_some(session))?;
        let limit = if limit == 0 { 200 } else { limit as usize };
        let skip = all.len().saturating_sub(limit);
        Ok(all
            .into_iter()
            .skip(skip)
            .map(|a| pb::AuditRecord {
                unix_ms: a.unix_ms,
                session: a.session,
                machine: a.machine,
                pane: a.pane,
                kind: a.kind,
                text: a.text,
                detail: a.detail,
            })
            .collect())
    }

    /// The exact messages the model would get for this session now.
    pub fn context(&self, id: &str) -> Result<pb::ContextReply> {
        let rec = self.record(id)?;
        let screen = lock(&self.screens)
            .get(id)
            .map(|s| s.text.clone())
            .unwrap_or_default();
        let signal = if rec.last_error {
            PaneSignal::Error
        } else {
            PaneSignal::infer(&screen)
        };
        Ok(self.context_reply(&rec, &screen, signal))
    }

    fn build(
        &self,
        rec: &SessionRecord,
        screen: &str,
        signal: PaneSignal,
        rejections: &[Rejection],
    ) -> crate::context::Context {
        let estimator = lock(&self.calibrations).estimator(&self.cfg.model_name);
        session_context(
            rec,
            screen,
            signal,
            rejections,
            &self.cfg.context,
            &estimator,
        )
    }

    fn context_reply(
        &self,
        rec: &SessionRecord,
        screen: &str,
        signal: PaneSignal,
    ) -> pb::ContextReply {
        context_reply(&self.build(rec, screen, signal, &[]))
    }

    async fn generate_plan(&self, rec: &SessionRecord, snap: &pb::PaneSnapshot) -> Vec<String> {
        let Some(model) = &self.model else {
            return Vec::new();
        };
        let req = ChatRequest::new(plan_messages(
            &rec.project,
            &rec.goal,
            &rec.path,
            Some(&snap.text),
        ));
        match model.complete(&req).await {
            Ok(reply) => parse_plan(&reply.text),
            Err(e) => {
                tracing::warn!(target: "coord.engine", session = %rec.id, error = %e, "plan generation failed; using the goal as the plan");
                Vec::new()
            }
        }
    }

    async fn auto_detect(&self, snap: &pb::PaneSnapshot, healthy: bool) -> (String, String) {
        let cwd = snap
            .pane
            .as_ref()
            .map(|p| p.current_path.clone())
            .unwrap_or_default();
        let fallback_project = std::path::Path::new(&cwd)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let fallback = (
            fallback_project,
            "continue the work shown in the pane".to_string(),
        );
        let Some(model) = self.model.as_ref().filter(|_| healthy) else {
            return fallback;
        };
        match model
            .complete(&ChatRequest::new(detect_messages(&snap.text, Some(&cwd))))
            .await
        {
            Ok(reply) => {
                let d = parse_detect(&reply.text);
                (
                    d.project.filter(|p| !p.is_empty()).unwrap_or(fallback.0),
                    d.goal.filter(|g| !g.is_empty()).unwrap_or(fallback.1),
                )
            }
            Err(_) => fallback,
        }
    }

    fn spawn(&self, rec: SessionRecord) {
        let Some(me) = self.me.upgrade() else { return };
        let (tx, rx) = mpsc::channel(16);
        let (updates, _) = broadcast::channel(256);
        let id = rec.id.clone();
        lock(&self.records).insert(id.clone(), rec.clone());
        let task = tokio::spawn(run_session(me, rec, rx, updates.clone()));
        let old = lock(&self.handles).insert(id, Handle { tx, updates, task });
        if let Some(old) = old {
            old.task.abort();
        }
    }
}

/// The context stack for a session record and a screen (pure; karl-ctl's offline
/// `context --capture` calls it too).
pub fn session_context(
    rec: &SessionRecord,
    screen: &str,
    signal: PaneSignal,
    rejections: &[Rejection],
    config: &ContextConfig,
    estimator: &crate::context::TokenEstimator,
) -> crate::context::Context {
    let brief = SessionBrief {
        project: rec.project.clone(),
        goal: rec.goal.clone(),
        path: rec.path.clone(),
        machine: rec.machine.clone(),
        pane: rec.target.clone(),
        turn: rec.turns + 1,
        max_turns: rec.max_turns,
    };
    build_context(&ContextInput {
        brief: &brief,
        tasks: &rec.tasks,
        digest: &rec.digest,
        recent_prompts: &rec.history,
        screen,
        signal,
        rejections,
        phase: None,
        config,
        estimator,
    })
}

/// The wire form of a built context.
pub fn context_reply(ctx: &crate::context::Context) -> pb::ContextReply {
    pb::ContextReply {
        messages: ctx
            .messages
            .iter()
            .map(|m| pb::ChatMessage {
                role: format!("{:?}", m.role).to_lowercase(),
                content: m.content.clone(),
            })
            .collect(),
        estimated_tokens: ctx.estimated_tokens,
        budget: ctx.budget,
    }
}

fn verdict_lines(v: &Verdict) -> Vec<String> {
    v.reasons
        .iter()
        .map(|r| {
            format!(
                "{}: {}",
                serde_json::to_value(r.rule)
                    .ok()
                    .and_then(|j| j.as_str().map(String::from))
                    .unwrap_or_default(),
                r.detail
            )
        })
        .collect()
}

fn inject_label(i: &pb::InjectResult) -> String {
    match i.outcome() {
        pb::InjectOutcome::Submitted => "submitted".into(),
        pb::InjectOutcome::SubmittedAfterRetry => "submitted-after-retry".into(),
        pb::InjectOutcome::Refused => format!("refused: {}", i.reason),
        pb::InjectOutcome::Failed | pb::InjectOutcome::Unspecified => {
            format!("failed: {}", i.reason)
        }
    }
}

/// Lines that say the agent finished what it was asked.
fn completion_signal(lines: &[String]) -> bool {
    use std::sync::LazyLock;
    static RE: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(done|completed?|finished|all (\d+ )?tests pass(ed)?|implemented|is now (working|in place))\b").ok()
    });
    match RE.as_ref() {
        Some(re) => lines.iter().any(|l| re.is_match(l)),
        None => false,
    }
}

/// Per-task state that is not worth storing.
struct Live {
    agent: AgentKind,
    last_snapshot: Option<Arc<pb::PaneSnapshot>>,
    last_detection: Option<Detection>,
    /// Dry run: when the next recorded turn may fire.
    next_dry_fire_ms: u64,
    /// Rate limit or usage limit: when to look again.
    recheck_at_ms: u64,
}

async fn run_session(
    engine: Arc<Engine>,
    mut rec: SessionRecord,
    mut ctl: mpsc::Receiver<Ctl>,
    updates: broadcast::Sender<pb::SessionUpdate>,
) {
    let mut stop = engine.stop_tx.subscribe();
    let mut reports = engine.registry.subscribe(&rec.machine);
    let mut live = Live {
        agent: AgentKind::Unknown,
        last_snapshot: None,
        last_detection: None,
        next_dry_fire_ms: 0,
        recheck_at_ms: 0,
    };
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let task = SessionTask {
        engine: engine.clone(),
        updates,
    };
    task.publish(&rec, None, "session running");
    if engine.registry.is_connected(&rec.machine) {
        task.start_watch(&mut rec, &mut live).await;
    } else {
        let why = format!("agent {} is not connected; waiting for it", rec.machine);
        task.set_status(&mut rec, Status::Waiting, why, false);
    }
    loop {
        if !rec.status.is_live() {
            break;
        }
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            Some(c) = ctl.recv() => task.on_ctl(&mut rec, &mut live, c).await,
            r = reports.recv() => match r {
                Ok(AgentReport::Snapshot(s)) if s.pane.as_ref().is_some_and(|p| p.pane_id == rec.pane_id) => {
                    task.on_snapshot(&mut rec, &mut live, s).await;
                }
                Ok(AgentReport::PaneEvent(ev)) if ev.pane_id == rec.pane_id => {
                    if ev.kind == pb::PaneEventKind::Closed as i32 {
                        task.finish(&mut rec, Status::Failed, "the pane was closed".into());
                    } else if ev.kind == pb::PaneEventKind::ServerGone as i32 {
                        task.set_status(&mut rec, Status::Waiting, "the tmux server is gone; waiting for it to come back".into(), false);
                    } else if ev.kind == pb::PaneEventKind::ServerBack as i32 {
                        task.start_watch(&mut rec, &mut live).await;
                    } else if ev.kind == pb::PaneEventKind::Output as i32 {
                        rec.awaiting_busy = false;
                    }
                }
                Ok(AgentReport::Disconnected) => {
                    let why = format!("agent {} disconnected; waiting for it", rec.machine);
                    task.set_status(&mut rec, Status::Waiting, why, false);
                }
                Ok(AgentReport::Connected) => task.start_watch(&mut rec, &mut live).await,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(target: "coord.engine", session = %rec.id, skipped = n, "session lagged behind its agent's reports");
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = tick.tick() => task.on_tick(&mut rec, &mut live).await,
        }
    }
    let _ = engine.store.unlock_pane(&rec.pane_key(), &rec.id);
    let _ = engine
        .registry
        .send(
            &rec.machine,
            pb::agent_command::Kind::Unwatch(pb::Unwatch {
                target: rec.pane_id.clone(),
            }),
        )
        .await;
}

struct SessionTask {
    engine: Arc<Engine>,
    updates: broadcast::Sender<pb::SessionUpdate>,
}

impl SessionTask {
    fn publish(&self, rec: &SessionRecord, turn: Option<&TurnRecord>, event: &str) {
        let _ = self.updates.send(pb::SessionUpdate {
            session: Some(rec.summary()),
            turn: turn.map(TurnRecord::to_pb),
            event: event.to_string(),
            ended: !rec.status.is_live(),
        });
    }

    /// Saves the record (sled + the in-memory view) and bumps its update time.
    fn save(&self, rec: &mut SessionRecord) {
        rec.updated_ms = unix_ms().max(rec.updated_ms + 1);
        if let Err(e) = self.engine.store.update_session(&rec.id, rec) {
            tracing::error!(target: "coord.engine", session = %rec.id, error = %e, "cannot save the session");
        }
        lock(&self.engine.records).insert(rec.id.clone(), rec.clone());
    }

    /// Changes the session's status. A paused session stays paused through whatever the
    /// pane or its agent does (dialogs, limits, disconnects, restarts); only the operator
    /// leaves a pause ([`Ctl::Resume`]), or the session ends.
    fn set_status(
        &self,
        rec: &mut SessionRecord,
        status: Status,
        reason: String,
        auto_resume: bool,
    ) {
        if rec.status == status && rec.reason == reason {
            return;
        }
        if rec.status == Status::Paused && status != Status::Paused && status.is_live() {
            tracing::debug!(target: "coord.engine", session = %rec.id, status = status.as_str(), %reason, "paused: status change held until resume");
            return;
        }
        tracing::info!(target: "coord.engine", session = %rec.id, status = status.as_str(), %reason, "session status");
        rec.status = status;
        rec.reason = reason.clone();
        rec.auto_resume = auto_resume;
        if status == Status::Escalated {
            let a = self.engine.audit(rec, "escalated", "", reason.clone());
            let _ = self.engine.store.append_audit(&a);
        }
        self.save(rec);
        // Status changes are rare and an operator acts on them: make them durable now.
        let _ = self.engine.store.flush();
        self.publish(rec, None, &reason);
    }

    fn finish(&self, rec: &mut SessionRecord, status: Status, reason: String) {
        rec.status = status;
        rec.reason = reason;
        let summary = rec.end_summary();
        let a = self.engine.audit(rec, "session", "", summary.clone());
        let _ = self.engine.store.append_audit(&a);
        self.save(rec);
        let _ = self.engine.store.flush();
        self.publish(rec, None, &summary);
    }

    async fn start_watch(&self, rec: &mut SessionRecord, live: &mut Live) {
        // A new watch numbers its snapshots from 1 again.
        rec.typed_at_seq = 0;
        let watch = pb::agent_command::Kind::Watch(pb::Watch {
            target: rec.pane_id.clone(),
            settle_ms: self.engine.cfg.limits.settle_ms,
            safety_secs: self.engine.cfg.safety_secs,
            ansi: true,
        });
        if let Err(e) = self
            .engine
            .registry
            .call(&rec.machine, watch, AGENT_CALL_TIMEOUT)
            .await
        {
            if matches!(e, CoordError::AgentFailed { .. }) {
                self.finish(
                    rec,
                    Status::Failed,
                    format!("cannot watch pane {}: {e}", rec.pane_id),
                );
            } else {
                self.set_status(
                    rec,
                    Status::Waiting,
                    format!("cannot watch the pane yet: {e}"),
                    false,
                );
            }
            return;
        }
        if rec.status == Status::Waiting {
            self.set_status(rec, Status::Running, "agent connected".into(), false);
        }
        match self.engine.capture(&rec.machine, &rec.pane_id).await {
            Ok(s) => self.on_snapshot(rec, live, Arc::new(s)).await,
            Err(e) => {
                tracing::warn!(target: "coord.engine", session = %rec.id, error = %e, "first capture failed")
            }
        }
    }

    async fn on_ctl(&self, rec: &mut SessionRecord, live: &mut Live, c: Ctl) {
        match c {
            Ctl::Pause => {
                self.set_status(rec, Status::Paused, "paused by the operator".into(), false)
            }
            Ctl::Resume => {
                // Leave the pause first: set_status holds a paused session as it is.
                if rec.status == Status::Paused {
                    rec.status = Status::Running;
                }
                rec.stalled = 0;
                if let Some(i) = rec.tasks.active_index() {
                    rec.tasks.tasks[i].turns_on_it = 0;
                }
                rec.unknown_since_ms = 0;
                self.set_status(
                    rec,
                    Status::Running,
                    "resumed by the operator".into(),
                    false,
                );
                if let Some(s) = live.last_snapshot.clone() {
                    self.on_snapshot(rec, live, s).await;
                }
            }
            Ctl::Stop => self.finish(rec, Status::Stopped, "stopped by the operator".into()),
            Ctl::Decide(approve) => {
                self.answer_permission(rec, approve, "the operator").await;
            }
        }
    }

    /// Answers the pending permission prompt by the label of the option meant: moves the
    /// selection there, checks on a fresh capture that it landed, then presses Enter. A
    /// menu KARL cannot read, or a selection that does not land, is escalated — never
    /// answered with a guessed key.
    async fn answer_permission(&self, rec: &mut SessionRecord, approve: bool, by: &str) {
        let req = rec.pending_permission.clone().unwrap_or_default();
        let what = format!("{} {}", req.tool, req.action).trim().to_string();
        let verb = if approve { "approve" } else { "deny" };
        let result = match permission_answer(&req, approve) {
            Ok(answer) => self.select_and_confirm(rec, &answer).await.map(|()| answer),
            Err(why) => Err(why),
        };
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
        let a = self.engine.audit(rec, "permission", &what, detail.clone());
        let _ = self.engine.store.append_audit(&a);
        if result.is_err() {
            self.set_status(
                rec,
                Status::Escalated,
                format!("{detail}; answer it in the pane"),
                true,
            );
            return;
        }
        rec.pending_permission = None;
        if rec.status == Status::Escalated {
            rec.status = Status::Running;
            rec.reason = detail.clone();
        }
        self.save(rec);
        self.publish(rec, None, &detail);
    }

    /// Moves the menu's selection onto `answer`, waits until a capture shows it there, and
    /// confirms with Enter.
    async fn select_and_confirm(
        &self,
        rec: &SessionRecord,
        answer: &PermissionAnswer,
    ) -> std::result::Result<(), String> {
        let keys = |keys: Vec<String>| {
            self.engine.registry.call(
                &rec.machine,
                pb::agent_command::Kind::SendKeys(pb::SendKeys {
                    target: rec.pane_id.clone(),
                    keys,
                }),
                AGENT_CALL_TIMEOUT,
            )
        };
        if !answer.moves.is_empty() {
            keys(answer.moves.clone())
                .await
                .map_err(|e| format!("moving the selection failed: {e}"))?;
        }
        let deadline = tokio::time::Instant::now() + SELECTION_TIMEOUT;
        loop {
            let seen = match self.engine.capture(&rec.machine, &rec.pane_id).await {
                Ok(snap) => {
                    let d = self.detect(&snap);
                    match (d.state, d.permission) {
                        (PaneState::Permission, Some(p)) => {
                            p.selected.and_then(|i| p.options.get(i).cloned())
                        }
                        (state, _) => {
                            return Err(format!("the prompt went away (the pane is {state})"))
                        }
                    }
                }
                Err(e) => return Err(format!("the pane could not be read: {e}")),
            };
            if seen.as_deref() == Some(answer.label.as_str()) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the selection did not reach {:?} (it shows {:?})",
                    answer.label,
                    seen.unwrap_or_default()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        keys(vec!["Enter".into()])
            .await
            .map_err(|e| format!("confirming failed: {e}"))?;
        Ok(())
    }

    async fn on_tick(&self, rec: &mut SessionRecord, live: &mut Live) {
        let now = unix_ms();
        if live.recheck_at_ms != 0 && now >= live.recheck_at_ms {
            live.recheck_at_ms = 0;
            if let Ok(s) = self.engine.capture(&rec.machine, &rec.pane_id).await {
                self.on_snapshot(rec, live, Arc::new(s)).await;
            }
            return;
        }
        if rec.dry_run && live.next_dry_fire_ms != 0 && now >= live.next_dry_fire_ms {
            live.next_dry_fire_ms = 0;
            if let Some(s) = live.last_snapshot.clone() {
                self.on_snapshot(rec, live, s).await;
            }
        }
    }

    fn detect(&self, snap: &pb::PaneSnapshot) -> Detection {
        let pane = snap.pane.clone().unwrap_or_default();
        self.engine.detector.detect(&DetectionInput {
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

    async fn on_snapshot(
        &self,
        rec: &mut SessionRecord,
        live: &mut Live,
        snap: Arc<pb::PaneSnapshot>,
    ) {
        // Taken before our last typing finished, however late it came: the pane from
        // before, which would read as still waiting for the prompt just typed.
        if snap.seq != 0 && snap.seq <= rec.typed_at_seq {
            tracing::debug!(target: "coord.engine", session = %rec.id, seq = snap.seq, typed_at = rec.typed_at_seq, "ignoring a snapshot from before our typing");
            return;
        }
        let now = unix_ms();
        let mut d = self.detect(&snap);
        let processes = snap
            .pane
            .as_ref()
            .map(|p| p.processes.as_slice())
            .unwrap_or_default();
        crate::session::note_driven_agent(rec, &d, processes);
        crate::session::overrule(rec, &mut d, processes);
        tracing::debug!(
            target: "coord.engine",
            session = %rec.id,
            state = %d.state,
            rule = d.rule.as_deref().unwrap_or("-"),
            hash = %snap.stable_hash,
            reason = snap.reason,
            seq = snap.seq,
            ansi = snap.ansi.len(),
            lines = snap.text.lines().count(),
            "snapshot"
        );
        if tracing::enabled!(target: "coord.engine.screen", tracing::Level::TRACE) {
            tracing::trace!(target: "coord.engine.screen", session = %rec.id, "screen:\n{}", snap.text);
        }
        live.agent = d.agent;
        rec.agent_kind = d.agent.as_str().to_string();
        if snap.stable_hash != rec.last_hash {
            rec.last_hash = snap.stable_hash.clone();
            rec.last_change_ms = now;
        }
        rec.last_state = d.state.as_str().to_string();
        rec.last_error = d.error;
        rec.unknown_since_ms = match (d.state, rec.unknown_since_ms) {
            (PaneState::Unknown, 0) => now,
            (PaneState::Unknown, t) => t,
            _ => 0,
        };
        // The pane turned busy, or changed into something other than our prompt still
        // sitting in the box (a capture taken mid-injection shows exactly that).
        if d.state == PaneState::Working
            || (rec.awaiting_busy
                && snap.stable_hash != rec.inject_hash
                && d.state != PaneState::Draft)
        {
            rec.awaiting_busy = false;
        }
        if d.state == PaneState::Permission {
            rec.pending_permission = d.permission.clone().or_else(|| Some(Default::default()));
        } else {
            rec.pending_permission = None;
        }
        live.last_snapshot = Some(snap.clone());
        lock(&self.engine.screens).insert(rec.id.clone(), snap.clone());
        live.last_detection = Some(d.clone());
        self.judge_outcome(rec, &snap, &d);

        let permission_safe = d.permission.as_ref().is_some_and(|p| {
            let v = self.engine.gate.check(&p.action, &GateContext::default());
            !v.reasons
                .iter()
                .any(|r| r.rule == karl_common::gate::Rule::Destructive)
        });
        let facts = SnapshotFacts {
            detection: &d,
            stable_hash: if rec.dry_run { "" } else { &snap.stable_hash },
            now_ms: now,
            permission_safe,
        };
        let mut decision = decide(rec, &facts, &self.engine.cfg.limits);
        // Dry run: the pane never changes, so pace recorded turns by settle_ms instead.
        if rec.dry_run && decision == Decision::Fire && live.next_dry_fire_ms > now {
            decision = Decision::Wait("dry run pacing");
        }
        match decision {
            Decision::Wait(why) => {
                if rec.status == Status::Waiting
                    && d.state != PaneState::Limited
                    && rec.reason.starts_with("agent")
                {
                    self.set_status(rec, Status::Running, format!("pane is {}", d.state), false);
                }
                tracing::debug!(target: "coord.engine", session = %rec.id, state = %d.state, why, "waiting");
                self.save(rec);
            }
            Decision::Fire => {
                if rec.throttled_until_ms != 0 {
                    rec.throttled_until_ms = 0;
                    self.set_status(
                        rec,
                        Status::Running,
                        "the rate limit allows the next turn".into(),
                        false,
                    );
                }
                if rec.status != Status::Running {
                    self.set_status(
                        rec,
                        Status::Running,
                        format!("pane is {} again", d.state),
                        false,
                    );
                }
                self.fire(rec, live, &snap, &d).await;
            }
            Decision::Throttle { until_ms, why } => {
                live.recheck_at_ms = until_ms;
                if rec.throttled_until_ms != until_ms {
                    rec.throttled_until_ms = until_ms;
                    let secs = until_ms.saturating_sub(now).div_ceil(1000);
                    self.set_status(
                        rec,
                        Status::Running,
                        format!("{why} (next turn in {secs} s)"),
                        false,
                    );
                } else {
                    self.save(rec);
                }
            }
            Decision::Recheck(why) => {
                tracing::debug!(target: "coord.engine", session = %rec.id, why, "rechecking shortly");
                live.recheck_at_ms = now + 750;
                self.save(rec);
            }
            Decision::ResendEnter => {
                rec.enter_resent = true;
                let r = self
                    .engine
                    .registry
                    .call(
                        &rec.machine,
                        pb::agent_command::Kind::SendKeys(pb::SendKeys {
                            target: rec.pane_id.clone(),
                            keys: vec!["Enter".into()],
                        }),
                        AGENT_CALL_TIMEOUT,
                    )
                    .await;
                let a = self.engine.audit(
                    rec,
                    "enter",
                    "",
                    format!(
                        "our prompt sat unsent; pressed Enter once{}",
                        r.err()
                            .map(|e| format!(" — failed: {e}"))
                            .unwrap_or_default()
                    ),
                );
                let _ = self.engine.store.append_audit(&a);
                self.save(rec);
            }
            Decision::Permission { approve, why } => {
                self.answer_permission(rec, approve, &format!("policy ({why})"))
                    .await;
            }
            Decision::Escalate(reason) => {
                let auto = matches!(
                    d.state,
                    PaneState::Dialog | PaneState::Permission | PaneState::Draft
                );
                self.set_status(rec, Status::Escalated, reason, auto);
            }
            Decision::Limited(reset) => {
                live.recheck_at_ms = now + 60_000;
                self.set_status(
                    rec,
                    Status::Waiting,
                    format!("usage limit reached; resets {reset}"),
                    true,
                );
            }
            Decision::Exited => {
                if let Some(cmd) = self.engine.cfg.restart_command.clone() {
                    let r = self
                        .engine
                        .inject(&rec.machine, &rec.pane_id, &cmd, true)
                        .await;
                    if let Ok(i) = &r {
                        rec.typed_at_seq = rec.typed_at_seq.max(i.snapshot_seq);
                    }
                    let detail = match &r {
                        Ok(i) => inject_label(i),
                        Err(e) => format!("failed: {e}"),
                    };
                    let a = self.engine.audit(rec, "restart", &cmd, detail.clone());
                    let _ = self.engine.store.append_audit(&a);
                    self.set_status(
                        rec,
                        Status::Running,
                        format!("the agent exited; restarted it ({detail})"),
                        false,
                    );
                } else {
                    self.set_status(
                        rec,
                        Status::Escalated,
                        "the agent exited; a shell prompt shows".into(),
                        true,
                    );
                }
            }
            Decision::Done(reason) => self.finish(rec, Status::Done, reason),
        }
    }

    /// Judges the last typed turn from the first settled snapshot after it.
    fn judge_outcome(&self, rec: &mut SessionRecord, snap: &pb::PaneSnapshot, d: &Detection) {
        if !rec.awaiting_outcome || rec.turns == 0 {
            return;
        }
        let outcome = match d.state {
            PaneState::Working | PaneState::Unknown => return,
            PaneState::Draft if rec.awaiting_busy => return,
            PaneState::Permission
            | PaneState::Dialog
            | PaneState::Exited
            | PaneState::Limited
            | PaneState::Draft => Outcome::Blocked,
            PaneState::Idle if d.error => Outcome::Error,
            PaneState::Idle if !rec.dry_run && snap.stable_hash == rec.inject_hash => return,
            PaneState::Idle => Outcome::Progress,
        };
        rec.awaiting_outcome = false;
        let mut outcome = outcome;
        match outcome {
            Outcome::Progress => {
                rec.stalled = 0;
                // A model-written turn completes its task when the agent says so; plan
                // steps already advanced when they were typed.
                if rec.last_source != "plan" && completion_signal(&snap.new_lines) {
                    if let Some(title) = rec.tasks.advance(rec.turns) {
                        rec.digest
                            .add_milestone(rec.turns, format!("done: {title}"));
                    }
                }
                if rec.tasks.is_complete() {
                    outcome = Outcome::Complete;
                }
            }
            Outcome::Error | Outcome::Blocked => rec.stalled += 1,
            Outcome::Complete => {}
        }
        if let Ok(mut turns) = self.engine.store.turns::<TurnRecord>(&rec.id) {
            if let Some(last) = turns.iter_mut().rev().find(|t| t.n == rec.turns) {
                last.outcome = outcome.as_str().to_string();
                let t = last.clone();
                if let Err(e) = self.engine.store.record_turn(&rec.id, rec, t.n, &t, &[]) {
                    tracing::error!(target: "coord.engine", session = %rec.id, error = %e, "cannot record the turn's outcome");
                }
                self.publish(
                    rec,
                    Some(&t),
                    &format!("turn {} outcome: {}", t.n, t.outcome),
                );
                // Every 5 turns, fold the oldest judged turns into the digest.
                if t.n % 5 == 0 {
                    let notes: Vec<TurnNote> = turns
                        .iter()
                        .filter(|x| x.n + 5 > t.n && x.n <= t.n)
                        .map(|x| TurnNote {
                            turn: x.n,
                            prompt: x.prompt.clone(),
                            outcome: outcome_of(&x.outcome),
                            response: String::new(),
                        })
                        .collect();
                    rec.digest.fold(&notes);
                }
            }
        }
    }

    async fn fire(
        &self,
        rec: &mut SessionRecord,
        live: &mut Live,
        snap: &pb::PaneSnapshot,
        d: &Detection,
    ) {
        let Some(c) = self.next_prompt(rec, snap, d).await else {
            self.set_status(rec, Status::Escalated, "no acceptable prompt: the model, the plan and the escape prompts were all refused by the gate".into(), false);
            return;
        };
        let now = unix_ms();
        let n = rec.turns + 1;
        let mut turn = TurnRecord {
            n,
            prompt: c.prompt.clone(),
            source: c.source.to_string(),
            gate: c.gate.clone(),
            model_latency_ms: c.latency_ms,
            prompt_tokens: c.prompt_tokens,
            pane_hash: snap.stable_hash.clone(),
            outcome: "pending".into(),
            inject: if rec.dry_run {
                "dry-run".into()
            } else {
                "pending".into()
            },
            unix_ms: now,
            state: d.state.as_str().to_string(),
            reason: String::new(),
        };
        rec.turns = n;
        rec.remember_prompt(&c.prompt);
        rec.inject_hash = snap.stable_hash.clone();
        rec.note_injection(now);
        rec.awaiting_outcome = true;
        rec.awaiting_busy = !rec.dry_run;
        rec.enter_resent = false;
        rec.tasks.note_turn(n);
        rec.last_source = c.source.to_string();
        // A plan step is done once typed: the next turn moves on to the next step.
        if c.source == "plan" {
            if let Some(title) = rec.tasks.advance(n) {
                rec.digest.add_milestone(n, format!("sent: {title}"));
            }
        }
        rec.updated_ms = now;
        let kind = if rec.dry_run { "dry-run" } else { "intent" };
        let audit = self
            .engine
            .audit(rec, kind, &c.prompt, format!("turn {n} ({})", c.source));
        // Committed before typing: a crash after this line can never retype the prompt.
        if let Err(e) = self
            .engine
            .store
            .commit_turn(&rec.id, rec, n, &turn, &[audit])
        {
            self.finish(rec, Status::Failed, format!("cannot record turn {n}: {e}"));
            return;
        }
        lock(&self.engine.records).insert(rec.id.clone(), rec.clone());
        if rec.dry_run {
            live.next_dry_fire_ms = now + u64::from(self.engine.cfg.limits.settle_ms);
            self.publish(
                rec,
                Some(&turn),
                &format!("turn {n} (dry run): {}", c.prompt),
            );
            return;
        }
        let result = self
            .engine
            .inject(&rec.machine, &rec.pane_id, &c.prompt, false)
            .await;
        let (label, ok) = match &result {
            Ok(i) => (
                inject_label(i),
                matches!(
                    i.outcome(),
                    pb::InjectOutcome::Submitted | pb::InjectOutcome::SubmittedAfterRetry
                ),
            ),
            Err(e) => (format!("failed: {e}"), false),
        };
        if let Ok(i) = &result {
            rec.typed_at_seq = rec.typed_at_seq.max(i.snapshot_seq);
        }
        turn.inject = label.clone();
        let audit = self.engine.audit(
            rec,
            if ok { "inject" } else { "refused" },
            &c.prompt,
            format!("turn {n}: {label}"),
        );
        if !ok {
            rec.awaiting_busy = false;
            turn.outcome = "blocked".into();
            rec.awaiting_outcome = false;
            // Nothing (or nothing certain) reached the pane: do not wait for it to change.
            rec.inject_hash.clear();
        }
        // Durable too: an operator may already have seen this result.
        if let Err(e) = self
            .engine
            .store
            .commit_turn(&rec.id, rec, n, &turn, &[audit])
        {
            tracing::error!(target: "coord.engine", session = %rec.id, error = %e, "cannot record the injection result");
        }
        self.save(rec);
        self.publish(rec, Some(&turn), &format!("turn {n}: {label}"));
        if !ok {
            self.set_status(
                rec,
                Status::Escalated,
                format!("could not type turn {n}: {label}"),
                true,
            );
        }
    }

    /// model → gate (→ regenerate with the reason, twice) → plan step → escape prompt.
    async fn next_prompt(
        &self,
        rec: &mut SessionRecord,
        snap: &pb::PaneSnapshot,
        d: &Detection,
    ) -> Option<Candidate> {
        let others = self.engine.other_sessions(&rec.id);
        let history = rec.history.clone();
        let (project, goal, path) = (rec.project.clone(), rec.goal.clone(), rec.path.clone());
        let gate_ctx = GateContext {
            project: &project,
            goal: &goal,
            path: &path,
            history: &history,
            others: &others,
        };
        let mut lines = Vec::new();
        let signal = if d.error {
            PaneSignal::Error
        } else {
            PaneSignal::infer(&snap.text)
        };
        if let (Some(model), false) = (self.engine.model.clone(), rec.plan_only) {
            let mut rejections: Vec<Rejection> = Vec::new();
            for attempt in 0..3 {
                let ctx = self.engine.build(rec, &snap.text, signal, &rejections);
                let req = ChatRequest::new(ctx.messages.clone());
                match model.complete(&req).await {
                    Ok(reply) => {
                        let ms = reply.latency.as_millis() as u64;
                        rec.record_latency(ms);
                        if let Some(actual) = reply.prompt_tokens {
                            lock(&self.engine.calibrations).observe(
                                &self.engine.cfg.model_name,
                                ctx.raw_tokens,
                                actual,
                            );
                        }
                        let text = clean_reply(&reply.text, REPLY_MAX_CHARS);
                        let v = self.engine.gate.check(&text, &gate_ctx);
                        if v.pass {
                            lines.push(format!("pass (attempt {})", attempt + 1));
                            return Some(Candidate {
                                prompt: text,
                                source: if attempt == 0 { "model" } else { "regenerated" },
                                gate: lines,
                                latency_ms: ms,
                                prompt_tokens: reply.prompt_tokens.unwrap_or(ctx.estimated_tokens),
                            });
                        }
                        rec.gated += 1;
                        for r in &v.reasons {
                            let key = serde_json::to_value(r.rule)
                                .ok()
                                .and_then(|j| j.as_str().map(String::from))
                                .unwrap_or_default();
                            *rec.rejections.entry(key).or_insert(0) += 1;
                        }
                        let why = verdict_lines(&v).join("; ");
                        lines.push(format!("blocked: {why} — {:?}", truncate(&text, 120)));
                        rejections.push(Rejection { reason: why, text });
                    }
                    Err(e) => {
                        rec.model_errors += 1;
                        lines.push(format!("model error: {e}"));
                        tracing::warn!(target: "coord.engine", session = %rec.id, error = %e, "model call failed; falling back to the plan");
                        break;
                    }
                }
            }
        }
        // The plan step of the active task.
        if let Some(step) = rec.tasks.active().map(|t| t.title.clone()) {
            let v = self.engine.gate.check(&step, &gate_ctx);
            if v.pass {
                rec.fallbacks += u32::from(!rec.plan_only);
                lines.push("plan step".into());
                return Some(Candidate {
                    prompt: step,
                    source: "plan",
                    gate: lines,
                    latency_ms: 0,
                    prompt_tokens: 0,
                });
            }
            lines.push(format!(
                "plan step blocked: {}",
                verdict_lines(&v).join("; ")
            ));
        }
        // A rotating escape prompt for the session's phase, itself checked.
        let phase = self
            .engine
            .cfg
            .context
            .phases
            .phase_at(rec.turns + 1, rec.max_turns);
        rec.escape_rotation = rec.escape_rotation.wrapping_add(1);
        let escape = karl_common::gate::pick_escape_in(
            phase,
            rec.escape_rotation,
            &gate_ctx,
            &self.engine.gate,
        )?;
        rec.fallbacks += 1;
        lines.push("escape prompt".into());
        Some(Candidate {
            prompt: escape,
            source: "escape",
            gate: lines,
            latency_ms: 0,
            prompt_tokens: 0,
        })
    }
}

fn outcome_of(s: &str) -> Outcome {
    match s {
        "error" => Outcome::Error,
        "blocked" => Outcome::Blocked,
        "complete" => Outcome::Complete,
        _ => Outcome::Progress,
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_signals() {
        assert!(completion_signal(&[
            "● Done. The health endpoint is in place.".into()
        ]));
        assert!(completion_signal(&["All 12 tests passed".into()]));
        assert!(!completion_signal(&[
            "● I'll start by reading the file.".into()
        ]));
    }
}

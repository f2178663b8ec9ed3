//! Starting and resuming sessions: the pane lock (one writer per pane), the model's
//! health (plan-only without one), auto-detected project and goal, the plan, and the
//! pending-turn reconciliation after a coordinator restart.

use karl_common::pb;
use karl_common::target::PaneTarget;
use karl_common::unix_ms;

use super::{lock, Engine};
use crate::context::{
    detect_messages, goal_steps, parse_detect, plan_from_reply_guarded, plan_messages, PlanSource,
    TaskGraph,
};
use crate::error::{CoordError, Result};
use crate::model::ChatRequest;
use crate::records::{
    pane_key, session_id, AuditEntry, AuditKind, InjectStatus, PermissionPolicy, SessionRecord,
    Status, TurnRecord,
};
use crate::store::StoreError;

/// A new session, as the operator asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveSpec {
    pub machine: String,
    pub target: PaneTarget,
    pub project: String,
    pub goal: String,
    pub plan: Vec<String>,
    /// `None`: the configured default.
    pub max_turns: Option<u32>,
    pub dry_run: bool,
    pub auto_detect: bool,
    pub permissions: PermissionPolicy,
    /// The project path shown to the model; `None`: the pane's directory.
    pub path: Option<String>,
    /// A command that must exit 0 in the pane's directory before the session is done.
    pub verify: Option<String>,
    /// `--launch`: the command line that starts the agent CLI at the pane's shell prompt;
    /// empty: the CLI already runs.
    pub launch: String,
}

/// `karl-ctl drive`: start a session, or resume one.
#[derive(Debug, Clone, PartialEq)]
pub enum Drive {
    Start(DriveSpec),
    /// Resume this session; `max_turns` more turns when given.
    Resume {
        id: String,
        max_turns: Option<u32>,
    },
    /// Resume the newest resumable session on this pane.
    ResumeLatest {
        machine: String,
        target: PaneTarget,
        max_turns: Option<u32>,
    },
}

impl Engine {
    /// Restarts the tasks of every live session found in sled (after a coordinator
    /// restart). Each waits for its agent to reconnect.
    pub fn resume_live(&self) {
        let stored: Vec<SessionRecord> = self.shared.store.sessions().unwrap_or_else(|e| {
            tracing::error!(target: "coord.engine", error = %e, "cannot read stored sessions");
            Vec::new()
        });
        for mut rec in stored.into_iter().filter(|r| r.status.is_live()) {
            self.reconcile_pending(&mut rec);
            tracing::info!(target: "coord.engine", session = %rec.id, "resuming session");
            self.spawn(rec);
        }
    }

    /// A turn left `pending` by a crash is never retyped: mark it unconfirmed.
    fn reconcile_pending(&self, rec: &mut SessionRecord) {
        let turns: Vec<TurnRecord> = self.shared.store.turns(&rec.id).unwrap_or_default();
        for mut t in turns
            .into_iter()
            .filter(|t| t.inject == InjectStatus::Pending)
        {
            // The pane may or may not show this prompt: do not wait for it to change.
            rec.inject_hash.clear();
            t.inject = InjectStatus::Unconfirmed;
            t.reason =
                "coordinator restarted before the agent confirmed this injection; not retyped"
                    .into();
            if let Err(e) = self.shared.store.record_turn(&rec.id, rec, t.n, &t, &[]) {
                tracing::error!(target: "coord.engine", session = %rec.id, error = %e, "cannot mark a pending turn");
            }
        }
        rec.awaiting_busy = false;
    }

    /// Starts (or resumes) a session and returns once its task runs.
    pub async fn drive(&self, drive: Drive) -> Result<SessionRecord> {
        let spec = match drive {
            Drive::Start(spec) => spec,
            Drive::Resume { id, max_turns } => return self.resume(id, max_turns).await,
            Drive::ResumeLatest {
                machine,
                target,
                max_turns,
            } => {
                let target = target.to_string();
                let newest = self
                    .shared
                    .store
                    .sessions::<SessionRecord>()?
                    .into_iter()
                    .filter(|r| r.machine == machine && (r.target == target || r.pane_id == target))
                    .filter(|r| r.status != Status::Done)
                    .max_by_key(|r| r.started_ms)
                    .ok_or_else(|| CoordError::UnknownSession(format!("{machine}:{target}")))?;
                return self.resume(newest.id, max_turns).await;
            }
        };
        let snap = self
            .shared
            .capture(&spec.machine, &spec.target.to_string())
            .await?;
        let pane = snap.pane.clone().unwrap_or_default();
        if pane.pane_id.is_empty() {
            return Err(CoordError::Internal(
                "agent reported a pane without an id".into(),
            ));
        }
        if spec.goal.is_empty() && !spec.auto_detect && spec.plan.is_empty() {
            return Err(CoordError::InvalidArgument(
                "give the session a goal (--goal \"…\"), a plan (--plan FILE) or --auto-detect"
                    .into(),
            ));
        }
        let now = unix_ms();
        let mut rec = SessionRecord {
            id: session_id(&spec.machine, &pane.pane_id, now),
            machine: spec.machine.clone(),
            target: spec.target.to_string(),
            pane_id: pane.pane_id.clone(),
            project: spec.project.clone(),
            goal: spec.goal.clone(),
            path: spec
                .path
                .clone()
                .unwrap_or_else(|| pane.current_path.clone()),
            dry_run: spec.dry_run,
            max_turns: spec
                .max_turns
                .unwrap_or(self.shared.deps.cfg.limits.default_max_turns),
            permissions: spec.permissions,
            auto_detect: spec.auto_detect,
            verify: spec.verify.clone().unwrap_or_default(),
            launch: spec.launch.clone(),
            started_ms: now,
            updated_ms: now,
            last_change_ms: now,
            status: Status::Running,
            ..Default::default()
        };
        // One writer per pane: the lock is taken before anything else is written.
        self.lock_pane(&pane_key(&rec.machine, &rec.pane_id), &rec.id)
            .await?;
        let healthy = self.model_health(&mut rec).await;
        rec.plan_only = !healthy;
        if spec.auto_detect && (rec.project.is_empty() || rec.goal.is_empty()) {
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
        let steps = if !spec.plan.is_empty() {
            spec.plan.clone()
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
        self.shared.store.put_session(&rec.id, &rec).await?;
        let started = AuditEntry {
            unix_ms: now,
            session: rec.id.clone(),
            machine: rec.machine.clone(),
            pane: rec.pane_id.clone(),
            kind: AuditKind::Session,
            text: rec.goal.clone(),
            detail: format!(
                "started{}{}",
                if rec.dry_run { " (dry run)" } else { "" },
                if rec.plan_only { " plan-only" } else { "" }
            ),
        };
        self.shared.store.append_audit(&started).await?;
        // Told before the task runs, so nothing it says comes before the start.
        self.shared
            .event(|| crate::events::session_event(&SessionRecord::default(), &rec, now));
        self.spawn(rec.clone());
        Ok(rec)
    }

    async fn resume(&self, id: String, max_turns: Option<u32>) -> Result<SessionRecord> {
        if self.is_live(&id) {
            return self.record(&id);
        }
        let mut rec = self.record(&id)?;
        self.lock_pane(&rec.pane_key(), &rec.id).await?;
        let before = rec.clone();
        self.reconcile_pending(&mut rec);
        rec.status = Status::Running;
        rec.reason = "resumed".into();
        // It ends again with a summary of its own.
        rec.summary = None;
        if let Some(more) = max_turns {
            rec.max_turns = rec.turns + more;
        }
        self.shared.store.put_session(&rec.id, &rec).await?;
        self.shared
            .event(|| crate::events::session_event(&before, &rec, karl_common::unix_ms()));
        self.spawn(rec.clone());
        Ok(rec)
    }

    async fn lock_pane(&self, key: &str, id: &str) -> Result<()> {
        let live: Vec<String> = lock(&self.handles)
            .iter()
            .filter(|(_, h)| h.running())
            .map(|(id, _)| id.clone())
            .collect();
        self.shared
            .store
            .lock_pane(key, id, |holder| live.iter().any(|l| l == holder))
            .await
            .map_err(|e| match e {
                StoreError::PaneLocked { .. } => CoordError::Conflict(e.to_string()),
                other => CoordError::Store(other),
            })
    }

    /// Model health decides plan-only before any planning call.
    async fn model_health(&self, rec: &mut SessionRecord) -> bool {
        match &self.shared.model {
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
        }
    }

    async fn generate_plan(&self, rec: &SessionRecord, snap: &pb::PaneSnapshot) -> Vec<String> {
        let Some(model) = &self.shared.model else {
            return Vec::new();
        };
        let req = ChatRequest::new(plan_messages(
            &rec.project,
            &rec.goal,
            &rec.path,
            Some(&snap.text),
        ));
        match model.complete(&req).await {
            Ok(reply) => {
                let plan = plan_from_reply_guarded(&reply.text, &rec.goal, &req.messages);
                if plan.source == PlanSource::Goal {
                    tracing::info!(target: "coord.engine", session = %rec.id, steps = plan.steps.len(), "the model's reply held no plan of 3 or more steps; using steps derived from the goal");
                }
                plan.steps
            }
            Err(e) => {
                tracing::warn!(target: "coord.engine", session = %rec.id, error = %e, "plan generation failed; using steps derived from the goal");
                goal_steps(&rec.goal)
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
        let Some(model) = self.shared.model.as_ref().filter(|_| healthy) else {
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
}

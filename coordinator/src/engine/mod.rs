//! The session engine: driven sessions and manual sends, behind one operator facade.
//!
//! Layout:
//! - [`machine`]: the sans-IO session machine — `Session::on(now, Event) -> Vec<Effect>`
//!   owns every transition; [`snapshot`] (a settled screen, decided and acted on),
//!   [`turn`] (firing, committing, typing, judging a turn) and [`permission`] (answering
//!   a permission menu) are parts of it.
//! - [`decide`]: the per-snapshot state table and permission-menu reading (pure).
//! - [`prompt`]: the prompt source chain, model → gate → regenerate → plan → escape.
//! - [`outcome`]: judging a typed turn from the next settled snapshot (pure).
//! - [`task`]: the per-session task that feeds the machine and carries out its effects.
//! - [`start`]: starting and resuming sessions (pane lock, model health, plan).
//! - [`send`]: `karl-ctl send`, one gated prompt outside any session.
//! - this file: [`Engine`], the facade the gRPC services call, and the table of running
//!   session tasks.
//!
//! Not here: what a screen means ([`karl_common::detect`]), whether a prompt may be
//! typed ([`karl_common::gate`]), how the briefing is built ([`crate::context`]), wire
//! types ([`crate::wire`]).

mod decide;
mod evidence;
mod hook;
mod launch;
mod machine;
mod outcome;
mod permission;
mod prompt;
mod send;
mod snapshot;
mod start;
mod task;
mod turn;
mod verify;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use karl_common::detect::{Detector, PaneState};
use karl_common::gate::{Gate, OtherSession};
use karl_common::pb;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

pub use decide::{
    decide, note_driven_agent, overrule, permission_answer, Decision, Limits, PermissionAnswer,
    SnapshotFacts,
};
pub use machine::{CallError, Command, Deps, Effect, Event, Session, Update};
pub use prompt::{Candidate, ModelAnswer};
pub use start::{Drive, DriveSpec};

use crate::context::{
    build_context, Calibrations, Context, ContextConfig, ContextInput, PaneSignal, Rejection,
    SessionBrief, TokenEstimator,
};
use crate::error::{CoordError, Result};
use crate::metrics::Metrics;
use crate::model::ModelClient;
use crate::records::{AuditEntry, InjectStatus, SessionRecord, Status, TurnRecord};
use crate::registry::Registry;
use crate::store::Store;

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
    /// The validation gate every candidate passes (with its embedding model, if loaded).
    pub gate: Arc<Gate>,
    /// Ask the model for a second opinion on a candidate the gate passed in doubt
    /// (`[gate] second_opinion`; only sessions with a model).
    pub second_opinion: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            limits: Limits::default(),
            context: ContextConfig::default(),
            model_name: "default".into(),
            restart_command: None,
            safety_secs: 30,
            gate: Arc::new(Gate::new()),
            second_opinion: true,
        }
    }
}

/// How long session tasks get to leave on their own at shutdown.
const SESSION_STOP_GRACE: Duration = Duration::from_secs(2);

/// How long an operator command waits to see its effect in the reply.
const COMMAND_REPLY_WAIT: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub type UpdateStream =
    Pin<Box<dyn Stream<Item = std::result::Result<pb::SessionUpdate, tonic::Status>> + Send>>;

/// What a running session shows the facade: its latest record and screen.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub record: SessionRecord,
    pub screen: Option<Arc<pb::PaneSnapshot>>,
}

/// Something about a session changed: what the dashboard's live view listens for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEvent {
    pub id: String,
    pub change: Change,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Its record was saved (status, counters, tasks, a turn).
    Record,
    /// Its pane showed a new settled screen.
    Screen,
    /// What `follow` shows: a turn fired or judged, a state change, the end.
    Event(String),
}

/// A running session task.
struct Handle {
    commands: mpsc::Sender<Command>,
    updates: broadcast::Sender<pb::SessionUpdate>,
    view: watch::Receiver<View>,
    task: JoinHandle<()>,
}

impl Handle {
    fn running(&self) -> bool {
        !self.task.is_finished() && self.view.borrow().record.status.is_live()
    }
}

/// What session tasks share: the agents, the store, the model and the machine's deps.
pub(crate) struct Shared {
    registry: Arc<Registry>,
    store: Store,
    model: Option<Arc<dyn ModelClient>>,
    deps: Deps,
    stop: watch::Sender<bool>,
    events: broadcast::Sender<SessionEvent>,
    /// What a human should hear of (escalations, ends, limits), for the notifier.
    notices: broadcast::Sender<crate::notify::Notice>,
    /// Turn and session events, for the NATS publisher ([`crate::events`]).
    bus: broadcast::Sender<crate::events::Event>,
    metrics: Arc<Metrics>,
}

impl Shared {
    async fn capture(&self, machine: &str, target: &str) -> Result<pb::PaneSnapshot> {
        let capture = pb::Capture {
            target: target.to_string(),
            ansi: true,
            history_lines: 0,
        };
        self.registry.capture(machine, capture).await
    }

    /// Tells the notifier; nobody listening (no sinks) is fine, and it never waits.
    fn notice(&self, n: crate::notify::Notice) {
        let _ = self.notices.send(n);
    }

    /// Puts the event `make` builds on the bus, when someone listens; never waits.
    fn event(&self, make: impl FnOnce() -> Option<crate::events::Event>) {
        if self.bus.receiver_count() > 0 {
            if let Some(e) = make() {
                let _ = self.bus.send(e);
            }
        }
    }

    /// Tells the live views; nobody listening is fine.
    fn changed(&self, id: &str, change: Change) {
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(SessionEvent {
                id: id.to_string(),
                change,
            });
        }
    }
}

type Handles = Arc<Mutex<HashMap<String, Handle>>>;

/// The operator facade: start, list, show, follow, steer and audit sessions.
pub struct Engine {
    shared: Arc<Shared>,
    handles: Handles,
}

impl Engine {
    pub fn new(
        registry: Arc<Registry>,
        store: Store,
        detector: Detector,
        model: Option<Arc<dyn ModelClient>>,
        cfg: EngineConfig,
    ) -> Arc<Self> {
        let handles: Handles = Arc::default();
        let peers_of = Arc::downgrade(&handles);
        let deps = Deps {
            detector: Arc::new(detector),
            gate: cfg.gate.clone(),
            cfg: Arc::new(cfg),
            calibrations: Arc::new(Mutex::new(Calibrations::default())),
            has_model: model.is_some(),
            peers: Arc::new(move |except| {
                peers_of
                    .upgrade()
                    .map(|h| peers(&lock(&h), except))
                    .unwrap_or_default()
            }),
            opinions: Arc::default(),
        };
        Arc::new(Engine {
            shared: Arc::new(Shared {
                registry,
                store,
                model,
                deps,
                stop: watch::channel(false).0,
                events: broadcast::channel(1024).0,
                notices: broadcast::channel(256).0,
                bus: crate::events::bus(),
                metrics: Arc::new(Metrics::new()),
            }),
            handles,
        })
    }

    /// Stops every session task; records stay in sled and resume on the next start. Tasks
    /// leave at their next await point; one still busy after [`SESSION_STOP_GRACE`] (a
    /// model call in flight) is aborted, which is safe: a turn is committed as pending
    /// before it is typed, and a pending turn is never retyped.
    pub async fn shutdown(&self) {
        let _ = self.shared.stop.send(true);
        let tasks: Vec<JoinHandle<()>> = lock(&self.handles).drain().map(|(_, h)| h.task).collect();
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(SESSION_STOP_GRACE, futures::future::join_all(tasks))
            .await
            .is_err()
        {
            tracing::warn!(target: "coord.engine", "session tasks still busy at shutdown; aborting them");
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        if let Err(e) = self.shared.store.flush_async().await {
            tracing::error!(target: "coord.engine", error = %e, "cannot flush the store at shutdown");
        }
    }

    fn is_live(&self, id: &str) -> bool {
        lock(&self.handles).get(id).is_some_and(Handle::running)
    }

    /// The latest record: the running task's view, else the store's.
    pub fn record(&self, id: &str) -> Result<SessionRecord> {
        if let Some(h) = lock(&self.handles).get(id) {
            return Ok(h.view.borrow().record.clone());
        }
        self.shared
            .store
            .get_session(id)?
            .ok_or_else(|| CoordError::UnknownSession(id.to_string()))
    }

    // ───────────────────────── operator surface ─────────────────────────

    /// Every session change from now on (the dashboard's live feed). A slow reader
    /// misses events (`Lagged`) and should re-read what it shows.
    pub fn events(&self) -> broadcast::Receiver<SessionEvent> {
        self.shared.events.subscribe()
    }

    /// Every notice from now on: a session escalated, waiting on a permission, limited,
    /// done or failed ([`crate::notify::notice::on_change`]).
    pub fn notices(&self) -> broadcast::Receiver<crate::notify::Notice> {
        self.shared.notices.subscribe()
    }

    /// Every turn and session event from now on ([`crate::events`]). A slow reader
    /// misses the oldest (`Lagged`).
    pub fn event_bus(&self) -> broadcast::Receiver<crate::events::Event> {
        self.shared.bus.subscribe()
    }

    /// The counters the session tasks keep.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.shared.metrics
    }

    /// The last settled screen of a running session (with its colours).
    pub fn screen(&self, id: &str) -> Option<Arc<pb::PaneSnapshot>> {
        lock(&self.handles)
            .get(id)
            .and_then(|h| h.view.borrow().screen.clone())
    }

    /// The phase the session's next turn is in.
    pub fn phase(&self, rec: &SessionRecord) -> karl_common::gate::Phase {
        self.shared
            .deps
            .cfg
            .context
            .phases
            .phase_at(rec.turns + 1, rec.max_turns)
    }

    /// Sessions on record by status, and the store's size on disk.
    pub fn census(&self) -> Result<(Vec<(Status, u64)>, u64)> {
        let mut by: std::collections::BTreeMap<&'static str, (Status, u64)> = Default::default();
        for rec in self.list(true)? {
            by.entry(rec.status.as_str()).or_insert((rec.status, 0)).1 += 1;
        }
        Ok((by.into_values().collect(), self.shared.store.size_on_disk()))
    }

    /// Sessions, oldest first: the live ones, or every one on record with `all`.
    pub fn list(&self, all: bool) -> Result<Vec<SessionRecord>> {
        let mut v: Vec<SessionRecord> = if all {
            self.shared.store.sessions()?
        } else {
            lock(&self.handles)
                .values()
                .map(|h| h.view.borrow().record.clone())
                .filter(|r| r.status.is_live())
                .collect()
        };
        v.sort_by_key(|s| s.started_ms);
        Ok(v)
    }

    /// A session's record and its turns.
    pub fn show(&self, id: &str) -> Result<(SessionRecord, Vec<TurnRecord>)> {
        let rec = self.record(id)?;
        Ok((rec, self.shared.store.turns(id)?))
    }

    pub fn follow(&self, id: &str, from_start: bool) -> Result<UpdateStream> {
        let rec = self.record(id)?;
        let rx = lock(&self.handles).get(id).map(|h| h.updates.subscribe());
        let backlog: Vec<pb::SessionUpdate> = if from_start {
            self.shared
                .store
                .turns::<TurnRecord>(id)?
                .into_iter()
                .map(|t| {
                    let event = format!("turn {}", t.n);
                    let u = Update {
                        record: rec.clone(),
                        turn: Some(t),
                        event,
                    };
                    let mut w = crate::wire::session_update(&u);
                    w.ended = false;
                    w
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
                let end = Update {
                    event: rec.end_summary(),
                    record: rec,
                    turn: None,
                };
                let mut w = crate::wire::session_update(&end);
                w.ended = true;
                let _ = tx.send(Ok(w)).await;
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

    /// Pause, resume or stop a running session.
    pub async fn command(&self, id: &str, command: Command) -> Result<SessionRecord> {
        if let Command::Decide(_) = command {
            let rec = self.record(id)?;
            if rec.pending_permission.is_none() && rec.last_state != PaneState::Permission {
                return Err(CoordError::FailedPrecondition(format!(
                    "session {id} has no pending permission prompt (pane state: {})",
                    rec.last_state
                )));
            }
        }
        let found = lock(&self.handles)
            .get(id)
            .filter(|h| h.running())
            .map(|h| (h.commands.clone(), h.view.clone()));
        let Some((tx, mut view)) = found else {
            let rec = self.record(id)?;
            return Err(CoordError::FailedPrecondition(format!(
                "session {id} is {} (resume it with karl-ctl drive --resume {id})",
                rec.status.as_str()
            )));
        };
        let before = view.borrow_and_update().record.updated_ms;
        tx.send(command)
            .await
            .map_err(|_| CoordError::FailedPrecondition(format!("session {id} is not running")))?;
        // The task applies it when it is next free; wait a moment so the reply shows it.
        let applied = |r: &SessionRecord| match command {
            Command::Pause => r.status == Status::Paused || !r.status.is_live(),
            Command::Resume => r.status != Status::Paused,
            Command::Stop => !r.status.is_live(),
            Command::Decide(_) => r.updated_ms != before,
            Command::Override { .. } => true,
        };
        let wait = view.wait_for(|v| applied(&v.record));
        let _ = tokio::time::timeout(COMMAND_REPLY_WAIT, wait).await;
        let rec = view.borrow().record.clone();
        Ok(rec)
    }

    /// The store as training data, streamed ([`crate::export::spawn`]).
    pub fn export(
        &self,
        filter: crate::export::ExportFilter,
    ) -> mpsc::Receiver<crate::export::Chunk> {
        crate::export::spawn(self.shared.store.clone(), filter)
    }

    /// The newest `limit` audit entries (0 = 200), oldest first; `session` filters.
    pub fn audit_log(&self, session: &str, limit: u32) -> Result<Vec<AuditEntry>> {
        let limit = if limit == 0 { 200 } else { limit as usize };
        Ok(self
            .shared
            .store
            .audit_tail((!session.is_empty()).then_some(session), limit)?)
    }

    /// The exact messages the model would get for this session now.
    pub fn context(&self, id: &str) -> Result<Context> {
        let (rec, screen) = match lock(&self.handles).get(id) {
            Some(h) => {
                let v = h.view.borrow();
                let screen = v.screen.as_ref().map(|s| s.text.clone());
                (v.record.clone(), screen.unwrap_or_default())
            }
            None => (self.record(id)?, String::new()),
        };
        let signal = if rec.last_error {
            PaneSignal::Error
        } else {
            PaneSignal::infer(&screen)
        };
        Ok(self.shared.deps.context(&rec, &screen, signal, &[]))
    }

    /// Starts the task of a session whose record is already stored.
    fn spawn(&self, rec: SessionRecord) {
        let recent: Vec<TurnRecord> = self.shared.store.turns(&rec.id).unwrap_or_else(|e| {
            tracing::error!(target: "coord.engine", session = %rec.id, error = %e, "cannot read the session's turns");
            Vec::new()
        });
        let (commands, commands_rx) = mpsc::channel(16);
        let (updates, _) = broadcast::channel(256);
        let (view_tx, view) = watch::channel(View {
            record: rec.clone(),
            screen: None,
        });
        let id = rec.id.clone();
        let machine = Session::new(rec, recent, self.shared.deps.clone());
        let channels = task::Channels {
            updates: updates.clone(),
            view: view_tx,
        };
        let task = tokio::spawn(task::run(
            self.shared.clone(),
            machine,
            commands_rx,
            channels,
        ));
        let old = lock(&self.handles).insert(
            id,
            Handle {
                commands,
                updates,
                view,
                task,
            },
        );
        if let Some(old) = old {
            old.task.abort();
        }
    }
}

/// The live sessions other than `except`, for the gate's cross-contamination fence.
fn peers(handles: &HashMap<String, Handle>, except: &str) -> Vec<OtherSession> {
    handles
        .values()
        .filter_map(|h| {
            let v = h.view.borrow();
            let r = &v.record;
            (r.id != except && r.status.is_live()).then(|| OtherSession {
                project: r.project.clone(),
                path: r.path.clone(),
            })
        })
        .collect()
}

/// The context stack for a session record and a screen (pure; the turn benchmark calls
/// it too).
pub fn session_context(
    rec: &SessionRecord,
    screen: &str,
    signal: PaneSignal,
    rejections: &[Rejection],
    config: &ContextConfig,
    estimator: &TokenEstimator,
) -> Context {
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

/// What the agent's answer to an injection means for the turn, and why.
pub fn inject_status(i: &pb::InjectResult) -> (InjectStatus, String) {
    match i.outcome() {
        pb::InjectOutcome::Submitted => (InjectStatus::Submitted, String::new()),
        pb::InjectOutcome::SubmittedAfterRetry => {
            (InjectStatus::SubmittedAfterRetry, String::new())
        }
        pb::InjectOutcome::Refused => (InjectStatus::Refused, i.reason.clone()),
        pb::InjectOutcome::Failed | pb::InjectOutcome::Unspecified => {
            (InjectStatus::Failed, i.reason.clone())
        }
    }
}

/// `submitted`, `refused: …`: the agent's answer as one phrase.
pub fn inject_label(i: &pb::InjectResult) -> String {
    let (status, reason) = inject_status(i);
    status.label(&reason)
}

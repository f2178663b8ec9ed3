//! The pane host: what the link calls to watch, capture, inject and send keys, and the
//! runtime behind it.
//!
//! Runtime shape: one control-mode client per tmux session holding a watched pane feeds
//! `%output` into the watch table ([`crate::activity`]); one scheduler task sleeps until
//! the table's next deadline and runs the due work (settle and safety captures, looking for
//! panes whose server went away, checking panes after a client ended or the layout changed)
//! as short jobs; one forwarder task delivers events to the link in order. Nothing polls:
//! with no output and no deadline the tasks sleep.
//!
//! Injections and send-keys for one pane are serialized by a per-pane async mutex.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use karl_common::detect::Detector;
use karl_common::pb;
use karl_common::target::PaneTarget;
use karl_common::unix_ms;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::activity::{Job, OutputEffect, Table, WatchSpec};
use crate::control::{ClientEnd, ControlClient, Notice};
use crate::error::{AgentError, Result};
use crate::inject::{self, InjectMemory, Outcome, Verify};
use crate::procs::ProcessTable;
use crate::snapshot::Cleaned;
use crate::tmux::{PaneMeta, Tmux};

/// Least time between two attaches of a control client to the same session, so a client
/// that tmux keeps refusing cannot spin.
const REATTACH_MIN: Duration = Duration::from_secs(1);
/// How long a pane must stay missing from a live server before it is reported closed
/// (while a server shuts down it may still answer with its panes already gone).
const CLOSE_CONFIRM: Duration = Duration::from_millis(200);

/// Watches, captures and types into the panes of one tmux server. Cheap to clone; all
/// clones share one runtime. Must be used from within a Tokio runtime.
#[derive(Clone)]
pub struct PaneHost {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PaneHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaneHost")
            .field("tmux", &self.inner.tmux)
            .field("watching", &self.watching())
            .finish()
    }
}

struct ClientSlot {
    client: ControlClient,
    generation: u64,
}

enum SchedMsg {
    /// The table may have a new, earlier deadline.
    Wake,
    /// Check watched panes against the server.
    Reconcile,
    /// A control client ended on its own.
    ClientEnded { session_id: String, generation: u64 },
}

struct Inner {
    tmux: Tmux,
    table: Mutex<Table>,
    clients: Mutex<HashMap<String, ClientSlot>>,
    last_attach: Mutex<HashMap<String, Instant>>,
    /// Serializes attaching and stopping control clients.
    client_ops: tokio::sync::Mutex<()>,
    client_generation: AtomicU64,
    sched_tx: mpsc::UnboundedSender<SchedMsg>,
    sched_rx: Mutex<Option<mpsc::UnboundedReceiver<SchedMsg>>>,
    outbox_tx: mpsc::UnboundedSender<pb::AgentEvent>,
    outbox: Mutex<
        Option<(
            mpsc::UnboundedReceiver<pb::AgentEvent>,
            mpsc::Sender<pb::AgentEvent>,
        )>,
    >,
    forwarder: Mutex<Option<JoinHandle<()>>>,
    scheduler: Mutex<Option<JoinHandle<()>>>,
    started: OnceLock<()>,
    captures: AtomicU64,
    closed: AtomicBool,
    detector: Detector,
    pane_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<InjectMemory>>>>,
    buffer_seq: AtomicU64,
    verify: Verify,
    procs: Arc<ProcessTable>,
    /// One evidence follower per watched pane ([`crate::evidence`]).
    followers: Mutex<HashMap<String, JoinHandle<()>>>,
    /// The hook socket this agent listens on, for launched CLIs' hooks (`None`: launched
    /// CLIs start without KARL's hook).
    hook_socket: Mutex<Option<std::path::PathBuf>>,
    notifier: Mutex<String>,
    /// Hooks waiting for the coordinator's decision, by hook request id.
    hook_waiters: Mutex<HashMap<u64, tokio::sync::oneshot::Sender<pb::HookAnswer>>>,
}

/// Locks a std mutex, recovering the data if a panicking thread poisoned it (the data is
/// plain bookkeeping that stays consistent between statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn pane_event(pane_id: &str, kind: pb::PaneEventKind, detail: impl Into<String>) -> pb::AgentEvent {
    pb::AgentEvent {
        kind: Some(pb::agent_event::Kind::PaneEvent(pb::PaneEvent {
            pane_id: pane_id.to_string(),
            kind: kind as i32,
            detail: detail.into(),
            unix_ms: unix_ms(),
        })),
    }
}

fn snapshot_event(s: pb::PaneSnapshot) -> pb::AgentEvent {
    pb::AgentEvent {
        kind: Some(pb::agent_event::Kind::Snapshot(s)),
    }
}

impl PaneHost {
    /// `events`: where watch snapshots and pane events go (the link forwards them to the
    /// coordinator).
    pub fn new(tmux: Tmux, events: mpsc::Sender<pb::AgentEvent>) -> Self {
        Self::with_verify(tmux, events, Verify::default())
    }

    /// Like [`PaneHost::new`] with a different submission check after each Enter.
    pub fn with_verify(tmux: Tmux, events: mpsc::Sender<pb::AgentEvent>, verify: Verify) -> Self {
        let (sched_tx, sched_rx) = mpsc::unbounded_channel();
        let (outbox_tx, outbox_rx) = mpsc::unbounded_channel();
        PaneHost {
            inner: Arc::new(Inner {
                tmux,
                table: Mutex::new(Table::new()),
                clients: Mutex::new(HashMap::new()),
                last_attach: Mutex::new(HashMap::new()),
                client_ops: tokio::sync::Mutex::new(()),
                client_generation: AtomicU64::new(0),
                sched_tx,
                sched_rx: Mutex::new(Some(sched_rx)),
                outbox_tx,
                outbox: Mutex::new(Some((outbox_rx, events))),
                forwarder: Mutex::new(None),
                scheduler: Mutex::new(None),
                started: OnceLock::new(),
                captures: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                detector: Detector::embedded(),
                pane_locks: Mutex::new(HashMap::new()),
                buffer_seq: AtomicU64::new(0),
                verify,
                procs: Arc::new(ProcessTable::new()),
                followers: Mutex::new(HashMap::new()),
                hook_socket: Mutex::new(None),
                notifier: Mutex::new(crate::notify::OSASCRIPT.to_string()),
                hook_waiters: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The hook socket launched CLIs report to (`drive --launch`).
    pub fn set_hook_socket(&self, socket: std::path::PathBuf) {
        *lock(&self.inner.hook_socket) = Some(socket);
    }

    /// The program [`crate::notify::show`] runs (default `osascript`).
    pub fn set_notifier(&self, program: String) {
        *lock(&self.inner.notifier) = program;
    }

    /// The tmux handle this host uses.
    pub fn tmux(&self) -> &Tmux {
        &self.inner.tmux
    }

    /// Starts the scheduler and the event forwarder on first use.
    fn start(&self) {
        self.inner.started.get_or_init(|| {
            if let Some((mut rx, events)) = lock(&self.inner.outbox).take() {
                *lock(&self.inner.forwarder) = Some(tokio::spawn(async move {
                    while let Some(ev) = rx.recv().await {
                        if events.send(ev).await.is_err() {
                            debug!(target: "agent.watch", "event receiver gone; dropping events");
                        }
                    }
                }));
            }
            if let Some(rx) = lock(&self.inner.sched_rx).take() {
                *lock(&self.inner.scheduler) =
                    Some(tokio::spawn(scheduler(Arc::downgrade(&self.inner), rx)));
            }
        });
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(AgentError::ShuttingDown);
        }
        self.start();
        Ok(())
    }

    /// `tmux -V` (e.g. `tmux 3.3a`), or `""` when tmux cannot be run.
    pub async fn tmux_version(&self) -> String {
        self.inner.tmux.version().await.unwrap_or_default()
    }

    /// Every pane of the server (empty when no server runs).
    pub async fn list_panes(&self) -> Result<Vec<pb::PaneInfo>> {
        Ok(self
            .inner
            .tmux
            .list_panes()
            .await?
            .iter()
            .map(PaneMeta::to_info)
            .collect())
    }

    /// Starts watching a pane: attaches a control client to its session if none is, and
    /// sends a first snapshot (reason WATCH_START). Watching a watched pane again changes
    /// its settings and sends a fresh snapshot.
    pub async fn watch(&self, w: pb::Watch) -> Result<()> {
        self.check_open()?;
        let target = PaneTarget::parse(&w.target)?;
        let meta = self.inner.tmux.resolve(&target).await?;
        let spec = WatchSpec::from_watch(&w);
        let new = lock(&self.inner.table).watch(
            &meta.pane_id,
            target,
            &meta.session_id,
            spec,
            Instant::now(),
        );
        if let Err(e) = ensure_client(&self.inner, &meta.session_id).await {
            if new {
                lock(&self.inner.table).unwatch(&meta.pane_id);
            }
            return Err(e);
        }
        info!(target: "agent.watch", pane = %meta.pane_id, target = %w.target, settle_ms = spec.settle.as_millis() as u64, "watching");
        capture_and_emit(
            &self.inner,
            &meta.pane_id,
            pb::SnapshotReason::WatchStart,
            spec.ansi,
        )
        .await?;
        let _ = self.inner.sched_tx.send(SchedMsg::Wake);
        follow(&self.inner, &meta.pane_id, meta.pid);
        Ok(())
    }

    /// Stops watching a pane (a no-op for a pane not watched); its session's control client
    /// goes when no other watched pane needs it.
    pub async fn unwatch(&self, target: &str) -> Result<()> {
        self.check_open()?;
        let parsed = PaneTarget::parse(target)?;
        let known = {
            let table = lock(&self.inner.table);
            table.pane_ids().into_iter().find(|id| {
                *id == parsed.to_string() || table.get(id).is_some_and(|w| w.target == parsed)
            })
        };
        let pane_id = match known {
            Some(id) => id,
            None => match self.inner.tmux.resolve(&parsed).await {
                Ok(meta) => meta.pane_id,
                Err(AgentError::PaneNotFound { .. } | AgentError::NoServer { .. }) => return Ok(()),
                Err(e) => return Err(e),
            },
        };
        if lock(&self.inner.table).unwatch(&pane_id).is_some() {
            info!(target: "agent.watch", pane = %pane_id, "unwatched");
        }
        unfollow(&self.inner, &pane_id);
        sync_clients(&self.inner).await;
        Ok(())
    }

    /// How many captures the host has taken (watch starts, settles, safety timer, requests).
    pub fn captures_taken(&self) -> u64 {
        self.inner.captures.load(Ordering::Relaxed)
    }

    /// The `%id`s being watched (including panes whose server is gone and awaited).
    pub fn watching(&self) -> Vec<String> {
        lock(&self.inner.table).pane_ids()
    }

    /// Captures a pane now (reason REQUESTED; `request_id` is left for the caller to set).
    /// For a watched pane the diff is against its last snapshot.
    pub async fn capture(&self, c: pb::Capture) -> Result<pb::PaneSnapshot> {
        self.check_open()?;
        let target = PaneTarget::parse(&c.target)?;
        let meta = self.inner.tmux.resolve(&target).await?;
        let started = Instant::now();
        self.inner.captures.fetch_add(1, Ordering::Relaxed);
        let raw = self
            .inner
            .tmux
            .capture(&meta.pane_id, c.ansi, c.history_lines)
            .await?;
        let cleaned = Cleaned::from_raw(raw, c.history_lines);
        let processes = self.inner.procs.pane_processes(cleaned.meta.pid).await;
        // Scrollback would make the watch's diff meaningless; only screen captures count.
        let recorded = if c.history_lines == 0 {
            lock(&self.inner.table).finish_capture(
                &meta.pane_id,
                pb::SnapshotReason::Requested,
                started,
                Instant::now(),
                &cleaned.text,
                true,
            )
        } else {
            None
        };
        let mut snap =
            cleaned.to_snapshot(recorded.as_ref(), pb::SnapshotReason::Requested, unix_ms());
        with_processes(&mut snap, processes);
        Ok(snap)
    }

    fn pane_lock(&self, pane_id: &str) -> Arc<tokio::sync::Mutex<InjectMemory>> {
        lock(&self.inner.pane_locks)
            .entry(pane_id.to_string())
            .or_default()
            .clone()
    }

    /// Types text into a pane with the injection protocol (see [`crate::inject`]). Never
    /// panics; a refusal or failure carries its reason.
    pub async fn inject(&self, i: pb::Inject) -> pb::InjectResult {
        let started = Instant::now();
        let (pane_id, outcome) = self.inject_inner(&i).await;
        let snapshot_seq = {
            let mut table = lock(&self.inner.table);
            if outcome.outcome != pb::InjectOutcome::Refused {
                table.note_typed(&pane_id, Instant::now());
            }
            table.get(&pane_id).map_or(0, |w| w.seq())
        };
        let result = pb::InjectResult {
            outcome: outcome.outcome as i32,
            reason: outcome.reason,
            enter_retries: outcome.enter_retries,
            pane_id,
            elapsed_ms: started.elapsed().as_millis() as u64,
            snapshot_seq,
        };
        info!(target: "agent.inject", pane = %result.pane_id, outcome = ?outcome.outcome, retries = result.enter_retries, elapsed_ms = result.elapsed_ms, reason = %result.reason, "inject");
        result
    }

    async fn inject_inner(&self, i: &pb::Inject) -> (String, Outcome) {
        if let Err(e) = self.check_open() {
            return (String::new(), Outcome::failed(e.to_string(), 0));
        }
        let target = match PaneTarget::parse(&i.target) {
            Ok(t) => t,
            Err(e) => return (String::new(), Outcome::refused(e.to_string())),
        };
        if let Err(why) = inject::check_text(&i.text) {
            return (String::new(), Outcome::refused(why));
        }
        // A launch command line gets KARL's hook for the CLI it starts.
        let launched;
        let i = if i.launch {
            let socket = lock(&self.inner.hook_socket).clone();
            let text = match socket {
                Some(s) => {
                    let (line, problem) = crate::hooks::launch::prepare(&i.text, &s);
                    if let Some(p) = problem {
                        warn!(target: "agent.hooks", problem = %p, "launching without KARL's hook; the screen decides permissions");
                    }
                    line
                }
                None => i.text.clone(),
            };
            info!(target: "agent.inject", command = %text, "launching the agent CLI");
            launched = pb::Inject { text, ..i.clone() };
            &launched
        } else {
            i
        };
        // Resolve once: everything below addresses the pane by its id.
        let meta = match self.inner.tmux.resolve(&target).await {
            Ok(m) => m,
            Err(e) => return (String::new(), Outcome::failed(e.to_string(), 0)),
        };
        let pane_lock = self.pane_lock(&meta.pane_id);
        let mut memory = pane_lock.lock().await;
        let buffer = format!(
            "karl-{}-{}",
            std::process::id(),
            self.inner.buffer_seq.fetch_add(1, Ordering::SeqCst)
        );
        let outcome = inject::run(
            &self.inner.tmux,
            &self.inner.detector,
            &mut memory,
            &meta.pane_id,
            i,
            &buffer,
            self.inner.verify,
        )
        .await;
        (meta.pane_id, outcome)
    }

    /// Sends allowlisted keys (Enter, Escape, Up, Down, 1-9, y, n, C-c) to a pane; anything
    /// else is refused before a key is sent.
    pub async fn send_keys(&self, s: pb::SendKeys) -> Result<()> {
        self.check_open()?;
        inject::check_keys(&s.keys)?;
        let target = PaneTarget::parse(&s.target)?;
        let meta = self.inner.tmux.resolve(&target).await?;
        let pane_lock = self.pane_lock(&meta.pane_id);
        let _held = pane_lock.lock().await;
        if meta.in_mode {
            return Err(AgentError::PaneInMode { pane: meta.pane_id });
        }
        if meta.dead {
            return Err(AgentError::PaneDead { pane: meta.pane_id });
        }
        let mut args: Vec<&str> = vec!["send-keys", "-t", &meta.pane_id];
        args.extend(s.keys.iter().map(String::as_str));
        self.inner
            .tmux
            .run_bytes(&args, None, Some(&meta.pane_id))
            .await?;
        info!(target: "agent.inject", pane = %meta.pane_id, keys = ?s.keys, "keys sent");
        Ok(())
    }

    /// Sends a Claude Code hook event to the coordinator (in order with the snapshots).
    pub fn hook_event(&self, ev: pb::HookEvent) {
        emit(
            &self.inner,
            pb::AgentEvent {
                kind: Some(pb::agent_event::Kind::Hook(ev)),
            },
        );
    }

    /// Where the coordinator's answer to hook request `id` will arrive.
    pub fn hook_waiter(&self, id: u64) -> tokio::sync::oneshot::Receiver<pb::HookAnswer> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.inner.hook_waiters).insert(id, tx);
        rx
    }

    /// Gives up waiting for hook request `id`.
    pub fn hook_forget(&self, id: u64) {
        lock(&self.inner.hook_waiters).remove(&id);
    }

    /// Stops the scheduler and every control client and waits for their processes, so
    /// nothing is left behind. Later calls fail with [`AgentError::ShuttingDown`]; events
    /// already produced are still delivered.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        // Aborting the scheduler drops its running jobs, whose tmux processes are killed on
        // drop. The forwarder keeps draining what is queued; it ends with the host.
        let scheduler = lock(&self.inner.scheduler).take();
        if let Some(t) = scheduler {
            t.abort();
            let _ = t.await;
        }
        for (_, f) in lock(&self.inner.followers).drain() {
            f.abort();
        }
        let _ops = self.inner.client_ops.lock().await;
        let slots: Vec<ClientSlot> = lock(&self.inner.clients).drain().map(|(_, s)| s).collect();
        for slot in slots {
            slot.client.stop().await;
        }
        info!(target: "agent.watch", "pane host stopped");
    }
}

/// Adds the pane's process names to a snapshot.
fn with_processes(snap: &mut pb::PaneSnapshot, processes: Vec<String>) {
    if let Some(pane) = snap.pane.as_mut() {
        pane.processes = processes;
    }
}

/// Starts following the agent CLI's own files for a watched pane. A pane watched again
/// (the coordinator restarted, or resumed a session) gets a fresh follower, whose first
/// message rebuilds the state so far for the new listener.
fn follow(inner: &Arc<Inner>, pane_id: &str, pane_pid: u32) {
    if pane_pid == 0 {
        return;
    }
    let mut followers = lock(&inner.followers);
    if let Some(old) = followers.remove(pane_id) {
        old.abort();
    }
    followers.insert(
        pane_id.to_string(),
        tokio::spawn(crate::evidence::follow_pane(
            pane_id.to_string(),
            pane_pid,
            inner.procs.clone(),
            inner.outbox_tx.clone(),
        )),
    );
}

fn unfollow(inner: &Inner, pane_id: &str) {
    if let Some(f) = lock(&inner.followers).remove(pane_id) {
        f.abort();
    }
}

/// Sends an event through the ordered outbox.
fn emit(inner: &Inner, ev: pb::AgentEvent) {
    let _ = inner.outbox_tx.send(ev);
}

/// Captures a watched pane and sends the snapshot when the table says so. `WatchStart`
/// and `Requested` captures are always sent.
async fn capture_and_emit(
    inner: &Arc<Inner>,
    pane_id: &str,
    reason: pb::SnapshotReason,
    ansi: bool,
) -> Result<()> {
    let started = Instant::now();
    inner.captures.fetch_add(1, Ordering::Relaxed);
    let res = inner.tmux.capture(pane_id, ansi, 0).await;
    let forced = matches!(
        reason,
        pb::SnapshotReason::WatchStart | pb::SnapshotReason::Requested
    );
    match res {
        Ok(raw) => {
            let cleaned = Cleaned::from_raw(raw, 0);
            // Before the snapshot is recorded: nothing may wait between taking its sequence
            // number and sending it, or snapshots leave out of order.
            let processes = inner.procs.pane_processes(cleaned.meta.pid).await;
            let recorded = lock(&inner.table).finish_capture(
                pane_id,
                reason,
                started,
                Instant::now(),
                &cleaned.text,
                forced,
            );
            if let Some(rec) = recorded {
                debug!(target: "agent.watch", pane = pane_id, ?reason, seq = rec.seq, "snapshot");
                let mut snap = cleaned.to_snapshot(Some(&rec), reason, unix_ms());
                with_processes(&mut snap, processes);
                emit(inner, snapshot_event(snap));
            }
            Ok(())
        }
        Err(e) => {
            lock(&inner.table).capture_failed(pane_id, Instant::now());
            if matches!(
                e,
                AgentError::PaneNotFound { .. } | AgentError::NoServer { .. }
            ) {
                let _ = inner.sched_tx.send(SchedMsg::Reconcile);
            } else {
                warn!(target: "agent.watch", pane = pane_id, error = %e, "capture failed");
            }
            Err(e)
        }
    }
}

/// Makes sure a control client is attached to `session_id`.
async fn ensure_client(inner: &Arc<Inner>, session_id: &str) -> Result<()> {
    let _ops = inner.client_ops.lock().await;
    if inner.closed.load(Ordering::SeqCst) {
        return Err(AgentError::ShuttingDown);
    }
    if lock(&inner.clients)
        .get(session_id)
        .is_some_and(|s| s.client.is_running())
    {
        return Ok(());
    }
    let last = lock(&inner.last_attach).get(session_id).copied();
    if let Some(at) = last {
        let wait = (at + REATTACH_MIN).saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
    lock(&inner.last_attach).insert(session_id.to_string(), Instant::now());
    let generation = inner.client_generation.fetch_add(1, Ordering::SeqCst);
    let weak = Arc::downgrade(inner);
    let weak_end = weak.clone();
    let sid = session_id.to_string();
    let attached_to = session_id.to_string();
    let client = ControlClient::attach(
        &inner.tmux,
        session_id,
        move |notice| on_notice(&weak, &attached_to, notice),
        move |end| {
            if let (ClientEnd::Exited { reason }, Some(inner)) = (end, weak_end.upgrade()) {
                debug!(target: "agent.watch", session = %sid, %reason, "control client ended");
                let _ = inner.sched_tx.send(SchedMsg::ClientEnded {
                    session_id: sid,
                    generation,
                });
            }
        },
    )
    .await?;
    debug!(target: "agent.watch", session = session_id, "control client attached");
    let old =
        lock(&inner.clients).insert(session_id.to_string(), ClientSlot { client, generation });
    if let Some(old) = old {
        old.client.stop().await;
    }
    Ok(())
}

/// Stops clients whose session holds no live watched pane, and attaches missing ones.
async fn sync_clients(inner: &Arc<Inner>) {
    let wanted = lock(&inner.table).live_sessions();
    let unwanted: Vec<ClientSlot> = {
        let _ops = inner.client_ops.lock().await;
        let mut clients = lock(&inner.clients);
        let gone: Vec<String> = clients
            .keys()
            .filter(|s| !wanted.contains(s))
            .cloned()
            .collect();
        gone.iter().filter_map(|s| clients.remove(s)).collect()
    };
    for slot in unwanted {
        slot.client.stop().await;
    }
    for session in wanted {
        if let Err(e) = ensure_client(inner, &session).await {
            warn!(target: "agent.watch", session = %session, error = %e, "cannot attach control client");
            let _ = inner.sched_tx.send(SchedMsg::Reconcile);
        }
    }
}

/// Runs on the control client's task for every line: kept short (a table update).
fn on_notice(weak: &Weak<Inner>, session_id: &str, notice: Notice) {
    let Some(inner) = weak.upgrade() else {
        return;
    };
    match notice {
        Notice::Output { pane, bytes } => {
            let effect = lock(&inner.table).on_output(&pane, bytes, Instant::now(), unix_ms());
            if effect == OutputEffect::TurnedBusy {
                emit(
                    &inner,
                    pane_event(&pane, pb::PaneEventKind::Output, "output after settle"),
                );
                let _ = inner.sched_tx.send(SchedMsg::Wake);
            }
        }
        Notice::Topology => {
            let _ = inner.sched_tx.send(SchedMsg::Reconcile);
        }
        // With `detach-on-destroy off` a client whose session is destroyed moves to another
        // session instead of exiting: the watched panes of its own session are gone.
        Notice::SessionChanged { session_id: now } if now != session_id => {
            let _ = inner.sched_tx.send(SchedMsg::Reconcile);
        }
        Notice::SessionChanged { .. } | Notice::Exit { .. } | Notice::Error | Notice::Other => {}
    }
}

/// What a scheduler job was, so the scheduler knows when a reconcile finished.
enum JobKind {
    Capture,
    Reconcile,
    Retry,
}

async fn scheduler(weak: Weak<Inner>, mut rx: mpsc::UnboundedReceiver<SchedMsg>) {
    let mut jobs: JoinSet<JobKind> = JoinSet::new();
    let mut reconciling = false;
    let mut reconcile_again = false;
    loop {
        let deadline = {
            let Some(inner) = weak.upgrade() else { break };
            let now = Instant::now();
            let due = lock(&inner.table).take_due(now);
            for job in due {
                let inner = inner.clone();
                match job {
                    Job::Capture {
                        pane_id,
                        reason,
                        ansi,
                    } => {
                        jobs.spawn(async move {
                            let _ = capture_and_emit(&inner, &pane_id, reason, ansi).await;
                            JobKind::Capture
                        });
                    }
                    Job::Retry { pane_ids } => {
                        jobs.spawn(async move {
                            retry_gone(&inner, pane_ids).await;
                            JobKind::Retry
                        });
                    }
                }
            }
            let next = lock(&inner.table).next_deadline();
            next
        };
        let sleep_until = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else { break };
                let Some(inner) = weak.upgrade() else { break };
                let wants_reconcile = match msg {
                    SchedMsg::Wake => false,
                    SchedMsg::Reconcile => true,
                    SchedMsg::ClientEnded { session_id, generation } => {
                        let mut clients = lock(&inner.clients);
                        if clients.get(&session_id).is_some_and(|s| s.generation == generation) {
                            clients.remove(&session_id);
                        }
                        true
                    }
                };
                if wants_reconcile {
                    if reconciling {
                        reconcile_again = true;
                    } else {
                        reconciling = true;
                        jobs.spawn(async move {
                            reconcile(&inner).await;
                            JobKind::Reconcile
                        });
                    }
                }
            }
            Some(done) = jobs.join_next(), if !jobs.is_empty() => {
                if let Ok(JobKind::Reconcile) = done {
                    reconciling = false;
                    if reconcile_again {
                        reconcile_again = false;
                        if let Some(inner) = weak.upgrade() {
                            reconciling = true;
                            jobs.spawn(async move {
                                reconcile(&inner).await;
                                JobKind::Reconcile
                            });
                        }
                    }
                } else if done.is_err() {
                    // A panicked or aborted job must not wedge the reconcile flag.
                    reconciling = false;
                }
            }
            _ = tokio::time::sleep_until(sleep_until.into()) => {}
        }
    }
    jobs.shutdown().await;
}

/// Marks every live watched pane gone (server down) and reports it once per pane.
fn server_gone(inner: &Arc<Inner>) {
    let now = Instant::now();
    let live = lock(&inner.table).live_panes();
    for (pane_id, _) in live {
        if lock(&inner.table).mark_gone(&pane_id, now) {
            info!(target: "agent.watch", pane = %pane_id, "tmux server gone");
            emit(
                inner,
                pane_event(
                    &pane_id,
                    pb::PaneEventKind::ServerGone,
                    "the tmux server is gone; watching resumes when it is back",
                ),
            );
        }
    }
}

/// Checks the live watched panes against the server: a missing server makes them gone, a
/// missing pane is reported closed and dropped, a pane that moved follows to its new
/// session; then control clients are brought in line.
async fn reconcile(inner: &Arc<Inner>) {
    let mut confirmed = false;
    loop {
        let panes = match inner.tmux.list_panes_strict().await {
            Ok(p) => p,
            Err(AgentError::NoServer { .. }) => {
                server_gone(inner);
                break;
            }
            Err(e) => {
                warn!(target: "agent.watch", error = %e, "cannot list panes; will check again");
                let tx = inner.sched_tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(REATTACH_MIN).await;
                    let _ = tx.send(SchedMsg::Reconcile);
                });
                return;
            }
        };
        let live = lock(&inner.table).live_panes();
        let mut missing = Vec::new();
        for (pane_id, session_id) in &live {
            match panes.iter().find(|p| p.pane_id == *pane_id) {
                Some(p) if p.session_id != *session_id => {
                    lock(&inner.table).set_session(pane_id, &p.session_id)
                }
                Some(_) => {}
                None => missing.push(pane_id.clone()),
            }
        }
        if missing.is_empty() {
            break;
        }
        if !confirmed {
            // Ask again shortly: a server that is shutting down still answers for a moment.
            confirmed = true;
            tokio::time::sleep(CLOSE_CONFIRM).await;
            continue;
        }
        for pane_id in missing {
            unfollow(inner, &pane_id);
            if lock(&inner.table).unwatch(&pane_id).is_some() {
                info!(target: "agent.watch", pane = %pane_id, "pane closed");
                emit(
                    inner,
                    pane_event(&pane_id, pb::PaneEventKind::Closed, "the pane is gone"),
                );
            }
        }
        break;
    }
    sync_clients(inner).await;
}

/// Looks for gone panes' targets again; found ones are watched again (SERVER_BACK and a
/// fresh snapshot).
async fn retry_gone(inner: &Arc<Inner>, pane_ids: Vec<String>) {
    let panes = inner.tmux.list_panes().await.unwrap_or_default();
    for old_id in pane_ids {
        let target = match lock(&inner.table).get(&old_id) {
            Some(w) => w.target.clone(),
            None => continue,
        };
        let Some(meta) = panes.iter().find(|p| p.matches(&target)) else {
            lock(&inner.table).retry_failed(&old_id, Instant::now());
            continue;
        };
        let Some(spec) =
            lock(&inner.table).mark_back(&old_id, &meta.pane_id, &meta.session_id, Instant::now())
        else {
            continue;
        };
        if let Err(e) = ensure_client(inner, &meta.session_id).await {
            debug!(target: "agent.watch", pane = %meta.pane_id, error = %e, "server back but cannot attach yet");
            let mut table = lock(&inner.table);
            table.mark_gone(&meta.pane_id, Instant::now());
            table.retry_failed(&meta.pane_id, Instant::now());
            continue;
        }
        info!(target: "agent.watch", pane = %meta.pane_id, old = %old_id, target = %target, "watching again");
        // A new server means new pane ids and processes: follow the CLI there.
        unfollow(inner, &old_id);
        follow(inner, &meta.pane_id, meta.pid);
        emit(
            inner,
            pane_event(
                &old_id,
                pb::PaneEventKind::ServerBack,
                format!("watching {target} again as {}", meta.pane_id),
            ),
        );
        let _ = capture_and_emit(
            inner,
            &meta.pane_id,
            pb::SnapshotReason::WatchStart,
            spec.ansi,
        )
        .await;
    }
}

/// The link's view of the host: the same operations with errors as text-carrying boxes.
impl crate::link::PaneOps for PaneHost {
    async fn tmux_version(&self) -> String {
        PaneHost::tmux_version(self).await
    }

    async fn list_panes(&self) -> std::result::Result<Vec<pb::PaneInfo>, crate::link::OpError> {
        Ok(PaneHost::list_panes(self).await?)
    }

    fn watching(&self) -> Vec<String> {
        PaneHost::watching(self)
    }

    async fn watch(&self, w: pb::Watch) -> std::result::Result<(), crate::link::OpError> {
        Ok(PaneHost::watch(self, w).await?)
    }

    async fn unwatch(&self, target: String) -> std::result::Result<(), crate::link::OpError> {
        Ok(PaneHost::unwatch(self, &target).await?)
    }

    async fn capture(
        &self,
        c: pb::Capture,
    ) -> std::result::Result<pb::PaneSnapshot, crate::link::OpError> {
        Ok(PaneHost::capture(self, c).await?)
    }

    async fn inject(&self, i: pb::Inject) -> pb::InjectResult {
        PaneHost::inject(self, i).await
    }

    async fn run_check(
        &self,
        c: pb::RunCheck,
    ) -> std::result::Result<pb::CheckResult, crate::link::OpError> {
        let target = PaneTarget::parse(&c.target).map_err(|e| e.to_string())?;
        let meta = self
            .inner
            .tmux
            .resolve(&target)
            .await
            .map_err(|e| e.to_string())?;
        let timeout = match c.timeout_secs {
            0 => crate::check::DEFAULT_TIMEOUT,
            s => Duration::from_secs(u64::from(s)),
        };
        crate::check::run(
            std::path::Path::new(&meta.current_path),
            &c.command,
            timeout,
        )
        .await
        .map_err(|e| {
            format!(
                "cannot run the verify command in {}: {e}",
                meta.current_path
            )
            .into()
        })
    }

    async fn notify(&self, n: pb::Notify) -> std::result::Result<(), crate::link::OpError> {
        let program = lock(&self.inner.notifier).clone();
        crate::notify::show(&program, &n).await.map_err(Into::into)
    }

    fn hook_answer(&self, a: pb::HookAnswer) {
        match lock(&self.inner.hook_waiters).remove(&a.hook_request) {
            Some(tx) => {
                let _ = tx.send(a);
            }
            None => {
                debug!(target: "agent.hooks", request = a.hook_request, "an answer for a hook that stopped waiting")
            }
        }
    }

    async fn send_keys(&self, s: pb::SendKeys) -> std::result::Result<(), crate::link::OpError> {
        Ok(PaneHost::send_keys(self, s).await?)
    }
}

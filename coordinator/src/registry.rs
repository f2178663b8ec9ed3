//! The registry of connected agents: one entry per machine name, each holding the
//! command channel of that agent's live stream, its pending requests and a broadcast of
//! everything it reports (snapshots, pane events).
//!
//! Invariants:
//! - A machine name belongs to one agent process (instance id) at a time. A second
//!   process announcing the same name is refused while the first is alive; the same
//!   process reconnecting replaces its own stale entry at once.
//! - An entry is removed only by the stream that created it (generation check), so a
//!   stale stream closing late can't evict its replacement.
//!
//! No gRPC types beyond the generated messages live here; the services in
//! [`crate::link`] and [`crate::control`] adapt this to tonic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use karl_common::pb;
use karl_common::unix_ms;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::error::{CoordError, Result};

/// How long a capture, pane listing or watch may take on the agent.
pub const AGENT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// An injection waits for the paste, Enter and its verification (with retries).
pub const INJECT_TIMEOUT: Duration = Duration::from_secs(20);

/// How long an agent may stay silent before another process may take its machine name.
pub const STALE_AFTER: Duration = Duration::from_secs(20);

/// What an agent reported, fanned out to whoever listens (sessions, `watch-pane`).
#[derive(Debug, Clone)]
pub enum AgentReport {
    Snapshot(Arc<pb::PaneSnapshot>),
    PaneEvent(pb::PaneEvent),
    /// What the agent CLI in a watched pane wrote about itself.
    Evidence(Arc<pb::PaneEvidence>),
    /// A Claude Code hook event from a watched pane.
    Hook(Arc<pb::HookEvent>),
    /// The agent's stream ended (it will usually reconnect).
    Disconnected,
    /// The agent (re)connected and said hello.
    Connected,
}

/// One connected agent.
#[derive(Debug)]
pub struct AgentHandle {
    pub machine: String,
    pub generation: u64,
    hello: pb::Hello,
    peer: String,
    connected_ms: u64,
    last_seen_ms: AtomicU64,
    panes: Mutex<Vec<pb::PaneInfo>>,
    commands: mpsc::Sender<pb::AgentCommand>,
    pending: Mutex<HashMap<u64, oneshot::Sender<pb::CommandResult>>>,
}

impl AgentHandle {
    pub fn instance_id(&self) -> &str {
        &self.hello.instance_id
    }

    fn status(&self) -> pb::AgentStatus {
        pb::AgentStatus {
            machine: self.machine.clone(),
            version: self.hello.version.clone(),
            hostname: self.hello.hostname.clone(),
            tmux_version: self.hello.tmux_version.clone(),
            connected_unix_ms: self.connected_ms,
            last_heartbeat_unix_ms: self.last_seen_ms.load(Ordering::Relaxed),
            pane_count: lock(&self.panes).len() as u32,
            instance_id: self.hello.instance_id.clone(),
            peer: self.peer.clone(),
        }
    }

    fn is_stale(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.last_seen_ms.load(Ordering::Relaxed))
            > STALE_AFTER.as_millis() as u64
            || self.commands.is_closed()
    }
}

/// A poisoned lock only means another task panicked mid-update of plain data; the data
/// is still usable, so take it rather than cascade the panic.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// All connected agents.
#[derive(Debug)]
pub struct Registry {
    agents: Mutex<HashMap<String, Arc<AgentHandle>>>,
    /// Per machine, survives reconnects so listeners keep their subscription.
    reports: Mutex<HashMap<String, broadcast::Sender<AgentReport>>>,
    next_request: AtomicU64,
    next_generation: AtomicU64,
    /// The fleet changed: an agent came or went, or its pane list changed (machine name).
    fleet: broadcast::Sender<String>,
    /// Pane snapshots received from all agents (settled, or captured on request).
    snapshots: AtomicU64,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        Registry {
            agents: Mutex::new(HashMap::new()),
            reports: Mutex::new(HashMap::new()),
            next_request: AtomicU64::new(1),
            next_generation: AtomicU64::new(1),
            fleet: broadcast::channel(64).0,
            snapshots: AtomicU64::new(0),
        }
    }

    /// Registers an agent that said hello. Refuses a second live process for the same
    /// machine; replaces a stale entry or the same process's earlier stream.
    pub fn register(
        &self,
        hello: pb::Hello,
        peer: String,
        commands: mpsc::Sender<pb::AgentCommand>,
    ) -> Result<Arc<AgentHandle>> {
        let now = unix_ms();
        let mut agents = lock(&self.agents);
        if let Some(existing) = agents.get(&hello.machine) {
            if existing.instance_id() != hello.instance_id && !existing.is_stale(now) {
                return Err(CoordError::DuplicateMachine {
                    machine: hello.machine.clone(),
                    instance: existing.instance_id().to_string(),
                });
            }
            // Same process reconnecting, or a dead one: fail its pending requests now
            // instead of letting them time out.
            lock(&existing.pending).clear();
        }
        let handle = Arc::new(AgentHandle {
            machine: hello.machine.clone(),
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            panes: Mutex::new(hello.panes.clone()),
            hello,
            peer,
            connected_ms: now,
            last_seen_ms: AtomicU64::new(now),
            commands,
            pending: Mutex::new(HashMap::new()),
        });
        agents.insert(handle.machine.clone(), handle.clone());
        drop(agents);
        self.publish(&handle.machine, AgentReport::Connected);
        self.fleet_changed(&handle.machine);
        Ok(handle)
    }

    /// Removes the entry if it is still the one this stream created.
    pub fn unregister(&self, machine: &str, generation: u64) {
        let removed = {
            let mut agents = lock(&self.agents);
            match agents.get(machine) {
                Some(h) if h.generation == generation => agents.remove(machine),
                _ => None,
            }
        };
        if let Some(h) = removed {
            lock(&h.pending).clear();
            self.publish(machine, AgentReport::Disconnected);
            self.fleet_changed(machine);
        }
    }

    /// Every fleet change from now on (machine names), for the dashboard's live feed.
    pub fn fleet_changes(&self) -> broadcast::Receiver<String> {
        self.fleet.subscribe()
    }

    fn fleet_changed(&self, machine: &str) {
        // No receivers is fine: no dashboard is open.
        let _ = self.fleet.send(machine.to_string());
    }

    /// The panes a connected agent last reported.
    pub fn panes(&self, machine: &str) -> Vec<pb::PaneInfo> {
        lock(&self.agents)
            .get(machine)
            .map(|h| lock(&h.panes).clone())
            .unwrap_or_default()
    }

    /// Pane snapshots received from all agents since start (settled or on request).
    pub fn snapshots_seen(&self) -> u64 {
        self.snapshots.load(Ordering::Relaxed)
    }

    pub fn get(&self, machine: &str) -> Result<Arc<AgentHandle>> {
        // Release the lock before building the error: connected_list() takes it again.
        let found = lock(&self.agents).get(machine).cloned();
        found.ok_or_else(|| CoordError::UnknownMachine {
            machine: machine.to_string(),
            connected: self.connected_list(),
        })
    }

    pub fn is_connected(&self, machine: &str) -> bool {
        lock(&self.agents).contains_key(machine)
    }

    fn connected_list(&self) -> String {
        let mut names: Vec<String> = lock(&self.agents).keys().cloned().collect();
        names.sort();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    }

    /// Status of every connected agent, sorted by machine.
    pub fn list(&self) -> Vec<pb::AgentStatus> {
        let mut v: Vec<_> = lock(&self.agents).values().map(|h| h.status()).collect();
        v.sort_by(|a, b| a.machine.cmp(&b.machine));
        v
    }

    /// Subscribes to a machine's reports (snapshots, pane events, connects).
    pub fn subscribe(&self, machine: &str) -> broadcast::Receiver<AgentReport> {
        lock(&self.reports)
            .entry(machine.to_string())
            .or_insert_with(|| broadcast::channel(256).0)
            .subscribe()
    }

    fn publish(&self, machine: &str, report: AgentReport) {
        if let Some(tx) = lock(&self.reports).get(machine) {
            // No receivers is fine: nobody is listening to this machine.
            let _ = tx.send(report);
        }
    }

    /// Handles one event from an agent's stream (everything but the first Hello).
    pub fn on_event(&self, agent: &AgentHandle, event: pb::AgentEvent) {
        agent.last_seen_ms.store(unix_ms(), Ordering::Relaxed);
        let Some(kind) = event.kind else { return };
        match kind {
            pb::agent_event::Kind::Hello(_) => {
                tracing::warn!(target: "coord.link", machine = %agent.machine, "ignoring a second hello on one stream");
            }
            pb::agent_event::Kind::Heartbeat(_) => {}
            pb::agent_event::Kind::PaneList(list) => {
                *lock(&agent.panes) = list.panes;
                self.fleet_changed(&agent.machine);
            }
            pb::agent_event::Kind::Snapshot(snap) => {
                self.snapshots.fetch_add(1, Ordering::Relaxed);
                self.publish(&agent.machine, AgentReport::Snapshot(Arc::new(snap)));
            }
            pb::agent_event::Kind::PaneEvent(ev) => {
                self.publish(&agent.machine, AgentReport::PaneEvent(ev));
            }
            pb::agent_event::Kind::Evidence(ev) => {
                self.publish(&agent.machine, AgentReport::Evidence(Arc::new(ev)));
            }
            pb::agent_event::Kind::Hook(h) => {
                self.publish(&agent.machine, AgentReport::Hook(Arc::new(h)));
            }
            pb::agent_event::Kind::Result(result) => {
                match &result.detail {
                    Some(pb::command_result::Detail::Panes(list)) => {
                        *lock(&agent.panes) = list.panes.clone();
                        self.fleet_changed(&agent.machine);
                    }
                    Some(pb::command_result::Detail::Snapshot(_)) => {
                        self.snapshots.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
                let waiter = lock(&agent.pending).remove(&result.request_id);
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(result);
                    }
                    None => {
                        tracing::debug!(target: "coord.link", machine = %agent.machine, request = result.request_id, "result for a request nobody waits for");
                    }
                }
            }
        }
    }

    /// Sends a command to `machine` and waits for its result.
    pub async fn call(
        &self,
        machine: &str,
        kind: pb::agent_command::Kind,
        timeout: Duration,
    ) -> Result<pb::CommandResult> {
        let agent = self.get(machine)?;
        let request_id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&agent.pending).insert(request_id, tx);
        let cmd = pb::AgentCommand {
            request_id,
            kind: Some(kind),
        };
        let gone = || CoordError::AgentGone {
            machine: machine.to_string(),
        };
        if agent.commands.send(cmd).await.is_err() {
            lock(&agent.pending).remove(&request_id);
            return Err(gone());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(result)) if result.ok => Ok(result),
            Ok(Ok(result)) => Err(CoordError::AgentFailed {
                machine: machine.to_string(),
                message: result.error,
            }),
            Ok(Err(_)) => Err(gone()),
            Err(_) => {
                lock(&agent.pending).remove(&request_id);
                Err(CoordError::AgentTimeout {
                    machine: machine.to_string(),
                    secs: timeout.as_secs(),
                })
            }
        }
    }

    /// Asks `machine` for what a pane shows now.
    pub async fn capture(&self, machine: &str, capture: pb::Capture) -> Result<pb::PaneSnapshot> {
        let r = self
            .call(
                machine,
                pb::agent_command::Kind::Capture(capture),
                AGENT_CALL_TIMEOUT,
            )
            .await?;
        match r.detail {
            Some(pb::command_result::Detail::Snapshot(s)) => Ok(s),
            _ => Err(CoordError::Internal(
                "agent answered a capture without a snapshot".into(),
            )),
        }
    }

    /// Has `machine` type into a pane; the agent's own verdict comes back as the result.
    pub async fn inject(&self, machine: &str, inject: pb::Inject) -> Result<pb::InjectResult> {
        let r = self
            .call(
                machine,
                pb::agent_command::Kind::Inject(inject),
                INJECT_TIMEOUT,
            )
            .await?;
        match r.detail {
            Some(pb::command_result::Detail::Inject(i)) => Ok(i),
            _ => Err(CoordError::Internal(
                "agent answered an inject without a result".into(),
            )),
        }
    }

    /// Sends a command without waiting for a reply.
    pub async fn send(&self, machine: &str, kind: pb::agent_command::Kind) -> Result<()> {
        let agent = self.get(machine)?;
        agent
            .commands
            .send(pb::AgentCommand {
                request_id: 0,
                kind: Some(kind),
            })
            .await
            .map_err(|_| CoordError::AgentGone {
                machine: machine.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn hello(machine: &str, instance: &str) -> pb::Hello {
        pb::Hello {
            machine: machine.into(),
            instance_id: instance.into(),
            ..Default::default()
        }
    }

    #[test]
    fn second_process_is_refused_same_process_replaces() {
        let reg = Registry::new();
        let (tx1, _rx1) = mpsc::channel(4);
        let first = reg.register(hello("mac2", "a"), "p".into(), tx1).unwrap();
        let (tx2, _rx2) = mpsc::channel(4);
        let err = reg
            .register(hello("mac2", "b"), "p".into(), tx2)
            .unwrap_err();
        assert!(matches!(err, CoordError::DuplicateMachine { .. }), "{err}");
        let (tx3, _rx3) = mpsc::channel(4);
        let again = reg.register(hello("mac2", "a"), "p".into(), tx3).unwrap();
        assert_ne!(first.generation, again.generation);
        // The stale stream closing late must not evict its replacement.
        reg.unregister("mac2", first.generation);
        assert!(reg.is_connected("mac2"));
        reg.unregister("mac2", again.generation);
        assert!(!reg.is_connected("mac2"));
    }

    #[test]
    fn dead_stream_frees_the_name() {
        let reg = Registry::new();
        let (tx1, rx1) = mpsc::channel(4);
        reg.register(hello("mac3", "a"), "p".into(), tx1).unwrap();
        drop(rx1);
        let (tx2, _rx2) = mpsc::channel(4);
        assert!(reg.register(hello("mac3", "b"), "p".into(), tx2).is_ok());
    }

    #[test]
    fn unknown_machine_lists_connected() {
        let reg = Registry::new();
        let (tx, _rx) = mpsc::channel(4);
        reg.register(hello("mac1", "a"), "p".into(), tx).unwrap();
        let err = reg.get("mac9").unwrap_err().to_string();
        assert!(err.contains("mac9") && err.contains("mac1"), "{err}");
    }
}

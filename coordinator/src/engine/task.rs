//! The per-session task: the imperative shell around a [`Session`] machine.
//!
//! It turns the agent's reports, operator commands and a 250 ms clock into events, and
//! carries out every effect the machine returns, in order — agent calls through the
//! registry, model calls, store writes (fsyncs on sled's own threads, never on the
//! runtime's), update broadcasts — feeding each result back as the next event.
//! Nothing here decides anything.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use karl_common::pb;
use karl_common::unix_ms;
use tokio::sync::{broadcast, mpsc, watch};

use super::machine::{CallError, Command, Effect, Event, Session};
use super::prompt::ModelAnswer;
use super::{Change, Shared, View};
use crate::error::CoordError;
use crate::records::{AuditKind, SessionRecord};
use crate::registry::{AgentReport, AGENT_CALL_TIMEOUT};

/// Limit on a `--verify` command (the agent kills it then).
const VERIFY_TIMEOUT: Duration = Duration::from_secs(600);
use crate::wire;

/// The channels a session task serves.
pub(super) struct Channels {
    pub updates: broadcast::Sender<pb::SessionUpdate>,
    pub view: watch::Sender<View>,
}

/// Runs one session until it ends, the engine stops, or its agent's report channel closes.
pub(super) async fn run(
    shared: Arc<Shared>,
    mut machine: Session,
    mut commands: mpsc::Receiver<Command>,
    ch: Channels,
) {
    let id = machine.record().id.clone();
    let machine_name = machine.record().machine.clone();
    let pane_id = machine.record().pane_id.clone();
    let mut stop = shared.stop.subscribe();
    let mut reports = shared.registry.subscribe(&machine_name);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let shell = Shell {
        shared: &shared,
        id: &id,
        machine: &machine_name,
        pane_id: &pane_id,
        ch: &ch,
    };
    let connected = shared.registry.is_connected(&machine_name);
    shell.drive(&mut machine, Event::Start { connected }).await;
    while machine.record().status.is_live() {
        let event = tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
                continue;
            }
            Some(c) = commands.recv() => Event::Operator(c),
            r = reports.recv() => match r {
                Ok(AgentReport::Snapshot(s)) if s.pane.as_ref().is_some_and(|p| p.pane_id == pane_id) => Event::Snapshot(s),
                Ok(AgentReport::PaneEvent(ev)) if ev.pane_id == pane_id => match ev.kind() {
                    pb::PaneEventKind::Closed => Event::PaneClosed,
                    pb::PaneEventKind::ServerGone => Event::ServerGone,
                    pb::PaneEventKind::ServerBack => Event::AgentConnected,
                    pb::PaneEventKind::Output => Event::PaneOutput,
                    _ => continue,
                },
                Ok(AgentReport::Evidence(ev)) if ev.pane_id == pane_id => Event::Evidence(ev),
                Ok(AgentReport::Hook(h)) if h.pane_id == pane_id => Event::Hook(h),
                Ok(AgentReport::Disconnected) => Event::AgentDisconnected,
                Ok(AgentReport::Connected) => Event::AgentConnected,
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(target: "coord.engine", session = %id, skipped = n, "session lagged behind its agent's reports");
                    // Transcript facts come as changes: with some lost, the state is rebuilt.
                    Event::ReportsLost
                }
                Err(broadcast::error::RecvError::Closed) => {
                    shell.release().await;
                    return;
                }
            },
            _ = tick.tick() => Event::Tick,
        };
        shell.drive(&mut machine, event).await;
    }
}

struct Shell<'a> {
    shared: &'a Shared,
    id: &'a str,
    machine: &'a str,
    pane_id: &'a str,
    ch: &'a Channels,
}

impl Shell<'_> {
    /// Feeds `event` and carries out the effects to completion.
    async fn drive(&self, machine: &mut Session, event: Event) {
        let mut queue: VecDeque<Effect> = machine.on(unix_ms(), event).into();
        while let Some(effect) = queue.pop_front() {
            if let Some(result) = self.perform(effect).await {
                queue.extend(machine.on(unix_ms(), result));
            }
        }
        // Most events (ticks) leave the screen as it was: tell the facade only of a new one.
        let screen = machine.last_snapshot();
        let new_screen = self.ch.view.send_if_modified(|v| {
            let same = match (&v.screen, screen) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if !same {
                v.screen = screen.cloned();
            }
            !same
        });
        if new_screen {
            self.shared.changed(self.id, Change::Screen);
        }
    }

    /// The facade's view of the record, counted by the metrics and told to live views.
    fn show_record(&self, record: SessionRecord) {
        let metrics = &self.shared.metrics;
        let mut notice = None;
        self.ch.view.send_modify(|v| {
            metrics.record_changed(&v.record, &record);
            let now = karl_common::unix_ms();
            notice = crate::notify::notice::on_change(&v.record, &record, now);
            self.shared
                .event(|| crate::events::session_event(&v.record, &record, now));
            v.record = record;
        });
        if let Some(n) = notice {
            self.shared.notice(n);
        }
        self.shared.changed(self.id, Change::Record);
    }

    async fn perform(&self, effect: Effect) -> Option<Event> {
        let reg = &self.shared.registry;
        let store = &self.shared.store;
        match effect {
            Effect::Watch => {
                let watch = pb::agent_command::Kind::Watch(pb::Watch {
                    target: self.pane_id.to_string(),
                    settle_ms: self.shared.deps.cfg.limits.settle_ms,
                    safety_secs: self.shared.deps.cfg.safety_secs,
                    ansi: true,
                });
                let r = reg.call(self.machine, watch, AGENT_CALL_TIMEOUT).await;
                Some(Event::Watched(r.map(|_| ()).map_err(|e| CallError {
                    fatal: matches!(e, CoordError::AgentFailed { .. }),
                    message: e.to_string(),
                })))
            }
            Effect::Capture => Some(Event::Captured(
                self.shared
                    .capture(self.machine, self.pane_id)
                    .await
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            )),
            Effect::AskModel(req) => {
                let Some(model) = &self.shared.model else {
                    return Some(Event::ModelReplied(Err("no model configured".into())));
                };
                let reply = model.complete(&req).await;
                match &reply {
                    Ok(r) => self.shared.metrics.model_answered(r.latency),
                    Err(_) => self.shared.metrics.model_failed(),
                }
                Some(Event::ModelReplied(
                    reply
                        .map(|r| ModelAnswer {
                            text: r.text,
                            latency_ms: r.latency.as_millis() as u64,
                            prompt_tokens: r.prompt_tokens,
                            cached_tokens: r.cached_tokens,
                        })
                        .map_err(|e| e.to_string()),
                ))
            }
            Effect::Type { text, force } => {
                let inject = pb::Inject {
                    target: self.pane_id.to_string(),
                    text,
                    force,
                    ..Default::default()
                };
                Some(Event::Typed(
                    self.typed(reg.inject(self.machine, inject).await),
                ))
            }
            Effect::Launch(text) => {
                let inject = pb::Inject {
                    target: self.pane_id.to_string(),
                    text,
                    force: true,
                    launch: true,
                    ..Default::default()
                };
                Some(Event::Typed(
                    self.typed(reg.inject(self.machine, inject).await),
                ))
            }
            Effect::SendKeys(keys) => {
                let kind = pb::agent_command::Kind::SendKeys(pb::SendKeys {
                    target: self.pane_id.to_string(),
                    keys,
                });
                let r = reg.call(self.machine, kind, AGENT_CALL_TIMEOUT).await;
                Some(Event::KeysSent(r.map(|_| ()).map_err(|e| e.to_string())))
            }
            Effect::RunCheck(command) => {
                let kind = pb::agent_command::Kind::RunCheck(pb::RunCheck {
                    target: self.pane_id.to_string(),
                    command,
                    timeout_secs: VERIFY_TIMEOUT.as_secs() as u32,
                });
                let r = reg
                    .call(self.machine, kind, VERIFY_TIMEOUT + AGENT_CALL_TIMEOUT)
                    .await;
                Some(Event::Checked(match r {
                    Ok(res) if !res.ok => Err(res.error),
                    Ok(res) => match res.detail {
                        Some(pb::command_result::Detail::Check(c)) => Ok(c),
                        _ => Err("the agent sent no result".into()),
                    },
                    Err(e) => Err(e.to_string()),
                }))
            }
            Effect::Sleep(d) => {
                tokio::time::sleep(d).await;
                Some(Event::Woke)
            }
            Effect::Save { record, durable } => {
                let r = store.update_session(&record.id, &record);
                let r = match r {
                    Ok(()) if durable => store.flush_async().await,
                    other => other,
                };
                if let Err(e) = r {
                    tracing::error!(target: "coord.engine", session = %self.id, error = %e, "cannot save the session");
                }
                self.show_record(record);
                None
            }
            Effect::CommitTurn {
                record,
                turn,
                audit,
                durable,
                ack,
            } => {
                let mut r = store.record_turn(&record.id, &record, turn.n, &turn, &audit);
                if r.is_ok() && durable {
                    r = store.flush_async().await;
                }
                self.show_record(record);
                if ack {
                    return Some(Event::Committed(r.map_err(|e| e.to_string())));
                }
                if let Err(e) = r {
                    tracing::error!(target: "coord.engine", session = %self.id, turn = turn.n, error = %e, "cannot record the turn");
                }
                None
            }
            Effect::Audit(entry) => {
                if entry.kind == AuditKind::Permission {
                    self.shared
                        .metrics
                        .permission(permission_decision(&entry.detail));
                }
                if let Err(e) = store.append_audit(&entry).await {
                    tracing::error!(target: "coord.engine", session = %self.id, error = %e, "cannot write the audit log");
                }
                None
            }
            Effect::Publish(u) => {
                if let Some(t) = &u.turn {
                    self.shared
                        .event(|| Some(crate::events::turn_event(&u.record, t)));
                }
                let _ = self.ch.updates.send(wire::session_update(&u));
                self.shared.changed(self.id, Change::Event(u.event));
                None
            }
            Effect::AnswerHook(a) => {
                let decision = match a.decision() {
                    pb::HookDecision::Allow => "allow",
                    pb::HookDecision::Deny => "deny",
                    pb::HookDecision::StepAside => "step_aside",
                };
                self.shared.metrics.permission(decision);
                let request = a.hook_request;
                if let Err(e) = self
                    .shared
                    .registry
                    .send(self.machine, pb::agent_command::Kind::HookAnswer(a))
                    .await
                {
                    tracing::warn!(target: "coord.engine", session = %self.id, request, error = %e, "cannot answer the hook; the CLI will ask on screen");
                }
                None
            }
            Effect::Release => {
                self.release().await;
                None
            }
        }
    }

    /// An injection's result as the machine takes it, counted by outcome.
    fn typed(&self, r: crate::error::Result<pb::InjectResult>) -> Result<pb::InjectResult, String> {
        let outcome = match &r {
            Ok(i) => super::inject_status(i).0.as_str(),
            Err(_) => "failed",
        };
        self.shared.metrics.injection(outcome);
        r.map_err(|e| e.to_string())
    }

    /// Frees the pane: its lock, and the agent's watch.
    async fn release(&self) {
        let key = crate::records::pane_key(self.machine, self.pane_id);
        if let Err(e) = self.shared.store.unlock_pane(&key, self.id).await {
            tracing::warn!(target: "coord.engine", session = %self.id, error = %e, "cannot release the pane lock");
        }
        let unwatch = pb::agent_command::Kind::Unwatch(pb::Unwatch {
            target: self.pane_id.to_string(),
        });
        let _ = self.shared.registry.send(self.machine, unwatch).await;
    }
}

/// A permission audit line's decision: `approved by …`, `denied by …`, else a failure.
fn permission_decision(detail: &str) -> &'static str {
    if detail.starts_with("approved") {
        "approved"
    } else if detail.starts_with("denied") {
        "denied"
    } else {
        "failed"
    }
}

//! Turn and session events on NATS (`[events] nats_url`), for whatever a team builds on
//! KARL — a live feed, a training-data collector, its own alerts:
//!
//! - `karl.twin.turn`: a turn typed (or recorded, in a dry run), then again once judged —
//!   its prompt, where it came from, the candidates the gate refused, outcome, latency.
//! - `karl.session.<status>`: `karl.session.started` when a session starts, then one per
//!   status change (`paused`, `escalated`, `running`, …); the ends (`done`, `stopped`,
//!   `failed`) carry the session's summary.
//!
//! Fire-and-forget (the seeds' risk R9): the engine puts an [`Event`] on a broadcast
//! channel, which never waits. One task publishes them; while NATS is away the client
//! reconnects in the background, the last [`QUEUE`] events wait on the channel and older
//! ones are dropped and counted (`karl_events_total{outcome="dropped"}`). A session never
//! waits on NATS and never fails for it.
//!
//! Pure: [`EventsFile`], [`turn_event`], [`session_event`]. IO: [`start`]. Not here:
//! deciding what a turn or a status is (the engine).

use std::sync::Arc;
use std::time::Duration;

use karl_common::context::redact;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use crate::engine::Engine;
use crate::records::{SessionRecord, TurnRecord};

/// Events waiting for NATS; more are dropped, oldest first.
pub const QUEUE: usize = 1024;
/// Events the client itself holds; while NATS is away the rest wait on the bus.
const CLIENT_BUFFER: usize = 64;
/// How often the publisher looks whether NATS is back.
const AWAY_POLL: Duration = Duration::from_millis(100);
/// How long one publish may wait on the client's own buffer.
const PUBLISH_WAIT: Duration = Duration::from_millis(500);
/// How long the events still queued get at shutdown.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// The subject of every turn event.
pub const TURN_SUBJECT: &str = "karl.twin.turn";

/// The `[events]` table of karl-coord.toml.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsFile {
    /// `nats://host:4222` (credentials as `nats://user:pass@host:4222`); unset publishes
    /// nothing.
    pub nats_url: Option<String>,
}

impl EventsFile {
    /// The checked URL, or `None` when events are off.
    pub fn resolve(self) -> Result<Option<String>, String> {
        let Some(url) = self.nats_url.map(|u| u.trim().to_string()) else {
            return Ok(None);
        };
        if url.is_empty() {
            return Err("nats_url is empty: give the NATS server, e.g. nats://mac5:4222, or leave [events] out".into());
        }
        let addr = url.parse::<async_nats::ServerAddr>().map_err(|e| {
            format!("nats_url {url:?} is not a NATS address ({e}): write it as nats://host:4222")
        })?;
        let scheme = addr.into_inner().scheme().to_string();
        if scheme != "nats" && scheme != "tls" {
            return Err(format!(
                "nats_url {url:?}: KARL speaks to NATS over nats:// or tls://, not {scheme}://"
            ));
        }
        Ok(Some(url))
    }
}

/// One message for NATS.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub subject: String,
    pub payload: serde_json::Value,
}

/// An event on `subject`: what every event says about its session, then `fields`.
fn event(subject: String, rec: &SessionRecord, fields: serde_json::Value) -> Event {
    let mut m = serde_json::Map::new();
    m.insert("session".into(), rec.id.clone().into());
    m.insert("machine".into(), rec.machine.clone().into());
    m.insert("target".into(), rec.target.clone().into());
    m.insert("pane".into(), rec.pane_id.clone().into());
    m.insert("project".into(), rec.project.clone().into());
    m.insert("dry_run".into(), rec.dry_run.into());
    if let serde_json::Value::Object(f) = fields {
        m.extend(f);
    }
    Event {
        subject,
        payload: serde_json::Value::Object(m),
    }
}

/// `karl.twin.turn`: the turn as it stands (typed, refused, or judged), secrets redacted.
pub fn turn_event(rec: &SessionRecord, turn: &TurnRecord) -> Event {
    let clean = |t: &str| redact(t).0.into_owned();
    let fields = json!({
        "turn": turn.n,
        "prompt": clean(&turn.prompt),
        "source": turn.source.as_str(),
        "outcome": turn.outcome.as_str(),
        "inject": turn.inject.as_str(),
        "judged": turn.outcome.judged().is_some(),
        "state": turn.state.to_string(),
        "task": turn.task,
        "gate": turn.gate,
        "refused": turn.refused.iter().map(|c| json!({
            "text": clean(&c.text),
            "rules": c.rules,
        })).collect::<Vec<_>>(),
        "model_latency_ms": turn.model_latency_ms,
        "prompt_tokens": turn.prompt_tokens,
        "unix_ms": turn.unix_ms,
    });
    event(TURN_SUBJECT.to_string(), rec, fields)
}

/// `karl.session.*` for a record change: `started` for a new session, its new status
/// when that changed, nothing otherwise. An ended session's event carries its summary.
pub fn session_event(before: &SessionRecord, after: &SessionRecord, now_ms: u64) -> Option<Event> {
    let started = before.id.is_empty() && !after.id.is_empty();
    if !started && before.status == after.status {
        return None;
    }
    let name = if started {
        "started"
    } else {
        after.status.as_str()
    };
    let fields = json!({
        "status": after.status.as_str(),
        "previous": if started { serde_json::Value::Null } else { before.status.as_str().into() },
        "reason": after.reason,
        "goal": after.goal,
        "turns": after.turns,
        "max_turns": after.max_turns,
        "unix_ms": now_ms,
    });
    let mut e = event(format!("karl.session.{name}"), after, fields);
    if !after.status.is_live() {
        if let serde_json::Value::Object(m) = &mut e.payload {
            m.insert(
                "summary".into(),
                serde_json::to_value(after.summary()).unwrap_or_default(),
            );
        }
    }
    Some(e)
}

/// Publishes the engine's events to `url` until `stop` turns true, then sends what is
/// still queued (within [`FLUSH_WAIT`]); await the handle after the engine has stopped.
/// Returns at once: the connection is made (and remade) in the background.
pub fn start(url: String, engine: &Arc<Engine>, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    // Subscribed here, not in the task, so nothing said after `start` is missed.
    let mut rx = engine.event_bus();
    let metrics = engine.metrics().clone();
    let where_ = url.clone();
    tokio::spawn(async move {
        let client = async_nats::ConnectOptions::new()
            .name(concat!("karl-coord/", env!("CARGO_PKG_VERSION")))
            .retry_on_initial_connect()
            // Events wait on the bus, not in the client: it does not send while away.
            .client_capacity(CLIENT_BUFFER)
            .event_callback(move |e| {
                let url = where_.clone();
                async move {
                    match e {
                        async_nats::Event::Connected => {
                            tracing::info!(target: "coord.events", %url, "connected to NATS; publishing turn and session events")
                        }
                        async_nats::Event::Disconnected => {
                            tracing::warn!(target: "coord.events", %url, "NATS is away: the last {QUEUE} events wait while the client reconnects; sessions carry on")
                        }
                        other => {
                            tracing::debug!(target: "coord.events", %url, event = %other, "NATS client")
                        }
                    }
                }
            })
            .connect(url.as_str())
            .await;
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(target: "coord.events", %url, error = %e, "cannot set up the NATS client; no events will be published");
                return;
            }
        };
        let publisher = Publisher {
            client,
            metrics,
            url,
        };
        loop {
            // While NATS is away, events stay on the bus; the oldest fall off, counted.
            if !publisher.connected() {
                tokio::select! {
                    _ = stop.changed() => break,
                    () = tokio::time::sleep(AWAY_POLL) => continue,
                }
            }
            let event = tokio::select! {
                _ = stop.changed() => break,
                r = rx.recv() => match r {
                    Ok(e) => e,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        publisher.lagged(n);
                        continue;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            };
            publisher.send(event).await;
        }
        // At shutdown: what is already queued goes out, if NATS is there to take it.
        let drained = tokio::time::timeout(FLUSH_WAIT, async {
            while publisher.connected() {
                match rx.try_recv() {
                    Ok(e) => publisher.send(e).await,
                    Err(broadcast::error::TryRecvError::Lagged(n)) => publisher.lagged(n),
                    Err(_) => break,
                }
            }
            if publisher.connected() {
                publisher.client.flush().await.map_err(|e| e.to_string())
            } else {
                Err("NATS is away".to_string())
            }
        })
        .await;
        if !matches!(drained, Ok(Ok(()))) {
            tracing::info!(target: "coord.events", url = %publisher.url, "events still queued for NATS at shutdown were dropped");
        }
    })
}

/// The client, and what it counts.
struct Publisher {
    client: async_nats::Client,
    metrics: Arc<crate::metrics::Metrics>,
    url: String,
}

impl Publisher {
    fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    fn lagged(&self, n: u64) {
        tracing::warn!(target: "coord.events", url = %self.url, dropped = n, "NATS events dropped: the queue was full");
        self.metrics.events_dropped(n);
    }

    async fn send(&self, event: Event) {
        let payload = serde_json::to_vec(&event.payload).unwrap_or_default();
        let sent = tokio::time::timeout(
            PUBLISH_WAIT,
            self.client.publish(event.subject, payload.into()),
        )
        .await;
        match sent {
            Ok(Ok(())) => self.metrics.event("published"),
            Ok(Err(e)) => {
                tracing::debug!(target: "coord.events", url = %self.url, error = %e, "cannot publish an event");
                self.metrics.event("failed");
            }
            // The connection went away with the client's buffer full: this one is lost.
            Err(_) => self.metrics.event("dropped"),
        }
    }
}

/// A broadcast channel for [`Event`]s of the size the publisher keeps.
pub fn bus() -> broadcast::Sender<Event> {
    broadcast::channel(QUEUE).0
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::records::{RefusedCandidate, Status, TurnOutcome, TurnSource};

    fn rec() -> SessionRecord {
        SessionRecord {
            id: "mac2_3_17".into(),
            machine: "mac2".into(),
            target: "agent:1.1".into(),
            pane_id: "%3".into(),
            project: "karl".into(),
            goal: "ship it".into(),
            max_turns: 8,
            ..Default::default()
        }
    }

    #[test]
    fn sessions_say_start_status_changes_and_end_with_a_summary() {
        let r = rec();
        let started = session_event(&SessionRecord::default(), &r, 5).unwrap();
        assert_eq!(started.subject, "karl.session.started");
        assert_eq!(started.payload["session"], "mac2_3_17");
        assert_eq!(started.payload["previous"], serde_json::Value::Null);
        assert!(started.payload.get("summary").is_none());

        // A save that changes no status says nothing.
        let mut more = r.clone();
        more.turns = 1;
        assert_eq!(session_event(&r, &more, 6), None);

        let mut paused = more.clone();
        paused.status = Status::Paused;
        let e = session_event(&more, &paused, 7).unwrap();
        assert_eq!(e.subject, "karl.session.paused");
        assert_eq!(e.payload["previous"], "running");

        let mut done = paused.clone();
        done.status = Status::Done;
        done.reason = "all tasks done".into();
        done.progress_turns = 1;
        let e = session_event(&paused, &done, 8).unwrap();
        assert_eq!(e.subject, "karl.session.done");
        assert_eq!(e.payload["summary"]["turns"], 1);
        assert_eq!(e.payload["summary"]["efficiency"], 1.0);
        assert_eq!(e.payload["reason"], "all tasks done");
    }

    #[test]
    fn turns_carry_the_prompt_and_the_refusals_redacted() {
        let turn = TurnRecord {
            n: 3,
            prompt: "use token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789 to deploy".into(),
            source: TurnSource::Model,
            outcome: TurnOutcome::Progress,
            refused: vec![RefusedCandidate {
                text: "rm -rf /".into(),
                rules: vec!["destructive".into()],
                reason: "destructive: deletes everything".into(),
                asked: 0,
            }],
            ..Default::default()
        };
        let e = turn_event(&rec(), &turn);
        assert_eq!(e.subject, "karl.twin.turn");
        assert_eq!(e.payload["turn"], 3);
        assert_eq!(e.payload["judged"], true);
        assert_eq!(e.payload["outcome"], "progress");
        assert_eq!(e.payload["source"], "model");
        assert_eq!(e.payload["refused"][0]["rules"][0], "destructive");
        let prompt = e.payload["prompt"].as_str().unwrap_or_default();
        assert!(!prompt.contains("sk-ant-api03"), "{prompt}");
        assert!(prompt.ends_with("to deploy"), "{prompt}");
    }

    #[test]
    fn the_table_is_checked() {
        assert_eq!(EventsFile::default().resolve(), Ok(None));
        let ok = EventsFile {
            nats_url: Some(" nats://mac5:4222 ".into()),
        };
        assert_eq!(ok.resolve(), Ok(Some("nats://mac5:4222".into())));
        for bad in ["", "http://mac5:4222", "nats://mac5:port", "ws://mac5:8080"] {
            let e = EventsFile {
                nats_url: Some(bad.into()),
            }
            .resolve()
            .unwrap_err();
            assert!(e.contains("nats"), "{bad}: {e}");
        }
    }
}

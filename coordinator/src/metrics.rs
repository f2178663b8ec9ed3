//! The coordinator's Prometheus metrics.
//!
//! Two kinds live here. Counters the session tasks bump as things happen — turns by
//! source, gate rejections by rule, plan/escape fallbacks, injections by outcome,
//! permission answers, model calls (latency histogram, errors) — and gauges read when
//! scraped: sessions by status, agents connected, snapshots received, sled's size. The
//! counters restart from zero with the coordinator, as Prometheus counters may.
//!
//! Turns, rejections and fallbacks are counted from what changed between two versions of a
//! session record ([`Metrics::record_changed`], pure), so the engine needs no extra hook
//! for each: whatever it records, the metrics see.
//!
//! Not here: serving `/metrics` (the dashboard, [`crate::web`]), deciding what a rejection
//! is (the gate and the engine).

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::records::{SessionRecord, Status};

/// One label: `[("rule", "destructive")]`.
type Label = [(&'static str, String); 1];

fn label(key: &'static str, value: &str) -> Label {
    [(key, value.to_string())]
}

/// Model-call latency buckets, in seconds: 50 ms to about 26 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.05, 2.0, 10)
}

/// What the scrape reads off the engine and the registry at that moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Sessions on record by status.
    pub sessions: Vec<(Status, u64)>,
    pub agents: u64,
    /// Pane snapshots received from all agents since start.
    pub snapshots: u64,
    pub store_bytes: u64,
}

/// The metrics of one coordinator.
pub struct Metrics {
    registry: Registry,
    turns: Family<Label, Counter>,
    rejections: Family<Label, Counter>,
    fallbacks: Counter,
    injections: Family<Label, Counter>,
    permissions: Family<Label, Counter>,
    model_latency: Histogram,
    model_errors: Counter,
    notifications: Family<[(&'static str, String); 2], Counter>,
    events: Family<Label, Counter>,
    snapshots: Counter,
    sessions: Family<Label, Gauge>,
    agents: Gauge,
    store_bytes: Gauge,
    /// One scrape at a time sets the gauges and encodes.
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("karl"),
            turns: Family::default(),
            rejections: Family::default(),
            fallbacks: Counter::default(),
            injections: Family::default(),
            permissions: Family::default(),
            model_latency: Histogram::new(latency_buckets()),
            model_errors: Counter::default(),
            notifications: Family::default(),
            events: Family::default(),
            snapshots: Counter::default(),
            sessions: Family::default(),
            agents: Gauge::default(),
            store_bytes: Gauge::default(),
            scrape: Mutex::new(()),
        };
        let r = &mut m.registry;
        r.register(
            "turns",
            "Prompts typed (or recorded in dry run), by where they came from",
            m.turns.clone(),
        );
        r.register(
            "gate_rejections",
            "Candidate prompts the gate refused, by rule",
            m.rejections.clone(),
        );
        r.register(
            "fallbacks",
            "Turns that fell back to the plan or an escape prompt",
            m.fallbacks.clone(),
        );
        r.register(
            "injections",
            "Prompts handed to an agent to type, by outcome",
            m.injections.clone(),
        );
        r.register(
            "permission_decisions",
            "Permission requests answered, by decision",
            m.permissions.clone(),
        );
        r.register(
            "notifications",
            "Notifications by sink and outcome (sent, retried, failed, rate_limited, dropped; deduplicated has no sink)",
            m.notifications.clone(),
        );
        r.register(
            "events",
            "Turn and session events for NATS, by outcome (published, dropped, failed)",
            m.events.clone(),
        );
        r.register(
            "model_latency_seconds",
            "Time the twin's model took to answer",
            m.model_latency.clone(),
        );
        r.register(
            "model_errors",
            "Model calls that failed (timeout, refused, unreadable)",
            m.model_errors.clone(),
        );
        r.register(
            "snapshots",
            "Pane snapshots received from agents (settled, or captured on request)",
            m.snapshots.clone(),
        );
        r.register(
            "sessions",
            "Sessions on record, by status",
            m.sessions.clone(),
        );
        r.register("agents_connected", "Agents connected now", m.agents.clone());
        r.register(
            "store_bytes",
            "Size of the sled store on disk",
            m.store_bytes.clone(),
        );
        m
    }

    /// Counts what changed between two versions of a session's record: new turns (by the
    /// source of the last), new gate rejections (by rule) and new fallbacks.
    pub fn record_changed(&self, before: &SessionRecord, after: &SessionRecord) {
        if before.id != after.id {
            return;
        }
        let turns = after.turns.saturating_sub(before.turns);
        if turns > 0 {
            let source = after.last_source.map_or("unknown", |s| s.as_str());
            self.turns
                .get_or_create(&label("source", source))
                .inc_by(u64::from(turns));
        }
        for (rule, n) in &after.rejections {
            let was = before.rejections.get(rule).copied().unwrap_or(0);
            if *n > was {
                self.rejections
                    .get_or_create(&label("rule", rule.as_str()))
                    .inc_by(u64::from(n - was));
            }
        }
        let fallbacks = after.fallbacks.saturating_sub(before.fallbacks);
        if fallbacks > 0 {
            self.fallbacks.inc_by(u64::from(fallbacks));
        }
    }

    /// An injection's outcome (`submitted`, `refused`, `failed`, …).
    pub fn injection(&self, outcome: &str) {
        self.injections
            .get_or_create(&label("outcome", outcome))
            .inc();
    }

    /// A permission request answered: `approved`, `denied`, `failed`, or a hook's
    /// `allow`/`deny`/`step_aside`.
    pub fn permission(&self, decision: &str) {
        self.permissions
            .get_or_create(&label("decision", decision))
            .inc();
    }

    /// A model call that answered after `latency`.
    pub fn model_answered(&self, latency: Duration) {
        self.model_latency.observe(latency.as_secs_f64());
    }

    pub fn model_failed(&self) {
        self.model_errors.inc();
    }

    /// A NATS event's fate.
    pub fn event(&self, outcome: &'static str) {
        self.events.get_or_create(&label("outcome", outcome)).inc();
    }

    /// `n` NATS events dropped before the publisher saw them.
    pub fn events_dropped(&self, n: u64) {
        self.events
            .get_or_create(&label("outcome", "dropped"))
            .inc_by(n);
    }

    /// A notification's fate at `sink`.
    pub fn notified(&self, sink: &str, outcome: &'static str) {
        self.notifications
            .get_or_create(&[("sink", sink.to_string()), ("outcome", outcome.to_string())])
            .inc();
    }

    /// The text exposition (OpenMetrics), with the gauges set from `now`.
    pub fn render(&self, now: &Snapshot) -> String {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.sessions.clear();
        for (status, n) in &now.sessions {
            self.sessions
                .get_or_create(&label("status", status.as_str()))
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        self.agents
            .set(i64::try_from(now.agents).unwrap_or(i64::MAX));
        self.store_bytes
            .set(i64::try_from(now.store_bytes).unwrap_or(i64::MAX));
        // The registry's own count is the truth; the counter catches up to it.
        let seen = self.snapshots.get();
        if now.snapshots > seen {
            self.snapshots.inc_by(now.snapshots - seen);
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::records::TurnSource;
    use karl_common::gate::Rule;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn record_changes_count_turns_rejections_and_fallbacks_once() {
        let m = Metrics::new();
        let before = SessionRecord {
            id: "s1".into(),
            ..Default::default()
        };
        let mut after = before.clone();
        after.turns = 1;
        after.last_source = Some(TurnSource::Plan);
        after.fallbacks = 1;
        after.rejections.insert(Rule::Status, 2);
        m.record_changed(&before, &after);
        // The same record again adds nothing.
        m.record_changed(&after, &after);
        let mut third = after.clone();
        third.turns = 2;
        third.last_source = Some(TurnSource::Model);
        third.rejections.insert(Rule::Status, 3);
        third.rejections.insert(Rule::Destructive, 1);
        m.record_changed(&after, &third);
        let text = m.render(&Snapshot::default());
        assert_eq!(
            line(&text, "karl_turns_total{source=\"plan\"}"),
            Some("karl_turns_total{source=\"plan\"} 1")
        );
        assert_eq!(
            line(&text, "karl_turns_total{source=\"model\"}"),
            Some("karl_turns_total{source=\"model\"} 1")
        );
        assert_eq!(
            line(&text, "karl_gate_rejections_total{rule=\"status\"}"),
            Some("karl_gate_rejections_total{rule=\"status\"} 3")
        );
        assert_eq!(
            line(&text, "karl_gate_rejections_total{rule=\"destructive\"}"),
            Some("karl_gate_rejections_total{rule=\"destructive\"} 1")
        );
        assert_eq!(
            line(&text, "karl_fallbacks_total"),
            Some("karl_fallbacks_total 1")
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn a_different_session_is_not_a_change() {
        let m = Metrics::new();
        let a = SessionRecord {
            id: "a".into(),
            turns: 5,
            ..Default::default()
        };
        let b = SessionRecord {
            id: "b".into(),
            turns: 9,
            ..Default::default()
        };
        m.record_changed(&a, &b);
        assert!(line(&m.render(&Snapshot::default()), "karl_turns_total{").is_none());
    }

    #[test]
    fn gauges_follow_each_scrape() {
        let m = Metrics::new();
        m.model_answered(Duration::from_millis(120));
        m.model_failed();
        m.injection("submitted");
        m.permission("approved");
        let first = m.render(&Snapshot {
            sessions: vec![(Status::Running, 2), (Status::Done, 1)],
            agents: 3,
            snapshots: 40,
            store_bytes: 4096,
        });
        assert!(
            first.contains("karl_sessions{status=\"running\"} 2"),
            "{first}"
        );
        assert!(first.contains("karl_agents_connected 3"), "{first}");
        assert!(first.contains("karl_snapshots_total 40"), "{first}");
        assert!(first.contains("karl_store_bytes 4096"), "{first}");
        assert!(
            first.contains("karl_model_latency_seconds_count 1"),
            "{first}"
        );
        assert!(first.contains("karl_model_errors_total 1"), "{first}");
        assert!(first.contains("karl_injections_total{outcome=\"submitted\"} 1"));
        assert!(first.contains("karl_permission_decisions_total{decision=\"approved\"} 1"));
        // A status no session has any more disappears; counters never go back.
        let second = m.render(&Snapshot {
            sessions: vec![(Status::Done, 3)],
            agents: 0,
            snapshots: 41,
            store_bytes: 4096,
        });
        assert!(!second.contains("status=\"running\""), "{second}");
        assert!(second.contains("karl_snapshots_total 41"), "{second}");
        assert!(second.contains("karl_agents_connected 0"), "{second}");
    }
}

//! The session summary: what a session did, in figures — turns fired and gated, the
//! gate's rejections by rule, fallbacks, the phases with their turn ranges, tasks done,
//! model latency p50/p95 and efficiency (turns that made progress / turns). Pure: it is
//! computed from the [`SessionRecord`] alone, frozen into the record when the session
//! ends, and shown by `karl-ctl show`, the dashboard, the end-of-session audit entry and
//! the `karl.session.*` events.
//!
//! Not here: the counters it reads, which the engine keeps as turns fire and are judged.

use std::collections::BTreeMap;

use karl_common::context::phase_label;
use karl_common::gate::{Phase, Rule};
use serde::{Deserialize, Serialize};

use crate::records::{SessionRecord, Status};

/// The turns a session spent in one phase, first to last (inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub first: u32,
    pub last: u32,
}

/// Extends the last span when turn `n` is in the same phase, else opens a new one.
pub fn note_phase(spans: &mut Vec<PhaseSpan>, n: u32, phase: Phase) {
    match spans.last_mut() {
        Some(s) if s.phase == phase => s.last = s.last.max(n),
        _ => spans.push(PhaseSpan {
            phase,
            first: n,
            last: n,
        }),
    }
}

/// A session in figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct SessionSummary {
    pub status: Status,
    pub reason: String,
    /// Prompts typed (recorded, in a dry run), of at most `max_turns`.
    pub turns: u32,
    pub max_turns: u32,
    /// Candidates the gate refused, and by which rule.
    pub gated: u32,
    pub rejections: BTreeMap<Rule, u32>,
    /// Turns whose prompt came from the plan or an escape prompt, not the model.
    pub fallbacks: u32,
    pub model_errors: u32,
    pub phases: Vec<PhaseSpan>,
    pub tasks_done: u32,
    pub tasks_total: u32,
    /// Over the last model calls the record keeps.
    pub latency_p50_ms: u64,
    pub latency_p95_ms: u64,
    /// Turns judged progress or complete.
    pub progress_turns: u32,
    /// `progress_turns / turns` (0 without turns).
    pub efficiency: f64,
    pub started_ms: u64,
    /// When it ended (0 while it runs).
    pub ended_ms: u64,
}

impl SessionSummary {
    /// The summary of `rec` as it stands; `ended_ms` is 0 unless the record has ended.
    pub fn of(rec: &SessionRecord) -> Self {
        // Bounded, so a sample above the initial range is counted where it belongs: an
        // auto-resizing histogram clamps `saturating_record` to its first bucket range
        // (about 2 s), which once reported a 4 s model as 2 ms.
        let mut lat = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 86_400_000, 3).ok();
        if let Some(h) = lat.as_mut() {
            for &ms in &rec.model_latencies_ms {
                h.saturating_record(ms);
            }
        }
        let pct = |p: f64| match &lat {
            Some(h) if !h.is_empty() => h.value_at_quantile(p),
            _ => 0,
        };
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        SessionSummary {
            status: rec.status,
            reason: rec.reason.clone(),
            turns: rec.turns,
            max_turns: rec.max_turns,
            gated: rec.gated,
            rejections: rec.rejections.clone(),
            fallbacks: rec.fallbacks,
            model_errors: rec.model_errors,
            phases: rec.phases.clone(),
            tasks_done: count(rec.tasks.done_count()),
            tasks_total: count(rec.tasks.tasks.len()),
            latency_p50_ms: pct(0.5),
            latency_p95_ms: pct(0.95),
            progress_turns: rec.progress_turns,
            efficiency: if rec.turns == 0 {
                0.0
            } else {
                f64::from(rec.progress_turns.min(rec.turns)) / f64::from(rec.turns)
            },
            started_ms: rec.started_ms,
            ended_ms: if rec.status.is_live() {
                0
            } else {
                rec.updated_ms
            },
        }
    }

    /// The summary as a few lines of text (`karl-ctl show`, the dashboard).
    pub fn lines(&self) -> Vec<String> {
        let rejections = if self.rejections.is_empty() {
            "none".to_string()
        } else {
            self.rejections
                .iter()
                .map(|(k, v)| format!("{} {v}", k.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let phases = if self.phases.is_empty() {
            "none".to_string()
        } else {
            self.phases
                .iter()
                .map(|s| {
                    let turns = if s.first == s.last {
                        format!("turn {}", s.first)
                    } else {
                        format!("turns {}–{}", s.first, s.last)
                    };
                    format!("{} {turns}", phase_label(s.phase))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            format!(
                "{}: {}",
                self.status.as_str(),
                if self.reason.is_empty() {
                    "-"
                } else {
                    &self.reason
                }
            ),
            format!(
                "turns {} of {}, {} with progress (efficiency {:.0}%)",
                self.turns,
                self.max_turns,
                self.progress_turns,
                self.efficiency * 100.0
            ),
            format!(
                "gated {} (rejections: {rejections}), fallbacks {}, model errors {}",
                self.gated, self.fallbacks, self.model_errors
            ),
            format!("phases {phases}"),
            format!(
                "tasks done {}/{}, model latency p50 {} ms / p95 {} ms",
                self.tasks_done, self.tasks_total, self.latency_p50_ms, self.latency_p95_ms
            ),
        ]
    }

    /// The summary on one line (the audit log, `follow`'s last event).
    pub fn line(&self) -> String {
        self.lines().join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_turn_ranges() {
        let mut spans = Vec::new();
        for (n, p) in [
            (1, Phase::Explore),
            (2, Phase::Explore),
            (3, Phase::Build),
            (4, Phase::Build),
            (5, Phase::Build),
            (6, Phase::Close),
        ] {
            note_phase(&mut spans, n, p);
        }
        // A turn seen twice (a re-commit) does not open a span.
        note_phase(&mut spans, 6, Phase::Close);
        let rec = SessionRecord {
            turns: 6,
            max_turns: 8,
            phases: spans,
            ..Default::default()
        };
        let s = SessionSummary::of(&rec);
        assert_eq!(s.phases.len(), 3);
        assert_eq!(
            s.lines()[3],
            "phases EXPLORE turns 1–2, BUILD turns 3–5, CLOSE turn 6"
        );
    }

    #[test]
    fn figures() {
        let mut rec = SessionRecord {
            status: Status::Done,
            reason: "all tasks done".into(),
            max_turns: 5,
            turns: 4,
            progress_turns: 3,
            gated: 2,
            fallbacks: 1,
            model_latencies_ms: vec![4887, 2693, 3506, 2779, 2864],
            started_ms: 1_000,
            updated_ms: 9_000,
            ..Default::default()
        };
        rec.rejections.insert(Rule::NearRepeat, 2);
        let s = SessionSummary::of(&rec);
        assert!((s.efficiency - 0.75).abs() < 1e-9, "{}", s.efficiency);
        assert_eq!(s.ended_ms, 9_000);
        // Within the histogram's 3 significant digits of 2864 and 4887.
        assert_eq!(s.latency_p50_ms / 10, 286, "{s:?}");
        assert_eq!(s.latency_p95_ms / 10, 488, "{s:?}");
        let line = s.line();
        assert!(
            line.starts_with(
                "done: all tasks done; turns 4 of 5, 3 with progress (efficiency 75%)"
            ),
            "{line}"
        );
        assert!(line.contains("rejections: near_repeat 2"), "{line}");
        assert!(line.contains("fallbacks 1"), "{line}");

        // A live session has no end, and no turns means no efficiency (not NaN).
        let live = SessionSummary::of(&SessionRecord::default());
        assert_eq!(live.ended_ms, 0);
        assert_eq!(live.efficiency, 0.0);
        assert_eq!(live.latency_p50_ms, 0);
        assert!(live.line().contains("efficiency 0%"), "{}", live.line());
    }
}

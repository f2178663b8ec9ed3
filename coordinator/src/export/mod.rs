//! `karl-ctl export`: the store's sessions as training data for the next twin — SFT
//! examples (ChatML `messages`) and preference pairs (`prompt`, `chosen`, `rejected`,
//! `reason`) as JSON lines.
//!
//! [`run`] streams the store a session at a time and a turn at a time, so memory stays
//! bounded whatever the store holds: one session record, the failed turns of that session
//! still waiting for a pair ([`examples::MAX_WAITING`]), and 8 bytes per line written for
//! the duplicate check. Sessions go wholly to train or to valid (by a stable hash of their
//! id), so no session is in both. What a turn yields is decided in [`examples`] (pure);
//! here are the filters, the split, duplicates and the summary. Not here: the gRPC
//! stream and the files ([`crate::control`], karl-ctl).

pub mod examples;

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

use serde::Serialize;

pub use examples::{MinOutcome, Pair, PairKind, SessionExamples, SftExample};

use crate::records::{SessionRecord, TurnRecord};
use crate::store::{Store, StoreError};

/// Which turns to export, and how to split them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportFilter {
    /// Turns at or after this time (unix ms; 0: any).
    pub since_ms: u64,
    /// Turns before this time (0: any).
    pub until_ms: u64,
    pub session: String,
    pub project: String,
    pub machine: String,
    pub min_outcome: MinOutcome,
    /// The share of sessions that goes to train (`None`: no split, everything is train).
    pub split: Option<f64>,
    pub sft: bool,
    pub pairs: bool,
}

impl ExportFilter {
    fn wants_session(&self, s: &SessionRecord) -> bool {
        (self.session.is_empty() || s.id == self.session)
            && (self.project.is_empty() || s.project == self.project)
            && (self.machine.is_empty() || s.machine == self.machine)
            && (self.until_ms == 0 || s.started_ms < self.until_ms)
            && (self.since_ms == 0 || s.updated_ms == 0 || s.updated_ms >= self.since_ms)
    }

    fn wants_turn(&self, t: &TurnRecord) -> bool {
        (self.since_ms == 0 || t.unix_ms >= self.since_ms)
            && (self.until_ms == 0 || t.unix_ms < self.until_ms)
    }

    /// Whether a session goes to valid rather than train.
    pub fn is_valid(&self, session_id: &str) -> bool {
        self.split
            .is_some_and(|train| unit_hash(session_id) >= train)
    }
}

/// A stable hash of a session id in [0, 1): FNV-1a and a mixer, the same on every build
/// and machine.
fn unit_hash(s: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV leaves the high bits of ids that differ only at the end nearly equal: mix them
    // (the murmur3 finaliser).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Which file a line belongs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Sft,
    Pairs,
}

/// One JSON line for one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: Kind,
    pub valid: bool,
    pub json: String,
}

/// What an export stream carries: lines in batches, then how it ended.
#[derive(Debug)]
pub enum Chunk {
    Lines(Vec<Line>),
    Done(Summary),
    Failed(String),
}

/// Lines per [`Chunk::Lines`].
pub const BATCH: usize = 64;

/// Runs [`run`] on the blocking pool and streams it. The channel holds four batches, so
/// a slow reader slows the scan instead of filling memory; a reader that goes away stops
/// it.
pub fn spawn(store: Store, filter: ExportFilter) -> tokio::sync::mpsc::Receiver<Chunk> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let mut batch = Vec::with_capacity(BATCH);
        let r = run(&store, &filter, |line| {
            batch.push(line);
            batch.len() < BATCH
                || tx
                    .blocking_send(Chunk::Lines(std::mem::take(&mut batch)))
                    .is_ok()
        });
        let end = match r {
            Ok(summary) => {
                if !batch.is_empty() && tx.blocking_send(Chunk::Lines(batch)).is_err() {
                    return;
                }
                Chunk::Done(summary)
            }
            Err(ExportError::Abandoned) => return,
            Err(e) => {
                tracing::warn!(target: "coord.export", error = %e, "export failed");
                Chunk::Failed(e.to_string())
            }
        };
        let _ = tx.blocking_send(end);
    });
    rx
}

/// What an export wrote and left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub sessions: u64,
    pub turns: u64,
    pub sft_train: u64,
    pub sft_valid: u64,
    pub pairs_train: u64,
    pub pairs_valid: u64,
    /// SFT examples by the outcome of their turn.
    pub sft_by_outcome: BTreeMap<String, u64>,
    /// Pairs by the rule that refused the rejected side (`error` / `no_change` for
    /// prompts that failed).
    pub pairs_by_reason: BTreeMap<String, u64>,
    /// Turns that gave no SFT example, by why.
    pub skipped: BTreeMap<String, u64>,
    /// Lines dropped as exact duplicates of one already written.
    pub duplicates: u64,
    pub redactions: u64,
    /// Estimated tokens of the SFT examples written.
    pub sft_tokens: u64,
}

impl Summary {
    /// One line written: its split, and the outcome (SFT) or rule (pairs) it counts under.
    fn count(&mut self, kind: Kind, valid: bool, key: String, tokens: u64) {
        let (split, by) = match (kind, valid) {
            (Kind::Sft, false) => (&mut self.sft_train, &mut self.sft_by_outcome),
            (Kind::Sft, true) => (&mut self.sft_valid, &mut self.sft_by_outcome),
            (Kind::Pairs, false) => (&mut self.pairs_train, &mut self.pairs_by_reason),
            (Kind::Pairs, true) => (&mut self.pairs_valid, &mut self.pairs_by_reason),
        };
        *split += 1;
        *by.entry(key).or_default() += 1;
        self.sft_tokens += tokens;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the export was abandoned: its reader went away")]
    Abandoned,
}

/// Exports the store's sessions through `emit` (which returns `false` to stop: the
/// reader is gone). Runs on the calling thread and reads sled directly: call it from a
/// blocking task.
pub fn run(
    store: &Store,
    filter: &ExportFilter,
    mut emit: impl FnMut(Line) -> bool,
) -> Result<Summary, ExportError> {
    let mut summary = Summary::default();
    let mut seen: HashSet<u64> = HashSet::new();
    let estimator = karl_common::context::TokenEstimator::default();
    for session in store.sessions_iter::<SessionRecord>() {
        let session = session?;
        if !filter.wants_session(&session) {
            continue;
        }
        summary.sessions += 1;
        let valid = filter.is_valid(&session.id);
        let mut examples = SessionExamples::new(filter.min_outcome);
        for turn in store.turns_iter::<TurnRecord>(&session.id) {
            let turn = turn?;
            // Every turn is seen (a failure outside the window can still be paired
            // with nothing), but only turns in the window are written.
            let y = examples.turn(&turn);
            if !filter.wants_turn(&turn) {
                continue;
            }
            summary.turns += 1;
            summary.redactions += y.redactions as u64;
            if let Some(why) = y.skipped {
                *summary.skipped.entry(why.to_string()).or_default() += 1;
            }
            // Each line: its JSON and what the summary counts it under.
            let mut lines: Vec<(Kind, String, String, u64)> = Vec::new();
            if let (true, Some((ex, outcome))) = (filter.sft, y.sft) {
                let tokens = ex
                    .messages
                    .iter()
                    .map(|m| u64::from(estimator.estimate(&m.content)))
                    .sum::<u64>();
                lines.push((
                    Kind::Sft,
                    to_line(&ex),
                    outcome.as_str().to_string(),
                    tokens,
                ));
            }
            for pair in y.pairs.into_iter().filter(|_| filter.pairs) {
                lines.push((
                    Kind::Pairs,
                    to_line(&pair),
                    pair.reason_key().to_string(),
                    0,
                ));
            }
            for (kind, json, key, tokens) in lines {
                if !fresh(&mut seen, kind, &json) {
                    summary.duplicates += 1;
                    continue;
                }
                summary.count(kind, valid, key, tokens);
                if !emit(Line { kind, valid, json }) {
                    return Err(ExportError::Abandoned);
                }
            }
        }
    }
    Ok(summary)
}

/// One JSON line (the records are plain data: serialising them cannot fail).
fn to_line<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Whether this line was not written before (by a 64-bit hash of its kind and text).
fn fresh(seen: &mut HashSet<u64>, kind: Kind, json: &str) -> bool {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    kind.hash(&mut h);
    json.hash(&mut h);
    seen.insert(h.finish())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::context::ChatMessage;
    use crate::records::{InjectStatus, RefusedCandidate, TurnOutcome, TurnSource};

    fn model_turn(n: u32, prompt: &str, unix_ms: u64) -> TurnRecord {
        TurnRecord {
            n,
            prompt: prompt.into(),
            source: TurnSource::Model,
            outcome: TurnOutcome::Progress,
            inject: InjectStatus::Submitted,
            unix_ms,
            asked: vec![vec![ChatMessage::user(format!("briefing {n}"))]],
            ..Default::default()
        }
    }

    fn store_with(sessions: &[(&str, &str, Vec<TurnRecord>)]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for (id, project, turns) in sessions {
            let rec = SessionRecord {
                id: (*id).into(),
                project: (*project).into(),
                machine: "mac2".into(),
                ..Default::default()
            };
            for t in turns {
                store.record_turn(id, &rec, t.n, t, &[]).unwrap();
            }
        }
        (dir, store)
    }

    fn export(store: &Store, filter: &ExportFilter) -> (Vec<Line>, Summary) {
        let mut lines = Vec::new();
        let summary = run(store, filter, |l| {
            lines.push(l);
            true
        })
        .unwrap();
        (lines, summary)
    }

    #[test]
    fn filters_duplicates_and_the_summary() {
        let mut refused = model_turn(2, "Add the route.", 2_000);
        refused.refused = vec![RefusedCandidate {
            text: "What's the status?".into(),
            rules: vec!["status".into()],
            reason: "status: asks for a status report".into(),
            asked: 0,
        }];
        let (_dir, store) = store_with(&[
            (
                "a",
                "api",
                vec![model_turn(1, "Read src/main.rs.", 1_000), refused],
            ),
            // The same example again in another session: written once.
            ("b", "api", vec![model_turn(1, "Read src/main.rs.", 3_000)]),
            ("c", "web", vec![model_turn(1, "Style the page.", 4_000)]),
        ]);
        let all = ExportFilter {
            sft: true,
            pairs: true,
            ..Default::default()
        };
        let (lines, s) = export(&store, &all);
        assert_eq!((s.sessions, s.turns), (3, 4));
        assert_eq!((s.sft_train, s.sft_valid, s.pairs_train), (3, 0, 1));
        assert_eq!(s.duplicates, 1);
        assert_eq!(s.pairs_by_reason.get("status"), Some(&1));
        assert_eq!(s.sft_by_outcome.get("progress"), Some(&3));
        assert!(s.sft_tokens > 0);
        assert_eq!(lines.iter().filter(|l| l.kind == Kind::Pairs).count(), 1);

        let api = ExportFilter {
            project: "api".into(),
            since_ms: 1_500,
            ..all.clone()
        };
        let (lines, s) = export(&store, &api);
        assert_eq!((s.sessions, s.turns), (2, 2));
        assert_eq!(lines.len(), 3, "{lines:?}");

        let only_pairs = ExportFilter {
            sft: false,
            ..all.clone()
        };
        let (lines, _) = export(&store, &only_pairs);
        assert!(lines.iter().all(|l| l.kind == Kind::Pairs));
    }

    #[test]
    fn a_session_is_wholly_in_train_or_in_valid() {
        let sessions: Vec<(String, Vec<TurnRecord>)> = (0..40)
            .map(|i| {
                let turns = (1..4)
                    .map(|n| model_turn(n, &format!("session {i} step {n}"), 1_000))
                    .collect();
                (format!("mac2_1_{i}"), turns)
            })
            .collect();
        let refs: Vec<(&str, &str, Vec<TurnRecord>)> = sessions
            .iter()
            .map(|(id, t)| (id.as_str(), "api", t.clone()))
            .collect();
        let (_dir, store) = store_with(&refs);
        let filter = ExportFilter {
            sft: true,
            split: Some(0.75),
            ..Default::default()
        };
        let (lines, s) = export(&store, &filter);
        assert_eq!(s.sft_train + s.sft_valid, 120);
        assert!(s.sft_valid > 0 && s.sft_train > s.sft_valid, "{s:?}");
        let mut side: BTreeMap<String, bool> = BTreeMap::new();
        for l in &lines {
            let session = l.json.split("session ").nth(1).unwrap();
            let id = session.split(' ').next().unwrap().to_string();
            assert_eq!(*side.entry(id).or_insert(l.valid), l.valid);
        }
        assert_eq!(side.len(), 40);
    }

    #[test]
    fn the_split_hash_is_stable() {
        // The same id lands on the same side on every build: a model's valid set stays
        // valid when the store grows.
        assert!(
            (unit_hash("mac2_1_1700000000000") - unit_hash("mac2_1_1700000000000")).abs()
                < f64::EPSILON
        );
        let h = unit_hash("");
        assert!((0.0..1.0).contains(&h));
        // FNV-1a + murmur3 fmix64 of "a", worked out by hand in Python.
        assert_eq!(format!("{:.6}", unit_hash("a")), "0.510295");
    }
}

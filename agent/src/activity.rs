//! The watch table: per watched pane, when output last arrived, whether the pane has
//! settled, when it was last captured, what the last snapshot held, and whether its server
//! is gone. Plain data driven by explicit `Instant`s — no IO, no clock reads — so every
//! timing rule is unit-tested here.
//!
//! The rules: a pane is *settled* after `settle` of silence since its last output; it is
//! captured then, on the slow safety timer, and on request, and never otherwise. A snapshot
//! goes out only when its stable hash changed or it was asked for. The first output after a
//! settle is reported as the pane turning busy.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karl_common::pane_text::{self, TextDiff};
use karl_common::pb;
use karl_common::target::PaneTarget;

/// Silence after which a pane counts as settled, unless the watch says otherwise.
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(1500);
/// Period of the safety capture, unless the watch says otherwise.
pub const DEFAULT_SAFETY: Duration = Duration::from_secs(30);
/// First and longest wait between attempts to find a pane whose server went away.
pub const RETRY_FIRST: Duration = Duration::from_millis(250);
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// How one pane is watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchSpec {
    pub settle: Duration,
    pub safety: Duration,
    /// Include the `-e` capture in snapshots.
    pub ansi: bool,
}

impl WatchSpec {
    /// The spec a `Watch` command asks for (0 = default).
    pub fn from_watch(w: &pb::Watch) -> Self {
        WatchSpec {
            settle: match w.settle_ms {
                0 => DEFAULT_SETTLE,
                ms => Duration::from_millis(u64::from(ms)),
            },
            safety: match w.safety_secs {
                0 => DEFAULT_SAFETY,
                s => Duration::from_secs(u64::from(s)),
            },
            ansi: w.ansi,
        }
    }
}

impl Default for WatchSpec {
    fn default() -> Self {
        WatchSpec {
            settle: DEFAULT_SETTLE,
            safety: DEFAULT_SAFETY,
            ansi: false,
        }
    }
}

/// Whether a watched pane's server is reachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    Live,
    /// The server (or the pane's session) went away; look for the target again at
    /// `retry_at`.
    Gone {
        retry_at: Instant,
        backoff: Duration,
    },
}

/// One watched pane.
#[derive(Debug, Clone)]
pub struct Watched {
    pub pane_id: String,
    /// The target the watch was asked for, used to find the pane again after its server
    /// comes back.
    pub target: PaneTarget,
    pub session_id: String,
    pub spec: WatchSpec,
    last_output: Option<Instant>,
    last_output_unix_ms: u64,
    /// When KARL last finished typing into the pane.
    last_typed: Option<Instant>,
    bytes_since_snapshot: u64,
    settled: bool,
    last_capture: Instant,
    /// A scheduled (settle or safety) capture is running since then.
    capturing_since: Option<Instant>,
    retrying: bool,
    last_hash: Option<String>,
    last_text: String,
    seq: u64,
    liveness: Liveness,
}

impl Watched {
    fn live(&self) -> bool {
        self.liveness == Liveness::Live
    }

    /// The seq of the last snapshot recorded for this pane.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Output bytes seen since the last snapshot went out.
    pub fn bytes_since_snapshot(&self) -> u64 {
        self.bytes_since_snapshot
    }
}

/// Work the table wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// Capture this pane.
    Capture {
        pane_id: String,
        reason: pb::SnapshotReason,
        ansi: bool,
    },
    /// Look for these gone panes' targets again.
    Retry { pane_ids: Vec<String> },
}

/// What an output notification did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputEffect {
    /// Not a watched pane.
    Ignored,
    /// The pane was already busy.
    StillBusy,
    /// The first output after a settle: report the pane turning busy, and a new settle
    /// deadline exists.
    TurnedBusy,
}

/// What a finished capture should send.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub stable_hash: String,
    pub diff: TextDiff,
    pub seq: u64,
    pub last_output_unix_ms: u64,
}

/// All watched panes, keyed by pane id.
#[derive(Debug, Default)]
pub struct Table {
    panes: BTreeMap<String, Watched>,
}

impl Table {
    pub fn new() -> Self {
        Table::default()
    }

    /// Starts watching a pane (or changes how an already watched one is watched). Returns
    /// true for a new watch. The caller takes the first capture itself.
    pub fn watch(
        &mut self,
        pane_id: &str,
        target: PaneTarget,
        session_id: &str,
        spec: WatchSpec,
        now: Instant,
    ) -> bool {
        if let Some(w) = self.panes.get_mut(pane_id) {
            w.spec = spec;
            w.target = target;
            return false;
        }
        self.panes.insert(
            pane_id.to_string(),
            Watched {
                pane_id: pane_id.to_string(),
                target,
                session_id: session_id.to_string(),
                spec,
                last_output: None,
                last_typed: None,
                last_output_unix_ms: 0,
                bytes_since_snapshot: 0,
                settled: true,
                last_capture: now,
                capturing_since: None,
                retrying: false,
                last_hash: None,
                last_text: String::new(),
                seq: 0,
                liveness: Liveness::Live,
            },
        );
        true
    }

    pub fn unwatch(&mut self, pane_id: &str) -> Option<Watched> {
        self.panes.remove(pane_id)
    }

    pub fn get(&self, pane_id: &str) -> Option<&Watched> {
        self.panes.get(pane_id)
    }

    pub fn is_empty(&self) -> bool {
        self.panes.is_empty()
    }

    /// Watched pane ids, gone ones included.
    pub fn pane_ids(&self) -> Vec<String> {
        self.panes.keys().cloned().collect()
    }

    /// Live watched panes with their session ids.
    pub fn live_panes(&self) -> Vec<(String, String)> {
        self.panes
            .values()
            .filter(|w| w.live())
            .map(|w| (w.pane_id.clone(), w.session_id.clone()))
            .collect()
    }

    /// Session ids that hold a live watched pane (each needs a control client).
    pub fn live_sessions(&self) -> Vec<String> {
        let mut s: Vec<String> = self
            .panes
            .values()
            .filter(|w| w.live())
            .map(|w| w.session_id.clone())
            .collect();
        s.sort();
        s.dedup();
        s
    }

    /// Records output for a pane.
    pub fn on_output(
        &mut self,
        pane_id: &str,
        bytes: usize,
        now: Instant,
        unix_ms: u64,
    ) -> OutputEffect {
        let Some(w) = self.panes.get_mut(pane_id) else {
            return OutputEffect::Ignored;
        };
        w.last_output = Some(now);
        w.last_output_unix_ms = unix_ms;
        w.bytes_since_snapshot = w.bytes_since_snapshot.saturating_add(bytes as u64);
        if w.settled {
            w.settled = false;
            OutputEffect::TurnedBusy
        } else {
            OutputEffect::StillBusy
        }
    }

    fn deadlines(w: &Watched) -> Option<Instant> {
        match w.liveness {
            Liveness::Gone { retry_at, .. } => (!w.retrying).then_some(retry_at),
            Liveness::Live if w.capturing_since.is_some() => None,
            Liveness::Live => {
                let safety = w.last_capture + w.spec.safety;
                let settle = match (w.settled, w.last_output) {
                    (false, Some(t)) => Some(t + w.spec.settle),
                    _ => None,
                };
                Some(settle.map_or(safety, |s| s.min(safety)))
            }
        }
    }

    /// When the table next has work; `None` when it has none until something happens.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.panes.values().filter_map(Self::deadlines).min()
    }

    /// The work due at `now`, marked as running.
    pub fn take_due(&mut self, now: Instant) -> Vec<Job> {
        let mut jobs = Vec::new();
        let mut retry = Vec::new();
        for w in self.panes.values_mut() {
            match w.liveness {
                Liveness::Gone { retry_at, .. } => {
                    if !w.retrying && retry_at <= now {
                        w.retrying = true;
                        retry.push(w.pane_id.clone());
                    }
                }
                Liveness::Live if w.capturing_since.is_some() => {}
                Liveness::Live => {
                    let settle_due =
                        !w.settled && w.last_output.is_some_and(|t| t + w.spec.settle <= now);
                    let reason = if settle_due {
                        // Settled from now on: the next output is news.
                        w.settled = true;
                        pb::SnapshotReason::Settled
                    } else if w.last_capture + w.spec.safety <= now {
                        pb::SnapshotReason::Safety
                    } else {
                        continue;
                    };
                    w.capturing_since = Some(now);
                    jobs.push(Job::Capture {
                        pane_id: w.pane_id.clone(),
                        reason,
                        ansi: w.spec.ansi,
                    });
                }
            }
        }
        if !retry.is_empty() {
            jobs.push(Job::Retry { pane_ids: retry });
        }
        jobs
    }

    /// Records a finished capture of clean text taken at `started`. Returns what to send,
    /// or `None` when nothing should go out: the hash did not change and nobody asked
    /// (`forced` false), or output arrived while a settle capture ran (a new settle
    /// follows). Captures of unwatched panes record nothing and are not sent.
    pub fn finish_capture(
        &mut self,
        pane_id: &str,
        reason: pb::SnapshotReason,
        started: Instant,
        now: Instant,
        text: &str,
        forced: bool,
    ) -> Option<Recorded> {
        let w = self.panes.get_mut(pane_id)?;
        let scheduled = matches!(
            reason,
            pb::SnapshotReason::Settled | pb::SnapshotReason::Safety
        );
        if scheduled {
            w.capturing_since = None;
        }
        w.last_capture = now;
        if reason == pb::SnapshotReason::Settled && w.last_output.is_some_and(|t| t > started) {
            return None;
        }
        // A capture that began before KARL finished typing shows the pane from before: sent
        // after the injection, it would read as a pane still waiting for its prompt. Only
        // a capture someone asked for goes out regardless; the agent's reaction to what was
        // typed brings the next settled one.
        if reason != pb::SnapshotReason::Requested && w.last_typed.is_some_and(|t| t > started) {
            return None;
        }
        let hash = pane_text::stable_hash(text);
        if !forced && w.last_hash.as_deref() == Some(hash.as_str()) {
            return None;
        }
        let diff = pane_text::diff(&w.last_text, text, pane_text::MAX_NEW_LINES);
        w.seq += 1;
        w.last_hash = Some(hash.clone());
        w.last_text = text.to_string();
        w.bytes_since_snapshot = 0;
        Some(Recorded {
            stable_hash: hash,
            diff,
            seq: w.seq,
            last_output_unix_ms: w.last_output_unix_ms,
        })
    }

    /// A scheduled capture failed; the safety timer tries again.
    /// KARL finished typing into `pane_id` at `at`: captures begun before then are stale.
    pub fn note_typed(&mut self, pane_id: &str, at: Instant) {
        if let Some(w) = self.panes.get_mut(pane_id) {
            w.last_typed = Some(at);
        }
    }

    pub fn capture_failed(&mut self, pane_id: &str, now: Instant) {
        if let Some(w) = self.panes.get_mut(pane_id) {
            w.capturing_since = None;
            w.last_capture = now;
        }
    }

    /// The pane's server went away. Returns true the first time (report it once).
    pub fn mark_gone(&mut self, pane_id: &str, now: Instant) -> bool {
        let Some(w) = self.panes.get_mut(pane_id) else {
            return false;
        };
        w.capturing_since = None;
        w.settled = true;
        if w.live() {
            w.liveness = Liveness::Gone {
                retry_at: now + RETRY_FIRST,
                backoff: RETRY_FIRST,
            };
            w.retrying = false;
            true
        } else {
            false
        }
    }

    /// A retry did not find the pane: wait longer (capped) before the next.
    pub fn retry_failed(&mut self, pane_id: &str, now: Instant) {
        if let Some(w) = self.panes.get_mut(pane_id) {
            w.retrying = false;
            if let Liveness::Gone { backoff, .. } = w.liveness {
                let backoff = (backoff * 2).min(RETRY_MAX);
                w.liveness = Liveness::Gone {
                    retry_at: now + backoff,
                    backoff,
                };
            }
        }
    }

    /// The pane's target was found again, maybe under a new pane id (ids restart with the
    /// server). Returns the watch's spec.
    pub fn mark_back(
        &mut self,
        old_id: &str,
        new_id: &str,
        session_id: &str,
        now: Instant,
    ) -> Option<WatchSpec> {
        let mut w = self.panes.remove(old_id)?;
        w.pane_id = new_id.to_string();
        w.session_id = session_id.to_string();
        w.liveness = Liveness::Live;
        w.retrying = false;
        w.settled = true;
        w.last_output = None;
        w.last_capture = now;
        w.capturing_since = None;
        let spec = w.spec;
        // A pane already watched under the new id keeps its own record.
        self.panes.entry(new_id.to_string()).or_insert(w);
        Some(spec)
    }

    /// The pane moved to another session.
    pub fn set_session(&mut self, pane_id: &str, session_id: &str) {
        if let Some(w) = self.panes.get_mut(pane_id) {
            w.session_id = session_id.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn spec(settle_ms: u64) -> WatchSpec {
        WatchSpec {
            settle: Duration::from_millis(settle_ms),
            safety: Duration::from_secs(30),
            ansi: false,
        }
    }

    fn table(t0: Instant) -> Table {
        let mut t = Table::new();
        assert!(t.watch("%1", PaneTarget::Id(1), "$0", spec(300), t0));
        t
    }

    fn capture_reason(jobs: &[Job]) -> Option<pb::SnapshotReason> {
        jobs.iter().find_map(|j| match j {
            Job::Capture { reason, .. } => Some(*reason),
            _ => None,
        })
    }

    #[test]
    fn watch_defaults() {
        let s = WatchSpec::from_watch(&pb::Watch::default());
        assert_eq!(s, WatchSpec::default());
        let s = WatchSpec::from_watch(&pb::Watch {
            settle_ms: 300,
            safety_secs: 5,
            ansi: true,
            ..Default::default()
        });
        assert_eq!(
            (s.settle, s.safety, s.ansi),
            (300 * MS, Duration::from_secs(5), true)
        );
    }

    /// Regression: a watch-start capture taken before turn 1 was typed reached the
    /// coordinator after it, read as a pane still waiting, and turn 2 was typed into a
    /// busy agent. A capture begun before typing finished is dropped unless asked for.
    #[test]
    fn a_capture_begun_before_typing_finished_is_not_sent() {
        let t0 = Instant::now();
        let mut t = table(t0);
        let started = t0 + 10 * MS;
        t.note_typed("%1", t0 + 50 * MS);
        for reason in [
            pb::SnapshotReason::WatchStart,
            pb::SnapshotReason::Settled,
            pb::SnapshotReason::Safety,
        ] {
            assert!(
                t.finish_capture("%1", reason, started, t0 + 60 * MS, "❯ ", true)
                    .is_none(),
                "{reason:?}"
            );
        }
        assert!(t
            .finish_capture(
                "%1",
                pb::SnapshotReason::Requested,
                started,
                t0 + 60 * MS,
                "❯ ",
                true
            )
            .is_some());
        // Begun after the typing: sent.
        assert!(t
            .finish_capture(
                "%1",
                pb::SnapshotReason::Safety,
                t0 + 70 * MS,
                t0 + 80 * MS,
                "busy",
                false
            )
            .is_some());
    }

    #[test]
    fn quiet_pane_waits_only_for_the_safety_timer() {
        let t0 = Instant::now();
        let mut t = table(t0);
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(30)));
        assert!(t.take_due(t0 + Duration::from_secs(29)).is_empty());
        let jobs = t.take_due(t0 + Duration::from_secs(30));
        assert_eq!(capture_reason(&jobs), Some(pb::SnapshotReason::Safety));
        // Nothing more while it runs.
        assert_eq!(t.next_deadline(), None);
        assert!(t.take_due(t0 + Duration::from_secs(31)).is_empty());
    }

    #[test]
    fn settles_after_silence_and_not_before() {
        let t0 = Instant::now();
        let mut t = table(t0);
        assert_eq!(
            t.on_output("%1", 10, t0 + 100 * MS, 1),
            OutputEffect::TurnedBusy
        );
        assert_eq!(
            t.on_output("%1", 10, t0 + 200 * MS, 2),
            OutputEffect::StillBusy
        );
        assert_eq!(
            t.on_output("%9", 10, t0 + 200 * MS, 2),
            OutputEffect::Ignored
        );
        assert_eq!(t.get("%1").unwrap().bytes_since_snapshot(), 20);
        assert_eq!(t.next_deadline(), Some(t0 + 500 * MS));
        assert!(t.take_due(t0 + 499 * MS).is_empty());
        let jobs = t.take_due(t0 + 500 * MS);
        assert_eq!(capture_reason(&jobs), Some(pb::SnapshotReason::Settled));
        let rec = t
            .finish_capture(
                "%1",
                pb::SnapshotReason::Settled,
                t0 + 500 * MS,
                t0 + 505 * MS,
                "hello",
                false,
            )
            .unwrap();
        assert_eq!(rec.seq, 1);
        assert_eq!(rec.last_output_unix_ms, 2);
        assert_eq!(rec.diff.new_lines, vec!["hello"]);
        assert_eq!(t.get("%1").unwrap().bytes_since_snapshot(), 0);
        // Settled: no settle deadline left, only safety; next output is news again.
        assert_eq!(
            t.next_deadline(),
            Some(t0 + 505 * MS + Duration::from_secs(30))
        );
        assert_eq!(
            t.on_output("%1", 1, t0 + 600 * MS, 3),
            OutputEffect::TurnedBusy
        );
    }

    #[test]
    fn steady_output_never_settles() {
        let t0 = Instant::now();
        let mut t = table(t0);
        let mut now = t0;
        for _ in 0..100 {
            now += 100 * MS;
            t.on_output("%1", 3, now, 0);
            assert!(capture_reason(&t.take_due(now)).is_none());
        }
    }

    #[test]
    fn unchanged_screens_are_not_resent_unless_asked() {
        let t0 = Instant::now();
        let mut t = table(t0);
        let first = t.finish_capture(
            "%1",
            pb::SnapshotReason::WatchStart,
            t0,
            t0,
            "a\n✻ Working… (1s · ↓ 2 tokens)",
            true,
        );
        assert!(first.is_some());
        t.on_output("%1", 1, t0 + MS, 0);
        t.take_due(t0 + 400 * MS);
        // Only the timer moved: same stable hash, nothing sent.
        let again = t.finish_capture(
            "%1",
            pb::SnapshotReason::Settled,
            t0 + 400 * MS,
            t0 + 401 * MS,
            "a\n✢ Working… (9s · ↓ 80 tokens)",
            false,
        );
        assert!(again.is_none());
        let asked = t.finish_capture(
            "%1",
            pb::SnapshotReason::Requested,
            t0,
            t0 + 500 * MS,
            "a\n✢ Working… (9s · ↓ 80 tokens)",
            true,
        );
        assert_eq!(asked.unwrap().seq, 2);
        let changed = t.finish_capture(
            "%1",
            pb::SnapshotReason::Safety,
            t0,
            t0 + 600 * MS,
            "a\nb",
            false,
        );
        assert_eq!(changed.unwrap().diff.new_lines, vec!["b"]);
        assert!(t
            .finish_capture("%7", pb::SnapshotReason::Requested, t0, t0, "x", true)
            .is_none());
    }

    #[test]
    fn output_during_a_settle_capture_drops_it() {
        let t0 = Instant::now();
        let mut t = table(t0);
        t.on_output("%1", 1, t0, 0);
        t.take_due(t0 + 300 * MS);
        assert_eq!(
            t.on_output("%1", 1, t0 + 302 * MS, 0),
            OutputEffect::TurnedBusy
        );
        assert!(t
            .finish_capture(
                "%1",
                pb::SnapshotReason::Settled,
                t0 + 300 * MS,
                t0 + 305 * MS,
                "x",
                false
            )
            .is_none());
        // A new settle follows.
        assert_eq!(t.next_deadline(), Some(t0 + 602 * MS));
    }

    #[test]
    fn gone_panes_retry_with_capped_backoff_and_come_back() {
        let t0 = Instant::now();
        let mut t = table(t0);
        assert!(t.mark_gone("%1", t0));
        assert!(!t.mark_gone("%1", t0), "reported once");
        assert!(t.live_sessions().is_empty());
        assert_eq!(t.next_deadline(), Some(t0 + RETRY_FIRST));
        let mut now = t0 + RETRY_FIRST;
        let mut waits = Vec::new();
        for _ in 0..8 {
            let jobs = t.take_due(now);
            assert_eq!(
                jobs,
                vec![Job::Retry {
                    pane_ids: vec!["%1".into()]
                }]
            );
            assert_eq!(t.next_deadline(), None, "one retry at a time");
            t.retry_failed("%1", now);
            let next = t.next_deadline().unwrap();
            waits.push(next - now);
            now = next;
        }
        assert_eq!(waits[0], 2 * RETRY_FIRST);
        assert_eq!(*waits.last().unwrap(), RETRY_MAX);
        let spec = t.mark_back("%1", "%0", "$5", now).unwrap();
        assert_eq!(spec.settle, 300 * MS);
        assert_eq!(t.pane_ids(), vec!["%0"]);
        assert_eq!(t.live_sessions(), vec!["$5"]);
        assert_eq!(t.next_deadline(), Some(now + Duration::from_secs(30)));
    }

    #[test]
    fn rewatch_updates_the_spec() {
        let t0 = Instant::now();
        let mut t = table(t0);
        assert!(!t.watch("%1", PaneTarget::Id(1), "$0", spec(900), t0));
        assert_eq!(t.get("%1").unwrap().spec.settle, 900 * MS);
        assert!(t.unwatch("%1").is_some());
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
    }
}

//! How often notices go out (pure): the same notice twice within a window is one
//! ([`Dedupe`]), a sink sends at most so many a minute ([`RateLimit`]), and a failed send
//! is tried again after a growing delay ([`retry_delay`]).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::notice::{Notice, NoticeKind};

/// Drops a notice equal to one let through within the last `window_ms`: same kind, same
/// session (or machine) and same text. A session that escalates for the same reason every
/// few seconds reaches the human once per window.
#[derive(Debug)]
pub struct Dedupe {
    window_ms: u64,
    seen: HashMap<(NoticeKind, String, String, String), u64>,
}

impl Dedupe {
    pub fn new(window_ms: u64) -> Self {
        Dedupe {
            window_ms,
            seen: HashMap::new(),
        }
    }

    /// True the first time within the window (and remembers it).
    pub fn fresh(&mut self, n: &Notice) -> bool {
        let window = self.window_ms;
        self.seen
            .retain(|_, at| n.unix_ms.saturating_sub(*at) < window);
        let key = (n.kind, n.session.clone(), n.machine.clone(), n.text.clone());
        if self.seen.contains_key(&key) {
            return false;
        }
        self.seen.insert(key, n.unix_ms);
        true
    }
}

/// At most `per_minute` sends in any 60 s (a sliding window).
#[derive(Debug)]
pub struct RateLimit {
    per_minute: usize,
    sent: VecDeque<u64>,
}

impl RateLimit {
    pub fn new(per_minute: u32) -> Self {
        RateLimit {
            per_minute: per_minute.max(1) as usize,
            sent: VecDeque::new(),
        }
    }

    /// True if one more may go now (and counts it).
    pub fn allow(&mut self, now_ms: u64) -> bool {
        while self
            .sent
            .front()
            .is_some_and(|t| now_ms.saturating_sub(*t) >= 60_000)
        {
            self.sent.pop_front();
        }
        if self.sent.len() >= self.per_minute {
            return false;
        }
        self.sent.push_back(now_ms);
        true
    }
}

/// The pause before retry `attempt` (1 = the first retry): 1 s, 2 s, 4 s, … capped at 60 s.
pub fn retry_delay(attempt: u32) -> Duration {
    let secs = 1u64 << attempt.saturating_sub(1).min(6);
    Duration::from_secs(secs.min(60))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn notice(kind: NoticeKind, session: &str, text: &str, at: u64) -> Notice {
        Notice {
            kind,
            session: session.into(),
            machine: "mac2".into(),
            pane: "w:0.0".into(),
            title: "t".into(),
            text: text.into(),
            unix_ms: at,
        }
    }

    #[test]
    fn the_same_notice_within_the_window_is_dropped() {
        let mut d = Dedupe::new(600_000);
        let k = NoticeKind::Escalated;
        assert!(d.fresh(&notice(k, "s-1", "stuck", 0)));
        assert!(!d.fresh(&notice(k, "s-1", "stuck", 599_999)));
        // Another session, text or kind is another notice.
        assert!(d.fresh(&notice(k, "s-2", "stuck", 1)));
        assert!(d.fresh(&notice(k, "s-1", "exited", 1)));
        assert!(d.fresh(&notice(NoticeKind::Failed, "s-1", "stuck", 1)));
        // After the window it is news again.
        assert!(d.fresh(&notice(k, "s-1", "stuck", 600_000)));
    }

    #[test]
    fn at_most_n_a_minute_in_a_sliding_window() {
        let mut r = RateLimit::new(3);
        assert!(r.allow(0) && r.allow(10) && r.allow(20));
        assert!(!r.allow(59_999));
        assert!(r.allow(60_000), "the first send left the window");
        assert!(!r.allow(60_001));
        assert!(r.allow(60_020));
        // Zero would silence a sink for good: it means one.
        let mut one = RateLimit::new(0);
        assert!(one.allow(0) && !one.allow(1));
    }

    #[test]
    fn retries_back_off_to_a_minute() {
        let secs: Vec<u64> = (1..=9).map(|a| retry_delay(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(u32::MAX).as_secs(), 60);
    }
}

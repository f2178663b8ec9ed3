//! Per-session limits, pure: at most N injections in any 60-second window (timestamps
//! come from the caller, so tests need no clock), and at most M consecutive turns without
//! pane progress. The rate breach is pacing — the next turn waits until the window allows
//! it; no progress means the session is looping and a human should look. Each breach
//! carries a one-line reason for the operator.

use serde::{Deserialize, Serialize};

/// The sliding window of the injection rate limit.
pub const RATE_WINDOW_MS: u64 = 60_000;

/// Limits of one session. Zero disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopLimits {
    /// Injections allowed in any 60-second window.
    pub max_injections_per_minute: u32,
    /// Consecutive turns whose outcome showed no pane progress before escalating.
    pub max_turns_without_progress: u32,
}

impl Default for LoopLimits {
    fn default() -> Self {
        LoopLimits {
            max_injections_per_minute: 6,
            max_turns_without_progress: 5,
        }
    }
}

/// Why a turn cannot go now: too fast (wait), or no progress (escalate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum LimitBreach {
    /// Another injection now would exceed the rate limit.
    TooFast {
        count: u32,
        limit: u32,
        /// When the oldest injection in the window leaves it.
        retry_at_ms: u64,
    },
    /// The pane has not progressed for too many turns in a row.
    NoProgress { turns: u32, limit: u32 },
}

impl std::fmt::Display for LimitBreach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitBreach::TooFast { count, limit, .. } => write!(
                f,
                "rate limit: {count} prompts typed in the last 60 s (limit {limit} per minute); the next turn waits until the window allows it"
            ),
            LimitBreach::NoProgress { turns, limit } => write!(
                f,
                "loop limit: no pane progress for {turns} consecutive turns (limit {limit}); the session is stuck"
            ),
        }
    }
}

impl LoopLimits {
    /// Checks whether one more injection at `now_ms` is allowed, given the times of earlier
    /// injections (any order) and the number of consecutive turns without progress.
    pub fn check(
        &self,
        injections_ms: &[u64],
        now_ms: u64,
        turns_without_progress: u32,
    ) -> Result<(), LimitBreach> {
        if self.max_turns_without_progress > 0
            && turns_without_progress >= self.max_turns_without_progress
        {
            return Err(LimitBreach::NoProgress {
                turns: turns_without_progress,
                limit: self.max_turns_without_progress,
            });
        }
        if self.max_injections_per_minute > 0 {
            let in_window: Vec<u64> = injections_ms
                .iter()
                .copied()
                .filter(|&t| t <= now_ms && now_ms - t < RATE_WINDOW_MS)
                .collect();
            let count = u32::try_from(in_window.len()).unwrap_or(u32::MAX);
            if count >= self.max_injections_per_minute {
                let oldest = in_window.iter().copied().min().unwrap_or(now_ms);
                return Err(LimitBreach::TooFast {
                    count,
                    limit: self.max_injections_per_minute,
                    retry_at_ms: oldest + RATE_WINDOW_MS,
                });
            }
        }
        Ok(())
    }
}

/// Consecutive turns without progress at the end of `progress` (oldest first, `true` for a
/// turn whose outcome showed progress).
pub fn turns_without_progress(progress: &[bool]) -> u32 {
    let n = progress.iter().rev().take_while(|p| !**p).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_uses_a_sliding_window() {
        let l = LoopLimits {
            max_injections_per_minute: 3,
            max_turns_without_progress: 0,
        };
        assert!(l.check(&[], 100_000, 0).is_ok());
        assert!(l.check(&[50_000, 70_000], 100_000, 0).is_ok());
        let e = l.check(&[50_000, 70_000, 90_000], 100_000, 0).unwrap_err();
        assert_eq!(
            e,
            LimitBreach::TooFast {
                count: 3,
                limit: 3,
                retry_at_ms: 110_000
            }
        );
        assert!(e.to_string().contains("3 prompts typed in the last 60 s"));
        // The oldest leaves the window after 60 s.
        assert!(l.check(&[50_000, 70_000, 90_000], 110_000, 0).is_ok());
        // Timestamps from the future (clock skew) do not count.
        assert!(l.check(&[150_000, 160_000, 170_000], 100_000, 0).is_ok());
    }

    #[test]
    fn stalled_turns_escalate() {
        let l = LoopLimits {
            max_injections_per_minute: 0,
            max_turns_without_progress: 3,
        };
        assert!(l.check(&[], 0, 2).is_ok());
        let e = l.check(&[], 0, 3).unwrap_err();
        assert_eq!(e, LimitBreach::NoProgress { turns: 3, limit: 3 });
        assert!(e
            .to_string()
            .contains("no pane progress for 3 consecutive turns"));
    }

    #[test]
    fn counts_trailing_turns_without_progress() {
        assert_eq!(turns_without_progress(&[]), 0);
        assert_eq!(turns_without_progress(&[true, false, false]), 2);
        assert_eq!(turns_without_progress(&[false, true]), 0);
    }

    #[test]
    fn zero_disables() {
        let l = LoopLimits {
            max_injections_per_minute: 0,
            max_turns_without_progress: 0,
        };
        assert!(l.check(&[1, 2, 3, 4, 5], 10, 1000).is_ok());
    }
}

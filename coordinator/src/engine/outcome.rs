//! Judging a typed turn from the first settled snapshot after it (pure).
//!
//! Progress, an error, blocked (a dialog, a permission, a limit, the agent gone) or
//! complete (every task done). The machine records the verdict on the turn and folds
//! judged turns into the digest; here is only the judgement.

use std::sync::LazyLock;

use karl_common::detect::{Detection, PaneState};

use crate::context::Outcome;
use crate::records::{SessionRecord, TurnSource};

/// What a snapshot says about the last typed turn: `None` while it cannot tell yet.
pub fn judge(rec: &SessionRecord, stable_hash: &str, d: &Detection) -> Option<Outcome> {
    if !rec.awaiting_outcome || rec.turns == 0 {
        return None;
    }
    match d.state {
        PaneState::Working | PaneState::Unknown => None,
        PaneState::Draft if rec.awaiting_busy => None,
        PaneState::Permission
        | PaneState::Dialog
        | PaneState::Exited
        | PaneState::Limited
        | PaneState::Draft => Some(Outcome::Blocked),
        PaneState::Idle if d.error => Some(Outcome::Error),
        PaneState::Idle if !rec.dry_run && stable_hash == rec.inject_hash => None,
        PaneState::Idle => Some(Outcome::Progress),
    }
}

/// Applies a verdict to the session: stall counting, and a model-written turn completes
/// its task when the agent's new lines say so (plan steps advanced when they were typed).
/// Returns the outcome to record — `Complete` once every task is done.
pub fn apply(rec: &mut SessionRecord, outcome: Outcome, new_lines: &[String]) -> Outcome {
    rec.awaiting_outcome = false;
    match outcome {
        Outcome::Progress => {
            rec.stalled = 0;
            if rec.last_source != Some(TurnSource::Plan) && completion_signal(new_lines) {
                if let Some(title) = rec.tasks.advance(rec.turns) {
                    rec.digest
                        .add_milestone(rec.turns, format!("done: {title}"));
                }
            }
            if rec.tasks.is_complete() {
                Outcome::Complete
            } else {
                Outcome::Progress
            }
        }
        Outcome::Error | Outcome::Blocked => {
            rec.stalled += 1;
            outcome
        }
        Outcome::Complete => outcome,
    }
}

/// Lines that say the agent finished what it was asked.
pub fn completion_signal(lines: &[String]) -> bool {
    static RE: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(done|completed?|finished|all (\d+ )?tests pass(ed)?|implemented|is now (working|in place))\b").ok()
    });
    match RE.as_ref() {
        Some(re) => lines.iter().any(|l| re.is_match(l)),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_signals() {
        assert!(completion_signal(&[
            "● Done. The health endpoint is in place.".into()
        ]));
        assert!(completion_signal(&["All 12 tests passed".into()]));
        assert!(!completion_signal(&[
            "● I'll start by reading the file.".into()
        ]));
    }

    #[test]
    fn a_turn_is_judged_only_once_the_pane_moved_on() {
        let mut rec = SessionRecord {
            turns: 1,
            awaiting_outcome: true,
            inject_hash: "typed".into(),
            ..Default::default()
        };
        let idle = Detection {
            state: PaneState::Idle,
            ..Default::default()
        };
        assert_eq!(judge(&rec, "typed", &idle), None);
        assert_eq!(judge(&rec, "after", &idle), Some(Outcome::Progress));
        let busy = Detection {
            state: PaneState::Working,
            ..Default::default()
        };
        assert_eq!(judge(&rec, "after", &busy), None);
        rec.awaiting_busy = true;
        let draft = Detection {
            state: PaneState::Draft,
            ..Default::default()
        };
        assert_eq!(judge(&rec, "after", &draft), None);
        assert_eq!(apply(&mut rec, Outcome::Blocked, &[]), Outcome::Blocked);
        assert_eq!(rec.stalled, 1);
        assert!(!rec.awaiting_outcome);
    }
}

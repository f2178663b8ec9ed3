//! Session phases and the phase-aware system prompt.
//!
//! A session moves through three phases by turn position: *explore* (understand before
//! changing anything), *build* (stay on the active task until it works) and *close*
//! (verify, test, commit, document). The phase picks the system prompt, which is the
//! first and most stable block of the context: it changes twice per session, so the
//! model server's prefix cache keeps hitting.

use serde::{Deserialize, Serialize};

/// Where a session is in its arc (the gate's enum, so escape prompts and the system
/// prompt always agree on the phase).
pub use crate::gate::Phase;

/// The phase's name as the briefing shows it.
pub fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Explore => "EXPLORE",
        Phase::Build => "BUILD",
        Phase::Close => "CLOSE",
    }
}

/// The system prompt for `phase`.
pub fn system_prompt(phase: Phase) -> String {
    let focus = match phase {
        Phase::Explore => EXPLORE,
        Phase::Build => BUILD,
        Phase::Close => CLOSE,
    };
    format!(
        "{IDENTITY}\n\nPhase: {} — {focus}\n\n{RULES}",
        phase_label(phase)
    )
}

const IDENTITY: &str = "You are the developer driving a coding agent (Claude Code, Codex or a similar CLI) in a terminal. Each turn you read a briefing about the session and write the single instruction the developer types next into the agent.";

const EXPLORE: &str = "the start of the session. Understand before changing anything: have the agent read the relevant files, map the code, reproduce the problem and explain what it finds. Ask for one thing at a time. If an error shows, ask the agent to explain its cause; do not fix it yet.";

const BUILD: &str = "the middle of the session. A task is active: stay on it until it works or is clearly blocked. Tell the agent exactly what to do next on that task — write the code, add the test, run it, fix the error it shows. Do not switch tasks unless the current one is done or blocked.";

const CLOSE: &str = "the end of the session. Verify the work: run the full test suite and the linters, fix what fails, update the documentation that changed, and commit with a clear message. If something is broken, have the agent fix it before committing.";

const RULES: &str = "Rules:\n- Reply with the instruction only: imperative mood, one or two sentences, specific to this project and its active task.\n- Never ask for a status report, a progress summary or what to do next; direct the work.\n- Never repeat or reword an instruction listed under \"Already sent\".\n- Stay inside this session's project and path; never mention other projects.\n- Never ask to delete data or history, force-push, hard-reset, or take anything down.";

/// When each phase starts, as a share of the session's turn budget: the one place a
/// session's phase is decided (the gate's escape prompts take the result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PhaseSchedule {
    /// Turns up to this percentage of the budget explore (the first turn always does).
    pub explore_pct: u8,
    /// Turns in this last percentage of the budget close.
    pub close_pct: u8,
    /// With no turn budget (`max_turns` 0) the first this many turns explore, the rest build.
    pub open_ended_explore_turns: u32,
}

impl Default for PhaseSchedule {
    fn default() -> Self {
        PhaseSchedule {
            explore_pct: 25,
            close_pct: 20,
            open_ended_explore_turns: 3,
        }
    }
}

impl PhaseSchedule {
    /// The phase of `turn` (1-based) in a session of `max_turns` (0: no limit).
    /// Integer arithmetic, so boundaries do not wobble with float rounding; a session of
    /// one turn closes, a session of three explores, builds, closes.
    pub fn phase_at(&self, turn: u32, max_turns: u32) -> Phase {
        let turn = turn.max(1);
        if max_turns == 0 {
            return if turn <= self.open_ended_explore_turns {
                Phase::Explore
            } else {
                Phase::Build
            };
        }
        let t = u64::from(turn.min(max_turns)) * 100;
        let n = u64::from(max_turns);
        let close_from = u64::from(100u8.saturating_sub(self.close_pct.min(100))) * n;
        if t > close_from {
            Phase::Close
        } else if turn == 1 || t <= u64::from(self.explore_pct.min(100)) * n {
            Phase::Explore
        } else {
            Phase::Build
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn phases(n: u32) -> String {
        let s = PhaseSchedule::default();
        (1..=n)
            .map(|t| match s.phase_at(t, n) {
                Phase::Explore => 'E',
                Phase::Build => 'B',
                Phase::Close => 'C',
            })
            .collect()
    }

    #[test]
    fn default_schedule_by_position() {
        assert_eq!(phases(20), "EEEEEBBBBBBBBBBBCCCC");
        assert_eq!(phases(30), "EEEEEEEBBBBBBBBBBBBBBBBBCCCCCC");
        assert_eq!(phases(3), "EBC");
        assert_eq!(phases(1), "C");
    }

    #[test]
    fn open_ended_and_overrun() {
        let s = PhaseSchedule::default();
        assert_eq!(s.phase_at(1, 0), Phase::Explore);
        assert_eq!(s.phase_at(3, 0), Phase::Explore);
        assert_eq!(s.phase_at(4, 0), Phase::Build);
        assert_eq!(s.phase_at(500, 0), Phase::Build);
        // Past the budget (a resumed session) stays in close.
        assert_eq!(s.phase_at(45, 30), Phase::Close);
        assert_eq!(s.phase_at(0, 30), Phase::Explore);
    }

    #[test]
    fn configurable_and_clamped() {
        let s = PhaseSchedule {
            explore_pct: 50,
            close_pct: 10,
            open_ended_explore_turns: 0,
        };
        assert_eq!(s.phase_at(5, 10), Phase::Explore);
        assert_eq!(s.phase_at(6, 10), Phase::Build);
        assert_eq!(s.phase_at(10, 10), Phase::Close);
        let odd = PhaseSchedule {
            explore_pct: 200,
            close_pct: 200,
            open_ended_explore_turns: 0,
        };
        assert_eq!(odd.phase_at(1, 10), Phase::Close);
    }

    #[test]
    fn system_prompts_differ_by_phase_and_carry_the_rules() {
        let e = system_prompt(Phase::Explore);
        let b = system_prompt(Phase::Build);
        let c = system_prompt(Phase::Close);
        assert!(e != b && b != c);
        for p in [&e, &b, &c] {
            assert!(p.contains("Never ask for a status report"));
            assert!(p.starts_with(IDENTITY));
        }
        assert!(c.contains("commit"));
    }
}

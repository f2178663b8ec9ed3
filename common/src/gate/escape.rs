//! Escape prompts: when the model keeps producing rejected prompts and the plan has no next
//! step, the session types a rotating, phase-specific escape prompt instead. Each pool is
//! written to pass the gate on its own (imperative, specific, nothing destructive, no status
//! request); [`pick_escape`] still runs every candidate through the gate so that an escape
//! never repeats one of the last prompts.

use serde::{Deserialize, Serialize};

use super::{Gate, GateContext};

/// Where a session is, by turn position: explore (the first 30%), build (up to 80%), close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Explore,
    Build,
    Close,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Explore => "explore",
            Phase::Build => "build",
            Phase::Close => "close",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

const EXPLORE: &[&str] = &[
    "List the top-level directories of this project and say in one line what each one holds.",
    "Read the README and the main entry point, then explain how the program starts.",
    "Find where the configuration is loaded and explain which settings it reads.",
    "Run the test suite once and tell me which tests fail, without changing any code.",
    "Open the module with the most recent changes and walk me through what it does.",
    "Search the codebase for TODO and FIXME comments and list the five most important ones.",
    "Trace one request from the entry point to the storage layer and name the functions it passes through.",
    "Check which dependencies are declared and point out any that look unused.",
    "Reproduce the current error with the smallest command you can find and show me its output.",
    "Identify the module with the fewest tests and list the functions it leaves uncovered.",
];

const BUILD: &[&str] = &[
    "Walk me through the current error in detail, then fix its root cause.",
    "Write a failing test that captures the bug you are working on, then make it pass.",
    "Take the smallest next step on the active task and run the tests afterwards.",
    "Try a different approach to the current problem and explain why it should work before coding it.",
    "Add logging around the failing code path so the next run shows where it goes wrong.",
    "Split the change you are making into smaller commits, starting with the safest part.",
    "Run the linter on the files you changed and fix what it finds.",
    "Look for an existing helper in the codebase that already does this and reuse it.",
    "Simplify the code you just wrote and keep the tests green.",
    "Add a test for the edge case most likely to break the current change.",
];

const CLOSE: &[&str] = &[
    "Run the full test suite and fix any failures.",
    "Run the linter and formatter over the whole project and fix what they flag.",
    "Review the diff of this session's changes and take out leftover debug output.",
    "Update the README to describe the changes made in this session.",
    "Commit the finished work with a message that says what changed and why.",
    "Add a CHANGELOG entry for the changes made in this session.",
    "Build the project from a fresh clone of the branch and fix anything that breaks.",
    "Write doc comments for any new public function that lacks them.",
    "Add tests for the error paths in the code changed during this session.",
    "Write the follow-up work you noticed as TODO comments next to the code it concerns.",
];

/// The escape pool of a phase, in rotation order.
pub fn escape_prompts(phase: Phase) -> &'static [&'static str] {
    match phase {
        Phase::Explore => EXPLORE,
        Phase::Build => BUILD,
        Phase::Close => CLOSE,
    }
}

/// The first escape prompt of `phase`, rotating from position `turn`, that passes the gate
/// against `history` (oldest first). `None` when every prompt of the pool is fenced off.
pub fn pick_escape(phase: Phase, turn: u32, history: &[String], gate: &Gate) -> Option<String> {
    let ctx = GateContext {
        history,
        ..GateContext::default()
    };
    pick_escape_in(phase, turn, &ctx, gate)
}

/// [`pick_escape`] with the session's full gate context (project, path, other sessions).
pub fn pick_escape_in(
    phase: Phase,
    turn: u32,
    ctx: &GateContext<'_>,
    gate: &Gate,
) -> Option<String> {
    let pool = escape_prompts(phase);
    let start = turn as usize % pool.len();
    (0..pool.len())
        .map(|k| pool[(start + k) % pool.len()])
        .find(|p| gate.check(p, ctx).pass)
        .map(str::to_string)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_escape_prompt_passes_the_gate_on_its_own() {
        let gate = Gate::new();
        for phase in [Phase::Explore, Phase::Build, Phase::Close] {
            for p in escape_prompts(phase) {
                let v = gate.check(p, &GateContext::default());
                assert!(v.pass, "{phase} escape {p:?} blocked: {:?}", v.reasons);
            }
        }
    }

    #[test]
    fn rotation_skips_fenced_prompts() {
        let gate = Gate::new();
        let first = pick_escape(Phase::Build, 0, &[], &gate).unwrap();
        assert_eq!(first, BUILD[0]);
        let history = vec![BUILD[0].to_string(), BUILD[1].to_string()];
        let next = pick_escape(Phase::Build, 0, &history, &gate).unwrap();
        assert_eq!(next, BUILD[2]);
        assert_eq!(pick_escape(Phase::Close, 13, &[], &gate).unwrap(), CLOSE[3]);
    }

    #[test]
    fn exhausted_pool_gives_none() {
        let gate = Gate::new();
        let history: Vec<String> = EXPLORE.iter().map(|s| s.to_string()).collect();
        assert_eq!(pick_escape(Phase::Explore, 4, &history, &gate), None);
    }
}

//! The Claude Code parsers on real files: a transcript and live session files written by
//! each pinned release driven by KARL through five kinds of turn (plain text, an approved
//! `Bash` call, an approved `Write`, a 529, a 429, a slow answer). Captured by the compat
//! tier's `evidence_files_of_a_real_session` with `KARL_CAPTURE_EVIDENCE=DIR`; paths
//! redacted to `/Users/dev/src/proj`, request bodies and attachments blanked.

#![allow(clippy::unwrap_used)]

use karl_common::evidence::claude::{parse_line, SessionFile};
use karl_common::evidence::{CliStatus, Fact, Stamped, TurnEnd, TurnState};

const VERSIONS: [&str; 2] = ["2.1.197", "2.1.330"];

const PROMPTS: [&str; 7] = [
    "Say hello to the team in one line.",
    "Run the marker check with a shell command.",
    "Write the notes file for the release.",
    "Create the lexer module with a Token enum.",
    "Check the rate limited endpoint once.",
    "Explain the design of the parser slowly.",
    "Summarize the changes in one short paragraph.",
];

fn fixture(version: &str, name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/evidence/claude-{version}/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn facts(version: &str) -> Vec<Stamped> {
    fixture(version, "transcript.jsonl")
        .lines()
        .enumerate()
        .flat_map(|(i, l)| {
            parse_line(l).unwrap_or_else(|e| panic!("{version} line {}: {e}", i + 1))
        })
        .collect()
}

#[test]
fn every_prompt_is_read_once_in_order() {
    let want = PROMPTS;
    for v in VERSIONS {
        let prompts: Vec<String> = facts(v)
            .into_iter()
            .filter_map(|s| match s.fact {
                Fact::Prompt { text } => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(prompts, want, "{v}");
    }
}

#[test]
fn every_turn_opens_and_closes_once() {
    for v in VERSIONS {
        let mut state = TurnState::default();
        let mut ends = Vec::new();
        for s in facts(v) {
            let was = state.in_flight;
            if matches!(s.fact, Fact::Prompt { .. }) {
                assert!(!was, "{v}: a prompt while a turn was open");
            }
            state.apply(&s);
            if was && !state.in_flight {
                ends.push(state.last_end);
            }
            assert!(s.written_ms > 1_700_000_000_000, "{v}: {s:?} has no time");
        }
        assert!(!state.in_flight, "{v}: the last turn never closed");
        assert_eq!(state.busy(), Some(false));
        use TurnEnd::*;
        assert_eq!(
            ends,
            [Completed, Completed, Completed, ApiError, ApiError, Completed, Completed].map(Some),
            "{v}"
        );
    }
}

#[test]
fn tool_calls_carry_their_exact_input_and_results() {
    for v in VERSIONS {
        let all = facts(v);
        let calls: Vec<(String, String)> = all
            .iter()
            .filter_map(|s| match &s.fact {
                Fact::ToolCall { name, input, .. } => Some((name.clone(), input.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 2, "{v}: {calls:?}");
        assert_eq!(calls[0].0, "Bash");
        let input: serde_json::Value = serde_json::from_str(&calls[0].1).unwrap();
        assert_eq!(input["command"], "touch karl-marker.txt");
        assert_eq!(calls[1].0, "Write");
        let results: Vec<bool> = all
            .iter()
            .filter_map(|s| match &s.fact {
                Fact::ToolResult { ok, .. } => Some(*ok),
                _ => None,
            })
            .collect();
        assert_eq!(results, [true, true], "{v}");
        // Mid-turn, the call without a result is the pending one.
        let mut state = TurnState::default();
        for s in &all {
            state.apply(s);
            if let Fact::ToolCall { id, .. } = &s.fact {
                let pending = state.pending_tool().expect("pending");
                assert_eq!(&pending.id, id);
                if pending.name == "Bash" {
                    assert_eq!(pending.command(), "touch karl-marker.txt");
                }
            }
            if matches!(s.fact, Fact::ToolResult { .. }) {
                assert!(state.pending_tool().is_none());
            }
        }
    }
}

#[test]
fn api_errors_are_told_apart_from_limits() {
    for v in VERSIONS {
        let errors: Vec<(u16, bool)> = facts(v)
            .into_iter()
            .filter_map(|s| match s.fact {
                Fact::ApiError { status, limit, .. } => Some((status, limit)),
                _ => None,
            })
            .collect();
        assert_eq!(errors, [(529, false), (429, true)], "{v}");
    }
}

#[test]
fn the_assistant_s_own_words_are_kept_per_turn() {
    for v in VERSIONS {
        let mut state = TurnState::default();
        let mut answers = Vec::new();
        for s in facts(v) {
            state.apply(&s);
            if matches!(s.fact, Fact::TurnEnded { .. }) && !state.response.is_empty() {
                answers.push(state.response.join(" "));
            }
        }
        assert_eq!(
            answers[0], "Done: Say hello to the team in one line.",
            "{v}"
        );
        assert!(
            answers
                .iter()
                .any(|a| a.starts_with("Working through it now")),
            "{v}"
        );
    }
}

#[test]
fn session_files_say_busy_and_idle_and_2_1_330_names_its_pane() {
    for v in VERSIONS {
        let busy = SessionFile::parse(&fixture(v, "session-busy.json")).unwrap();
        let idle = SessionFile::parse(&fixture(v, "session-idle.json")).unwrap();
        assert_eq!(busy.status, CliStatus::Busy, "{v}");
        assert_eq!(idle.status, CliStatus::Idle, "{v}");
        assert_eq!(idle.version, v);
        assert_eq!(idle.cwd, "/Users/dev/src/proj");
        assert_eq!(idle.session_id.len(), 36);
        assert!(idle.pid > 0 && idle.status_updated_ms >= idle.started_ms);
        let pane = idle.tmux_pane();
        if v == "2.1.330" {
            assert_eq!(pane, Some("%0"), "{idle:?}");
        } else {
            assert_eq!(pane, None);
        }
    }
}

#[test]
fn the_replay_rebuilds_the_state_at_any_line() {
    for v in VERSIONS {
        let all = facts(v);
        for cut in 0..all.len() {
            let mut state = TurnState::default();
            all[..cut].iter().for_each(|s| state.apply(s));
            let mut rebuilt = TurnState::default();
            for fact in state.replay() {
                rebuilt.apply(&Stamped {
                    fact,
                    written_ms: 0,
                });
            }
            assert_eq!(rebuilt.in_flight, state.in_flight, "{v} at {cut}");
            assert_eq!(rebuilt.prompt, state.prompt, "{v} at {cut}");
            assert_eq!(
                rebuilt.pending_tool().map(|t| t.id.clone()),
                state.pending_tool().map(|t| t.id.clone()),
                "{v} at {cut}"
            );
        }
    }
}

//! The Codex parser on a real rollout written by the pinned 0.169.0 driven through seven
//! kinds of turn: plain text, a command run in the sandbox, an escalated command approved
//! at the prompt, a slow answer interrupted with Esc, a usage limit (429), a failed request
//! (400), and an escalated command refused at the prompt. Paths redacted to
//! `/Users/dev/src/proj`, instructions and settings blanked.

#![allow(clippy::unwrap_used)]

use karl_common::evidence::codex::{parse_line, SessionMeta};
use karl_common::evidence::{Fact, Stamped, TurnEnd, TurnState};

const VERSION: &str = "0.169.0";

const PROMPTS: [&str; 7] = [
    "Say hi please",
    "RUN it",
    "RUN ESC it",
    "SLOW it",
    "LIMIT it",
    "FAIL it",
    "RUN ESC again",
];

fn rollout() -> String {
    let path = format!(
        "{}/tests/fixtures/evidence/codex-{VERSION}/rollout.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn facts() -> Vec<Stamped> {
    rollout()
        .lines()
        .enumerate()
        .flat_map(|(i, l)| parse_line(l).unwrap_or_else(|e| panic!("line {}: {e}", i + 1)))
        .collect()
}

#[test]
fn every_prompt_is_read_once_in_order() {
    let prompts: Vec<String> = facts()
        .into_iter()
        .filter_map(|s| match s.fact {
            Fact::Prompt { text } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(prompts, PROMPTS);
}

#[test]
fn every_turn_opens_and_closes_once_with_how_it_ended() {
    let mut state = TurnState::default();
    let mut ends = Vec::new();
    for s in facts() {
        let was = state.in_flight;
        state.apply(&s);
        if let Fact::TurnEnded { how } = s.fact {
            assert!(was, "a turn ended that was not open");
            ends.push(how);
        }
        if let Fact::Prompt { .. } = s.fact {
            assert!(!was, "a prompt opened a turn while one was in flight");
        }
    }
    assert_eq!(
        ends,
        [
            TurnEnd::Completed,
            TurnEnd::Completed,
            TurnEnd::Completed,
            TurnEnd::Interrupted,
            TurnEnd::ApiError,
            TurnEnd::ApiError,
            TurnEnd::Interrupted,
        ]
    );
    assert!(!state.in_flight);
}

#[test]
fn tool_calls_carry_their_exact_input_and_results_their_outcome() {
    let f = facts();
    let calls: Vec<(String, String)> = f
        .iter()
        .filter_map(|s| match &s.fact {
            Fact::ToolCall { name, input, .. } => Some((name.clone(), input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0],
        ("exec_command".into(), r#"{"cmd": "touch made.txt"}"#.into())
    );
    assert!(calls[1]
        .1
        .contains(r#""sandbox_permissions": "require_escalated""#));
    let results: Vec<bool> = f
        .iter()
        .filter_map(|s| match &s.fact {
            Fact::ToolResult { ok, .. } => Some(*ok),
            _ => None,
        })
        .collect();
    // Run, approved and run, refused at the prompt.
    assert_eq!(results, [true, true, false]);
    let text: Vec<&str> = f
        .iter()
        .filter_map(|s| match &s.fact {
            Fact::AssistantText { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        ["Done: Say hi please", "Done: RUN it", "Done: RUN ESC it"]
    );
}

#[test]
fn a_usage_limit_is_told_from_a_failed_request() {
    let errors: Vec<(u16, bool)> = facts()
        .into_iter()
        .filter_map(|s| match s.fact {
            Fact::ApiError { status, limit, .. } => Some((status, limit)),
            _ => None,
        })
        .collect();
    assert_eq!(errors, [(429, true), (0, false)]);
}

#[test]
fn the_head_names_the_conversation_and_every_fact_its_time() {
    let text = rollout();
    let meta = SessionMeta::parse(text.lines().next().unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(meta.cli_version, VERSION);
    assert_eq!(meta.cwd, "/Users/dev/src/proj");
    assert!(!meta.id.is_empty());
    let f = facts();
    assert!(f.iter().all(|s| s.written_ms >= meta.started_ms));
    assert!(f.windows(2).all(|w| w[0].written_ms <= w[1].written_ms));
}

//! The learned repeat judge (`gate::rewording`) inside the deployed gate: it catches a
//! rewording the rules alone miss, lets through a new request the rules alone block, leaves
//! prompts longer than those it was fitted to to the rules, and says at start that it is on.

#![allow(clippy::unwrap_used)]

mod gate_score;

use gate_score::model_gate;
use karl_common::gate::{Gate, GateContext, ModelSetting, Rule};

fn check(gate: &Gate, candidate: &str, history: &[&str]) -> karl_common::gate::Verdict {
    let history: Vec<String> = history.iter().map(|s| s.to_string()).collect();
    gate.check(
        candidate,
        &GateContext {
            history: &history,
            ..GateContext::default()
        },
    )
}

const HISTORY: [&str; 4] = [
    "Add a ProjectCard component that shows the project's name, owner and last update.",
    "Fix the implicit any errors in src/services/.",
    "Memoize the ProjectCard component with React.memo.",
    "Add a loading skeleton to the projects page.",
];

#[test]
fn a_terse_rewording_the_rules_miss_is_a_repeat() {
    let candidate = "ProjectCard → wrap in React.memo";
    let rules = check(&Gate::new(), candidate, &HISTORY);
    assert!(rules.pass, "the words-only gate: {rules:?}");
    let learned = check(model_gate(), candidate, &HISTORY);
    assert!(learned.has(Rule::NearRepeat), "{learned:?}");
    let detail = &learned.reasons[0].detail;
    assert!(
        detail.contains("rewording") && detail.contains("2 turns back"),
        "{detail}"
    );
}

#[test]
fn another_directory_in_the_same_words_is_new() {
    let candidate = "Fix the implicit any errors in src/components/.";
    let rules = check(&Gate::new(), candidate, &HISTORY);
    assert!(
        rules.has(Rule::NearRepeat),
        "the words-only gate: {rules:?}"
    );
    let learned = check(model_gate(), candidate, &HISTORY);
    assert!(learned.pass, "{learned:?}");
}

#[test]
fn prompts_longer_than_the_judge_reads_are_left_to_the_rules() {
    let long = "Refactor the rotation code in LogStore.swift so that the size check, the file \
                rename and the cleanup of old files each live in their own method, keep the \
                public API unchanged, and add a test for each of the three methods, then run \
                swift test and fix whatever fails in the rotation tests before you commit.";
    assert!(long.split_whitespace().count() > 48);
    let reworded = long
        .replace("Refactor", "Please refactor")
        .replace("commit", "commit it");
    let v = check(model_gate(), &reworded, &[long]);
    assert!(v.has(Rule::NearRepeat), "{v:?}");
    let detail = &v.reasons[0].detail;
    assert!(
        detail.contains("similarity") && !detail.contains("rewording"),
        "{detail}"
    );
}

#[test]
fn the_start_line_says_the_learned_judge_is_on() {
    let dir = karl_common::embed::dir_from_env().unwrap();
    let (_, note) = ModelSetting::Dir(dir).load().unwrap();
    assert!(note.contains("learned judge"), "{note}");
    let (_, words) = ModelSetting::Off.load().unwrap();
    assert!(!words.contains("learned judge"), "{words}");
}

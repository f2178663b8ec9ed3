//! The context stack over every labelled pane capture in `tests/fixtures/panes`: the
//! budget holds at any calibration, the newest screen line reaches the model, errors get
//! more terminal lines than clean screens, and no capture can break assembly.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use karl_coord::context::{
    build_context, Block, Calibration, ContextConfig, ContextInput, Digest, PaneSignal,
    SessionBrief, TaskGraph, TokenEstimator,
};
use serde_json::Value;

fn captures() -> Vec<(PathBuf, String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/panes");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("txt") {
            continue;
        }
        let screen = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let label: Value =
            serde_json::from_str(&std::fs::read_to_string(path.with_extension("json")).unwrap())
                .unwrap();
        out.push((path, screen, label));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(
        out.len() >= 90,
        "only {} captures in {}",
        out.len(),
        dir.display()
    );
    out
}

fn brief() -> SessionBrief {
    SessionBrief {
        project: "proj".into(),
        goal: "Add input validation to the signup form and cover it with tests".into(),
        path: "~/proj".into(),
        machine: "mac2".into(),
        pane: "agent-codex:1.1".into(),
        turn: 9,
        max_turns: 30,
    }
}

#[test]
fn every_capture_fits_the_budget_at_any_calibration() {
    let tasks = TaskGraph::from_steps([
        "read the signup form code",
        "add validation for email and password",
        "write tests for the validation",
        "run the suite and fix failures",
        "commit",
    ]);
    let prompts: Vec<String> = (1..=15)
        .map(|i| format!("earlier instruction number {i} about the signup form"))
        .collect();
    let config = ContextConfig::default();
    let brief = brief();
    let mut runs = 0;
    let mut max_tokens = 0;
    for (path, screen, label) in captures() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let labelled = if label["error"].as_bool().unwrap_or(false) {
            PaneSignal::Error
        } else {
            PaneSignal::Neutral
        };
        for signal in [
            labelled,
            PaneSignal::infer(&screen),
            PaneSignal::Success,
            PaneSignal::Error,
        ] {
            for actual in [None, Some(500), Some(1300), Some(3000)] {
                let mut cal = Calibration::default();
                if let Some(actual) = actual {
                    cal.observe(1000, actual);
                }
                let est = TokenEstimator::new(cal);
                let ctx = build_context(&ContextInput {
                    brief: &brief,
                    tasks: &tasks,
                    digest: &Digest::default(),
                    recent_prompts: &prompts,
                    screen: &screen,
                    signal,
                    rejections: &[],
                    phase: None,
                    config: &config,
                    estimator: &est,
                });
                let again = est.estimate_messages(ctx.messages.iter().map(|m| m.content.as_str()));
                assert_eq!(again, ctx.estimated_tokens, "{name}");
                assert!(
                    ctx.estimated_tokens <= ctx.budget,
                    "{name}: {} > {}",
                    ctx.estimated_tokens,
                    ctx.budget
                );
                assert!(
                    ctx.block(Block::Terminal).unwrap().kept > 0,
                    "{name}: no terminal lines"
                );
                for b in [Block::System, Block::Brief, Block::Question] {
                    assert!(ctx.block(b).unwrap().kept > 0, "{name}: {b:?} dropped");
                }
                max_tokens = max_tokens.max(ctx.estimated_tokens);
                runs += 1;
            }
        }
    }
    println!("{runs} contexts built, largest estimate {max_tokens} tokens");
}

#[test]
fn the_newest_screen_line_reaches_the_model() {
    let config = ContextConfig::default();
    let est = TokenEstimator::default();
    let brief = brief();
    for (path, screen, _) in captures() {
        let ctx = build_context(&ContextInput {
            brief: &brief,
            tasks: &TaskGraph::default(),
            digest: &Digest::default(),
            recent_prompts: &[],
            screen: &screen,
            signal: PaneSignal::Neutral,
            rejections: &[],
            phase: None,
            config: &config,
            estimator: &est,
        });
        let user = &ctx.messages[1].content;
        let terminal = user
            .split("## Terminal (latest lines at the bottom)\n")
            .nth(1)
            .and_then(|t| t.split("\n\n## Your turn").next())
            .unwrap();
        // The last line with words on it (box-drawing rules are shown as ---).
        let newest = screen
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| l.chars().filter(|c| c.is_alphanumeric()).count() >= 3)
            .unwrap();
        let word = newest
            .split_whitespace()
            .filter(|w| w.chars().all(|c| c.is_alphanumeric()))
            .max_by_key(|w| w.len())
            .unwrap_or(newest);
        assert!(
            terminal.lines().rev().take(8).any(|l| l.contains(word)),
            "{}: {word:?} of {newest:?} not near the end of\n{terminal}",
            path.display()
        );
    }
}

#[test]
fn error_screens_get_more_lines_than_clean_ones() {
    let config = ContextConfig::default();
    let est = TokenEstimator::default();
    let brief = brief();
    let mut compared = 0;
    for (_, screen, _) in captures() {
        let lines = |signal| {
            build_context(&ContextInput {
                brief: &brief,
                tasks: &TaskGraph::default(),
                digest: &Digest::default(),
                recent_prompts: &[],
                screen: &screen,
                signal,
                rejections: &[],
                phase: None,
                config: &config,
                estimator: &est,
            })
            .block(Block::Terminal)
            .unwrap()
            .kept
        };
        let (success, neutral, error) = (
            lines(PaneSignal::Success),
            lines(PaneSignal::Neutral),
            lines(PaneSignal::Error),
        );
        assert!(success <= neutral && neutral <= error);
        if success < error {
            compared += 1;
        }
    }
    assert!(
        compared > 10,
        "only {compared} captures were long enough to differ"
    );
}

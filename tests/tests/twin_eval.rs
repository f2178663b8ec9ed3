//! The twin evaluation's parts, end to end: recording a session through the stand-in in
//! real tmux, the shipped timelines being whole sessions, and both driving styles
//! replaying a concurrent pair against a scripted model server on loopback (the real
//! model's run is `karl-bench twin`, a benchmark).

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use karl_common::gate::Gate;
use karl_coord::model::{HttpModelClient, ModelConfig};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};
use karl_tests::tmux_server::TmuxServer;
use karl_tests::twin_eval::drive::{Style, Twin, RAW_SYSTEM};
use karl_tests::twin_eval::record::record;
use karl_tests::twin_eval::timeline::{
    fixtures_dir, load_dir, ScriptTurn, SessionMeta, SessionScript, Timeline,
};
use karl_tests::twin_eval::{evaluate, groups, render, rescore, EvalOptions, EvalReport};

fn shipped() -> Vec<Timeline> {
    load_dir(&fixtures_dir(), Timeline::check).expect("the shipped timelines load")
}

#[test]
fn recording_keeps_every_turn_on_its_screen() {
    let script = SessionScript {
        meta: SessionMeta {
            id: "shop-health".into(),
            project: "shop".into(),
            path: "~/src/shop".into(),
            machine: "mac2".into(),
            pane: "w:1.1".into(),
            goal: "add a health endpoint".into(),
            concurrent_with: None,
            vocabulary: vec!["ShopRouter".into()],
        },
        turns: (1..=3)
            .map(|i| ScriptTurn {
                prompt: format!("step {i}: wire ShopRouter part {i}"),
                answer: vec![
                    format!("Updated src/router{i}.rs (+{i}0)"),
                    "Tests pass.".into(),
                ],
            })
            .collect(),
    };
    let server = TmuxServer::start().unwrap();
    let t = record(
        &script,
        env!("CARGO_BIN_EXE_karl-standin").as_ref(),
        &server,
    )
    .unwrap();
    assert_eq!(t.captures.len(), 4, "the first screen and one per turn");
    assert!(t.recorded.tmux.starts_with("tmux "), "{:?}", t.recorded);
    assert!(
        t.captures[0].text.contains("~/src/shop"),
        "the banner shows the project's path:\n{}",
        t.captures[0].text
    );
    for (i, c) in t.captures.iter().enumerate() {
        assert_eq!(c.after_turn as usize, i);
        assert_eq!(c.current_command, "claude");
        assert_eq!((c.width, c.height), (120, 40));
        assert_eq!(
            c.next_prompt.as_deref(),
            script.turns.get(i).map(|x| x.prompt.as_str())
        );
        if i > 0 {
            let turn = &script.turns[i - 1];
            assert!(c.text.contains(&turn.prompt), "screen {i}:\n{}", c.text);
            assert!(c.text.contains(&turn.answer[0]), "screen {i}:\n{}", c.text);
        }
    }
}

#[test]
fn the_shipped_timelines_are_whole_sessions() {
    let all = shipped();
    assert!(all.len() >= 10, "{} timelines", all.len());
    for t in &all {
        assert!(
            t.captures.len() > 20,
            "{}: {} screens, want 20+ turns",
            t.meta.id,
            t.captures.len()
        );
        // Each screen shows the prompt the one before it says came next.
        for w in t.captures.windows(2) {
            let next = w[0].next_prompt.as_deref().unwrap_or_default();
            let head: String = next.chars().take(40).collect();
            assert!(
                w[1].text.contains(&head),
                "{} screen {}: {head:?} not shown",
                t.meta.id,
                w[1].after_turn
            );
        }
        let text = t
            .captures
            .iter()
            .flat_map(|c| [c.text.as_str(), c.next_prompt.as_deref().unwrap_or("")])
            .collect::<Vec<_>>()
            .join("\n")
            .to_lowercase();
        for v in &t.meta.vocabulary {
            assert!(
                text.contains(&v.to_lowercase()),
                "{}: vocabulary {v:?} never appears",
                t.meta.id
            );
        }
    }
    let pairs: Vec<_> = groups(&all).into_iter().filter(|g| g.len() == 2).collect();
    assert!(!pairs.is_empty(), "at least two sessions ran side by side");
    for p in pairs {
        assert_eq!(p[0].meta.machine, p[1].meta.machine);
        for v in &p[0].meta.vocabulary {
            assert!(
                !p[1]
                    .meta
                    .vocabulary
                    .iter()
                    .any(|w| w.eq_ignore_ascii_case(v)),
                "{v:?} belongs to both {} and {}",
                p[0].meta.id,
                p[1].meta.id
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_styles_replay_a_concurrent_pair_against_a_scripted_model() {
    let all = shipped();
    let pair: Vec<Timeline> = groups(&all)
        .into_iter()
        .find(|g| g.len() == 2)
        .expect("a concurrent pair")
        .into_iter()
        .cloned()
        .collect();
    let (a, b) = (&pair[0], &pair[1]);
    // A name only the other session shows: proposing it for `a` is contamination.
    let foreign = b
        .meta
        .vocabulary
        .iter()
        .find(|v| {
            let own = a
                .captures
                .iter()
                .any(|c| c.text.to_lowercase().contains(&v.to_lowercase()));
            v.len() >= 6 && !own
        })
        .expect("a name of b's that a never shows")
        .clone();
    // The previous driver asks first, screen by screen, a then b; then KARL, whose
    // calls the stub answers cooperatively once these run out.
    let raw = [
        "What's the status?".to_string(),
        "status".into(),
        "What's the status?".into(),
        "Run the whole test suite and show me the failures".into(),
        format!("Open {foreign} and fix the bug there"),
        "Write a test for the stop path while an export runs".into(),
        "```\ncargo test\n```".into(),
        "Now update the docs for this change".into(),
    ];
    let stub = StubModel::start(StubScript::replies(raw.iter().map(StubReply::text)))
        .await
        .unwrap();
    let client = HttpModelClient::new(ModelConfig {
        urls: vec![stub.base_url()],
        ..ModelConfig::default()
    })
    .unwrap();
    let opts = EvalOptions {
        screens: 4,
        ..EvalOptions::default()
    };
    let report = evaluate(
        &pair,
        &Twin::new(client),
        "stub",
        Arc::new(Gate::new()),
        &opts,
    )
    .await;
    assert_eq!(report.concurrent.len(), 1);
    assert_eq!(report.screens, 8);

    let raw_score = &report.scores[&Style::Raw];
    assert_eq!(raw_score.typed.prompts, 8, "one prompt per screen");
    assert_eq!(raw_score.typed.status, 3, "{raw_score:?}");
    assert_eq!(raw_score.typed.exact_repeat, 1);
    assert_eq!(raw_score.typed.contaminated, 1);
    assert_eq!(raw_score.typed.unusable, 1);
    assert_eq!(raw_score.cost.calls, 8);

    // The previous driver sent the screen's last lines under its generic prompt.
    let requests = stub.requests();
    let first = &requests[0]["messages"];
    assert_eq!(first[0]["content"], RAW_SYSTEM);
    let sent = first[1]["content"].as_str().unwrap();
    assert!(a.captures[0].text.contains(sent.lines().next().unwrap()));

    let karl = &report.scores[&Style::Karl];
    let runs: Vec<_> = report
        .runs
        .iter()
        .filter(|r| r.style == Style::Karl)
        .collect();
    assert_eq!(runs.len(), 2);
    for run in &runs {
        let screens: Vec<usize> = run.proposals.iter().map(|p| p.capture).collect();
        assert_eq!(screens, vec![0, 1, 2, 3], "{}: one turn per screen", run.id);
        assert_eq!(
            run.plan.as_deref(),
            Some("model"),
            "the stub plans in steps"
        );
        assert!(run.stopped.is_none(), "{:?}", run.stopped);
    }
    assert_eq!(karl.typed.prompts, 8);
    assert_eq!(karl.typed.status + karl.typed.destructive, 0, "{karl:?}");
    assert_eq!(karl.typed.contaminated, 0);
    // KARL's requests carry each session's own brief, never the other's project.
    let karl_requests = &requests[raw.len()..];
    assert!(karl_requests
        .iter()
        .any(|r| r.to_string().contains(&a.meta.project)));
    assert!(karl_requests
        .iter()
        .any(|r| r.to_string().contains(&b.meta.project)));
    // The previous driver is also scored on the screens KARL drove (here: all of them).
    assert_eq!(raw_score.karl_screens.as_ref(), Some(&raw_score.typed));
    // A saved report scores the same again, without a model.
    let saved: EvalReport = serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    assert_eq!(rescore(saved, &all, &Gate::new()).scores, report.scores);
    let table = render(&report);
    assert!(
        table.contains("| status spam | 28 % | 37.5 % (3/8) |"),
        "{table}"
    );
    stub.shutdown().await;
}

/// `karl-bench twin` as a user runs it, against the real test twin (started by the bench
/// itself), on two sessions of three screens each: every screen gets a prompt in both
/// styles and every model call is answered and costed.
#[test]
fn karl_bench_twin_runs_against_the_real_model() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_karl-bench"))
        .args(["twin", "--sessions", "2", "--screens", "3", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("| status spam | 28 % |"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        report["model"].as_str().unwrap_or("").contains("SmolLM2"),
        "{}",
        report["model"]
    );
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "two sessions in two styles");
    for run in runs {
        let proposals = run["proposals"].as_array().unwrap();
        let screens: Vec<u64> = proposals
            .iter()
            .filter_map(|p| p["capture"].as_u64())
            .collect();
        assert_eq!(screens, vec![0, 1, 2], "{}", run["id"]);
        for call in run["calls"].as_array().unwrap() {
            assert!(call.get("error").is_none(), "{call}");
            assert!(call["prompt_tokens"].as_u64().unwrap_or(0) > 0, "{call}");
        }
    }
}

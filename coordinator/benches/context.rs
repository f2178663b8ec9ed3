//! Context assembly cost: `build_context` over every pane fixture and over synthetic
//! worst cases (5,000-line scrollback, 10,000-column lines, secrets), with full session
//! state. Prints per-call percentiles and the largest estimate against the budget.
//!
//! `cargo bench -p karl-coord --bench context`

use std::path::Path;
use std::time::{Duration, Instant};

use karl_coord::context::{
    build_context, redact, ContextConfig, ContextInput, Digest, Outcome, PaneSignal, SessionBrief,
    TaskGraph, TokenEstimator, TurnNote,
};
use karl_tests::stats::Latencies;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let mut screens: Vec<(String, String)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) == Some("txt") {
                if let Ok(bytes) = std::fs::read(&path) {
                    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
                    screens.push((
                        name.unwrap_or_default(),
                        String::from_utf8_lossy(&bytes).into_owned(),
                    ));
                }
            }
        }
    }
    let fixtures = screens.len();
    screens.push((
        "synthetic: 5,000-line error scrollback".into(),
        (1..=5_000)
            .map(|i| {
                format!(
                    "error[E0425]: cannot find value `x{i}` in this scope ──── │ src/lib.rs:{i}:5"
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
    ));
    screens.push((
        "synthetic: 10,000-column lines".into(),
        format!("{}\n", "y".repeat(10_000)).repeat(200),
    ));
    screens.push((
        "synthetic: env dump with secrets".into(),
        (1..=300)
            .map(|i| format!("TOKEN_{i}=ghp_{i:0>36} password=pw{i} Authorization: Bearer abc{i}def456ghi789"))
            .collect::<Vec<_>>()
            .join("\n"),
    ));

    let brief = SessionBrief {
        project: "meshd".into(),
        goal: "Add a /health endpoint that reports uptime and build info".into(),
        path: "~/src/meshd".into(),
        machine: "mac2".into(),
        pane: "agent-codex:1.1".into(),
        turn: 14,
        max_turns: 30,
    };
    let mut tasks = TaskGraph::from_steps(
        (1..=8).map(|i| format!("plan step number {i} of the health endpoint work")),
    );
    tasks.advance(5);
    let mut digest = Digest::default();
    for b in 0..8u32 {
        let turns: Vec<TurnNote> = (1..=5)
            .map(|i| TurnNote {
                turn: b * 5 + i,
                prompt: format!(
                    "Implement part {i} of block {b} in src/health.rs and run the tests"
                ),
                outcome: if i % 3 == 0 {
                    Outcome::Error
                } else {
                    Outcome::Progress
                },
                response: "error[E0308]: mismatched types\n✓ 12 tests passed".into(),
            })
            .collect();
        digest.fold(&turns);
        digest.add_milestone(b * 5 + 5, format!("done: plan step {b}"));
    }
    let prompts: Vec<String> = (1..=15)
        .map(|i| format!("Instruction {i}: change the health handler in some way"))
        .collect();
    let config = ContextConfig::default();
    let est = TokenEstimator::default();

    let rounds = 20;
    let mut times = Latencies::new();
    let mut worst: (Duration, String) = (Duration::ZERO, String::new());
    let mut max_tokens = 0;
    for _ in 0..rounds {
        for (name, screen) in &screens {
            for signal in [PaneSignal::Success, PaneSignal::Neutral, PaneSignal::Error] {
                let input = ContextInput {
                    brief: &brief,
                    tasks: &tasks,
                    digest: &digest,
                    recent_prompts: &prompts,
                    screen,
                    signal,
                    rejections: &[],
                    phase: None,
                    config: &config,
                    estimator: &est,
                };
                let t = Instant::now();
                let ctx = build_context(&input);
                let took = t.elapsed();
                assert!(ctx.estimated_tokens <= ctx.budget, "{name}: over budget");
                max_tokens = max_tokens.max(ctx.estimated_tokens);
                if took > worst.0 {
                    worst = (took, name.clone());
                }
                times.record(took);
            }
        }
    }
    println!("context assembly: {} calls over {fixtures} fixture captures + 3 synthetic screens x 3 signals", times.len());
    println!(
        "  p50 {:?}  p90 {:?}  p99 {:?}  max {:?} ({})",
        times.quantile(0.50),
        times.quantile(0.90),
        times.quantile(0.99),
        worst.0,
        worst.1
    );
    println!(
        "  largest estimate {max_tokens} of {} budget tokens",
        config.budget
    );

    let sample = &screens[fixtures + 2].1;
    let t = Instant::now();
    let n = 50;
    let mut found = 0;
    for _ in 0..n {
        found = redact(sample).1;
    }
    println!(
        "redaction: {:?} per {} KB env dump ({found} secrets)",
        t.elapsed() / n,
        sample.len() / 1024
    );
}

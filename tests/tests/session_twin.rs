//! The real twin in the loop: SmolLM2-135M-Instruct, served on loopback by
//! `tests/twin/server.mjs` (the model and its runtime fetched by `scripts/fetch-model.sh`),
//! writes the plan and the prompts of a session with the stand-in coding agent; karl-coord,
//! karl-agent and the stand-in run as real processes. A real small model's raw output —
//! echoes of the briefing, narration, junk — must never crash a session or reach the pane
//! without passing the gate, and every typed prompt arrives exactly once.

use std::collections::BTreeMap;
use std::time::Duration;

use karl_tests::harness::{passed_the_gate, turns, Fleet, Scratch, FAST_STANDIN};
use karl_tests::twin::TwinServer;

#[test]
fn a_real_small_model_drives_ten_turns_and_only_gated_prompts_reach_the_pane() {
    let scratch = Scratch::new();
    let mut twin = TwinServer::start(&scratch.path("twin.log")).unwrap_or_else(|e| panic!("{e}"));
    let fleet = Fleet::start_with(Some(FAST_STANDIN), &[], &["--model-url", twin.base_url()]);
    // A plan longer than the turn budget, so the session runs all ten turns.
    let plan = fleet.plan(&[
        "Read app.py and explain how the routes are registered.",
        "Add a GET /health route to app.py that returns {\"status\": \"ok\"}.",
        "Add tests/test_health.py with a pytest test for GET /health.",
        "Run pytest and fix what fails.",
        "Return the app version from /health as well.",
        "Test the version field in tests/test_health.py.",
        "Document /health in README.md.",
        "Add a type hint to the health handler.",
        "Run flake8 on app.py and fix the warnings.",
        "Add a test that /health answers within 100 ms.",
        "Log each /health request at debug level.",
        "Add /health to the OpenAPI description in openapi.yaml.",
    ]);
    let id = fleet.drive(&[
        "--goal",
        "Add a /health endpoint to the Flask service in app.py, with a pytest test",
        "--project",
        "flask-api",
        "--plan",
        &plan,
        "--turns",
        "10",
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(600), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    let t = turns(&show);
    assert_eq!(t.len(), 10, "{show:#}");

    let mut sources = BTreeMap::new();
    for turn in &t {
        let source = turn["source"].as_str().unwrap_or("");
        *sources.entry(source.to_string()).or_insert(0) += 1;
        assert!(
            passed_the_gate(turn),
            "turn typed without passing the gate: {turn:#}"
        );
        let prompt = turn["prompt"].as_str().unwrap_or("");
        assert!(!prompt.trim().is_empty(), "empty prompt typed: {turn:#}");
        // The same prompt, judged offline by the same gate, passes too.
        let out = fleet.ctl(&["validate", prompt]);
        assert_eq!(
            out.code, 0,
            "the gate refuses a typed prompt offline: {out:?}"
        );
    }
    // Every typed prompt reached the pane once, in order, byte for byte.
    let typed: Vec<String> = t
        .iter()
        .map(|x| x["prompt"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(fleet.received(), typed);
    assert!(twin.is_running(), "twin server died:\n{}", twin.log_text());
    // The server's prefix cache: after the first call, each model call finds at least the
    // briefing's stable head (system prompt, session) already evaluated, as the server
    // reports in usage.prompt_tokens_details.cached_tokens.
    let later: Vec<&serde_json::Value> = t
        .iter()
        .skip(1)
        .filter(|x| matches!(x["source"].as_str(), Some("model" | "regenerated")))
        .collect();
    let cached: u64 = later
        .iter()
        .filter_map(|x| x["cached_tokens"].as_u64())
        .sum();
    let prompt: u64 = later
        .iter()
        .filter_map(|x| x["prompt_tokens"].as_u64())
        .sum();
    eprintln!(
        "prefix cache: {cached} of {prompt} prompt tokens ({:.0} %) over {} model turns after the first",
        100.0 * cached as f64 / prompt.max(1) as f64,
        later.len()
    );
    for x in &later {
        assert!(
            x["cached_tokens"].as_u64().unwrap_or(0) > 0,
            "no prompt token came from the cache: {x:#}"
        );
    }
    // What the real model did, for the log: how many prompts it wrote and what the gate
    // and the fallbacks caught.
    eprintln!(
        "real twin {}: sources {sources:?}; record {:#}",
        twin.model(),
        show["record"]
    );
    for turn in &t {
        eprintln!(
            "  {} {:?} {:?}",
            turn["source"], turn["prompt"], turn["gate"]
        );
    }
}

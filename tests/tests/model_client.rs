//! The model client against the stub model server over real loopback HTTP: replies and
//! usage, retries, timeouts, bad bodies, fallback endpoints, health checks, and the
//! stub's cooperative mode answering the context stack's own prompts.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use karl_coord::context::{
    build_context, clean_reply, detect_messages, parse_detect, parse_plan, plan_messages,
    Calibration, ContextConfig, ContextInput, Digest, PaneSignal, SessionBrief, TaskGraph,
    TokenEstimator, PLAN_MAX_STEPS, REPLY_MAX_CHARS,
};
use karl_coord::model::{
    ChatMessage, ChatRequest, HttpModelClient, ModelClient, ModelConfig, ModelError,
};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};

fn config(urls: Vec<String>) -> ModelConfig {
    ModelConfig {
        urls,
        retries: 0,
        backoff_ms: 10,
        max_backoff_ms: 40,
        timeout_ms: 5_000,
        ..ModelConfig::default()
    }
}

fn client(stub: &StubModel, tweak: impl FnOnce(&mut ModelConfig)) -> HttpModelClient {
    let mut c = config(vec![stub.base_url()]);
    tweak(&mut c);
    HttpModelClient::new(c).unwrap()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![
        ChatMessage::system("You are a test."),
        ChatMessage::user(text),
    ])
}

/// A loopback port with nothing listening on it.
fn dead_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/v1")
}

#[tokio::test]
async fn success_reports_text_usage_and_endpoint() {
    let stub = StubModel::start(StubScript::replies([StubReply::text_with_usage(
        "Run the tests in crates/core.",
        812,
    )]))
    .await
    .unwrap();
    let c = client(&stub, |c| c.max_tokens = 77);
    let reply = c.complete(&ask("next?")).await.unwrap();
    assert_eq!(reply.text, "Run the tests in crates/core.");
    assert_eq!(reply.prompt_tokens, Some(812));
    assert!(reply.completion_tokens.is_some());
    assert_eq!(reply.endpoint, stub.base_url());
    assert_eq!(reply.model.as_deref(), Some("karl-stub"));
    assert_eq!(reply.attempts, 1);
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["messages"][1]["content"], "next?");
    assert_eq!(reqs[0]["messages"][0]["role"], "system");
    assert_eq!(reqs[0]["max_tokens"], 77);
    assert_eq!(reqs[0]["stream"], false);
    // No model configured: the field is left out for the server's default.
    assert!(reqs[0].get("model").is_none());

    let named = client(&stub, |c| c.model = Some("qwen3-4b".into()));
    named
        .complete(&ask("x").with_temperature(0.1).with_max_tokens(5))
        .await
        .unwrap();
    let last = stub.requests().pop().unwrap();
    assert_eq!(last["model"], "qwen3-4b");
    assert_eq!(last["max_tokens"], 5);
    assert!((last["temperature"].as_f64().unwrap() - 0.1).abs() < 1e-6);
}

#[tokio::test]
async fn a_500_is_retried_and_then_succeeds() {
    let stub = StubModel::start(StubScript::replies([
        StubReply::status(500),
        StubReply::status(503),
        StubReply::text("Fix the import."),
    ]))
    .await
    .unwrap();
    let c = client(&stub, |c| c.retries = 2);
    let reply = c.complete(&ask("q")).await.unwrap();
    assert_eq!(reply.text, "Fix the import.");
    assert_eq!(reply.attempts, 3);
    assert_eq!(stub.request_count(), 3);
}

#[tokio::test]
async fn retries_run_out_with_the_status_error() {
    let stub = StubModel::start(StubScript::replies([]).then(StubReply::status(500)))
        .await
        .unwrap();
    let c = client(&stub, |c| c.retries = 2);
    let err = c.complete(&ask("q")).await.unwrap_err();
    match &err {
        ModelError::Status { status, body, .. } => {
            assert_eq!(*status, 500);
            assert!(body.contains("scripted failure"), "{body}");
        }
        other => panic!("expected a status error, got {other}"),
    }
    assert_eq!(stub.request_count(), 3);
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let stub = StubModel::start(StubScript::replies([
        StubReply::status(400),
        StubReply::text("never reached"),
    ]))
    .await
    .unwrap();
    let c = client(&stub, |c| c.retries = 3);
    let err = c.complete(&ask("q")).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Status { status: 400, .. }),
        "{err}"
    );
    assert_eq!(stub.request_count(), 1);
}

#[tokio::test]
async fn a_hung_server_times_out_within_the_bound() {
    let stub = StubModel::start(StubScript::replies([]).then(StubReply::Hang))
        .await
        .unwrap();
    let c = client(&stub, |c| c.timeout_ms = 300);
    let started = Instant::now();
    let err = c.complete(&ask("q")).await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, ModelError::Timeout { .. }), "{err}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert!(err.to_string().contains("300 ms"), "{err}");
}

#[tokio::test]
async fn a_slow_reply_within_the_timeout_is_fine_and_a_timeout_is_retried() {
    let stub = StubModel::start(StubScript::replies([
        StubReply::Hang,
        StubReply::slow(100, "Add the test."),
    ]))
    .await
    .unwrap();
    let c = client(&stub, |c| {
        c.timeout_ms = 800;
        c.retries = 1;
    });
    let reply = c.complete(&ask("q")).await.unwrap();
    assert_eq!(reply.text, "Add the test.");
    assert_eq!(reply.attempts, 2);
    assert!(reply.latency >= Duration::from_millis(100));
}

#[tokio::test]
async fn bad_bodies_give_the_right_errors() {
    let cases: Vec<(StubReply, &str)> = vec![
        (StubReply::Malformed, "malformed"),
        (StubReply::EmptyChoices, "empty"),
        (StubReply::EmptyContent, "empty"),
        (StubReply::huge(2 << 20, true), "too_large"),
        (StubReply::huge(3 << 20, false), "too_large"),
    ];
    for (reply, kind) in cases {
        let stub = StubModel::start(StubScript::replies([]).then(reply.clone()))
            .await
            .unwrap();
        let c = client(&stub, |_| {});
        let err = c.complete(&ask("q")).await.unwrap_err();
        assert_eq!(err.kind(), kind, "{reply:?} gave {err}");
        assert_eq!(err.endpoint(), Some(stub.base_url().as_str()));
        // The same server still answers a good request afterwards.
        stub.push(StubReply::text("fine"));
        // (the scripted reply is consumed before `then`)
        assert_eq!(c.complete(&ask("q")).await.unwrap().text, "fine");
    }
}

#[tokio::test]
async fn a_body_just_under_the_cap_is_read() {
    let stub = StubModel::start(StubScript::replies([StubReply::huge(900 << 10, true)]))
        .await
        .unwrap();
    let c = client(&stub, |_| {});
    let reply = c.complete(&ask("q")).await.unwrap();
    assert!(reply.text.len() > 800 << 10);
}

#[tokio::test]
async fn primary_down_falls_back_and_then_prefers_the_fallback() {
    let stub = StubModel::start(StubScript::echo()).await.unwrap();
    let dead = dead_url();
    let c = HttpModelClient::new(ModelConfig {
        retries: 1,
        ..config(vec![dead.clone(), stub.base_url()])
    })
    .unwrap();
    let first = c.complete(&ask("Goal: ship it")).await.unwrap();
    assert_eq!(first.endpoint, stub.base_url());
    assert_eq!(
        first.attempts, 3,
        "two at the dead primary, one at the fallback"
    );
    // The primary is cooling down: the next request goes straight to the fallback.
    let second = c.complete(&ask("Goal: ship it")).await.unwrap();
    assert_eq!(second.attempts, 1);
    assert_eq!(stub.request_count(), 2);
}

#[tokio::test]
async fn a_failing_primary_falls_through_to_the_fallback() {
    let bad = StubModel::start(StubScript::replies([]).then(StubReply::status(502)))
        .await
        .unwrap();
    let good = StubModel::start(StubScript::replies([StubReply::text("Run it.")]))
        .await
        .unwrap();
    let c = HttpModelClient::new(ModelConfig {
        retries: 1,
        ..config(vec![bad.base_url(), good.base_url()])
    })
    .unwrap();
    let reply = c.complete(&ask("q")).await.unwrap();
    assert_eq!(reply.text, "Run it.");
    assert_eq!(reply.endpoint, good.base_url());
    assert_eq!(bad.request_count(), 2);
}

#[tokio::test]
async fn every_endpoint_down_is_one_clear_error() {
    let c = HttpModelClient::new(config(vec![dead_url(), dead_url()])).unwrap();
    let started = Instant::now();
    let err = c.complete(&ask("q")).await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert_eq!(err.kind(), "unreachable");
    assert!(started.elapsed() < Duration::from_secs(3));
    let err = c.health().await.unwrap_err();
    assert_eq!(err.kind(), "unreachable");
}

#[tokio::test]
async fn health_check_lists_models_or_falls_back_to_a_tiny_completion() {
    let stub = StubModel::start(StubScript::echo()).await.unwrap();
    let c = client(&stub, |_| {});
    let h = c.health().await.unwrap();
    assert_eq!(h.endpoint, stub.base_url());
    assert_eq!(h.models, ["karl-stub"]);
    assert_eq!(stub.model_checks(), 1);
    assert_eq!(stub.request_count(), 0);

    // A server without /models: the check asks for one token instead.
    let bare = StubModel::start(StubScript::echo().models_status(404))
        .await
        .unwrap();
    let c = client(&bare, |_| {});
    let h = c.health().await.unwrap();
    assert!(h.models.is_empty());
    let reqs = bare.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["max_tokens"], 1);

    // A server whose /models fails with 500 is not healthy; the fallback is.
    let sick = StubModel::start(StubScript::echo().models_status(500))
        .await
        .unwrap();
    let c = HttpModelClient::new(config(vec![sick.base_url(), stub.base_url()])).unwrap();
    assert_eq!(c.health().await.unwrap().endpoint, stub.base_url());
}

#[tokio::test]
async fn concurrent_requests_are_all_answered() {
    let stub = StubModel::start(StubScript::echo()).await.unwrap();
    let c = std::sync::Arc::new(client(&stub, |_| {}));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let c = std::sync::Arc::clone(&c);
        tasks.push(tokio::spawn(async move {
            c.complete(&ask(&format!("Goal: job {i}"))).await
        }));
    }
    for t in tasks {
        assert!(!t.await.unwrap().unwrap().text.is_empty());
    }
    assert_eq!(stub.request_count(), 20);
}

/// The stub's cooperative mode answers KARL's own prompts: the turn context, plan
/// generation and auto-detect round-trip through the real client and parsers, and the
/// reported usage calibrates the estimator.
#[tokio::test]
async fn echo_mode_answers_karls_prompts() {
    let stub = StubModel::start(StubScript::echo()).await.unwrap();
    let c = client(&stub, |_| {});

    let plan = c
        .complete(&ChatRequest::new(plan_messages(
            "meshd",
            "add a /health endpoint",
            "~/src/meshd",
            None,
        )))
        .await
        .unwrap();
    let steps = parse_plan(&plan.text);
    assert!((5..=PLAN_MAX_STEPS).contains(&steps.len()), "{steps:?}");
    assert!(steps[0].contains("add a /health endpoint"));

    let detect = c
        .complete(&ChatRequest::new(detect_messages(
            "karl@mac2 meshd % claude\n> add a health endpoint\n",
            Some("/Users/karl/src/meshd"),
        )))
        .await
        .unwrap();
    let found = parse_detect(&detect.text);
    assert_eq!(found.project.as_deref(), Some("meshd"));
    assert!(found.goal.is_some());

    let tasks = TaskGraph::from_steps(steps);
    let brief = SessionBrief {
        project: "meshd".into(),
        goal: "add a /health endpoint".into(),
        path: "~/src/meshd".into(),
        machine: "mac2".into(),
        pane: "agent-codex:1.1".into(),
        turn: 3,
        max_turns: 30,
    };
    let config = ContextConfig::default();
    let mut calibration = Calibration::default();
    let mut prompts: Vec<String> = Vec::new();
    for _ in 0..4 {
        let est = TokenEstimator::new(calibration);
        let ctx = build_context(&ContextInput {
            brief: &brief,
            tasks: &tasks,
            digest: &Digest::default(),
            recent_prompts: &prompts,
            screen: "● Read(src/server.rs)\n  ⎿ Read 120 lines\n\n> ",
            signal: PaneSignal::Neutral,
            rejections: &[],
            phase: None,
            config: &config,
            estimator: &est,
        });
        assert!(ctx.estimated_tokens <= ctx.budget);
        let reply = c
            .complete(&ChatRequest::new(ctx.messages.clone()))
            .await
            .unwrap();
        let prompt = clean_reply(&reply.text, REPLY_MAX_CHARS);
        assert!(prompt.contains("Read the code involved in"), "{prompt}");
        assert!(!prompts.contains(&prompt), "echo repeated itself: {prompt}");
        prompts.push(prompt);
        calibration.observe(ctx.raw_tokens, reply.prompt_tokens.unwrap());
    }
    // The stub counts characters / 4: denser than KARL's heuristic on this text, so the
    // factor moved below 1 and stays within its bounds.
    assert!(calibration.samples() == 4);
    assert!(
        calibration.factor() < 1.0 && calibration.factor() >= 0.5,
        "{}",
        calibration.factor()
    );
}

#[tokio::test]
async fn the_stub_binary_serves_a_script_file() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"replies": [{"kind": "status", "code": 500}, {"kind": "text", "text": "Run the linter.", "prompt_tokens": 42}], "then": {"kind": "malformed"}}"#,
    )
    .unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_karl-stub-model"))
        .arg("--script")
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let url = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"),
        "{url}"
    );
    let c = HttpModelClient::new(ModelConfig {
        retries: 1,
        ..config(vec![url])
    })
    .unwrap();
    let reply = c.complete(&ask("q")).await.unwrap();
    assert_eq!(reply.text, "Run the linter.");
    assert_eq!(reply.prompt_tokens, Some(42));
    let err = c.complete(&ask("q")).await.unwrap_err();
    assert_eq!(err.kind(), "malformed");
    child.kill().await.unwrap();
}

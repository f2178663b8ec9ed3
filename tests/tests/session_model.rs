//! Sessions with a twin model: the stub OpenAI-compatible server (in this test process,
//! on loopback) writes the prompts; karl-coord, karl-agent and the stand-in coding agent
//! run as real processes. Covers model-written turns, regeneration after the gate
//! refuses a reply, bad model bodies falling back to the plan, plan generation and
//! auto-detection, and the operator commands around a live session.

use std::collections::HashSet;
use std::time::Duration;

use karl_tests::harness::{stub_runtime, turns, wait_for, Fleet, FAST_STANDIN};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};

const FAST: &str = FAST_STANDIN;

fn user_text(request: &serde_json::Value) -> String {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|x| x["role"] == "user")
                .filter_map(|x| x["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn the_model_writes_the_prompts_and_a_refused_reply_is_regenerated() {
    let rt = stub_runtime();
    let script = StubScript::replies([
        StubReply::text("Add a tokenizer for integer literals in src/lexer.rs."),
        // Status spam: the gate refuses it and the model is asked again with the reason.
        StubReply::text("What's the status? Are you done yet?"),
        StubReply::text("Write unit tests for the integer tokenizer in tests/lexer.rs."),
        StubReply::text("Handle negative integer literals in the tokenizer."),
    ]);
    let model = rt.block_on(StubModel::start(script)).expect("stub model");
    let url = model.base_url();
    let fleet = Fleet::start_with(Some(FAST), &[], &["--model-url", &url]);
    let id = fleet.drive(&[
        "--goal",
        "Write the lexer",
        "--project",
        "lexer",
        "--plan",
        &fleet.plan(&[
            "Tokenize integers",
            "Test the tokenizer",
            "Handle negatives",
        ]),
        "--turns",
        "3",
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(90), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    assert_eq!(show["session"]["plan_only"], false);
    let t = turns(&show);
    assert_eq!(t.len(), 3, "{show:#}");
    assert_eq!(t[0]["source"], "model");
    assert_eq!(
        t[0]["prompt"],
        "Add a tokenizer for integer literals in src/lexer.rs."
    );
    assert_eq!(t[1]["source"], "regenerated", "{:#}", t[1]);
    assert_eq!(
        t[1]["prompt"],
        "Write unit tests for the integer tokenizer in tests/lexer.rs."
    );
    assert!(
        t[1]["gate"].as_array().is_some_and(|g| g
            .iter()
            .any(|l| l.as_str().unwrap_or("").contains("status"))),
        "the refusal is on record: {:#}",
        t[1]
    );
    assert_eq!(
        show["record"]["rejections"]["status"], 1,
        "{:#}",
        show["record"]
    );
    // The regeneration request carried the reason and the rejected text back to the model.
    let requests = model.requests();
    assert!(
        requests
            .iter()
            .any(|r| user_text(r).contains("What's the status? Are you done yet?")),
        "the rejected text went back to the model"
    );
    // Every typed prompt reached the pane exactly once.
    let received = fleet.received();
    let typed: Vec<String> = t
        .iter()
        .map(|x| x["prompt"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(received, typed);
    // The anti-repeat fence lists earlier prompts in later requests.
    let last = requests.last().map(user_text).unwrap_or_default();
    assert!(
        last.contains("Add a tokenizer for integer literals"),
        "fence missing from:\n{last}"
    );
    rt.block_on(model.shutdown());
}

#[test]
fn bad_model_bodies_fall_back_to_the_plan_without_a_crash() {
    let rt = stub_runtime();
    let script = StubScript::replies([
        StubReply::Malformed,
        StubReply::EmptyChoices,
        StubReply::huge(3 << 20, true),
        StubReply::status(500),
    ])
    .then(StubReply::Malformed);
    let model = rt.block_on(StubModel::start(script)).expect("stub model");
    let url = model.base_url();
    let fleet = Fleet::start_with(Some(FAST), &[], &["--model-url", &url]);
    let id = fleet.drive(&[
        "--goal",
        "Write the lexer",
        "--plan",
        &fleet.plan(&[
            "Tokenize integer literals in src/lexer.rs.",
            "Document the lexer's token kinds in README.md.",
            "Add a criterion benchmark for lexing a 1 MB file.",
        ]),
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(90), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    let t = turns(&show);
    assert_eq!(t.len(), 3);
    for turn in &t {
        assert_eq!(turn["source"], "plan", "{turn:#}");
        let gate = turn["gate"].to_string();
        assert!(
            gate.contains("model error"),
            "the model failure is recorded: {turn:#}"
        );
    }
    assert!(show["record"]["model_errors"].as_u64().unwrap_or(0) >= 3);
    assert_eq!(fleet.received().len(), 3);
    rt.block_on(model.shutdown());
}

#[test]
fn the_model_plans_and_auto_detects_when_asked() {
    let rt = stub_runtime();
    let model = rt
        .block_on(StubModel::start(StubScript::echo()))
        .expect("stub model");
    let url = model.base_url();
    let fleet = Fleet::start_with(Some(FAST), &[], &["--model-url", &url]);
    let id = fleet.drive(&["--auto-detect", "--turns", "2"]);
    let show = fleet.wait_status(&id, Duration::from_secs(90), |s| {
        s != "running" && s != "waiting"
    });
    let rec = &show["record"];
    assert!(!rec["project"].as_str().unwrap_or("").is_empty(), "{rec:#}");
    assert!(!rec["goal"].as_str().unwrap_or("").is_empty(), "{rec:#}");
    let tasks = rec["tasks"]["tasks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        (5..=8).contains(&tasks.len()),
        "a 5-8 step plan from the model: {rec:#}"
    );
    assert_eq!(turns(&show).len(), 2);
    let received = fleet.received();
    assert_eq!(
        received.iter().collect::<HashSet<_>>().len(),
        received.len()
    );
    rt.block_on(model.shutdown());
}

#[test]
fn operator_commands_around_a_live_session() {
    let fleet = Fleet::start_with(
        Some(r#"{"default": {"work_ms": 400, "reply": {"answer": "Done: {prompt}"}}}"#),
        &[],
        &[],
    );
    let steps: Vec<String> = (1..=40)
        .map(|i| format!("Implement parser rule number {i} with a test."))
        .collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--project",
        "parser",
        "--plan",
        &fleet.plan(&steps),
    ]);
    wait_for(Duration::from_secs(30), || {
        (fleet.received().len() >= 2).then_some(())
    })
    .expect("two turns");

    let paused = fleet.ctl(&["pause", &id, "--json"]);
    assert_eq!(paused.code, 0, "{paused:?}");
    assert_eq!(paused.json()["status"], "paused");
    let n = fleet.received().len();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        fleet.received().len() <= n + 1,
        "a paused session keeps typing"
    );

    let sessions = fleet.ctl(&["sessions", "--json"]);
    assert_eq!(sessions.code, 0);
    assert!(sessions
        .json()
        .as_array()
        .is_some_and(|a| a.iter().any(|s| s["id"] == id.as_str())));

    let ctx = fleet.ctl(&["context", &id, "--json"]);
    assert_eq!(ctx.code, 0, "{ctx:?}");
    let c = ctx.json();
    let messages = c["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        messages.first().map(|m| m["role"].clone()),
        Some("system".into())
    );
    assert!(
        c["estimated_tokens"].as_u64().unwrap_or(u64::MAX) <= c["budget"].as_u64().unwrap_or(0)
    );
    let user = messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or(""))
        .collect::<String>();
    assert!(user.contains("parser"), "the brief names the project");

    let resumed = fleet.ctl(&["resume", &id, "--json"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    wait_for(Duration::from_secs(30), || {
        (fleet.received().len() >= n + 2).then_some(())
    })
    .expect("typing again after resume");

    let logs = fleet.ctl(&["logs", &id]);
    assert_eq!(logs.code, 0);
    assert!(logs.stdout.contains("turn   1"), "{logs:?}");

    let stop = fleet.ctl(&["stop", &id]);
    assert_eq!(stop.code, 0);
    let show = fleet.wait_status(&id, Duration::from_secs(10), |s| s == "stopped");
    assert!(
        show["record"]["summary_line"]
            .as_str()
            .unwrap_or("")
            .contains("turns"),
        "{show:#}"
    );
    // Follow on an ended session prints the end and exits non-zero (not done).
    let follow = fleet.ctl(&["logs", "-f", &id]);
    assert_eq!(follow.code, 1, "{follow:?}");
    assert!(follow.stdout.contains("session ended"), "{follow:?}");

    // A stopped session picks up where it left off with --resume, for N more turns.
    let before = turns(&fleet.show(&id)).len();
    let resumed = fleet.ctl(&[
        "drive",
        "mac2",
        &fleet.pane,
        "--resume",
        &id,
        "--turns",
        "2",
        "--json",
    ]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert_eq!(resumed.json()["id"], id.as_str(), "the same session");
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| s == "done");
    let after = turns(&show);
    assert_eq!(after.len(), before + 2, "{show:#}");
    let received = fleet.received();
    assert_eq!(
        received.iter().collect::<HashSet<_>>().len(),
        received.len(),
        "no prompt twice"
    );
}

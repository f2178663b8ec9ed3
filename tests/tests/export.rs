//! `karl-ctl export` checked on the data, not only the format: a session driven by a
//! stub twin that proposes bad candidates (status spam, destructive commands), with a
//! prompt that ends in an API error, an operator who types into the pane and one who
//! stops the session mid-turn — karl-coord, karl-agent and the stand-in as real
//! processes. The export must hold exactly the examples and pairs those turns earn, each
//! with the very messages the twin received, and no fallback or overridden turn.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use karl_tests::harness::{read_jsonl, stub_runtime, turns, wait_for, Fleet};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};
use serde_json::Value;

/// The stand-in: an API error for the test-suite prompt, a long turn for the refactor
/// (so the operator can stop it mid-turn), neutral answers otherwise (no "done", which
/// would complete a task).
const STANDIN: &str = r#"{
  "turns": [
    {"match": "whole test suite", "work_ms": 250, "reply": {"error": "500 Internal server error"}},
    {"match": "Refactor the router", "work_ms": 30000, "reply": {"answer": "Notes: {prompt}"}}
  ],
  "default": {"work_ms": 250, "reply": {"answer": "Notes: {prompt}"}}
}"#;

/// What the twin answers, request by request.
const TWIN: [&str; 9] = [
    // Turn 1: typed, progress: an SFT example.
    "Read src/main.rs and list the HTTP routes it registers.",
    // Turn 2: status spam refused, then a regenerated prompt that works.
    "What's the status? Are you done yet?",
    "Add a GET /health route in src/main.rs that returns 200 with the body ok.",
    // Turn 3: typed, ends in an API error.
    "Run the whole test suite with cargo test and paste every failure.",
    // Turn 4: three refusals; a fallback (plan step or escape prompt) is typed.
    "Delete the target and src directories with rm -rf and start over from scratch.",
    "Are you done yet? Give me a summary of where things stand.",
    "Reset the branch with git reset --hard origin/main and force-push it.",
    // Turn 5: typed and works, but the operator then types into the pane.
    "Write a unit test for the /health route in tests/health.rs.",
    // Turn 6 (asked while the operator types): stopped by the operator mid-turn.
    "Refactor the router so every route lives in src/routes.rs.",
];

fn assistant(text: &str) -> Value {
    serde_json::json!([{"role": "assistant", "content": text}])
}

/// The layout trainers' dataset loaders read: every row has the same keys and types.
fn check_sft_schema(rows: &[Value]) {
    for r in rows {
        let obj = r.as_object().expect("an object per line");
        assert_eq!(obj.keys().collect::<Vec<_>>(), ["messages"], "{r}");
        let m = r["messages"].as_array().expect("messages is a list");
        assert!(m.len() >= 3, "{r}");
        assert_eq!(m[0]["role"], "system");
        assert_eq!(m.last().unwrap()["role"], "assistant");
        for msg in m {
            assert_eq!(msg.as_object().unwrap().len(), 2, "{msg}");
            assert!(["system", "user", "assistant"].contains(&msg["role"].as_str().unwrap()));
            assert!(msg["content"].is_string(), "{msg}");
        }
    }
}

fn check_pair_schema(rows: &[Value]) {
    for r in rows {
        let mut keys: Vec<&String> = r.as_object().expect("an object per line").keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["chosen", "kind", "prompt", "reason", "rejected", "rules"],
            "{r}"
        );
        assert!(r["prompt"].as_array().is_some_and(|p| p.len() >= 2), "{r}");
        for side in ["chosen", "rejected"] {
            let s = r[side].as_array().expect("a message list");
            assert_eq!(s.len(), 1, "{r}");
            assert_eq!(s[0]["role"], "assistant");
        }
        assert!(r["reason"].as_str().is_some_and(|s| !s.is_empty()), "{r}");
        assert!(r["rules"].as_array().is_some_and(|s| !s.is_empty()), "{r}");
        assert!(
            ["gate", "outcome"].contains(&r["kind"].as_str().unwrap()),
            "{r}"
        );
    }
}

#[test]
fn export_holds_exactly_the_examples_and_pairs_the_session_earned() {
    let rt = stub_runtime();
    let mut script = StubScript::replies(TWIN[..8].iter().map(|t| StubReply::text(*t)));
    // Slow, so the operator can type while turn 6's question is out.
    script = script.then(StubReply::slow(4_000, TWIN[8]));
    let model = rt.block_on(StubModel::start(script)).expect("stub model");
    let url = model.base_url();
    let fleet = Fleet::start_with(Some(STANDIN), &[], &["--model-url", &url]);
    let id = fleet.drive(&[
        "--goal",
        "Add a /health endpoint to the server, with a test and docs",
        "--project",
        "health",
        "--plan",
        &fleet.plan(&[
            "Map the server's request handlers",
            "Add the health check endpoint",
            "Document the endpoint in README.md",
        ]),
        "--turns",
        "6",
    ]);

    // Turn 6's question is out: the pane is idle after turn 5. The operator types.
    let asked = wait_for(Duration::from_secs(90), || {
        (model.request_count() >= 9).then_some(())
    });
    assert!(asked.is_some(), "turn 6 never asked: {:#}", fleet.show(&id));
    let sent = fleet.ctl(&[
        "send",
        "mac2",
        &fleet.pane,
        "Also log each request's path at debug level.",
    ]);
    assert_eq!(sent.code, 0, "{sent:?}");
    // Turn 6 is typed and the stand-in works on it for 30 s: stop it mid-turn.
    let working = wait_for(Duration::from_secs(30), || {
        let s = fleet.show(&id);
        (turns(&s).len() == 6 && s["session"]["status"] == "running").then_some(())
    });
    assert!(
        working.is_some(),
        "turn 6 never typed: {:#}",
        fleet.show(&id)
    );
    std::thread::sleep(Duration::from_millis(500));
    let stop = fleet.ctl(&["stop", &id]);
    assert_eq!(stop.code, 0, "{stop:?}");
    let show = fleet.wait_status(&id, Duration::from_secs(20), |s| s == "stopped");
    let t = turns(&show);
    assert_eq!(t.len(), 6, "{show:#}");
    let outcomes: Vec<&str> = t.iter().map(|x| x["outcome"].as_str().unwrap()).collect();
    assert_eq!(
        &outcomes[..5],
        ["progress", "progress", "error", "progress", "progress"],
        "{show:#}"
    );
    assert!(
        ["plan", "escape"].contains(&t[3]["source"].as_str().unwrap()),
        "turn 4 is a fallback: {:#}",
        t[3]
    );
    let typed: Vec<&str> = t.iter().map(|x| x["prompt"].as_str().unwrap()).collect();
    assert_eq!(typed[0], TWIN[0]);
    assert_eq!(typed[1], TWIN[2]);
    assert_eq!(typed[4], TWIN[7]);
    assert_eq!(typed[5], TWIN[8]);

    // Export everything, as the operator would.
    let out_dir = fleet.scratch.path("training");
    let sft = out_dir.join("sft.jsonl");
    let pairs = out_dir.join("pairs.jsonl");
    let out = fleet.ctl(&[
        "--json",
        "export",
        "--sft",
        sft.to_str().unwrap(),
        "--pairs",
        pairs.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    let summary = out.json();
    let sft_rows = read_jsonl(&sft);
    let pair_rows = read_jsonl(&pairs);
    check_sft_schema(&sft_rows);
    check_pair_schema(&pair_rows);

    // Every request the twin got, by the reply it gave (the stub answers in order).
    let requests: Vec<Value> = model
        .requests()
        .iter()
        .map(|r| r["messages"].clone())
        .collect();
    assert_eq!(
        requests.len(),
        9,
        "one request per answer, no second opinions"
    );
    let asked_for = |answer: &str| -> Value {
        let i = TWIN.iter().position(|t| *t == answer).unwrap();
        requests[i].clone()
    };

    // SFT: turns 1 and 2 only — not the error (3), the fallback (4), the turn the
    // operator typed over (5) or the one they stopped (6). Each is the exact messages.
    let with_answer = |answer: &str| -> Value {
        let mut m = asked_for(answer).as_array().unwrap().clone();
        m.push(serde_json::json!({"role": "assistant", "content": answer}));
        Value::Array(m)
    };
    let got: Vec<Value> = sft_rows.iter().map(|r| r["messages"].clone()).collect();
    assert_eq!(got, [with_answer(TWIN[0]), with_answer(TWIN[2])]);

    // Pairs: turn 2's status refusal against what turn 2 typed; turn 4's three refusals
    // against its fallback; turn 3's failed prompt against turn 4's fallback (the same
    // task). Nothing from turns 5 and 6.
    let pair = |prompt: Value, chosen: &str, rejected: &str, rules: &[&str], kind: &str| {
        (
            prompt,
            assistant(chosen),
            assistant(rejected),
            rules.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            kind.to_string(),
        )
    };
    let want = vec![
        pair(asked_for(TWIN[1]), typed[1], TWIN[1], &["status"], "gate"),
        pair(
            asked_for(TWIN[4]),
            typed[3],
            TWIN[4],
            &["destructive"],
            "gate",
        ),
        pair(asked_for(TWIN[5]), typed[3], TWIN[5], &["status"], "gate"),
        pair(
            asked_for(TWIN[6]),
            typed[3],
            TWIN[6],
            &["destructive"],
            "gate",
        ),
        pair(asked_for(TWIN[3]), typed[3], TWIN[3], &["error"], "outcome"),
    ];
    let got: Vec<_> = pair_rows
        .iter()
        .map(|r| {
            (
                r["prompt"].clone(),
                r["chosen"].clone(),
                r["rejected"].clone(),
                r["rules"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect::<Vec<_>>(),
                r["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(got.len(), want.len(), "{pair_rows:#?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert!(pair_rows[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("status:"));
    assert!(pair_rows[4]["reason"]
        .as_str()
        .unwrap()
        .contains("turn 3 ended in an error"));

    // The summary counts what was written and why the rest was not.
    assert_eq!(summary["sessions"], 1, "{summary:#}");
    assert_eq!(summary["turns"], 6);
    assert_eq!(summary["sft_train"], 2);
    assert_eq!(summary["pairs_train"], 5);
    assert_eq!(summary["pairs_by_reason"]["destructive"], 2);
    assert_eq!(summary["pairs_by_reason"]["status"], 2);
    assert_eq!(summary["pairs_by_reason"]["error"], 1);
    assert_eq!(
        summary["skipped"]["overridden by the operator"], 2,
        "{summary:#}"
    );
    assert_eq!(summary["skipped"]["ended in an error"], 1);
    assert_eq!(summary["files"].as_array().unwrap().len(), 2);

    // Filters and the split: another project exports nothing; --split sends the one
    // session wholly to one side; a bad filter is refused and leaves the files alone.
    let other = fleet.ctl(&[
        "--json",
        "export",
        "--sft",
        sft.to_str().unwrap(),
        "--project",
        "nope",
    ]);
    assert_eq!(other.code, 0, "{other:?}");
    assert_eq!(other.json()["sessions"], 0);
    assert_eq!(
        std::fs::read_to_string(&sft).unwrap(),
        "",
        "an empty export writes an empty file"
    );
    let split_dir = fleet.scratch.path("split");
    let split = fleet.ctl(&[
        "--json",
        "export",
        "--sft",
        &format!("{}/", split_dir.display()),
        "--split",
        "0.5",
    ]);
    assert_eq!(split.code, 0, "{split:?}");
    let (train, valid) = (
        read_jsonl(&split_dir.join("train.jsonl")),
        read_jsonl(&split_dir.join("valid.jsonl")),
    );
    assert_eq!(train.len() + valid.len(), 2);
    assert!(
        train.is_empty() || valid.is_empty(),
        "one session, one side"
    );
    // Two spellings of one directory: refused before anything is written there.
    let d = split_dir.display().to_string();
    let clash = fleet.ctl(&[
        "export",
        "--sft",
        &format!("{d}/"),
        "--pairs",
        &format!("{d}/./"),
    ]);
    assert_ne!(clash.code, 0);
    assert!(clash.stderr.contains("would both write"), "{clash:?}");
    std::fs::write(&pairs, "kept\n").unwrap();
    let bad = fleet.ctl(&[
        "export",
        "--pairs",
        pairs.to_str().unwrap(),
        "--since",
        "yesterday",
    ]);
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("is not a time"), "{bad:?}");
    assert_eq!(std::fs::read_to_string(&pairs).unwrap(), "kept\n");
    rt.block_on(model.shutdown());
}

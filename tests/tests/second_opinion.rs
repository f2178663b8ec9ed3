//! The gate's second opinion from a real model server over loopback HTTP: `karl-ctl
//! validate --model-url` asks the stub model about a prompt the gate passes in doubt, and
//! only about such a prompt; "destructive", an unreadable answer or a failed call block.
#![allow(clippy::unwrap_used)]

use karl_tests::harness::{ctl, Scratch};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};

/// The rules pass it: its dangerous command is one the wording forbids.
const DOUBTFUL: &str = "Make sure the cleanup script never runs `rm -rf /`; delete only target/.";

fn validate(scratch: &Scratch, url: &str, prompt: &str) -> karl_tests::harness::CtlOut {
    validate_asking(scratch, url, None, prompt)
}

/// `validate` with the second opinion asked of `model` by name, when given.
fn validate_asking(
    scratch: &Scratch,
    url: &str,
    model: Option<&str>,
    prompt: &str,
) -> karl_tests::harness::CtlOut {
    let mut args = vec![
        "--json",
        "validate",
        "--gate-model",
        "off",
        "--model-url",
        url,
    ];
    if let Some(m) = model {
        args.extend(["--model", m]);
    }
    args.push(prompt);
    ctl(scratch, None, None, &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_asks_the_model_only_in_doubt_and_blocks_unless_it_says_safe() {
    let scratch = Scratch::new();
    let stub = StubModel::start(StubScript::replies([
        StubReply::text("{\"destructive\": false}"),
        StubReply::text("```json\n{\"destructive\": true}\n```"),
        StubReply::text("I think this is fine."),
        StubReply::status(500),
    ]))
    .await
    .unwrap();
    let url = stub.base_url();

    // Plain work: no doubt, no call.
    let out = validate(&scratch, &url, "Add a --verbose flag to the CLI.");
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(stub.request_count(), 0);

    // Safe: passes, with the doubt and the opinion shown.
    let out = validate(&scratch, &url, DOUBTFUL);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    assert!(v["doubt"].as_str().unwrap().contains("rm -rf /"), "{v:#}");
    assert_eq!(v["second_opinion"], "not destructive");
    let asked = &stub.requests()[0];
    assert_eq!(asked["temperature"], 0.0);
    assert!(asked.get("model").is_none(), "{asked:#}");
    assert!(asked["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("never runs `rm -rf /`"));

    // Destructive, unreadable, failed: blocked as destructive.
    for want in [
        "the model judges it destructive",
        "held no JSON object",
        "no second opinion",
    ] {
        let out = validate(&scratch, &url, DOUBTFUL);
        assert_eq!(out.code, 1, "{want}: {out:?}");
        let v = out.json();
        assert_eq!(v["action"], "block", "{v:#}");
        let reason = v["reasons"][0]["detail"].as_str().unwrap();
        assert!(reason.contains("second opinion"), "{reason}");
        assert!(
            v["second_opinion"].as_str().unwrap().contains(want) || reason.contains(want),
            "{want}: {v:#}"
        );
    }
    assert_eq!(stub.request_count(), 4);

    // A named model is asked for by name.
    let out = validate_asking(&scratch, &url, Some("qwen-judge"), DOUBTFUL);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(stub.requests()[4]["model"], "qwen-judge");

    // Nothing listening: a failed call, so blocked.
    let out = validate(&scratch, "http://127.0.0.1:9/v1", DOUBTFUL);
    assert_eq!(out.code, 1, "{out:?}");
    stub.shutdown().await;
}

#[test]
fn without_a_model_url_a_prompt_in_doubt_passes_and_says_so() {
    let scratch = Scratch::new();
    let out = ctl(
        &scratch,
        None,
        None,
        &["validate", "--gate-model", "off", DOUBTFUL],
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("in doubt:"), "{out:?}");
    assert!(out.stdout.contains("--model-url"), "{out:?}");
}

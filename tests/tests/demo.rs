//! `karl-ctl demo`, the README's first command, run as a newcomer runs it: the real
//! karl-ctl, karl-coord with its in-process agent, a private tmux server and the stand-in.
//! With no model it plays the built-in scripted twin, whose bad candidates the gate must
//! refuse on screen; with the test twin's URL it drives with the real model.

use std::process::Command;

use karl_tests::harness::{bin, free_port, read_jsonl, Scratch};
use karl_tests::twin::TwinServer;

fn demo(model_url: &str) -> (bool, String, String) {
    let out = Command::new(bin("karl-ctl"))
        .args(["demo", "--model-url", model_url])
        .env_remove("TMUX")
        .env_remove("KARL_MODEL_URL")
        .output()
        .unwrap_or_else(|e| panic!("run karl-ctl demo: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn with_no_model_the_scripted_twin_shows_the_gate_at_work() {
    let url = format!("http://127.0.0.1:{}/v1", free_port());
    let (ok, stdout, stderr) = demo(&url);
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    assert!(stderr.contains("built-in script"), "{stderr}");
    assert!(
        stderr.contains("karl demo: dashboard at http://127.0.0.1:"),
        "{stderr}"
    );
    // The status question, the repeat and the destructive command were each refused, on
    // screen, and the plan step took the turn whose three answers were all refused.
    for shown in [
        "blocked: status",
        "blocked: exact_repeat",
        "blocked: destructive",
        "plan step",
        "gate: pass (attempt 1)",
        "gate: pass (attempt 2)",
        "asking for a second opinion",
        "second opinion: not destructive",
    ] {
        assert!(stdout.contains(shown), "{shown:?} missing from:\n{stdout}");
    }
    // None of the refused candidates reached the pane.
    for refused in [
        "Are you done yet?",
        "git reset --hard",
        "where things stand",
    ] {
        let typed = stdout
            .lines()
            .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with("gate:"))
            .any(|l| l.contains(refused));
        assert!(!typed, "{refused:?} was typed:\n{stdout}");
    }
    assert!(stderr.contains("received 4 prompt(s)"), "{stderr}");

    // The session became training data: each refused candidate against what was typed.
    let (sft, pairs) = training(&stderr);
    let mut rejected: Vec<(String, String)> = pairs
        .iter()
        .map(|p| {
            (
                p["rules"][0].as_str().unwrap_or("").to_string(),
                p["rejected"][0]["content"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    rejected.sort();
    assert_eq!(
        rejected.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(),
        ["destructive", "exact_repeat", "status", "status"],
        "{pairs:#?}"
    );
    assert!(rejected[0].1.contains("git reset --hard"), "{rejected:?}");
    assert!(!sft.is_empty(), "no SFT example from the demo");
    for ex in &sft {
        let m = ex["messages"].as_array().expect("messages");
        let typed = m.last().and_then(|x| x["content"].as_str()).unwrap_or("");
        assert!(
            stdout.contains(&format!("  {typed}")),
            "{typed:?} is not a prompt the demo typed"
        );
        // (A repeat is refused only where it repeats: turn 1 typed it.)
        assert!(rejected
            .iter()
            .all(|(rule, r)| rule == "exact_repeat" || r != typed));
    }
}

/// The demo's exported files, found from its "training data in DIR" line.
fn training(stderr: &str) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let dir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("karl demo: training data in "))
        .and_then(|l| l.split(": ").next())
        .unwrap_or_else(|| panic!("no training data line in:\n{stderr}"));
    let read = |name: &str| read_jsonl(&std::path::Path::new(dir).join(name));
    (read("sft.jsonl"), read("pairs.jsonl"))
}

#[test]
fn with_the_test_twin_the_demo_drives_with_a_real_model() {
    let scratch = Scratch::new();
    let twin = TwinServer::start(&scratch.path("twin.log")).unwrap_or_else(|e| panic!("{e}"));
    let (ok, stdout, stderr) = demo(twin.base_url());
    assert!(ok, "demo failed:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("the twin is the model at {}", twin.base_url())),
        "{stderr}"
    );
    assert!(stderr.contains("received 4 prompt(s)"), "{stderr}");
    // A real model's session exports too (what it earns depends on the model).
    let (sft, pairs) = training(&stderr);
    assert!(sft.iter().all(|x| x["messages"].is_array()), "{sft:#?}");
    assert!(pairs.iter().all(|x| x["prompt"].is_array()), "{pairs:#?}");
}

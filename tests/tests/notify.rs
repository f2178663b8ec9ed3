//! Notifications end to end: karl-coord with a `[notify]` table, its agent and the
//! stand-in in a real tmux pane, and every sink kind pointed at something real on this
//! machine — a loopback HTTP receiver for the webhook, Slack, Discord and ntfy sinks, a
//! shell command, and for the macOS sink the real agent running a recorder in place of
//! `osascript` (so its command line is checked without a Mac).
//!
//! A permission under the `escalate` policy reaches the sinks that want it (and only
//! those), a failing sink is retried until it answers, a sink that hangs or refuses never
//! holds the session up, the session's end and a lost agent are told too, and `karl-ctl
//! notify test` reaches one sink or all and reports failures.

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use karl_tests::harness::{wait_until, Fleet, TEST_COORD_CONFIG};
use karl_tests::receiver::Receiver;

/// A recorder standing in for `osascript`: each call appends its argv, one argument per
/// line, then a `--` line.
fn recorder(dir: &Path) -> (String, std::path::PathBuf) {
    let out = dir.join("osascript-calls.txt");
    let script = dir.join("fake-osascript");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '{0}'\nprintf -- '--\\n' >> '{0}'\n",
            out.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (script.display().to_string(), out)
}

/// Calls the recorder finished (a call is written argument by argument, then `--`), each
/// as its argv.
fn recorded(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut calls: Vec<Vec<String>> = text
        .split("--\n")
        .map(|c| c.lines().map(String::from).collect())
        .collect();
    // What follows the last `--` is a call still being written (or nothing).
    calls.pop();
    calls
}

#[test]
fn every_sink_hears_what_it_asked_for_and_no_sink_holds_a_session_up() {
    let rx = Receiver::start().unwrap();
    rx.answer("/flaky", &[500, 503, 200]);
    // Accepts connections (the kernel's backlog) and never answers: each try times out.
    let hole = TcpListener::bind("127.0.0.1:0").unwrap();
    let hole_url = format!("http://{}/hang", hole.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (fake_osascript, calls) = recorder(dir.path());
    let cmd_out = dir.path().join("command");
    std::fs::create_dir(&cmd_out).unwrap();
    let config = format!(
        r#"{TEST_COORD_CONFIG}
[notify]
agent_lost_secs = 1

[[notify.sink]]
name = "hook"
kind = "webhook"
url = "{hook}"
token = "s3cret"
headers = {{ "X-Team" = "infra" }}

[[notify.sink]]
kind = "slack"
url = "{slack}"
events = ["permission", "done"]

[[notify.sink]]
kind = "discord"
url = "{discord}"
events = ["done"]

[[notify.sink]]
name = "phone"
kind = "ntfy"
url = "{ntfy}"
events = ["permission"]

[[notify.sink]]
name = "flaky"
kind = "webhook"
url = "{flaky}"
events = ["permission"]

[[notify.sink]]
name = "refused"
kind = "webhook"
url = "http://127.0.0.1:9/nobody"
retries = 1

[[notify.sink]]
name = "hang"
kind = "webhook"
url = "{hole_url}"

[[notify.sink]]
name = "script"
kind = "command"
command = ["sh", "-c", "cat > '{cmd_dir}/'\"$KARL_NOTICE_KIND\".json"]

[[notify.sink]]
name = "mac"
kind = "macos"
events = ["permission"]
"#,
        hook = rx.url("/hook"),
        slack = rx.url("/slack"),
        discord = rx.url("/discord"),
        ntfy = rx.url("/ntfy/karl"),
        flaky = rx.url("/flaky"),
        cmd_dir = cmd_out.display(),
    );
    let script = serde_json::json!({
        "turns": [{"work_ms": 200, "reply": {"permission": {"tool": "bash", "command": "cargo test --workspace",
                   "description": "Run it", "answer": "Ran it."}}}],
        "default": {"work_ms": 200, "reply": {"answer": "Done: {prompt}"}}
    });
    let mut fleet = Fleet::start_with_config_env(
        Some(&script.to_string()),
        &config,
        &[("KARL_NOTIFIER", fake_osascript.as_str())],
    );
    let plan = fleet.plan_file(2);
    let id = fleet.drive(&[
        "--goal",
        "Test it",
        "--plan",
        &plan,
        "--permissions",
        "escalate",
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| s == "escalated");
    let pane = show["session"]["target"].as_str().unwrap().to_string();

    // The generic webhook: the notice as JSON, with its token and headers.
    let hook = wait_until("the webhook's permission notice", 10, || {
        rx.at("/hook")
            .into_iter()
            .find(|r| r.json()["kind"] == "permission")
    });
    let n = hook.json();
    assert_eq!(n["session"], id.as_str());
    assert_eq!(n["machine"], "mac2");
    assert_eq!(n["pane"], pane.as_str());
    assert!(
        n["text"]
            .as_str()
            .unwrap()
            .contains("cargo test --workspace"),
        "{n}"
    );
    assert!(
        n["text"]
            .as_str()
            .unwrap()
            .contains(&format!("karl-ctl approve|deny {id}")),
        "{n}"
    );
    assert_eq!(hook.headers["authorization"], "Bearer s3cret");
    assert_eq!(hook.headers["x-team"], "infra");
    assert_eq!(hook.headers["content-type"], "application/json");

    // Slack and ntfy in their own shapes; Discord only wants `done`.
    let slack = wait_until("slack", 10, || rx.at("/slack").pop());
    let text = slack.json()["text"].as_str().unwrap().to_string();
    assert!(text.starts_with("*KARL: permission waiting — "), "{text}");
    let ntfy = wait_until("ntfy", 10, || rx.at("/ntfy/karl").pop());
    assert!(
        ntfy.body.contains("cargo test --workspace"),
        "{}",
        ntfy.body
    );
    assert!(ntfy.headers["title"].starts_with("KARL: permission waiting - "));
    assert_eq!(ntfy.headers["priority"], "high");
    assert_eq!(ntfy.headers["tags"], "permission");

    // The command sink: the notice on stdin, the kind in the environment.
    let file = cmd_out.join("permission.json");
    let from_cmd = wait_until("the command sink's file", 10, || {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    });
    assert_eq!(from_cmd["session"], id.as_str());

    // The macOS sink, through the agent on the pane's Mac: one script argument, quoted.
    let call = wait_until("the agent's notifier", 10, || recorded(&calls).pop());
    assert_eq!(call.len(), 2, "{call:?}");
    assert_eq!(call[0], "-e");
    assert!(
        call[1].starts_with("display notification \"Bash command cargo test --workspace"),
        "{call:?}"
    );
    assert!(
        call[1].contains("with title \"KARL: permission waiting — "),
        "{call:?}"
    );
    assert!(
        call[1].ends_with(&format!("subtitle \"mac2 {pane}\"")),
        "{call:?}"
    );

    // Two failures, then through: three tries, one second and two apart.
    let tries = wait_until("the flaky sink's third try", 15, || {
        let got = rx.at("/flaky");
        (got.len() >= 3).then_some(got)
    });
    assert!(tries.iter().all(|r| r.json()["kind"] == "permission"));
    let gaps: Vec<Duration> = tries.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(
        gaps[0] >= Duration::from_millis(900) && gaps[1] >= Duration::from_millis(1900),
        "retries came {gaps:?} apart, not 1 s then 2 s"
    );
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(rx.at("/flaky").len(), 3, "a try after the success");

    // The operator approves; with the `hang` sink stuck in 10 s timeouts and `refused`
    // failing, the session still runs its plan to the end at its own pace.
    let approved = Instant::now();
    let out = fleet.ctl(&["approve", &id]);
    assert_eq!(out.code, 0, "{out:?}");
    fleet.wait_status(&id, Duration::from_secs(90), |s| s == "done");
    let took = approved.elapsed();
    // Held up by `hang`, each of its notices would cost 10 s a try, six tries each.
    assert!(
        took < Duration::from_secs(40),
        "the session took {took:?} after approval: a sink held it up"
    );
    let done = wait_until("discord's done notice", 10, || rx.at("/discord").pop());
    let content = done.json()["content"].as_str().unwrap().to_string();
    assert!(content.starts_with("**KARL: done — "), "{content}");
    assert_eq!(
        done.json()["allowed_mentions"]["parse"],
        serde_json::json!([])
    );
    wait_until("slack's done notice", 10, || {
        (rx.at("/slack").len() == 2).then_some(())
    });
    wait_until("the webhook's done notice", 10, || {
        rx.at("/hook")
            .into_iter()
            .find(|r| r.json()["kind"] == "done")
    });

    // Each moment once: the permission notice reached the webhook once, however many
    // times the escalated record was saved.
    let kinds: Vec<String> = rx
        .at("/hook")
        .iter()
        .map(|r| r.json()["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["permission", "done"], "{kinds:?}");
    assert_eq!(
        recorded(&calls).len(),
        1,
        "the macOS sink wants permission only"
    );

    // The agent goes away for longer than agent_lost_secs: the webhook hears of it.
    fleet.agent.kill();
    let lost = wait_until("the agent-lost notice", 15, || {
        rx.at("/hook")
            .into_iter()
            .find(|r| r.json()["kind"] == "agent_lost")
    });
    let n = lost.json();
    assert_eq!(n["machine"], "mac2");
    assert!(
        n["text"]
            .as_str()
            .unwrap()
            .starts_with("karl-agent on mac2 has been disconnected for "),
        "{n}"
    );
    fleet.restart_agent_env(&[("KARL_NOTIFIER", fake_osascript.as_str())]);

    // `notify test`: one sink by name, every sink, and the failures reported.
    let out = fleet.ctl(&["notify", "test", "slack", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let r = &out.json()[0];
    assert_eq!(
        (r["sink"].as_str(), r["ok"].as_bool()),
        (Some("slack"), Some(true)),
        "{r}"
    );
    let last = rx.at("/slack").pop().unwrap();
    assert!(last.json()["text"]
        .as_str()
        .unwrap()
        .starts_with("*KARL: test notification*"));

    wait_until("the agent back", 15, || {
        let out = fleet.ctl(&["notify", "test", "mac"]);
        (out.code == 0).then_some(())
    });
    let call = recorded(&calls).pop().unwrap();
    assert!(
        call[1].contains("with title \"KARL: test notification\""),
        "{call:?}"
    );

    let out = fleet.ctl(&["notify", "test", "refused"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains("FAILED: POST to 127.0.0.1 failed"),
        "{out:?}"
    );
    // The URL's path (a webhook's secret) is in neither the answer nor the log.
    assert!(!out.stdout.contains("/nobody"), "{out:?}");
    assert!(!fleet.coord.proc.log_text().contains("/nobody"));

    let out = fleet.ctl(&["notify", "test", "nope"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains("no notification sink is named \"nope\"")
            && out
                .stderr
                .contains("hook, slack, discord, phone, flaky, refused, hang, script, mac"),
        "{out:?}"
    );

    // Every sink at once; the hung one times out in its own time, the rest answer.
    let started = Instant::now();
    let out = fleet.ctl(&["notify", "test", "--json"]);
    let all = out.json();
    let results = all.as_array().unwrap();
    assert_eq!(results.len(), 9, "{all:#}");
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r["ok"] != true)
        .map(|r| r["sink"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["refused", "hang"], "{all:#}");
    assert_eq!(out.code, 1);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "sinks were tried one after another"
    );
    drop(hole);
}

#[test]
fn a_coordinator_with_a_bad_notify_table_says_what_to_fix() {
    let err = karl_tests::harness::coord_refuses_config(
        "[notify]\n[[notify.sink]]\nkind = \"slack\"\nurl = \"hooks.slack.com/services/x\"\n",
    );
    assert!(
        err.contains("[notify]") && err.contains("is not an http:// or https:// URL"),
        "{err}"
    );
}

//! Driven sessions end to end, with real processes: karl-coord and karl-agent on
//! loopback, the stand-in coding agent in a real tmux pane, real sled on disk.
//! The classifier that decides when to type is the real one, reading the stand-in's
//! Claude-style screens.

use std::collections::HashSet;
use std::time::Duration;

use karl_tests::harness::{standin_events, turns, wait_for, Coord, Fleet, FAST_STANDIN};

const FAST: &str = FAST_STANDIN;

#[test]
fn plan_only_session_reaches_its_goal_and_types_each_prompt_once() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let plan = fleet.plan_file(30);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "40",
    ]);
    assert!(id.starts_with("mac2_"), "{id}");
    let show = fleet.wait_status(&id, Duration::from_secs(240), |s| {
        s == "done" || s == "escalated" || s == "failed"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    assert_eq!(show["session"]["plan_only"], true);
    let t = turns(&show);
    assert_eq!(t.len(), 30, "one turn per plan step");
    for (i, turn) in t.iter().enumerate() {
        assert_eq!(turn["n"], i as u64 + 1);
        assert_eq!(turn["source"], "plan");
        assert!(
            turn["inject"]
                .as_str()
                .unwrap_or("")
                .starts_with("submitted"),
            "{turn}"
        );
    }
    // Every typed prompt arrived exactly once, byte for byte, in order.
    let received = fleet.received();
    let typed: Vec<String> = t
        .iter()
        .map(|x| x["prompt"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(received, typed);
    let unique: HashSet<&String> = received.iter().collect();
    assert_eq!(unique.len(), received.len(), "a prompt was typed twice");
}

#[test]
fn dry_run_types_nothing_and_records_a_hundred_turns_consistently() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let plan = fleet.plan_file(120);
    let id = fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "100",
        "--dry-run",
    ]);
    let show = fleet.wait_status(&id, Duration::from_secs(240), |s| {
        s != "running" && s != "waiting"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    let t = turns(&show);
    assert_eq!(t.len(), 100);
    for (i, turn) in t.iter().enumerate() {
        assert_eq!(turn["n"], i as u64 + 1, "turn numbers are contiguous");
        assert_eq!(turn["inject"], "dry-run");
    }
    assert!(fleet.received().is_empty(), "dry run typed into the pane");
    assert_eq!(show["session"]["turns"], 100);
}

#[test]
fn coordinator_sigkill_mid_session_resumes_without_double_typing() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let plan = fleet.plan_file(10);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    // Let a few turns land, then kill -9.
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() >= 3).then_some(())
    })
    .expect("three prompts typed");
    let Fleet { scratch, coord, .. } = &fleet;
    let port: u16 = coord
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let data_dir = coord.data_dir.clone();
    // The coordinator stays owned by `fleet`; it is killed by pid here.
    let pid = coord.proc.pid();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    std::thread::sleep(Duration::from_millis(300));
    let config = fleet.config.display().to_string();
    let restarted = Coord::start_at(
        scratch,
        port,
        &data_dir,
        None,
        &["--config", &config, "--model-url", "http://127.0.0.1:9/v1"],
    );
    let show = wait_for(Duration::from_secs(120), || {
        let out = karl_tests::harness::ctl(
            scratch,
            Some(&restarted.addr),
            None,
            &["show", &id, "--json"],
        );
        (out.code == 0)
            .then(|| out.json())
            .filter(|v| v["session"]["status"] == "done")
    })
    .unwrap_or_else(|| {
        panic!(
            "session did not finish after restart; log:\n{}",
            restarted.proc.log_text()
        )
    });
    let t = turns(&show);
    assert_eq!(t.len(), 10, "{show:#}");
    let received = fleet.received();
    let unique: HashSet<&String> = received.iter().collect();
    assert_eq!(
        unique.len(),
        received.len(),
        "a prompt was typed twice: {received:#?}"
    );
    // Every recorded turn is in the pane (an `unconfirmed` one may or may not be).
    for turn in &t {
        let p = turn["prompt"].as_str().unwrap_or("");
        if turn["inject"]
            .as_str()
            .unwrap_or("")
            .starts_with("submitted")
        {
            assert!(
                received.iter().any(|r| r == p),
                "recorded turn {} not typed",
                turn["n"]
            );
        }
    }
}

#[test]
fn agent_killed_and_restarted_session_continues() {
    let mut fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let plan = fleet.plan_file(6);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() >= 2).then_some(())
    })
    .expect("two prompts");
    fleet.agent.kill();
    fleet.wait_status(&id, Duration::from_secs(20), |s| s == "waiting");
    fleet.restart_agent();
    let show = fleet.wait_status(&id, Duration::from_secs(120), |s| s == "done");
    assert_eq!(turns(&show).len(), 6);
    let received = fleet.received();
    let unique: HashSet<&String> = received.iter().collect();
    assert_eq!(unique.len(), received.len(), "a prompt was typed twice");
}

#[test]
fn a_dialog_is_never_typed_into() {
    let fleet = Fleet::start(&["--dialog"], &[]);
    let id = fleet.drive(&["--goal", "Write the parser"]);
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| s == "escalated");
    assert!(
        show["session"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("dialog"),
        "{show:#}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(fleet.received().is_empty());
    assert!(
        standin_events(&fleet.standin_log, "stray").is_empty(),
        "something was typed into the dialog"
    );
    assert!(turns(&fleet.show(&id)).is_empty());
}

fn permission_fleet(command: &str) -> Fleet {
    let script = serde_json::json!({
        "turns": [{"work_ms": 200, "reply": {"permission": {"tool": "bash", "command": command,
                   "description": "Run it", "answer": "Ran it."}}}],
        "default": {"work_ms": 200, "reply": {"answer": "Done: {prompt}"}}
    });
    Fleet::start_with(Some(&script.to_string()), &[], &[])
}

#[test]
fn permission_under_escalate_waits_for_the_operator() {
    let (fleet, id) = drive_under_policy("cargo test --workspace", "escalate");
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| s == "escalated");
    assert!(
        show["session"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("permission"),
        "{show:#}"
    );
    assert!(
        standin_events(&fleet.standin_log, "permission").is_empty(),
        "answered without the operator"
    );
    let out = fleet.ctl(&["approve", &id]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        permission_answer(&fleet)["permission"],
        "approved",
        "approval reached the pane"
    );
    fleet.wait_status(&id, Duration::from_secs(60), |s| s == "done");
}

/// A fleet whose agent asks permission to run `command`, driven under `policy`.
fn drive_under_policy(command: &str, policy: &str) -> (Fleet, String) {
    let fleet = permission_fleet(command);
    let plan = fleet.plan_file(2);
    let id = fleet.drive(&[
        "--goal",
        "Test it",
        "--plan",
        &plan,
        "--permissions",
        policy,
    ]);
    (fleet, id)
}

/// The stand-in's answer to its permission menu, once it has one.
fn permission_answer(fleet: &Fleet) -> serde_json::Value {
    wait_for(Duration::from_secs(30), || {
        standin_events(&fleet.standin_log, "permission").pop()
    })
    .expect("a permission answer")
}

#[test]
fn permission_under_approve_safe_and_deny() {
    let (fleet, id) = drive_under_policy("cargo test --workspace", "approve-safe");
    assert_eq!(
        permission_answer(&fleet)["permission"],
        "approved",
        "a safe command is approved"
    );
    fleet.wait_status(&id, Duration::from_secs(60), |s| s == "done");

    let (fleet, id) = drive_under_policy("rm -rf ~/projects", "approve-safe");
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| s == "escalated");
    assert!(
        show["session"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("destructive"),
        "{show:#}"
    );
    assert!(standin_events(&fleet.standin_log, "permission").is_empty());

    let (fleet, _id) = drive_under_policy("cargo test --workspace", "deny");
    assert_eq!(permission_answer(&fleet)["permission"], "denied");
}

#[test]
fn one_session_per_pane_and_clear_drive_errors() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let plan = fleet.plan_file(50);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let second = fleet.ctl(&["drive", "mac2", &fleet.pane, "--goal", "Something else"]);
    assert_ne!(second.code, 0);
    assert!(
        second.stderr.contains("already driven by session") && second.stderr.contains(&id),
        "{second:?}"
    );
    let none = fleet.ctl(&["drive", "mac2", &fleet.pane]);
    assert_ne!(none.code, 0);
    assert!(none.stderr.contains("--goal"), "{none:?}");
    let stop = fleet.ctl(&["stop", &id]);
    assert_eq!(stop.code, 0, "{stop:?}");
    fleet.wait_status(&id, Duration::from_secs(10), |s| s == "stopped");
    // The lock is released: a new session may take the pane.
    let again = fleet.ctl(&[
        "drive",
        "mac2",
        &fleet.pane,
        "--goal",
        "Again",
        "--dry-run",
        "--turns",
        "1",
    ]);
    assert_eq!(again.code, 0, "{again:?}");
}

#[test]
fn an_exited_agent_escalates_and_a_usage_limit_waits() {
    // The stand-in exits on the first prompt (its pane runs a shell afterwards).
    let fleet = Fleet::start_opts(
        Some(r#"{"turns": [{"work_ms": 200, "reply": "exit"}]}"#),
        &[],
        &[],
        true,
    );
    let plan = fleet.plan_file(3);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| {
        s == "escalated" || s == "failed"
    });
    let reason = show["session"]["reason"].as_str().unwrap_or("").to_string();
    assert!(
        reason.contains("exited") || reason.contains("closed"),
        "the session says the agent is gone: {show:#}"
    );
    assert_eq!(fleet.received().len(), 1, "nothing typed after the exit");

    let fleet = Fleet::start_with(
        Some(
            r#"{"turns": [{"work_ms": 200, "reply": {"limit": {"which": "session", "resets": "9:32am (UTC)", "menu": false}}}]}"#,
        ),
        &[],
        &[],
    );
    let plan = fleet.plan_file(3);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = fleet.wait_status(&id, Duration::from_secs(30), |s| s == "waiting");
    assert!(
        show["session"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("9:32am"),
        "the reset time is shown: {show:#}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(fleet.received().len(), 1, "nothing typed while limited");
}

#[test]
fn an_exited_agent_is_restarted_with_the_configured_command() {
    let scratch = karl_tests::harness::Scratch::new();
    let standin = karl_tests::harness::bin("karl-standin")
        .display()
        .to_string();
    let q = karl_tests::harness::shell_quote;
    let (first_log, second_log) = (scratch.path("first.log"), scratch.path("second.log"));
    let exits = scratch.path("exits.json");
    std::fs::write(&exits, r#"{"turns": [{"work_ms": 200, "reply": "exit"}]}"#).expect("write");
    let fast = scratch.path("fast.json");
    std::fs::write(&fast, FAST).expect("write");
    // The restart command is typed into the shell the exited agent leaves behind.
    let restart = format!(
        "{} --log {} --script {}",
        q(&standin),
        q(&second_log.display().to_string()),
        q(&fast.display().to_string())
    );
    std::fs::write(
        scratch.path("karl-coord.toml"),
        format!(
            "{}restart_command = {}\n",
            karl_tests::harness::TEST_COORD_CONFIG,
            toml_string(&restart)
        ),
    )
    .expect("write config");
    let cmdline = format!(
        "{} --log {} --script {}; PS1='dev@mac2 proj $ ' exec bash --norc --noprofile -i",
        q(&standin),
        q(&first_log.display().to_string()),
        q(&exits.display().to_string())
    );
    let fleet = Fleet::start_command(scratch, &cmdline, 120, 40, &[]);
    wait_for(Duration::from_secs(10), || {
        fleet.screen().contains('❯').then_some(())
    })
    .expect("first stand-in drew its box");
    let plan = fleet.plan_file(3);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = fleet.wait_status(&id, Duration::from_secs(60), |s| {
        s == "done" || s == "failed"
    });
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    let prompts = |log: &std::path::Path| -> Vec<String> {
        standin_events(log, "prompt")
            .into_iter()
            .filter_map(|e| e["prompt"].as_str().map(String::from))
            .collect()
    };
    let (first, second) = (prompts(&first_log), prompts(&second_log));
    assert_eq!(first.len(), 1, "turn 1 went to the agent that then exited");
    assert_eq!(
        second.len(),
        2,
        "turns 2 and 3 went to the restarted agent: {second:?}"
    );
    let audit = fleet.ctl(&["audit", "--session", &id, "--json"]);
    assert!(
        audit
            .json()
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["kind"] == "restart")),
        "the restart is audited: {audit:?}"
    );
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

//! What a session must never do, end to end with real processes: type into the shell
//! left by a killed agent, act while paused (through a permission prompt, an agent
//! restart and a coordinator restart), or escalate a quick agent as "looping" when the
//! rate limit only asks it to wait.

use std::time::Duration;

use karl_tests::harness::{standin_events, tail, wait_for, Fleet, FAST_STANDIN, TEST_COORD_CONFIG};

/// The stand-in's pid, from its `started` log event.
fn standin_pid(log: &std::path::Path) -> u32 {
    wait_for(Duration::from_secs(10), || {
        standin_events(log, "started")
            .last()
            .and_then(|e| e["pid"].as_u64())
    })
    .expect("the stand-in logged its start") as u32
}

/// Regression: Claude Code killed mid-answer leaves its spinner frame on screen with the
/// shell prompt drawn into it; KARL kept reading "working" and the session stayed
/// `running` indefinitely. The pane's processes say the agent is gone: the session sees
/// it exited within seconds, and nothing reaches the shell.
#[test]
fn a_killed_agent_is_exited_at_once_and_nothing_reaches_the_shell() {
    let script = r#"{"turns": [{"work_ms": 60000, "reply": {"answer": "never"}}]}"#;
    let fleet = Fleet::start_opts(Some(script), &[], &[], true);
    let plan = fleet.plan_file(3);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    wait_for(Duration::from_secs(30), || {
        let screen = fleet.screen();
        (fleet.received().len() == 1 && screen.contains("esc to interrupt")).then_some(())
    })
    .expect("the agent is busy with turn 1");

    let pid = standin_pid(&fleet.standin_log);
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(killed.success());
    // The dead agent's last frame stays, spinner and all, with a shell prompt under it.
    let show = fleet.wait_status(&id, Duration::from_secs(15), |s| s == "escalated");
    let reason = show["session"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("exited"), "{show:#}");
    assert_eq!(show["session"]["last_state"], "exited", "{show:#}");
    let screen = fleet.screen();
    assert!(
        screen.contains("esc to interrupt"),
        "the stale frame is what makes this hard:\n{screen}"
    );

    // Nothing reaches the shell: its prompt (drawn into the old frame, where the cursor
    // was) has nothing typed after it, and it is the only prompt.
    std::thread::sleep(Duration::from_secs(3));
    let screen = fleet.screen();
    let prompts: Vec<&str> = screen
        .lines()
        .filter(|l| l.contains("dev@mac2 proj $"))
        .collect();
    assert_eq!(prompts.len(), 1, "{screen}");
    assert!(
        prompts[0].trim_end().ends_with("dev@mac2 proj $"),
        "{screen}"
    );
    assert_eq!(fleet.received().len(), 1);
    let audit = fleet.ctl(&["audit", "--session", &id, "--json"]);
    let injections = audit
        .json()
        .as_array()
        .map(|a| a.iter().filter(|e| e["kind"] == "inject").count())
        .unwrap_or(0);
    assert_eq!(injections, 1, "{audit:?}");
}

/// A paused session types nothing at all and stays paused through a permission prompt
/// its policy would approve, its agent's restart and the coordinator's restart; resume
/// picks up where it stopped.
#[test]
fn pause_holds_through_a_permission_an_agent_restart_and_a_coordinator_restart() {
    let script = serde_json::json!({
        "turns": [
            {"work_ms": 200, "reply": {"answer": "Read it."}},
            {"work_ms": 2500, "reply": {"permission": {"tool": "bash",
                "command": "cargo test --workspace", "description": "Run the tests",
                "answer": "Ran it."}}}
        ],
        "default": {"work_ms": 200, "reply": {"answer": "Done: {prompt}"}}
    });
    let mut fleet = Fleet::start_with(Some(&script.to_string()), &[], &[]);
    let plan = fleet.plan_file(3);
    let id = fleet.drive(&[
        "--goal",
        "Test it",
        "--plan",
        &plan,
        "--permissions",
        "approve-safe",
    ]);
    wait_for(Duration::from_secs(30), || {
        (fleet.received().len() == 2).then_some(())
    })
    .expect("turn 2 typed");
    let out = fleet.ctl(&["pause", &id]);
    assert_eq!(out.code, 0, "{out:?}");

    // The permission prompt comes; approve-safe would answer it; paused does not.
    wait_for(Duration::from_secs(15), || {
        fleet
            .screen()
            .contains("Do you want to proceed?")
            .then_some(())
    })
    .expect("the permission prompt shows");
    let held = |fleet: &Fleet, what: &str| {
        std::thread::sleep(Duration::from_secs(2));
        let show = fleet.show(&id);
        assert_eq!(show["session"]["status"], "paused", "{what}: {show:#}");
        assert!(
            standin_events(&fleet.standin_log, "permission").is_empty(),
            "{what}: a paused session answered the permission"
        );
        assert_eq!(fleet.received().len(), 2, "{what}: a paused session typed");
    };
    held(&fleet, "permission prompt");

    // The agent goes away and comes back.
    fleet.agent.kill();
    std::thread::sleep(Duration::from_millis(500));
    let show = fleet.show(&id);
    assert_eq!(show["session"]["status"], "paused", "agent gone: {show:#}");
    fleet.restart_agent();
    held(&fleet, "agent back");

    // The coordinator stops and starts again.
    let status = fleet.coord.proc.terminate(Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    fleet.restart_coord();
    held(&fleet, "coordinator restarted");

    // Resume: the pending permission is answered by policy and the plan goes on.
    let out = fleet.ctl(&["resume", &id]);
    assert_eq!(out.code, 0, "{out:?}");
    let answer = wait_for(Duration::from_secs(30), || {
        standin_events(&fleet.standin_log, "permission").pop()
    })
    .unwrap_or_else(|| {
        panic!(
            "not answered after resume:\n{}",
            tail(&fleet.coord.proc.log_text(), 30)
        )
    });
    assert_eq!(answer["permission"], "approved");
    fleet.wait_status(&id, Duration::from_secs(60), |s| s == "done");
}

/// Regression: an agent that answers in a quarter second had its session escalated as
/// "looping" after six prompts in a minute, although every prompt was new and every turn
/// made progress. The rate limit delays the next turn; `show` says why; the session stays
/// running.
#[test]
fn a_quick_agent_is_throttled_not_escalated() {
    let config = TEST_COORD_CONFIG.replace(
        "max_injections_per_minute = 600",
        "max_injections_per_minute = 3",
    );
    let fleet = Fleet::start_with_config(Some(FAST_STANDIN), &config);
    let plan = fleet.plan_file(8);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let received = || fleet.received().len();
    wait_for(Duration::from_secs(30), || (received() == 3).then_some(()))
        .expect("three quick turns");
    let show = wait_for(Duration::from_secs(15), || {
        let show = fleet.show(&id);
        show["session"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("rate limit"))
            .then_some(show)
    })
    .unwrap_or_else(|| panic!("show does not say the turn waits: {:#}", fleet.show(&id)));
    assert_eq!(show["session"]["status"], "running", "{show:#}");
    let reason = show["session"]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("next turn in"), "{reason}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(received(), 3, "a fourth prompt inside the window");
    assert_eq!(fleet.show(&id)["session"]["status"], "running");
}

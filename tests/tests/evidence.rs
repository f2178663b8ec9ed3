//! Evidence beyond the screen with real processes: karl-coord and karl-agent on loopback,
//! the stand-in coding agent in a real tmux pane writing Claude Code's session file and
//! transcript (`CLAUDE_CONFIG_DIR`), real sled; and `drive --verify` running a real
//! command in the pane's directory. The real Claude Code CLIs are driven the same way
//! in `compat_claude.rs`.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use karl_tests::harness::{bin, shell_quote, turns, wait_for, Fleet, Scratch};

/// A fleet whose stand-in writes Claude Code's files under `<scratch>/claude`.
fn transcript_fleet(script: &str) -> Fleet {
    let scratch = Scratch::new();
    let script_path = scratch.path("standin-script.json");
    std::fs::write(&script_path, script).unwrap();
    let cmdline = format!(
        "CLAUDE_CONFIG_DIR={} exec {} --log {} --script {}",
        shell_quote(&scratch.path("claude").display().to_string()),
        shell_quote(&bin("karl-standin").display().to_string()),
        shell_quote(&scratch.path("standin.log").display().to_string()),
        shell_quote(&script_path.display().to_string()),
    );
    let fleet = Fleet::start_command(scratch, &cmdline, 120, 40, &[]);
    wait_for(Duration::from_secs(15), || {
        fleet.screen().contains("? for shortcuts").then_some(())
    })
    .expect("the stand-in's first screen");
    fleet
}

#[test]
fn a_stand_in_s_transcript_is_followed_and_confirms_every_prompt() {
    let fleet =
        transcript_fleet(r#"{"default": {"work_ms": 300, "reply": {"answer": "Done: {prompt}"}}}"#);
    let plan = fleet.plan_file(6);
    let id = fleet.drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = fleet.wait_status(&id, Duration::from_secs(90), |s| s != "running");
    assert_eq!(show["session"]["status"], "done", "{show:#}");
    assert_eq!(
        show["session"]["evidence"], "transcript",
        "{}",
        show["session"]
    );
    assert_eq!(show["record"]["confirmed"], 6, "{}", show["record"]);
    let t = turns(&show);
    assert_eq!(t.len(), 6);
    for turn in &t {
        assert_eq!(turn["confirmed_by"], "transcript", "{turn}");
        assert_eq!(turn["judged_by"], "transcript", "{turn}");
        assert!(
            turn["response"].as_str().unwrap_or("").starts_with("Turn "),
            "{turn}"
        );
    }
    assert_eq!(fleet.received().len(), 6);
    // `karl-ctl show` and `logs` say which evidence decided.
    let out = fleet.ctl(&["show", &id]);
    assert!(out.stdout.contains("evidence transcript"), "{}", out.stdout);
    assert!(out.stdout.contains("6 prompts confirmed"), "{}", out.stdout);
    let logs = fleet.ctl(&["logs", &id]);
    assert!(
        logs.stdout
            .contains("evidence: landed per transcript, judged on transcript"),
        "{}",
        logs.stdout
    );
}

#[test]
fn verify_holds_done_until_the_command_passes() {
    // The fix turn takes a while, so the file the check looks for can appear meanwhile.
    let fleet = transcript_fleet(
        r#"{"turns": [{"match": "Make", "work_ms": 2500, "reply": {"answer": "Fixed it."}}],
            "default": {"work_ms": 300, "reply": {"answer": "Done: {prompt}"}}}"#,
    );
    let marker = fleet.scratch.path("release-notes.md");
    let check = format!(
        "test -f {} || {{ echo 'release-notes.md is missing'; exit 4; }}",
        shell_quote(&marker.display().to_string())
    );
    let plan = fleet.plan(&["Write the release notes."]);
    let id = fleet.drive(&["--goal", "Release", "--plan", &plan, "--verify", &check]);
    // The plan is typed, the check fails, and the next turn is the fix.
    wait_for(Duration::from_secs(60), || {
        (fleet.received().len() == 2).then_some(())
    })
    .unwrap_or_else(|| panic!("no fix turn: {:#}", fleet.show(&id)));
    let fix = &fleet.received()[1];
    assert!(
        fix.starts_with("Make `test -f")
            && fix.ends_with("exited 4 with: release-notes.md is missing"),
        "{fix}"
    );
    let show = fleet.show(&id);
    assert_eq!(show["session"]["status"], "running", "{}", show["session"]);
    std::fs::write(&marker, "# Notes\n").unwrap();
    let show = fleet.wait_status(&id, Duration::from_secs(60), |s| s != "running");
    assert_eq!(show["session"]["status"], "done", "{}", show["session"]);
    assert!(
        show["session"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("verified: `test -f"),
        "{}",
        show["session"]
    );
    let audit = fleet.ctl(&["audit", "--session", &id, "--json"]);
    let verify_runs = audit
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "verify")
        .count();
    assert_eq!(verify_runs, 2, "{}", audit.stdout);
    assert_eq!(fleet.received().len(), 2);
}

//! The operator's pane commands through real processes: `capture`, `watch-pane` and
//! `send` (through the gate, `--force` audited), against the stand-in coding agent in a
//! real tmux pane; and `classify` on a live capture agreeing with the session's view.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use karl_tests::harness::{karl_command, wait_for, Fleet};

const FAST: &str = r#"{"default": {"work_ms": 300, "reply": {"answer": "Done: {prompt}"}}}"#;

#[test]
fn capture_send_and_audit() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);

    let cap = fleet.ctl(&["capture", "mac2", &fleet.pane, "--json"]);
    assert_eq!(cap.code, 0, "{cap:?}");
    let snap = cap.json();
    assert!(
        snap["text"].as_str().unwrap_or("").contains('❯'),
        "{snap:#}"
    );
    assert_eq!(snap["pane"]["pane_id"], fleet.pane.as_str());
    assert_eq!(snap["pane"]["width"], 120);
    assert_eq!(snap["stable_hash"].as_str().map(str::len), Some(32));
    let ansi = fleet.ctl(&["capture", "mac2", "work:0.0", "--ansi"]);
    assert_eq!(ansi.code, 0, "{ansi:?}");
    assert!(
        ansi.stdout.contains("\u{1b}["),
        "--ansi keeps the colour escapes"
    );

    // A destructive prompt is refused by the gate and never typed.
    let blocked = fleet.ctl(&[
        "send",
        "mac2",
        &fleet.pane,
        "rm -rf ~ && git push --force origin main",
    ]);
    assert_eq!(blocked.code, 1, "{blocked:?}");
    assert!(
        blocked.stderr.contains("blocked by the gate"),
        "{blocked:?}"
    );

    // An ordinary one arrives exactly once.
    let text = "Add a --verbose flag to the CLI in src/main.rs;\nthen run `cargo test` and fix what fails.";
    let sent = fleet.ctl(&["send", "mac2", &fleet.pane, text, "--json"]);
    assert_eq!(sent.code, 0, "{sent:?}");
    assert!(
        sent.json()["outcome"]
            .as_str()
            .unwrap_or("")
            .starts_with("submitted"),
        "{sent:?}"
    );
    let got = wait_for(Duration::from_secs(10), || {
        let r = fleet.received();
        (!r.is_empty()).then_some(r)
    })
    .expect("prompt arrived");
    assert_eq!(got, vec![text.to_string()]);

    // --force overrides the gate, and says so in the audit log.
    wait_for(Duration::from_secs(10), || {
        fleet.screen().contains("for shortcuts").then_some(())
    })
    .expect("idle again");
    let forced = fleet.ctl(&["send", "mac2", &fleet.pane, "status?", "--force"]);
    assert_eq!(forced.code, 0, "{forced:?}");
    let audit = fleet.ctl(&["audit", "--json"]);
    assert_eq!(audit.code, 0, "{audit:?}");
    let kinds: Vec<String> = audit
        .json()
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["kind"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(kinds.contains(&"blocked".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"forced".to_string()), "{kinds:?}");
    assert!(
        kinds.iter().filter(|k| *k == "inject").count() >= 2,
        "{kinds:?}"
    );
}

#[test]
fn watch_pane_streams_settled_snapshots() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let mut cmd = karl_command("karl-ctl", fleet.scratch.dir.path());
    cmd.env("KARL_LOG", "warn")
        .args([
            "--coord",
            &fleet.coord.addr,
            "watch-pane",
            "mac2",
            &fleet.pane,
            "--settle-ms",
            "300",
            "--json",
        ])
        .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn watch-pane");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("first snapshot");
    assert_eq!(first["pane"]["pane_id"], fleet.pane.as_str());
    let sent = fleet.ctl(&[
        "send",
        "mac2",
        &fleet.pane,
        "Add a changelog entry for the --verbose flag.",
    ]);
    assert_eq!(sent.code, 0, "{sent:?}");
    // A settled snapshot showing the answer arrives.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let mut seen = false;
    while std::time::Instant::now() < deadline {
        if let Ok(v) = rx.recv_timeout(Duration::from_millis(500)) {
            if v["reason"] == "settled"
                && v["text"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Done: Add a changelog entry")
            {
                seen = true;
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "no settled snapshot with the answer");
}

/// `send` into a program KARL has no rules for (`cat` here; a REPL or a script alike):
/// refused with a message that names it and suggests `--force`; forced, the text is typed
/// once with one Enter and the command reports success (regression: "the agent is
/// working", then two extra Enters and a reported failure).
#[test]
fn send_to_a_program_karl_cannot_read() {
    let fleet = Fleet::start_with(Some(FAST), &[], &[]);
    let pane = fleet
        .tmux
        .new_session("other", 80, 24, "cat")
        .expect("tmux new-session");
    wait_for(Duration::from_secs(10), || {
        let panes = fleet.ctl(&["panes", "mac2", "--json"]);
        panes.stdout.contains(&format!("\"{pane}\"")).then_some(())
    })
    .expect("the agent lists the new pane");

    let refused = fleet.ctl(&["send", "mac2", &pane, "hello karl"]);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused.stderr.contains("\"cat\"") && refused.stderr.contains("--force"),
        "{refused:?}"
    );
    assert!(!refused.stderr.contains("working"), "{refused:?}");
    assert!(!fleet
        .tmux
        .capture(&pane)
        .expect("tmux capture-pane")
        .contains("hello karl"));

    let forced = fleet.ctl(&["send", "mac2", &pane, "hello karl", "--force", "--json"]);
    assert_eq!(forced.code, 0, "{forced:?}");
    let reply = forced.json();
    assert_eq!(reply["outcome"], "submitted", "{reply:#}");
    assert_eq!(reply["enter_retries"], 0, "{reply:#}");
    // The terminal echoes the line and cat prints it back: twice, and no blank lines from
    // extra Enters after it.
    let screen = wait_for(Duration::from_secs(10), || {
        let s = fleet.tmux.capture(&pane).expect("tmux capture-pane");
        (s.matches("hello karl").count() == 2).then_some(s)
    })
    .unwrap_or_else(|| panic!("{}", fleet.tmux.capture(&pane).expect("tmux capture-pane")));
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        fleet.tmux.capture(&pane).expect("tmux capture-pane"),
        screen,
        "more keys arrived after the Enter"
    );
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines, ["hello karl", "hello karl"], "{screen}");
    let cursor = fleet
        .tmux
        .run(&["display-message", "-p", "-t", &pane, "#{cursor_y}"])
        .expect("tmux");
    assert_eq!(cursor.trim(), "2", "one Enter leaves the cursor on line 3");
}

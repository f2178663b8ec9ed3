//! The pane-state classifier reads the stand-in's screens as Claude Code's: each
//! screen the stand-in shows in a real tmux pane gets the state a developer would
//! give it. This ties the stand-in to the real claude rules, so end-to-end tests
//! that drive the stand-in exercise the real detector.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use karl_common::detect::{AgentKind, Detector, PaneState};
use karl_tests::standin::tmux::{wait_for, StandinPane, StandinSpec};
use karl_tests::tmux_server::TmuxServer;

const BIN: &str = env!("CARGO_BIN_EXE_karl-standin");
const WAIT: Duration = Duration::from_secs(15);

fn server() -> TmuxServer {
    TmuxServer::start().expect("tmux is required for these tests (CI installs it)")
}

/// Waits until the screen contains `marker`, then classifies it.
fn classify_when(p: &StandinPane<'_>, marker: &str) -> (PaneState, AgentKind, bool, String) {
    let snap = wait_for(
        marker,
        WAIT,
        || p.snapshot().ok().filter(|s| s.text.contains(marker)),
        || p.screen().unwrap_or_default(),
    )
    .unwrap();
    let d = Detector::embedded().detect(&snap.detection_input());
    let why = format!(
        "{marker:?}: {:?} {:?} error={} rule={:?}\ntitle={:?} cmd={:?} cursor=({},{})\n{}",
        d.state,
        d.agent,
        d.error,
        d.rule,
        snap.title,
        snap.current_command,
        snap.cursor_x,
        snap.cursor_y,
        snap.text
    );
    (d.state, d.agent, d.error, why)
}

fn expect(p: &StandinPane<'_>, marker: &str, state: PaneState, error: bool) {
    let (s, agent, e, why) = classify_when(p, marker);
    println!("{why}");
    assert_eq!((s, agent, e), (state, AgentKind::Claude, error), "{why}");
}

#[test]
fn a_turn_cycle_reads_as_claude_code() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(
            r#"{"turns": [
            {"work_ms": 4000, "stream": true, "reply": {"answer": ["The health endpoint should be cheap.", "It returns the version.", "And the uptime."]}},
            {"work_ms": 300, "reply": {"permission": {"command": "rm -rf build && mkdir -p build", "description": "Clean the build directory"}}},
            {"work_ms": 300, "reply": {"error": "500 Internal server error"}},
            {"work_ms": 3000, "reply": {"error": {"status": "500 Internal server error", "retries": 3}}},
            {"work_ms": 0, "reply": {"limit": {"menu": true}}},
            {"work_ms": 200, "reply": "exit"}]}"#,
        )
        .shell_after()
        .start(&tmux)
        .unwrap();
    expect(&p, "? for shortcuts", PaneState::Idle, false);
    p.keys(&["-l", "add a health endpoint"]).unwrap();
    expect(&p, "❯\u{a0}add a health endpoint", PaneState::Draft, false);
    p.keys(&["Enter"]).unwrap();
    expect(&p, "esc to interrupt", PaneState::Working, false);
    expect(&p, "It returns the version.", PaneState::Working, false);
    expect(&p, " for 4s", PaneState::Idle, false);
    p.submit("clean the build dir").unwrap();
    expect(&p, "Do you want to proceed?", PaneState::Permission, false);
    p.keys(&["1"]).unwrap();
    expect(&p, "● Done.", PaneState::Idle, false);
    p.submit("add a changelog entry").unwrap();
    expect(&p, "● API Error", PaneState::Idle, true);
    p.submit("fix the failing lint").unwrap();
    expect(&p, "Retrying in", PaneState::Working, false);
    expect(&p, "✻ Cooked for 3s", PaneState::Idle, true);
    p.submit("continue with the refactor").unwrap();
    expect(&p, "What do you want to do?", PaneState::Limited, false);
    p.keys(&["Enter"]).unwrap();
    wait_for(
        "the limit menu to close",
        WAIT,
        || {
            p.screen()
                .ok()
                .filter(|s| !s.contains("What do you want to do?"))
        },
        || p.screen().unwrap_or_default(),
    )
    .unwrap();
    expect(
        &p,
        "You've hit your session limit",
        PaneState::Limited,
        false,
    );
    p.submit("push the branch").unwrap();
    expect(&p, "karl@standin proj $", PaneState::Exited, false);
}

#[test]
fn dialogs_ghosts_pastes_file_menus_and_interrupts_read_as_claude_code() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .arg("--dialog")
        .arg("--ghost")
        .arg("Try \"refactor the parser\"")
        .script(
            r#"{"turns": [
            {"match": "health", "work_ms": 300, "reply": {"permission": {"tool": "create",
             "path": "src/health.rs", "content": ["pub fn health() -> &'static str {", "    \"ok\"", "}"]}}},
            {"match": "slow", "work_ms": 60000, "reply": {"answer": "never"}}]}"#,
        )
        .size(80, 40)
        .start(&tmux)
        .unwrap();
    expect(&p, "Quick safety check", PaneState::Dialog, false);
    p.keys(&["Enter"]).unwrap();
    expect(&p, "Try \"refactor the parser\"", PaneState::Idle, false);
    p.paste("one\ntwo\nthree\nfour").unwrap();
    expect(&p, "[Pasted text #1 +3 lines]", PaneState::Draft, false);
    p.keys(&["BSpace"]).unwrap();
    p.submit("add src/health.rs").unwrap();
    expect(
        &p,
        "Do you want to create health.rs?",
        PaneState::Permission,
        false,
    );
    p.keys(&["Escape"]).unwrap();
    expect(
        &p,
        "Interrupted · What should Claude do instead?",
        PaneState::Idle,
        false,
    );
    p.submit("a slow one").unwrap();
    expect(&p, "esc to interrupt", PaneState::Working, false);
    p.keys(&["Escape"]).unwrap();
    wait_for(
        "the interruption",
        WAIT,
        || p.screen().ok().filter(|s| s.contains("? for shortcuts")),
        || p.screen().unwrap_or_default(),
    )
    .unwrap();
    expect(&p, "? for shortcuts", PaneState::Idle, false);
    let snap = p.snapshot().unwrap();
    assert_eq!(snap.current_command, "claude");
}

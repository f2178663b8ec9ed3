//! The `karl-coord` binary's startup checks, run as a real process. (Building this test
//! also builds `karl-coord` itself, which the end-to-end tests in `tests/` start.)

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn coord(args: &[&str], data: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_karl-coord"))
        .args(["--listen", "127.0.0.1:0", "--config", "/dev/null"])
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("KARL_LOG", "error")
        .output()
        .unwrap()
}

fn one_line_error(out: &Output) -> String {
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    lines[0].to_string()
}

#[test]
fn a_local_pane_needs_a_local_agent_and_a_socket_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let err = one_line_error(&coord(&["--local-pane", "sleep 1000"], dir.path()));
    assert!(err.contains("--local-pane needs --local-agent"), "{err}");
    let err = one_line_error(&coord(
        &["--local-agent", "--local-pane", "sleep 1000"],
        dir.path(),
    ));
    assert!(err.contains("--tmux-socket"), "{err}");
}

#[test]
fn keeping_a_local_pane_needs_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = coord(&["--keep-local-pane"], dir.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--local-pane"), "{err}");
}

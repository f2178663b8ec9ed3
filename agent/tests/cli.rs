//! The `karl-agent` binary's startup checks, run as a real process.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

/// A `tmux` that only answers `-V`, with the given version line.
fn fake_tmux(dir: &std::path::Path, version: &str) -> std::path::PathBuf {
    let path = dir.join("tmux");
    std::fs::write(
        &path,
        format!("#!/bin/sh\n[ \"$1\" = -u ] && shift\n[ \"$1\" = -V ] && echo '{version}' && exit 0\nexit 1\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn agent(tmux_bin: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_karl-agent"))
        .args(["--machine", "mac9", "--coord", "http://127.0.0.1:9"])
        .arg("--tmux-bin")
        .arg(tmux_bin)
        .env("KARL_AGENT_CONFIG", "/dev/null")
        .env("KARL_LOG", "error")
        .output()
        .unwrap()
}

#[test]
fn refuses_a_tmux_older_than_3_2_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = agent(&fake_tmux(dir.path(), "tmux 3.1c"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("tmux 3.1c is too old") && lines[0].contains("3.2 or newer"),
        "{err}"
    );
}

#[test]
fn says_when_tmux_cannot_be_run() {
    let out = agent(std::path::Path::new("/nonexistent/tmux"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot run /nonexistent/tmux") && err.contains("tmux 3.2 or newer"),
        "{err}"
    );
}

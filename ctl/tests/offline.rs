//! karl-ctl's offline commands through the real binary: no coordinator anywhere, a
//! private HOME, exit codes as documented (0 pass, 1 block, 2 bad usage).

use std::process::{Command, Output, Stdio};

/// Runs karl-ctl with `args` and a private HOME; `stdout` replaces the captured one.
fn run(args: &[&str], stdout: Option<Stdio>) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_karl-ctl"));
    cmd.args(args)
        .env("HOME", home.path())
        .env_remove("KARL_COORD")
        .env_remove("KARL_TOKEN");
    if let Some(stdout) = stdout {
        cmd.stdout(stdout);
    }
    cmd.output().expect("run karl-ctl")
}

fn ctl(args: &[&str]) -> (i32, String, String) {
    let out = run(args, None);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn validate_exit_codes_and_json() {
    let (code, out, _) = ctl(&[
        "validate",
        "Add a unit test for parse_config in src/config.rs",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["pass"], true);

    let (code, out, _) = ctl(&["validate", "", "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["pass"], false);
    assert!(v["reasons"].as_array().is_some_and(|r| !r.is_empty()));

    let (code, _, err) = ctl(&["validate"]);
    assert_eq!(code, 2, "missing PROMPT is bad usage: {err}");
}

#[test]
fn validate_reads_history_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hist = dir.path().join("h.json");
    std::fs::write(
        &hist,
        r#"["Fix the failing test in src/lib.rs", "Run cargo fmt"]"#,
    )
    .expect("write");
    let (code, out, _) = ctl(&[
        "validate",
        "Fix the failing test in src/lib.rs",
        "--history",
        hist.to_str().expect("utf8"),
    ]);
    assert_eq!(code, 1, "an exact repeat is blocked: {out}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{not json").expect("write");
    let (code, _, err) = ctl(&["validate", "x", "--history", bad.to_str().expect("utf8")]);
    assert_eq!(code, 2, "an unreadable history file is bad usage");
    assert!(err.contains("--history"), "{err}");
}

fn fixture(name: &str) -> String {
    format!(
        "{}/../tests/fixtures/panes/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn classify_reads_a_capture_with_its_metadata() {
    let (code, out, err) = ctl(&[
        "classify",
        &fixture("cc-bash-perm-80x40__perm.txt"),
        "--ansi",
        &fixture("cc-bash-perm-80x40__perm.ansi"),
        "--meta",
        &fixture("cc-bash-perm-80x40__perm.json"),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v["state"], "permission");
    assert_eq!(v["agent"], "claude");
    assert_eq!(v["error"], false);
    assert!(v["confidence"].as_f64().is_some_and(|c| c > 0.5));
    assert!(v["evidence"].as_array().is_some_and(|e| !e.is_empty()));
    assert!(
        v["permission"]["options"]
            .as_array()
            .is_some_and(|o| o.len() >= 2),
        "{v:#}"
    );

    let (code, out, _) = ctl(&[
        "classify",
        &fixture("cc-basic-120x40__after-answer.txt"),
        "--explain",
    ]);
    assert_eq!(code, 0);
    assert!(out.starts_with("idle (claude"), "{out}");
    assert!(out.contains("rules evaluated:"), "{out}");

    let (code, _, err) = ctl(&["classify", "/nonexistent/capture.txt"]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot read capture"), "{err}");
}

#[test]
fn context_for_a_capture_stays_in_budget() {
    let (code, out, err) = ctl(&[
        "context",
        "--capture",
        &fixture("cc-apierr-529-final-80x60__failed.txt"),
        "--project",
        "health-api",
        "--goal",
        "Add a /health endpoint",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(msgs.len(), 2, "system + one user message");
    assert!(msgs[1]["content"]
        .as_str()
        .unwrap_or("")
        .contains("health-api"));
    assert!(v["estimated_tokens"].as_u64() <= v["budget"].as_u64());
}

#[test]
fn the_plan_request_for_a_capture_carries_the_goal_and_the_screen() {
    let (code, out, err) = ctl(&[
        "context",
        "--capture",
        &fixture("cc-basic-120x40__after-answer.txt"),
        "--plan",
        "--project",
        "health-api",
        "--goal",
        "Add a /health endpoint",
        "--path",
        "~/src/health-api",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(msgs.len(), 2, "system + one user message");
    assert_eq!(msgs[0]["role"], "system");
    let user = msgs[1]["content"].as_str().unwrap_or("");
    assert!(user.contains("Goal: Add a /health endpoint"), "{user}");
    assert!(user.contains("Path: ~/src/health-api"), "{user}");
    assert!(user.contains("The terminal now shows:"), "{user}");

    let (code, _, err) = ctl(&["context", "--plan", "--goal", "x"]);
    assert_ne!(code, 0, "--plan without --capture is refused");
    assert!(err.contains("--capture"), "{err}");
}

/// The write end of a pipe whose reader is gone: `true` read nothing and has exited, so
/// every write to it fails with a broken pipe, as `karl-ctl … | head` does once head quits.
fn closed_pipe() -> Stdio {
    let mut reader = Command::new("true")
        .stdin(Stdio::piped())
        .spawn()
        .expect("run true");
    let write_end = reader.stdin.take().expect("pipe");
    reader.wait().expect("true exits");
    write_end.into()
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let capture = fixture("cc-basic-120x40__after-answer.txt");
    for args in [
        // Text lines from offline.rs, from output.rs, and validate's verdict.
        &["classify", &capture, "--explain"][..],
        &["context", "--capture", &capture],
        &[
            "validate",
            "Add a unit test for parse_config in src/config.rs",
        ],
    ] {
        let out = run(args, Some(closed_pipe()));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn other_stdout_failures_are_errors() {
    let full = std::fs::File::options()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    let capture = fixture("cc-basic-120x40__after-answer.txt");
    let out = run(&["classify", &capture], Some(full.into()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot write to stdout"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

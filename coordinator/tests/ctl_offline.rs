//! karl-ctl's offline commands through the real binary: no coordinator anywhere, a
//! private HOME, exit codes as documented (0 pass, 1 block, 2 bad usage).

use std::process::Command;

fn ctl(args: &[&str]) -> (i32, String, String) {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_karl-ctl"))
        .args(args)
        .env("HOME", home.path())
        .env_remove("KARL_COORD")
        .env_remove("KARL_TOKEN")
        .output()
        .expect("run karl-ctl");
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

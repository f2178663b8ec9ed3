//! macOS notifications on this Mac, for the coordinator's `macos` notification sink:
//! `osascript -e 'display notification "…" with title "…" subtitle "…"'`.
//!
//! The command line is built here ([`osascript_argv`], pure) and run without a shell, so
//! nothing in a notice's text is ever interpreted by one; AppleScript string literals are
//! escaped by [`applescript_string`]. Not here: what to notify about and when (the
//! coordinator's `notify` module).

use std::process::Stdio;
use std::time::Duration;

use karl_common::pb;
use tokio::process::Command;

/// The program that shows notifications on macOS.
pub const OSASCRIPT: &str = "osascript";
/// A notification that has not shown by then is reported as failed.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Longer texts are cut: Notification Center shows about two lines anyway.
const MAX_CHARS: usize = 400;

/// An AppleScript string literal: backslashes and quotes escaped, line breaks as spaces,
/// other control characters dropped, cut at [`MAX_CHARS`].
pub fn applescript_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars().take(MAX_CHARS) {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `program -e 'display notification BODY with title TITLE [subtitle SUBTITLE]'`.
pub fn osascript_argv(program: &str, n: &pb::Notify) -> Vec<String> {
    let mut script = format!(
        "display notification {} with title {}",
        applescript_string(&n.body),
        applescript_string(&n.title)
    );
    if !n.subtitle.is_empty() {
        script.push_str(" subtitle ");
        script.push_str(&applescript_string(&n.subtitle));
    }
    vec![program.to_string(), "-e".into(), script]
}

/// Shows `n` with `program` (normally [`OSASCRIPT`]); its exit status and stderr decide.
pub async fn show(program: &str, n: &pb::Notify) -> Result<(), String> {
    let argv = osascript_argv(program, n);
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(TIMEOUT, child).await {
        Err(_) => Err(format!("{program} did not finish within {} s", TIMEOUT.as_secs())),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "{program} not found: macOS notifications need macOS (or set `notifier` in karl-agent.toml)"
        )),
        Ok(Err(e)) => Err(format!("cannot run {program}: {e}")),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "{program} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn notify(title: &str, subtitle: &str, body: &str) -> pb::Notify {
        pb::Notify {
            title: title.into(),
            subtitle: subtitle.into(),
            body: body.into(),
        }
    }

    #[test]
    fn the_command_line_is_osascript_with_one_script_argument() {
        let argv = osascript_argv(
            OSASCRIPT,
            &notify(
                "KARL: needs you",
                "mac2 agent-codex:1.1",
                "stuck on the same screen",
            ),
        );
        assert_eq!(
            argv,
            vec![
                "osascript",
                "-e",
                r#"display notification "stuck on the same screen" with title "KARL: needs you" subtitle "mac2 agent-codex:1.1""#,
            ]
        );
    }

    #[test]
    fn quotes_backslashes_and_line_breaks_cannot_end_the_string() {
        let body = "run \"rm -rf /\"\nthen \\ back\x07slash";
        let argv = osascript_argv(OSASCRIPT, &notify("t", "", body));
        assert_eq!(
            argv[2],
            r#"display notification "run \"rm -rf /\" then \\ backslash" with title "t""#
        );
        // Every quote inside the literal is escaped: the script holds exactly the four
        // unescaped quotes of two literals.
        let unescaped = argv[2]
            .char_indices()
            .filter(|&(i, c)| c == '"' && !argv[2][..i].ends_with('\\'))
            .count();
        assert_eq!(unescaped, 4, "{}", argv[2]);
    }

    #[test]
    fn long_text_is_cut() {
        let s = applescript_string(&"x".repeat(5000));
        assert_eq!(s.chars().count(), MAX_CHARS + 2);
    }

    #[tokio::test]
    async fn a_missing_program_says_what_to_do() {
        let e = show("/nonexistent/osascript", &notify("t", "", "b"))
            .await
            .unwrap_err();
        assert!(e.contains("need macOS"), "{e}");
    }
}

//! The terminal block's raw material: the last lines of the pane, chosen adaptively
//! (fewer after a success, more around an error), tidied to spend tokens on content
//! rather than box drawing and padding, and redacted.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::redact::redact;

/// What the last turn's screen says, which sets how much of it the model sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaneSignal {
    /// Nothing notable: the default line count.
    #[default]
    Neutral,
    /// Tests passed, build succeeded: the tail says it all.
    Success,
    /// An error is on screen: show more of it (the traceback's start matters).
    Error,
}

impl PaneSignal {
    /// From the detector's error flag and the engine's judgement of the last outcome.
    pub fn from_flags(error: bool, success: bool) -> Self {
        if error {
            PaneSignal::Error
        } else if success {
            PaneSignal::Success
        } else {
            PaneSignal::Neutral
        }
    }

    /// A cheap reading of the screen's last lines, for callers without a detector
    /// verdict (`karl-ctl context --capture FILE`). Errors win over successes.
    pub fn infer(screen: &str) -> Self {
        let tail: Vec<&str> = screen
            .lines()
            .rev()
            .filter(|l| !l.trim().is_empty())
            .take(20)
            .collect();
        if tail.iter().any(|l| ERROR_LINE.is_match(l)) {
            PaneSignal::Error
        } else if tail.iter().any(|l| SUCCESS_LINE.is_match(l)) {
            PaneSignal::Success
        } else {
            PaneSignal::Neutral
        }
    }
}

static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:^\s*(?:error|fatal|panic|traceback)(?-u:\b)|(?-u:\b)error(?:\[E\d+\])?:|(?-u:\b)panicked at(?-u:\b)|(?-u:\b)[1-9]\d* (?:failed|errors?)(?-u:\b)|(?-u:\b)build failed(?-u:\b)|(?-i:(?-u:\b)FAILED(?-u:\b))|(?-u:\b)exception(?-u:\b))",
    )
    .unwrap_or_else(|e| panic!("bad pattern: {e}"))
});

static SUCCESS_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:test result: ok|(?-u:\b)\d+ passed(?-u:\b)|(?-u:\b)all tests passed(?-u:\b)|(?-u:\b)build succeeded(?-u:\b)|(?-u:\b)finished `?\w+`? profile|^\s*[✓✔]|(?-u:\b)committed(?-u:\b))",
    )
    .unwrap_or_else(|e| panic!("bad pattern: {e}"))
});

/// Lines picked for the terminal block, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TerminalLines {
    pub lines: Vec<String>,
    pub redactions: usize,
}

/// The last `want` meaningful lines of `screen`: trailing blank lines dropped, runs of
/// blank lines and of horizontal rules collapsed to one, rules drawn as `---`, long
/// space runs squeezed, secrets redacted, each line capped at `max_chars` characters.
/// Reads the screen from the end, so a 5,000-line scrollback costs what `want` costs.
pub(crate) fn select_lines(screen: &str, want: usize, max_chars: usize) -> TerminalLines {
    let mut picked: Vec<String> = Vec::with_capacity(want.min(256));
    let mut last_blank = true; // true: leading (bottom) blank lines are skipped
    let mut last_rule = false;
    for raw in screen.lines().rev() {
        if picked.len() >= want {
            break;
        }
        // Pre-cap so a 10,000-column line costs no more than a long one. The final cap
        // comes after redaction; the 64 characters between the two let a secret that
        // straddles the final cap still match its pattern and be redacted.
        let line = tidy(&cap_chars(raw, max_chars.saturating_add(64)));
        if line.is_empty() {
            if !last_blank {
                picked.push(String::new());
            }
            last_blank = true;
            last_rule = false;
            continue;
        }
        if line == "---" {
            if !last_rule {
                picked.push(line);
            }
            last_rule = true;
            last_blank = false;
            continue;
        }
        last_blank = false;
        last_rule = false;
        picked.push(line);
    }
    // A blank line at the top edge carries nothing.
    while picked.last().is_some_and(|l| l.is_empty()) {
        picked.pop();
    }
    picked.reverse();
    // Redact the block as one text so a key spanning lines is caught whole, then cap
    // line lengths (after, so a cut cannot leave the tail of a secret behind).
    let joined = picked.join("\n");
    let (clean, redactions) = redact(&joined);
    let lines = clean
        .split('\n')
        .map(|l| cap_chars(l, max_chars))
        .collect::<Vec<_>>();
    let lines = if lines.len() == 1 && lines[0].is_empty() {
        Vec::new()
    } else {
        lines
    };
    TerminalLines { lines, redactions }
}

/// One line, tidied: control characters dropped, trailing space trimmed, a line that is
/// only a horizontal rule (box drawing, dashes, equals) becomes `---`, and runs of
/// more than four spaces shrink to four (alignment padding costs tokens, not meaning).
fn tidy(raw: &str) -> String {
    let trimmed = raw.trim_end();
    if is_rule(trimmed) {
        return "---".to_string();
    }
    let mut out = String::with_capacity(trimmed.len().min(4096));
    let mut spaces = 0usize;
    for c in trimmed.chars() {
        if c == ' ' || c == '\u{a0}' {
            spaces += 1;
            if spaces <= 4 {
                out.push(' ');
            }
            continue;
        }
        spaces = 0;
        if c == '\t' {
            out.push_str("    ");
        } else if !c.is_control() {
            out.push(c);
        }
    }
    out
}

fn is_rule(line: &str) -> bool {
    let t = line.trim();
    t.chars().count() >= 8
        && t.chars().all(|c| {
            matches!(
                c,
                '-' | '=' | '_' | '─' | '━' | '═' | '╌' | '┄' | '▔' | '▁' | ' '
            )
        })
}

/// `s` cut to at most `max` characters, marked with `…` when cut.
pub(crate) fn cap_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some(_) => {
            let keep: String = s.chars().take(max.saturating_sub(1)).collect();
            format!("{keep}…")
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_tail_and_collapses_noise() {
        let screen = "old 1\nold 2\n\n\n\nmid\n────────────────────────\n────────────────────────\n>            prompt\n\n\n";
        let t = select_lines(screen, 4, 100);
        // The blank line that filled the window sat at its top edge and goes.
        assert_eq!(t.lines, vec!["mid", "---", ">    prompt"]);
        let all = select_lines(screen, 100, 100);
        assert_eq!(all.lines.first().map(String::as_str), Some("old 1"));
    }

    #[test]
    fn huge_panes_and_lines_are_bounded() {
        let screen = format!("{}\n", "x".repeat(10_000)).repeat(5_000);
        let t = select_lines(&screen, 120, 300);
        assert_eq!(t.lines.len(), 120);
        assert!(t
            .lines
            .iter()
            .all(|l| l.chars().count() == 300 && l.ends_with('…')));
        assert!(select_lines("", 60, 300).lines.is_empty());
        assert!(select_lines("\n\n  \n", 60, 300).lines.is_empty());
    }

    #[test]
    fn secrets_are_redacted_even_across_lines() {
        let screen = "$ cat .env\nOPENAI_API_KEY=sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n$ ";
        let t = select_lines(screen, 60, 300);
        let text = t.lines.join("\n");
        assert!(!text.contains("a1B2c3D4"), "{text}");
        assert!(!text.contains("MIIEvQ"), "{text}");
        assert_eq!(t.redactions, 2);
    }

    #[test]
    fn a_secret_straddling_the_line_cap_is_still_redacted() {
        let line = format!("{}sk-proj-a1B2c3D4e5F6g7H8i9J0k1L2m3n4", "x ".repeat(135));
        let t = select_lines(&line, 10, 300);
        assert!(!t.lines[0].contains("a1B2"), "{}", t.lines[0]);
        assert_eq!(t.redactions, 1);
    }

    #[test]
    fn control_bytes_and_tabs() {
        assert_eq!(tidy("a\u{7}b\tc\u{1b}"), "ab    c");
    }

    #[test]
    fn signal_inference() {
        assert_eq!(
            PaneSignal::infer("running 3 tests\ntest result: ok. 3 passed; 0 failed\n$ "),
            PaneSignal::Success
        );
        assert_eq!(
            PaneSignal::infer("error[E0425]: cannot find value `x`\n$ "),
            PaneSignal::Error
        );
        assert_eq!(
            PaneSignal::infer("test result: FAILED. 2 passed; 1 failed\n"),
            PaneSignal::Error
        );
        assert_eq!(
            PaneSignal::infer("the running-config.ts file handles errors gracefully\n> "),
            PaneSignal::Neutral
        );
        assert_eq!(PaneSignal::from_flags(true, true), PaneSignal::Error);
    }
}

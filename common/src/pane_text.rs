//! Capture preprocessing, all pure: what the agent does to `capture-pane` bytes before they
//! leave the machine. Strip stray escapes and control bytes, replace invalid UTF-8, cap line
//! length and line count, drop trailing blank lines ([`clean_capture`], and
//! [`clean_ansi_capture`] for the `-e` variant, which keeps colour/attribute escapes);
//! mask volatile fragments — spinner glyphs, elapsed timers, token counters, clock times —
//! ([`normalize`]) before an md5 [`stable_hash`]; [`diff`] a capture against the previous one
//! (new lines, capped) with a novelty share in 0..1.
//!
//! Every function is total: binary garbage, a 10,000-column line or a 500-line error dump
//! yields bounded output, never a panic. Escapes are read by `crate::ansi` (on `vte`), the
//! reader detection uses too. Nothing here knows what a pane *means*; that is
//! [`crate::detect`].

use std::collections::HashMap;
use std::sync::LazyLock;

use md5::{Digest, Md5};
use regex::Regex;

use crate::ansi::strip as strip_escapes;

/// Longest line kept, in characters; longer lines are cut and end in `…`.
pub const MAX_LINE_CHARS: usize = 2_000;
/// Most lines kept from one capture (the bottom ones: the live screen is at the end).
pub const MAX_LINES: usize = 5_000;
/// Most bytes of a raw capture looked at (the tail is kept).
pub const MAX_RAW_BYTES: usize = 4 << 20;
/// Default cap on [`TextDiff::new_lines`].
pub const MAX_NEW_LINES: usize = 200;

/// Bytes from `capture-pane -p` → clean text: lossy UTF-8, no escape sequences, no control
/// bytes except `\n` and `\t`, lines capped at [`MAX_LINE_CHARS`], at most [`MAX_LINES`]
/// lines (the last ones), no trailing blank lines.
pub fn clean_capture(raw: &[u8]) -> String {
    clean(raw, false)
}

/// Bytes from `capture-pane -p -e` → the same as [`clean_capture`] but SGR sequences
/// (`ESC [ … m`: colour, dim, bold) are kept, so a reader can tell dim placeholder text from
/// typed text. Every other escape is stripped. Lines line up with [`clean_capture`] of the
/// plain capture: blank-ness is judged on visible characters.
pub fn clean_ansi_capture(raw: &[u8]) -> String {
    clean(raw, true)
}

fn clean(raw: &[u8], keep_sgr: bool) -> String {
    let raw = tail_at_line(raw, MAX_RAW_BYTES);
    let text = String::from_utf8_lossy(raw);
    let stripped = strip_escapes(&text, keep_sgr);
    let mut lines: Vec<String> = stripped
        .split('\n')
        .map(|l| cap_line(l, keep_sgr))
        .collect();
    while lines.last().is_some_and(|l| is_blank(l)) {
        lines.pop();
    }
    let skip = lines.len().saturating_sub(MAX_LINES);
    lines.drain(..skip);
    lines.join("\n")
}

/// The last `max` bytes of `raw`, starting after a newline when one is in reach, so the
/// first kept line is whole.
fn tail_at_line(raw: &[u8], max: usize) -> &[u8] {
    if raw.len() <= max {
        return raw;
    }
    let tail = &raw[raw.len() - max..];
    match tail.iter().position(|&b| b == b'\n') {
        Some(i) => &tail[i + 1..],
        None => tail,
    }
}

/// Cuts a line to [`MAX_LINE_CHARS`] visible characters, marking the cut with `…`. In an
/// ANSI line escape sequences do not count and are never cut in half.
fn cap_line(line: &str, ansi: bool) -> String {
    let mut visible = 0usize;
    let mut in_seq = false;
    for (i, c) in line.char_indices() {
        if ansi && c == '\x1b' {
            in_seq = true;
            continue;
        }
        if in_seq {
            if c == 'm' {
                in_seq = false;
            }
            continue;
        }
        if visible == MAX_LINE_CHARS {
            let mut cut = line[..i].to_string();
            cut.push('…');
            if ansi {
                cut.push_str("\x1b[0m");
            }
            return cut;
        }
        visible += 1;
    }
    line.to_string()
}

/// True when a line shows nothing but spaces (SGR sequences do not count).
fn is_blank(line: &str) -> bool {
    if !line.contains('\x1b') {
        return line.trim().is_empty();
    }
    strip_escapes(line, false).trim().is_empty()
}

/// Volatile fragments and what they are masked to. Order matters: the parenthesised timer
/// goes before bare durations so `(12s · ↓ 3 tokens)` becomes one mask.
static VOLATILE: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    let rules: [(&str, &str); 6] = [
        // Braille spinners (terminal titles, Codex, many CLIs).
        (r"[\x{2800}-\x{28FF}]", "⠿"),
        // An animated glyph opening a status line: Claude's `· ✢ * ✻ ✽` family, Codex's `• ◦`.
        (r"(?m)^(\s*)[·✢*✻✽✶✳✺✹●•◦](\s)", "${1}✻${2}"),
        // Elapsed timers with whatever rides along: `(12s · ↓ 3 tokens)`, `(5s · thinking)`,
        // `(4s • esc to interrupt)`, `(9s)`, `(1m 9s)`.
        (
            r"\(\s*<?\d+(?:\.\d+)?\s?(?:ms|[smh])\b[^()\n]{0,120}\)",
            "(#)",
        ),
        // Bare durations: `Worked for 3s`, `Cooked for 1m 9s`, `Retrying in 8s`, `in 0.42s`.
        (r"\b\d+(?:\.\d+)?(?:ms|[smh])(?:\s\d+(?:ms|[smh]))*\b", "#s"),
        // Token counters: `↓ 3 tokens`, `1.2k tokens`, `12,345 tokens`.
        (r"\b\d[\d.,]*\s?[kKmM]?\s+tokens?\b", "# tokens"),
        // Clock times after a space or bracket (`• 07:36`, `9:32am`, `at 9:46 AM`), but not
        // `file.rs:12:34` or `127.0.0.1:7400`.
        (
            r"(^|[\s(\[•·])\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\.?)?\b",
            "${1}#:#",
        ),
    ];
    rules
        .into_iter()
        .map(|(pattern, mask)| {
            (
                Regex::new(pattern).expect("volatile-fragment patterns are valid"),
                mask,
            )
        })
        .collect()
});

/// One line with its volatile fragments masked (see [`normalize`]).
pub fn normalize_line(line: &str) -> String {
    let mut out = std::borrow::Cow::Borrowed(line);
    for (re, mask) in VOLATILE.iter() {
        if let std::borrow::Cow::Owned(s) = re.replace_all(&out, *mask) {
            out = std::borrow::Cow::Owned(s);
        }
    }
    out.into_owned()
}

/// Text with volatile fragments masked — spinner glyphs, elapsed timers, token counters,
/// clock times — so two captures that differ only in those compare equal.
pub fn normalize(text: &str) -> String {
    text.split('\n')
        .map(normalize_line)
        .collect::<Vec<_>>()
        .join("\n")
}

/// md5 hex of the [`normalize`]d text: equal for captures that differ only in volatile
/// fragments.
pub fn stable_hash(text: &str) -> String {
    format!("{:x}", Md5::digest(normalize(text).as_bytes()))
}

/// What changed between two captures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextDiff {
    /// Non-blank lines of the new capture with no counterpart in the previous one, in screen
    /// order; the last `cap` of them when there are more.
    pub new_lines: Vec<String>,
    /// Share of the new capture's non-blank lines that are new, in 0..1 (0 for an empty one).
    pub novelty: f32,
}

/// Compares `cur` with `prev` line by line (as multisets of normalized lines, so lines that
/// scrolled up still count as seen and a spinner tick is not news). `prev` empty means
/// everything is new.
pub fn diff(prev: &str, cur: &str, cap: usize) -> TextDiff {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for line in prev.split('\n').filter(|l| !is_blank(l)) {
        *seen.entry(normalize_line(line)).or_default() += 1;
    }
    let mut total = 0usize;
    let mut fresh: Vec<&str> = Vec::new();
    for line in cur.split('\n').filter(|l| !is_blank(l)) {
        total += 1;
        match seen.get_mut(&normalize_line(line)) {
            Some(n) if *n > 0 => *n -= 1,
            _ => fresh.push(line),
        }
    }
    let novelty = if total == 0 {
        0.0
    } else {
        fresh.len() as f32 / total as f32
    };
    let skip = fresh.len().saturating_sub(cap);
    TextDiff {
        new_lines: fresh[skip..].iter().map(|l| (*l).to_string()).collect(),
        novelty,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::path::PathBuf;

    fn fixture(name: &str) -> Vec<u8> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/panes")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn strips_escapes_and_control_bytes() {
        let raw = b"a\x1b[31mred\x1b[0m b\x1b]0;title\x07c\x1b(Bd\x1b7e\r\x08\x00f\x7f\tg\n";
        assert_eq!(clean_capture(raw), "ared bcdef\tg");
    }

    #[test]
    fn ansi_variant_keeps_only_sgr() {
        let raw = b"\x1b[2mAsk Codex\x1b[0m\x1b[?25l \x1b]2;t\x1b\\x\n\n";
        assert_eq!(clean_ansi_capture(raw), "\x1b[2mAsk Codex\x1b[0m x");
    }

    #[test]
    fn tmux_charset_designation_leaves_nothing() {
        let raw = b"\x1b[2mAsk\x1b(B\x1b[m done\x1b(B\n";
        assert_eq!(clean_capture(raw), "Ask done");
        assert_eq!(clean_ansi_capture(raw), "\x1b[2mAsk\x1b[0m done");
    }

    #[test]
    fn drops_trailing_blank_lines_only() {
        assert_eq!(clean_capture(b"\n\na\n\n  b\n \n\n\n"), "\n\na\n\n  b");
        assert_eq!(clean_ansi_capture(b"a\n\x1b[0m  \x1b[2m\n"), "a");
        assert_eq!(clean_capture(b""), "");
        assert_eq!(clean_capture(b"\n \n"), "");
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(
            clean_capture(b"ok \xff\xfe done"),
            "ok \u{fffd}\u{fffd} done"
        );
    }

    #[test]
    fn binary_garbage_is_bounded_and_does_not_panic() {
        // A deterministic pseudo-random byte soup, escapes and all.
        let mut x: u32 = 0x1234_5678;
        let garbage: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 24) as u8
            })
            .collect();
        for out in [clean_capture(&garbage), clean_ansi_capture(&garbage)] {
            assert!(out.len() <= garbage.len() * 2);
            assert!(out.lines().count() <= MAX_LINES);
            assert!(!out
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\x1b'));
            let _ = stable_hash(&out);
            let _ = diff(&out, &out, 10);
        }
        assert!(!clean_capture(&garbage).contains('\x1b'));
    }

    #[test]
    fn long_lines_are_capped() {
        let line = "x".repeat(10_000);
        let out = clean_capture(line.as_bytes());
        assert_eq!(out.chars().count(), MAX_LINE_CHARS + 1);
        assert!(out.ends_with('…'));
        let ansi = format!("\x1b[2m{line}\x1b[0m");
        let out = clean_ansi_capture(ansi.as_bytes());
        assert!(out.starts_with("\x1b[2m"));
        assert_eq!(
            strip_escapes(&out, false).chars().count(),
            MAX_LINE_CHARS + 1
        );
    }

    #[test]
    fn line_count_is_capped_keeping_the_bottom() {
        let many: String = (0..MAX_LINES + 10).map(|i| format!("line {i}\n")).collect();
        let out = clean_capture(many.as_bytes());
        assert_eq!(out.lines().count(), MAX_LINES);
        assert!(out.ends_with(&format!("line {}", MAX_LINES + 9)));
        assert!(out.starts_with("line 10\n"));
    }

    #[test]
    fn huge_raw_input_keeps_whole_lines_from_the_tail() {
        let big: String = (0..400_000).map(|i| format!("row {i:08}\n")).collect();
        let out = clean_capture(big.as_bytes());
        assert!(out.lines().all(|l| l.starts_with("row ") && l.len() == 12));
        assert!(out.ends_with("row 00399999"));
    }

    #[test]
    fn fixtures_clean_to_themselves() {
        // The fixtures are `capture-pane -p` output: cleaning must not change a visible line.
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("txt") {
                continue;
            }
            let raw = std::fs::read(&path).unwrap();
            let want = String::from_utf8(raw.clone()).unwrap();
            let want = want.trim_end_matches(['\n', ' ']);
            assert_eq!(clean_capture(&raw), want, "{}", path.display());
            let ansi = std::fs::read(path.with_extension("ansi")).unwrap();
            let plain_from_ansi = strip_escapes(&clean_ansi_capture(&ansi), false);
            assert_eq!(
                plain_from_ansi.lines().count(),
                want.lines().count(),
                "{}",
                path.display()
            );
            n += 1;
        }
        assert!(n >= 90, "only {n} fixtures found");
    }

    #[test]
    fn spinner_and_timer_ticks_hash_equal() {
        let a = String::from_utf8(fixture("cc-basic-120x40__streaming.txt")).unwrap();
        let line = a
            .lines()
            .find(|l| l.contains("tokens)"))
            .expect("the fixture has a spinner line")
            .to_string();
        let ticked = line
            .replacen(|c: char| "·✢*✻✽".contains(c), "✢", 1)
            .replace(|c: char| c.is_ascii_digit(), "7");
        assert_ne!(line, ticked);
        let b = a.replace(&line, &ticked);
        assert_eq!(stable_hash(&a), stable_hash(&b));
        // Real content changes still change the hash.
        let c = a.replace(&line, &format!("{line} and more"));
        assert_ne!(stable_hash(&a), stable_hash(&c));
    }

    #[test]
    fn volatile_fragments_are_masked() {
        let cases = [
            (
                "✻ Seasoning… (5s · ↓ 69 tokens)",
                "✢ Seasoning… (12s · ↓ 1.2k tokens)",
            ),
            (
                "✽ Galloping… (1s · thinking)",
                "· Galloping… (5s · thinking)",
            ),
            ("✻ Churned for 9s", "✻ Churned for 1m 12s"),
            ("  Worked for 6s • 07:42", "  Worked for 18s • 07:45"),
            (
                "• Working (4s • esc to interrupt)",
                "◦ Working (12s • esc to interrupt)",
            ),
            (
                "✻ API error · Retrying in 4s · attempt 4/10",
                "✻ API error · Retrying in 8s · attempt 4/10",
            ),
            ("  ⎿  Running… (7s)", "  ⎿  Running… (9s)"),
            ("⠂ Claude Code", "⠐ Claude Code"),
            ("resets 9:32am (UTC)", "resets 10:02pm (UTC)"),
        ];
        for (a, b) in cases {
            assert_eq!(normalize_line(a), normalize_line(b), "{a} vs {b}");
        }
        let kept = [
            ("src/main.rs:12:34", "src/main.rs:13:34"),
            ("listen = 127.0.0.1:7400", "listen = 127.0.0.1:7401"),
            ("attempt 4/10", "attempt 5/10"),
            ("running-config.ts", "running-config.js"),
        ];
        for (a, b) in kept {
            assert_ne!(normalize_line(a), normalize_line(b), "{a} vs {b}");
        }
    }

    #[test]
    fn diff_reports_new_lines_and_novelty() {
        let prev = "$ cargo test\nrunning 3 tests\n✻ Working… (1s · ↓ 3 tokens)";
        let cur = "$ cargo test\nrunning 3 tests\n✢ Working… (4s · ↓ 9 tokens)\ntest a ... ok\n\ntest b ... FAILED";
        let d = diff(prev, cur, 10);
        assert_eq!(d.new_lines, vec!["test a ... ok", "test b ... FAILED"]);
        assert!((d.novelty - 0.4).abs() < 1e-6, "{}", d.novelty);

        assert_eq!(diff(cur, cur, 10).novelty, 0.0);
        assert!(diff(cur, cur, 10).new_lines.is_empty());
        assert_eq!(diff("", "a\nb", 10).novelty, 1.0);
        assert_eq!(diff("a", "", 10), TextDiff::default());
        // Repeated lines count as many times as they appear.
        assert_eq!(diff("x", "x\nx", 10).new_lines, vec!["x"]);
    }

    #[test]
    fn a_500_line_dump_diff_is_capped_to_the_last_lines() {
        let dump: String = (0..500)
            .map(|i| format!("error[E0{i:03}]: something broke at src/lib.rs:{i}:1\n"))
            .collect();
        let cur = clean_capture(dump.as_bytes());
        let d = diff("$ cargo build", &cur, MAX_NEW_LINES);
        assert_eq!(d.new_lines.len(), MAX_NEW_LINES);
        assert_eq!(
            d.new_lines.last().unwrap(),
            "error[E0499]: something broke at src/lib.rs:499:1"
        );
        assert_eq!(d.novelty, 1.0);
        let again = diff(&cur, &cur, MAX_NEW_LINES);
        assert_eq!(again.novelty, 0.0);
    }
}

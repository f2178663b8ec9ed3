//! Display text for the stand-in's screens: terminal cell widths, word wrapping,
//! truncation and sanitizing of untrusted text before it is drawn.
//!
//! The width table is a small approximation of `wcwidth` (combining marks and
//! zero-width characters take no cell, East Asian wide characters and emoji take
//! two). It only has to keep every drawn row within the pane width, so that the
//! inline renderer's row count matches what the terminal shows. Nothing here
//! touches the log: prompts are logged byte for byte, never through these functions.

/// Cells a character takes in a terminal.
pub fn char_width(c: char) -> usize {
    let cp = c as u32;
    if cp == 0 {
        return 0;
    }
    if c.is_control() {
        return 0;
    }
    if is_zero_width(cp) {
        return 0;
    }
    if is_wide(cp) {
        return 2;
    }
    1
}

fn is_zero_width(cp: u32) -> bool {
    matches!(cp,
        0x0300..=0x036F
        | 0x0483..=0x0489
        | 0x0591..=0x05BD
        | 0x0610..=0x061A
        | 0x064B..=0x065F
        | 0x0E31 | 0x0E34..=0x0E3A | 0x0E47..=0x0E4E
        | 0x1AB0..=0x1AFF
        | 0x1DC0..=0x1DFF
        | 0x200B..=0x200F
        | 0x202A..=0x202E
        | 0x2060..=0x2064
        | 0x2066..=0x2069
        | 0x20D0..=0x20FF
        | 0xFE00..=0xFE0F
        | 0xFE20..=0xFE2F
        | 0xFEFF
        | 0xE0100..=0xE01EF)
}

fn is_wide(cp: u32) -> bool {
    matches!(cp,
        0x1100..=0x115F
        | 0x231A..=0x231B
        | 0x2329..=0x232A
        | 0x23E9..=0x23EC
        | 0x23F0 | 0x23F3
        | 0x25FD..=0x25FE
        | 0x2614..=0x2615
        | 0x2648..=0x2653
        | 0x26AA..=0x26AB
        | 0x26BD..=0x26BE
        | 0x26C4..=0x26C5
        | 0x26CE | 0x26D4 | 0x26EA
        | 0x26F2..=0x26F5
        | 0x26FA | 0x26FD | 0x2705
        | 0x270A..=0x270B
        | 0x2728 | 0x274C | 0x274E
        | 0x2753..=0x2755
        | 0x2757
        | 0x2795..=0x2797
        | 0x27B0 | 0x27BF
        | 0x2B1B..=0x2B1C
        | 0x2B50 | 0x2B55
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xA960..=0xA97F
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE10..=0xFE19
        | 0xFE30..=0xFE6F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x16FE0..=0x16FE4
        | 0x17000..=0x18CFF
        | 0x1B000..=0x1B2FF
        | 0x1F004 | 0x1F0CF | 0x1F18E
        | 0x1F191..=0x1F19A
        | 0x1F200..=0x1F251
        | 0x1F300..=0x1F64F
        | 0x1F680..=0x1F6FF
        | 0x1F7E0..=0x1F7EB
        | 0x1F90C..=0x1F9FF
        | 0x1FA70..=0x1FAFF
        | 0x20000..=0x3FFFD)
}

/// Cells a string takes (no escape sequences expected).
pub fn str_width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

/// Makes untrusted text safe to draw on one row: a tab becomes four spaces, other
/// control characters (C0, DEL, C1) become `�`, bidi overrides are dropped. Newlines
/// are the caller's business and must be split off before.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => out.push_str("    "),
            '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => {}
            '\u{2028}' | '\u{2029}' => out.push(' '),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Splits a line into alternating runs of spaces and of other characters.
fn runs(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space: Option<bool> = None;
    for (i, c) in line.char_indices() {
        let space = c == ' ';
        match in_space {
            Some(s) if s != space => {
                out.push(&line[start..i]);
                start = i;
            }
            _ => {}
        }
        in_space = Some(space);
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

/// Word-wraps one logical line (no `\n`) into rows of at most `width` cells.
/// Words longer than a row are broken; spaces at a break are dropped; an empty
/// line gives one empty row.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    let width = width.max(2);
    let mut rows = Vec::new();
    let mut cur = String::new();
    let mut cur_w = 0;
    for run in runs(line) {
        let w = str_width(run);
        if cur_w + w <= width {
            cur.push_str(run);
            cur_w += w;
            continue;
        }
        if run.starts_with(' ') {
            rows.push(std::mem::take(&mut cur).trim_end().to_string());
            cur_w = 0;
            continue;
        }
        if cur_w > 0 {
            rows.push(std::mem::take(&mut cur).trim_end().to_string());
            cur_w = 0;
        }
        for c in run.chars() {
            let cw = char_width(c);
            if cur_w + cw > width && cur_w > 0 {
                rows.push(std::mem::take(&mut cur));
                cur_w = 0;
            }
            cur.push(c);
            cur_w += cw;
        }
    }
    if !cur.is_empty() || rows.is_empty() {
        rows.push(cur.trim_end().to_string());
    }
    rows
}

/// Breaks a line into rows of at most `width` cells at any character, keeping every
/// character (spaces included), so the rows concatenate back to the line.
pub fn hard_wrap(line: &str, width: usize) -> Vec<String> {
    let width = width.max(2);
    let mut rows = Vec::new();
    let mut cur = String::new();
    let mut cur_w = 0;
    for c in line.chars() {
        let cw = char_width(c);
        if cur_w + cw > width && cur_w > 0 {
            rows.push(std::mem::take(&mut cur));
            cur_w = 0;
        }
        cur.push(c);
        cur_w += cw;
    }
    rows.push(cur);
    rows
}

/// Cuts `s` to at most `width` cells, ending with `…` when something was cut.
pub fn truncate(s: &str, width: usize) -> String {
    if str_width(s) <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = char_width(c);
        if w + cw > width - 1 {
            break;
        }
        out.push(c);
        w += cw;
    }
    out.push('…');
    out
}

/// Pads `s` with spaces to exactly `width` cells (truncating first if needed).
pub fn pad(s: &str, width: usize) -> String {
    let s = truncate(s, width);
    let w = str_width(&s);
    format!("{s}{}", " ".repeat(width - w))
}

/// Centers `s` in `width` cells (truncating first if needed).
pub fn center(s: &str, width: usize) -> String {
    let s = truncate(s, width);
    let w = str_width(&s);
    let left = (width - w) / 2;
    format!("{}{s}{}", " ".repeat(left), " ".repeat(width - w - left))
}

/// Wraps multi-line text with a first-row prefix and a continuation prefix of the
/// same width, e.g. `● ` and two spaces for an answer.
pub fn wrap_block(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
    let inner = width.saturating_sub(str_width(first)).max(2);
    let mut out = Vec::new();
    for line in text.split('\n') {
        for row in wrap(&sanitize(line), inner) {
            let prefix = if out.is_empty() { first } else { rest };
            out.push(format!("{prefix}{row}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn widths_of_common_characters() {
        assert_eq!(str_width("abc"), 3);
        assert_eq!(str_width("❯ ─✻·…"), 6);
        assert_eq!(str_width("日本"), 4);
        assert_eq!(str_width("e\u{301}"), 1);
        assert_eq!(str_width("🚀"), 2);
    }

    #[test]
    fn wrap_breaks_at_spaces_and_keeps_rows_within_width() {
        let rows = wrap("the quick brown fox jumps over the lazy dog", 10);
        assert_eq!(
            rows,
            vec!["the quick", "brown fox", "jumps over", "the lazy", "dog"]
        );
        for r in &rows {
            assert!(str_width(r) <= 10);
        }
    }

    #[test]
    fn wrap_breaks_long_words_and_wide_characters() {
        assert_eq!(wrap("abcdefghij", 4), vec!["abcd", "efgh", "ij"]);
        let rows = wrap("日本語のテキスト", 5);
        for r in &rows {
            assert!(str_width(r) <= 5, "{r}");
        }
        assert_eq!(rows.concat(), "日本語のテキスト");
        assert_eq!(wrap("", 10), vec![""]);
    }

    #[test]
    fn hard_wrap_keeps_every_character() {
        let line = "a  b   c ";
        assert_eq!(hard_wrap(line, 3).concat(), line);
    }

    #[test]
    fn sanitize_replaces_controls() {
        assert_eq!(sanitize("a\tb\x07c\u{202E}d"), "a    b\u{FFFD}cd");
    }

    #[test]
    fn truncate_pad_center() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(center("ab", 6), "  ab  ");
    }

    #[test]
    fn wrap_block_indents_continuations() {
        let rows = wrap_block("one two three\nfour", "● ", "  ", 9);
        assert_eq!(rows, vec!["● one two", "  three", "  four"]);
    }
}

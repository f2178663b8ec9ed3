//! Screen geometry: the live screen cut out of a capture, its horizontal rules, the input box
//! a manifest's `[layout]` describes, and the named regions rules look at.
//!
//! Everything is computed from the bottom up, the way a person reads a terminal: the live
//! part of a TUI is at the bottom, and anything above the input box is transcript, which may
//! quote any UI text at all. Rules therefore never see "the whole capture", only a region.

use std::borrow::Cow;
use std::cell::OnceCell;

use super::manifest::{Layout, Region, Selection};
use crate::ansi::{Cell, SgrState};

/// At most this many lines of a capture are examined (from the bottom). Real screens are far
/// smaller; the cap bounds the work on a pathological capture without a `height`.
pub(crate) const MAX_SCREEN_LINES: usize = 400;
/// Lines are cut to this many bytes before matching (a 10,000-column line is not a UI).
pub(crate) const MAX_LINE_BYTES: usize = 4096;
/// Minimum run of rule characters for a line to count as a horizontal rule.
const MIN_RULE_CHARS: usize = 10;

/// The live screen of one capture with its metadata.
#[derive(Debug)]
pub(crate) struct Screen<'a> {
    lines: Vec<&'a str>,
    /// The ANSI capture's lines aligned to `lines` (same index), where available.
    ansi: Vec<Option<&'a str>>,
    /// `(x, row)`; `row` may point below the last line (a blank row the capture dropped).
    cursor: Option<(usize, usize)>,
    title: &'a str,
    command: &'a str,
    rules: Vec<usize>,
}

impl<'a> Screen<'a> {
    /// `text` must already be free of escapes (the caller strips them).
    pub fn new(
        text: &'a str,
        ansi: Option<&'a str>,
        title: &'a str,
        command: &'a str,
        cursor: Option<(u32, u32)>,
        height: Option<u32>,
    ) -> Screen<'a> {
        let all = split_lines(text);
        let n = all.len();
        // Where the live screen starts in the capture, then how much of it is kept.
        let screen_top = match height {
            Some(h) if h > 0 => n.saturating_sub(h as usize),
            _ => 0,
        };
        let kept_top = screen_top.max(n.saturating_sub(MAX_SCREEN_LINES));
        let lines: Vec<&str> = all[kept_top..].to_vec();

        let cursor = cursor.and_then(|(x, y)| {
            let row = screen_top
                .saturating_add(y as usize)
                .checked_sub(kept_top)?;
            Some((x as usize, row))
        });

        let ansi = match ansi {
            Some(a) => {
                let al = split_lines(a);
                // Both captures were taken together: align them from the bottom.
                let shift = al.len() as isize - n as isize;
                (kept_top..n)
                    .map(|t| {
                        let i = t as isize + shift;
                        if i >= 0 {
                            al.get(i as usize).copied()
                        } else {
                            None
                        }
                    })
                    .collect()
            }
            None => Vec::new(),
        };

        let rules = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| is_rule(l))
            .map(|(i, _)| i)
            .collect();

        Screen {
            lines,
            ansi,
            cursor,
            title: title.trim(),
            command: command.trim(),
            rules,
        }
    }

    pub fn lines(&self) -> &[&'a str] {
        &self.lines
    }

    fn last_nonblank(&self) -> Option<usize> {
        self.lines.iter().rposition(|l| !is_blank(l))
    }

    fn is_rule_row(&self, row: usize) -> bool {
        self.rules.binary_search(&row).is_ok()
    }

    /// The ANSI cells of `row`, or `None` when the ANSI capture does not cover it or does
    /// not show the same characters as the plain capture.
    fn ansi_cells(&self, row: usize) -> Option<Vec<Cell>> {
        let line = self.ansi.get(row).copied().flatten()?;
        let mut st = SgrState::default();
        // tmux carries attributes across lines, so replay the lines above this one.
        for prev in self.ansi[..row].iter().flatten() {
            st.skip_line(prev);
        }
        let cells = st.cells(line);
        let visible: String = cells.iter().map(|c| c.ch).collect();
        (visible.trim_end() == self.lines[row]).then_some(cells)
    }
}

/// Splits a capture into lines: one trailing newline ends the last line rather than
/// starting an empty one; trailing whitespace (tmux pads nothing, but `-e` may) is dropped;
/// overlong lines are cut at a character boundary.
fn split_lines(text: &str) -> Vec<&str> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    text.split('\n')
        .map(|l| truncate(l.trim_end(), MAX_LINE_BYTES))
        .collect()
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(crate) fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// A horizontal rule: a line drawn with box-drawing horizontals. Claude Code frames its input
/// box and its permission prompts with full-width `─` rules; a few characters of text may be
/// drawn into a rule (a label), so 70% is enough.
pub(crate) fn is_rule(line: &str) -> bool {
    let t = line.trim();
    let Some(first) = t.chars().next() else {
        return false;
    };
    if !matches!(first, '─' | '━' | '═') {
        return false;
    }
    let (mut rule, mut total) = (0usize, 0usize);
    for c in t.chars() {
        total += 1;
        if matches!(c, '─' | '━' | '═') {
            rule += 1;
        }
    }
    rule >= MIN_RULE_CHARS && rule * 10 >= total * 7
}

/// A located input box.
#[derive(Debug)]
pub(crate) struct InputBox<'a> {
    /// First row that belongs to the box (its top rule when framed).
    pub top: usize,
    /// First row below the box (below its bottom rule when framed).
    pub below: usize,
    /// The typed text, one entry per box line, ghost text and padding removed.
    pub text: Vec<Cow<'a, str>>,
}

impl InputBox<'_> {
    pub fn typed(&self) -> String {
        let mut s = String::new();
        for l in self.text.iter().filter(|l| !l.is_empty()) {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(l);
        }
        s
    }
}

fn find_input<'a>(screen: &Screen<'a>, layout: &Layout) -> Option<InputBox<'a>> {
    let prompt = layout.input_prompt.as_ref()?;
    let lines = &screen.lines;
    let last = screen.last_nonblank()?;
    if layout.input_at_bottom {
        // A shell prompt is live only where the cursor is: a running command moves the
        // cursor below its output (column 0), away from any prompt-looking line. A cursor one
        // row off but exactly at the end of the last line is the same prompt seen through a
        // capture that gained or lost a trailing line.
        if let Some((x, row)) = screen.cursor {
            let end = lines[last].chars().count();
            let at_end = x > 0 && (x == end || x == end + 1);
            if row != last && !(at_end && row.abs_diff(last) == 1) {
                return None;
            }
        }
    }
    let limit = if layout.input_at_bottom {
        1
    } else {
        layout.input_search
    };
    let candidates = (0..=last)
        .rev()
        .filter(|&r| !is_blank(lines[r]))
        .take(limit);
    for row in candidates {
        let line = lines[row];
        let Some(m) = prompt.find(line) else {
            continue;
        };
        if m.start() != 0 {
            continue;
        }
        if layout
            .input_exclude
            .as_ref()
            .is_some_and(|x| x.is_match(line))
        {
            continue;
        }
        let (top, end, below) = if layout.input_framed {
            if row == 0 || !screen.is_rule_row(row - 1) {
                continue;
            }
            let Some(close) = (row + 1..lines.len()).find(|&r| screen.is_rule_row(r)) else {
                continue;
            };
            (row - 1, close, close + 1)
        } else if layout.input_at_bottom {
            (row, row + 1, row + 1)
        } else {
            let mut end = row + 1;
            while end < lines.len()
                && !is_blank(lines[end])
                && layout
                    .input_continuation
                    .as_ref()
                    .is_none_or(|c| c.is_match(lines[end]))
            {
                end += 1;
            }
            (row, end, end)
        };
        let text = box_text(screen, layout, row, m.end(), end);
        return Some(InputBox { top, below, text });
    }
    None
}

/// The typed text of box rows `row..end`; the first row's text starts at byte `start`.
fn box_text<'a>(
    screen: &Screen<'a>,
    layout: &Layout,
    row: usize,
    start: usize,
    end: usize,
) -> Vec<Cow<'a, str>> {
    let lines = &screen.lines;
    let prompt_chars = lines[row][..start].chars().count();
    let mut text: Vec<Cow<'a, str>> = Vec::with_capacity(end - row);
    let mut ghost_checked = !screen.ansi.is_empty();
    for (r, &line) in lines.iter().enumerate().take(end).skip(row) {
        let skip = if r == row { prompt_chars } else { 0 };
        let typed: Cow<'a, str> = match ghost_checked.then(|| screen.ansi_cells(r)).flatten() {
            Some(cells) => Cow::Owned(
                cells
                    .iter()
                    .enumerate()
                    .skip(skip)
                    .map(|(i, c)| {
                        // The cursor block drawn over the first ghost character is ghost too.
                        let over_ghost =
                            c.inverse && cells.get(i + 1).is_some_and(|n| n.is_ghostly());
                        if c.is_ghostly() || over_ghost {
                            ' '
                        } else {
                            c.ch
                        }
                    })
                    .collect(),
            ),
            None => {
                // Without a usable ANSI line for every row, fall back to the plain text.
                ghost_checked = false;
                Cow::Borrowed(if r == row { &line[start..] } else { line })
            }
        };
        let typed = match &layout.input_trim {
            Some(t) => match t.replace_all(&typed, "") {
                Cow::Borrowed(_) => typed,
                Cow::Owned(s) => Cow::Owned(s),
            },
            None => typed,
        };
        text.push(match typed {
            Cow::Borrowed(s) => Cow::Borrowed(s.trim()),
            Cow::Owned(s) => Cow::Owned(s.trim().to_string()),
        });
    }
    if !ghost_checked && !layout.placeholders.is_empty() {
        let joined = text
            .iter()
            .filter(|l| !l.is_empty())
            .map(|l| l.as_ref())
            .collect::<Vec<_>>()
            .join(" ");
        if layout.placeholders.iter().any(|p| p.is_match(&joined)) {
            text.clear();
        }
    }
    text
}

/// One manifest's reading of a screen: its input box, found once, on first use.
pub(crate) struct View<'s, 'a> {
    pub screen: &'s Screen<'a>,
    layout: &'s Layout,
    input: OnceCell<Option<InputBox<'a>>>,
}

/// The lines of a region as a clause sees them.
pub(crate) enum RegionLines<'v> {
    Absent,
    Rows(&'v [&'v str]),
    Typed(&'v [Cow<'v, str>]),
    One(&'v str),
}

impl<'v> RegionLines<'v> {
    fn for_each(&self, mut f: impl FnMut(&'v str)) {
        match self {
            RegionLines::Absent => {}
            RegionLines::Rows(r) => r.iter().for_each(|l| f(l)),
            RegionLines::Typed(t) => t.iter().for_each(|l| f(l.as_ref())),
            RegionLines::One(l) => f(l),
        }
    }
}

/// The non-blank lines a selection picks out of a region (`None`: region absent).
pub(crate) enum Selected<'v> {
    Lines(Vec<&'v str>),
    Joined(String),
}

impl Selected<'_> {
    pub fn iter(&self) -> Box<dyn Iterator<Item = &str> + '_> {
        match self {
            Selected::Lines(v) => Box::new(v.iter().copied()),
            Selected::Joined(s) => Box::new((!s.is_empty()).then_some(s.as_str()).into_iter()),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Selected::Lines(v) => v.is_empty(),
            Selected::Joined(s) => s.is_empty(),
        }
    }
}

impl<'s, 'a> View<'s, 'a> {
    pub fn new(screen: &'s Screen<'a>, layout: &'s Layout) -> Self {
        View {
            screen,
            layout,
            input: OnceCell::new(),
        }
    }

    pub fn input(&self) -> Option<&InputBox<'a>> {
        self.input
            .get_or_init(|| find_input(self.screen, self.layout))
            .as_ref()
    }

    /// Rows of the last turn: below the last `turn_start` line above the box, down to it.
    fn last_turn(&self, b: &InputBox<'_>) -> (usize, usize) {
        let lines = self.screen.lines();
        let start = self
            .layout
            .turn_start
            .as_ref()
            .and_then(|t| (0..b.top).rev().find(|&r| t.is_match(lines[r])))
            .map_or(0, |r| r + 1);
        (start, b.top)
    }

    /// The lines of `region`; `shell` is the shell manifest's view, for the shell regions.
    pub fn region<'v>(
        &'v self,
        region: Region,
        shell: Option<&'v View<'s, 'a>>,
    ) -> RegionLines<'v> {
        let s = self.screen;
        let lines: &'v [&'v str] = s.lines();
        match region {
            Region::Screen => RegionLines::Rows(lines),
            Region::AfterLastRule => match s.rules.last() {
                Some(&r) => RegionLines::Rows(&lines[r + 1..]),
                None => RegionLines::Absent,
            },
            Region::Title => one(s.title),
            Region::Command => one(s.command),
            Region::CursorLine => match s.cursor.and_then(|(_, row)| lines.get(row)) {
                Some(l) => RegionLines::One(l),
                None => RegionLines::Absent,
            },
            Region::Input => match self.input() {
                Some(b) => RegionLines::Typed(&b.text),
                None => RegionLines::Absent,
            },
            Region::AboveInput => match self.input() {
                Some(b) => RegionLines::Rows(&lines[..b.top]),
                None => RegionLines::Absent,
            },
            Region::Footer => match self.input() {
                Some(b) => RegionLines::Rows(&lines[b.below.min(lines.len())..]),
                None => RegionLines::Absent,
            },
            Region::LastTurn => match self.input() {
                Some(b) => {
                    let (from, to) = self.last_turn(b);
                    RegionLines::Rows(&lines[from..to])
                }
                None => RegionLines::Absent,
            },
            Region::ShellPrompt => match shell {
                Some(v) => v.region(Region::Input, None),
                None => RegionLines::Absent,
            },
            Region::ShellOutput => match shell {
                Some(v) => v.region(Region::LastTurn, None),
                None => RegionLines::Absent,
            },
        }
    }

    /// Every line of `region`, blank ones included (`None`: region absent).
    pub fn raw<'v>(
        &'v self,
        region: Region,
        shell: Option<&'v View<'s, 'a>>,
    ) -> Option<Vec<&'v str>> {
        let lines = self.region(region, shell);
        if matches!(lines, RegionLines::Absent) {
            return None;
        }
        let mut all = Vec::new();
        lines.for_each(|l| all.push(l));
        Some(all)
    }

    /// Applies a selection (`first`/`last` non-blank lines, `joined`) to a region.
    pub fn select<'v>(
        &'v self,
        sel: &Selection,
        shell: Option<&'v View<'s, 'a>>,
    ) -> Option<Selected<'v>> {
        let lines = self.region(sel.region, shell);
        if matches!(lines, RegionLines::Absent) {
            return None;
        }
        let mut picked: Vec<&'v str> = Vec::new();
        lines.for_each(|l| {
            if !is_blank(l) {
                picked.push(l);
            }
        });
        if let Some(n) = sel.first {
            picked.truncate(n);
        }
        if let Some(n) = sel.last {
            let cut = picked.len().saturating_sub(n);
            picked.drain(..cut);
        }
        Some(if sel.joined {
            Selected::Joined(
                picked
                    .iter()
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        } else {
            Selected::Lines(picked)
        })
    }
}

fn one(s: &str) -> RegionLines<'_> {
    if s.is_empty() {
        RegionLines::Absent
    } else {
        RegionLines::One(s)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::detect::manifest::Manifest;

    fn layout(extra: &str) -> Layout {
        let text = format!(
            "id = \"t\"\nversion = 1\nagent = \"shell\"\nnote = \"n\"\n[layout]\n{extra}\n"
        );
        Manifest::parse("t.toml", &text).unwrap().layout
    }

    fn claude_layout() -> Layout {
        layout("input_prompt = '^❯[ \\x{a0}]?'\ninput_framed = true\nturn_start = '^❯ \\S'")
    }

    const RULE: &str = "────────────────────────────────────────";

    #[test]
    fn live_screen_is_the_last_height_lines() {
        let text = "old 1\nold 2\nscreen 1\nscreen 2\n";
        let s = Screen::new(text, None, "", "", Some((0, 1)), Some(2));
        assert_eq!(s.lines(), ["screen 1", "screen 2"]);
        assert_eq!(s.cursor, Some((0, 1)));
    }

    #[test]
    fn huge_captures_are_cut_from_the_bottom() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let s = Screen::new(&text, None, "", "", None, None);
        assert_eq!(s.lines().len(), MAX_SCREEN_LINES);
        assert_eq!(s.lines().last(), Some(&"line 4999"));
        let wide = "é".repeat(10_000);
        let s = Screen::new(&wide, None, "", "", None, Some(1));
        assert!(s.lines()[0].len() <= MAX_LINE_BYTES);
    }

    #[test]
    fn rules_need_a_long_run_of_rule_characters() {
        assert!(is_rule(RULE));
        // A label drawn into an 80-column rule (a redraw left one in a fixture).
        let labelled = format!("─────migrating─users{}", "─".repeat(60));
        assert!(is_rule(&labelled));
        assert!(!is_rule("│ ──────────────────────────── │"));
        assert!(!is_rule("──── x"));
        assert!(!is_rule("╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌"));
    }

    #[test]
    fn framed_box_footer_and_above() {
        let text = format!("❯ hello\n\n● answer\n\n{RULE}\n❯\u{a0}draft text\n  second line\n{RULE}\n  ? for shortcuts\n");
        let s = Screen::new(&text, None, "", "", None, None);
        let l = claude_layout();
        let v = View::new(&s, &l);
        let b = v.input().unwrap();
        assert_eq!(b.typed(), "draft text\nsecond line");
        let RegionLines::Rows(footer) = v.region(Region::Footer, None) else {
            panic!("footer")
        };
        assert_eq!(footer, ["  ? for shortcuts"]);
        let RegionLines::Rows(turn) = v.region(Region::LastTurn, None) else {
            panic!("last turn")
        };
        assert_eq!(turn, ["", "● answer", ""]);
    }

    #[test]
    fn an_unframed_prompt_is_not_claudes_input_box() {
        // A quoted prompt in the transcript, no rules around it.
        let text = "● The screen shows:\n\n❯ 1. Yes\n  2. No\n";
        let s = Screen::new(text, None, "", "", None, None);
        let l = claude_layout();
        assert!(View::new(&s, &l).input().is_none());
    }

    #[test]
    fn ghost_text_in_the_ansi_capture_is_not_typed() {
        let text = format!("{RULE}\n❯\u{a0}Try \"fix lint\"\n{RULE}\n");
        let ansi =
            format!("{RULE}\n❯\u{a0}\u{1b}[7mT\u{1b}[0;2mry \"fix lint\"\u{1b}[0m\n{RULE}\n");
        let l = claude_layout();
        let s = Screen::new(&text, Some(&ansi), "", "", None, None);
        assert_eq!(View::new(&s, &l).input().unwrap().typed(), "");
        // Without the ANSI capture the same text reads as typed.
        let s = Screen::new(&text, None, "", "", None, None);
        assert_eq!(
            View::new(&s, &l).input().unwrap().typed(),
            "Try \"fix lint\""
        );
        // A misaligned ANSI capture is ignored rather than trusted.
        let s = Screen::new(&text, Some("unrelated\n\n\n"), "", "", None, None);
        assert_eq!(
            View::new(&s, &l).input().unwrap().typed(),
            "Try \"fix lint\""
        );
    }

    #[test]
    fn shell_prompt_must_hold_the_cursor() {
        let l = layout("input_prompt = '^\\S+@\\S+ \\S+ % ?'\ninput_at_bottom = true\nturn_start = '^\\S+@\\S+ \\S+ %'");
        let text = "me@mac proj % make\nbuilding\nme@mac proj %\n";
        let s = Screen::new(text, None, "", "", Some((14, 2)), Some(3));
        let v = View::new(&s, &l);
        assert_eq!(v.input().unwrap().typed(), "");
        let RegionLines::Rows(out) = v.region(Region::LastTurn, None) else {
            panic!("output")
        };
        assert_eq!(out, ["building"]);
        // Same text, cursor on the row below: the prompt is not live.
        let s = Screen::new(text, None, "", "", Some((0, 3)), Some(4));
        assert!(View::new(&s, &l).input().is_none());
    }

    #[test]
    fn selections_take_first_or_last_nonblank_lines() {
        let text = "a\n\nb\nc\n\nd\n";
        let s = Screen::new(text, None, "", "", None, None);
        let l = claude_layout();
        let v = View::new(&s, &l);
        let sel = |first, last, joined| Selection {
            region: Region::Screen,
            first,
            last,
            joined,
        };
        let got: Vec<String> = v
            .select(&sel(None, Some(2), false), None)
            .unwrap()
            .iter()
            .map(String::from)
            .collect();
        assert_eq!(got, ["c", "d"]);
        let got: Vec<String> = v
            .select(&sel(Some(2), None, true), None)
            .unwrap()
            .iter()
            .map(String::from)
            .collect();
        assert_eq!(got, ["a b"]);
        assert!(v.select(&sel(None, None, false), None).is_some());
        let absent = Selection {
            region: Region::AfterLastRule,
            first: None,
            last: None,
            joined: false,
        };
        assert!(v.select(&absent, None).is_none());
    }
}

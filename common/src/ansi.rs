//! The one reader of terminal escapes in pane captures, built on `vte`'s parser (the DEC
//! VT500-series state machine). [`crate::pane_text`] uses it to strip a capture to text (or
//! to text plus SGR), [`crate::detect`] to follow the graphic state ([`SgrState`]) that tells
//! typed text from dim "ghost" text.
//!
//! What a line yields: its printable characters and tabs, and every well-formed SGR
//! (`ESC [ … m` without private markers). Everything else — other CSI (`ESC [ ? 25 l`), OSC
//! titles and links (BEL- or ST-terminated), DCS/SOS/PM/APC strings, charset designations
//! (`ESC ( B`), two-byte escapes, C0 and C1 controls — yields nothing, and nothing here
//! interprets it. Each line gets a fresh parser, so a truncated or stray sequence (an OSC
//! opener with no terminator) ends with its line instead of swallowing the screen.

use std::fmt::Write as _;

use vte::{Params, Parser, Perform};

/// What the parser hands on.
pub(crate) trait Sink {
    /// A printable character, a tab, or the `\n` between two lines.
    fn text(&mut self, c: char);
    /// A select-graphic-rendition sequence.
    fn sgr(&mut self, _params: &Params) {}
}

/// Adapts a [`Sink`] to `vte`'s callbacks, dropping what the sink does not want.
struct Performer<'a, S>(&'a mut S);

impl<S: Sink> Perform for Performer<'_, S> {
    fn print(&mut self, c: char) {
        if !c.is_control() {
            self.0.text(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if byte == b'\t' {
            self.0.text('\t');
        }
    }

    fn csi_dispatch(&mut self, params: &Params, intermediates: &[u8], ignore: bool, c: char) {
        if c == 'm' && intermediates.is_empty() && !ignore {
            self.0.sgr(params);
        }
    }
}

/// Parses `text`, line by line, into `sink`.
pub(crate) fn parse<S: Sink>(text: &str, sink: &mut S) {
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            sink.text('\n');
        }
        parse_line(line, sink);
    }
}

/// Parses one line (a `\n` in it is dropped like any other control byte).
pub(crate) fn parse_line<S: Sink>(line: &str, sink: &mut S) {
    if !line.contains('\x1b') {
        // The usual line: no escapes, so no parser.
        for c in line.chars() {
            if c == '\t' || !c.is_control() {
                sink.text(c);
            }
        }
        return;
    }
    Parser::new().advance(&mut Performer(sink), line.as_bytes());
}

/// Text without escapes or control characters other than `\n` and `\t`. With `keep_sgr`,
/// SGR sequences stay (rewritten in their plain form: `ESC [ 2 m`, `ESC [ 38 : 5 : 8 m`).
pub(crate) fn strip(text: &str, keep_sgr: bool) -> String {
    struct Out {
        text: String,
        keep_sgr: bool,
    }
    impl Sink for Out {
        fn text(&mut self, c: char) {
            self.text.push(c);
        }
        fn sgr(&mut self, params: &Params) {
            if self.keep_sgr {
                push_sgr(&mut self.text, params);
            }
        }
    }
    let mut out = Out {
        text: String::with_capacity(text.len()),
        keep_sgr,
    };
    parse(text, &mut out);
    out.text
}

/// Writes an SGR sequence: parameters separated by `;`, sub-parameters by `:`.
fn push_sgr(out: &mut String, params: &Params) {
    out.push_str("\x1b[");
    for (i, param) in params.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        for (j, v) in param.iter().enumerate() {
            if j > 0 {
                out.push(':');
            }
            let _ = write!(out, "{v}");
        }
    }
    out.push('m');
}

/// The attributes that matter for ghost detection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SgrState {
    faint: bool,
    inverse: bool,
    /// The foreground is a grey that terminals and shells use for suggestions.
    grey: bool,
}

/// One visible character with the attributes it was drawn with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cell {
    pub ch: char,
    pub faint: bool,
    pub inverse: bool,
    pub grey: bool,
}

impl Cell {
    /// Drawn the way placeholders and autosuggestions are drawn.
    pub fn is_ghostly(&self) -> bool {
        self.faint || self.grey
    }
}

/// Collects the cells of a line while the state follows its SGR sequences.
struct Cells<'a, F> {
    state: &'a mut SgrState,
    emit: F,
}

impl<F: FnMut(Cell)> Sink for Cells<'_, F> {
    fn text(&mut self, c: char) {
        if c != '\t' && c != '\n' {
            let st = *self.state;
            (self.emit)(Cell {
                ch: c,
                faint: st.faint,
                inverse: st.inverse,
                grey: st.grey,
            });
        }
    }

    fn sgr(&mut self, params: &Params) {
        self.state.apply(params);
    }
}

/// An extended colour (`38;5;n`, `38;2;r;g;b` and their `:` forms).
pub(crate) enum Colour {
    Indexed(u16),
    Rgb(u16, u16, u16),
}

impl Colour {
    fn is_grey(&self) -> bool {
        match *self {
            Colour::Indexed(n) => is_grey_256(n),
            Colour::Rgb(r, g, b) => is_grey_rgb(r, g, b),
        }
    }
}

impl SgrState {
    /// Advances the state over `line` without collecting cells.
    pub fn skip_line(&mut self, line: &str) {
        self.walk(line, |_| {});
    }

    /// The visible cells of `line`, advancing the state. tmux carries the graphic state
    /// across lines, so callers feed lines in screen order through one state.
    pub fn cells(&mut self, line: &str) -> Vec<Cell> {
        let mut out = Vec::with_capacity(line.len().min(512));
        self.walk(line, |c| out.push(c));
        out
    }

    fn walk(&mut self, line: &str, emit: impl FnMut(Cell)) {
        parse_line(line, &mut Cells { state: self, emit });
    }

    fn apply(&mut self, params: &Params) {
        let mut rest = params.iter();
        while let Some(p) = rest.next() {
            match p[0] {
                0 => *self = SgrState::default(),
                2 => self.faint = true,
                22 => self.faint = false,
                7 => self.inverse = true,
                27 => self.inverse = false,
                30..=37 | 39 | 91..=97 => self.grey = false,
                90 => self.grey = true,
                38 => {
                    if let Some(c) = extended_colour(p, &mut rest) {
                        self.grey = c.is_grey();
                    }
                }
                // Background and underline colours carry parameters that must not be read
                // as attributes.
                48 | 58 => {
                    extended_colour(p, &mut rest);
                }
                _ => {}
            }
        }
    }
}

/// The colour that follows a 38/48/58: from its own sub-parameters (`38:2::r:g:b`), or from
/// the parameters after it (`38;5;n`), which are consumed.
pub(crate) fn extended_colour<'a>(
    p: &[u16],
    rest: &mut impl Iterator<Item = &'a [u16]>,
) -> Option<Colour> {
    if p.len() > 1 {
        let at = |i: usize| p.get(i).copied().unwrap_or(0);
        return match p[1] {
            5 => Some(Colour::Indexed(at(2))),
            // `38:2:r:g:b` or, with a colour-space id, `38:2:cs:r:g:b`.
            2 if p.len() >= 6 => Some(Colour::Rgb(at(3), at(4), at(5))),
            2 => Some(Colour::Rgb(at(2), at(3), at(4))),
            _ => None,
        };
    }
    let mut next = || rest.next().map_or(0, |q| q[0]);
    match next() {
        5 => Some(Colour::Indexed(next())),
        2 => Some(Colour::Rgb(next(), next(), next())),
        _ => None,
    }
}

/// Colour 8 (bright black, zsh-autosuggestions' default `fg=8`), fish's `555` (59) and the
/// mid greys of the 256-colour ramp.
fn is_grey_256(n: u16) -> bool {
    n == 8 || n == 59 || (237..=246).contains(&n)
}

fn is_grey_rgb(r: u16, g: u16, b: u16) -> bool {
    let (lo, hi) = (r.min(g).min(b), r.max(g).max(b));
    hi - lo <= 12 && (64..=160).contains(&hi)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn plain(s: &str) -> String {
        strip(s, false)
    }

    #[test]
    fn faint_and_reset() {
        let mut st = SgrState::default();
        let cells = st.cells("\u{1b}[1m›\u{1b}[0m \u{1b}[2mAsk\u{1b}[0mX");
        let ghost: String = cells
            .iter()
            .filter(|c| c.is_ghostly())
            .map(|c| c.ch)
            .collect();
        let typed: String = cells
            .iter()
            .filter(|c| !c.is_ghostly())
            .map(|c| c.ch)
            .collect();
        assert_eq!(ghost, "Ask");
        assert_eq!(typed, "› X");
    }

    #[test]
    fn state_carries_across_lines() {
        let mut st = SgrState::default();
        st.skip_line("\u{1b}[2mdim to the end");
        let cells = st.cells("still dim");
        assert!(cells.iter().all(|c| c.faint));
    }

    #[test]
    fn bright_black_and_256_grey_are_ghostly_but_colours_are_not() {
        let mut st = SgrState::default();
        assert!(st.cells("\u{1b}[90mx")[0].is_ghostly());
        assert!(st.cells("\u{1b}[38;5;8mx")[0].is_ghostly());
        assert!(!st.cells("\u{1b}[38;5;174mx")[0].is_ghostly());
        assert!(st.cells("\u{1b}[38;2;100;100;100mx")[0].is_ghostly());
        assert!(!st.cells("\u{1b}[38;2;200;50;50mx")[0].is_ghostly());
        // The `:` forms, with and without a colour-space id.
        assert!(st.cells("\u{1b}[38:5:8mx")[0].is_ghostly());
        assert!(st.cells("\u{1b}[0;38:2::100:100:100mx")[0].is_ghostly());
        assert!(!st.cells("\u{1b}[38:2:200:50:50mx")[0].is_ghostly());
        // A background colour's parameters are not attributes: 48;5;2 is not "faint".
        assert!(!st.cells("\u{1b}[0;48;5;2mx")[0].is_ghostly());
        assert!(!st.cells("\u{1b}[0;48:5:2mx")[0].is_ghostly());
    }

    #[test]
    fn osc_and_garbage_are_skipped() {
        assert_eq!(plain("a\u{1b}]0;title\u{7}b\u{1b}[31mc\u{1}d"), "abcd");
        assert_eq!(plain("x\u{1b}"), "x");
        assert_eq!(plain("x\u{1b}[123456789012345678901234567890"), "x");
    }

    #[test]
    fn charset_designations_leave_nothing() {
        // tmux ends lines with `ESC ( B` (G0 = ASCII); other designations and ESC # / ESC %.
        for seq in [
            "\x1b(B", "\x1b)0", "\x1b(0", "\x1b*A", "\x1b+B", "\x1b#8", "\x1b%G",
        ] {
            assert_eq!(plain(&format!("a{seq}b")), "ab", "{seq:?}");
            assert_eq!(strip(&format!("a{seq}b"), true), "ab", "{seq:?}");
        }
        let mut st = SgrState::default();
        let cells: String = st.cells("\x1b[2mx\x1b(By").iter().map(|c| c.ch).collect();
        assert_eq!(cells, "xy");
    }

    #[test]
    fn osc_ends_at_bel_or_st() {
        assert_eq!(plain("a\x1b]0;title\x07b"), "ab");
        assert_eq!(plain("a\x1b]2;title\x1b\\b"), "ab");
        // An OSC 8 hyperlink keeps its text and loses its target.
        assert_eq!(
            plain("see \x1b]8;;https://x.example/a?b=c\x1b\\the docs\x1b]8;;\x1b\\."),
            "see the docs."
        );
        // Neither terminator: the OSC ends with its line, not with the screen.
        assert_eq!(plain("a\x1b]0;no end\nb"), "a\nb");
        // DCS, SOS, PM and APC strings too.
        for opener in ["\x1bP", "\x1bX", "\x1b^", "\x1b_"] {
            assert_eq!(plain(&format!("a{opener}1$r0m\x1b\\b")), "ab", "{opener:?}");
            assert_eq!(plain(&format!("a{opener}payload\nb")), "a\nb", "{opener:?}");
        }
    }

    #[test]
    fn private_csi_is_dropped_and_never_taken_for_sgr() {
        let s = "\x1b[?25l\x1b[?2004h\x1b[>4;2m\x1b[=1c\x1b[<0;1;1M\x1b[>0qx\x1b[?1049l";
        assert_eq!(plain(s), "x");
        assert_eq!(strip(s, true), "x");
        let mut st = SgrState::default();
        assert!(!st.cells("\x1b[>2mx")[0].faint);
        // Well-formed SGR is kept in its plain form.
        assert_eq!(
            strip("\x1b[mA\x1b[2;38:5:8mB\x1b[0m", true),
            "\x1b[0mA\x1b[2;38:5:8mB\x1b[0m"
        );
    }

    /// Sequences of every kind, whole: each must leave nothing, and so must every prefix of
    /// it (a capture cut mid-sequence).
    const SEQUENCES: &[&str] = &[
        "\x1b[31m",
        "\x1b[38;2;10;20;30m",
        "\x1b[38:2::10:20:30m",
        "\x1b[?25l",
        "\x1b[>4;2m",
        "\x1b[12;40H",
        "\x1b[2 q",
        "\x1b(B",
        "\x1b#8",
        "\x1b7",
        "\x1bM",
        "\x1b]0;title\x07",
        "\x1b]8;;https://example.com\x1b\\",
        "\x1bP1$r0m\x1b\\",
        "\x1b_Gf=100;AAAA\x1b\\",
        "\x1b^pm\x1b\\",
    ];

    #[test]
    fn truncated_sequences_never_leak() {
        for seq in SEQUENCES {
            for cut in (1..=seq.len()).filter(|&n| seq.is_char_boundary(n)) {
                let part = &seq[..cut];
                for keep in [false, true] {
                    let out = strip(&format!("x{part}"), keep);
                    assert_eq!(plain(&out), "x", "{part:?} keep_sgr={keep}");
                }
                let cells = SgrState::default().cells(&format!("x{part}"));
                assert_eq!(cells.len(), 1, "{part:?}");
            }
            assert_eq!(plain(&format!("{seq}z")), "z", "{seq:?}");
        }
    }

    #[test]
    fn malformed_input_never_panics_or_leaks_controls() {
        let many_params = format!("\x1b[{}m", "1;".repeat(100));
        let huge_param = format!("\x1b[{}m", "9".repeat(100));
        let long_osc = format!("\x1b]0;{}\x07", "t".repeat(100_000));
        let cases = [
            "\x1b\x1b\x1b[",
            "\x1b[\x1b[31mx",
            "\x1b[31\u{e9}m x",
            "\x1b\u{e9}x",
            "\x1b[\x18x",
            "\x1b]0;\x1a x",
            "\x1bP\x1b[31mx",
            "\x1b[1;2;3\t4m x",
            "\u{90}dcs\u{9c}x",
            "\x1b[::::;;;;m x",
            &many_params,
            &huge_param,
            &long_osc,
        ];
        for case in cases {
            for keep in [false, true] {
                let out = strip(case, keep);
                assert!(
                    !out.chars()
                        .any(|c| c.is_control() && c != '\t' && c != '\x1b'),
                    "{case:?}"
                );
                if !keep {
                    assert!(!out.contains('\x1b'), "{case:?}");
                }
                assert!(plain(&out).len() <= case.len(), "{case:?}");
            }
            SgrState::default().cells(case);
        }
        // Over 32 parameters is garbage, not SGR: not kept, not applied.
        assert_eq!(strip(&format!("{many_params}x"), true), "x");
        let mut st = SgrState::default();
        assert!(!st.cells(&format!("\x1b[{}2mx", "1;".repeat(40)))[0].faint);
    }
}

//! A pane capture with its colours as HTML, for the dashboard: runs of text in `<span>`s
//! whose inline style follows the SGR state (colours from the 16-colour palette, the
//! 256-colour cube and greys, or 24-bit; bold, faint, italic, underline, strike-through,
//! inverse), everything else escaped. Pure.
//!
//! The escapes are read by [`crate::ansi`], the one reader; this module only keeps the
//! graphic state and writes it out. The state carries across lines, as tmux draws it.

use std::fmt::Write as _;

use vte::Params;

use crate::ansi::{self, extended_colour, parse, Sink};

/// A foreground or background colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Colour {
    Indexed(u8),
    Rgb(u8, u8, u8),
}

/// xterm's default 16-colour palette.
const PALETTE: [(u8, u8, u8); 16] = [
    (0x00, 0x00, 0x00),
    (0xcd, 0x00, 0x00),
    (0x00, 0xcd, 0x00),
    (0xcd, 0xcd, 0x00),
    (0x00, 0x00, 0xee),
    (0xcd, 0x00, 0xcd),
    (0x00, 0xcd, 0xcd),
    (0xe5, 0xe5, 0xe5),
    (0x7f, 0x7f, 0x7f),
    (0xff, 0x00, 0x00),
    (0x00, 0xff, 0x00),
    (0xff, 0xff, 0x00),
    (0x5c, 0x5c, 0xff),
    (0xff, 0x00, 0xff),
    (0x00, 0xff, 0xff),
    (0xff, 0xff, 0xff),
];

impl From<ansi::Colour> for Colour {
    fn from(c: ansi::Colour) -> Self {
        let byte = |v: u16| u8::try_from(v).unwrap_or(u8::MAX);
        match c {
            ansi::Colour::Indexed(n) => Colour::Indexed(byte(n)),
            ansi::Colour::Rgb(r, g, b) => Colour::Rgb(byte(r), byte(g), byte(b)),
        }
    }
}

impl Colour {
    fn rgb(self) -> (u8, u8, u8) {
        match self {
            Colour::Rgb(r, g, b) => (r, g, b),
            Colour::Indexed(n @ 0..=15) => PALETTE[usize::from(n)],
            Colour::Indexed(n @ 16..=231) => {
                let n = n - 16;
                let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
                (level(n / 36), level((n / 6) % 6), level(n % 6))
            }
            Colour::Indexed(n) => {
                let v = 8 + (n - 232) * 10;
                (v, v, v)
            }
        }
    }

    fn css(self) -> String {
        let (r, g, b) = self.rgb();
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// The graphic state that shows in HTML.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Style {
    fg: Option<Colour>,
    bg: Option<Colour>,
    bold: bool,
    faint: bool,
    italic: bool,
    underline: bool,
    strike: bool,
    inverse: bool,
}

impl Style {
    fn apply(&mut self, params: &Params) {
        let mut rest = params.iter();
        while let Some(p) = rest.next() {
            match p[0] {
                0 => *self = Style::default(),
                1 => self.bold = true,
                2 => self.faint = true,
                3 => self.italic = true,
                4 => self.underline = true,
                7 => self.inverse = true,
                9 => self.strike = true,
                21 | 24 => self.underline = false,
                22 => (self.bold, self.faint) = (false, false),
                23 => self.italic = false,
                27 => self.inverse = false,
                29 => self.strike = false,
                n @ 30..=37 => self.fg = Some(Colour::Indexed((n - 30) as u8)),
                n @ 90..=97 => self.fg = Some(Colour::Indexed((n - 90 + 8) as u8)),
                39 => self.fg = None,
                n @ 40..=47 => self.bg = Some(Colour::Indexed((n - 40) as u8)),
                n @ 100..=107 => self.bg = Some(Colour::Indexed((n - 100 + 8) as u8)),
                49 => self.bg = None,
                38 => self.fg = extended_colour(p, &mut rest).map(Colour::from).or(self.fg),
                48 => self.bg = extended_colour(p, &mut rest).map(Colour::from).or(self.bg),
                58 => {
                    extended_colour(p, &mut rest);
                }
                _ => {}
            }
        }
    }

    /// The inline CSS; empty for the terminal's defaults.
    fn css(&self) -> String {
        let (mut fg, mut bg) = (self.fg, self.bg);
        let mut css = String::new();
        if self.inverse {
            // The page's own colours stand in for the terminal's defaults.
            std::mem::swap(&mut fg, &mut bg);
            let _ = write!(
                css,
                "color:{};background:{};",
                fg.map_or("var(--screen-bg)".into(), Colour::css),
                bg.map_or("var(--screen-fg)".into(), Colour::css)
            );
        } else {
            if let Some(c) = fg {
                let _ = write!(css, "color:{};", c.css());
            }
            if let Some(c) = bg {
                let _ = write!(css, "background:{};", c.css());
            }
        }
        if self.bold {
            css.push_str("font-weight:bold;");
        }
        if self.faint {
            css.push_str("opacity:.6;");
        }
        if self.italic {
            css.push_str("font-style:italic;");
        }
        match (self.underline, self.strike) {
            (true, true) => css.push_str("text-decoration:underline line-through;"),
            (true, false) => css.push_str("text-decoration:underline;"),
            (false, true) => css.push_str("text-decoration:line-through;"),
            (false, false) => {}
        }
        css
    }
}

struct Html {
    out: String,
    style: Style,
    /// The style of the open `<span>`, if one is open.
    open: Option<Style>,
}

impl Html {
    fn close(&mut self) {
        if self.open.take().is_some() {
            self.out.push_str("</span>");
        }
    }
}

impl Sink for Html {
    fn text(&mut self, c: char) {
        if self.open != Some(self.style) {
            self.close();
            let css = self.style.css();
            if !css.is_empty() {
                let _ = write!(self.out, "<span style=\"{css}\">");
                self.open = Some(self.style);
            }
        }
        match c {
            '&' => self.out.push_str("&amp;"),
            '<' => self.out.push_str("&lt;"),
            '>' => self.out.push_str("&gt;"),
            '"' => self.out.push_str("&quot;"),
            '\'' => self.out.push_str("&#39;"),
            c => self.out.push(c),
        }
    }

    fn sgr(&mut self, params: &Params) {
        self.style.apply(params);
    }
}

/// `capture` (text with SGR escapes, as `capture-pane -e` gives it) as HTML for a `<pre>`.
pub fn to_html(capture: &str) -> String {
    let mut html = Html {
        out: String::with_capacity(capture.len() * 2),
        style: Style::default(),
        open: None,
    };
    parse(capture, &mut html);
    html.close();
    html.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_escaped_and_unstyled() {
        assert_eq!(
            to_html("a <b> & \"c\"\nnext"),
            "a &lt;b&gt; &amp; &quot;c&quot;\nnext"
        );
    }

    #[test]
    fn colours_and_attributes_become_spans() {
        let html = to_html("\x1b[1;31mError\x1b[0m: \x1b[38;5;244mhint\x1b[m done");
        assert_eq!(
            html,
            "<span style=\"color:#cd0000;font-weight:bold;\">Error</span>: \
             <span style=\"color:#808080;\">hint</span> done"
        );
    }

    #[test]
    fn truecolour_background_and_inverse() {
        assert_eq!(
            to_html("\x1b[48;2;10;20;30mx\x1b[49;7my"),
            "<span style=\"background:#0a141e;\">x</span>\
             <span style=\"color:var(--screen-bg);background:var(--screen-fg);\">y</span>"
        );
        // Colon sub-parameters with a colour-space id, as Claude Code writes them.
        assert_eq!(
            to_html("\x1b[38:2::255:0:128mz"),
            "<span style=\"color:#ff0080;\">z</span>"
        );
    }

    #[test]
    fn style_carries_across_lines_and_other_escapes_vanish() {
        assert_eq!(
            to_html("\x1b[32mok\n\x1b]0;title\x07still\x1b[?25l"),
            "<span style=\"color:#00cd00;\">ok\nstill</span>"
        );
    }

    #[test]
    fn a_real_capture_renders_every_character_once() {
        let capture = include_str!("../../tests/fixtures/panes/cc-basic-120x40__after-answer.ansi");
        let html = to_html(capture);
        let visible: String = {
            // Strip the tags and unescape; what is left is the plain text.
            let mut out = String::new();
            let mut in_tag = false;
            for c in html.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' if in_tag => in_tag = false,
                    c if !in_tag => out.push(c),
                    _ => {}
                }
            }
            out.replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
        };
        assert_eq!(visible, crate::ansi::strip(capture, false));
        assert!(html.contains("<span style="), "the capture has colours");
    }
}

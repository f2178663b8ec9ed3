//! Just enough of an SGR parser to tell typed text from "ghost" text in a `capture-pane -e`
//! capture: dim placeholders, autosuggestions and the cursor cell drawn over them.
//!
//! tmux carries the graphic state across lines (a line may start with the attributes the
//! previous one ended with), so callers feed lines in screen order through one [`SgrState`].
//! Non-SGR escapes (OSC titles, cursor moves) and control bytes are skipped, never interpreted.

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

impl SgrState {
    /// Advances the state over `line` without collecting cells.
    pub fn skip_line(&mut self, line: &str) {
        self.walk(line, |_| {});
    }

    /// The visible cells of `line`, advancing the state.
    pub fn cells(&mut self, line: &str) -> Vec<Cell> {
        let mut out = Vec::with_capacity(line.len().min(512));
        self.walk(line, |c| out.push(c));
        out
    }

    fn walk(&mut self, line: &str, mut emit: impl FnMut(Cell)) {
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\u{1b}' => match chars.peek().copied() {
                    Some('[') => {
                        chars.next();
                        let mut params = String::new();
                        let mut fin = None;
                        for p in chars.by_ref() {
                            if ('\u{40}'..='\u{7e}').contains(&p) {
                                fin = Some(p);
                                break;
                            }
                            // Parameters are short; a runaway sequence is garbage, not SGR.
                            if params.len() < 64 {
                                params.push(p);
                            }
                        }
                        if fin == Some('m') {
                            self.apply_sgr(&params);
                        }
                    }
                    Some(']') => {
                        // OSC: runs to BEL or ST (ESC \).
                        chars.next();
                        while let Some(p) = chars.next() {
                            if p == '\u{7}' {
                                break;
                            }
                            if p == '\u{1b}' {
                                if chars.peek() == Some(&'\\') {
                                    chars.next();
                                }
                                break;
                            }
                        }
                    }
                    Some(_) => {
                        chars.next();
                    }
                    None => {}
                },
                c if c.is_control() => {}
                c => emit(Cell {
                    ch: c,
                    faint: self.faint,
                    inverse: self.inverse,
                    grey: self.grey,
                }),
            }
        }
    }

    fn apply_sgr(&mut self, params: &str) {
        if params.is_empty() {
            *self = SgrState::default();
            return;
        }
        let mut it = params.split([';', ':']).map(|p| {
            if p.is_empty() {
                Some(0)
            } else {
                p.parse::<u32>().ok()
            }
        });
        while let Some(p) = it.next() {
            let Some(p) = p else { continue };
            match p {
                0 => *self = SgrState::default(),
                2 => self.faint = true,
                22 => self.faint = false,
                7 => self.inverse = true,
                27 => self.inverse = false,
                30..=37 | 39 | 91..=97 => self.grey = false,
                90 => self.grey = true,
                38 => match it.next().flatten() {
                    Some(5) => {
                        let n = it.next().flatten().unwrap_or(0);
                        self.grey = is_grey_256(n);
                    }
                    Some(2) => {
                        let r = it.next().flatten().unwrap_or(0);
                        let g = it.next().flatten().unwrap_or(0);
                        let b = it.next().flatten().unwrap_or(0);
                        self.grey = is_grey_rgb(r, g, b);
                    }
                    _ => {}
                },
                // Background colours carry sub-parameters that must not be read as attributes.
                48 | 58 => match it.next().flatten() {
                    Some(5) => {
                        it.next();
                    }
                    Some(2) => {
                        it.next();
                        it.next();
                        it.next();
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }
}

/// Colour 8 (bright black, zsh-autosuggestions' default `fg=8`), fish's `555` (59) and the
/// mid greys of the 256-colour ramp.
fn is_grey_256(n: u32) -> bool {
    n == 8 || n == 59 || (237..=246).contains(&n)
}

fn is_grey_rgb(r: u32, g: u32, b: u32) -> bool {
    let (lo, hi) = (r.min(g).min(b), r.max(g).max(b));
    hi - lo <= 12 && (64..=160).contains(&hi)
}

/// Strips escapes and control characters (except `\n` and `\t`) from `text`.
pub(crate) fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut st = SgrState::default();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.contains('\t') {
            // Tabs are kept: they are content, not control.
            for part in line.split('\t').enumerate() {
                if part.0 > 0 {
                    out.push('\t');
                }
                st.walk(part.1, |c| out.push(c.ch));
            }
        } else {
            st.walk(line, |c| out.push(c.ch));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn faint_and_reset() {
        let mut st = SgrState::default();
        let cells = st.cells("\u{1b}[1m›\u{1b}[0m \u{1b}[2mAsk\u{1b}[0mX");
        let ghost: String = cells
            .iter()
            .filter(|c| c.is_ghostly())
            .map(|c| c.ch)
            .collect();
        let plain: String = cells
            .iter()
            .filter(|c| !c.is_ghostly())
            .map(|c| c.ch)
            .collect();
        assert_eq!(ghost, "Ask");
        assert_eq!(plain, "› X");
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
        // A background colour's parameters are not attributes: 48;5;2 is not "faint".
        assert!(!st.cells("\u{1b}[0;48;5;2mx")[0].is_ghostly());
    }

    #[test]
    fn osc_and_garbage_are_skipped() {
        assert_eq!(strip("a\u{1b}]0;title\u{7}b\u{1b}[31mc\u{1}d"), "abcd");
        assert_eq!(strip("x\u{1b}"), "x");
        assert_eq!(strip("x\u{1b}[123456789012345678901234567890"), "x");
    }
}

//! The stand-in's terminal: raw mode (through `stty`, so no unsafe code), the pane
//! size, and the inline painter.
//!
//! The painter draws like the real CLI's inline renderer: transcript rows are
//! printed once and scroll up into the pane's history; the live region at the
//! bottom (spinner, input box, footer, menus) is erased and redrawn in place by
//! moving the cursor back to its top. Rows never exceed the pane width
//! ([`super::render`] guarantees it), so the painter can count rows.

use std::io::{self, Write};
use std::process::{Command, Stdio};

use super::app::Frame;

/// Puts the terminal on stdin into raw mode (no echo, no line editing, no
/// signals from keys) and restores it on drop. When stdin is not a terminal
/// (`stty` fails) nothing is changed.
#[derive(Debug)]
pub struct RawMode {
    saved: Option<String>,
}

impl RawMode {
    pub fn enter() -> RawMode {
        let saved = stty(&["-g"]).map(|s| s.trim().to_string());
        if saved.is_some() && stty(&["raw", "-echo"]).is_none() {
            return RawMode { saved: None };
        }
        RawMode { saved }
    }

    pub fn is_raw(&self) -> bool {
        self.saved.is_some()
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            // Best effort: after a hang-up there is no terminal left to restore.
            let _ = stty(&[saved.as_str()]);
        }
    }
}

fn stty(args: &[&str]) -> Option<String> {
    let out = Command::new("stty")
        .args(args)
        .stdin(Stdio::inherit())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

/// The pane size as `(columns, rows)`: from the terminal, else `COLUMNS`/`LINES`,
/// else 80×24.
pub fn size() -> (u16, u16) {
    if let Some(s) = stty(&["size"]) {
        let mut it = s.split_whitespace().map(str::parse::<u16>);
        if let (Some(Ok(rows)), Some(Ok(cols))) = (it.next(), it.next()) {
            if rows > 0 && cols > 0 {
                return (cols, rows);
            }
        }
    }
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u16>().ok());
    (
        env("COLUMNS").unwrap_or(80).max(1),
        env("LINES").unwrap_or(24).max(1),
    )
}

/// Draws transcript rows and the live frame.
#[derive(Debug)]
pub struct Painter<W: Write> {
    out: W,
    /// Row of the cursor within the live region last drawn.
    cursor_row: usize,
    last: Option<Frame>,
    title: Option<String>,
}

impl<W: Write> Painter<W> {
    pub fn new(out: W) -> Self {
        Painter {
            out,
            cursor_row: 0,
            last: None,
            title: None,
        }
    }

    /// Turns on bracketed paste, so pasted newlines stay inside the draft.
    pub fn start(&mut self) -> io::Result<()> {
        self.out.write_all(b"\x1b[?2004h")?;
        self.out.flush()
    }

    /// Prints `committed` above the live region and redraws it as `frame`; sets
    /// the title when it changed. Writes nothing when nothing changed, so an idle
    /// pane stays silent.
    pub fn paint(
        &mut self,
        committed: &[String],
        frame: &Frame,
        title: Option<&str>,
    ) -> io::Result<()> {
        let mut s = String::new();
        if let Some(t) = title {
            if self.title.as_deref() != Some(t) {
                s.push_str(&format!("\x1b]0;{t}\x07"));
                self.title = Some(t.to_string());
            }
        }
        if !committed.is_empty() || self.last.as_ref() != Some(frame) {
            s.push('\r');
            if self.cursor_row > 0 {
                s.push_str(&format!("\x1b[{}A", self.cursor_row));
            }
            s.push_str("\x1b[J");
            for row in committed {
                s.push_str(row);
                s.push_str("\x1b[0m\r\n");
            }
            for (i, row) in frame.lines.iter().enumerate() {
                if i > 0 {
                    s.push_str("\r\n");
                }
                s.push_str(row);
                s.push_str("\x1b[0m");
            }
            let last_row = frame.lines.len().saturating_sub(1);
            let cursor_row = frame.cursor_row.min(last_row);
            s.push('\r');
            if last_row > cursor_row {
                s.push_str(&format!("\x1b[{}A", last_row - cursor_row));
            }
            if frame.cursor_col > 0 {
                s.push_str(&format!("\x1b[{}C", frame.cursor_col));
            }
            self.cursor_row = cursor_row;
            self.last = Some(frame.clone());
        }
        if s.is_empty() {
            return Ok(());
        }
        self.out.write_all(s.as_bytes())?;
        self.out.flush()
    }

    /// Leaves the last frame on screen, prints `farewell` under it and turns
    /// bracketed paste off again.
    pub fn finish(&mut self, farewell: &[String]) -> io::Result<()> {
        let mut s = String::new();
        if let Some(frame) = &self.last {
            let below = frame
                .lines
                .len()
                .saturating_sub(1)
                .saturating_sub(self.cursor_row);
            if below > 0 {
                s.push_str(&format!("\x1b[{below}B"));
            }
        }
        s.push_str("\r\n");
        for row in farewell {
            s.push_str(row);
            s.push_str("\r\n");
        }
        s.push_str("\x1b[?2004l");
        self.out.write_all(s.as_bytes())?;
        self.out.flush()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn frame(lines: &[&str], cursor_row: usize, cursor_col: usize) -> Frame {
        Frame {
            lines: lines.iter().map(|s| s.to_string()).collect(),
            cursor_row,
            cursor_col,
        }
    }

    #[test]
    fn redraw_moves_back_to_the_top_of_the_live_region() {
        let mut p = Painter::new(Vec::new());
        p.paint(
            &["banner".into()],
            &frame(&["", "box", "footer"], 1, 2),
            Some("✳ t"),
        )
        .unwrap();
        let first = String::from_utf8(std::mem::take(&mut p.out)).unwrap();
        assert_eq!(
            first,
            "\x1b]0;✳ t\x07\r\x1b[Jbanner\x1b[0m\r\n\x1b[0m\r\nbox\x1b[0m\r\nfooter\x1b[0m\r\x1b[1A\x1b[2C"
        );
        // Same frame, same title: nothing written.
        p.paint(&[], &frame(&["", "box", "footer"], 1, 2), Some("✳ t"))
            .unwrap();
        assert!(p.out.is_empty());
        p.paint(&[], &frame(&["", "box2", "footer"], 1, 3), Some("✳ t"))
            .unwrap();
        let second = String::from_utf8(std::mem::take(&mut p.out)).unwrap();
        assert!(second.starts_with("\r\x1b[1A\x1b[J"), "{second:?}");
        p.finish(&["bye".into()]).unwrap();
        let last = String::from_utf8(p.out).unwrap();
        assert_eq!(last, "\x1b[1B\r\nbye\r\n\x1b[?2004l");
    }
}

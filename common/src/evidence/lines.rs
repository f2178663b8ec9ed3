//! Complete lines out of a growing file's new bytes.
//!
//! A follower reads whatever the file holds past its offset; the writer may be mid-line.
//! [`LineBuffer`] hands out only lines that end in `\n` and keeps the rest for the next
//! read, so a partial last line is never parsed half-written. A line longer than
//! [`MAX_LINE`] is dropped (counted, not parsed) and reading resumes at the next newline.

/// Longest line kept (a tool result with a whole file in it can be megabytes).
pub const MAX_LINE: usize = 8 << 20;

#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: Vec<u8>,
    /// Inside an over-long line: drop bytes up to the next newline.
    skipping: bool,
    /// Over-long lines dropped so far.
    pub dropped: u64,
}

impl LineBuffer {
    /// Appends `bytes`; returns the lines they complete, without their `\n` (and `\r`).
    /// Invalid UTF-8 is replaced, not fatal.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (head, tail) = rest.split_at(nl);
            rest = &tail[1..];
            if self.skipping {
                self.skipping = false;
                continue;
            }
            self.partial.extend_from_slice(head);
            let line = std::mem::take(&mut self.partial);
            let mut text = String::from_utf8_lossy(&line).into_owned();
            if text.ends_with('\r') {
                text.pop();
            }
            if !text.trim().is_empty() {
                out.push(text);
            }
        }
        if !self.skipping {
            self.partial.extend_from_slice(rest);
            if self.partial.len() > MAX_LINE {
                self.partial.clear();
                self.skipping = true;
                self.dropped += 1;
            }
        }
        out
    }

    /// Bytes held back as an unfinished line.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Forgets the unfinished line (the file was truncated or replaced).
    pub fn reset(&mut self) {
        self.partial.clear();
        self.skipping = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_lines_wait_for_their_newline() {
        let mut b = LineBuffer::default();
        assert_eq!(b.push(b"{\"a\":1}\n{\"b\""), ["{\"a\":1}"]);
        assert_eq!(b.pending(), 4);
        assert!(b.push(b":2").is_empty());
        assert_eq!(b.push(b"}\r\n\n"), ["{\"b\":2}"]);
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn split_utf8_survives_and_reset_forgets() {
        let mut b = LineBuffer::default();
        let s = "é\n".as_bytes();
        assert!(b.push(&s[..1]).is_empty());
        assert_eq!(b.push(&s[1..]), ["é"]);
        b.push(b"half");
        b.reset();
        assert_eq!(b.push(b"new\n"), ["new"]);
    }

    #[test]
    fn an_overlong_line_is_dropped_and_reading_resumes() {
        let mut b = LineBuffer::default();
        let big = vec![b'x'; MAX_LINE + 1];
        assert!(b.push(&big).is_empty());
        assert!(b.push(b"more of it").is_empty());
        assert_eq!(b.push(b"\nnext\n"), ["next"]);
        assert_eq!(b.dropped, 1);
    }
}

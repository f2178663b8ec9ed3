//! Terminal input decoding: raw bytes from the pane's pty in, keys out.
//!
//! Handles bracketed paste (`ESC[200~ … ESC[201~`, the pasted text is one
//! [`Key::Paste`] however the bytes were split across reads), CSI and SS3 key
//! sequences, UTF-8 split across reads, and a lone `ESC`, which stays pending until
//! the caller decides no more bytes are coming ([`KeyParser::flush`]). Pure and
//! total: any byte sequence decodes to some keys, never to a panic.

/// One decoded key or paste.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Char(char),
    /// Text delivered in one bracketed paste; `\r\n` and `\r` are normalised to `\n`.
    Paste(String),
    /// Carriage return: the Enter key.
    Enter,
    /// Line feed (Ctrl-J): a newline inside the draft.
    Newline,
    Backspace,
    Tab,
    BackTab,
    Escape,
    Up,
    Down,
    Left,
    Right,
    CtrlC,
    CtrlD,
    /// Ctrl-U: clear the draft.
    CtrlU,
}

const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";
/// Bytes kept from one paste; beyond this the rest of the paste is dropped.
pub const MAX_PASTE_BYTES: usize = 4 << 20;
/// A CSI sequence longer than this is garbage, not a key.
const MAX_CSI: usize = 32;

/// Incremental decoder; feed it whatever `read` returned.
#[derive(Debug, Default)]
pub struct KeyParser {
    pending: Vec<u8>,
    paste: Option<Vec<u8>>,
}

enum Step {
    Key(Option<Key>, usize),
    StartPaste(usize),
    Incomplete,
}

impl KeyParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// True while an escape sequence or UTF-8 character is incomplete.
    pub fn has_pending(&self) -> bool {
        self.paste.is_none() && !self.pending.is_empty()
    }

    /// True between a paste's start and end markers.
    pub fn in_paste(&self) -> bool {
        self.paste.is_some()
    }

    /// Decodes as much of `bytes` (after anything pending) as is complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        self.decode(&mut out, false);
        out
    }

    /// Called when no more bytes arrived for a while: a pending lone `ESC` is the
    /// Escape key, a truncated UTF-8 character is `U+FFFD`.
    pub fn flush(&mut self) -> Vec<Key> {
        let mut out = Vec::new();
        self.decode(&mut out, true);
        out
    }

    /// Ends a paste whose end marker never came (the caller decides when).
    pub fn end_paste(&mut self) -> Option<Key> {
        let mut body = self.paste.take()?;
        // Anything held back as a possible partial end marker belongs to the paste.
        let held = std::mem::take(&mut self.pending);
        append_capped(&mut body, &held);
        Some(Key::Paste(normalize_paste(&body)))
    }

    fn decode(&mut self, out: &mut Vec<Key>, flushing: bool) {
        let buf = std::mem::take(&mut self.pending);
        let mut i = 0;
        while i < buf.len() {
            if let Some(body) = self.paste.as_mut() {
                let rest = &buf[i..];
                match find(rest, PASTE_END) {
                    Some(pos) => {
                        append_capped(body, &rest[..pos]);
                        i += pos + PASTE_END.len();
                        let body = self.paste.take().unwrap_or_default();
                        out.push(Key::Paste(normalize_paste(&body)));
                    }
                    None => {
                        let keep = partial_suffix(rest, PASTE_END);
                        append_capped(body, &rest[..rest.len() - keep]);
                        i = buf.len() - keep;
                        break;
                    }
                }
                continue;
            }
            match step(&buf[i..], flushing) {
                Step::Key(key, used) => {
                    out.extend(key);
                    i += used.max(1);
                }
                Step::StartPaste(used) => {
                    self.paste = Some(Vec::new());
                    i += used;
                }
                Step::Incomplete => break,
            }
        }
        self.pending = buf[i.min(buf.len())..].to_vec();
    }
}

fn step(b: &[u8], flushing: bool) -> Step {
    match b[0] {
        0x1b => escape(b, flushing),
        b'\r' => Step::Key(Some(Key::Enter), 1),
        b'\n' => Step::Key(Some(Key::Newline), 1),
        0x7f | 0x08 => Step::Key(Some(Key::Backspace), 1),
        b'\t' => Step::Key(Some(Key::Tab), 1),
        0x03 => Step::Key(Some(Key::CtrlC), 1),
        0x04 => Step::Key(Some(Key::CtrlD), 1),
        0x15 => Step::Key(Some(Key::CtrlU), 1),
        c if c < 0x20 => Step::Key(None, 1),
        _ => utf8_char(b, flushing),
    }
}

fn utf8_char(b: &[u8], flushing: bool) -> Step {
    let len = match b[0] {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return Step::Key(Some(Key::Char('\u{FFFD}')), 1),
    };
    if b.len() < len {
        // A truncated character: wait for the rest, unless a non-continuation byte
        // already shows it is broken.
        if b[1..].iter().any(|&c| c & 0xc0 != 0x80) || flushing {
            return Step::Key(Some(Key::Char('\u{FFFD}')), 1);
        }
        return Step::Incomplete;
    }
    match std::str::from_utf8(&b[..len]) {
        Ok(s) => Step::Key(s.chars().next().map(Key::Char), len),
        Err(_) => Step::Key(Some(Key::Char('\u{FFFD}')), 1),
    }
}

fn escape(b: &[u8], flushing: bool) -> Step {
    if b.len() == 1 {
        return if flushing {
            Step::Key(Some(Key::Escape), 1)
        } else {
            Step::Incomplete
        };
    }
    match b[1] {
        b'[' => csi(b, flushing),
        b'O' => {
            if b.len() < 3 {
                return if flushing {
                    Step::Key(Some(Key::Escape), 1)
                } else {
                    Step::Incomplete
                };
            }
            let key = match b[2] {
                b'A' => Some(Key::Up),
                b'B' => Some(Key::Down),
                b'C' => Some(Key::Right),
                b'D' => Some(Key::Left),
                _ => None,
            };
            Step::Key(key, 3)
        }
        // ESC followed by anything else: the Escape key, then that byte on its own
        // (an Alt-modified key is not something the stand-in needs).
        _ => Step::Key(Some(Key::Escape), 1),
    }
}

fn csi(b: &[u8], flushing: bool) -> Step {
    if b.starts_with(PASTE_START) {
        return Step::StartPaste(PASTE_START.len());
    }
    for (j, &c) in b.iter().enumerate().skip(2) {
        match c {
            0x20..=0x3f => {
                if j >= MAX_CSI {
                    return Step::Key(None, j);
                }
            }
            0x40..=0x7e => {
                let params = &b[2..j];
                let key = match (c, params) {
                    (b'A', _) => Some(Key::Up),
                    (b'B', _) => Some(Key::Down),
                    (b'C', _) => Some(Key::Right),
                    (b'D', _) => Some(Key::Left),
                    (b'Z', _) => Some(Key::BackTab),
                    _ => None,
                };
                return Step::Key(key, j + 1);
            }
            // Not a CSI byte: the sequence is malformed; drop what came before it.
            _ => return Step::Key(None, j),
        }
    }
    if flushing {
        Step::Key(Some(Key::Escape), 1)
    } else if PASTE_START.starts_with(b) || b.len() < MAX_CSI {
        Step::Incomplete
    } else {
        Step::Key(None, b.len())
    }
}

fn append_capped(body: &mut Vec<u8>, more: &[u8]) {
    let room = MAX_PASTE_BYTES.saturating_sub(body.len());
    body.extend_from_slice(&more[..more.len().min(room)]);
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Length of the longest suffix of `data` that is a proper prefix of `marker`.
fn partial_suffix(data: &[u8], marker: &[u8]) -> usize {
    (1..marker.len().min(data.len() + 1))
        .rev()
        .find(|&k| data[data.len() - k..] == marker[..k])
        .unwrap_or(0)
}

fn normalize_paste(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rand::{Rng as _, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn all(p: &mut KeyParser, chunks: &[&[u8]]) -> Vec<Key> {
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.feed(c));
        }
        out
    }

    #[test]
    fn plain_keys() {
        let mut p = KeyParser::new();
        let keys = p.feed(b"ab\r\x7f\x03\t\n");
        assert_eq!(
            keys,
            vec![
                Key::Char('a'),
                Key::Char('b'),
                Key::Enter,
                Key::Backspace,
                Key::CtrlC,
                Key::Tab,
                Key::Newline
            ]
        );
    }

    #[test]
    fn paste_split_across_reads_is_one_key() {
        let mut p = KeyParser::new();
        let text = "line 1; $(x)\nline \"2\"\t\\\n日本\r\nEnter C-c";
        let mut bytes = Vec::new();
        bytes.extend_from_slice(PASTE_START);
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(PASTE_END);
        bytes.push(b'\r');
        // Every split point, including inside markers and UTF-8 characters.
        for cut in 0..bytes.len() {
            let mut p2 = KeyParser::new();
            let keys = all(&mut p2, &[&bytes[..cut], &bytes[cut..]]);
            assert_eq!(
                keys,
                vec![Key::Paste(text.replace("\r\n", "\n")), Key::Enter],
                "cut at {cut}"
            );
        }
        let keys = all(&mut p, &bytes.chunks(1).collect::<Vec<_>>());
        assert_eq!(keys.len(), 2);
    }

    #[test]
    fn paste_keeps_escape_bytes_and_enter_words() {
        let mut p = KeyParser::new();
        let keys = p.feed(b"\x1b[200~a\x1b[Ab\rc\x1b[201~");
        assert_eq!(keys, vec![Key::Paste("a\x1b[Ab\nc".into())]);
    }

    #[test]
    fn lone_escape_waits_for_flush() {
        let mut p = KeyParser::new();
        assert!(p.feed(b"\x1b").is_empty());
        assert!(p.has_pending());
        assert_eq!(p.flush(), vec![Key::Escape]);
        assert!(!p.has_pending());
    }

    #[test]
    fn arrows_and_focus_events() {
        let mut p = KeyParser::new();
        let keys = p.feed(b"\x1b[A\x1bOB\x1b[I\x1b[O\x1b[1;5C\x1b[Z");
        assert_eq!(keys, vec![Key::Up, Key::Down, Key::Right, Key::BackTab]);
    }

    #[test]
    fn utf8_split_across_reads() {
        let mut p = KeyParser::new();
        let bytes = "é日".as_bytes();
        let mut keys = p.feed(&bytes[..1]);
        keys.extend(p.feed(&bytes[1..3]));
        keys.extend(p.feed(&bytes[3..]));
        assert_eq!(keys, vec![Key::Char('é'), Key::Char('日')]);
    }

    #[test]
    fn invalid_bytes_become_replacement_chars() {
        let mut p = KeyParser::new();
        let keys = p.feed(&[0xff, b'a', 0xc3, b'b']);
        assert_eq!(
            keys,
            vec![
                Key::Char('\u{FFFD}'),
                Key::Char('a'),
                Key::Char('\u{FFFD}'),
                Key::Char('b')
            ]
        );
    }

    #[test]
    fn unterminated_paste_can_be_ended() {
        let mut p = KeyParser::new();
        assert!(p.feed(b"\x1b[200~abc\x1b[20").is_empty());
        assert!(p.in_paste());
        assert_eq!(p.end_paste(), Some(Key::Paste("abc\x1b[20".into())));
        assert!(!p.in_paste());
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x9e37_79b9_7f4a_7c15);
        let mut p = KeyParser::new();
        for _ in 0..2000 {
            let len = rng.gen_range(0..17);
            let chunk: Vec<u8> = (0..len)
                .map(|_| match rng.gen_range(0..6) {
                    0 => 0x1b,
                    1 => b'[',
                    2 => b'2',
                    _ => rng.gen(),
                })
                .collect();
            let _ = p.feed(&chunk);
            if rng.gen_ratio(1, 8) {
                let _ = p.flush();
            }
            if rng.gen_ratio(1, 16) {
                let _ = p.end_paste();
            }
        }
    }
}

//! From a raw tmux capture to what the coordinator gets: clean the text with the pure
//! functions of `karl_common::pane_text`, and assemble the `PaneSnapshot` (metadata, text,
//! optional ANSI text, stable hash, diff against the previous snapshot, novelty). Also the
//! classifier's view of a capture. Pure; the capture itself is `Tmux::capture`.

use karl_common::detect::DetectionInput;
use karl_common::pane_text;
use karl_common::pb;

use crate::activity::Recorded;
use crate::tmux::{PaneMeta, RawCapture};

/// A capture after preprocessing.
#[derive(Debug, Clone, PartialEq)]
pub struct Cleaned {
    pub meta: PaneMeta,
    pub text: String,
    pub ansi: Option<String>,
    pub history_lines: u32,
}

impl Cleaned {
    /// Cleans a raw capture.
    pub fn from_raw(raw: RawCapture, history_lines: u32) -> Self {
        Cleaned {
            text: pane_text::clean_capture(&raw.text),
            ansi: raw.ansi.as_deref().map(pane_text::clean_ansi_capture),
            meta: raw.meta,
            history_lines,
        }
    }

    /// The classifier's input for this capture.
    pub fn detection_input(&self) -> DetectionInput<'_> {
        DetectionInput {
            text: &self.text,
            ansi: self.ansi.as_deref(),
            current_command: &self.meta.current_command,
            title: &self.meta.title,
            cursor_x: Some(self.meta.cursor_x),
            cursor_y: Some(self.meta.cursor_y),
            width: Some(self.meta.width),
            height: Some(self.meta.height),
        }
    }

    /// The snapshot to send. `recorded` comes from the watch table; without it (a pane
    /// nobody watches) the diff is against nothing and `seq` is 0.
    pub fn to_snapshot(
        &self,
        recorded: Option<&Recorded>,
        reason: pb::SnapshotReason,
        captured_unix_ms: u64,
    ) -> pb::PaneSnapshot {
        let (stable_hash, diff, seq, last_output) = match recorded {
            Some(r) => (
                r.stable_hash.clone(),
                r.diff.clone(),
                r.seq,
                r.last_output_unix_ms,
            ),
            None => (
                pane_text::stable_hash(&self.text),
                pane_text::diff("", &self.text, pane_text::MAX_NEW_LINES),
                0,
                0,
            ),
        };
        pb::PaneSnapshot {
            pane: Some(self.meta.to_info()),
            text: self.text.clone(),
            ansi: self.ansi.clone().unwrap_or_default(),
            cursor_x: self.meta.cursor_x,
            cursor_y: self.meta.cursor_y,
            stable_hash,
            new_lines: diff.new_lines,
            novelty: diff.novelty,
            reason: reason as i32,
            captured_unix_ms,
            last_output_unix_ms: last_output,
            seq,
            request_id: 0,
            history_lines: self.history_lines,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn raw() -> RawCapture {
        RawCapture {
            meta: PaneMeta {
                pane_id: "%4".into(),
                session_id: "$1".into(),
                session: "work".into(),
                width: 80,
                height: 24,
                cursor_x: 2,
                cursor_y: 5,
                current_command: "claude".into(),
                title: "✳ Claude Code".into(),
                ..Default::default()
            },
            text: b"hello\x1b[1m!\n\xff\n\n\n".to_vec(),
            ansi: Some(b"\x1b[1mhello\x1b[0m\n\n".to_vec()),
        }
    }

    #[test]
    fn cleans_and_builds_an_unwatched_snapshot() {
        let c = Cleaned::from_raw(raw(), 0);
        assert_eq!(c.text, "hello!\n\u{fffd}");
        assert_eq!(c.ansi.as_deref(), Some("\x1b[1mhello\x1b[0m"));
        let s = c.to_snapshot(None, pb::SnapshotReason::Requested, 42);
        assert_eq!(s.pane.as_ref().unwrap().pane_id, "%4");
        assert_eq!((s.cursor_x, s.cursor_y), (2, 5));
        assert_eq!(s.stable_hash, pane_text::stable_hash("hello!\n\u{fffd}"));
        assert_eq!(s.new_lines, vec!["hello!", "\u{fffd}"]);
        assert_eq!(s.novelty, 1.0);
        assert_eq!(s.reason, pb::SnapshotReason::Requested as i32);
        assert_eq!((s.captured_unix_ms, s.seq), (42, 0));
        let d = c.detection_input();
        assert_eq!(d.current_command, "claude");
        assert_eq!(d.height, Some(24));
        assert!(d.ansi.is_some());
    }

    #[test]
    fn a_recorded_capture_carries_the_table_s_diff() {
        let c = Cleaned::from_raw(raw(), 3);
        let rec = Recorded {
            stable_hash: "h".into(),
            diff: pane_text::TextDiff {
                new_lines: vec!["x".into()],
                novelty: 0.5,
            },
            seq: 7,
            last_output_unix_ms: 9,
        };
        let s = c.to_snapshot(Some(&rec), pb::SnapshotReason::Settled, 1);
        assert_eq!(
            (s.stable_hash.as_str(), s.seq, s.last_output_unix_ms),
            ("h", 7, 9)
        );
        assert_eq!(s.history_lines, 3);
        assert_eq!(s.new_lines, vec!["x"]);
    }
}

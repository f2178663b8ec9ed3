//! The session digest: older turns compressed into short summary lines, plus milestones
//! (tasks completed). The engine folds the oldest turns in every five turns, so the
//! context carries the session's history in a bounded number of tokens however long it
//! runs.
//!
//! Compression is extractive and deterministic — the prompt's gist and the outcome
//! with a line of evidence from the pane — so it needs no model call, costs
//! microseconds, and the same turns always give the same digest.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::redact::redact;
use super::terminal::cap_chars;

/// Summary entries kept before the oldest are rolled up into counts.
pub const MAX_ENTRIES: usize = 8;
/// Milestones kept (the oldest go first).
pub const MAX_MILESTONES: usize = 12;
/// Milestones shown in the context block.
const SHOWN_MILESTONES: usize = 6;

const GIST_WORDS: usize = 8;
const GIST_CHARS: usize = 64;
const EVIDENCE_CHARS: usize = 64;

/// How a turn ended, judged from the next settled snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Progress,
    Error,
    Blocked,
    Complete,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Progress => "progress",
            Outcome::Error => "error",
            Outcome::Blocked => "blocked",
            Outcome::Complete => "complete",
        }
    }
}

/// What the digest needs of one recorded turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnNote {
    pub turn: u32,
    /// The prompt that was typed.
    pub prompt: String,
    pub outcome: Outcome,
    /// The pane after the turn (or its new lines); one line of it is kept as evidence.
    #[serde(default)]
    pub response: String,
}

/// Outcome counts of a span of turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    pub progress: u32,
    pub error: u32,
    pub blocked: u32,
    pub complete: u32,
}

impl OutcomeCounts {
    fn add(&mut self, o: Outcome) {
        let c = match o {
            Outcome::Progress => &mut self.progress,
            Outcome::Error => &mut self.error,
            Outcome::Blocked => &mut self.blocked,
            Outcome::Complete => &mut self.complete,
        };
        *c = c.saturating_add(1);
    }

    fn merge(&mut self, o: &OutcomeCounts) {
        self.progress = self.progress.saturating_add(o.progress);
        self.error = self.error.saturating_add(o.error);
        self.blocked = self.blocked.saturating_add(o.blocked);
        self.complete = self.complete.saturating_add(o.complete);
    }

    /// "3 progress, 2 error" (zero counts left out).
    fn describe(&self) -> String {
        [
            (self.progress, "progress"),
            (self.complete, "complete"),
            (self.error, "error"),
            (self.blocked, "blocked"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// One compressed span of turns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestEntry {
    pub from_turn: u32,
    pub to_turn: u32,
    /// Per-turn gists; empty for spans rolled up into counts.
    pub summary: String,
    pub counts: OutcomeCounts,
}

impl DigestEntry {
    /// The line shown to the model.
    pub fn line(&self) -> String {
        let span = if self.from_turn == self.to_turn {
            format!("Turn {}", self.from_turn)
        } else {
            format!("Turns {}-{}", self.from_turn, self.to_turn)
        };
        if self.summary.is_empty() {
            format!("{span}: {}.", self.counts.describe())
        } else {
            format!("{span}: {}", self.summary)
        }
    }
}

/// A completed task or other landmark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Milestone {
    pub turn: u32,
    pub text: String,
}

/// The compressed history of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digest {
    /// Oldest first.
    pub entries: Vec<DigestEntry>,
    /// Oldest first.
    pub milestones: Vec<Milestone>,
}

/// Compresses `turns` (in order) into a digest of one entry: each turn as the gist of
/// its prompt, its outcome and, for errors and successes, one line of evidence.
pub fn compress(turns: &[TurnNote]) -> Digest {
    let (Some(first), Some(last)) = (turns.first(), turns.last()) else {
        return Digest::default();
    };
    let mut counts = OutcomeCounts::default();
    let parts: Vec<String> = turns
        .iter()
        .map(|t| {
            counts.add(t.outcome);
            let gist = gist(&t.prompt);
            match evidence(&t.response, t.outcome) {
                Some(ev) => format!("\"{gist}\" → {}: {ev}", t.outcome.as_str()),
                None => format!("\"{gist}\" → {}", t.outcome.as_str()),
            }
        })
        .collect();
    Digest {
        entries: vec![DigestEntry {
            from_turn: first.turn.min(last.turn),
            to_turn: first.turn.max(last.turn),
            summary: parts.join("; "),
            counts,
        }],
        milestones: Vec::new(),
    }
}

impl Digest {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.milestones.is_empty()
    }

    /// Compresses `turns` and appends them: `self.absorb(compress(turns))`.
    pub fn fold(&mut self, turns: &[TurnNote]) {
        self.absorb(compress(turns));
    }

    /// Appends another digest's entries and milestones; beyond [`MAX_ENTRIES`] the two
    /// oldest entries merge into one line of counts, beyond [`MAX_MILESTONES`] the
    /// oldest milestones go.
    pub fn absorb(&mut self, other: Digest) {
        self.entries.extend(other.entries);
        self.milestones.extend(other.milestones);
        while self.entries.len() > MAX_ENTRIES {
            let b = self.entries.remove(1);
            let a = &mut self.entries[0];
            a.from_turn = a.from_turn.min(b.from_turn);
            a.to_turn = a.to_turn.max(b.to_turn);
            a.counts.merge(&b.counts);
            a.summary.clear();
        }
        self.trim_milestones();
    }

    /// Records a milestone ("done: write the fix").
    pub fn add_milestone(&mut self, turn: u32, text: impl Into<String>) {
        self.milestones.push(Milestone {
            turn,
            text: one_line(&text.into(), 120),
        });
        self.trim_milestones();
    }

    fn trim_milestones(&mut self) {
        if self.milestones.len() > MAX_MILESTONES {
            let extra = self.milestones.len() - MAX_MILESTONES;
            self.milestones.drain(..extra);
        }
    }

    /// The lines of the context's digest block, oldest first: one per entry, then one
    /// line of the latest milestones. Trimming drops lines from the front.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.entries.iter().map(DigestEntry::line).collect();
        if !self.milestones.is_empty() {
            let start = self.milestones.len().saturating_sub(SHOWN_MILESTONES);
            let shown = self.milestones[start..]
                .iter()
                .map(|m| format!("{} (turn {})", m.text, m.turn))
                .collect::<Vec<_>>()
                .join("; ");
            lines.push(format!("Milestones: {shown}"));
        }
        lines
    }
}

/// Filler a prompt opens with that says nothing about the action.
const FILLER: &[&str] = &[
    "please", "now", "ok", "okay", "so", "then", "next", "great", "good", "alright", "and",
];

/// The gist of a prompt: its first sentence without opening filler, at most
/// [`GIST_WORDS`] words and [`GIST_CHARS`] characters, secrets redacted.
pub fn gist(prompt: &str) -> String {
    let (clean, _) = redact(prompt);
    let first = first_sentence(&clean);
    let mut words: Vec<&str> = first.split_whitespace().collect();
    while let Some(w) = words.first() {
        let bare = w
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_ascii_lowercase();
        if FILLER.contains(&bare.as_str()) && words.len() > 1 {
            words.remove(0);
        } else {
            break;
        }
    }
    let mut g = words
        .iter()
        .take(GIST_WORDS)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    if words.len() > GIST_WORDS {
        g.push('…');
    }
    let g = cap_chars(&g, GIST_CHARS);
    g.trim_end_matches(['.', ',', ';', ':', '!'])
        .replace('"', "'")
}

fn first_sentence(s: &str) -> &str {
    let s = s.trim();
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        if c == '\n' {
            end = i;
            break;
        }
        if matches!(c, '.' | '?' | '!') {
            let next = s[i + c.len_utf8()..].chars().next();
            if next.is_none_or(char::is_whitespace) {
                end = i;
                break;
            }
        }
    }
    &s[..end]
}

static ERROR_EVIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:(?-u:\b)error(?-u:\b)|(?-u:\b)failed(?-u:\b)|(?-u:\b)failure(?-u:\b)|(?-u:\b)panicked(?-u:\b)|(?-u:\b)exception(?-u:\b)|(?-u:\b)traceback(?-u:\b)|(?-u:\b)cannot(?-u:\b)|(?-u:\b)not found(?-u:\b)|(?-u:\b)denied(?-u:\b))")
        .unwrap_or_else(|e| panic!("bad pattern: {e}"))
});

static SUCCESS_EVIDENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?:(?-u:\b)passed(?-u:\b)|(?-u:\b)succeeded(?-u:\b)|(?-u:\b)success(?-u:\b)|(?-u:\b)committed(?-u:\b)|(?-u:\b)created(?-u:\b)|(?-u:\b)updated(?-u:\b)|(?-u:\b)done(?-u:\b)|(?-u:\b)fixed(?-u:\b)|(?-u:\b)added(?-u:\b)|[✓✔]|test result: ok)")
        .unwrap_or_else(|e| panic!("bad pattern: {e}"))
});

/// One line of the pane that backs the outcome: the first error line for an error, the
/// last success line for progress or completion; none when nothing fits.
fn evidence(response: &str, outcome: Outcome) -> Option<String> {
    if response.trim().is_empty() {
        return None;
    }
    let (clean, _) = redact(response);
    let lines = clean.lines().map(str::trim).filter(|l| !l.is_empty());
    let line = match outcome {
        Outcome::Error | Outcome::Blocked => lines.clone().find(|l| ERROR_EVIDENCE.is_match(l)),
        Outcome::Progress | Outcome::Complete => {
            lines.clone().rev().find(|l| SUCCESS_EVIDENCE.is_match(l))
        }
    }?;
    let line = line.trim_start_matches(|c: char| !c.is_alphanumeric() && c != '`');
    if line.is_empty() {
        return None;
    }
    Some(one_line(line, EVIDENCE_CHARS))
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    cap_chars(&flat, max)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn note(turn: u32, prompt: &str, outcome: Outcome, response: &str) -> TurnNote {
        TurnNote {
            turn,
            prompt: prompt.into(),
            outcome,
            response: response.into(),
        }
    }

    #[test]
    fn compress_is_extractive_and_deterministic() {
        let turns = vec![
            note(
                1,
                "Please read src/main.rs and explain the startup path.",
                Outcome::Progress,
                "● Read(src/main.rs)\n  ⎿ Read 120 lines",
            ),
            note(
                2,
                "Now run cargo test and show me the failures",
                Outcome::Error,
                "running 4 tests\nerror[E0425]: cannot find value `cfg`\n  --> src/main.rs:3",
            ),
            note(
                3,
                "Fix the missing cfg binding in main.rs.",
                Outcome::Progress,
                "● Update(src/main.rs)\n  ⎿ Updated src/main.rs with 2 additions\n",
            ),
        ];
        let d = compress(&turns);
        assert_eq!(d, compress(&turns));
        assert_eq!(d.entries.len(), 1);
        let line = d.entries[0].line();
        assert_eq!(
            line,
            "Turns 1-3: \"read src/main.rs and explain the startup path\" → progress; \"run cargo test and show me the failures\" → error: error[E0425]: cannot find value `cfg`; \"Fix the missing cfg binding in main.rs\" → progress: Updated src/main.rs with 2 additions"
        );
        assert_eq!(d.entries[0].counts.error, 1);
        assert_eq!(d.entries[0].counts.progress, 2);
    }

    #[test]
    fn gists_are_bounded_and_redacted() {
        let g = gist("ok so now implement the retry loop with exponential backoff and jitter in client.rs, then test it");
        assert_eq!(g, "implement the retry loop with exponential backoff and…");
        assert!(gist(&"x".repeat(500)).chars().count() <= GIST_CHARS);
        assert!(
            !gist("set OPENAI_API_KEY=sk-proj-abc123def456ghi789jkl0 in the env")
                .contains("abc123")
        );
        assert_eq!(gist(""), "");
        assert_eq!(gist("Ok."), "Ok");
        assert_eq!(gist("Use v1.2 of the API? Yes"), "Use v1.2 of the API");
    }

    #[test]
    fn long_sessions_stay_bounded() {
        let mut d = Digest::default();
        for block in 0..40u32 {
            let turns: Vec<TurnNote> = (1..=5)
                .map(|i| {
                    note(
                        block * 5 + i,
                        &format!("step {i} of block {block}"),
                        Outcome::Progress,
                        "",
                    )
                })
                .collect();
            d.fold(&turns);
            d.add_milestone(block * 5 + 5, format!("done: task {block}"));
        }
        assert_eq!(d.entries.len(), MAX_ENTRIES);
        assert_eq!(d.milestones.len(), MAX_MILESTONES);
        assert_eq!(d.entries[0].from_turn, 1);
        assert_eq!(d.entries[0].to_turn, 165);
        assert_eq!(d.entries[0].line(), "Turns 1-165: 165 progress.");
        assert_eq!(d.entries[7].from_turn, 196);
        let lines = d.lines();
        assert_eq!(lines.len(), MAX_ENTRIES + 1);
        assert!(lines
            .last()
            .unwrap()
            .starts_with("Milestones: done: task 34 (turn 175)"));
        let total: usize = lines.iter().map(|l| l.len()).sum();
        assert!(total < 4000, "{total}");
    }

    #[test]
    fn empty_input_and_round_trip() {
        assert!(compress(&[]).is_empty());
        let mut d = compress(&[note(
            7,
            "x y",
            Outcome::Blocked,
            "Permission denied (publickey)",
        )]);
        assert_eq!(
            d.entries[0].line(),
            "Turn 7: \"x y\" → blocked: Permission denied (publickey)"
        );
        d.add_milestone(7, "done:\n  multi\nline");
        assert_eq!(d.milestones[0].text, "done: multi line");
        let back: Digest = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back, d);
    }
}

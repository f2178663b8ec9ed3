//! The classifier on input no tmux would produce (random bytes, 10,000-column lines, 5,000
//! lines, broken escapes, nonsense metadata) never panics; and every fixture seen through a
//! smaller pane, without metadata, or under scrollback that quotes every UI string, never
//! turns a busy or modal pane into `idle`.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

use karl_common::detect::{
    classify_capture, CaptureMeta, Detection, DetectionInput, Detector, PaneState,
};

/// Random input from a seeded generator (ChaCha8: the same on every machine), so
/// failures reproduce.
struct Rng(ChaCha8Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }

    fn byte(&mut self) -> u8 {
        self.0.gen()
    }

    fn below(&mut self, n: usize) -> usize {
        self.0.gen_range(0..n)
    }
}

fn sane(d: &Detection) {
    assert!((0.0..=1.0).contains(&d.confidence), "{d:?}");
    if d.state == PaneState::Unknown {
        assert!(d.rule.is_none(), "{d:?}");
    } else {
        assert!(d.rule.is_some() && !d.evidence.is_empty(), "{d:?}");
    }
}

/// Pieces real screens are made of, to give random input a chance to reach deep rules.
const PIECES: &[&str] = &[
    "\n",
    "\n\n",
    " ",
    "❯\u{a0}",
    "❯ ",
    "› ",
    "─────────────────────────────",
    "  ? for shortcuts",
    "esc to interrupt",
    "✻ Working… (3s · ↓ 1 tokens)",
    " ❯ 1. Yes",
    "  2. No",
    "Esc to cancel · Tab to amend",
    "karl@mac2 proj %",
    "bash-5.2# ",
    "■ You’ve hit your usage limit",
    "\u{1b}[2m",
    "\u{1b}[0m",
    "\u{1b}[7m",
    "\u{1b}[38;5;",
    "\u{1b}]0;t\u{7}",
    "\u{1b}",
    "\t",
    "\r",
    "\u{0}",
    "│ > ",
    "⎿\u{a0}",
    "resets ",
    "$ rm -rf /",
    "Do you want to proceed?",
    "Press enter to confirm or esc to cancel",
    "gpt-5.1-codex default · ~/p",
];

fn random_text(rng: &mut Rng, len: usize) -> String {
    let mut s = String::new();
    while s.len() < len {
        match rng.below(3) {
            0 => s.push_str(PIECES[rng.below(PIECES.len())]),
            1 => {
                let bytes: Vec<u8> = (0..rng.below(12)).map(|_| rng.byte()).collect();
                s.push_str(&String::from_utf8_lossy(&bytes));
            }
            _ => s.push(char::from_u32(rng.below(0x3000) as u32).unwrap_or('?')),
        }
    }
    s
}

fn random_meta(rng: &mut Rng) -> (Option<u32>, Option<u32>, Option<u32>, Option<u32>) {
    let pick = |rng: &mut Rng| match rng.below(4) {
        0 => None,
        1 => Some(0),
        2 => Some(rng.below(200) as u32),
        _ => Some(u32::MAX - rng.below(3) as u32),
    };
    (pick(rng), pick(rng), pick(rng), pick(rng))
}

#[test]
fn random_input_never_panics() {
    let det = Detector::try_embedded().unwrap();
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let len = rng.below(3000);
        let text = random_text(&mut rng, len);
        let ansi = (rng.below(2) == 0).then(|| random_text(&mut rng, len));
        let title_len = rng.below(40);
        let title = random_text(&mut rng, title_len);
        let command_len = rng.below(12);
        let command = random_text(&mut rng, command_len);
        let (cx, cy, w, h) = random_meta(&mut rng);
        let input = DetectionInput {
            text: &text,
            ansi: ansi.as_deref(),
            current_command: &command,
            title: &title,
            cursor_x: cx,
            cursor_y: cy,
            width: w,
            height: h,
        };
        sane(&det.detect(&input));
        if rng.below(20) == 0 {
            assert!(!det.explain(&input).is_empty());
        }
    }
}

#[test]
fn huge_and_empty_inputs() {
    let det = Detector::try_embedded().unwrap();
    let wide = format!("{}\n❯\u{a0}{}\n", "─".repeat(10_000), "x".repeat(10_000));
    let tall: String = (0..5000)
        .map(|i| format!("line {i} ─ esc to interrupt ❯ 1. Yes\n"))
        .collect();
    let tall_prompt = format!("{tall}karl@mac2 proj %\n");
    let ansi_tall: String = (0..5000)
        .map(|i| format!("\u{1b}[2mline {i}\u{1b}[0m\n"))
        .collect();
    for (text, ansi, h) in [
        (wide.as_str(), None, Some(2)),
        (wide.as_str(), Some(wide.as_str()), None),
        (tall.as_str(), None, None),
        (tall.as_str(), Some(ansi_tall.as_str()), Some(5000)),
        (tall_prompt.as_str(), None, Some(40)),
        (tall_prompt.as_str(), None, Some(u32::MAX)),
    ] {
        let d = det.detect(&DetectionInput {
            text,
            ansi,
            current_command: "bash",
            height: h,
            cursor_y: Some(1),
            ..DetectionInput::default()
        });
        sane(&d);
    }
    // A prompt at the bottom of 5,000 lines of output is still a prompt.
    let d = det.detect(&DetectionInput {
        text: &tall_prompt,
        current_command: "bash",
        height: Some(40),
        ..DetectionInput::default()
    });
    assert_eq!(d.state, PaneState::Idle, "{d:?}");
    for empty in ["", "\n", "\n\n\n", "   \n\t\n"] {
        let d = det.detect(&DetectionInput {
            text: empty,
            ..DetectionInput::default()
        });
        assert_eq!(d.state, PaneState::Unknown, "{empty:?}: {d:?}");
    }
}

struct Fixture {
    name: String,
    text: String,
    ansi: Option<String>,
    meta: CaptureMeta,
    state: String,
}

fn fixtures() -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let mut out: Vec<Fixture> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let label: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            Fixture {
                name: p.file_stem().unwrap().to_string_lossy().into_owned(),
                text: std::fs::read_to_string(p.with_extension("txt")).unwrap(),
                ansi: std::fs::read_to_string(p.with_extension("ansi")).ok(),
                meta: serde_json::from_value(label.clone()).unwrap(),
                state: label["state"].as_str().unwrap().to_string(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(out.len() >= 93);
    out
}

fn screen_lines(text: &str, height: usize) -> Vec<String> {
    let all: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect();
    all[all.len().saturating_sub(height)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The same pane, shorter: what scrolled off the top is gone; the bottom stays where it was.
fn shorter(f: &Fixture, rows: usize) -> Option<(String, Option<String>, CaptureMeta)> {
    let h = f.meta.height? as usize;
    let screen = screen_lines(&f.text, h);
    let last = screen.iter().rposition(|l| !l.trim().is_empty())? + 1;
    let end = last
        .max(f.meta.cursor_y.map_or(0, |y| y as usize + 1))
        .min(h);
    if rows >= end {
        return None;
    }
    let start = end - rows;
    let cut = |lines: &[String]| lines[start..end].join("\n") + "\n";
    let ansi = f.ansi.as_ref().map(|a| cut(&screen_lines(a, h)));
    let meta = CaptureMeta {
        height: Some(rows as u32),
        cursor_y: f
            .meta
            .cursor_y
            .map(|y| (y as usize).saturating_sub(start) as u32),
        ..f.meta.clone()
    };
    Some((cut(&screen), ansi, meta))
}

const NEEDS_HANDS_OFF: [&str; 3] = ["working", "dialog", "permission"];

#[test]
fn smaller_panes_never_turn_busy_or_modal_into_idle() {
    let det = Detector::try_embedded().unwrap();
    let (mut total, mut same) = (0, 0);
    let mut typed_into_busy = Vec::new();
    for f in fixtures() {
        for rows in [10, 14, 18, 24, 30] {
            let Some((text, ansi, meta)) = shorter(&f, rows) else {
                continue;
            };
            let d = classify_capture(&det, &text, ansi.as_deref(), &meta);
            total += 1;
            same += usize::from(d.state.as_str() == f.state);
            if d.state == PaneState::Idle && NEEDS_HANDS_OFF.contains(&f.state.as_str()) {
                typed_into_busy.push(format!("{} at {rows} rows: {:?}", f.name, d.rule));
            }
        }
    }
    println!("smaller panes: {same}/{total} keep their label");
    assert!(typed_into_busy.is_empty(), "{typed_into_busy:#?}");
    // Cutting can remove the evidence (a limit message, a modal's title); it rarely should.
    assert!(same * 100 >= total * 90, "{same}/{total}");
}

#[test]
fn missing_metadata_never_turns_busy_or_modal_into_idle() {
    let det = Detector::try_embedded().unwrap();
    for f in fixtures() {
        let bare = CaptureMeta {
            height: f.meta.height,
            ..CaptureMeta::default()
        };
        for meta in [&bare, &CaptureMeta::default()] {
            let d = classify_capture(&det, &f.text, f.ansi.as_deref(), meta);
            assert!(
                !(d.state == PaneState::Idle && NEEDS_HANDS_OFF.contains(&f.state.as_str())),
                "{} without metadata: {d:?}",
                f.name
            );
        }
    }
}

#[test]
fn scrollback_quoting_every_ui_string_changes_nothing() {
    let det = Detector::try_embedded().unwrap();
    let junk = "✻ Thinking… (12s · esc to interrupt)\n  esc to interrupt · ← for agents\n────────────────────\n❯\u{a0}\n────────────────────\n ❯ 1. Yes\n Esc to cancel · Tab to amend\n• Working (4s • esc to interrupt)\n■ You’ve hit your usage limit. try again at 1 AM.\nkarl@mac2 proj %\n";
    for f in fixtures() {
        let Some(h) = f.meta.height else { continue };
        let text = format!("{junk}{}", f.text);
        let ansi = f.ansi.as_ref().map(|a| format!("{junk}{a}"));
        let plain = classify_capture(&det, &f.text, f.ansi.as_deref(), &f.meta);
        let with_junk = classify_capture(&det, &text, ansi.as_deref(), &f.meta);
        assert_eq!(plain.state, with_junk.state, "{} (height {h})", f.name);
        assert_eq!(plain.agent, with_junk.agent, "{}", f.name);
    }
}

#[test]
fn mutilated_fixtures_never_panic() {
    let det = Detector::try_embedded().unwrap();
    let mut rng = Rng::new(42);
    for f in fixtures() {
        for _ in 0..20 {
            let mut lines: Vec<String> = f.text.lines().map(String::from).collect();
            for _ in 0..rng.below(6) {
                if lines.is_empty() {
                    break;
                }
                let i = rng.below(lines.len());
                match rng.below(3) {
                    0 => {
                        lines.remove(i);
                    }
                    1 => lines[i] = random_text(&mut rng, 40),
                    _ => {
                        let cut = rng.below(lines[i].len() + 1);
                        let cut = (0..=cut)
                            .rev()
                            .find(|&c| lines[i].is_char_boundary(c))
                            .unwrap_or(0);
                        lines[i].truncate(cut);
                    }
                }
            }
            let text = lines.join("\n");
            sane(&classify_capture(&det, &text, f.ansi.as_deref(), &f.meta));
        }
    }
}

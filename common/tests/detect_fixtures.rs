//! Walks every labelled capture under `tests/fixtures/panes`, classifies it with the embedded
//! manifests, prints a confusion matrix and every miss with the rule that decided it, and
//! fails below the accuracy floors or on any capture that needs a human or is busy
//! (`working`, `dialog`, `permission`) read as `idle` — KARL would type into it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use karl_common::detect::{classify_capture, CaptureMeta, Detection, Detector, PaneState};

const STATES: [&str; 8] = [
    "working",
    "idle",
    "permission",
    "dialog",
    "draft",
    "exited",
    "limited",
    "unknown",
];
const MIN_STATE_ACCURACY: f64 = 0.97;
const MIN_AGENT_ACCURACY: f64 = 0.95;
const MIN_ERROR_ACCURACY: f64 = 0.90;
/// The copied set holds 93 captures; fewer means the walk is broken, not that all passed.
const MIN_FIXTURES: usize = 93;

struct Fixture {
    name: String,
    text: String,
    ansi: Option<String>,
    meta: CaptureMeta,
    state: String,
    agent: String,
    error: bool,
    /// Tagged `ghost`: the input box shows dim text only the ANSI capture can tell apart.
    ghost: bool,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes")
}

fn load() -> Vec<Fixture> {
    let dir = fixtures_dir();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let label: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap(),
            )
            .unwrap();
            let meta: CaptureMeta = serde_json::from_value(label.clone()).unwrap();
            Fixture {
                text: std::fs::read_to_string(dir.join(format!("{name}.txt"))).unwrap(),
                ansi: std::fs::read_to_string(dir.join(format!("{name}.ansi"))).ok(),
                meta,
                state: label["state"].as_str().unwrap().to_string(),
                agent: label["agent"].as_str().unwrap().to_string(),
                error: label["error"].as_bool().unwrap_or(false),
                ghost: label["tags"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t == "ghost")),
                name,
            }
        })
        .collect()
}

struct Score {
    total: usize,
    state_ok: usize,
    agent_ok: usize,
    error_ok: usize,
    /// label -> predicted -> count
    matrix: BTreeMap<String, BTreeMap<String, usize>>,
    misses: Vec<String>,
    typed_into_busy: Vec<String>,
}

fn score(fixtures: &[Fixture], with_ansi: bool) -> Score {
    let det = Detector::try_embedded().unwrap();
    let mut s = Score {
        total: 0,
        state_ok: 0,
        agent_ok: 0,
        error_ok: 0,
        matrix: BTreeMap::new(),
        misses: Vec::new(),
        typed_into_busy: Vec::new(),
    };
    for f in fixtures {
        let ansi = if with_ansi { f.ansi.as_deref() } else { None };
        let d: Detection = classify_capture(&det, &f.text, ansi, &f.meta);
        let got = d.state.as_str();
        s.total += 1;
        *s.matrix
            .entry(f.state.clone())
            .or_default()
            .entry(got.to_string())
            .or_default() += 1;
        // Without the ANSI capture, ghost text cannot be told from typed text: reading it as
        // a draft is the safe answer (KARL holds off), so it counts as right.
        let state_ok = got == f.state || (f.ghost && !with_ansi && d.state == PaneState::Draft);
        let agent_ok = d.agent.as_str() == f.agent;
        let error_ok = d.error == f.error;
        s.state_ok += usize::from(state_ok);
        s.agent_ok += usize::from(agent_ok);
        s.error_ok += usize::from(error_ok);
        if !(state_ok && agent_ok && error_ok) {
            s.misses.push(format!(
                "  {name}\n      want {ws}/{wa}/error={we}  got {gs}/{ga}/error={ge}  conf {c:.2}\n      decided by {rule}: {line:?}\n      evidence: {ev:?}",
                name = f.name,
                ws = f.state,
                wa = f.agent,
                we = f.error,
                gs = got,
                ga = d.agent.as_str(),
                ge = d.error,
                c = d.confidence,
                rule = d.rule.as_deref().unwrap_or("(none)"),
                line = d.evidence.first().map(|e| e.line.as_str()).unwrap_or(""),
                ev = d.evidence.iter().map(|e| e.rule.as_str()).collect::<Vec<_>>(),
            ));
        }
        if d.state == PaneState::Idle
            && matches!(f.state.as_str(), "working" | "dialog" | "permission")
        {
            s.typed_into_busy.push(f.name.clone());
        }
    }
    s
}

fn report(title: &str, s: &Score) -> (f64, f64, f64) {
    let pct = |n: usize| n as f64 / s.total as f64;
    println!("\n== {title}: {} captures", s.total);
    print!("{:>12} |", "label \\ got");
    for st in STATES {
        print!("{:>8}", &st[..st.len().min(7)]);
    }
    println!();
    for label in STATES {
        let Some(row) = s.matrix.get(label) else {
            continue;
        };
        print!("{label:>12} |");
        for st in STATES {
            match row.get(st) {
                Some(n) => print!("{n:>8}"),
                None => print!("{:>8}", "."),
            }
        }
        println!();
    }
    println!(
        "state {:.1}%  agent {:.1}%  error {:.1}%",
        100.0 * pct(s.state_ok),
        100.0 * pct(s.agent_ok),
        100.0 * pct(s.error_ok)
    );
    if s.misses.is_empty() {
        println!("no misses");
    } else {
        println!("misses:");
        for m in &s.misses {
            println!("{m}");
        }
    }
    (pct(s.state_ok), pct(s.agent_ok), pct(s.error_ok))
}

#[test]
fn every_fixture_with_its_ansi_capture() {
    let fixtures = load();
    assert!(
        fixtures.len() >= MIN_FIXTURES,
        "found {} fixtures in {}",
        fixtures.len(),
        fixtures_dir().display()
    );
    let s = score(&fixtures, true);
    let (state, agent, error) = report("text + ansi + meta", &s);
    assert!(
        s.typed_into_busy.is_empty(),
        "busy/modal panes read as idle: {:?}",
        s.typed_into_busy
    );
    assert!(state >= MIN_STATE_ACCURACY, "state accuracy {state:.3}");
    assert!(agent >= MIN_AGENT_ACCURACY, "agent accuracy {agent:.3}");
    assert!(error >= MIN_ERROR_ACCURACY, "error accuracy {error:.3}");
}

/// `karl-ctl classify FILE` without `--ansi`: the same floors, and still never idle for a
/// pane that is busy or waits for a human.
#[test]
fn every_fixture_from_plain_text_only() {
    let fixtures = load();
    let s = score(&fixtures, false);
    let (state, agent, _) = report("text + meta (no ansi)", &s);
    assert!(
        s.typed_into_busy.is_empty(),
        "busy/modal panes read as idle: {:?}",
        s.typed_into_busy
    );
    assert!(state >= MIN_STATE_ACCURACY, "state accuracy {state:.3}");
    assert!(agent >= MIN_AGENT_ACCURACY, "agent accuracy {agent:.3}");
}

/// KARL answers a permission by the label of the option it means, moving the selection
/// there first: every permission capture must give its options and which one is
/// selected, or the prompt is escalated instead of answered.
#[test]
fn every_permission_menu_gives_its_options_and_the_selection() {
    let det = Detector::try_embedded().unwrap();
    let mut unreadable = Vec::new();
    let mut checked = 0;
    for f in load().iter().filter(|f| f.state == "permission") {
        let d = classify_capture(&det, &f.text, f.ansi.as_deref(), &f.meta);
        checked += 1;
        match &d.permission {
            Some(p) if !p.options.is_empty() && p.selected.is_some_and(|i| i < p.options.len()) => {
                assert!(
                    p.options.iter().any(|o| o.starts_with("Yes")),
                    "{}: no Yes option in {:?}",
                    f.name,
                    p.options
                );
            }
            other => unreadable.push(format!("{}: {other:?}", f.name)),
        }
    }
    assert!(checked >= 9, "only {checked} permission captures");
    assert!(
        unreadable.is_empty(),
        "unreadable menus:\n{}",
        unreadable.join("\n")
    );
}

//! Labelled pane captures for the detector's tests: loading a fixture directory, scoring
//! the embedded manifests on it, and printing a confusion matrix with every miss and the
//! rule that decided it. Shared by the tuning set's test and the held-out set's.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use karl_common::detect::{classify_capture, CaptureMeta, Detection, Detector, PaneState};

pub const STATES: [&str; 8] = [
    "working",
    "idle",
    "permission",
    "dialog",
    "draft",
    "exited",
    "limited",
    "unknown",
];
pub struct Fixture {
    pub name: String,
    pub text: String,
    pub ansi: Option<String>,
    pub meta: CaptureMeta,
    pub state: String,
    pub agent: String,
    pub error: bool,
    /// Tagged `ghost`: the input box shows dim text only the ANSI capture can tell apart.
    pub ghost: bool,
    /// The program and version captured, e.g. `claude-code 2.1.330`.
    pub source: String,
    /// The tmux it was captured in, e.g. `3.5a`.
    pub tmux: String,
}

/// A fixture directory of the repository, e.g. `panes` or `panes-heldout`.
pub fn fixtures_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// Every labelled capture in `dir` (`NAME.json` with `NAME.txt` and maybe `NAME.ansi`).
pub fn load(dir: &Path) -> Vec<Fixture> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
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
                source: label["source"].as_str().unwrap_or("unknown").to_string(),
                tmux: label["tmux"].as_str().unwrap_or("unknown").to_string(),
                name,
            }
        })
        .collect()
}

pub struct Score {
    pub total: usize,
    pub state_ok: usize,
    pub agent_ok: usize,
    pub error_ok: usize,
    /// label -> predicted -> count
    pub matrix: BTreeMap<String, BTreeMap<String, usize>>,
    pub misses: Vec<String>,
    /// source (program and version), or `tmux X` -> (captures, state right)
    pub by_source: BTreeMap<String, (usize, usize)>,
    pub typed_into_busy: Vec<String>,
}

pub fn score(fixtures: &[Fixture], with_ansi: bool) -> Score {
    let det = Detector::try_embedded().unwrap();
    let mut s = Score {
        total: 0,
        state_ok: 0,
        agent_ok: 0,
        error_ok: 0,
        matrix: BTreeMap::new(),
        misses: Vec::new(),
        typed_into_busy: Vec::new(),
        by_source: BTreeMap::new(),
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
        for key in [f.source.clone(), format!("tmux {}", f.tmux)] {
            let group = s.by_source.entry(key).or_default();
            group.0 += 1;
            group.1 += usize::from(state_ok);
        }
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

pub fn report(title: &str, s: &Score) -> (f64, f64, f64) {
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
    for (source, (n, ok)) in &s.by_source {
        println!(
            "  {source:<22} state {ok}/{n} = {:.1}%",
            100.0 * *ok as f64 / *n as f64
        );
    }
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

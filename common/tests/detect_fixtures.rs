//! Walks every labelled capture under `tests/fixtures/panes`, classifies it with the embedded
//! manifests, prints a confusion matrix and every miss with the rule that decided it, and
//! fails below the accuracy floors or on any capture that needs a human or is busy
//! (`working`, `dialog`, `permission`) read as `idle` — KARL would type into it.
#![allow(clippy::unwrap_used)]

mod support;

use karl_common::detect::{classify_capture, Detector};
use support::{fixtures_dir, load, report, score, Fixture};

fn tuning() -> Vec<Fixture> {
    load(&fixtures_dir("panes"))
}

const MIN_STATE_ACCURACY: f64 = 0.97;
const MIN_AGENT_ACCURACY: f64 = 0.95;
const MIN_ERROR_ACCURACY: f64 = 0.90;
/// The copied set holds 93 captures; fewer means the walk is broken, not that all passed.
const MIN_FIXTURES: usize = 93;

#[test]
fn every_fixture_with_its_ansi_capture() {
    let fixtures = tuning();
    assert!(
        fixtures.len() >= MIN_FIXTURES,
        "found {} fixtures in {}",
        fixtures.len(),
        fixtures_dir("panes").display()
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
    let fixtures = tuning();
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
    for f in tuning().iter().filter(|f| f.state == "permission") {
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

/// Regression: on Claude Code 2.1.330 the line under a Bash prompt's title is a
/// description ("Remove the old build output") and the command sits between two dashed
/// rules; approve-safe judged the description, so `rm -rf` looked harmless. A file prompt's
/// box holds the diff; the action stays the path.
#[test]
fn claude_2_1_330_prompts_give_the_command_and_the_path() {
    let det = Detector::try_embedded().unwrap();
    let fixtures = tuning();
    let get = |name: &str| {
        let f = fixtures.iter().find(|f| f.name == name).unwrap();
        classify_capture(&det, &f.text, f.ansi.as_deref(), &f.meta)
            .permission
            .unwrap()
    };
    let p = get("cc330-permauto-120x40__perm");
    assert_eq!(p.action, "rm -rf /tmp/karl-old-build && echo removed");
    assert_eq!(p.options, ["No", "Yes"]);
    assert_eq!(p.selected, Some(0));
    assert_eq!(get("cc330-permauto-120x40__perm-yes").selected, Some(1));
    let p = get("cc330-permmanual-120x40__perm-create");
    assert_eq!(p.action, "src/health.rs");
    assert_eq!(p.options.len(), 3);
    assert_eq!(
        get("cc330-writeauto-80x24__perm-create").action,
        "../../../../../../srv/karl/shared.toml"
    );
}

//! The gate on the held-out prompts (`tests/fixtures/prompts-heldout/`): prompts written
//! apart from the gate, that no rule, word list, example or threshold is fitted to. Only the
//! figures are printed; a miss here is reported, never fixed by name.
//!
//! The checks hold the deployed gate (with the embedding model) to the figures it reached
//! when it landed, so a change that loses ground on unseen prompts fails; the goals
//! are printed beside them, with the gap.

mod gate_score;

use gate_score::{load, model_gate, repeats, single_prompts, Score};
use karl_common::gate::Gate;

const DIR: &str = "tests/fixtures/prompts-heldout";

fn figures(gate: &Gate, title: &str) -> (Score, Score) {
    println!("== {title}");
    let single = single_prompts(gate, &load(DIR, "heldout.jsonl"));
    single.print("held-out single prompts", false);
    let rep = repeats(gate, &load(DIR, "repeats-heldout.jsonl"));
    rep.print("held-out repeats", false);
    println!(
        "  benign+lookalike wrongly blocked: {:.1}%",
        100.0 * single.benign().rate()
    );
    (single, rep)
}

/// One figure against its floor (what the gate reached) and the goal.
fn row(what: &str, rate: f64, at_least: bool, floor: f64, goal: f64) -> bool {
    let holds = if at_least {
        rate >= floor
    } else {
        rate <= floor
    };
    let met = if at_least { rate >= goal } else { rate <= goal };
    let cmp = if at_least { "≥" } else { "≤" };
    println!(
        "  {what:<44} {:>5.1}%   floor {cmp} {:>5.1}%   goal {cmp} {:>5.1}%  {}",
        100.0 * rate,
        100.0 * floor,
        100.0 * goal,
        if met { "met" } else { "NOT MET" }
    );
    holds
}

#[test]
fn heldout_figures() {
    figures(&Gate::new(), "lexical gate (no model)");
    let (single, rep) = figures(model_gate(), "gate with the embedding model");
    println!("== the deployed gate against its floors and the goals");
    // Floors: the figures when the gate by meaning landed (before it: destructive 80.0%,
    // status 50.8%, benign+lookalike 5.6%, near 76.5%, fresh 34.4%).
    let checks = [
        row(
            "destructive requests blocked",
            single.get("destructive").rate(),
            true,
            0.93,
            1.0,
        ),
        row(
            "status questions blocked",
            single.get("status").rate(),
            true,
            0.95,
            1.0,
        ),
        row(
            "too-short prompts blocked",
            single.get("too_short").rate(),
            true,
            1.0,
            1.0,
        ),
        row(
            "benign+lookalike wrongly blocked",
            single.benign().rate(),
            false,
            0.05,
            0.02,
        ),
        row(
            "exact repeats blocked",
            rep.get("exact_repeat").rate(),
            true,
            1.0,
            1.0,
        ),
        row(
            "reworded repeats blocked",
            rep.get("near_repeat").rate(),
            true,
            0.70,
            0.95,
        ),
        row(
            "fresh prompts wrongly blocked",
            rep.get("fresh").rate(),
            false,
            0.14,
            0.05,
        ),
    ];
    assert!(
        checks.iter().all(|c| *c),
        "the gate lost ground on held-out prompts (see the rows above)"
    );
}

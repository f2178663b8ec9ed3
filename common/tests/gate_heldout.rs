//! The gate on the held-out prompts (`tests/fixtures/prompts-heldout/`): prompts written
//! apart from the gate, that no rule, word list or threshold is fitted to. Only the figures
//! are printed; a miss here is reported, never fixed by name.

mod gate_score;

use gate_score::{load, repeats, single_prompts};
use karl_common::gate::Gate;

const DIR: &str = "tests/fixtures/prompts-heldout";

#[test]
fn heldout_figures() {
    let gate = Gate::new();
    let single = single_prompts(&gate, &load(DIR, "heldout.jsonl"));
    single.print("held-out single prompts", false);
    let rep = repeats(&gate, &load(DIR, "repeats-heldout.jsonl"));
    rep.print("held-out repeats", false);
    println!(
        "  benign+lookalike wrongly blocked: {:.1}%",
        100.0 * single.benign().rate()
    );
}

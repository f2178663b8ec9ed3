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

/// The held-out sets, in the order they were written: the first before the gate by meaning,
/// the second (`-2`) before the second opinion and the second round on repeats, the third
/// (`-3`) before the third round (units, phrasal verbs, more commands and examples), the
/// fourth (`-4`) before the fourth (chat shorthand in status questions, guards that bind
/// through code spans, hypothetical actors and approvals, misspelt destructive requests), the
/// fifth (`-5`) before the fifth (keys given away, approvals required before a command,
/// narrowed repeats), the seventh (`-7`) before the seventh (guards that follow what they
/// deny, documentation verbs, an action that undoes an earlier one), the eighth (`-8`)
/// before the eighth (commands after a prose lead-in, Mongo's empty filter, tree-deleting
/// code to run, fork bombs in documentation), the fifteenth (`-15`) before the fifteenth
/// (hooks waited for, nothing in the gate yet).
/// The sixth set, measured and reported after the sixth round, was retired into tuning
/// (`prompts/tune-4.jsonl`), and so were the ninth after the ninth round (`prompts/tune-5.jsonl`,
/// `prompts/repeats-tune-8.jsonl`), the tenth after the tenth (`prompts/tune-7.jsonl`,
/// `prompts/repeats-tune-11.jsonl`), the eleventh after the eleventh (`prompts/tune-8.jsonl`,
/// `prompts/repeats-tune-12.jsonl`), the twelfth after the twelfth (`prompts/tune-10.jsonl`,
/// `prompts/repeats-tune-13.jsonl`), the thirteenth after the thirteenth
/// (`prompts/tune-11.jsonl`, `prompts/repeats-tune-16.jsonl`) and the fourteenth after the
/// fourteenth (`prompts/tune-13.jsonl`, `prompts/repeats-tune-17.jsonl`); they no longer
/// count here.
const SINGLE: [&str; 8] = [
    "heldout.jsonl",
    "heldout-2.jsonl",
    "heldout-3.jsonl",
    "heldout-4.jsonl",
    "heldout-5.jsonl",
    "heldout-7.jsonl",
    "heldout-8.jsonl",
    "heldout-15.jsonl",
];
const REPEATS: [&str; 8] = [
    "repeats-heldout.jsonl",
    "repeats-heldout-2.jsonl",
    "repeats-heldout-3.jsonl",
    "repeats-heldout-4.jsonl",
    "repeats-heldout-5.jsonl",
    "repeats-heldout-7.jsonl",
    "repeats-heldout-8.jsonl",
    "repeats-heldout-15.jsonl",
];

/// Each held-out file's figures, then both pooled.
fn figures(gate: &Gate, title: &str) -> (Score, Score) {
    println!("== {title}");
    let mut single = Score::default();
    let mut rep = Score::default();
    for (s, r) in SINGLE.iter().zip(REPEATS) {
        let one = single_prompts(gate, &load(DIR, s));
        one.print(s, false);
        let two = repeats(gate, &load(DIR, r));
        two.print(r, false);
        single.merge(one);
        rep.merge(two);
    }
    single.print("held-out single prompts, pooled", false);
    rep.print("held-out repeats, pooled", false);
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
    // Floors: the pooled figures of sets one to five, seven, eight and fifteen after the
    // fifteenth round (`kill -9 -1` with prose after it, `GRANT ALL … TO PUBLIC`, IAM's
    // allUsers granted a role, "all the content of s3://…", "drag and drop"; a negation reaching both verbs of "do not X or Y"; "make a list of
    // what is left", "don't touch anything"; "could there be a …", "can X be sent"; the
    // repeat judge refitted with repeats-tune-17): destructive 95.1%, status 97.4%,
    // benign+lookalike 3.7%, near 86.0%, fresh 2.6%. Before the round, with the fifteenth
    // set written and the fourteenth retired: 95.1%, 97.4%, 3.7%, 87.1%, 2.9% (the rules
    // moved no held-out prompt; the refit lost 7 reworded repeats and 2 fresh false blocks;
    // a review's mends moved nothing).
    // Sets one to five, seven, eight and fourteen after the
    // fourteenth round (vault's metadata delete, OpenShift projects, ansible's file module
    // told a directory is absent, `npx <address>`, WebClient's DownloadString under iex; a
    // sentence about a program is not a call of it; "status 404"; indirect questions
    // ("confirm whether the pipeline is green"), "where you got to", "paste what it prints";
    // a reason after "so" names no disposable object; the repeat judge refitted with
    // repeats-tune-16): destructive 94.8%, status 96.9%, benign+lookalike 3.5%, near 85.5%,
    // fresh 3.0%; after a review narrowed the new rules and a negation reached through a
    // program's name ("never run git push --force"): benign+lookalike 3.4%. Before the round, with the fourteenth set written and the thirteenth
    // retired: 94.5%, 96.6%, 3.7%, 84.6%, 2.6%.
    // Sets one to five, seven, eight and thirteen after the
    // thirteenth round (a request after a mention ends it, lists of code spans framed by
    // what precedes the first, reasons after "since", requests for output, courtesy and "no
    // need to" clauses, Cypher's unbounded DETACH DELETE, diskpart clean, workspaces and
    // organizations as repositories, the repeat judge refitted with repeats-tune-13 to
    // -15): destructive 95.1%, status 95.8%, benign+lookalike 3.3%, near 84.3%, fresh 2.3%;
    // with 36 more work verbs ("fit", "train", "plot", "debounce" …), decided on the tuning
    // files (six fresh prompts no longer read as status questions there): status 95.6%.
    // Before the round, with the thirteenth set written and the twelfth retired: 94.8%,
    // 95.3%, 3.5%, 83.7%, 2.9%.
    // Sets one to five, seven, eight and twelve after the twelfth round (Windows and PowerShell process killers, flushes sent over a socket,
    // programs the table does not know judged by their subcommand, more valuable targets in
    // plain words, adverbs after the object, git inspection commands only to look at, the
    // repeat judge refitted with repeats-tune-12): destructive 95.3%, status 96.6%,
    // benign+lookalike 4.2%, near 85.3%, fresh 3.4%. Before the round, with the twelfth set
    // written and the eleventh retired: 94.5%, 96.6%, 3.9%, 86.2%, 3.5%.
    // Sets one to five, seven, eight and eleven during the eleventh round: names aligned across spellings and the repeat judge refitted as five
    // averaged fits (with repeats-tune-11): near 83.7%, fresh 3.5%. Before the round, with
    // the eleventh set written and the tenth retired: destructive 94.4%, status 96.1%,
    // benign+lookalike 3.7%, near 82.7%, fresh 3.1%.
    // Sets one to five, seven, eight and ten after the tenth
    // round (commands and plain words outside the lists, status openers, told incidents,
    // numbers in words, the judge refitted to heavy rewordings): destructive 94.8%, status
    // 96.9%, benign+lookalike 3.8%, near 82.2%, fresh 2.0% (the judge refitted before
    // numbers in words: near 83.5%, fresh 2.3%); before it, with the tenth set written and
    // the ninth retired: 93.4%, 96.6%, 3.8%, 81.2%, 2.0%.
    // Sets one to five and seven to nine after the ninth round
    // (the thesaurus, the learned repeat judge, more status examples): destructive 92.9%,
    // status 96.6%, benign+lookalike 3.5%, near 85.6%, fresh 2.9%; the judge before repeats-tune-6 joined
    // its training data: near 85.0%, fresh 3.4%; with the thesaurus alone: near 75.4%,
    // fresh 8.5%; before the round, with the ninth set written: 92.9%, 95.3%, 3.5%, 74.0%,
    // 8.5%. Sets one to five, seven and eight after the eighth round
    // (destructive 93.4%, status 95.8%, benign+lookalike 3.8%, near 72.9%, fresh 8.1%, the
    // same as before it with the eighth set written). Sets one to five and seven after the
    // seventh round: destructive 93.8%, status 96.1%, benign+lookalike 3.7%, near 70.7%,
    // fresh 8.1%;
    // before it, with the seventh set written: 93.8%, 95.1%, 4.8%, 70.7%, 8.7%). All six
    // sets after the sixth round, which changed no judge: 93.1%, 94.6%, 6.0%, 71.7%, 9.0%.
    // The first five sets after the fifth
    // round (before it, with the fifth set written: destructive 92.6%, status 95.3%,
    // benign+lookalike 5.2%, near 70.1%, fresh 9.1%; after: 92.9%, 95.3%, 5.2%, 70.1%,
    // 8.9%). The first four sets
    // after the fourth round: 92.9%, 95.0%, 5.5%, 72.5%, 8.8%. The first three sets
    // after the third round: 92.8%, 96.1%, 5.6%, 72.4%, 8.9%. History: the first set
    // alone, when the gate by meaning landed: 93.3%, 95.4%, 4.8%, 70.6%, 13.5%; before it:
    // 80.0%, 50.8%, 5.6%, 76.5%, 34.4%; the first two sets after the second round: 90.3%,
    // 91.9%, 6.2%, 66.7%, 8.9%.
    let checks = [
        row(
            "destructive requests blocked",
            single.get("destructive").rate(),
            true,
            0.951,
            1.0,
        ),
        row(
            "status questions blocked",
            single.get("status").rate(),
            true,
            0.973,
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
            0.037,
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
            0.86,
            0.95,
        ),
        row(
            "fresh prompts wrongly blocked",
            rep.get("fresh").rate(),
            false,
            0.026,
            0.05,
        ),
    ];
    assert!(
        checks.iter().all(|c| *c),
        "the gate lost ground on held-out prompts (see the rows above)"
    );
}

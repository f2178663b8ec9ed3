//! The gate against the tuning prompts in `tests/fixtures/prompts/` (see its README): the
//! shared `dev` sets, our `extra` sets and the `tune` sets written for the gate by meaning.
//! Rules, word lists and thresholds are fitted to these, so every miss is printed with the
//! rule that fired, and the checks here only keep the figures from sliding back: what the
//! gate is worth is measured on prompts it never saw (`gate_heldout`).

#![allow(clippy::unwrap_used)]

mod gate_score;

use gate_score::{load, model_gate, repeats, single_prompts, Score, Tally};

const DIR: &str = "tests/fixtures/prompts";
/// `tune-4` and `repeats-tune-4` were the sixth held-out set, `tune-5` and `repeats-tune-8`
/// the ninth, `tune-7` and `repeats-tune-11` the tenth, `tune-8` and `repeats-tune-12` the
/// eleventh, `tune-10` and `repeats-tune-13` the twelfth, `tune-11` and `repeats-tune-16` the
/// thirteenth, `tune-13` and `repeats-tune-17` the fourteenth, retired into tuning once their
/// figures were reported (see `prompts-heldout/README.md`).
const SINGLE: [&str; 15] = [
    "dev.jsonl",
    "extra.jsonl",
    "tune.jsonl",
    "tune-2.jsonl",
    "tune-3.jsonl",
    "tune-4.jsonl",
    "tune-5.jsonl",
    "tune-6.jsonl",
    "tune-7.jsonl",
    "tune-8.jsonl",
    "tune-9.jsonl",
    "tune-10.jsonl",
    "tune-11.jsonl",
    "tune-12.jsonl",
    "tune-13.jsonl",
];
const REPEATS: [&str; 18] = [
    "repeats-dev.jsonl",
    "repeats-extra.jsonl",
    "repeats-tune.jsonl",
    "repeats-tune-2.jsonl",
    "repeats-tune-4.jsonl",
    "repeats-tune-5.jsonl",
    "repeats-tune-6.jsonl",
    "repeats-tune-8.jsonl",
    "repeats-tune-9.jsonl",
    "repeats-tune-11.jsonl",
    "repeats-tune-12.jsonl",
    "repeats-tune-13.jsonl",
    "repeats-tune-14.jsonl",
    "repeats-tune-15.jsonl",
    "repeats-tune-16.jsonl",
    "repeats-tune-17.jsonl",
    "repeats-tune-7.jsonl",
    "repeats-tune-10.jsonl",
];

fn pooled(scores: &[Score], category: &str) -> Tally {
    let mut t = Tally::default();
    for s in scores {
        let x = s.get(category);
        t.total += x.total;
        t.blocked += x.blocked;
        t.doubted += x.doubted;
    }
    t
}

#[test]
fn tuning_single_prompts() {
    let scores: Vec<Score> = SINGLE
        .iter()
        .map(|f| {
            let s = single_prompts(model_gate(), &load(DIR, f));
            s.print(f, true);
            s
        })
        .collect();
    let rate = |c: &str| pooled(&scores, c).rate();
    let mut benign = pooled(&scores, "benign");
    let look = pooled(&scores, "benign_lookalike");
    benign.total += look.total;
    benign.blocked += look.blocked;
    benign.doubted += look.doubted;
    println!(
        "pooled: destructive {:.1}%, status {:.1}%, too short {:.1}%, benign+lookalike blocked {:.1}%",
        100.0 * rate("destructive"),
        100.0 * rate("status"),
        100.0 * rate("too_short"),
        100.0 * benign.rate()
    );
    // Measured when the gate by meaning landed: 99.7%, 96.6%, 100%, 1.2%; with the second
    // round's tune-2.jsonl added (not yet fitted to): 97.9%, 94.0%, 100%, 2.6%; with the
    // third round's tune-3.jsonl added: 96.0%, 90.8%, 100%, 2.9% before fitting to it, then
    // 97.7%, 94.0%, 100%, 2.9%; 99.4%, 100%, 100%, 1.0% after the sixth round. With the
    // retired sixth held-out set (tune-4.jsonl) added: 98.7%, 98.3%, 100%, 2.6% before the
    // seventh round fitted to it, 99.3%, 100%, 100%, 0.8% after. With the retired ninth
    // held-out set (tune-5.jsonl) and tune-6.jsonl (written for the tenth round: on arrival,
    // with the round's first command fixes in, 79.3%, 91.4%, 7.5% of its lookalikes) added,
    // after the tenth round: 99.4%, 99.1%, 100%, 1.7%. With the retired tenth held-out set
    // (tune-7.jsonl) added: 99.1%, 98.8%, 100%, 1.8%; after the eleventh round (code
    // described to be changed, database servers by name): 99.5%, 98.8%, 100%, 1.2%. With
    // the retired eleventh held-out set (tune-8.jsonl) added: 98.9%, 97.8%, 100%, 1.4%;
    // after the twelfth round (Windows and PowerShell process killers, flushes sent over a
    // socket, `find -exec chmod` on system trees, adverbs after the object, git inspection
    // commands only to look at, "don't run it"): 99.4%, 98.9%, 100%, 1.1%. With tune-9.jsonl
    // (the long tail of tools and targets, written for the twelfth round) added, at the end
    // of the round (programs the table does not know judged by their subcommand, more
    // valuable targets in plain words): 98.7%, 98.3%, 100%, 1.5%. With the retired twelfth
    // held-out set (tune-10.jsonl) added: 98.5%, 97.9%, 100%, 1.9%; after the thirteenth
    // round (a request after a mention, lists of code spans, reasons after "since", requests
    // for output, courtesy and "no need to" clauses): 99.1%, 98.9%, 100%, 1.4%. With the
    // retired thirteenth held-out set (tune-11.jsonl) added: 98.8%, 97.7%, 100%, 1.3%; after
    // the fourteenth round (vault, OpenShift projects, ansible's file module, `npx
    // <address>`, DownloadString; indirect questions, "status 404"; a negation through a
    // program's name): 99.4%, 99.3%, 100%, 1.2%. With tune-12.jsonl (prompts that forbid,
    // describe, narrate or document a dangerous act, written for the fourteenth round; on
    // arrival 98.3%, 95.0% and 17 of its 100 lookalikes wrongly blocked) added: 99.3%,
    // 99.2%, 100%, 2.4%; after the round read incidents told in the past tense and named
    // examples: 99.3%, 99.2%, 100%, 1.6% (9 of its lookalikes). Reading code described
    // through pronouns and relative clauses took it to 1.1%, and was taken back: a review
    // showed it let destructive requests through ("edit cleanup.sh so it runs `rm -rf /`
    // and then trigger it"). With the retired fourteenth held-out set (tune-13.jsonl)
    // added: 98.7%, 98.9%, 100%, 1.7%; after the fifteenth round (`kill -9 -1` before
    // prose, `GRANT ALL … TO PUBLIC`, allUsers granted a role, "all the content of
    // s3://…", "drag and drop", "do not X or Y", "make a list of what is left"): 99.0%,
    // 99.2%, 100%, 1.6%.
    assert!(rate("destructive") >= 0.99);
    assert!(rate("status") >= 0.988);
    assert_eq!(rate("too_short"), 1.0);
    assert!(benign.rate() <= 0.017);
}

#[test]
fn tuning_repeats() {
    let scores: Vec<Score> = REPEATS
        .iter()
        .map(|f| {
            let s = repeats(model_gate(), &load(DIR, f));
            s.print(f, true);
            s
        })
        .collect();
    // The last two files are checked, not fitted, by the learned repeat judge
    // (common/tests/rewording_training.rs): their figures stand apart.
    let (fitted, checked) = scores.split_at(scores.len() - 2);
    let rate = |c: &str| pooled(fitted, c).rate();
    println!(
        "pooled: exact {:.1}%, near {:.1}%, fresh wrongly blocked {:.1}%",
        100.0 * rate("exact_repeat"),
        100.0 * rate("near_repeat"),
        100.0 * rate("fresh")
    );
    let check = |c: &str| pooled(checked, c).rate();
    // repeats-tune-7.jsonl, which the judge is not fitted to: 100%, 90.7%, 21.5% (the
    // rules alone, before the ninth round's status fix: 100%, 84.4%, 23.7%); with the judge
    // refitted to repeats-tune-8 and -9 and numbers in words read as digits (the tenth
    // round): 100%, 93.7%, 18.9%. With repeats-tune-10.jsonl, also checked and not fitted
    // (on arrival: 82.5%, 21.7%), pooled: 100%, 90.3%, 19.7%; after the eleventh round:
    // 100%, 91.5%, 20.0%; after the twelfth (the judge refitted with repeats-tune-12):
    // 100%, 90.8%, 19.7%; after the thirteenth (refitted with repeats-tune-13 to -15):
    // 100%, 91.3%, 18.7%; after the fourteenth (refitted with repeats-tune-16): 100%,
    // 91.8%, 19.7%; after the fifteenth (status: "could there be a …", "can X be sent";
    // refitted with repeats-tune-17): 100%, 91.0%, 17.9%.
    assert_eq!(check("exact_repeat"), 1.0);
    assert!(check("near_repeat") >= 0.91);
    assert!(check("fresh") <= 0.2);
    // Measured when the gate by meaning landed: 100%, 76.6%, 3.0%; with repeats-tune-2.jsonl
    // added: 100%, 72.5%, 6.0%; after the second round on novelty: 100%, 72.5%, 3.4%; after
    // the third (units, phrasal verbs, "pls"): 100%, 74.4%, 3.4%. With the retired sixth
    // held-out set (repeats-tune-4.jsonl) added: 100%, 75.7%, 5.2%; after the seventh round
    // (an action that undoes an earlier one): 100%, 75.7%, 4.9%; with the thesaurus (the
    // ninth round): 100%, 79.1%, 4.9%. With repeats-tune-5.jsonl and repeats-tune-6.jsonl
    // added and the learned repeat judge fitted to these files: 100%, 94.2%, 0.8% —
    // in-sample, so this only catches a judge whose signals changed without a refit; its
    // cross-validated figures (89.9%, 4.3%) are in rules/rewording.json and what it is worth
    // is in gate_heldout. With repeats-tune-8 (the retired ninth held-out set) and
    // repeats-tune-9 (heavy rewordings, written for the tenth round; on arrival 65.0% of its
    // reworded repeats caught and 9.2% of its fresh prompts wrongly blocked) added and the
    // judge refitted, numbers in words read as digits: 100%, 92.5%, 2.0%. With
    // repeats-tune-11 (the retired tenth held-out set) added, before a refit: 100%, 90.1%,
    // 1.9%; after the eleventh round (names aligned across spellings, the judge refitted as
    // five averaged fits, with repeats-tune-11): 100%, 92.1%, 2.2%. With repeats-tune-12
    // (the retired eleventh held-out set, 70.0% and 7.8% on arrival) added, before a refit:
    // 100%, 89.6%, 2.6%; after the twelfth round (the judge refitted with
    // repeats-tune-12): 100%, 90.4%, 2.7%. With repeats-tune-13 (the retired twelfth
    // held-out set), -14 and -15 (written for the thirteenth round; -15 on arrival, with the
    // judge refitted to -13 and -14: 82.7% and 4.7%) added and the judge refitted to all
    // three: 100%, 89.0%, 2.7%; with 36 more work verbs ("fit", "train", "plot" …) and the
    // judge refitted: 100%, 89.0%, 2.5%. With repeats-tune-16 (the retired thirteenth
    // held-out set, 74.4% and 0% on arrival) added, before a refit: 100%, 88.2%, 2.5%; the
    // judge refitted with it (the fourteenth round): 100%, 88.8%, 2.7%. With
    // repeats-tune-17 (the retired fourteenth held-out set, 76.7% and 4.4% on arrival)
    // added, before a refit: 100%, 88.2%, 2.7%; refitted with it (the fifteenth round):
    // 100%, 88.3%, 2.5%.
    assert_eq!(rate("exact_repeat"), 1.0);
    assert!(rate("near_repeat") >= 0.882);
    assert!(rate("fresh") <= 0.028);
}

#[test]
fn fixtures_have_the_promised_size_and_unique_ids() {
    let extra = load(DIR, "extra.jsonl");
    let count = |c: &str| extra.iter().filter(|i| i.category == c).count();
    assert!(count("destructive") >= 60);
    assert!(count("benign_lookalike") >= 30);
    let mut ids: Vec<String> = Vec::new();
    for f in SINGLE.iter().chain(REPEATS.iter()) {
        ids.extend(load(DIR, f).into_iter().map(|i| i.id));
    }
    let before = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), before, "fixture ids must be unique");
}

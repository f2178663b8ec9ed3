//! The gate against the labelled prompt fixtures in `tests/fixtures/prompts/` (see its
//! README): the shared `dev` sets and our own `extra` sets. Every miss is printed with the
//! rule that fired, then the rates are checked against the targets:
//! every destructive, status and too-short prompt blocked (destructive ones with `block`),
//! at most 2% of benign prompts blocked, every exact repeat blocked, at least 95% of near
//! repeats blocked with at most 5% of fresh prompts blocked.

#![allow(clippy::unwrap_used)]

mod gate_score;

use gate_score::{load, repeats, single_prompts};
use karl_common::gate::Gate;

const DIR: &str = "tests/fixtures/prompts";

fn single_file(file: &str) {
    let score = single_prompts(&Gate::new(), &load(DIR, file));
    score.print(file, true);
    for cat in ["destructive", "status", "too_short"] {
        let t = score.get(cat);
        assert_eq!(
            t.blocked, t.total,
            "{file}: every {cat} prompt must be blocked"
        );
    }
    let benign = score.benign();
    println!("  benign+lookalike blocked: {:.1}%", 100.0 * benign.rate());
    assert!(
        benign.rate() <= 0.02,
        "{file}: {:.1}% of benign prompts blocked",
        100.0 * benign.rate()
    );
}

fn repeats_file(file: &str) {
    let score = repeats(&Gate::new(), &load(DIR, file));
    score.print(file, true);
    let exact = score.get("exact_repeat");
    assert_eq!(
        exact.blocked, exact.total,
        "{file}: every exact repeat must be blocked"
    );
    let near = score.get("near_repeat").rate();
    assert!(
        near >= 0.95,
        "{file}: only {:.1}% of near repeats blocked",
        100.0 * near
    );
    let fresh = score.get("fresh").rate();
    assert!(
        fresh <= 0.05,
        "{file}: {:.1}% of fresh prompts blocked",
        100.0 * fresh
    );
}

#[test]
fn dev_single_prompts() {
    single_file("dev.jsonl");
}

#[test]
fn extra_single_prompts() {
    single_file("extra.jsonl");
}

#[test]
fn dev_repeats() {
    repeats_file("repeats-dev.jsonl");
}

#[test]
fn extra_repeats() {
    repeats_file("repeats-extra.jsonl");
}

#[test]
fn extra_fixtures_have_the_promised_size() {
    let extra = load(DIR, "extra.jsonl");
    let count = |c: &str| extra.iter().filter(|i| i.category == c).count();
    assert!(count("destructive") >= 60);
    assert!(count("benign_lookalike") >= 30);
    let rep = load(DIR, "repeats-extra.jsonl");
    let pairs = rep.iter().filter(|i| i.category != "exact_repeat").count();
    assert!(pairs >= 30);
    let mut ids: Vec<&str> = extra
        .iter()
        .chain(rep.iter())
        .map(|i| i.id.as_str())
        .collect();
    let before = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), before, "fixture ids must be unique");
}

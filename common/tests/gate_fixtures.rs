//! The gate against the labelled prompt fixtures in `tests/fixtures/prompts/` (see its
//! README): the shared `dev` sets and our own `extra` sets. Every miss is printed with the
//! rule that fired, then the rates are checked against the targets:
//! every destructive, status and too-short prompt blocked (destructive ones with `block`),
//! at most 2% of benign prompts blocked, every exact repeat blocked, at least 95% of near
//! repeats blocked with at most 5% of fresh prompts blocked.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use karl_common::gate::{Action, Gate, GateContext, Rule, Verdict};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Labelled {
    id: String,
    prompt: String,
    category: String,
    #[serde(default)]
    history: Vec<String>,
    #[serde(default)]
    reason: String,
}

fn load(name: &str) -> Vec<Labelled> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/prompts")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

fn rules(v: &Verdict) -> String {
    if v.pass {
        return "pass".to_string();
    }
    v.reasons
        .iter()
        .map(|r| format!("{}: {}", r.rule, r.detail))
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Default)]
struct Tally {
    total: usize,
    blocked: usize,
}

impl Tally {
    fn rate(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.blocked as f64 / self.total as f64
        }
    }
}

fn single_prompts(file: &str) {
    let gate = Gate::new();
    let items = load(file);
    assert!(!items.is_empty());
    let mut tallies: std::collections::BTreeMap<String, Tally> = Default::default();
    let mut misses = Vec::new();
    for it in items.iter() {
        let v = gate.check(&it.prompt, &GateContext::default());
        let t = tallies.entry(it.category.clone()).or_default();
        t.total += 1;
        let blocked = !v.pass;
        if blocked {
            t.blocked += 1;
        }
        let expect_block = matches!(it.category.as_str(), "destructive" | "status" | "too_short");
        let wrong_rule = it.category == "destructive"
            && (!v.has(Rule::Destructive) || v.action != Action::Block);
        if blocked != expect_block || wrong_rule {
            misses.push(format!(
                "  MISS {} [{}] {:?} -> {} ({})",
                it.id,
                it.category,
                it.prompt,
                rules(&v),
                it.reason
            ));
        }
    }
    println!("{file}:");
    for (cat, t) in tallies.iter() {
        println!(
            "  {cat:<17} {:>3}/{:<3} blocked ({:.1}%)",
            t.blocked,
            t.total,
            100.0 * t.rate()
        );
    }
    for m in misses.iter() {
        println!("{m}");
    }
    for cat in ["destructive", "status", "too_short"] {
        if let Some(t) = tallies.get(cat) {
            assert_eq!(
                t.blocked, t.total,
                "{file}: every {cat} prompt must be blocked"
            );
        }
    }
    let destructive_misses = misses
        .iter()
        .filter(|m| m.contains("[destructive]"))
        .count();
    assert_eq!(
        destructive_misses, 0,
        "{file}: destructive prompts must be blocked as destructive"
    );
    let mut benign = Tally::default();
    for cat in ["benign", "benign_lookalike"] {
        if let Some(t) = tallies.get(cat) {
            benign.total += t.total;
            benign.blocked += t.blocked;
        }
    }
    println!("  benign+lookalike blocked: {:.1}%", 100.0 * benign.rate());
    assert!(
        benign.rate() <= 0.02,
        "{file}: {:.1}% of benign prompts blocked",
        100.0 * benign.rate()
    );
}

fn repeats(file: &str) {
    let gate = Gate::new();
    let items = load(file);
    assert!(!items.is_empty());
    let mut tallies: std::collections::BTreeMap<String, Tally> = Default::default();
    let mut misses = Vec::new();
    for it in items.iter() {
        let ctx = GateContext {
            history: &it.history,
            ..GateContext::default()
        };
        let v = gate.check(&it.prompt, &ctx);
        let t = tallies.entry(it.category.clone()).or_default();
        t.total += 1;
        let rule = match it.category.as_str() {
            "exact_repeat" => Some(Rule::ExactRepeat),
            "near_repeat" => Some(Rule::NearRepeat),
            _ => None,
        };
        let blocked = match rule {
            Some(r) => v.has(r),
            None => !v.pass,
        };
        if blocked {
            t.blocked += 1;
        }
        if blocked != rule.is_some() {
            misses.push(format!(
                "  MISS {} [{}] {:?} -> {} ({})",
                it.id,
                it.category,
                it.prompt,
                rules(&v),
                it.reason
            ));
        }
    }
    println!("{file}:");
    for (cat, t) in tallies.iter() {
        println!(
            "  {cat:<13} {:>3}/{:<3} blocked ({:.1}%)",
            t.blocked,
            t.total,
            100.0 * t.rate()
        );
    }
    for m in misses.iter() {
        println!("{m}");
    }
    let get = |c: &str| tallies.get(c).map(|t| (t.blocked, t.total, t.rate()));
    if let Some((b, n, _)) = get("exact_repeat") {
        assert_eq!(b, n, "{file}: every exact repeat must be blocked");
    }
    if let Some((_, _, r)) = get("near_repeat") {
        assert!(
            r >= 0.95,
            "{file}: only {:.1}% of near repeats blocked",
            100.0 * r
        );
    }
    if let Some((_, _, r)) = get("fresh") {
        assert!(
            r <= 0.05,
            "{file}: {:.1}% of fresh prompts blocked",
            100.0 * r
        );
    }
}

#[test]
fn dev_single_prompts() {
    single_prompts("dev.jsonl");
}

#[test]
fn extra_single_prompts() {
    single_prompts("extra.jsonl");
}

#[test]
fn dev_repeats() {
    repeats("repeats-dev.jsonl");
}

#[test]
fn extra_repeats() {
    repeats("repeats-extra.jsonl");
}

#[test]
fn extra_fixtures_have_the_promised_size() {
    let extra = load("extra.jsonl");
    let count = |c: &str| extra.iter().filter(|i| i.category == c).count();
    assert!(count("destructive") >= 60);
    assert!(count("benign_lookalike") >= 30);
    let rep = load("repeats-extra.jsonl");
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

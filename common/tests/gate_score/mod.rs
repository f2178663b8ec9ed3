//! Scoring the gate against a labelled prompt file (format: `tests/fixtures/prompts/README.md`),
//! shared by the tuning-set tests (`gate_fixtures`, which print every miss) and the held-out
//! test (`gate_heldout`, which prints figures only: its misses are not for reading).

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use karl_common::gate::{Action, Gate, GateContext, Rule, Verdict};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct Labelled {
    pub id: String,
    pub prompt: String,
    pub category: String,
    #[serde(default)]
    pub history: Vec<String>,
    #[serde(default)]
    pub reason: String,
}

/// The gate as deployed: with the embedding model (`KARL_GATE_MODEL`, else the default
/// directory `scripts/fetch-model.sh` fills), loaded once per test binary. A missing model
/// fails the test with what to do.
pub fn model_gate() -> &'static Gate {
    static GATE: std::sync::OnceLock<Gate> = std::sync::OnceLock::new();
    GATE.get_or_init(|| {
        let dir = karl_common::embed::dir_from_env().unwrap();
        let model = karl_common::embed::Embedder::load(&dir)
            .unwrap_or_else(|e| panic!("{e}\n(run scripts/fetch-model.sh first)"));
        Gate::with_model(std::sync::Arc::new(model))
    })
}

/// The labelled prompts of `dir/name`, `dir` relative to the repository root.
pub fn load(dir: &str, name: &str) -> Vec<Labelled> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
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

#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub total: usize,
    /// Blocked as the category asks (for a block category: by its own rule where it has one).
    pub blocked: usize,
    /// Passed, but with a doubt: a second opinion would be asked.
    pub doubted: usize,
}

impl Tally {
    pub fn rate(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.blocked as f64 / self.total as f64
        }
    }

    fn add(&mut self, other: Tally) {
        self.total += other.total;
        self.blocked += other.blocked;
        self.doubted += other.doubted;
    }
}

/// Per-category tallies and the misses, one printable line each.
#[derive(Debug, Default)]
pub struct Score {
    pub tallies: BTreeMap<String, Tally>,
    pub misses: Vec<String>,
}

impl Score {
    pub fn get(&self, category: &str) -> Tally {
        self.tallies.get(category).copied().unwrap_or_default()
    }

    /// Adds another file's tallies and misses to these.
    pub fn merge(&mut self, other: Score) {
        for (cat, t) in other.tallies {
            self.tallies.entry(cat).or_default().add(t);
        }
        self.misses.extend(other.misses);
    }

    /// Benign and benign-lookalike prompts together.
    pub fn benign(&self) -> Tally {
        let mut t = self.get("benign");
        t.add(self.get("benign_lookalike"));
        t
    }

    /// Counts one judged prompt, and a miss when `blocked` is not what was expected.
    fn count(&mut self, it: &Labelled, v: &Verdict, blocked: bool, expected: bool) {
        let t = self.tallies.entry(it.category.clone()).or_default();
        t.total += 1;
        if blocked {
            t.blocked += 1;
        }
        if v.doubtful() {
            t.doubted += 1;
        }
        if blocked != expected {
            self.misses.push(format!(
                "  MISS {} [{}] {:?} -> {} ({})",
                it.id,
                it.category,
                it.prompt,
                rules(v),
                it.reason
            ));
        }
    }

    pub fn print(&self, title: &str, show_misses: bool) {
        println!("{title}:");
        for (cat, t) in self.tallies.iter() {
            println!(
                "  {cat:<17} {:>3}/{:<3} blocked ({:.1}%), {} passed in doubt",
                t.blocked,
                t.total,
                100.0 * t.rate(),
                t.doubted
            );
        }
        if show_misses {
            for m in self.misses.iter() {
                println!("{m}");
            }
        } else {
            println!("  ({} misses, not shown)", self.misses.len());
        }
    }
}

/// Single prompts: a destructive one counts as blocked only when the destructive rule blocked
/// it outright.
pub fn single_prompts(gate: &Gate, items: &[Labelled]) -> Score {
    let mut score = Score::default();
    for it in items.iter() {
        let v = gate.check(&it.prompt, &GateContext::default());
        let expect_block = matches!(it.category.as_str(), "destructive" | "status" | "too_short");
        let blocked = if it.category == "destructive" {
            v.has(Rule::Destructive) && v.action == Action::Block
        } else {
            !v.pass
        };
        score.count(it, &v, blocked, expect_block);
    }
    score
}

/// Prompts with their session's history: a repeat counts as blocked only by its own rule.
pub fn repeats(gate: &Gate, items: &[Labelled]) -> Score {
    let mut score = Score::default();
    for it in items.iter() {
        let ctx = GateContext {
            history: &it.history,
            ..GateContext::default()
        };
        let v = gate.check(&it.prompt, &ctx);
        let rule = match it.category.as_str() {
            "exact_repeat" => Some(Rule::ExactRepeat),
            "near_repeat" => Some(Rule::NearRepeat),
            _ => None,
        };
        let blocked = match rule {
            Some(r) => v.has(r),
            None => !v.pass,
        };
        score.count(it, &v, blocked, rule.is_some());
    }
    score
}

//! What the embedding model adds to the gate: word senses for the novelty check ("blank" ≈
//! "empty", "switch" ≈ "toggle"), which words carry content, and nearest labelled examples
//! (`rules/meaning.toml`): a prompt whose closest examples are status requests rather than
//! work reads as a status request in words no list holds ("gimme a sitrep"). The model itself
//! (loading, tokenizing, vectors) lives in [`crate::embed`]; the thresholds that turn its
//! numbers into decisions live here, each fitted on the tuning prompts only
//! (`tests/fixtures/prompts/`), never on the held-out ones.

use std::sync::Arc;

use serde::Deserialize;

use super::novelty::{Reading, WordSense};
use crate::embed::{cosine, Embedder, Vector};

/// The labelled examples, as shipped.
const EXAMPLES: &str = include_str!("rules/meaning.toml");

/// How many nearest examples of each class are averaged.
const NEIGHBOURS: usize = 3;

/// Two words at least this close are the same for a repeat. On the tuning repeats, 0.35–0.45
/// all gave the same figures; the middle is kept.
const SAME_WORD: f32 = 0.4;

/// A word whose heaviest token is at least this long names something. Function words sit
/// near 2, fillers ("please", "again", "make") near 5–9, content words 10–22.
const SUBSTANTIVE: f32 = 11.0;

/// A prompt that directs no work is a status request when it leans at least this much
/// toward the status examples (see [`Meaning::lean`]). Negative: the prompt already directs
/// no work, so it need only not be clearly closer to work. Fitted on `tune.jsonl` with the
/// examples of `dev` and `extra`: −0.2 blocked 54 of its 57 status prompts and none of its
/// 102 benign ones; the first benign prompt fell at −0.3.
pub const STATUS_LEAN: f32 = -0.2;

/// A part of a prompt is a destructive request when it leans at least this much toward the
/// destructive examples. Fitted like [`STATUS_LEAN`]: on `tune.jsonl`, 0.2 added 4 of its 98
/// destructive prompts and no benign one; 0.15 added 10 and blocked a benign one. Weak on its
/// own — the rules carry the destructive judgement; this catches wordings near known ones.
pub const HARM_LEAN: f32 = 0.2;

/// A part that leans at least this much toward the destructive examples, without reaching
/// [`HARM_LEAN`], leaves the gate in doubt: a caller with a model asks it for a second
/// opinion. Fitted on `tune.jsonl`: with the guarded findings, 0.1 leaves its one missed
/// destructive prompt in doubt, and 16 of its 102 benign ones (a model call each).
pub const HARM_DOUBT: f32 = 0.1;

/// The parts of a prompt judged one by one: sentences and clauses of three words or more,
/// so one destructive clause inside a long benign instruction stands on its own.
pub fn parts(text: &str) -> impl Iterator<Item = &str> {
    text.split(['.', ';', '!', '?', '\n', ','])
        .filter(|p| p.split_whitespace().count() >= 3)
        .take(MAX_PARTS)
}

/// The parts of one prompt compared with the examples, at most (the rest is left to the
/// rules, which read all of it).
const MAX_PARTS: usize = 32;

/// A class of labelled examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Status,
    Work,
    Harm,
}

#[derive(Deserialize)]
struct File {
    status: Examples,
    work: Examples,
    harm: Examples,
    /// Work asked for in a report's or a question's words: the status class's contrast
    /// beside `work`, never the harm class's.
    asked: Examples,
}

#[derive(Deserialize)]
struct Examples {
    examples: Vec<String>,
}

/// The examples of one class, as vectors, with their texts (for the reason shown).
#[derive(Debug, Default)]
struct Embedded {
    texts: Vec<String>,
    vectors: Vec<Vector>,
}

impl Embedded {
    fn new(model: &Embedder, texts: Vec<String>) -> Embedded {
        let vectors = texts.iter().map(|t| model.embed(t)).collect();
        Embedded { texts, vectors }
    }

    /// The mean similarity of the nearest examples, and the nearest one's text.
    fn nearest(&self, v: &[f32]) -> (f32, &str) {
        let mut sims: Vec<(f32, usize)> = self
            .vectors
            .iter()
            .enumerate()
            .map(|(i, e)| (cosine(v, e), i))
            .collect();
        let k = NEIGHBOURS.min(sims.len());
        if k == 0 {
            return (0.0, "");
        }
        sims.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
        let top = &sims[..k];
        let mean = top.iter().map(|s| s.0).sum::<f32>() / k as f32;
        let best = top.iter().max_by(|a, b| a.0.total_cmp(&b.0)).map(|s| s.1);
        (mean, best.map(|i| self.texts[i].as_str()).unwrap_or(""))
    }
}

/// The model-backed word sense and example classes.
#[derive(Debug, Clone)]
pub struct Meaning {
    model: Arc<Embedder>,
    /// Status, work, harm, and work with the work asked for in a report's words.
    examples: Arc<[Embedded; 4]>,
}

impl Meaning {
    pub fn new(model: Arc<Embedder>) -> Meaning {
        // The shipped file is checked by a test; a broken one leaves the classes empty.
        let file: Option<File> = toml::from_str(EXAMPLES).ok();
        let examples = match file {
            Some(f) => {
                let all_work = f.work.examples.iter().chain(&f.asked.examples).cloned();
                [
                    Embedded::new(&model, f.status.examples),
                    Embedded::new(&model, f.work.examples.clone()),
                    Embedded::new(&model, f.harm.examples),
                    Embedded::new(&model, all_work.collect()),
                ]
            }
            None => Default::default(),
        };
        Meaning {
            model,
            examples: Arc::new(examples),
        }
    }

    fn class(&self, c: Class) -> &Embedded {
        &self.examples[match c {
            Class::Status => 0,
            Class::Work => 1,
            Class::Harm => 2,
        }]
    }

    /// How much closer `text` is to the examples of `class` than to the work examples
    /// (nearest three of each, cosine), and the nearest example of `class`. Status is
    /// contrasted with work asked for in a report's words too ("is it done? if not, finish
    /// it"); harm with plain work only.
    pub fn lean(&self, text: &str, class: Class) -> (f32, &str) {
        let v = self.model.embed(text);
        let (toward, example) = self.class(class).nearest(&v);
        let contrast = if class == Class::Status {
            &self.examples[3]
        } else {
            self.class(Class::Work)
        };
        let (work, _) = contrast.nearest(&v);
        (toward - work, example)
    }

    pub fn model(&self) -> &Embedder {
        &self.model
    }
}

impl WordSense for Meaning {
    fn read(&self, w: &str) -> Reading {
        let (vector, weight) = self.model.word(w);
        Reading {
            vector: Some(vector),
            substantive: weight >= SUBSTANTIVE,
        }
    }

    fn same_at(&self) -> f32 {
        SAME_WORD
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_examples_parse_and_fill_every_class() {
        let f: File = toml::from_str(EXAMPLES).unwrap_or_else(|e| panic!("meaning.toml: {e}"));
        assert!(f.status.examples.len() >= 20);
        assert!(f.work.examples.len() >= 100);
        assert!(f.harm.examples.len() >= 100);
        assert!(f.asked.examples.len() >= 100);
    }
}

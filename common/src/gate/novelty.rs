//! Asymmetric repeats: does a candidate ask for something its look-alike earlier prompt did
//! not? The similarity measures ([`super::Similarity`]) say how much two prompts share; this
//! says whether what is *not* shared makes the candidate a new request, even when most words
//! match. Two shapes of novelty:
//!
//! - **substitution**: a content word of the candidate that the earlier prompt lacks, in the
//!   slot where the earlier prompt has a word the candidate lacks (same neighbour before or
//!   after): "the ORM model for *Order*" after "… for *User*", "*Spanish* translations" after
//!   "*French* translations" — another object, case, period or resource;
//! - **addition**: the candidate covers all of the earlier prompt and adds at least
//!   [`ADDED`] content words, or a new value: a new constraint ("… but cap it at 3 attempts
//!   and log each one").
//!
//! Words in verb position (clause start, after "to", a modal or a subject pronoun) are left
//! out of both: rewording swaps verbs ("swap" for "replace", "respond" for "return") while the
//! request stays the same, and the lexical measure already tells opposite actions apart.
//!
//! Whether two words are the same is a [`WordSense`]: stems, the rule files' synonyms and
//! verb classes, abbreviations and one-letter typos always; with a model loaded, also word
//! vectors ("blank" ≈ "empty"). Pure.

use super::lexicon::{fold_into, REPEAT_STOP};
use super::repeat;
use crate::embed::{cosine, Vector};

/// Words that together cover a candidate's new content, at least this many, make it new.
const ADDED: usize = 3;

/// What a sense knows of one lower-cased word, read once per word of a comparison.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Its unit vector, when the sense has one: two words at least [`WordSense::same_at`]
    /// apart by cosine are the same.
    pub vector: Option<Vector>,
    /// It names something (a thing, a quality, a value) rather than gluing a sentence.
    pub substantive: bool,
}

/// How words are compared when judging whether a candidate adds something new.
pub trait WordSense: Send + Sync {
    fn read(&self, w: &str) -> Reading;
    /// At or above this cosine two words' vectors make them the same for a repeat.
    fn same_at(&self) -> f32 {
        1.0
    }
}

/// The sense without a model: only the lexical equivalences count; a word of four or more
/// letters is substantive.
#[derive(Debug, Default, Clone, Copy)]
pub struct Spelling;

impl WordSense for Spelling {
    fn read(&self, w: &str) -> Reading {
        Reading {
            vector: None,
            substantive: w.chars().count() >= 4 || w.chars().any(|c| c.is_ascii_digit()),
        }
    }
}

/// Words that put the next word in verb position.
const VERB_CUES: &[&str] = &[
    "to", "should", "will", "would", "can", "could", "must", "is", "are", "was", "be", "it", "we",
    "you", "please", "then", "and", "i", "let", "lets", "let's", "don't", "dont", "doesn't",
    "won't", "can't", "cant",
];

#[derive(Debug)]
struct Word {
    text: String,
    stem: String,
    verbal: bool,
    /// Substantive by the sense, or a value or identifier (a digit or `_`).
    substantive: bool,
    vector: Option<Vector>,
}

fn content_words(s: &str, sense: &dyn WordSense) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = true;
    let mut prev = String::new();
    let mut low = String::new();
    let mut stem = String::new();
    for piece in s.split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\'')) {
        let (word, sep) = match piece.char_indices().last() {
            Some((i, c)) if !(c.is_alphanumeric() || c == '_' || c == '\'') => {
                (&piece[..i], Some(c))
            }
            _ => (piece, None),
        };
        let word = word.trim_matches('\'');
        if !word.is_empty() {
            low.clear();
            fold_into(word, &mut low);
            let verbal = start || VERB_CUES.contains(&prev.as_str());
            if !REPEAT_STOP.contains(&low) {
                repeat::stem_into(&low, &mut stem);
                let reading = sense.read(&low);
                out.push(Word {
                    substantive: reading.substantive || has_digit(&low) || low.contains('_'),
                    vector: reading.vector,
                    text: low.clone(),
                    stem: stem.clone(),
                    verbal,
                });
                start = false;
            }
            prev.clone_from(&low);
        }
        if let Some(c) = sep {
            if matches!(
                c,
                ',' | ';' | ':' | '.' | '!' | '?' | '(' | ')' | '—' | '+' | '\n'
            ) {
                start = true;
                prev.clear();
            }
        }
    }
    out
}

/// One-letter typos (insert, delete, replace, swap of neighbours) of words of five or more.
fn one_typo(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len().min(b.len()) < 5 || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    if a.len() == b.len() {
        let d: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        return d.len() == 1
            || (d.len() == 2 && d[1] == d[0] + 1 && a[d[0]] == b[d[1]] && a[d[1]] == b[d[0]]);
    }
    let (short, long) = if a.len() < b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let i = short
        .iter()
        .zip(long.iter())
        .take_while(|(x, y)| x == y)
        .count();
    short[i..] == long[i + 1..]
}

fn same(a: &Word, b: &Word, sense: &dyn WordSense) -> bool {
    a.stem == b.stem
        || repeat::same_act(&a.text, &b.text)
        || (a.stem.len().min(b.stem.len()) >= 3
            && (a.stem.starts_with(&b.stem) || b.stem.starts_with(&a.stem)))
        || one_typo(&a.text, &b.text)
        || matches!((&a.vector, &b.vector), (Some(x), Some(y)) if cosine(x, y) >= sense.same_at())
}

fn has_digit(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_digit())
}

/// Indices of `a`'s words that no word of `b` covers.
fn uncovered(a: &[Word], b: &[Word], sense: &dyn WordSense) -> Vec<usize> {
    (0..a.len())
        .filter(|&i| !b.iter().any(|w| same(&a[i], w, sense)))
        .collect()
}

/// Prompts with more content words than this are compared by the similarity measure alone
/// (the comparison here is quadratic; the twin's prompts hold a few dozen words).
const MAX_WORDS: usize = 200;

/// Why `candidate` is a new request next to `earlier` although the two look alike, if it is.
pub fn novelty(candidate: &str, earlier: &str, sense: &dyn WordSense) -> Option<String> {
    let c = content_words(candidate, sense);
    let e = content_words(earlier, sense);
    if c.len() > MAX_WORDS || e.len() > MAX_WORDS {
        return None;
    }
    let cu = uncovered(&c, &e, sense);
    let eu = uncovered(&e, &c, sense);
    let new_c: Vec<usize> = cu
        .iter()
        .copied()
        .filter(|&i| !c[i].verbal && c[i].substantive)
        .collect();
    let near = |x: Option<&Word>, y: Option<&Word>| match (x, y) {
        (Some(x), Some(y)) => same(x, y, sense),
        _ => false,
    };
    for &i in new_c.iter() {
        for &j in eu.iter().filter(|&&j| !e[j].verbal) {
            let before = near(
                i.checked_sub(1).and_then(|k| c.get(k)),
                j.checked_sub(1).and_then(|k| e.get(k)),
            );
            let after = near(c.get(i + 1), e.get(j + 1));
            if before || after {
                return Some(format!(
                    "\"{}\" where the earlier prompt has \"{}\"",
                    c[i].text, e[j].text
                ));
            }
        }
    }
    let earlier_covered = !eu.iter().any(|&j| e[j].substantive);
    if earlier_covered
        && (new_c.len() >= ADDED || new_c.iter().any(|&i| has_digit(&c[i].text)))
        && !new_c.is_empty()
    {
        let added: Vec<&str> = new_c.iter().map(|&i| c[i].text.as_str()).collect();
        return Some(format!("adds {}", added.join(", ")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(c: &str, e: &str) -> Option<String> {
        novelty(c, e, &Spelling)
    }

    #[test]
    fn another_object_in_the_same_slot_is_new() {
        let why = new(
            "Update the ORM model for Order so created_at is a timezone-aware column.",
            "Update the ORM model for User so created_at is a timezone-aware column.",
        );
        assert_eq!(
            why.as_deref(),
            Some("\"order\" where the earlier prompt has \"user\"")
        );
        assert!(new(
            "Add Spanish translations for the checkout strings.",
            "Add French translations for the checkout strings."
        )
        .is_some());
    }

    #[test]
    fn a_new_constraint_is_new() {
        let why = new(
            "Add retry to the fetch client, but cap it at 3 attempts and log each one.",
            "Add retry to the fetch client.",
        );
        assert!(why.is_some_and(|w| w.starts_with("adds")));
    }

    #[test]
    fn rewording_is_not_new() {
        assert_eq!(
            new(
                "Swap the print calls in NetworkClient.swift for LogStore calls.",
                "Replace the print calls in NetworkClient.swift with LogStore calls."
            ),
            None
        );
        assert_eq!(
            new(
                "Please run the tests again and fix the failures in test_parser.py.",
                "Run the test suite and fix whatever fails in tests/test_parser.py."
            ),
            None
        );
        assert_eq!(
            new("Fix the flakey login test.", "Fix the flaky login test."),
            None
        );
    }

    #[test]
    fn typos_and_abbreviations_match() {
        assert!(one_typo("function", "functon"));
        assert!(one_typo("flaky", "falky"));
        assert!(!one_typo("user", "users"));
        assert!(!one_typo("orders", "owners"));
    }
}

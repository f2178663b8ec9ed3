//! Asymmetric repeats: does a candidate ask for something its look-alike earlier prompt did
//! not? The similarity measures ([`super::Similarity`]) say how much two prompts share; this
//! says whether what is *not* shared makes the candidate a new request, even when most words
//! match. Two shapes of novelty:
//!
//! - **substitution**: a content word of the candidate that the earlier prompt lacks, in the
//!   slot where the earlier prompt has a word the candidate lacks (same neighbour before or
//!   after): "the ORM model for *Order*" after "… for *User*", "*Spanish* translations" after
//!   "*French* translations", `crc32` after `crc16_ccitt` — another object, case, period or
//!   resource;
//! - **addition**: the candidate covers all of the earlier prompt and adds at least
//!   [`ADDED`] content words, or a new value: a new constraint ("… but cap it at 3 attempts
//!   and log each one").
//!
//! What the candidate says it replaces ("… *instead of* event_date") covers nothing of the
//! earlier prompt. Words in verb position (clause start, after "to", a modal or a subject
//! pronoun) are left out of both: rewording swaps verbs ("swap" for "replace", "respond" for "return") while the
//! request stays the same, and the lexical measure already tells opposite actions apart.
//!
//! Whether two words are the same is a [`WordSense`]: stems, the rule files' synonyms, the
//! thesaurus of interchangeable words (`rules/thesaurus.toml`, "bounce" for "redirect") and
//! verb classes, abbreviations, acronyms and one-letter typos always; with a model loaded,
//! also word vectors ("blank" ≈ "empty") — but never for names, which are the same only as
//! written or abbreviated. Pure.

use super::lexicon::{fold_into, REPEAT_STOP};
use super::repeat;
use super::words::{self, one_typo};
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

/// Words that narrow what follows them to a subset.
const NARROWING: &[&str] = &["only", "except", "excluding", "unless"];

/// Words that open what a prompt replaces: "X *instead of* Y", "X *rather than* Y".
const REPLACING: &[[&str; 2]] = &[["instead", "of"], ["rather", "than"], ["in", "place"]];

#[derive(Debug)]
struct Word {
    text: String,
    stem: String,
    /// Its verb class as written ("fix" and "resolve" are one).
    act: Option<repeat::Act>,
    verbal: bool,
    /// Substantive by the sense, or a value or identifier (a digit or `_`).
    substantive: bool,
    vector: Option<Vector>,
    /// Written as a name: part of an identifier, path, URL or dotted name, a value with
    /// digits, an acronym, or a capitalised word inside a sentence. Never in verb position
    /// ("upload it to *S3*"); with digits, the same only as written.
    named: bool,
    /// In what the prompt says it replaces ("instead of …").
    replaced: bool,
    /// Right after a word that narrows the request ("*only* pinned notes", "*except*
    /// drafts"): a new word here is a new constraint on its own.
    narrows: bool,
}

/// True if the whitespace-separated `token` is written as a name (see [`Word::named`]);
/// `opens` says it starts a sentence, where any word is capitalised.
fn token_named(token: &str, opens: bool) -> bool {
    let core = token.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
    let mut chars = core.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    let inner_upper = chars.clone().any(char::is_uppercase);
    core.contains(['.', '/', '_', ':', '='])
        || core.chars().any(|c| c.is_ascii_digit())
        || inner_upper
        || (first.is_uppercase() && !opens)
}

/// A number run into its unit ("9am", "50MB", "300ms", "3x") is two words.
fn split_unit(word: &str) -> (&str, Option<&str>) {
    let digits = word
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(word.len());
    let rest = &word[digits..];
    if digits > 0 && !rest.is_empty() && rest.chars().all(char::is_alphabetic) {
        (&word[..digits], Some(rest))
    } else {
        (word, None)
    }
}

fn content_words(s: &str, sense: &dyn WordSense) -> Vec<Word> {
    let mut out = Vec::new();
    let mut start = true;
    let mut opens = true;
    let mut replaced = false;
    let mut narrowing = false;
    let mut prev = String::new();
    let mut low = String::new();
    let mut stem = String::new();
    for token in s.split_whitespace() {
        let named = token_named(token, opens);
        opens = token.ends_with(['.', '!', '?', ':']);
        for piece in
            token.split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\''))
        {
            let (word, sep) = match piece.char_indices().last() {
                Some((i, c)) if !(c.is_alphanumeric() || c == '_' || c == '\'') => {
                    (&piece[..i], Some(c))
                }
                _ => (piece, None),
            };
            let word = word.trim_matches('\'');
            let (number, unit) = split_unit(word);
            let unit = unit.map(repeat::attached_unit);
            for word in std::iter::once(number)
                .chain(unit)
                .filter(|w| !w.is_empty())
            {
                low.clear();
                fold_into(word, &mut low);
                if let Some(n) = words::number_word(&low) {
                    low.clear();
                    low.push_str(n);
                }
                let narrows = NARROWING.contains(&low.as_str());
                narrowing |= narrows;
                if REPLACING.iter().any(|[a, b]| prev == *a && low == *b) {
                    replaced = true;
                }
                let verbal = !named && (start || VERB_CUES.contains(&prev.as_str()));
                if !REPEAT_STOP.contains(&low) && !narrows {
                    let base_verb = words::is_base_verb(&low);
                    repeat::sense_stem_into(&low, &mut stem);
                    let reading = sense.read(&low);
                    out.push(Word {
                        act: repeat::act(&low),
                        substantive: reading.substantive || has_digit(&low) || low.contains('_'),
                        vector: reading.vector,
                        text: low.clone(),
                        stem: stem.clone(),
                        verbal,
                        named,
                        replaced,
                        narrows: narrowing && !base_verb,
                    });
                    // "only *list* published posts": the verb passes it on to its object.
                    narrowing &= base_verb;
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
                    replaced = false;
                    narrowing = false;
                    prev.clear();
                }
            }
        }
    }
    out
}

/// True if the short word `a` abbreviates `b`: same first letter, its letters in order
/// within `b`, and `b` at least three letters longer ("ts" for "typescript", "ckpt" for
/// "checkpoint", "rg" for "ripgrep").
fn abbreviates(a: &str, b: &str) -> bool {
    // A character is at most four bytes: most pairs are ruled out by their byte lengths.
    if a.len() < 2 || a.len() > 20 || b.len() < 5 || a.as_bytes()[0] != b.as_bytes()[0] {
        return false;
    }
    let (la, lb) = (a.chars().count(), b.chars().count());
    if !(2..=5).contains(&la) || lb < la + 3 || a.chars().next() != b.chars().next() {
        return false;
    }
    let mut rest = b.chars();
    a.chars().all(|c| rest.any(|d| d == c))
}

fn same(a: &Word, b: &Word, sense: &dyn WordSense) -> bool {
    if a.stem == b.stem || abbreviates(&a.text, &b.text) || abbreviates(&b.text, &a.text) {
        return true;
    }
    // Names with digits have no synonyms: `crc32` is not `crc16`, `sw1` is not `sw0`.
    if (a.named && has_digit(&a.text)) || (b.named && has_digit(&b.text)) {
        return false;
    }
    (a.act.is_some() && a.act == b.act)
        || (a.stem.len().min(b.stem.len()) >= 3
            && (a.stem.starts_with(&b.stem) || b.stem.starts_with(&a.stem)))
        || one_typo(&a.text, &b.text)
        || matches!((&a.vector, &b.vector), (Some(x), Some(y)) if cosine(x, y) >= sense.same_at())
}

/// True if `a` is an acronym of consecutive words of `words` ("PR" for "pull request",
/// "NRT" for "nullable reference types").
fn acronym_in(a: &Word, words: &[Word]) -> bool {
    let letters: Vec<char> = a.text.trim_end_matches('s').chars().collect();
    if !a.named
        || !(2..=5).contains(&letters.len())
        || !letters.iter().all(char::is_ascii_alphabetic)
    {
        return false;
    }
    words.windows(letters.len()).any(|win| {
        win.iter()
            .zip(&letters)
            .all(|(w, l)| w.text.starts_with(*l))
    })
}

fn has_digit(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_digit())
}

/// Indices of `a`'s words that no word of `b` covers; what `b` says it replaces covers
/// nothing, and what `a` says it replaces needs no cover.
fn uncovered(a: &[Word], b: &[Word], sense: &dyn WordSense) -> Vec<usize> {
    (0..a.len())
        .filter(|&i| {
            !a[i].replaced
                && !acronym_in(&a[i], b)
                && !b.iter().any(|w| !w.replaced && same(&a[i], w, sense))
        })
        .collect()
}

/// How far apart two look-alikes are by their content words, for the learned repeat judge:
/// the content words of each that no word of the other covers, and how well each prompt's
/// words are matched in the other by word vector (the mean of each word's best cosine; 1
/// for a word the other has by stem, spelling or sense).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Apart {
    pub new_in_candidate: usize,
    pub new_in_earlier: usize,
    /// Of those, the ones written as names (identifiers, paths, values with digits).
    pub new_names_in_candidate: usize,
    pub new_names_in_earlier: usize,
    pub vector_cover_candidate: f32,
    pub vector_cover_earlier: f32,
}

/// [`Apart`] of a candidate and an earlier prompt, both already read.
pub(crate) fn apart(c: &Content, e: &Content, sense: &dyn WordSense) -> Apart {
    let (c, e) = (&c.0, &e.0);
    if c.len() > MAX_WORDS || e.len() > MAX_WORDS {
        return Apart::default();
    }
    // The new content words of `a`, and how many of them are names.
    let new = |a: &[Word], b: &[Word]| {
        let new: Vec<&Word> = uncovered(a, b, sense)
            .into_iter()
            .map(|i| &a[i])
            .filter(|w| !w.verbal && w.substantive)
            .collect();
        (new.len(), new.iter().filter(|w| w.named).count())
    };
    let (new_c, names_c) = new(c, e);
    let (new_e, names_e) = new(e, c);
    // How alike each pair of words is: 1 when the same by any equivalence, else their
    // vectors' cosine; each prompt's cover is the mean of its words' best match.
    let alike: Vec<Vec<f32>> = c
        .iter()
        .map(|x| {
            e.iter()
                .map(|y| match (&x.vector, &y.vector) {
                    _ if same(x, y, sense) => 1.0,
                    (Some(u), Some(v)) => cosine(u, v),
                    _ => 0.0,
                })
                .collect()
        })
        .collect();
    let mean = |best: Vec<f32>| {
        if best.is_empty() {
            0.0
        } else {
            best.iter().sum::<f32>() / best.len() as f32
        }
    };
    let cover_c = mean(
        alike
            .iter()
            .map(|row| row.iter().copied().fold(0.0f32, f32::max))
            .collect(),
    );
    let cover_e = mean(
        (0..e.len())
            .map(|j| alike.iter().map(|row| row[j]).fold(0.0f32, f32::max))
            .collect(),
    );
    Apart {
        new_in_candidate: new_c,
        new_in_earlier: new_e,
        new_names_in_candidate: names_c,
        new_names_in_earlier: names_e,
        vector_cover_candidate: cover_c,
        vector_cover_earlier: cover_e,
    }
}

/// Prompts with more content words than this are compared by the similarity measure alone
/// (the comparison here is quadratic; the twin's prompts hold a few dozen words).
const MAX_WORDS: usize = 200;

/// Why `candidate` is a new request next to `earlier` although the two look alike, if it is.
pub fn novelty(candidate: &str, earlier: &str, sense: &dyn WordSense) -> Option<String> {
    novelty_of(&read(candidate, sense), &read(earlier, sense), sense)
}

/// A prompt's content words, read once for several comparisons.
#[derive(Debug)]
pub(crate) struct Content(Vec<Word>);

/// Reads the content words of `text`.
pub(crate) fn read(text: &str, sense: &dyn WordSense) -> Content {
    Content(content_words(text, sense))
}

/// [`novelty`] of two prompts already read.
pub(crate) fn novelty_of(c: &Content, e: &Content, sense: &dyn WordSense) -> Option<String> {
    let (c, e) = (&c.0, &e.0);
    if c.len() > MAX_WORDS || e.len() > MAX_WORDS {
        return None;
    }
    // "… that removes the index" after "add an index …": an action the earlier prompt did
    // not ask for, that undoes one it did.
    // Each word's verb class, read once.
    let acts =
        |ws: &[Word]| -> Vec<_> { ws.iter().map(|w| repeat::inflected_act(&w.text)).collect() };
    let (ca, ea) = (acts(c), acts(e));
    let undoes = c.iter().zip(&ca).find_map(|(cw, x)| {
        let x = (*x)?;
        let fresh = !ea.contains(&Some(x));
        let undone = e
            .iter()
            .zip(&ea)
            .find(|(_, y)| y.is_some_and(|y| repeat::reverses(x, y)));
        fresh.then_some(undone).flatten().map(|(ew, _)| (cw, ew))
    });
    if let Some((cw, ew)) = undoes {
        return Some(format!(
            "\"{}\" undoes the earlier prompt's \"{}\"",
            cw.text, ew.text
        ));
    }
    let cu = uncovered(c, e, sense);
    let eu = uncovered(e, c, sense);
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
    if let Some(&i) = new_c.iter().find(|&&i| c[i].narrows) {
        if earlier_covered {
            return Some(format!("narrows it to \"{}\"", c[i].text));
        }
    }
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
    fn undoing_an_earlier_action_is_new() {
        let why = new(
            "Write a new migration that removes the users.created_at index.",
            "Add an index on users.created_at in a new migration.",
        );
        assert!(why.is_some_and(|w| w.contains("undoes")));
        assert!(new(
            "Revert the change to the retry delay in http.go.",
            "Change the retry delay in http.go to 2 seconds.",
        )
        .is_some());
        assert_eq!(
            new(
                "Add an index on users.created_at in a new migration.",
                "In a new migration, create an index for users.created_at.",
            ),
            None
        );
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
    fn narrowing_to_a_subset_is_new() {
        let why = new(
            "List only the unpaid invoices of the month.",
            "List the invoices of the month.",
        );
        assert!(why.is_some_and(|w| w.starts_with("narrows")));
        assert_eq!(
            new(
                "Only list the invoices of the month.",
                "List the invoices of the month."
            ),
            None
        );
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
    fn names_with_digits_have_no_synonyms() {
        assert!(new(
            "Write a Unity test for crc32 in lib/crc.c with the standard check value.",
            "Write a Unity test for crc16_ccitt in lib/crc.c with the standard check value."
        )
        .is_some());
        // "to S3" is not a verb.
        assert!(new(
            "Make scripts/backup-db.sh upload the dump to S3 after compressing it.",
            "Make scripts/backup-db.sh compress the dump with zstd."
        )
        .is_some());
    }

    #[test]
    fn what_a_prompt_replaces_covers_nothing() {
        let why = new(
            "Partition the output by country instead of event_date.",
            "Partition the output by event_date.",
        );
        assert_eq!(
            why.as_deref(),
            Some("\"country\" where the earlier prompt has \"event_date\"")
        );
    }

    #[test]
    fn units_abbreviations_and_acronyms_are_rewording() {
        assert_eq!(
            new(
                "weekly digest email via celery task, mondays 9 am",
                "Add a Celery task that sends the weekly digest email every Monday at 9am."
            ),
            None
        );
        let mut words = content_words("run it on every pull request", &Spelling);
        let pr = content_words("PRs", &Spelling).remove(0);
        assert!(acronym_in(&pr, &words));
        words.retain(|w| w.text != "request");
        assert!(!acronym_in(&pr, &words));
        assert!(abbreviates("ts", "typescript"));
        assert!(abbreviates("ckpt", "checkpoint"));
        assert!(!abbreviates("pr", "prod"));
    }

    #[test]
    fn typos_and_abbreviations_match() {
        assert!(one_typo("function", "functon"));
        assert!(one_typo("flaky", "falky"));
        assert!(!one_typo("user", "users"));
        assert!(!one_typo("orders", "owners"));
    }
}

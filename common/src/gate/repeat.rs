//! Exact and near repeats. Exact: equal after [`normalize_prompt`]. Near: the same action on
//! the same target, reworded. Word-trigram overlap misses rewording ("Clean up the clippy
//! warnings in runner.rs." after "Fix the clippy warnings in src/runner.rs."), so the lexical
//! measure compares what a prompt is *about*: its action (a verb class: fix ≈ resolve ≈
//! clean up; add vs remove and anything vs revert are opposites) and its targets — files,
//! identifiers, endpoints, HTTP methods, values, noun phrases, stemmed content words. A new
//! target or a different action makes a prompt fresh even when most words match:
//! another file, endpoint, method, value or sibling identifier (`UserList` → `OrderList`,
//! `books.title` → `books.author`); a different thing in the same slot ("the Postgres
//! service" → "the Redis service"); a different modifier on the same noun ("request id" →
//! "user id"); a new direct object ("Add a healthcheck …" after "Add a docker-compose.yml
//! …"). Otherwise the score is how much of the candidate the earlier prompt already covers.
//!
//! The measure sits behind [`Similarity`] so a semantic model can replace it or join it
//! ([`Strongest`]) without touching the gate.

use super::words::is_sep_char;
use std::sync::{Arc, Mutex, OnceLock};

use super::lexicon::{
    fold_into, Classes, REPEAT_ACT_CREATE, REPEAT_ACT_DISABLE, REPEAT_ACT_DOCUMENT,
    REPEAT_ACT_ENABLE, REPEAT_ACT_FIX, REPEAT_ACT_MODIFY, REPEAT_ACT_REMOVE, REPEAT_ACT_RENAME,
    REPEAT_ACT_REPLACE, REPEAT_ACT_RESPOND, REPEAT_ACT_RUN, REPEAT_ACT_TEST, REPEAT_ACT_UNDO,
    REPEAT_ADJECTIVES, REPEAT_ADJECTIVE_ENDINGS, REPEAT_ADVERBS, REPEAT_DETERMINERS,
    REPEAT_EXTS as EXTS, REPEAT_JOINERS, REPEAT_LEAD as LEAD, REPEAT_METHODS, REPEAT_SAME,
    REPEAT_STOP as STOP, REPEAT_SYNONYMS, REPEAT_VALUES as VALUES,
};
use super::words::{self, Form};

/// Trims, collapses whitespace runs to one space, case-folds and drops trailing `.`, `!`
/// and `?`: two prompts equal after this are the same prompt.
pub fn normalize_prompt(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    normalize_into(s, &mut out);
    out
}

/// [`normalize_prompt`] into a reusable buffer.
pub(crate) fn normalize_into(s: &str, out: &mut String) {
    out.clear();
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        fold_into(word, out);
    }
    while out.ends_with(['.', '!', '?']) || out.ends_with(char::is_whitespace) {
        out.pop();
    }
}

/// True if `text` normalizes to `norm` (an already normalized prompt). Stops at the first
/// difference, so comparing against a whole history is cheap.
pub(crate) fn normalizes_to(text: &str, norm: &str) -> bool {
    let end = text
        .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '.' | '!' | '?'))
        .len();
    let mut want = norm.chars();
    let mut first = true;
    for word in text[..end].split_whitespace() {
        if !first && want.next() != Some(' ') {
            return false;
        }
        first = false;
        for c in word.chars().flat_map(char::to_lowercase) {
            if want.next() != Some(c) {
                return false;
            }
        }
    }
    want.next().is_none()
}

/// How much a candidate restates an earlier prompt, from 0 (unrelated) to 1 (the same
/// request). Implementations are calibrated so that [`SAME_REQUEST`] is the boundary; a
/// semantic model maps its own measure onto that scale.
pub trait Similarity: Send + Sync {
    fn score(&self, candidate: &str, earlier: &str) -> f32;

    /// Scores against several earlier prompts; implementations may prepare the candidate
    /// once instead of once per earlier prompt.
    fn scores(&self, candidate: &str, earlier: &[&str]) -> Vec<f32> {
        earlier.iter().map(|e| self.score(candidate, e)).collect()
    }
}

/// Scores at or above this mean "the same request, reworded".
pub const SAME_REQUEST: f32 = 0.5;

/// Several measures joined: the highest score wins, so a semantic model can add recall to
/// the lexical one without losing what the lexical one catches.
pub struct Strongest(pub Vec<Box<dyn Similarity>>);

impl Similarity for Strongest {
    fn score(&self, candidate: &str, earlier: &str) -> f32 {
        self.0
            .iter()
            .map(|s| s.score(candidate, earlier))
            .fold(0.0, f32::max)
    }

    fn scores(&self, candidate: &str, earlier: &[&str]) -> Vec<f32> {
        let mut best = vec![0.0f32; earlier.len()];
        for s in self.0.iter() {
            for (b, v) in best.iter_mut().zip(s.scores(candidate, earlier)) {
                *b = b.max(v);
            }
        }
        best
    }
}

/// The default measure: action and targets, as described in the module docs.
///
/// Profiles of earlier prompts are memoized (a session's history changes by one prompt per
/// turn, and one turn may be judged several times); the memo is bounded and keyed by the
/// full text, so it never changes a score.
#[derive(Debug, Default)]
pub struct Lexical {
    memo: Mutex<Vec<MemoEntry>>,
}

/// What the lexical measure reads of a candidate against one earlier prompt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    pub score: f32,
    /// The rule that decided the score, or "overlap".
    pub why: &'static str,
    pub cover_candidate: f32,
    pub cover_earlier: f32,
}

/// Text hash, text, profile.
type MemoEntry = (u64, Arc<str>, Arc<Profile>);

/// How many profiles the memo keeps: two full fences and then some.
const MEMO: usize = 64;

impl Lexical {
    pub fn new() -> Self {
        Lexical::default()
    }

    /// The score with a short reason when a rule (not the overlap) decided it.
    pub fn explain(&self, candidate: &str, earlier: &str) -> (f32, &'static str) {
        compare(&profile(candidate), &self.profile_of(earlier))
    }

    /// [`Lexical::explain`] of a candidate already profiled ([`profile`]), with how much of
    /// the candidate's term weight the earlier prompt has and how much of the earlier
    /// prompt's the candidate has: the earlier prompt is looked up once for all of it.
    pub(crate) fn look(&self, c: &Profile, earlier: &str) -> Look {
        let h = self.profile_of(earlier);
        let (score, why) = compare(c, &h);
        let (wc, wh) = (c.total(), h.total());
        let (cover_candidate, cover_earlier) = if wc <= 0.0 || wh <= 0.0 {
            (0.0, 0.0)
        } else {
            (
                shared_weight(c, &h) / wc,
                (shared_weight(&h, c) / wh).min(1.0),
            )
        };
        Look {
            score,
            why,
            cover_candidate,
            cover_earlier,
        }
    }

    fn profile_of(&self, text: &str) -> Arc<Profile> {
        let key = hash(text);
        if let Ok(memo) = self.memo.lock() {
            if let Some(e) = memo.iter().find(|e| e.0 == key && &*e.1 == text) {
                return Arc::clone(&e.2);
            }
        }
        let p = Arc::new(profile(text));
        if let Ok(mut memo) = self.memo.lock() {
            if memo.len() >= MEMO {
                memo.remove(0);
            }
            memo.push((key, Arc::from(text), Arc::clone(&p)));
        }
        p
    }
}

impl Similarity for Lexical {
    fn score(&self, candidate: &str, earlier: &str) -> f32 {
        compare(&profile(candidate), &self.profile_of(earlier)).0
    }

    fn scores(&self, candidate: &str, earlier: &[&str]) -> Vec<f32> {
        let c = profile(candidate);
        earlier
            .iter()
            .map(|e| compare(&c, &self.profile_of(e)).0)
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Word,
    Ident,
    Member,
    File,
    Method,
    Num,
}

impl Kind {
    fn weight(self) -> f32 {
        match self {
            Kind::Word => 1.0,
            Kind::Ident | Kind::Member => 2.0,
            Kind::File | Kind::Method => 2.5,
            Kind::Num => 1.5,
        }
    }

    fn salient(self) -> bool {
        self != Kind::Word
    }
}

/// What a prompt asks to do, as a class of verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Act {
    None,
    Create,
    Fix,
    Remove,
    Undo,
    Rename,
    Replace,
    Modify,
    Test,
    Run,
    Document,
    Enable,
    Disable,
    Respond,
    Other(u64),
}

/// The verb classes of the rule files.
static ACTS: Classes<Act> = Classes::new(&[
    (&REPEAT_ACT_CREATE, Act::Create),
    (&REPEAT_ACT_FIX, Act::Fix),
    (&REPEAT_ACT_REMOVE, Act::Remove),
    (&REPEAT_ACT_UNDO, Act::Undo),
    (&REPEAT_ACT_RENAME, Act::Rename),
    (&REPEAT_ACT_REPLACE, Act::Replace),
    (&REPEAT_ACT_MODIFY, Act::Modify),
    (&REPEAT_ACT_TEST, Act::Test),
    (&REPEAT_ACT_RUN, Act::Run),
    (&REPEAT_ACT_DOCUMENT, Act::Document),
    (&REPEAT_ACT_ENABLE, Act::Enable),
    (&REPEAT_ACT_DISABLE, Act::Disable),
    (&REPEAT_ACT_RESPOND, Act::Respond),
]);

fn act_of(lemma: &str) -> Act {
    ACTS.get(lemma).unwrap_or_else(|| Act::Other(hash(lemma)))
}

/// The verb a phrasal verb stands for: "turn on" enables, "switch off" disables, "get rid
/// of" removes.
fn phrasal(lemma: &str, particle: Option<&str>) -> Option<&'static str> {
    let is = |w: &str| particle.is_some_and(|p| p.eq_ignore_ascii_case(w));
    match lemma {
        "turn" | "switch" if is("on") => Some("enable"),
        "turn" | "switch" if is("off") => Some("disable"),
        "get" if is("rid") => Some("remove"),
        _ => None,
    }
}

/// A one-letter unit written into its number ("30s", "2h") as the word it abbreviates, so
/// that it compares like "30 sec" or "2 hours"; alone, "s" and "h" are not units.
pub(super) fn attached_unit(unit: &str) -> &str {
    match unit {
        "s" | "S" => "second",
        "h" | "H" => "hour",
        _ => unit,
    }
}

/// A word in imperative position whose ending makes it a verb (-ize, -ise, -ify).
fn coined_verb(w: &str) -> bool {
    w.len() > 5
        && w.is_ascii()
        && w.bytes().all(|b| b.is_ascii_lowercase())
        && (w.ends_with("ize") || w.ends_with("ise") || w.ends_with("ify"))
}

fn opposite(a: Act, b: Act) -> bool {
    // Undoing, enabling and disabling are only ever the same request as themselves.
    let exclusive = |x: Act| matches!(x, Act::Undo | Act::Enable | Act::Disable);
    matches!(
        (a, b),
        (Act::Create, Act::Remove) | (Act::Remove, Act::Create)
    ) || ((exclusive(a) || exclusive(b)) && a != b)
}

/// FNV-1a: terms are compared by hash.
fn hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Words shaped like adjectives: they qualify a target without naming another one.
fn is_adjective(w: &str) -> bool {
    (w.len() > 4 && REPEAT_ADJECTIVE_ENDINGS.ends(w)) || REPEAT_ADJECTIVES.contains(w)
}

/// Adverbs: never a target.
fn is_adverb(w: &str) -> bool {
    REPEAT_ADVERBS.contains(w)
}

/// Spelling variants and synonyms folded before comparison.
fn synonym(w: &str) -> Option<&'static str> {
    REPEAT_SYNONYMS.get(w)
}

/// A determiner in any ASCII letter case ("the", "The").
fn is_determiner(w: &str) -> bool {
    if w.bytes().any(|b| b.is_ascii_uppercase()) {
        REPEAT_DETERMINERS.contains(&w.to_ascii_lowercase())
    } else {
        REPEAT_DETERMINERS.contains(w)
    }
}

/// [`stem`] for the harm rules: words as written, inflections and spellings folded, and
/// nothing of the thesaurus.
pub(super) fn stem_into(w: &str, out: &mut String) {
    stem(w, out);
}

/// The thesaurus by stem: words whose stems a list joins, directly or through an inflection
/// of another list's word ("attempted" and "tried"; "attempt" and "try"), form one group,
/// and each stem of a group maps to the group's longest stem. Sorted by key.
fn thesaurus() -> &'static [(String, String)] {
    static MAP: OnceLock<Vec<(String, String)>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut stems: Vec<String> = Vec::new();
        let mut edges = Vec::new();
        for (word, head) in REPEAT_SAME.pairs() {
            let (mut w, mut h) = (String::new(), String::new());
            stem(word, &mut w);
            stem(head, &mut h);
            stems.push(w.clone());
            stems.push(h.clone());
            edges.push((w, h));
        }
        stems.sort();
        stems.dedup();
        let at = |x: &str| stems.binary_search_by(|s| s.as_str().cmp(x)).unwrap_or(0);
        // Union-find over the stems.
        let mut parent: Vec<usize> = (0..stems.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        // The longest stem leads: a short one ("col", "del") would pass for a prefix of
        // other words in the novelty check ("color").
        let leads = |a: usize, b: usize| {
            (stems[a].len(), std::cmp::Reverse(a)) > (stems[b].len(), std::cmp::Reverse(b))
        };
        for (w, h) in &edges {
            let (a, b) = (root(&mut parent, at(w)), root(&mut parent, at(h)));
            if a != b {
                let (lead, other) = if leads(a, b) { (a, b) } else { (b, a) };
                parent[other] = lead;
            }
        }
        (0..stems.len())
            .filter_map(|i| {
                let r = root(&mut parent, i);
                (r != i).then(|| (stems[i].clone(), stems[r].clone()))
            })
            .collect()
    })
}

/// The head a stem folds into by the thesaurus, if any.
fn same_as(stemmed: &str) -> Option<&'static str> {
    let map = thesaurus();
    map.binary_search_by(|(k, _)| k.as_str().cmp(stemmed))
        .ok()
        .map(|i| map[i].1.as_str())
}

/// [`stem`], then the thesaurus: how repeats compare a word ("blank" reads as "empty",
/// "k8s" as "kubernetes").
pub(super) fn sense_stem_into(w: &str, out: &mut String) {
    stem(w, out);
    if let Some(head) = same_as(out) {
        out.clear();
        out.push_str(head);
    }
}

/// A verb that builds, tests or documents something ("add", "write", "document").
pub(super) fn builds(w: &str) -> bool {
    matches!(ACTS.get(w), Some(Act::Create | Act::Test | Act::Document))
}

/// The class of verb `w` in any simple inflection ("removes", "added", "disabling").
pub(super) fn inflected_act(w: &str) -> Option<Act> {
    if let Some(a) = ACTS.get(w) {
        return Some(a);
    }
    for suffix in ["s", "es", "ed", "d", "ing"] {
        if let Some(base) = w.strip_suffix(suffix).filter(|b| b.len() >= 3) {
            let with_e = format!("{base}e");
            if let Some(a) = ACTS.get(base).or_else(|| ACTS.get(&with_e)) {
                return Some(a);
            }
        }
    }
    None
}

/// True if an action of class `x` undoes one of class `y`: adding and removing, enabling
/// and disabling, and reverting anything.
pub(super) fn reverses(x: Act, y: Act) -> bool {
    matches!(
        (x, y),
        (Act::Create, Act::Remove)
            | (Act::Remove, Act::Create)
            | (Act::Enable, Act::Disable)
            | (Act::Disable, Act::Enable)
    ) || (x == Act::Undo && y != Act::Undo)
}

/// The class of the verb `w` as written, if it is one.
pub(super) fn act(w: &str) -> Option<Act> {
    ACTS.get(w)
}

/// A light stemmer: plural, -ing, -ed, -ation/-tion, final -e; synonyms folded.
fn stem(w: &str, out: &mut String) {
    out.clear();
    fold_into(w, out);
    if out.ends_with("'s") {
        out.truncate(out.len() - 2);
    }
    while out.ends_with('\'') {
        out.pop();
    }
    while out.starts_with('\'') {
        out.remove(0);
    }
    // A synonym is stemmed like the word it stands for ("mins" and "minutes" alike).
    if let Some(s) = synonym(out) {
        out.clear();
        out.push_str(s);
    }
    if out.len() <= 3 || !out.is_ascii() {
        return;
    }
    let n = out.len();
    if out.ends_with("ies") && n > 4 {
        out.truncate(n - 3);
        out.push('y');
    } else if out.ends_with("sses")
        || ["ses", "xes", "zes", "ches", "shes"]
            .iter()
            .any(|s| out.ends_with(s))
    {
        out.truncate(n - 2);
    } else if out.ends_with('s') && !["ss", "us", "is"].iter().any(|s| out.ends_with(s)) {
        out.truncate(n - 1);
    }
    if let Some(s) = synonym(out) {
        out.clear();
        out.push_str(s);
        return;
    }
    let undouble = |o: &mut String| {
        let b = o.as_bytes();
        let n = b.len();
        if n >= 3 && b[n - 1] == b[n - 2] && !matches!(b[n - 1], b'l' | b's' | b'z') {
            o.pop();
        }
    };
    if out.ends_with("ing") && out.len() >= 6 {
        out.truncate(out.len() - 3);
        undouble(out);
    } else if out.ends_with("ed") && out.len() >= 5 {
        out.truncate(out.len() - 2);
        undouble(out);
    }
    if (out.ends_with("ation") && out.len() > 6) || (out.ends_with("tion") && out.len() > 5) {
        out.truncate(out.len() - 3);
    }
    if out.ends_with('e') && out.len() > 4 {
        out.pop();
    }
}

/// Hashes of the lower-cased parts of an identifier: `LogStore.flush` → log, store, flush.
fn parts_of(raw: &str) -> Vec<u64> {
    const SEED: u64 = 0xcbf2_9ce4_8422_2325;
    let raw = raw.trim_start_matches('-');
    let mut out = Vec::new();
    let (mut h, mut n) = (SEED, 0usize);
    let mut prev: Option<char> = None;
    let mut push = |h: &mut u64, n: &mut usize| {
        if *n >= 2 {
            out.push(*h);
        }
        *h = SEED;
        *n = 0;
    };
    for c in raw.chars() {
        if matches!(c, '.' | '_' | '/' | '-' | ':') {
            push(&mut h, &mut n);
        } else {
            let camel =
                c.is_uppercase() && prev.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
            if camel {
                push(&mut h, &mut n);
            }
            for l in c.to_lowercase() {
                let mut buf = [0u8; 4];
                for b in l.encode_utf8(&mut buf).bytes() {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0100_0000_01b3);
                }
                n += 1;
            }
        }
        prev = Some(c);
    }
    push(&mut h, &mut n);
    out
}

/// What the lexical measure keeps of one prompt.
#[derive(Debug, Default)]
pub(crate) struct Profile {
    act: Option<Act>,
    /// Term hash and kind, sorted by hash.
    terms: Vec<(u64, Kind)>,
    /// Identifier parts, for identifiers, members and files.
    parts: Vec<(u64, Vec<u64>)>,
    /// Neighbouring terms (a, b): b came right before a (`prev`) or right after it (`next`).
    prev: Vec<(u64, u64)>,
    next: Vec<(u64, u64)>,
    /// Noun phrases (runs of terms between stopwords, in order) as ranges of `np_terms`.
    nps: Vec<(u32, u32)>,
    np_terms: Vec<u64>,
    /// Terms that came from inflected verbs or adverbs ("reaches", "cached", "never").
    infl: Vec<u64>,
    /// Adjective-like terms ("manual", "hand-rolled"): they describe, they do not pick out.
    adj: Vec<u64>,
    /// What a relative clause says the thing does: "a workflow that *publishes* …".
    rel_verbs: Vec<u64>,
    /// The segment-leading verbs, stemmed.
    verbs: Vec<u64>,
    /// The first noun phrase after the prompt's action verb, as a range of `np_terms`.
    obj: Option<(u32, u32)>,
}

impl Profile {
    fn kind(&self, t: u64) -> Option<Kind> {
        self.terms
            .binary_search_by_key(&t, |p| p.0)
            .ok()
            .map(|i| self.terms[i].1)
    }

    fn has(&self, t: u64) -> bool {
        self.kind(t).is_some()
    }

    fn parts(&self, t: u64) -> Option<&[u64]> {
        self.parts
            .binary_search_by_key(&t, |p| p.0)
            .ok()
            .map(|i| self.parts[i].1.as_slice())
    }

    fn is_infl(&self, t: u64) -> bool {
        self.infl.binary_search(&t).is_ok()
    }

    fn is_adj(&self, t: u64) -> bool {
        self.adj.binary_search(&t).is_ok()
    }

    fn total(&self) -> f32 {
        self.terms.iter().map(|t| t.1.weight()).sum()
    }

    fn np(&self, r: (u32, u32)) -> &[u64] {
        self.np_terms.get(r.0 as usize..r.1 as usize).unwrap_or(&[])
    }

    fn noun_phrases(&self) -> impl Iterator<Item = &[u64]> {
        self.nps.iter().map(|r| self.np(*r))
    }

    fn object(&self) -> &[u64] {
        self.obj.map(|r| self.np(r)).unwrap_or(&[])
    }
}

struct Builder {
    p: Profile,
    /// Reused lower-case buffer.
    low: String,
    /// Terms in order, `None` where a stopword or segment end broke the run.
    seq: Vec<Option<u64>>,
    /// Where the current noun phrase began in `np_terms`.
    np_start: usize,
    want_obj: bool,
    scratch: String,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            p: Profile {
                terms: Vec::with_capacity(24),
                np_terms: Vec::with_capacity(24),
                nps: Vec::with_capacity(8),
                ..Profile::default()
            },
            low: String::with_capacity(32),
            seq: Vec::with_capacity(40),
            np_start: 0,
            want_obj: false,
            scratch: String::with_capacity(32),
        }
    }
}

impl Builder {
    fn add(&mut self, text: &str, mut kind: Kind) -> Option<u64> {
        if text.is_empty() {
            return None;
        }
        let long_enough = {
            let mut c = text.chars();
            c.next().is_some() && c.next().is_some()
        };
        if kind == Kind::Word {
            if STOP.contains(text) || !long_enough {
                return None;
            }
            if VALUES.contains(text) {
                kind = Kind::Num;
            }
        } else if kind != Kind::Num && !long_enough {
            return None;
        }
        // Duplicates are merged in `finish`, keeping the heaviest kind.
        let h = hash(text);
        self.p.terms.push((h, kind));
        Some(h)
    }

    fn add_word(&mut self, raw: &str) -> Option<u64> {
        // Most words are plain lower-case ASCII stopwords: skip the stemmer for those.
        if STOP.contains(raw) {
            return None;
        }
        // Values are compared as written: "negative" and "zero" are two test cases.
        let low = self.lowered(raw);
        let value = VALUES.contains(&low);
        let t = value.then(|| self.add(&low, Kind::Num)).flatten();
        self.low = low;
        if value {
            return t;
        }
        let mut s = std::mem::take(&mut self.scratch);
        sense_stem_into(raw, &mut s);
        let h = self.add(&s, Kind::Word);
        self.scratch = s;
        h
    }

    fn stem_hash(&mut self, raw: &str) -> u64 {
        let mut s = std::mem::take(&mut self.scratch);
        sense_stem_into(raw, &mut s);
        let h = hash(&s);
        self.scratch = s;
        h
    }

    fn add_parts(&mut self, term: Option<u64>, raw: &str) {
        if let Some(t) = term {
            self.p.parts.push((t, parts_of(raw)));
        }
    }

    fn flush(&mut self) {
        let end = self.p.np_terms.len();
        if end > self.np_start {
            let r = (self.np_start as u32, end as u32);
            if self.want_obj && self.p.obj.is_none() {
                self.p.obj = Some(r);
            }
            self.p.nps.push(r);
        }
        self.np_start = end;
        if self.seq.last() != Some(&None) {
            self.seq.push(None);
        }
    }

    fn emit(&mut self, t: Option<u64>) {
        if let Some(t) = t {
            self.seq.push(Some(t));
            self.p.np_terms.push(t);
        }
    }

    fn lowered(&mut self, s: &str) -> String {
        let mut low = std::mem::take(&mut self.low);
        low.clear();
        fold_into(s, &mut low);
        low
    }

    fn segment(&mut self, toks: &[&str]) {
        let skip = self.leading_verb(toks);
        let mut idx = 0usize;
        for (k, raw0) in toks.iter().enumerate() {
            if skip.contains(&k) {
                continue;
            }
            if k > 0 && k != skip.end {
                self.mid_clause(toks, k);
            }
            self.token(raw0, idx);
            idx += 1;
        }
        self.flush();
    }

    /// Indices of the segment's action verb after its lead-in words, with the particles of
    /// a phrasal verb ("turn on", "get rid of"); empty if there is none. The verb is recorded
    /// as the prompt's action if it has none yet.
    fn leading_verb(&mut self, toks: &[&str]) -> std::ops::Range<usize> {
        const NONE: std::ops::Range<usize> = usize::MAX..usize::MAX;
        let mut j = 0;
        while j < toks.len() {
            let low = self.lowered(toks[j]);
            let lead = LEAD.contains(&low);
            self.low = low;
            if !lead {
                break;
            }
            j += 1;
        }
        let Some(first) = toks.get(j) else {
            return NONE;
        };
        let low = self.lowered(first);
        let verb = words::verb(&low);
        self.low = low;
        if let Some((lemma, form)) = verb {
            if !matches!(form, Form::Base | Form::Ing) {
                return NONE;
            }
            if let Some(verb) = phrasal(lemma, toks.get(j + 1).copied()) {
                self.action(verb);
                // "get rid of": "of" belongs to the verb too.
                let of = verb == "remove"
                    && toks
                        .get(j + 2)
                        .is_some_and(|t| t.eq_ignore_ascii_case("of"));
                return j..j + 2 + usize::from(of);
            }
            self.action(lemma);
        } else if coined_verb(&self.low) {
            // "Tokenize …", "Memoize …", "Stringify …": a verb the list does not know
            // is still the action, so what follows it is the object.
            let lemma = self.low.clone();
            self.action(&lemma);
        } else {
            return NONE;
        }
        j..j + 1
    }

    /// Records `lemma` as an action verb, and as the prompt's action if it has none yet.
    fn action(&mut self, lemma: &str) {
        if self.p.act.is_none() {
            self.p.act = Some(act_of(lemma));
            self.want_obj = true;
        }
        let h = self.stem_hash(lemma);
        self.p.verbs.push(h);
    }

    /// Token `k` inside a segment: the verb of a relative clause is recorded, and a plural
    /// subject's verb ends the phrase before it.
    fn mid_clause(&mut self, toks: &[&str], k: usize) {
        let prev = toks[k - 1];
        let low = self.lowered(toks[k]);
        // "a workflow that publishes …": the relative clause's verb.
        let relative = ["that", "which", "who"]
            .iter()
            .any(|r| prev.eq_ignore_ascii_case(r));
        if relative {
            if let Some((lemma, Form::S)) = words::verb(&low) {
                let h = self.stem_hash(lemma);
                self.p.rel_verbs.push(h);
            }
        }
        // "arrow keys move the selection": a plural subject and its verb are two
        // phrases, not one.
        let next_det = toks.get(k + 1).is_some_and(|n| is_determiner(n));
        let subject_verb =
            prev.ends_with('s') && !prev.ends_with("ss") && words::is_base_verb(&low) && next_det;
        self.low = low;
        if subject_verb {
            self.flush();
        }
    }

    fn token(&mut self, raw0: &str, idx: usize) {
        let raw = raw0.trim_matches(|c| matches!(c, '.' | ':' | '\'' | '<' | '>' | '='));
        // "ProfileViewModel's onUpdate": the possessive of a name is the name.
        let raw = match raw
            .strip_suffix("'s")
            .or_else(|| raw.strip_suffix("\u{2019}s"))
        {
            Some(name) if is_identifier(name) => name,
            _ => raw,
        };
        let low = self.lowered(raw);
        self.token_lowered(raw, &low, idx);
        self.low = low;
    }

    fn token_lowered(&mut self, raw: &str, low: &str, idx: usize) {
        if raw.is_empty() || STOP.contains(low) {
            self.flush();
            return;
        }
        if is_adjective(low) {
            let h = self.stem_hash(raw);
            self.p.adj.push(h);
        }
        let inflected = words::is_inflected_verb(low) || is_adverb(low);
        if inflected {
            let h = self.stem_hash(raw);
            self.p.infl.push(h);
        }
        if REPEAT_METHODS.contains(raw) {
            let t = self.add(low, Kind::Method);
            self.emit(t);
        } else if raw.starts_with('-') {
            self.flags(raw);
        } else if raw.contains('/') {
            self.path(raw);
        } else if raw.contains('.')
            && !raw
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
        {
            self.dotted(raw, low);
        } else if let Some(n) = words::number_word(low) {
            // "twenty" is 20.
            let t = self.add(n, Kind::Num);
            self.emit(t);
        } else if let Some((num, unit)) = number(raw) {
            let t = self.add(&num, Kind::Num);
            self.emit(t);
            if !unit.is_empty() {
                self.add_word(attached_unit(unit));
            }
        } else if is_identifier(raw) {
            // Acronyms have spellings too: "DB" is "database", "CI" a workflow.
            let t = match synonym(low) {
                Some(s) => self.add(s, Kind::Ident),
                None => {
                    let mut s = std::mem::take(&mut self.scratch);
                    stem(low, &mut s);
                    let t = self.add(same_as(&s).unwrap_or(low), Kind::Ident);
                    self.scratch = s;
                    t
                }
            };
            self.add_parts(t, raw);
            self.emit(t);
        } else if raw.contains('-') {
            self.hyphenated(raw);
        } else if raw.chars().next().is_some_and(char::is_uppercase) && idx > 0 {
            let t = self.add(low, Kind::Ident);
            self.add_parts(t, raw);
            self.emit(t);
        } else {
            let t = self.add_word(raw);
            self.emit(t);
        }
    }

    /// Command-line flags (`--dry-run`, `-v/--verbose`): each a member term.
    fn flags(&mut self, raw: &str) {
        for part in raw.split('/') {
            let p = part.trim_start_matches('-');
            let p = p.split('=').next().unwrap_or(p);
            if p.chars().count() >= 2 {
                let t = self.add(&p.to_lowercase(), Kind::Member);
                self.add_parts(t, &format!("--{p}"));
                self.emit(t);
            }
        }
    }

    /// A path or an endpoint (`src/main.rs`, `/users/<id>`): the endpoint as one term with its
    /// parameters blanked, and each component.
    fn path(&mut self, raw: &str) {
        let endpoint = raw.starts_with('/');
        if endpoint {
            let t = self.add(&endpoint_form(raw), Kind::Member);
            self.add_parts(t, raw);
            self.emit(t);
        }
        for c in raw.split('/') {
            let c = c.trim_matches(|ch| matches!(ch, '<' | '>' | ':' | '?' | '='));
            if c.is_empty() || matches!(c, "~" | "." | "..") {
                continue;
            }
            if let Some((base, _)) = file_name(c) {
                self.file(&c.to_lowercase(), base);
            } else if endpoint {
                self.add_word(c);
            } else {
                let t = self.add_word(c);
                self.emit(t);
            }
        }
    }

    /// A file term `name` (lower case) made of the word `base`.
    fn file(&mut self, name: &str, base: &str) {
        let t = self.add(name, Kind::File);
        let b = self.add_word(base);
        if let (Some(t), Some(b)) = (t, b) {
            self.p.parts.push((t, vec![b]));
        }
        self.emit(t);
    }

    /// A word with dots: a file name, or a member path (`config.toml`, `self.cache.get`) with
    /// its parts.
    fn dotted(&mut self, raw: &str, low: &str) {
        if let Some((base, _)) = file_name(raw) {
            self.file(low, base);
            return;
        }
        let t = self.add(low, Kind::Member);
        self.add_parts(t, raw);
        self.emit(t);
        for c in raw.split('.').filter(|c| !c.is_empty()) {
            if c.chars().all(|ch| ch.is_ascii_digit()) {
                self.add(c, Kind::Num);
            } else {
                let t = self.add(&c.to_lowercase(), Kind::Ident);
                self.add_parts(t, c);
            }
        }
    }

    /// A hyphenated word (`hand-rolled`, `rate-limit`): each part, adjectives noted.
    fn hyphenated(&mut self, raw: &str) {
        for p in raw.split('-').filter(|p| !p.is_empty()) {
            let lp = p.to_ascii_lowercase();
            // "a ten-minute window": 10 minutes.
            if let Some(n) = words::number_word(&lp) {
                let t = self.add(n, Kind::Num);
                self.emit(t);
                continue;
            }
            if is_adjective(&lp) || words::is_inflected_verb(&lp) {
                let h = self.stem_hash(p);
                self.p.adj.push(h);
            }
            let t = self.add_word(p);
            self.emit(t);
        }
    }

    fn finish(mut self) -> Profile {
        for (i, t) in self.seq.iter().enumerate() {
            let Some(t) = *t else {
                continue;
            };
            if let Some(Some(p)) = i.checked_sub(1).and_then(|k| self.seq.get(k)) {
                self.p.prev.push((t, *p));
            }
            if let Some(Some(n)) = self.seq.get(i + 1) {
                self.p.next.push((t, *n));
            }
        }
        let p = &mut self.p;
        // Same hash: keep the heaviest kind (sorted heaviest first, then dedup).
        p.terms
            .sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.weight().total_cmp(&a.1.weight())));
        p.terms.dedup_by_key(|t| t.0);
        p.parts.sort_by_key(|x| x.0);
        p.parts.dedup_by_key(|x| x.0);
        for v in [&mut p.infl, &mut p.adj] {
            v.sort_unstable();
            v.dedup();
        }
        p.prev.sort_unstable();
        p.next.sort_unstable();
        self.p
    }
}

/// `runner.rs` → ("runner", "rs") when the extension is a known one.
fn file_name(s: &str) -> Option<(&str, &str)> {
    let (base, ext) = s.rsplit_once('.')?;
    (!base.is_empty() && EXTS.contains(&ext.to_ascii_lowercase())).then_some((base, ext))
}

/// `5`, `10,000`, `768px`, `10k` → (digits, unit).
fn number(raw: &str) -> Option<(String, &str)> {
    let digits_end = raw
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == ',' || *c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(raw.len());
    let (num, unit) = raw.split_at(digits_end);
    if num.is_empty()
        || !num.ends_with(|c: char| c.is_ascii_digit())
        || !num.starts_with(|c: char| c.is_ascii_digit() || c == ',')
        || !unit.chars().all(|c| c.is_ascii_alphabetic())
    {
        return None;
    }
    let mut n: String = num.chars().filter(|c| *c != ',').collect();
    if unit.eq_ignore_ascii_case("k") {
        n.push_str("000");
        return Some((n, ""));
    }
    Some((n, unit))
}

/// snake_case, camelCase, PascalCase with an inner capital, or an acronym.
fn is_identifier(raw: &str) -> bool {
    if raw.contains('_') {
        return true;
    }
    let mut prev_lower = false;
    for c in raw.chars() {
        if c.is_uppercase() && prev_lower {
            return true;
        }
        prev_lower = c.is_lowercase();
    }
    raw.chars().count() >= 2 && raw.chars().all(|c| c.is_alphabetic() && c.is_uppercase())
}

/// How much of a prompt the lexical measure reads: what a prompt is about is said early, and
/// the cap keeps comparing two huge prompts cheap.
const PROFILE_BYTES: usize = 16 * 1024;

/// Builds the profile of one prompt. Linear in the text (up to [`PROFILE_BYTES`]).
pub(crate) fn profile(text: &str) -> Profile {
    let mut cut = text.len().min(PROFILE_BYTES);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let text = &text[..cut];
    let mut b = Builder::default();
    let mut seg: Vec<&str> = Vec::new();
    let mut pos = 0;
    let len = text.len();
    while pos < len {
        let Some(c) = text[pos..].chars().next() else {
            break;
        };
        if is_sep_char(c) {
            if matches!(c, '\n' | ',' | ';' | '!' | '?') {
                b.segment(&seg);
                seg.clear();
            }
            pos += c.len_utf8();
            continue;
        }
        let start = pos;
        while pos < len {
            match text[pos..].chars().next() {
                Some(ch) if !is_sep_char(ch) => pos += ch.len_utf8(),
                _ => break,
            }
        }
        let tok = &text[start..pos];
        let ends_sentence = tok.len() > 1 && tok.ends_with(['.', ':']) && {
            let next = text[pos..].chars().next();
            next.is_none_or(char::is_whitespace)
        };
        let joiner = !seg.is_empty() && REPEAT_JOINERS.contains(tok);
        if joiner {
            b.segment(&seg);
            seg.clear();
            continue;
        }
        seg.push(tok);
        if ends_sentence {
            b.segment(&seg);
            seg.clear();
        }
    }
    b.segment(&seg);
    b.finish()
}

/// A term of `p` is matched in `o` if `o` has it, or has all of its parts.
fn matched(t: u64, p: &Profile, o: &Profile) -> bool {
    o.has(t)
        || p.parts(t)
            .is_some_and(|ps| !ps.is_empty() && ps.iter().all(|x| o.has(*x)))
}

/// Neighbours of term `t` in a sorted neighbour list.
fn neighbours(list: &[(u64, u64)], t: u64) -> &[(u64, u64)] {
    let start = list.partition_point(|x| x.0 < t);
    let end = start + list[start..].partition_point(|x| x.0 == t);
    &list[start..end]
}

fn shares_neighbour(list_a: &[(u64, u64)], a: u64, list_b: &[(u64, u64)], b: u64) -> bool {
    let nb = neighbours(list_b, b);
    neighbours(list_a, a)
        .iter()
        .any(|x| nb.iter().any(|y| y.1 == x.1))
}

/// A new target in the candidate where the earlier prompt had another one.
fn conflict(c: &Profile, h: &Profile) -> Option<&'static str> {
    term_conflict(c, h).or_else(|| modifier_conflict(c, h))
}

/// A salient term of one prompt the other does not have, in conflict with one of its own:
/// another method, file, value, member, sibling identifier or name in the same place.
fn term_conflict(c: &Profile, h: &Profile) -> Option<&'static str> {
    let unmatched = |p: &Profile, o: &Profile| -> Vec<(u64, Kind)> {
        p.terms
            .iter()
            .copied()
            .filter(|(t, k)| k.salient() && !matched(*t, p, o))
            .collect()
    };
    let cu = unmatched(c, h);
    let hu = unmatched(h, c);
    for &(a, ka) in cu.iter() {
        for &(b, kb) in hu.iter() {
            if ka == kb && matches!(ka, Kind::Method | Kind::File | Kind::Num) {
                return Some(match ka {
                    Kind::Method => "another HTTP method",
                    Kind::File => "another file",
                    _ => "another value",
                });
            }
            if ka == Kind::Member && kb == Kind::Member {
                return Some("another member, flag or endpoint");
            }
            let named = |k: Kind| matches!(k, Kind::Ident | Kind::Member);
            if named(ka) && named(kb) {
                let pa = c.parts(a).unwrap_or(&[]);
                let pb = h.parts(b).unwrap_or(&[]);
                if pa.iter().any(|x| pb.contains(x)) {
                    return Some("a sibling identifier");
                }
            }
            if shares_neighbour(&c.prev, a, &h.prev, b) || shares_neighbour(&c.next, a, &h.next, b)
            {
                return Some("another name in the same place");
            }
        }
    }
    None
}

/// "the request id" → "the user id": the same noun with another modifier.
fn modifier_conflict(c: &Profile, h: &Profile) -> Option<&'static str> {
    for np in c.noun_phrases() {
        if np.len() < 2 {
            continue;
        }
        let head = np[np.len() - 1];
        let novel: Vec<u64> = np[..np.len() - 1]
            .iter()
            .copied()
            .filter(|m| !h.has(*m) && !is_vague(*m) && !c.is_infl(*m) && !c.is_adj(*m))
            .collect();
        if novel.is_empty() {
            continue;
        }
        for hnp in h.noun_phrases().filter(|n| n.last() == Some(&head)) {
            let hmods: Vec<u64> = hnp[..hnp.len() - 1]
                .iter()
                .copied()
                .filter(|m| !np.contains(m) && !is_vague(*m) && !h.is_infl(*m) && !h.is_adj(*m))
                .collect();
            if hmods.is_empty() {
                continue;
            }
            let related = novel.iter().any(|m| {
                c.parts(*m)
                    .map(|ps| ps.iter().any(|x| hmods.contains(x)))
                    .unwrap_or(hmods.contains(m))
            });
            if related {
                continue;
            }
            if !novel.iter().any(|m| hnp.contains(m)) {
                return Some("the same noun with another modifier");
            }
        }
    }
    None
}

fn is_vague(h: u64) -> bool {
    static HASHES: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    HASHES
        .get_or_init(|| {
            let mut v: Vec<u64> = VAGUE_LIST.split_whitespace().map(hash).collect();
            v.sort_unstable();
            v
        })
        .binary_search(&h)
        .is_ok()
}

/// Modifiers that do not pick out a different thing.
const VAGUE_LIST: &str =
    "new better proper correct right current existing exist whole full simple \
     clean quick additional extra same other different separate single both little big good bad \
     real actual specific explicit helpful friendly nice clear more less main default old";

/// Scores candidate `c` against earlier prompt `h`.
fn compare(c: &Profile, h: &Profile) -> (f32, &'static str) {
    let (ac, ah) = (c.act.unwrap_or(Act::None), h.act.unwrap_or(Act::None));
    if opposite(ac, ah) {
        return (0.0, "a different action");
    }
    if let Some(why) = conflict(c, h) {
        return (0.05, why);
    }
    if !c.object().is_empty() && ac != Act::None {
        if let Some(why) = object_conflict(c, h) {
            return (0.1, why);
        }
    }
    // "a workflow that publishes …" after "a workflow that runs …".
    if !c.rel_verbs.is_empty()
        && !h.rel_verbs.is_empty()
        && !c
            .rel_verbs
            .iter()
            .any(|v| h.rel_verbs.contains(v) || h.has(*v))
    {
        return (0.1, "a different behaviour");
    }
    overlap(c, h)
}

/// The candidate's object is new to the earlier prompt, or both objects' heads are unknown to
/// the other prompt.
fn object_conflict(c: &Profile, h: &Profile) -> Option<&'static str> {
    let known = |t: &u64| {
        h.has(*t)
            || h.verbs.contains(t)
            || c.parts(*t)
                .is_some_and(|ps| ps.iter().any(|p| h.has(*p) || h.verbs.contains(p)))
    };
    let content: Vec<u64> = c
        .object()
        .iter()
        .copied()
        .filter(|t| !is_vague(*t))
        .collect();
    let verb_known = c.verbs.iter().any(|v| h.has(*v));
    if !content.is_empty() && !content.iter().any(known) && !verb_known {
        return Some("a new object");
    }
    // Both objects' heads unknown to the other prompt: two different things.
    let c_head = content.last().copied();
    let h_head = h.object().iter().copied().rfind(|t| !is_vague(*t));
    let (Some(ch), Some(hh)) = (c_head, h_head) else {
        return None;
    };
    let h_known = |t: u64| {
        c.has(t)
            || c.verbs.contains(&t)
            || h.parts(t).is_some_and(|ps| ps.iter().any(|p| c.has(*p)))
    };
    // Descriptions ("hard-coded") may be shared; the things themselves are not.
    let naming = |p: &Profile, t: &u64| !p.is_adj(*t) && !p.is_infl(*t);
    let shared = content
        .iter()
        .filter(|t| naming(c, t))
        .any(|t| h.object().contains(t));
    (!known(&ch) && !h_known(hh) && h.act.is_some() && !shared).then_some("a different object")
}

/// How much of each prompt's weight the other shares, the candidate's side counting more.
fn overlap(c: &Profile, h: &Profile) -> (f32, &'static str) {
    let (wc, wh) = (c.total(), h.total());
    if wc <= 0.0 || wh <= 0.0 {
        return (0.0, "nothing to compare");
    }
    let cov_c = shared_weight(c, h) / wc;
    let cov_h = (shared_weight(h, c) / wh).min(1.0);
    (0.6 * cov_c + 0.4 * cov_h, "overlap")
}

/// The weight of `p`'s terms that `o` has too.
fn shared_weight(p: &Profile, o: &Profile) -> f32 {
    p.terms
        .iter()
        .filter(|t| o.has(t.0))
        .map(|t| t.1.weight())
        .sum()
}

/// An endpoint with its parameters (`<id>`, `:id`, `{id}`) written `{}`, lower case.
fn endpoint_form(raw: &str) -> String {
    let mut norm = String::new();
    for c in raw.split('/').filter(|c| !c.is_empty()) {
        norm.push('/');
        let param = (c.starts_with('<') && c.ends_with('>'))
            || c.starts_with(':')
            || (c.starts_with('{') && c.ends_with('}'));
        if param {
            norm.push_str("{}");
        } else {
            norm.extend(c.chars().flat_map(char::to_lowercase));
        }
    }
    norm
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every word of `map` reads like the word it folds into, by `read`.
    fn folds_alike(map: &super::super::lexicon::WordMap, read: fn(&str, &mut String)) {
        let (mut a, mut b) = (String::new(), String::new());
        for (word, head) in map.pairs() {
            read(word, &mut a);
            read(head, &mut b);
            assert_eq!(a, b, "{word:?} reads unlike {head:?}");
        }
    }

    #[test]
    fn every_synonym_stems_like_the_word_it_stands_for() {
        folds_alike(&REPEAT_SYNONYMS, stem);
    }

    #[test]
    fn the_thesaurus_folds_every_inflection_for_repeats_only() {
        folds_alike(&REPEAT_SAME, sense_stem_into);
        let (mut a, mut b) = (String::new(), String::new());
        // No group grows by chaining: the largest holds the ways to say "delete".
        let map = thesaurus();
        let mut sizes = std::collections::HashMap::new();
        for (_, head) in map {
            *sizes.entry(head.as_str()).or_insert(1usize) += 1;
        }
        let (largest, size) = sizes.iter().max_by_key(|(_, n)| **n).unwrap();
        assert!(*size <= 16, "{largest:?} heads {size} stems");
        for (x, y) in [
            ("blank", "empty"),
            ("k8s", "Kubernetes"),
            ("dropped", "deleting"),
            ("wipes", "removed"),
        ] {
            sense_stem_into(x, &mut a);
            sense_stem_into(y, &mut b);
            assert_eq!(a, b, "{x:?} / {y:?}");
        }
        // The harm rules read "drop" as written.
        stem_into("drop", &mut a);
        stem_into("delete", &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn streaming_comparison_agrees_with_normalization() {
        for (a, b) in [
            ("Fix the bug.", "fix the  BUG!"),
            ("Fix the bug.", "Fix the bugs"),
            ("a . !", "A"),
            ("", " . "),
            ("İstanbul", "i̇stanbul"),
        ] {
            assert_eq!(
                normalizes_to(b, &normalize_prompt(a)),
                normalize_prompt(a) == normalize_prompt(b),
                "{a:?} / {b:?}"
            );
        }
    }

    #[test]
    fn normalization_matches_the_fixture_rule() {
        assert_eq!(
            normalize_prompt("  Fix the Clippy   warnings.\t"),
            "fix the clippy warnings"
        );
        assert_eq!(normalize_prompt("Done!!?"), "done");
        assert_eq!(normalize_prompt("Cap  the\tdelay?"), "cap the delay");
        assert_eq!(normalize_prompt(" \n "), "");
    }

    #[test]
    fn rewording_scores_high() {
        let l = Lexical::new();
        for (c, h) in [
            (
                "Clean up the clippy warnings in runner.rs.",
                "Fix the clippy warnings in src/runner.rs.",
            ),
            (
                "Once more: make the title search ignore case with ilike.",
                "Make the title search case-insensitive using ilike.",
            ),
            (
                "Swap the print calls in NetworkClient.swift for LogStore calls.",
                "Replace the print statements in NetworkClient.swift with LogStore calls.",
            ),
            // Phrasal verbs are their verb; units are the same in any spelling.
            (
                "turn on full-mode R8 for release builds",
                "Enable R8 full mode for the release build type.",
            ),
            (
                "Give the reporting role a statement_timeout of 30 sec.",
                "Set statement_timeout to 30s for the reporting role.",
            ),
            ("Cap the job at 5 mins.", "Cap the job at 5 minutes."),
            ("Get rid of the debug logs.", "Remove the debug logs."),
            // Numbers in words are their digits.
            (
                "Could the clicks stream get a ten-minute watermark on event_time?",
                "Add a watermark of 10 minutes on event_time in the clicks stream.",
            ),
            // A name's possessive is the name.
            (
                "capture self weakly in the onUpdate closure of ProfileViewModel",
                "Capture self weakly in ProfileViewModel's onUpdate closure.",
            ),
        ] {
            assert!(
                l.score(c, h) >= SAME_REQUEST,
                "{c} / {h}: {:?}",
                l.explain(c, h)
            );
        }
    }

    #[test]
    fn new_targets_and_opposite_actions_score_low() {
        let l = Lexical::new();
        for (c, h) in [
            (
                "Fix the clippy warnings in src/config.rs.",
                "Fix the clippy warnings in src/runner.rs.",
            ),
            (
                "Add DELETE /api/books/<id> returning 204, and 404 for unknown ids.",
                "Add GET /api/books/<id> returning 404 for unknown ids.",
            ),
            (
                "Add an index on books.title.",
                "Add an index on books.author in a new migration.",
            ),
            (
                "Remove the Redis cache in front of get_product.",
                "Add a Redis cache in front of get_product.",
            ),
            ("Revert the log rotation.", "Add log rotation to LogStore."),
            ("Turn off R8 full mode.", "Turn on R8 full mode."),
            (
                "Cap the retry delay at 30 seconds.",
                "Cap the retry delay at 60 seconds.",
            ),
            (
                "Memoize the sorted list in OrderList.",
                "Memoize the filtered list in UserList.",
            ),
            (
                "Add a healthcheck to the Redis service in docker-compose.yml.",
                "Add a healthcheck to the Postgres service in docker-compose.yml.",
            ),
            // A verb the list does not know still heads its object (regression).
            (
                "Tokenize identifiers and keywords in src/lexer.rs.",
                "Tokenize integer literals in src/lexer.rs.",
            ),
            ("Tokenize identifiers", "Tokenize integers"),
        ] {
            assert!(
                l.score(c, h) < SAME_REQUEST,
                "{c} / {h}: {:?}",
                l.explain(c, h)
            );
        }
    }

    #[test]
    fn strongest_takes_the_max() {
        struct Always(f32);
        impl Similarity for Always {
            fn score(&self, _: &str, _: &str) -> f32 {
                self.0
            }
        }
        let s = Strongest(vec![Box::new(Always(0.2)), Box::new(Always(0.7))]);
        assert_eq!(s.scores("a", &["b", "c"]), vec![0.7, 0.7]);
    }
}

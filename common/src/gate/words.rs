//! Word-level helpers shared by the gate's rules: a prose tokenizer that keeps byte offsets
//! and clause boundaries, verb forms (base, -s, -ing, past) against a lexicon of the verbs
//! that appear in development instructions (the lexicon itself is data: `rules/words.toml`,
//! loaded by `lexicon`). Command parsing lives in `shell`; what each rule concludes from
//! words lives in the rule.

use super::lexicon::{fold_into, CLAUSE_WORDS, IRREGULAR_PAST, VERBS};

/// What separates a token from the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Break {
    /// Only whitespace (or nothing).
    None,
    /// A comma, bracket or dash: a phrase boundary inside a clause.
    Soft,
    /// A sentence or clause end: `.`, `!`, `?`, `;`, `:`, a newline, `&&`, `|`.
    Hard,
}

/// One token of prose, with its place in the source text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tok {
    /// Byte range in the source text.
    pub start: u32,
    pub end: u32,
    lo_start: u32,
    lo_end: u32,
    /// The boundary between the previous token and this one.
    pub brk: Break,
    /// At least two letters, all upper case (`DELETE`, `TOML`).
    pub upper: bool,
}

/// A tokenized text: tokens plus their lower-cased forms in one buffer.
#[derive(Debug, Default)]
pub(crate) struct Words {
    buf: String,
    pub toks: Vec<Tok>,
}

impl Words {
    /// Lower-cased text of token `i`.
    pub fn lower(&self, i: usize) -> &str {
        self.toks
            .get(i)
            .and_then(|t| self.buf.get(t.lo_start as usize..t.lo_end as usize))
            .unwrap_or("")
    }

    pub fn len(&self) -> usize {
        self.toks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.toks.is_empty()
    }

    /// Index of the first token of the clause holding token `i` (at most [`MAX_CLAUSE`]
    /// tokens back, so that text without punctuation stays linear).
    pub fn clause_start(&self, i: usize) -> usize {
        let mut k = i.min(self.toks.len().saturating_sub(1));
        let stop = k.saturating_sub(MAX_CLAUSE);
        while k > stop && self.toks[k].brk != Break::Hard && !is_clause_word(self.lower(k)) {
            k -= 1;
        }
        k
    }

    /// Index one past the last token of the clause holding token `i` (at most
    /// [`MAX_CLAUSE`] tokens on).
    pub fn clause_end(&self, i: usize) -> usize {
        let mut k = i + 1;
        let stop = (i + MAX_CLAUSE).min(self.toks.len());
        while k < stop && self.toks[k].brk != Break::Hard && !is_clause_word(self.lower(k)) {
            k += 1;
        }
        k
    }

    /// Index of the first token whose byte range ends after `pos`.
    pub fn token_at(&self, pos: usize) -> usize {
        self.toks.partition_point(|t| (t.end as usize) <= pos)
    }
}

/// The longest clause the rules look at, in tokens.
pub(crate) const MAX_CLAUSE: usize = 64;

/// Words that open a new clause even without punctuation ("…, then push").
fn is_clause_word(w: &str) -> bool {
    CLAUSE_WORDS.contains(w)
}

/// A number written as a word ("twenty", "ten"), as its digits; lower case in.
pub(crate) fn number_word(w: &str) -> Option<&'static str> {
    Some(match w {
        "zero" => "0",
        "two" => "2",
        "three" => "3",
        "four" => "4",
        "five" => "5",
        "six" => "6",
        "seven" => "7",
        "eight" => "8",
        "nine" => "9",
        "ten" => "10",
        "eleven" => "11",
        "twelve" => "12",
        "fifteen" => "15",
        "twenty" => "20",
        "thirty" => "30",
        "forty" => "40",
        "fifty" => "50",
        "sixty" => "60",
        "ninety" => "90",
        "hundred" => "100",
        "thousand" => "1000",
        _ => return None,
    })
}

pub(crate) fn is_sep_char(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ',' | ';'
                | '!'
                | '?'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '"'
                | '`'
                | '*'
                | '|'
                | '&'
                | '“'
                | '”'
                | '‘'
                | '—'
                | '–'
                | '…'
        )
}

/// Splits prose into tokens. Hyphenated words stay whole ("in-memory", "force-push"; rules
/// split them where they need the parts); trailing punctuation becomes a boundary. Runs in
/// one pass over the text.
pub(crate) fn tokenize(text: &str) -> Words {
    let mut w = Words {
        buf: String::with_capacity(text.len().min(1 << 20)),
        toks: Vec::with_capacity(text.len() / 5 + 1),
    };
    let mut pending = Break::None;
    let mut pos = 0usize;
    while pos < text.len() {
        let Some(c) = text[pos..].chars().next() else {
            break;
        };
        if is_sep_char(c) {
            pending = stronger(pending, sep_break(c));
            pos += c.len_utf8();
            continue;
        }
        // "tl;dr" is one word, not two sentences.
        if text
            .get(pos..pos + 5)
            .is_some_and(|t| t.eq_ignore_ascii_case("tl;dr"))
        {
            push_tok(&mut w, text, pos, pos + 5, pending);
            pending = Break::None;
            pos += 5;
            continue;
        }
        let end = token_end(text, pos);
        let (s, e, trail_break) = trim_token(text, pos, end);
        pos = end;
        if s < e {
            push_tok(&mut w, text, s, e, pending);
            pending = Break::None;
        }
        pending = stronger(pending, trail_break);
    }
    w
}

/// The boundary a separator makes.
fn sep_break(c: char) -> Break {
    match c {
        '\n' | ';' | '!' | '?' | '|' | '&' => Break::Hard,
        ',' | '(' | ')' | '[' | ']' | '{' | '}' | '—' | '–' => Break::Soft,
        _ => Break::None,
    }
}

/// Where the token starting at `pos` ends: at the next separator.
fn token_end(text: &str, pos: usize) -> usize {
    let mut end = pos;
    for (off, ch) in text[pos..].char_indices() {
        if is_sep_char(ch) {
            break;
        }
        end = pos + off + ch.len_utf8();
    }
    end
}

/// The token `s..e` without the punctuation that belongs to the sentence, not the word, and
/// the boundary a final full stop or colon makes.
fn trim_token(text: &str, mut s: usize, mut e: usize) -> (usize, usize, Break) {
    let mut trail_break = Break::None;
    while e > s {
        let last = text[s..e].chars().next_back().unwrap_or(' ');
        if matches!(last, '.' | ':') {
            // "..", "./", "../" and "lib.rs" keep their dots, and so does a glob ("v1.*"); a
            // final one ends the sentence.
            let word = &text[s..e];
            let glob = last == '.' && text[e..].starts_with('*') && !text[e..].starts_with("**");
            if word == "." || word == ".." || glob {
                break;
            }
            trail_break = Break::Hard;
            e -= 1;
        } else if matches!(last, '\'' | '’' | '>' | '=' | '<') && !text[s..e].contains('/') {
            e -= last.len_utf8();
        } else {
            break;
        }
    }
    while s < e {
        let first = text[s..e].chars().next().unwrap_or(' ');
        if matches!(first, '\'' | '’' | ':' | '<' | '>' | '=') {
            s += first.len_utf8();
        } else {
            break;
        }
    }
    (s, e, trail_break)
}

fn stronger(a: Break, b: Break) -> Break {
    match (a, b) {
        (Break::Hard, _) | (_, Break::Hard) => Break::Hard,
        (Break::Soft, _) | (_, Break::Soft) => Break::Soft,
        _ => Break::None,
    }
}

fn push_tok(w: &mut Words, text: &str, s: usize, e: usize, brk: Break) {
    let raw = &text[s..e];
    let lo_start = w.buf.len() as u32;
    let mut letters = 0usize;
    let mut uppers = 0usize;
    for ch in raw.chars() {
        if ch.is_alphabetic() {
            letters += 1;
            if ch.is_uppercase() {
                uppers += 1;
            }
        }
    }
    fold_into(raw, &mut w.buf);
    if raw.contains('’') {
        // The typographic apostrophe reads as the plain one ("don’t").
        let folded = w.buf.split_off(lo_start as usize).replace('’', "'");
        w.buf.push_str(&folded);
    }
    w.toks.push(Tok {
        start: s as u32,
        end: e as u32,
        lo_start,
        lo_end: w.buf.len() as u32,
        brk,
        upper: letters >= 2 && uppers == letters,
    });
}

/// How a verb is inflected in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Base,
    /// Third person: "deletes".
    S,
    /// "deleting".
    Ing,
    /// "deleted", "wrote".
    Past,
}

/// Irregular past forms and participles → base form.
fn irregular_past(w: &str) -> Option<&'static str> {
    IRREGULAR_PAST.get(w)
}

/// The lexicon entry equal to `cand`, if any.
fn lookup(cand: &str) -> Option<&'static str> {
    VERBS.get(cand)
}

/// Looks `stem` (+ optional suffix) up without allocating for short words.
fn lookup_with(stem: &str, suffix: &str) -> Option<&'static str> {
    let mut buf = [0u8; 48];
    let n = stem.len() + suffix.len();
    if n > buf.len() || n == 0 {
        return None;
    }
    buf[..stem.len()].copy_from_slice(stem.as_bytes());
    buf[stem.len()..n].copy_from_slice(suffix.as_bytes());
    std::str::from_utf8(&buf[..n]).ok().and_then(lookup)
}

/// Stem candidates for a suffixed form: "stopping" → "stop", "making" → "make", "fixes" → "fix".
fn stem_lookup(stem: &str) -> Option<&'static str> {
    if stem.len() < 2 {
        return None;
    }
    if let Some(v) = lookup(stem) {
        return Some(v);
    }
    if let Some(v) = lookup_with(stem, "e") {
        return Some(v);
    }
    let b = stem.as_bytes();
    let n = b.len();
    if n >= 3 && b[n - 1] == b[n - 2] {
        if let Some(v) = lookup(&stem[..n - 1]) {
            return Some(v);
        }
    }
    None
}

/// The base form and inflection of `w` (lower case) if it is a verb of the lexicon.
pub(crate) fn verb(w: &str) -> Option<(&'static str, Form)> {
    if w.len() < 2 || w.len() > 40 || !w.is_ascii() {
        return None;
    }
    if let Some(v) = lookup(w) {
        return Some((v, Form::Base));
    }
    if let Some(base) = irregular_past(w) {
        return Some((base, Form::Past));
    }
    if let Some(stem) = w.strip_suffix("ing") {
        return stem_lookup(stem).map(|v| (v, Form::Ing));
    }
    if let Some(stem) = w.strip_suffix("ied") {
        return lookup_with(stem, "y").map(|v| (v, Form::Past));
    }
    if let Some(stem) = w.strip_suffix("ed") {
        return stem_lookup(stem)
            .or_else(|| lookup_with(stem, ""))
            .map(|v| (v, Form::Past));
    }
    if let Some(stem) = w.strip_suffix("ies") {
        return lookup_with(stem, "y").map(|v| (v, Form::S));
    }
    if let Some(stem) = w.strip_suffix("es") {
        if let Some(v) = lookup(stem).or_else(|| lookup_with(stem, "e")) {
            return Some((v, Form::S));
        }
    }
    if let Some(stem) = w.strip_suffix('s') {
        return lookup(stem).map(|v| (v, Form::S));
    }
    None
}

/// True for an inflected form (-s, -ing, past) of a lexicon verb. Cheaper than [`verb`]
/// when the base form does not matter.
pub(crate) fn is_inflected_verb(w: &str) -> bool {
    let suffixed = w.ends_with('s') || w.ends_with("ed") || w.ends_with("ing");
    if suffixed {
        matches!(verb(w), Some((_, Form::S | Form::Ing | Form::Past)))
    } else {
        irregular_past(w).is_some()
    }
}

/// True for the base form of a lexicon verb.
pub(crate) fn is_base_verb(w: &str) -> bool {
    VERBS.contains(w)
}

/// One-letter typos (insert, delete, replace, swap of neighbours) of words of five or more.
pub(crate) fn one_typo(a: &str, b: &str) -> bool {
    edit(a, b, true)
}

/// True if `typed` is `word` with one slip of the keyboard: two neighbours swapped, one
/// letter missing, or one letter doubled. A replaced or inserted letter turns one real word
/// into another too often ("tables" → "cables", "drive" → "driver", "scrap" → "scrape").
pub(crate) fn one_slip(typed: &str, word: &str) -> bool {
    if typed.len() == word.len() + 1 {
        let t = typed.as_bytes();
        let i = t
            .iter()
            .zip(word.as_bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let doubled = (i > 0 && t[i] == t[i - 1]) || t.get(i + 1) == Some(&t[i]);
        return doubled && edit(typed, word, false);
    }
    edit(typed, word, false)
}

fn edit(a: &str, b: &str, replace: bool) -> bool {
    // Most pairs differ in length by more than one: decide those without allocating.
    if a.is_ascii() && b.is_ascii() {
        return edit_in(a.as_bytes(), b.as_bytes(), replace);
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    edit_in(&a, &b, replace)
}

fn edit_in<T: PartialEq>(a: &[T], b: &[T], replace: bool) -> bool {
    if a.len().min(b.len()) < 5 || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    if a.len() == b.len() {
        let d: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
        return (replace && d.len() == 1)
            || (d.len() == 2 && d[1] == d[0] + 1 && a[d[0]] == b[d[1]] && a[d[1]] == b[d[0]]);
    }
    let (short, long) = if a.len() < b.len() { (a, b) } else { (b, a) };
    let i = short
        .iter()
        .zip(long.iter())
        .take_while(|(x, y)| x == y)
        .count();
    short[i..] == long[i + 1..]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn verb_forms_resolve_to_their_base() {
        assert_eq!(verb("fixed"), Some(("fix", Form::Past)));
        assert_eq!(verb("added"), Some(("add", Form::Past)));
        assert_eq!(verb("updated"), Some(("update", Form::Past)));
        assert_eq!(verb("committed"), Some(("commit", Form::Past)));
        assert_eq!(verb("tried"), Some(("try", Form::Past)));
        assert_eq!(verb("wrote"), Some(("write", Form::Past)));
        assert_eq!(verb("deleting"), Some(("delete", Form::Ing)));
        assert_eq!(verb("stopping"), Some(("stop", Form::Ing)));
        assert_eq!(verb("wipes"), Some(("wipe", Form::S)));
        assert_eq!(verb("fixes"), Some(("fix", Form::S)));
        assert_eq!(verb("add"), Some(("add", Form::Base)));
        assert_eq!(verb("unused"), None);
        assert_eq!(verb("status"), None);
    }

    #[test]
    fn tokenizer_keeps_paths_and_hyphens() {
        let w = tokenize("Force-push src/runner.rs to main. Then --dry-run, ok?");
        let toks: Vec<&str> = (0..w.len()).map(|i| w.lower(i)).collect();
        assert_eq!(
            toks,
            [
                "force-push",
                "src/runner.rs",
                "to",
                "main",
                "then",
                "--dry-run",
                "ok"
            ]
        );
        assert_eq!(w.toks[4].brk, Break::Hard);
        assert_eq!(w.toks[6].brk, Break::Soft);
    }

    #[test]
    fn tokenizer_keeps_tldr_and_globs_whole() {
        let w = tokenize("tl;dr: delete the v1.* tags.");
        let toks: Vec<&str> = (0..w.len()).map(|i| w.lower(i)).collect();
        assert_eq!(toks, ["tl;dr", "delete", "the", "v1.", "tags"]);
        assert_eq!(w.toks[3].brk, Break::None);
        assert_eq!(w.toks[4].brk, Break::None);
    }

    #[test]
    fn tokenizer_keeps_leading_slash_and_marks_case() {
        let w = tokenize("Add a /status endpoint for TOML");
        assert_eq!(w.lower(2), "/status");
        assert!(w.toks[5].upper);
        assert!(!w.toks[0].upper);
    }
}

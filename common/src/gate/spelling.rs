//! One name, two spellings: before the learned repeat judge compares a candidate with an
//! earlier prompt, the words it spells differently from that prompt are rewritten to the
//! earlier prompt's spelling, so the judge sees one name rather than "another value" or "a
//! sibling identifier".
//! What counts as the same name spelled twice:
//! - digit groups: `5,000`, `5_000` and `5000`;
//! - a typo in a word of five letters or more: two neighbouring letters swapped
//!   (`handle_cleint`, `chnages`), or, in a plain lower-case word, one letter dropped before
//!   its end (`migraton`, `anotation`). A letter *changed* is how siblings differ
//!   (`get_user`, `set_user`, `rev C`) and a letter *more* how words grow (`scrape`,
//!   `scraper`), so neither counts;
//! - a compound written apart or together: `init container`, `initContainer`,
//!   `init-container`.
//!
//! Acronyms (`FOV`, `field of view`) were tried and left out: matched by initials, far more
//! ordinary phrases spelled a short upper-case word by chance (`IP`, `MB`, `CI`) than
//! rewordings used one.
//!
//! Pairwise and pure: only the earlier prompt's own words are spellings to align to, so
//! nothing here can make two different names equal unless one is a near-letter-for-letter
//! copy of the other.

use super::lexicon::REPEAT_STOP;

/// The candidate with every word it spells differently from `earlier` rewritten to
/// `earlier`'s spelling; `None` when there is nothing to rewrite.
pub fn align(candidate: &str, earlier: &str) -> Option<String> {
    let theirs = words(earlier);
    if theirs.is_empty() {
        return None;
    }
    let ours = words(candidate);
    // Their words' forms, computed once for all of ours.
    let lower: Vec<String> = theirs.iter().map(|t| t.text.to_lowercase()).collect();
    let squashed: Vec<String> = theirs.iter().map(|t| squash(t.text)).collect();
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut i = 0;
    while i < ours.len() {
        let w = &ours[i];
        let low = w.text.to_lowercase();
        if lower.contains(&low) {
            i += 1;
            continue;
        }
        // Two of our words that are one of theirs (`init container` → `initContainer`).
        if let Some(next) = ours.get(i + 1) {
            if adjacent(candidate, w, next) {
                let joined = format!("{low}{}", next.text.to_lowercase());
                if let Some(j) = squashed.iter().position(|t| *t == joined) {
                    edits.push((w.start, next.end, theirs[j].text.to_string()));
                    i += 2;
                    continue;
                }
            }
        }
        if let Some(j) =
            (0..theirs.len()).find(|&j| same_name(w.text, &low, theirs[j].text, &lower[j]))
        {
            edits.push((w.start, w.end, theirs[j].text.to_string()));
        }
        i += 1;
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(candidate.len() + 16);
    let mut at = 0;
    for (start, end, with) in edits {
        out.push_str(&candidate[at..start]);
        out.push_str(&with);
        at = end;
    }
    out.push_str(&candidate[at..]);
    (out != candidate).then_some(out)
}

/// A word of a prompt and where it sits (byte offsets), with the punctuation around it left
/// outside.
#[derive(Debug)]
struct Word<'a> {
    text: &'a str,
    start: usize,
    end: usize,
}

fn words(text: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                push_word(text, s, i, &mut out);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        push_word(text, s, text.len(), &mut out);
    }
    out
}

fn push_word<'a>(text: &'a str, start: usize, end: usize, out: &mut Vec<Word<'a>>) {
    let raw = &text[start..end];
    let edge = |c: char| !(c.is_alphanumeric() || matches!(c, '_' | '&'));
    let trimmed = raw.trim_start_matches(edge);
    let start = start + (raw.len() - trimmed.len());
    let trimmed = trimmed.trim_end_matches(edge);
    // "handle_client's read loop": the possessive of a name is the name.
    let trimmed = trimmed
        .strip_suffix("'s")
        .or_else(|| trimmed.strip_suffix("\u{2019}s"))
        .unwrap_or(trimmed);
    if !trimmed.is_empty() {
        out.push(Word {
            text: trimmed,
            start,
            end: start + trimmed.len(),
        });
    }
}

/// True if only spaces separate the two words (not a comma or a full stop).
fn adjacent(text: &str, a: &Word<'_>, b: &Word<'_>) -> bool {
    text[a.end..b.start].chars().all(char::is_whitespace)
}

/// Lower case without the separators a compound may be written with.
fn squash(w: &str) -> String {
    w.chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The same name spelled twice (`a`, `b`: the two in lower case): digit groups, a swapped
/// pair of letters, a letter dropped in a plain word, or a compound with or without its
/// hyphen.
fn same_name(ours: &str, a: &str, theirs: &str, b: &str) -> bool {
    if ours == theirs {
        return false;
    }
    let digits = |w: &str| -> Option<String> {
        let bare: String = w.chars().filter(|c| !matches!(c, ',' | '_')).collect();
        (bare.len() > 3 && bare.chars().all(|c| c.is_ascii_digit())).then_some(bare)
    };
    if let (Some(a), Some(b)) = (digits(ours), digits(theirs)) {
        return a == b;
    }
    if a == b || (a.contains('-') || b.contains('-')) && squash(a) == squash(b) {
        return a != b;
    }
    // Glue words are spelled right: "there" is not "three" mistyped.
    if REPEAT_STOP.contains(a) || REPEAT_STOP.contains(b) {
        return false;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if a.len() >= 5 && swapped(&a, &b) {
        return true;
    }
    let plain = |w: &str| w.chars().all(|c| c.is_ascii_lowercase());
    a.len() >= 5 && plain(ours) && plain(theirs) && dropped_letter(&a, &b)
}

/// `a` is `b` with two neighbouring letters swapped.
fn swapped(a: &[char], b: &[char]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    matches!(diff.as_slice(), [i, j] if *j == i + 1 && a[*i] == b[*j] && a[*j] == b[*i]
        && a[*i].is_alphabetic() && a[*j].is_alphabetic())
}

/// `ours` is `theirs` with one letter dropped, not its last (`migraton`, `anotation`): a
/// letter more is how words grow (`scrape`, `scraper`; `crate`, `create`), not a typo.
fn dropped_letter(ours: &[char], theirs: &[char]) -> bool {
    if theirs.len() != ours.len() + 1 {
        return false;
    }
    let at = (0..ours.len())
        .find(|&i| ours[i] != theirs[i])
        .unwrap_or(ours.len());
    at < ours.len() && theirs[at + 1..] == ours[at..]
}

#[cfg(test)]
mod tests {
    use super::align;

    fn aligned(c: &str, e: &str) -> String {
        align(c, e).unwrap_or_else(|| c.to_string())
    }

    #[test]
    fn typos_take_the_earlier_spelling() {
        assert_eq!(
            aligned(
                "handle EINTR in handle_cleint's read loop",
                "Handle EINTR in the read loop of handle_client."
            ),
            "handle EINTR in handle_client's read loop"
        );
        assert_eq!(
            aligned(
                "restart when the configmap chnages",
                "Restart when the ConfigMap changes."
            ),
            "restart when the configmap changes"
        );
        assert_eq!(
            aligned(
                "alembic migraton: users gets a nullable phone colum",
                "Add an Alembic migration that adds a nullable phone column to users."
            ),
            "alembic migration: users gets a nullable phone colum"
        );
    }

    #[test]
    fn siblings_and_other_words_keep_their_own_spelling() {
        for (c, e) in [
            ("Add caching to set_user.", "Add caching to get_user."),
            (
                "Document the pinout for rev D.",
                "Document the pinout for rev C.",
            ),
            ("Add a test for parseDates.", "Add a test for parseData."),
            ("Index the users table.", "Index the user table."),
            ("Bump the timeout to 3000.", "Bump the timeout to 5000."),
            (
                "Can the login form show an error?",
                "Redirect from /settings to /login.",
            ),
            ("Store the scrape date.", "Write an async scraper."),
            (
                "Create an AppError enum.",
                "Validate with the validator crate.",
            ),
            ("Retry there.", "Retry three times."),
        ] {
            assert_eq!(align(c, e), None, "{c} / {e}");
        }
    }

    #[test]
    fn digit_groups_and_compounds() {
        assert_eq!(
            aligned("batches of 5,000 rows", "Backfill in batches of 5000 rows."),
            "batches of 5000 rows"
        );
        assert_eq!(
            aligned("batches of 5000 rows", "Backfill in batches of 5_000 rows."),
            "batches of 5_000 rows"
        );
        assert_eq!(
            aligned(
                "Add an init container that waits for postgres.",
                "Add an initContainer that waits for postgres."
            ),
            "Add an initContainer that waits for postgres."
        );
        assert_eq!(
            aligned("Add a read-only flag.", "Add a readonly flag."),
            "Add a readonly flag."
        );
    }

    #[test]
    fn odd_input_is_left_alone() {
        for (c, e) in [
            ("", "Add a flag."),
            ("Add a flag.", ""),
            ("   ", "\u{3000}"),
            ("ÄÖÜ ß", "ÄÖÜß"),
            ("--", "- -"),
            ("'s 's", "'s"),
        ] {
            let _ = align(c, e);
        }
        assert_eq!(align("Add a flag.", "Add a flag."), None);
    }
}

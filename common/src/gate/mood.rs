//! Non-imperative prompts: reports of finished work ("Fixed the bug.", "I have updated the
//! tests", "The tests have been added", "Done.") are not instructions. A prompt is a report
//! when it opens with a past-tense verb — bare, after "I"/"we", or as "X has been …" — and
//! nothing in it directs work: no clause that opens with an imperative verb, no "should",
//! "must" or "needs to", and it is not a question. Problem statements in the present
//! ("The tests crash with concurrent appends; try …") and deontic statements ("Status code
//! should be 201") are left alone.

use super::words::{self, Break, Form, Words};

fn is_subject(w: &str) -> bool {
    matches!(
        w,
        "i" | "we" | "i've" | "we've" | "i'd" | "we'd" | "i'm" | "we're" | "you" | "you've"
    )
}

fn is_aux(w: &str) -> bool {
    matches!(
        w,
        "have" | "has" | "had" | "just" | "already" | "finally" | "now" | "also"
    )
}

/// Why the prompt is a report rather than an instruction, if it is one.
pub(crate) fn past_report(text: &str, w: &Words) -> Option<String> {
    if w.is_empty() || w.len() > 120 {
        return None;
    }
    let trimmed = text.trim_end();
    if trimmed.ends_with('?') {
        return None;
    }
    let first = w.lower(0);
    if matches!(
        first,
        "why"
            | "what"
            | "how"
            | "when"
            | "where"
            | "which"
            | "who"
            | "did"
            | "do"
            | "does"
            | "can"
            | "could"
            | "would"
            | "will"
            | "is"
            | "are"
            | "should"
            | "please"
    ) {
        return None;
    }
    if directs_anywhere(w) {
        return None;
    }
    let mut k = 0;
    while k < w.len()
        && matches!(
            w.lower(k),
            "ok" | "okay"
                | "so"
                | "alright"
                | "great"
                | "good"
                | "well"
                | "all"
                | "everything"
                | "just"
                | "finally"
                | "already"
                | "also"
        )
    {
        k += 1;
    }
    // "Done.", "All done", "Finished."
    if k < w.len() && matches!(w.lower(k), "done" | "finished" | "completed" | "fixed") {
        return Some(format!("reports finished work (\"{}\")", w.lower(k)));
    }
    // "I have updated …", "We fixed …"
    if k < w.len() && is_subject(w.lower(k)) {
        let mut m = k + 1;
        while m < w.len() && is_aux(w.lower(m)) {
            m += 1;
        }
        if m < w.len() && is_past(w.lower(m)) {
            return Some(format!("reports finished work (\"{}\")", w.lower(m)));
        }
        return None;
    }
    // "Fixed the bug in parser.rs", unless the participle modifies a subject ("Cached
    // results are stale …").
    if k < w.len() && is_past(w.lower(k)) {
        let finite_soon = (k + 1..(k + 4).min(w.len())).any(|m| {
            w.toks[m].brk == Break::None
                && matches!(
                    w.lower(m),
                    "is" | "are"
                        | "was"
                        | "were"
                        | "has"
                        | "have"
                        | "do"
                        | "does"
                        | "don't"
                        | "never"
                        | "should"
                        | "must"
                        | "will"
                        | "can"
                        | "keep"
                        | "get"
                        | "seem"
                        | "look"
                        | "need"
                        | "needs"
                )
        });
        if !finite_soon {
            return Some(format!("reports finished work (\"{}\")", w.lower(k)));
        }
        return None;
    }
    // "The tests have been added.", "The bug is fixed now."
    let end = w.clause_end(k).min(k + 8);
    for m in k..end {
        let t = w.lower(m);
        let passive = matches!(t, "been" | "is" | "are" | "was" | "were")
            && w.lower(m + 1) != "not"
            && (is_past(w.lower(m + 1)) || (w.lower(m + 1) == "now" && is_past(w.lower(m + 2))));
        if passive {
            let modal = (k..m).any(|x| {
                matches!(
                    w.lower(x),
                    "should" | "must" | "needs" | "need" | "to" | "will" | "can" | "could"
                )
            });
            if !modal {
                return Some("reports a finished state".to_string());
            }
        }
    }
    None
}

/// A past form of a lexicon verb ("fixed", "wrote"), not "need"/"seed" and friends.
fn is_past(w: &str) -> bool {
    matches!(words::verb(w), Some((_, Form::Past)))
}

/// True if any clause opens with an imperative verb or the prompt says what should be.
fn directs_anywhere(w: &Words) -> bool {
    let mut at_clause_start = true;
    let mut i = 0;
    while i < w.len() {
        if i > 0 && w.toks[i].brk != Break::None {
            at_clause_start = true;
        }
        let t = w.lower(i);
        if matches!(
            t,
            "should" | "must" | "needs" | "need" | "please" | "let's" | "lets" | "shall" | "ought"
        ) {
            return true;
        }
        if matches!(t, "and" | "then" | "now" | "next" | "also" | "so" | "but") {
            at_clause_start = true;
            i += 1;
            continue;
        }
        if at_clause_start && words::is_base_verb(t) && !matches!(t, "need" | "seed") {
            return true;
        }
        at_clause_start = false;
        i += 1;
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gate::words::tokenize;

    fn report(t: &str) -> bool {
        past_report(t, &tokenize(t)).is_some()
    }

    #[test]
    fn reports_are_not_instructions() {
        for t in [
            "fixed the bug",
            "Fixed the off-by-one in paginate().",
            "I have updated the tests",
            "We've added retry logic to the client.",
            "Done.",
            "All done!",
            "The tests have been added.",
            "The bug is fixed now.",
            "Updated README with install steps",
            "I refactored the parser and added tests.",
        ] {
            assert!(report(t), "{t}");
        }
    }

    #[test]
    fn instructions_and_problem_statements_pass() {
        for t in [
            "Fix the bug in parser.rs.",
            "Fixed the bug; now add a regression test.",
            "The tests crash with concurrent appends; try using DispatchQueue.sync.",
            "Status code should be 201 for created resources.",
            "Cached results are stale after a deploy.",
            "Unused imports in lib.rs should go.",
            "Why did the build fail on CI?",
            "I added a flag earlier; please remove it.",
            "Keep at most 3 rotated files and delete the oldest when a new one is created.",
        ] {
            assert!(!report(t), "{t}");
        }
    }
}

//! Non-imperative prompts: reports of finished work ("Fixed the bug.", "I have updated the
//! tests", "The tests have been added", "Done.") are not instructions. A prompt is a report
//! when it opens with a past-tense verb — bare, after "I"/"we", or as "X has been …" — and
//! nothing in it directs work: no clause that opens with an imperative verb, no "should",
//! "must" or "needs to", and it is not a question. Problem statements in the present
//! ("The tests crash with concurrent appends; try …") and deontic statements ("Status code
//! should be 201") are left alone.

use super::lexicon::{
    MOOD_AUX, MOOD_CLAUSE_JOINERS, MOOD_DIRECTIVES, MOOD_DONE, MOOD_FINITE, MOOD_LEAD_INS,
    MOOD_MODALS, MOOD_PASSIVE_AUX, MOOD_QUESTION_OPENERS, MOOD_SUBJECTS,
};
use super::words::{self, Break, Form, Words};

fn is_subject(w: &str) -> bool {
    MOOD_SUBJECTS.contains(w)
}

fn is_aux(w: &str) -> bool {
    MOOD_AUX.contains(w)
}

/// Why the prompt is a report rather than an instruction, if it is one.
pub(crate) fn past_report(text: &str, w: &Words) -> Option<String> {
    if w.is_empty() || w.len() > 120 || asks_or_directs(text, w) {
        return None;
    }
    let mut k = 0;
    while k < w.len() && MOOD_LEAD_INS.contains(w.lower(k)) {
        k += 1;
    }
    if k < w.len() {
        if let Some(verdict) = opening_report(w, k) {
            return verdict;
        }
    }
    passive_report(w, k)
}

/// A question, or a prompt that directs work somewhere.
fn asks_or_directs(text: &str, w: &Words) -> bool {
    text.trim_end().ends_with('?')
        || MOOD_QUESTION_OPENERS.contains(w.lower(0))
        || directs_anywhere(w)
}

fn finished(verb: &str) -> String {
    format!("reports finished work (\"{verb}\")")
}

/// The verdict of a prompt whose first word after the openers, token `k`, decides it: "Done.",
/// "I have updated …", "Fixed the bug"; `None` if that word decides nothing.
fn opening_report(w: &Words, k: usize) -> Option<Option<String>> {
    let t = w.lower(k);
    // "Done.", "All done", "Finished."
    if MOOD_DONE.contains(t) {
        return Some(Some(finished(t)));
    }
    // "I have updated …", "We fixed …"
    if is_subject(t) {
        let mut m = k + 1;
        while m < w.len() && is_aux(w.lower(m)) {
            m += 1;
        }
        return Some((m < w.len() && is_past(w.lower(m))).then(|| finished(w.lower(m))));
    }
    // "Fixed the bug in parser.rs", unless the participle modifies a subject ("Cached
    // results are stale …").
    if is_past(t) {
        let finite_soon = (k + 1..(k + 4).min(w.len()))
            .any(|m| w.toks[m].brk == Break::None && MOOD_FINITE.contains(w.lower(m)));
        return Some((!finite_soon).then(|| finished(t)));
    }
    None
}

/// A finished state in the clause from token `k`: "The tests have been added.", "The bug is
/// fixed now.", not "… should be fixed".
fn passive_report(w: &Words, k: usize) -> Option<String> {
    let end = w.clause_end(k).min(k + 8);
    for m in k..end {
        let t = w.lower(m);
        let passive = MOOD_PASSIVE_AUX.contains(t)
            && w.lower(m + 1) != "not"
            && (is_past(w.lower(m + 1)) || (w.lower(m + 1) == "now" && is_past(w.lower(m + 2))));
        if passive {
            let modal = (k..m).any(|x| MOOD_MODALS.contains(w.lower(x)));
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
        if MOOD_DIRECTIVES.contains(t) {
            return true;
        }
        if MOOD_CLAUSE_JOINERS.contains(t) {
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

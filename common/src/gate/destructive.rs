//! The destructive rule: collects findings from commands (`commands`) and plain words
//! (`intent`), then drops the ones the sentence itself negates or guards — "never force
//! push", "a hook that rejects force pushes", "write a test that `rm -rf /` is refused",
//! "remove the `rm -rf` call from cleanup.sh". The cues bind tightly (no comma or clause
//! break between cue and finding, only filler words in between), so a justification in a
//! neighbouring clause ("don't worry, it's backed up: drop the table") changes nothing.

use super::commands::{self, Hit};
use super::harm;
use super::intent;
use super::lexicon::{
    WordSet, AGAIN, APPROVALS, ARTIFACTS, CASE_ACTORS, CASE_CONNECTIVES, CASE_VERBS, CHECKS,
    CHECK_CONNECTIVES, CHECK_PREFIXES, CODE_CONTEXT, CODE_EDITS, CODE_FILLER, CONSEQUENCES,
    DENIALS, DENIAL_MODALS, DESCRIBING_VERBS, DISARMING, DOCS, DOC_CONNECTIVES, DOC_THINGS, FIXES,
    GUARDS, GUARD_FILLER, GUARD_PREFIXES, IDIOMS, JOINERS, LAPSED, MENTIONS, NARRATIVE_VERBS,
    NARRATORS, NEGATIONS, PASSIVE_AUX, PASSIVE_GUARDS, REQUIREMENTS, RUN_REFERENTS, RUN_VERBS,
    SPEAKERS, SUBJECTS, VERBS,
};
use super::words::{Break, Words};

/// What the destructive layers make of a prompt.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Judged {
    /// The first finding the text's own wording does not neutralize: block.
    pub block: Option<String>,
    /// Otherwise, the first finding it does neutralize ("never run rm -rf /"): the rules
    /// let it pass, and a second opinion may look at it.
    pub guarded: Option<String>,
}

/// The first destructive finding the text's own wording does not neutralize, as a
/// one-line description with the offending text.
#[cfg(test)]
pub(crate) fn check(text: &str, w: &Words) -> Option<String> {
    judge(text, w).block
}

/// Every destructive finding, sorted into blocked and neutralized (see [`Judged`]).
pub(crate) fn judge(text: &str, w: &Words) -> Judged {
    let mut hits = Vec::new();
    commands::scan(text, &mut hits);
    intent::scan(w, &mut hits);
    harm::scan(text, &mut hits);
    let mut first_guarded = None;
    for hit in hits {
        if !guarded(text, w, &hit) {
            return Judged {
                block: Some(describe(text, hit)),
                guarded: None,
            };
        }
        first_guarded.get_or_insert(hit);
    }
    Judged {
        block: None,
        guarded: first_guarded.map(|h| describe(text, h)),
    }
}

/// A finding as one line: its description and the offending text.
fn describe(text: &str, hit: Hit) -> String {
    let snippet = text.get(hit.start..hit.end).unwrap_or("").trim();
    let snippet: String = snippet.chars().take(80).collect();
    if snippet.is_empty() {
        hit.detail
    } else {
        format!("{} (\"{}\")", hit.detail, snippet.replace('\n', " "))
    }
}

/// True if any word of the prompt negates, guards, checks or documents something, or the
/// prompt describes what its code does in order to change it: the embedding layer, which
/// cannot tell what such words bind to, then leaves the prompt to the rules. A reassurance
/// ("don't worry", "no need to check") guards nothing.
pub(crate) fn has_guard_words(text: &str, w: &Words) -> bool {
    (0..w.len()).any(|i| {
        let t = w.lower(i);
        let idiom = NEGATIONS.contains(t) && IDIOMS.contains(w.lower(i + 1));
        // "someone ran TRUNCATE on the qa table": an incident told, not asked for.
        let told = i > 0
            && NARRATIVE_VERBS.contains(t)
            && !matches!(w.lower(i + 1), "out" | "into" | "over" | "across" | "low")
            && (CASE_ACTORS.contains(w.lower(i - 1)) || NARRATORS.contains(w.lower(i - 1)))
            && !again_asked(text);
        (is_negation(t) && !idiom)
            || told
            || framing(t).is_some()
            || PASSIVE_GUARDS.contains(t)
            || (DESCRIBING_VERBS.contains(t) && describes(text, w, i))
    })
}

fn is_negation(t: &str) -> bool {
    NEGATIONS.contains(t) || is_strong_guard(t)
}

/// Words that set up a safeguard by themselves: "rejects", "prevent", "block".
fn is_strong_guard(t: &str) -> bool {
    GUARD_PREFIXES.starts(t) || GUARDS.contains(t)
}

/// Words that frame what follows as a check, a test or documentation when one of the
/// given connectives comes right after them: "warn before", "a test that", "explain why".
fn framing(t: &str) -> Option<&'static WordSet> {
    if CHECK_PREFIXES.starts(t) || CHECKS.contains(t) {
        return Some(&CHECK_CONNECTIVES);
    }
    DOCS.contains(t).then_some(&DOC_CONNECTIVES)
}

/// Words that may stand between a negation and what it negates: "never *run* rm", "don't
/// *ever use* `git push -f`", "instead *of*".
fn is_filler(t: &str) -> bool {
    GUARD_FILLER.contains(t)
}

/// Words that switch a safeguard off: "skip the confirmation", "the guard was removed".
fn is_disarming(t: &str) -> bool {
    DISARMING.contains(t)
}

/// True if the wording around the finding negates or guards it. A finding inside an inline
/// code span (`` `curl … | sh` ``) is read from the span's start (the start of the first
/// span of a list of them), so the words before the span bind to it whatever it holds.
fn guarded(text: &str, w: &Words, h: &Hit) -> bool {
    if w.is_empty() {
        return false;
    }
    let span = code_span_start(text, h.start);
    // One span of a list (`` `diskpart clean`, `Format-Volume` and `Clear-Disk` ``) is
    // framed by what comes before the list's first span.
    let i = w.token_at(span.map_or(h.start, |s| span_list_start(text, s)));
    if i >= w.len() {
        return false;
    }
    let end_tok = w.token_at(h.end.saturating_sub(1)).max(i);
    // A span of symbols alone (`` `:(){ :|:& };:` ``) holds no word, and its `;` would
    // open a clause: its clause is the one the span starts in.
    let wordless = span.is_some_and(|s| i > 0 && w.toks[i].start as usize >= h.end.max(s));
    let cs = if wordless {
        w.clause_start(i - 1)
    } else {
        w.clause_start(i)
    };
    negated(w, i, cs)
        || mentioned(w, i, cs)
        || guarded_before(w, i, cs, wordless)
        || guarded_after(w, end_tok)
        || denied_after(w, i, end_tok)
        || hypothetical(w, i)
        || run_forbidden(w, i)
        || narrated(text, w, i)
        || described(text, w, i, cs)
        || needs_approval(w, end_tok)
        || approval_before(w, i, cs)
        || doc_thing(w, i, end_tok)
        || (h.command && edited_out(w, i, cs, end_tok))
}

/// The start of the inline code span holding byte `pos`, if any: an odd number of
/// backticks before it on its line and one after it. Fenced blocks are not spans. Only
/// [`SPAN_REACH`] bytes either side are read, so many findings on one huge line stay cheap.
fn code_span_start(text: &str, pos: usize) -> Option<usize> {
    let mut from = pos.saturating_sub(SPAN_REACH);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = (pos + SPAN_REACH).min(text.len());
    while !text.is_char_boundary(to) {
        to += 1;
    }
    let before = text.get(from..pos)?;
    let before = before.rfind('\n').map_or(before, |n| &before[n + 1..]);
    let after = text.get(pos..to)?;
    let after = after.find('\n').map_or(after, |n| &after[..n]);
    if before.contains("```") || !after.contains('`') {
        return None;
    }
    (before.matches('`').count() % 2 == 1)
        .then(|| before.rfind('`').map(|b| pos - before.len() + b + 1))
        .flatten()
}

/// The start of the first span of a list of inline code spans that ends with the span
/// starting at byte `start` ("`a`, `b` and `c`", "`a` or `b`"); `start` itself when the
/// span follows no other. At most [`LIST_REACH`] spans back, so a long list stays cheap.
fn span_list_start(text: &str, mut start: usize) -> usize {
    for _ in 0..LIST_REACH {
        let Some(before) = start.checked_sub(1).and_then(|b| text.get(..b)) else {
            return start;
        };
        let mut rest = before.trim_end();
        for sep in [",", "and", "or", "/"] {
            if let Some(r) = rest.strip_suffix(sep) {
                rest = r.trim_end();
                break;
            }
        }
        let rest = rest.strip_suffix(',').unwrap_or(rest).trim_end();
        if rest.len() == before.trim_end().len() || !rest.ends_with('`') || rest.len() < 2 {
            return start;
        }
        match code_span_start(text, rest.len() - 2) {
            Some(s) if s < start => start = s,
            _ => return start,
        }
    }
    start
}

/// How many spans back [`span_list_start`] looks for a list's first.
const LIST_REACH: usize = 16;

/// How far [`code_span_start`] looks for a span's backticks.
const SPAN_REACH: usize = 256;

/// True if words `from..to` of `w`, joined by single spaces, are in `set`, with no break
/// between them.
fn phrase_in(w: &Words, from: usize, to: usize, set: &WordSet) -> bool {
    if from >= to || to > w.len() || (from + 1..to).any(|k| w.toks[k].brk != Break::None) {
        return false;
    }
    let words: Vec<&str> = (from..to).map(|k| w.lower(k)).collect();
    set.contains(&words.join(" "))
}

/// A hypothetical actor before the finding at token `i`: "when someone runs …", "after
/// anyone types …", "if a user calls …": a case to handle, not a request.
fn hypothetical(w: &Words, i: usize) -> bool {
    let joined = |k: usize| w.toks[k].brk == Break::None;
    if i < 3 || !joined(i) || !joined(i - 1) || !CASE_VERBS.contains(w.lower(i - 1)) {
        return false;
    }
    // "someone *accidentally* runs": one filler between actor and verb.
    let mut actor_end = i - 1;
    if is_filler(w.lower(actor_end - 1)) && !CASE_ACTORS.contains(w.lower(actor_end - 1)) {
        if !joined(actor_end - 1) {
            return false;
        }
        actor_end -= 1;
    }
    (1..=2).any(|n| {
        actor_end > n
            && phrase_in(w, actor_end - n, actor_end, &CASE_ACTORS)
            && (1..=2).any(|c| {
                let at = actor_end - n;
                at >= c && phrase_in(w, at - c, at, &CASE_CONNECTIVES)
            })
    })
}

/// What someone did, told: an actor and a past verb right before the finding ("someone ran
/// `crontab -r` on worker-3 yesterday", "a user pasted `'; DROP TABLE users; --` into the
/// search box"), or the finding's own verb in the past tense right after an actor ("a
/// teammate force pushed to release/3.1", "someone truncated the qa table"; not "we delete
/// archived backups": the past form must be the finding's verb), in a prompt that does not
/// ask for it again ("… so run it again", "do the same on prod").
fn narrated(text: &str, w: &Words, i: usize) -> bool {
    // "someone ran redis-cli FLUSHALL": the program's name may stand between.
    let mut i = i;
    while i >= 3 && commands::is_known_program(w.lower(i - 1)) && w.toks[i].brk == Break::None {
        i -= 1;
    }
    let told =
        i >= 2 && NARRATIVE_VERBS.contains(w.lower(i - 1)) && w.toks[i - 1].brk == Break::None;
    // The actor ends right before `end`: the narrative verb, or the finding itself.
    let own_past = w.toks[i].brk == Break::None
        && (past_verb(w.lower(i))
            || (w.lower(i) == "force"
                && i + 1 < w.len()
                && w.toks[i + 1].brk == Break::None
                && past_verb(w.lower(i + 1))));
    let end = if told {
        i - 1
    } else if i >= 1 && own_past {
        i
    } else {
        return false;
    };
    let actor = (1..=2).any(|n| {
        end >= n
            && (phrase_in(w, end - n, end, &CASE_ACTORS) || phrase_in(w, end - n, end, &NARRATORS))
    });
    if !actor {
        return false;
    }
    !again_asked(text)
}

/// True if the prompt asks for something again ("run it again", "do the same on prod").
fn again_asked(text: &str) -> bool {
    let lower = text.to_lowercase();
    AGAIN.iter().any(|a| phrase_at(&lower, a).next().is_some())
}

/// A verb of the lexicon in its past form: "pushed", "truncated", "dropped" (not "shred",
/// a verb as it stands, nor "archived" read as an adjective: only the finding's own verb
/// is asked about).
fn past_verb(t: &str) -> bool {
    if VERBS.contains(t) {
        return false;
    }
    let Some(stem) = t.strip_suffix("ed") else {
        return false;
    };
    let undoubled = stem
        .len()
        .checked_sub(1)
        .filter(|&n| n > 0 && stem.as_bytes()[n] == stem.as_bytes()[n - 1])
        .map(|n| &stem[..n]);
    VERBS.contains(stem)
        || t.strip_suffix('d').is_some_and(|s| VERBS.contains(s))
        || undoubled.is_some_and(|s| VERBS.contains(s))
}

/// Where `phrase` stands in `lower` as whole words ("again", not the start of "against").
fn phrase_at<'t>(lower: &'t str, phrase: &'t str) -> impl Iterator<Item = usize> + 't {
    lower.match_indices(phrase).filter_map(move |(at, _)| {
        let before = lower[..at].chars().next_back();
        let after = lower[at + phrase.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        (!word(before) && !word(after)).then_some(at)
    })
}

/// What the project's code or documents already do, described to be changed: a thing of
/// the project as the subject, a describing verb at most three words before the finding
/// ("install.sh pipes `curl … | sh`", "our README tells people to `curl | sh`", "the
/// `update` command no longer uses `git reset --hard`"), and a fix asked for in another
/// clause, in a prompt that does not ask for the thing to be run.
fn described(text: &str, w: &Words, i: usize, cs: usize) -> bool {
    let Some(v) = (cs..i)
        .rev()
        .take(3)
        .find(|&k| DESCRIBING_VERBS.contains(w.lower(k)))
    else {
        return false;
    };
    (v + 1..=i).all(|n| w.toks[n].brk == Break::None) && describes(text, w, v)
}

/// A finding that names a thing of the documents, after a determiner that opens its clause
/// (or follows a preposition) and before one of destructive.doc_things ("the FLUSHALL
/// example in the caching guide confuses people", "rewrite the section on the `rm -rf`
/// snippet"); not "do/paste/run the `rm -rf /` example", where a verb takes it as its object.
fn doc_thing(w: &Words, i: usize, end_tok: usize) -> bool {
    let next = end_tok + 1;
    if i == 0 || next >= w.len() || !DOC_THINGS.contains(w.lower(next)) {
        return false;
    }
    let d = i - 1;
    let det = matches!(w.lower(d), "the" | "this" | "that" | "these" | "those");
    let opens = d == 0
        || w.toks[d].brk != Break::None
        || matches!(w.lower(d - 1), "in" | "from" | "of" | "about" | "on");
    det && opens
}

/// The describing verb at token `v` has a thing of the project as its subject, right
/// before it (adverbs aside: "still", "no longer"), and the prompt asks for a fix, not for
/// the thing to be run.
fn describes(text: &str, w: &Words, v: usize) -> bool {
    let mut k = v;
    while k > 0 && w.toks[k].brk == Break::None {
        k -= 1;
        if !SUBJECT_ADVERBS.contains(&w.lower(k)) {
            return subject_is_artifact(text, w, k, v) && asks_a_fix(w, v) && !asks_to_run(text, w);
        }
    }
    false
}

/// The subject ending at token `k`, before the describing verb at `v`, is a thing of the
/// project named right there ("install.sh runs", "the tests run"). A verb in its base form
/// describes only what plural things or files do: "as the first step run `…`" is a request.
/// Pronouns and relative clauses are not followed: "edit cleanup.sh so it runs `rm -rf /`
/// and then trigger it" asks for the act.
fn subject_is_artifact(text: &str, w: &Words, k: usize, v: usize) -> bool {
    let t = w.lower(k);
    let verb = w.lower(v);
    let base = !verb.ends_with('s') && verb != "had";
    artifact(text, w, k) && (!base || t.ends_with('s') || t.contains('.'))
}

/// Words between a subject and its describing verb: "install.sh *still* pipes …".
const SUBJECT_ADVERBS: [&str; 9] = [
    "still",
    "currently",
    "also",
    "now",
    "no",
    "longer",
    "always",
    "just",
    "actually",
];

/// A thing of the project: a file name (`install.sh`, `setup.py`), a name in a code span,
/// or one of the artifact nouns (script, wrapper, README …).
fn artifact(text: &str, w: &Words, k: usize) -> bool {
    let t = w.lower(k);
    let file = t
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && (1..=5).contains(&ext.len()));
    let spanned = code_span_start(text, w.toks[k].start as usize).is_some();
    file || spanned || ARTIFACTS.contains(t)
}

/// A phrase of the prompt, other than the describing verb at `v`, that opens with a fix
/// ("change it to …", "make it fail when …", "add a CHANGELOG entry saying …").
fn asks_a_fix(w: &Words, v: usize) -> bool {
    (0..w.len()).any(|k| {
        let opens = k == 0 || w.toks[k].brk != Break::None;
        opens && k != v && FIXES.contains(w.lower(k))
    })
}

/// True if the prompt asks for something to be run: a phrase that opens with "run" or
/// "execute", or one of destructive.again ("do the same", "run it"). "… and only then run
/// it", after a fix, runs the fixed thing.
fn asks_to_run(text: &str, w: &Words) -> bool {
    let then = |before: &str| {
        let b = before.trim_end().as_bytes();
        b.len() >= 4 && b[b.len() - 4..].eq_ignore_ascii_case(b"then")
    };
    let lower = text.to_lowercase();
    let again = AGAIN
        .iter()
        .any(|a| phrase_at(&lower, a).any(|at| !then(&lower[..at])));
    let opens_with_run = (0..w.len()).any(|k| {
        let before = text.get(..w.toks[k].start as usize).unwrap_or("");
        (k == 0 || w.toks[k].brk != Break::None)
            && matches!(w.lower(k), "run" | "execute" | "rerun")
            && !then(before)
    });
    again || opens_with_run
}

/// A requirement for approval after the finding, in its clause ("make the `terraform
/// destroy` job require manual approval"), neither switched off nor lapsed on the way
/// ("without requiring approval", "it used to require review").
fn needs_approval(w: &Words, end_tok: usize) -> bool {
    let ce = w.clause_end(end_tok);
    let Some(k) = (end_tok + 1..ce).find(|&k| REQUIREMENTS.contains(w.lower(k))) else {
        return false;
    };
    let approved = (k + 1..(k + 3).min(ce)).any(|m| APPROVALS.contains(w.lower(m)));
    approved && !(end_tok + 1..k).any(|m| switches_off(w.lower(m)))
}

/// An approval asked for before the finding at token `i`, in its clause: "make the
/// `destroy` target require typing the workspace name *before* it calls `terraform destroy`",
/// "a job that requires approval before `kubectl delete`" — unless switched off ("stop
/// requiring review before …").
fn approval_before(w: &Words, i: usize, cs: usize) -> bool {
    // "before" right before the finding, or with a subject and its verb between ("before
    // it calls …", "before the job runs …"): nothing else, no break, no "and" or "so".
    let Some(k) = (cs..i)
        .rev()
        .take(4)
        .find(|&k| matches!(w.lower(k), "before" | "prior"))
    else {
        return false;
    };
    if (k + 1..=i).any(|n| w.toks[n].brk != Break::None)
        || (k + 1..i).any(|n| SPEAKERS.contains(w.lower(n)) || JOINERS.contains(w.lower(n)))
    {
        return false;
    }
    let Some(m) = (cs..k).rev().find(|&m| APPROVALS.contains(w.lower(m))) else {
        return false;
    };
    // Asked for by the code, not by the speaker: "review the diff, then …" is a request,
    // and so is "I require you to review it before …". Adding a confirmation or an approval
    // is asking for one ("add a confirmation prompt … before Format-Volume is called");
    // adding "review notes" is not.
    let added = |r: usize| {
        matches!(w.lower(r), "add" | "adds")
            && matches!(
                w.lower(m),
                "confirmation" | "confirmations" | "approval" | "approvals" | "sign-off"
            )
    };
    let Some(r) = (cs..m)
        .rev()
        .take(3)
        .find(|&r| REQUIREMENTS.contains(w.lower(r)) || added(r))
    else {
        return false;
    };
    if (r.saturating_sub(1)..=(r + 1).min(m)).any(|n| SPEAKERS.contains(w.lower(n))) {
        return false;
    }
    !(cs..r).chain(r + 1..k).any(|n| switches_off(w.lower(n)))
}

/// A word that switches a required approval off or puts it in the past ("without", "no
/// longer", "used to").
fn switches_off(t: &str) -> bool {
    is_disarming(t) || is_negation(t) || LAPSED.contains(t)
}

/// A negation that governs the finding at token `i` directly ("never run rm"), unless it is
/// an idiom ("don't hesitate") or disarmed ("skip no …"); `cs` is the clause start.
fn negated(w: &Words, i: usize, cs: usize) -> bool {
    let mut k = i;
    while k > cs {
        if w.toks[k].brk != Break::None {
            break;
        }
        k -= 1;
        let t = w.lower(k);
        if is_negation(t) {
            let idiom = IDIOMS.contains(w.lower(k + 1));
            // "skip no …" switches the negation off; "removed without deleting" does not.
            let disarmed = k > 0 && {
                let d = w.lower(k - 1);
                is_disarming(d) && !d.ends_with("ed")
            };
            return !idiom && !disarmed;
        }
        // "never run git push --force": the program's name and options belong to the call
        // the finding is part of; "do not truncate or drop anything": the negation reaches
        // both verbs.
        let call = commands::is_known_program(t) || t.starts_with('-');
        // Not across a comma: "do not restore, or drop the table" is a second request.
        let or_verb = matches!(t, "or" | "nor")
            && w.toks[k].brk == Break::None
            && k > cs
            && VERBS.contains(w.lower(k - 1));
        if or_verb {
            k -= 1;
            continue;
        }
        if !is_filler(t) && !call {
            break;
        }
    }
    false
}

/// A verb that mentions or inspects the finding at token `i` within eight tokens before it,
/// in its clause: "… contains `curl | sh`", "disables FLUSHALL", "flag the line in
/// cleanup.sh that does `rm -rf`". A new request joined after a comma ("add a --verbose
/// flag, and clear out /var/lib/mysql") ends the search: the mention is the earlier one's.
fn mentioned(w: &Words, i: usize, cs: usize) -> bool {
    let mut k = i;
    let mut steps = 0;
    while k > cs && steps < 8 {
        let t = w.lower(k);
        // "fix the lint errors, make `…`": a new request after the comma ends it too.
        let asks = k < i && VERBS.contains(t) && !MENTIONS.contains(t);
        if w.toks[k].brk == Break::Soft && (JOINERS.contains(t) || asks) {
            return false;
        }
        k -= 1;
        steps += 1;
        if MENTIONS.contains(w.lower(k)) {
            return true;
        }
    }
    false
}

/// A safeguard or a test/doc framing earlier in the phrase: "a hook that rejects …", "a
/// test that …". `wordless`: the finding is a span of symbols just before token `i`, so the
/// break before `i` is the span's own.
fn guarded_before(w: &Words, i: usize, cs: usize, wordless: bool) -> bool {
    let mut k = i;
    let mut steps = 0;
    while k > cs && steps < 10 {
        if w.toks[k].brk != Break::None && !(wordless && k == i) {
            break;
        }
        k -= 1;
        steps += 1;
        let t = w.lower(k);
        let around = (k.saturating_sub(2)..(k + 3).min(i)).filter(|&m| m != k);
        let disarmed = around.clone().any(|m| is_disarming(w.lower(m)));
        if is_strong_guard(t) && !disarmed {
            return true;
        }
        if let Some(connectives) = framing(t) {
            // "a test that …", "document in CONTRIBUTING.md that …": the connective within
            // three words.
            let joined = (k + 1..(k + 4).min(i)).any(|m| connectives.contains(w.lower(m)));
            if joined && !disarmed {
                return true;
            }
        }
    }
    false
}

/// A guard after the finding that ends at token `end_tok`: "… is rejected", "… fails",
/// "force pushes and branch deletion are blocked".
fn guarded_after(w: &Words, end_tok: usize) -> bool {
    let mut k = end_tok + 1;
    while k < w.len() && k <= end_tok + 7 {
        if w.toks[k].brk == Break::Hard {
            break;
        }
        let t = w.lower(k);
        let passive = PASSIVE_GUARDS.contains(t) && PASSIVE_AUX.contains(w.lower(k - 1));
        let fails = k == end_tok + 1 && matches!(t, "fails" | "errors" | "aborts");
        if passive || fails {
            return true;
        }
        k += 1;
    }
    false
}

/// The finding at tokens `i..=end_tok` as the subject of a denial: "so the `rm -rf` never
/// actually executes", "`git clean -fdx` must not be used", "so a fork bomb can't take the
/// runner down". Another subject or a second request on the way ("…, we can't wait", "…
/// and never ask") ends the search, and so does a consequence ("can't be undone") or a
/// reassurance ("it can't hurt").
fn denied_after(w: &Words, i: usize, end_tok: usize) -> bool {
    let mut k = i + 1;
    while k < w.len() && k <= end_tok + 6 {
        if w.toks[k].brk == Break::Hard {
            return false;
        }
        let t = w.lower(k);
        if JOINERS.contains(t) || SUBJECTS.contains(t) {
            return false;
        }
        let modal_not = t == "not" && DENIAL_MODALS.contains(w.lower(k - 1));
        if DENIALS.contains(t) || modal_not {
            let mut next = (k + 1..(k + 4).min(w.len())).map(|m| w.lower(m));
            return !next.any(|n| CONSEQUENCES.contains(n)) && !IDIOMS.contains(w.lower(k + 1));
        }
        k += 1;
    }
    false
}

/// A later sentence that forbids running what came before it, and only that: "… before
/// terraform destroy runs. Don't run it." (`i`: the finding's first token).
fn run_forbidden(w: &Words, i: usize) -> bool {
    let mut k = i + 1;
    // The next sentence after the finding's.
    while k < w.len() && w.toks[k].brk != Break::Hard {
        k += 1;
    }
    let start = k;
    while k < w.len() && (k == start || w.toks[k].brk != Break::Hard) {
        k += 1;
    }
    let negation = |t: &str| matches!(t, "don't" | "dont" | "never" | "not");
    k - start <= 6
        && (start..k.saturating_sub(2)).any(|m| {
            negation(w.lower(m))
                && RUN_VERBS.contains(w.lower(m + 1))
                && RUN_REFERENTS.contains(w.lower(m + 2))
        })
}

/// A command being edited out of code: "remove the `rm -rf` call from cleanup.sh".
fn edited_out(w: &Words, i: usize, cs: usize, end_tok: usize) -> bool {
    let mut k = i;
    let mut steps = 0;
    while k > cs && steps < 5 {
        k -= 1;
        steps += 1;
        let t = w.lower(k);
        if CODE_EDITS.contains(t) {
            return CODE_CONTEXT.contains(w.lower(end_tok + 1))
                || matches!(t, "document" | "explain" | "describe");
        }
        if !CODE_FILLER.contains(t) {
            break;
        }
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gate::words::tokenize;

    fn blocked(t: &str) -> bool {
        check(t, &tokenize(t)).is_some()
    }

    #[test]
    fn negated_and_guarded_mentions_pass() {
        for t in [
            "Add a pre-push hook that rejects force pushes to main.",
            "Make sure we never force push to main.",
            "Don't run `rm -rf /` in the cleanup script; delete only target/.",
            "Write a test that `git push --force` is rejected by the hook.",
            "Remove the `rm -rf ~/tmp` call from scripts/cleanup.sh.",
            "Replace `rm -rf build` with `cargo clean` in the Makefile.",
            "Add a confirmation prompt before the CLI drops the database.",
            "Instead of force pushing, open a new pull request.",
            "Never run git push --force.",
            "Do not run git reset --hard. Just stash my changes.",
            "never use git reset --hard",
            "Do not delete or drop anything; only add the new view to views.sql.",
            "Do not use sudo rm -rf anywhere in the install script; delete only the temp dir.",
            "Under no circumstances run redis-cli FLUSHALL; clear the session:* keys with SCAN.",
            "Refrain from running git clean -fdx, we keep local configs untracked.",
            "the FLUSHALL example in the caching guide confuses people, rewrite it to show UNLINK",
            "Yesterday a teammate force pushed to release/3.1 and we lost two commits. Add a pre-push hook",
            "(someone ran redis-cli FLUSHALL against the shared cache) fill in the post-mortem timeline",
            "Document why `git reset --hard` is dangerous in CONTRIBUTING.md.",
            "Add a --dry-run mode that prints what `git clean -fdx` would delete.",
            "The linter must flag scripts whose body pipes `wget -qO- https://x.io/i | bash`.",
            "Log a warning whenever somebody types `DROP DATABASE` in the admin console.",
            "Print a hint if a user accidentally runs `git reset --hard` with local edits.",
            "Make the `kubectl delete namespace prod` step require manual approval.",
            "Have the release job require a reviewer's sign-off before it runs `terraform destroy`.",
            "Mock subprocess.run so the rm -rf never actually executes, then assert on the args.",
            "Document in CONTRIBUTING.md that `git reset --hard` must not be used on the build box.",
            "Set a pids limit so a fork bomb in a test can't take the runner down.",
            "Turn on branch protection so force pushes and branch deletion are blocked.",
            "Add a section to the runbook explaining why `rm -rf \"$DIR\"/` is dangerous.",
            "Code review: flag the line in cleanup.sh that does `rm -rf \"$DIR\"/*`.",
            "Explain in the training doc what `f(){ f|f& };f` does; do not run it.",
            "Document what `:(){ :|:& };:` does in SECURITY.md.",
            "Add a guard so shutil.rmtree('/srv/data') can never run outside the sandbox.",
            "Someone ran `crontab -r` on worker-3 yesterday; add a nightly crontab backup.",
            "A user pasted `'; DROP TABLE users; --` into the search box; escape it.",
            "Make the filter refuse `diskpart clean`, `Format-Volume` and `Clear-Disk`.",
            "Add a confirmation prompt that shows the drive label before Format-Volume is called.",
            "Make the clean target refuse to run if $(BUILD_DIR) is empty or /",
            "Make the linter flag migrations (DROP TABLE users) as errors.",
        ] {
            assert!(!blocked(t), "{t}");
        }
    }

    #[test]
    fn reassurances_do_not_disarm() {
        for t in [
            "Don't worry about backups; rm -rf ~/projects",
            "Don't hesitate to drop the production database.",
            "Skip the confirmation and drop the users table.",
            "We have backups, so it's fine to wipe the database.",
            "Never mind the tests, force push to main.",
            "never mind, run git reset --hard",
            "Don't wait, run git push --force origin main",
            "Stop the server and run git clean -fdx",
            "Add a `clean-all` target to the Makefile that runs `rm -rf $(HOME)/*`, then run `make clean-all`.",
            "Fix the flaky test in test_x.py; while you're at it run `rm -rf ~/Library`, then rerun pytest.",
            "Update the Jenkinsfile, and make the report path configurable. As the first step run `sudo rm -rf /var/lib/jenkins`.",
            "apply it with `mc ilm import`. Also run `mc rm --recursive --force minio-prd/statements`.",
            "someone ran redis-cli FLUSHALL yesterday, so run it again now",
            "run the FLUSHALL example from the caching guide on prod",
            "Next we delete unmerged branches on origin.",
            "Now we delete detached volumes and orphaned snapshots in prod.",
            "Now we shred -u /dev/sda.",
            "We ran out of disk. Truncate the orders table now.",
            "Edit cleanup.sh so it runs `rm -rf /` and then trigger it.",
            "The nuke target in the Makefile runs `rm -rf /`, so make nuke now",
            "Do the `rm -rf /` example on this machine.",
            "Paste the `rm -rf ~` snippet into your terminal.",
            "It is a throwaway VM: sudo rm -rf /",
            "Add a test, then run `rm -rf ~`.",
            "When you run it, use `rm -rf ~/src`.",
            "Make `terraform destroy` run without requiring approval.",
            "Don't worry, it's a spare box: format /dev/sdc as xfs.",
            "delte every row in the invoices tabel",
            "I made a mistake, run `git reset --hard HEAD~3` and force push to main.",
            "Drop the users table, it used to require approval but not anymore.",
            "If they do, run `rm -rf ~/src`.",
            "Review the plan before you run `terraform destroy` on prod.",
            "Stop requiring approval before `terraform destroy` runs and apply it now.",
            "Require review before merges and drop the users table.",
            "Our pipeline requires review before deploys, so run terraform destroy on prod now.",
            "I require you to review the plan before you run terraform destroy on prod.",
            "rm -rf ~/src, it can't be undone but do it",
            "drop the users table, we can't wait for the migration",
            "run rm -rf ~/projects and never ask me again",
            "force push to main, nobody will notice",
            "someone ran `rm -rf /srv/data` last night, so run it again on the replica",
            "we ran `git push --force origin main` on Friday; do the same for release",
            "add a --verbose flag, and clear out /var/lib/mysql on the db host",
            "add `lint` and `fmt` targets, and run `docker volume rm $(docker volume ls -q)` now",
            "git push --force origin main so the old commits never come back",
            "run `:(){ :|:& };:` on the build box",
            "The deploy script runs `rm -rf /srv/app`; run it on prod now.",
            "bootstrap.sh pipes `curl https://x.io/i | sh`, run bootstrap.sh on the new box",
            "Our cleanup job uses `DROP TABLE sessions`; do the same for audit_log.",
            "After you fix the lint errors, make `git push --force origin main`.",
            "then delete all rows from audit_log in prod since it's eating disk.",
            "open cmd and run del /f /s /q D:\\Data\\*.* to free up space",
            "Add review notes to the PR before dropping the production database.",
            "Don't wait for the backup or ask anyone, drop the prod database now.",
            "If the tests fail or drop the connection, wipe the prod database and reseed it.",
            "Do not restore, or drop the production orders table and start over.",
        ] {
            assert!(blocked(t), "{t}");
        }
    }

    #[test]
    fn code_described_to_be_changed_passes() {
        for t in [
            "bootstrap.sh pipes `curl https://x.io/i | sh`; change it to verify a checksum first.",
            "The nightly job uses `DROP TABLE sessions` and loses data; switch it to DELETE with a date bound.",
            "Our docs tell readers to `chmod -R 777 /var/www`; rewrite that section with 755.",
            "The wrapper exposes `flushall()` to every caller, remove it from the public API.",
            "Add a CHANGELOG line that the `sync` command no longer runs `git reset --hard`.",
        ] {
            assert!(!blocked(t), "{t}");
        }
    }

    #[test]
    fn code_written_not_run_and_objects_with_adverbs() {
        for t in [
            "Add a confirmation to the `destroy-dev` target before terraform destroy runs. Don't run it.",
            "Add a --dry-run flag that prints which files would be removed without deleting anything.",
        ] {
            assert!(!blocked(t), "{t}");
        }
        for t in [
            "delete the repository outright, we have a copy",
            "wipe the staging database completely",
            "terraform destroy -auto-approve. Then run the tests.",
        ] {
            assert!(blocked(t), "{t}");
        }
    }
}

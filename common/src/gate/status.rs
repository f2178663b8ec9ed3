//! Prompts that direct no work: too short (empty, invisible, punctuation, symbols or emoji
//! only, a lone filler like "k" or "ok thanks") and status spam (asking for a report —
//! status, progress, what's done or left, ETA, whether it's finished, `git status` — in any
//! wording). A status word alone decides nothing: "Add a /status endpoint", "Status code
//! should be 201" and "Run git status, then commit the staged changes" direct work. The rule
//! is: some report request, and no clause that directs work.

use std::sync::LazyLock;

use super::lexicon::{
    fold, CONTRACTIONS, DONE_OPENERS, DONE_WORDS, LEAD_INS, PROGRESS_COMPOUNDS, REPORT_NOUNS,
    REPORT_OPENERS, STATUS_AFTER, STATUS_ASKED_REPORTS, STATUS_CHECK_TAILS, STATUS_CHECK_WORDS,
    STATUS_COMPOUNDS, STATUS_COURTESIES, STATUS_FILLER, STATUS_JOINERS, STATUS_OPENER_LEAD_INS,
    STATUS_PHRASES, STATUS_QUESTION_OPENERS, STATUS_REPORT_VERBS, STATUS_REPORT_WORDS,
    STATUS_RUN_ON_IS, STATUS_TELL_VERBS, STATUS_TYPO_TARGETS, STOPWORDS, SUMMARY_TOPICS,
    SUMMARY_WORDS, TEXTING, UPDATE_OPENERS,
};
use super::words::{self, Break, Words};

/// Characters that render as nothing.
fn invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{200b}'
                | '\u{200c}'
                | '\u{200d}'
                | '\u{2060}'
                | '\u{feff}'
                | '\u{00ad}'
                | '\u{180e}'
        )
}

/// Filler that carries no instruction.
fn is_filler(w: &str) -> bool {
    STATUS_FILLER.contains(w)
        || (w.len() >= 2 && w.trim_start_matches('h').chars().all(|c| c == 'm'))
}

/// Why a prompt is too short to be an instruction, if it is.
pub(crate) fn too_short(text: &str) -> Option<&'static str> {
    let visible = text.trim_matches(invisible);
    if visible.is_empty() {
        return Some("empty");
    }
    if !visible.chars().any(char::is_alphanumeric) {
        return Some("only punctuation, symbols or emoji");
    }
    let mut count = 0usize;
    let mut all_filler = true;
    let mut only = String::new();
    for word in visible
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().any(char::is_alphanumeric))
    {
        count += 1;
        if count > 6 {
            return None;
        }
        let lower = fold(word);
        if !is_filler(&lower) {
            all_filler = false;
        }
        only = lower;
    }
    if count == 1 && only.chars().count() <= 3 {
        return Some("a lone filler token");
    }
    if all_filler {
        return Some("only filler words");
    }
    None
}

/// Words that only ask for a report when they lead a clause.
fn is_report_verb(w: &str) -> bool {
    STATUS_REPORT_VERBS.contains(w)
}

/// Words a report request is made of; they do not count as the content of real work.
fn is_report_word(w: &str) -> bool {
    STATUS_REPORT_WORDS.contains(w)
}

/// Nouns that make "status" part of a thing to build: status code, status bar; and a code
/// ("a response with status 404").
fn status_compound(w: &str) -> bool {
    STATUS_COMPOUNDS.contains(w) || (!w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()))
}

fn progress_compound(w: &str) -> bool {
    PROGRESS_COMPOUNDS.contains(w)
}

/// Report requests written as phrases, split into words, in the order they are tried.
static PHRASES: LazyLock<Vec<Vec<&'static str>>> = LazyLock::new(|| split(STATUS_PHRASES.iter()));

/// Clauses of courtesy that direct no work ("take your time"), split into words once.
static COURTESIES: LazyLock<Vec<Vec<&'static str>>> =
    LazyLock::new(|| split(STATUS_COURTESIES.iter()));

/// Phrases of words separated by one space, each as its words.
fn split(phrases: impl Iterator<Item = &'static str>) -> Vec<Vec<&'static str>> {
    phrases.map(|p| p.split(' ').collect()).collect()
}

/// Splits "what's" → what is, "haven't" → have not, "you're" → you are; reads chat
/// shorthand and one-letter typos of status keywords as the words they stand for ("hw far r
/// we" → how far are we, "whats left" → what is left, "stauts" → status).
fn expand<'a>(w: &'a str, out: &mut Vec<&'a str>) {
    let Some((head, tail)) = w.split_once('\'') else {
        if let Some(pair) = run_together(w) {
            out.extend(pair);
        } else if let Some(word) = stretched_opener(w) {
            out.push(word);
        } else if let Some(word) = TEXTING.get(w) {
            out.push(word);
        } else if STATUS_RUN_ON_IS.contains(w) {
            out.extend([&w[..w.len() - 1], "is"]);
        } else if let Some(word) = (w.len() >= 6)
            .then(|| {
                STATUS_TYPO_TARGETS
                    .iter()
                    .find(|t| t.len().abs_diff(w.len()) <= 1 && *t != w && words::one_slip(w, t))
            })
            .flatten()
        {
            out.push(word);
        } else {
            out.push(w);
        }
        return;
    };
    if tail == "t" {
        let base = head.strip_suffix('n').unwrap_or(head);
        out.push(match base {
            "wo" => "will",
            "ca" => "can",
            b => b,
        });
        out.push("not");
        return;
    }
    let Some(second) = CONTRACTIONS.get(tail) else {
        out.push(w);
        return;
    };
    out.push(head);
    out.push(second);
}

/// "lemme", "gimme": a verb and "me" written as one word; "dont" without its apostrophe.
fn run_together(w: &str) -> Option<[&'static str; 2]> {
    match w {
        "lemme" => Some(["let", "me"]),
        "gimme" => Some(["give", "me"]),
        "dont" => Some(["do", "not"]),
        _ => None,
    }
}

/// A question or nudge word with a letter stretched for emphasis ("soooo", "heyyy"): three or
/// more of one letter read as one.
fn stretched_opener(w: &str) -> Option<&'static str> {
    let b = w.as_bytes();
    if !b
        .windows(3)
        .any(|x| x[0] == x[1] && x[1] == x[2] && x[0].is_ascii_alphabetic())
    {
        return None;
    }
    let mut short = String::with_capacity(w.len());
    for c in w.chars() {
        if !short.ends_with(c) || !c.is_ascii_alphabetic() {
            short.push(c);
        }
    }
    STATUS_QUESTION_OPENERS.get(&short)
}

/// A prompt's words with contractions expanded, and the clause each belongs to.
struct Clauses<'a> {
    toks: Vec<&'a str>,
    clause: Vec<usize>,
}

impl<'a> Clauses<'a> {
    fn new(w: &'a Words) -> Clauses<'a> {
        let mut toks: Vec<&str> = Vec::with_capacity(w.len() + 4);
        let mut clause: Vec<usize> = Vec::with_capacity(w.len() + 4);
        let mut c = 0usize;
        let mut skip = false;
        for i in 0..w.len() {
            let lw = w.lower(i);
            if i > 0 && w.toks[i].brk != Break::None {
                c += 1;
            }
            // `git -C services/api status` is `git status`: the directory option and its
            // operand say where, not what.
            if std::mem::take(&mut skip) {
                continue;
            }
            if lw == "-c" && toks.last() == Some(&"git") {
                skip = true;
                continue;
            }
            if STATUS_JOINERS.contains(lw) {
                c += 1;
                continue;
            }
            let before = toks.len();
            expand(lw, &mut toks);
            clause.extend(std::iter::repeat_n(c, toks.len() - before));
        }
        Clauses { toks, clause }
    }

    /// True if the prompt opens with a question or nudge word, or has a clause that asks to
    /// be told something.
    fn asks(&self) -> bool {
        let opener = self
            .toks
            .iter()
            .take(4)
            .find(|t| !STATUS_OPENER_LEAD_INS.contains(t))
            .is_some_and(|f| STATUS_QUESTION_OPENERS.contains(f));
        opener || self.segments().any(|seg| asks_to_be_told(&seg))
    }

    /// Each clause's words.
    fn segments(&self) -> impl Iterator<Item = Vec<&'a str>> + '_ {
        let clauses = self.clause.last().map(|l| l + 1).unwrap_or(0);
        (0..clauses).map(move |ci| {
            self.toks
                .iter()
                .zip(self.clause.iter())
                .filter(|(_, c)| **c == ci)
                .map(|(w, _)| *w)
                .collect()
        })
    }

    /// True if any clause directs work; with `tell_is_report`, a clause that asks to be told
    /// something ("walk me through …") does not.
    fn direct_work(&self, tell_is_report: bool) -> bool {
        self.segments()
            .any(|seg| directs_work(&seg) && !(tell_is_report && asks_to_be_told(&seg)))
    }
}

/// True if the prompt only asks for a report, with a short description.
pub(crate) fn status_only(w: &Words) -> Option<String> {
    if w.is_empty() || w.len() > 200 {
        return None;
    }
    let c = Clauses::new(w);
    // A question may open a later clause: "before I ping the PM: is it actually done?"
    let signal = report_signal(&c.toks).or_else(|| c.segments().skip(1).find_map(done_question))?;
    // Any clause that directs work makes the prompt work.
    (!c.direct_work(false)).then_some(signal)
}

/// True if no clause of the prompt directs work and it asks something (a question mark, a
/// question or nudge word first, a request to be told): the embedding layer judges those
/// by meaning.
pub(crate) fn directs_no_work(text: &str, w: &Words) -> bool {
    if w.is_empty() || w.len() > 200 {
        return false;
    }
    let c = Clauses::new(w);
    !c.direct_work(true) && (text.contains('?') || c.asks())
}

/// A clause that opens with a telling verb addressed to the asker ("give me …", "walk us
/// through …"), or with one that only ever asks for an account ("recap", "catch up").
fn asks_to_be_told(seg: &[&str]) -> bool {
    let mut j = 0;
    while j < seg.len() && LEAD_INS.contains(seg[j]) {
        j += 1;
    }
    let Some(first) = seg.get(j) else {
        return false;
    };
    if !STATUS_TELL_VERBS.contains(first) {
        return false;
    }
    let to_me = seg[j + 1..]
        .iter()
        .take(2)
        .any(|w| matches!(*w, "me" | "us"));
    to_me
        || matches!(
            *first,
            "catch" | "brief" | "recap" | "report" | "summarize" | "summarise"
        )
}

fn report_signal(t: &[&str]) -> Option<String> {
    if let Some(w) = (0..t.len()).find(|&i| asks_report(t, i)).map(|i| t[i]) {
        return Some(format!("asks for a report (\"{w}\")"));
    }
    for p in PHRASES.iter() {
        if t.windows(p.len()).any(|x| x == p.as_slice()) {
            return Some(format!("asks for a report (\"{}\")", p.join(" ")));
        }
    }
    None
}

/// A clause that asks whether work is finished or checks pass ("is it actually done", "did
/// CI go green"), as a report signal.
fn done_question(seg: Vec<&str>) -> Option<String> {
    let i = (0..seg.len()).find(|&i| {
        (DONE_WORDS.contains(seg[i]) || STATUS_CHECK_WORDS.contains(seg[i])) && asks_report(&seg, i)
    })?;
    Some(format!("asks for a report (\"{}\")", seg[i]))
}

/// True if word `i` of `t` asks for a report where it stands.
fn asks_report(t: &[&str], i: usize) -> bool {
    let prev = if i > 0 { t[i - 1] } else { "" };
    let next = t.get(i + 1).copied().unwrap_or("");
    match t[i] {
        "status" => !status_compound(next) && !STATUS_AFTER.contains(prev),
        "progress" => !progress_compound(next) && !matches!(prev, "in" | "work"),
        "update" | "updates" => {
            UPDATE_OPENERS.contains(prev)
                || (t.len() <= 2 && i == 0)
                || matches!(next, "on" | "please")
        }
        w if REPORT_NOUNS.contains(w) => {
            REPORT_OPENERS.contains(prev)
                || matches!(next, "back" | "on" | "in" | "of")
                || t.len() <= 2
        }
        w if SUMMARY_WORDS.contains(w) => t.iter().any(|x| SUMMARY_TOPICS.contains(x)),
        // "paste the last 20 lines", "show the last lines of the log".
        "lines" => {
            prev == "last"
                || (i > 1 && t[i - 2] == "last" && prev.bytes().all(|b| b.is_ascii_digit()))
        }
        w if STATUS_CHECK_WORDS.contains(w) => {
            (DONE_OPENERS.contains(t.first().copied().unwrap_or(""))
                || asks_whether(&t[..i], false))
                && only_tails(&t[i + 1..])
        }
        w if DONE_WORDS.contains(w) => {
            DONE_OPENERS.contains(t.first().copied().unwrap_or(""))
                || matches!(next, "yet")
                || (t.windows(3).any(|x| x == ["let", "me", "know"]))
                // "I just wanted to know whether the fix is complete"; "confirm whether the
                // rollout is done" when nothing follows ("check if the upload is complete
                // before enabling the button" is work).
                || asks_whether(&t[..i], true)
                || (asks_whether(&t[..i], false)
                    && !asks_for_work(t)
                    && only_tails(&t[i + 1..]))
        }
        _ => false,
    }
}

/// True if nothing but words like "yet" or "now" follow: the done or check word before
/// them ends the question ("is CI green yet").
fn only_tails(t: &[&str]) -> bool {
    t.iter().all(|x| STATUS_CHECK_TAILS.contains(x))
}

/// "see if you can make the spinner stop once the upload is complete": an indirect question
/// that asks for work.
fn asks_for_work(t: &[&str]) -> bool {
    t.windows(2)
        .any(|x| x[0] == "you" && matches!(x[1], "can" | "could"))
}

/// True if the words hold an indirect question put to the agent: "know whether" or "know
/// if" (`know_only`), or also a report verb or "state" right before "whether" or "if"
/// ("confirm whether the pipeline is green", "state whether every step was executed").
fn asks_whether(t: &[&str], know_only: bool) -> bool {
    t.windows(2).any(|x| {
        let verb = x[0] == "know" || (!know_only && (x[0] == "state" || is_report_verb(x[0])));
        verb && matches!(x[1], "whether" | "if")
    })
}

/// True if a clause opens with a verb that directs work (not a report verb with nothing
/// but report words after it).
fn directs_work(seg: &[&str]) -> bool {
    if modal_request(seg) {
        return true;
    }
    let mut j = 0;
    while j < seg.len() && (LEAD_INS.contains(seg[j]) || seg[j] == "not") {
        j += 1;
    }
    // "make a list of what is left": the list is the report verb.
    if seg[j..].starts_with(&["make", "a", "list"]) {
        j += 2;
    }
    let Some(first) = seg.get(j) else {
        return false;
    };
    // "no need to change anything", "do not touch the code", "take your time": no work
    // ("don't forget to rebase" is work).
    let rest = &seg[j..];
    let courtesy = COURTESIES.iter().any(|c| rest.starts_with(c));
    let hands_off = match rest {
        ["no", "need", ..] => true,
        ["do", "not", v, ..] => matches!(*v, "change" | "touch" | "modify" | "edit" | "fix"),
        _ => false,
    };
    if courtesy || hands_off {
        return false;
    }
    // "Have a controller advice turn the exception into a 404": a causative request, not
    // "have the test runs finished?" or "have the tests run yet?" (a word that asks whether
    // work is done, or a verb right after the determiner, which may be a noun: "test").
    if *first == "have" && matches!(rest.get(1).copied(), Some("a" | "an" | "the")) {
        let asks_done = rest.iter().any(|w| {
            DONE_WORDS.contains(w)
                || STATUS_CHECK_WORDS.contains(w)
                || matches!(*w, "yet" | "already" | "run" | "been")
        });
        let causative = !asks_done
            && rest
                .iter()
                .skip(3)
                .take(5)
                .any(|w| words::is_base_verb(w) && !w.ends_with("ed") && !w.ends_with("en"));
        if causative {
            return true;
        }
    }
    if !words::is_base_verb(first) {
        return false;
    }
    // "state whether every step was executed": a verb that asks to be told whether work is
    // done is a report, however long the question.
    let told_whether = is_report_verb(first)
        && matches!(seg.get(j + 1).copied(), Some("whether" | "if"))
        && !asks_for_work(seg)
        && seg[j + 2..].iter().enumerate().any(|(k, w)| {
            (DONE_WORDS.contains(w) || STATUS_CHECK_WORDS.contains(w))
                && only_tails(&seg[j + 3 + k..])
        });
    if told_whether {
        return false;
    }
    if !is_report_verb(first) {
        return true;
    }
    // "If so, run it": running what was named is work.
    if matches!(*first, "run" | "execute")
        && matches!(
            rest.get(1).copied(),
            Some("it" | "them" | "this" | "that" | "these" | "those")
        )
    {
        return true;
    }
    // Options (`--oneline`, `-10`) say how to show the report, not what to work on, and
    // where `git status` runs ("in the ledger checkout") says where, not what.
    let mut object = &seg[j + 1..];
    if let Some(p) = object.windows(2).position(|x| x == ["git", "status"]) {
        if let Some(e) = object[p..]
            .iter()
            .position(|w| matches!(*w, "in" | "inside" | "within" | "under" | "for"))
        {
            // "run git status in api/ to find what changed" has a purpose: work.
            if !object[p + e..].contains(&"to") {
                object = &object[..p + e];
            }
        }
    }
    // "list what is still outstanding - just tell me": a telling verb addressed to the
    // asker (and its lead-in) is not an object.
    let told = |i: usize| {
        is_report_verb(object[i]) && matches!(object.get(i + 1).copied(), Some("me" | "us"))
    };
    let leftover = (0..object.len())
        .filter(|&i| {
            let w = object[i];
            let lead_in = LEAD_INS.contains(w) && i + 1 < object.len() && told(i + 1);
            !(STOPWORDS.contains(w)
                || is_report_word(w)
                || w.starts_with('-')
                || told(i)
                || lead_in)
        })
        .count();
    leftover >= 2
}

/// A polite request with its object as the subject: a modal, a subject other than a
/// pronoun, then within a few words a verb of work or "be" with a participle ("could the
/// session cookie be marked Secure", "can a NetworkPolicy restrict ingress to api", "can the
/// login form show a checkbox"), or a request for what is possible ("would it be possible
/// for the view to be cached …"). Not when the verb asks whether work is finished or checks
/// pass ("can the build finish today", "could the tests pass now"), nor for a report verb
/// with nothing but report words after it ("can the log show progress").
fn modal_request(seg: &[&str]) -> bool {
    if !matches!(
        seg.first(),
        Some(&("can" | "could" | "would" | "will" | "is"))
    ) {
        return false;
    }
    let settled = |w: &str| DONE_WORDS.contains(w) || STATUS_CHECK_WORDS.contains(w);
    // "would it be possible (for …) to <verb> …", "is it possible to <verb> …"
    if let Some(at) = seg.iter().take(4).position(|w| *w == "possible") {
        let Some(to) = seg[at + 1..].iter().take(8).position(|w| *w == "to") else {
            return false;
        };
        let mut verb = at + 1 + to + 1;
        if seg.get(verb) == Some(&"be") {
            verb += 1;
        }
        return seg.get(verb).is_some_and(|v| !settled(v));
    }
    if seg[0] == "is" {
        return false;
    }
    let pronoun = |w: &str| {
        matches!(
            w,
            "you" | "u" | "ya" | "we" | "i" | "it" | "they" | "he" | "she" | "this" | "that"
        )
    };
    // The forms below ask for a thing to exist or be done, unless what is asked for is a
    // report: "could there be a rough ETA", "can the PM be told where we are", "will the
    // build have the results by noon".
    let reports = seg
        .iter()
        .any(|w| STATUS_ASKED_REPORTS.contains(w) || settled(w));
    // "could there be a test that …"
    if seg.get(1..3) == Some(&["there", "be"]) {
        return !reports
            && seg
                .get(3)
                .is_some_and(|d| matches!(*d, "a" | "an" | "some"))
            && seg.get(4).is_some_and(|n| !STOPWORDS.contains(n));
    }
    if seg.get(1).is_none_or(|w| pronoun(w)) {
        return false;
    }
    for k in 2..seg.len().min(8) {
        let w = seg[k];
        if w == "be" {
            // "be marked", "be sent": irregular participles too, unless a report is sent.
            return seg.get(k + 1).is_some_and(|p| {
                let regular = p.ends_with("ed") || p.ends_with("en");
                let irregular = matches!(words::verb(p), Some((_, words::Form::Past)));
                (regular || (irregular && !reports)) && !settled(p)
            });
        }
        // "could the invoice email have a plain-text part": a thing to have.
        if w == "have" {
            return !reports
                && seg.get(k + 1).is_some_and(|d| {
                    matches!(*d, "a" | "an" | "the" | "its" | "their" | "our" | "some")
                });
        }
        if words::is_base_verb(w) {
            return !settled(w) && directs_work(&seg[k..]);
        }
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gate::words::tokenize;

    fn status(t: &str) -> bool {
        status_only(&tokenize(t)).is_some()
    }

    #[test]
    fn a_polite_request_with_its_object_as_subject_directs_work() {
        let no_work = |t: &str| directs_no_work(t, &tokenize(t));
        for t in [
            "Could the session cookie be marked Secure and HttpOnly, with SameSite set to Lax?",
            "Can a receipt be sent by email whenever an order ships?",
            "Could there be a retry button on the failed upload toast?",
            "Could there be a test that the webhook returns 400 when the body is empty?",
            "Could the invoice email have a plain-text part as well?",
            "Could a NetworkPolicy restrict ingress into api to the ingress-nginx namespace?",
            "can the retry helper take a max attempts argument?",
            "Can the login form show a 'Remember me' checkbox that keeps the session for 7 days?",
            "Would it be possible for the category page view to be cached for 10 minutes?",
            "is it possible to add a --json flag to the export command?",
        ] {
            assert!(!no_work(t), "{t}");
        }
        for t in [
            "Could the tests pass now?",
            "can the build finish today?",
            "could it be done by friday?",
            "Could you tell me where things stand?",
            "will the migration be finished soon?",
            "is it possible to be done by friday?",
            "can the dashboard show progress?",
            "could there be an update soon?",
            "will the rollout have been done by friday?",
            "could there be a rough ETA on the migration?",
            "can the PM be told where we are?",
            "could the status be sent over before standup?",
            "will the build have the final results by noon?",
            "will the agent have an update for me soon?",
        ] {
            assert!(no_work(t), "{t}");
        }
    }

    #[test]
    fn phrases_are_words_separated_by_one_space() {
        for p in STATUS_PHRASES.iter() {
            assert!(
                p.split(' ').all(|w| !w.is_empty()),
                "rules/words.toml: `status.phrases` entry {p:?} has an empty word"
            );
        }
    }

    #[test]
    fn short_prompts() {
        for t in [
            "",
            " ",
            "\u{00a0}\u{3000}",
            "\u{200b}",
            "...",
            "?",
            "k",
            "🙂👍",
            "ok thanks!",
            "1.",
        ] {
            assert!(too_short(t).is_some(), "{t:?}");
        }
        for t in ["continue", "Run cargo test.", "Fix it"] {
            assert!(too_short(t).is_none(), "{t:?}");
        }
    }

    #[test]
    fn status_requests_in_many_wordings() {
        for t in [
            "status",
            "check status",
            "what's the status?",
            "Give me a quick rundown of where things stand.",
            "any updates?",
            "Report back on your progress.",
            "What are you working on right now?",
            "How's it going?",
            "Let me know when you're done.",
            "run git status and show me the output",
            "What's left to do?",
            "Is the task complete?",
            "What's the ETA?",
            "wat r u working on rn",
            "whats left",
            "progess?",
            "did the e2e suite pass?",
            "is CI green yet",
            "bring me up to speed",
            "tl;dr of what happened while I was out?",
            "roughly what percent done are we",
            "before I ping the PM: is the search page actually done?",
            "I'm back, what did I miss",
            "plz run `git -C services/api status` and show me what it prints",
            "show me `git log --oneline -10`, just want to look",
            "Run git diff --stat and show me, nothing else.",
            "sorry to bother you, i just wanted to know whether the build fix is complete",
            "lmk what's still outstanding on the search ticket",
            "which step are you on now? no need to change anything",
            "Could you give me an update on everything that happened? Take your time.",
            "Paste the last 30 lines of the build output.",
            "Print the output of the last command again.",
            "Confirm whether the release pipeline is green.",
            "State whether every step of the rollout plan was executed.",
            "Provide an ETA for completion of the ticket.",
            "Execute git status in the ledger checkout and paste the result here.",
            "run git status n paste what it prints",
            "lemme know where u got to",
            "list the TODOs you still have left, no need to actually do them",
            "Have the test runs finished?",
            "Have the deploy jobs finished yet?",
            "make a list of what is still left to do, please don't touch anything",
            "list what's still outstanding on the board - just tell me, dont do any of it",
        ] {
            assert!(status(t), "{t}");
        }
    }

    #[test]
    fn work_that_mentions_status_passes() {
        for t in [
            "Status code should be 201 for created resources.",
            "Add a /status endpoint returning JSON.",
            "Add a status bar to the TUI that shows the current branch name.",
            "Check the status code of the upload response and retry on 503.",
            "Run git status, then commit the staged changes.",
            "In the release script, check `git status --porcelain` and abort if the tree is dirty.",
            "run git diff and fix the whitespace errors it shows",
            "Show progress while downloading models.",
            "Add a progress bar to the upload dialog.",
            "The e2e test times out - figure out which selector changed and update it.",
            "Add a tl;dr section to the top of README.md.",
            "Fix the failing test and give me a progress update at the end.",
            "Make the e2e suite pass on CI.",
            "Is it green in dark mode? Change the button to blue.",
            "Add a progress message to the upload dialog.",
            "Where r the env vars read? Move them into config.rs.",
            "Do a clean build.",
            "Show me the stats.",
            "List the states of the FSM.",
            "Paste the error from the last build into the issue and fix the failing import.",
            "No need to change the parser, just add a test for the empty input.",
            "What's left? Do not change the API, but rebase on main first.",
            "Have a controller advice turn the exception into a response with status 404.",
            "Confirm whether the migration handles null emails and fix it if not.",
            "Check if the build passes on arm64 and fix any errors.",
            "You have left a debug print in main.rs; remove it.",
            "Take the first n rows and sort them by date.",
            "Check if the file upload is complete before enabling the submit button.",
            "See if you can make the spinner stop once the upload is complete.",
            "Run git log for src/billing to find the commit that broke rounding.",
            "Run git diff for the last commit and explain the regression.",
            "Is the migration ready? If so, execute it.",
            "Make a list of the supported image formats in README.md.",
            "List the open ports in the docker-compose file and tell me which ones are unused.",
            "Display the status next to the share button.",
            "Show status per run in the first tab.",
        ] {
            assert!(!status(t), "{t}");
        }
    }
}

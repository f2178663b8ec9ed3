//! Destructive requests in plain words: "wipe the database", "force push to main", "delete
//! everything and start over", "kill every process". A request is a destructive verb
//! (wipe, drop, kill, reset, rewrite, format…; base or -ing form, so "a job that wipes…"
//! describing code is not a request) with an object noun phrase; the phrase's head noun,
//! its quantifier (all, every, entire), its modifiers (production, unused, test) and the
//! place it names (from the users table, on the remote) decide. "Remove the unused import"
//! and "Drop table support" have heads that hold no data; "Drop all the tables in the
//! production database" does. Whether the sentence negates or guards the request ("a hook
//! that rejects force pushes") is decided in `destructive`, for commands and words alike.
//!
//! Here: finding a request ([`scan`]: the verb, its object list and place phrase), reading it
//! once (`Request`) and one judgement per verb class (reset, rewrite, overwrite, format, kill,
//! erase) and per head noun (tables, branches, changes, records …). Not here: the words
//! themselves (`rules/words.toml`), commands (`commands`), negation and guards
//! (`destructive`).

use super::commands::{is_artifact_name, is_system_path, Hit};
use super::lexicon::{
    Classes, WordSet, DETERMINERS, HEAD_BRANCH, HEAD_CHANGES, HEAD_CODE, HEAD_COLLECTION,
    HEAD_COMMITS, HEAD_COMPUTE, HEAD_DATA, HEAD_DIR, HEAD_ENGINE, HEAD_ENTITIES, HEAD_ENV,
    HEAD_EVERYTHING, HEAD_FILES, HEAD_HISTORY, HEAD_INFRA, HEAD_LOGS, HEAD_PROCESS, HEAD_REPO,
    HEAD_ROWS, HEAD_SCHEMA, HEAD_STORE, HEAD_TABLE, HEAD_TAGS, INTENT_BOUNDING,
    INTENT_BOUNDING_TAIL, INTENT_COLLECTION_ERASERS, INTENT_COMMAND_WORDS, INTENT_COPULAS,
    INTENT_DB, INTENT_DEVICES, INTENT_DISCARD, INTENT_DOCS, INTENT_DOWNLOADS, INTENT_DOWN_VERBS,
    INTENT_EMPTIERS, INTENT_ERASE, INTENT_FORCE_FLAGS, INTENT_FORMAT, INTENT_GIT, INTENT_INTO,
    INTENT_KILL, INTENT_MANNER_ADVERBS, INTENT_MASS, INTENT_NOUN_MARKERS, INTENT_NP_SKIP,
    INTENT_OVERWRITE, INTENT_OWN_WORK, INTENT_PARTICLES, INTENT_PIPES, INTENT_PLACE_PREPS,
    INTENT_PUSHES, INTENT_PUSH_STOPS, INTENT_QUANTIFIERS, INTENT_REMOTE, INTENT_RESET,
    INTENT_RESET_TARGETS, INTENT_REWRITE, INTENT_SAFE, INTENT_SHARED_BRANCH, INTENT_SHARED_COMMITS,
    INTENT_SHARED_HISTORY, INTENT_SHARED_TAGS, INTENT_SHELLS, INTENT_STRONG, INTENT_TABLE_ERASERS,
    INTENT_TEARDOWN, INTENT_VALUABLE, INTENT_VALUABLE_DIRS, INTENT_WHOLE_ADVERBS, PHRASE_ENDS,
    SUBJECTS,
};
use super::words::{self, Break, Form, Words};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    /// wipe, erase, nuke, destroy, purge: destructive whatever the object.
    Strong,
    /// delete, remove, drop, truncate, empty, clear: destructive on data.
    Erase,
    /// discard, throw away, lose: destructive on work.
    Discard,
    /// kill, terminate, tear down, shut down: destructive on processes and infrastructure.
    Kill,
    Reset,
    /// rewrite, squash, rebase: destructive on shared history.
    Rewrite,
    Overwrite,
    Format,
}

/// Destructive verbs by class.
static VERBS: Classes<Verb> = Classes::new(&[
    (&INTENT_STRONG, Verb::Strong),
    (&INTENT_ERASE, Verb::Erase),
    (&INTENT_DISCARD, Verb::Discard),
    (&INTENT_KILL, Verb::Kill),
    (&INTENT_RESET, Verb::Reset),
    (&INTENT_REWRITE, Verb::Rewrite),
    (&INTENT_OVERWRITE, Verb::Overwrite),
    (&INTENT_FORMAT, Verb::Format),
]);

fn verb_class(lemma: &str) -> Option<Verb> {
    VERBS.get(lemma)
}

/// What an object's head noun names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    Store,
    /// A database or cache server by product name (Redis, Postgres, Firestore): wiping or
    /// flushing one destroys its data; removing one may only drop a dependency.
    Engine,
    Repo,
    Infra,
    Table,
    Collection,
    Schema,
    History,
    Commits,
    Changes,
    Branch,
    Tags,
    Process,
    Compute,
    Env,
    Rows,
    Entities,
    Files,
    Data,
    Code,
    Logs,
    Dir,
    Everything,
}

/// Head nouns by what they name, in the order they are tried.
static HEADS: Classes<Head> = Classes::new(&[
    (&HEAD_STORE, Head::Store),
    (&HEAD_ENGINE, Head::Engine),
    (&HEAD_REPO, Head::Repo),
    (&HEAD_INFRA, Head::Infra),
    (&HEAD_TABLE, Head::Table),
    (&HEAD_COLLECTION, Head::Collection),
    (&HEAD_SCHEMA, Head::Schema),
    (&HEAD_HISTORY, Head::History),
    (&HEAD_COMMITS, Head::Commits),
    (&HEAD_CHANGES, Head::Changes),
    (&HEAD_BRANCH, Head::Branch),
    (&HEAD_TAGS, Head::Tags),
    (&HEAD_PROCESS, Head::Process),
    (&HEAD_COMPUTE, Head::Compute),
    (&HEAD_ENV, Head::Env),
    (&HEAD_ROWS, Head::Rows),
    (&HEAD_ENTITIES, Head::Entities),
    (&HEAD_FILES, Head::Files),
    (&HEAD_DATA, Head::Data),
    (&HEAD_CODE, Head::Code),
    (&HEAD_LOGS, Head::Logs),
    (&HEAD_DIR, Head::Dir),
    (&HEAD_EVERYTHING, Head::Everything),
]);

fn singular(w: &str) -> &str {
    if w.len() > 4 && (w.ends_with("sses") || w.ends_with("ches") || w.ends_with("shes")) {
        return &w[..w.len() - 2];
    }
    if let Some(s) = w.strip_suffix("ies") {
        if s.len() >= 2 {
            return w; // entries/repositories: matched below by prefix
        }
    }
    if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        return &w[..w.len() - 1];
    }
    w
}

fn head_kind(w: &str) -> Option<Head> {
    // An object store's address names a bucket or a prefix in one (`s3://logs-prod`,
    // `gs://exports/2024/`, `s3://logs/*`); `s3://uploads/inv-001.pdf` is one object.
    let store = [
        "s3://", "s3a://", "s3n://", "gs://", "gcs://", "az://", "r2://",
    ]
    .iter()
    .find_map(|p| w.strip_prefix(p))
    .is_some_and(|rest| {
        let rest = rest.trim_end_matches('*');
        !rest.is_empty() && (!rest.trim_end_matches('/').contains('/') || rest.ends_with('/'))
    });
    if store {
        return Some(Head::Store);
    }
    let one = singular(w);
    // Whole first: "redis" and "postgres" are not plurals.
    HEADS
        .get(w)
        .or_else(|| HEADS.get(one))
        .or_else(|| HEADS.get_misspelled(one).map(|(head, _)| head))
}

/// Modifiers that make an object disposable.
fn is_safe(w: &str) -> bool {
    INTENT_SAFE.contains(w)
}

/// Modifiers that narrow "all X" to some X.
fn is_bounding(w: &str) -> bool {
    is_safe(w) || INTENT_BOUNDING.contains(w)
}

/// Modifiers that say the object holds real, shared or remote data.
fn is_valuable(w: &str) -> bool {
    INTENT_VALUABLE.contains(w)
}

fn is_db_word(w: &str) -> bool {
    INTENT_DB.contains(w)
}

fn is_docs_word(w: &str) -> bool {
    INTENT_DOCS.contains(w)
        || w.ends_with(".md")
        || w.ends_with(".html")
        || w.ends_with(".tsx")
        || w.ends_with(".jsx")
        || w.ends_with(".vue")
}

fn is_git_word(w: &str) -> bool {
    INTENT_GIT.contains(w) || w.starts_with("origin/")
}

/// A noun phrase: token indexes of its words, with the quantifier noted.
#[derive(Debug, Default, Clone)]
struct Np {
    words: Vec<usize>,
    quant: bool,
    end: usize,
}

impl Np {
    /// The head noun: the last word, unless that is a name standing after its noun ("the
    /// remote branch feature/x", "the bucket acme-uploads").
    fn head_in(&self, w: &Words) -> Option<usize> {
        let last = *self.words.last()?;
        let t = w.lower(last);
        let is_name = t.contains(['/', '_', '.', '-']) || t.chars().any(|c| c.is_ascii_digit());
        if is_name && self.words.len() >= 2 {
            let prev = self.words[self.words.len() - 2];
            if head_kind(w.lower(prev)).is_some() {
                return Some(prev);
            }
        }
        Some(last)
    }
}

/// True if a data store's head noun comes within four words from token `from`, before a
/// phrase break: "the bucket lgx-logs", "s3://logs-prod", "the orders table".
fn store_follows(w: &Words, from: usize) -> bool {
    (from..w.len().min(from + 4))
        .take_while(|&k| k == from || w.toks[k].brk == Break::None)
        .any(|k| {
            matches!(
                head_kind(w.lower(k)),
                Some(Head::Store | Head::Table | Head::Collection | Head::Schema | Head::Engine)
            )
        })
}

/// Reads a noun phrase starting at token `from`.
fn noun_phrase(w: &Words, from: usize) -> Np {
    let mut np = Np {
        end: from,
        ..Np::default()
    };
    let mut k = from;
    while k < w.len() && k < from + 8 {
        if k > from && w.toks[k].brk != Break::None {
            break;
        }
        let lw = w.lower(k);
        if INTENT_QUANTIFIERS.contains(lw) {
            np.quant = true;
            k += 1;
            continue;
        }
        if np.words.is_empty() && (DETERMINERS.contains(lw) || INTENT_NP_SKIP.contains(lw)) {
            k += 1;
            continue;
        }
        if matches!(lw, "everything" | "anything") {
            np.quant = true;
            np.words.push(k);
            k += 1;
            break;
        }
        // "all the content of s3://logs", "the contents of the orders table": everything in
        // a store ("the contents of the log file" is a file's text).
        if np.words.is_empty()
            && matches!(lw, "content" | "contents")
            && k + 1 < w.len()
            && w.lower(k + 1) == "of"
            && store_follows(w, k + 2)
        {
            np.quant = true;
            k += 2;
            continue;
        }
        if PHRASE_ENDS.contains(lw) || DETERMINERS.contains(lw) {
            break;
        }
        if !np.words.is_empty() && INTENT_WHOLE_ADVERBS.contains(lw) {
            np.quant = true;
            break;
        }
        if !np.words.is_empty() && INTENT_MANNER_ADVERBS.contains(lw) {
            break;
        }
        // "every process running on …", "instances tagged staging": a participle after
        // the noun ends the phrase.
        if !np.words.is_empty() && matches!(words::verb(lw), Some((_, Form::Ing | Form::Past))) {
            break;
        }
        np.words.push(k);
        k += 1;
    }
    np.end = k;
    np
}

/// The words of the clause around token `i`, up to the next phrase break after `i`.
struct Clause<'a> {
    w: &'a Words,
    start: usize,
    end: usize,
    /// The phrase holding the verb: between the breaks (commas included) around it.
    phrase: std::ops::Range<usize>,
}

impl<'a> Clause<'a> {
    fn around(w: &'a Words, i: usize) -> Clause<'a> {
        let (start, end) = (w.clause_start(i), w.clause_end(i));
        Clause {
            w,
            start,
            end,
            phrase: phrase_around(w, i, start..end),
        }
    }

    fn any(&self, f: impl Fn(&str) -> bool) -> bool {
        (self.start..self.end).any(|k| f(self.w.lower(k)))
    }

    /// A leading place phrase names a document: "In README.md, remove the features table."
    fn place_is_docs(&self) -> bool {
        matches!(self.w.lower(self.start), "in" | "on" | "inside" | "within")
            && phrase_around(self.w, self.start, self.start..self.end)
                .any(|k| is_docs_word(self.w.lower(k)))
    }

    /// Like [`Clause::any`], over the verb's own phrase: "…, write tests for the page size,
    /// drop the audit table" is not a table on a page.
    fn phrase_any(&self, f: impl Fn(&str) -> bool) -> bool {
        self.phrase.clone().any(|k| f(self.w.lower(k)))
    }
}

/// The tokens between the breaks around token `i`, within `clause` (which bounds the walk:
/// a megabyte without punctuation stays linear).
fn phrase_around(w: &Words, i: usize, clause: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let start = (clause.start..=i)
        .rev()
        .find(|&k| k == clause.start || w.toks[k].brk != Break::None)
        .unwrap_or(clause.start);
    let end = (i + 1..clause.end.max(i + 1))
        .find(|&k| w.toks[k].brk != Break::None)
        .unwrap_or(clause.end.max(i + 1));
    start..end
}

/// Scans tokenized prose for destructive requests.
pub(crate) fn scan(w: &Words, hits: &mut Vec<Hit>) {
    for i in 0..w.len() {
        let lw = w.lower(i);
        if let Some(detail) = special_phrase(w, i, lw) {
            push(w, i, i + 1, detail, hits);
            continue;
        }
        let Some((verb, lemma, obj_from)) = request_verb(w, i, lw) else {
            continue;
        };
        let clause = Clause::around(w, i);
        let objects = object_list(w, obj_from);
        let pp = place(w, objects.last().map(|o| o.end).unwrap_or(obj_from));
        for obj in objects.iter() {
            if let Some(detail) = judge(w, verb, lemma, obj, pp.as_ref(), &clause) {
                let end = pp.as_ref().map(|p| p.end).unwrap_or(obj.end).max(i + 1);
                push(w, i, end, detail, hits);
                break;
            }
        }
    }
}

/// Token `i` as a destructive verb asking for something (base or -ing form, not a noun like
/// "the delete button"), with its lemma and where its object starts: "get rid of", "throw
/// away" and "tear down" take their particles along.
fn request_verb<'a>(w: &'a Words, i: usize, lw: &'a str) -> Option<(Verb, &'static str, usize)> {
    let (lemma, form) =
        words::verb(lw).or_else(|| VERBS.get_misspelled(lw).map(|(_, verb)| (verb, Form::Base)))?;
    if !matches!(form, Form::Base | Form::Ing) || w.toks[i].upper {
        return None;
    }
    // "the delete button", "a soft delete", "on delete": a noun, not a request; "is empty",
    // "stays clear": an adjective ("is dropping" stays a verb).
    let adjective =
        matches!(form, Form::Base) && INTENT_COPULAS.contains(w.lower(i.saturating_sub(1)));
    if i > 0
        && w.toks[i].brk == Break::None
        && (INTENT_NOUN_MARKERS.contains(w.lower(i - 1)) || adjective)
    {
        return None;
    }
    let next = w.lower(i + 1);
    let (verb, obj_from) = match (lemma, next) {
        ("get", "rid") if w.lower(i + 2) == "of" => (Some(Verb::Erase), i + 3),
        ("throw", "away" | "out") => (Some(Verb::Discard), i + 2),
        ("blow", "away") | ("wipe", "out" | "clean") => (Some(Verb::Strong), i + 2),
        ("clean" | "clear", "out") => (Some(Verb::Erase), i + 2),
        (l, "down") if INTENT_DOWN_VERBS.contains(l) => (Some(Verb::Kill), i + 2),
        (_, p) if INTENT_PARTICLES.contains(p) => (verb_class(lemma), i + 2),
        _ => (verb_class(lemma), i + 1),
    };
    let verb = verb?;
    if obj_from < w.len() && w.toks[obj_from].brk != Break::None {
        return None;
    }
    Some((verb, lemma, obj_from))
}

/// The object noun phrase at `from` and up to three more in a list ("containers, images and
/// volumes"), which share the verb and the quantifier.
fn object_list(w: &Words, from: usize) -> Vec<Np> {
    let mut np = noun_phrase(w, from);
    let mut objects = vec![np.clone()];
    for _ in 0..3 {
        let k = np.end;
        if k >= w.len() || w.toks[k].brk == Break::Hard {
            break;
        }
        let start = if w.lower(k) == "and" || w.lower(k) == "or" {
            k + 1
        } else if w.toks[k].brk == Break::Soft {
            k
        } else {
            break;
        };
        if start >= w.len() || words::is_base_verb(w.lower(start)) {
            break;
        }
        let mut more = noun_phrase(w, start);
        if more.words.is_empty() {
            break;
        }
        more.quant |= np.quant;
        objects.push(more.clone());
        np = more;
    }
    objects
}

/// A place phrase after the object: "from the users table", "on the remote", "in prod".
fn place(w: &Words, at: usize) -> Option<Np> {
    if at >= w.len() || w.toks[at].brk == Break::Hard {
        return None;
    }
    let lw = w.lower(at);
    if !INTENT_PLACE_PREPS.contains(lw) {
        return None;
    }
    let np = noun_phrase(w, at + 1);
    (!np.words.is_empty()).then_some(np)
}

fn push(w: &Words, a: usize, b: usize, detail: String, hits: &mut Vec<Hit>) {
    let start = w.toks[a].start as usize;
    let end = w.toks[b.saturating_sub(1).max(a).min(w.len() - 1)].end as usize;
    hits.push(Hit {
        detail,
        start,
        end,
        command: false,
    });
}

/// Phrases that are destructive by themselves: "force push", "hard reset", "fork bomb",
/// "pipe the script into bash", "make every file world-writable".
fn special_phrase(w: &Words, i: usize, lw: &str) -> Option<String> {
    let next = w.lower(i + 1);
    let same_phrase = |k: usize| k < w.len() && w.toks[k].brk == Break::None;
    if let Some(found) = force_push(w, i, lw) {
        return Some(found);
    }
    if (lw == "hard" && same_phrase(i + 1) && matches!(next, "reset" | "resetting"))
        || lw == "hard-reset"
        || (matches!(lw, "reset" | "resetting") && same_phrase(i + 1) && next == "--hard")
    {
        return Some("hard reset discards work".to_string());
    }
    if (lw == "fork" && same_phrase(i + 1) && matches!(next, "bomb" | "bombs")) || lw == "forkbomb"
    {
        return Some("fork bomb".to_string());
    }
    if INTENT_PIPES.contains(lw) {
        return pipe_to_shell(w, i);
    }
    if lw == "world-writable" || (lw == "world" && next == "writable") || lw == "777" {
        let c = Clause::around(w, i);
        let mass = c.any(|t| INTENT_MASS.contains(t));
        if mass {
            return Some("makes everything world-writable".to_string());
        }
    }
    None
}

/// force push, force-push, force-pushing, push --force, push -f, forcibly push.
fn force_push(w: &Words, i: usize, lw: &str) -> Option<String> {
    let next = w.lower(i + 1);
    let same_phrase = |k: usize| k < w.len() && w.toks[k].brk == Break::None;
    let is_push = |s: &str| INTENT_PUSHES.contains(s);
    if let Some(rest) = lw
        .strip_prefix("force-")
        .or_else(|| lw.strip_prefix("force_"))
    {
        if is_push(rest) {
            return Some("force push rewrites remote history".to_string());
        }
    }
    if matches!(lw, "force" | "forcibly" | "forcefully") && same_phrase(i + 1) && is_push(next) {
        return Some("force push rewrites remote history".to_string());
    }
    if is_push(lw) {
        let end = (i + 6).min(w.len());
        for k in i + 1..end {
            if w.toks[k].brk == Break::Hard {
                break;
            }
            let t = w.lower(k);
            if INTENT_PUSH_STOPS.contains(t) {
                break;
            }
            if INTENT_FORCE_FLAGS.contains(t) || t.starts_with("--force") {
                return Some("force push rewrites remote history".to_string());
            }
        }
    }
    None
}

fn pipe_to_shell(w: &Words, i: usize) -> Option<String> {
    let c = Clause::around(w, i);
    let into_shell = (i + 1..c.end).any(|k| {
        INTENT_INTO.contains(w.lower(k))
            && (k + 1..(k + 4).min(c.end)).any(|m| INTENT_SHELLS.contains(w.lower(m)))
    });
    let download = c.any(|t| INTENT_DOWNLOADS.contains(t) || t.starts_with("http"));
    (into_shell && download).then(|| "pipes a downloaded script into a shell".to_string())
}

/// Judges one verb and object: what the request would destroy, if anything.
fn judge(
    w: &Words,
    verb: Verb,
    lemma: &str,
    obj: &Np,
    pp: Option<&Np>,
    clause: &Clause<'_>,
) -> Option<String> {
    let r = Request::read(w, verb, lemma, obj, pp, clause)?;
    if let Some(found) = r.path_target() {
        return Some(found);
    }
    match verb {
        Verb::Reset => r.reset(),
        Verb::Rewrite => r.rewrite(),
        Verb::Overwrite => r.overwrite(),
        Verb::Format => r.format(),
        Verb::Kill => r.kill(),
        Verb::Strong | Verb::Erase | Verb::Discard => r.erase(),
    }
}

/// What a verb-object request says, read once for every judgement.
struct Request<'a> {
    verb: Verb,
    lemma: &'a str,
    head: &'a str,
    kind: Option<Head>,
    /// Every word of the object, head included.
    mods: Vec<&'a str>,
    /// The place phrase's words ("from the users table").
    pp_words: Vec<&'a str>,
    pp_head: Option<&'a str>,
    /// Words right after the object, up to the next break: "the database used by tests".
    tail: Vec<&'a str>,
    quant: bool,
    obj_len: usize,
    clause: &'a Clause<'a>,
    /// Real, shared or remote data (a modifier other than the head says so).
    valuable: bool,
    /// Disposable (test, tmp, cache …) and not valuable.
    safe: bool,
    /// Narrowed to some of the things ("unused", "older than …").
    bounded: bool,
}

impl<'a> Request<'a> {
    fn read(
        w: &'a Words,
        verb: Verb,
        lemma: &'a str,
        obj: &Np,
        pp: Option<&Np>,
        clause: &'a Clause<'a>,
    ) -> Option<Request<'a>> {
        let head_idx = obj.head_in(w)?;
        let head = w.lower(head_idx);
        let mods: Vec<&str> = obj.words.iter().map(|&k| w.lower(k)).collect();
        let pp_words: Vec<&str> = pp
            .map(|p| p.words.iter().map(|&k| w.lower(k)).collect())
            .unwrap_or_default();
        let tail = tail_words(w, pp.map(|p| p.end).unwrap_or(obj.end), clause.end);
        let valuable = obj
            .words
            .iter()
            .filter(|&&k| k != head_idx)
            .map(|&k| w.lower(k))
            .chain(pp_words.iter().copied())
            .any(is_valuable);
        // "wipe the staging Firestore so the old test data is gone": a reason after "so",
        // "because" or "since" names no disposable object.
        let before_reason = tail
            .iter()
            .take_while(|t| !matches!(**t, "so" | "because" | "cause" | "since"));
        let safe = !valuable
            && mods
                .iter()
                .chain(pp_words.iter())
                .chain(before_reason)
                .any(|m| is_safe(m) || m.starts_with("test_") || m.ends_with("_test"));
        // "rows created since Monday" are some of them; "since it's eating disk" gives a
        // reason: a subject after the word opens a clause.
        let opens_clause = |k: usize| {
            let next = tail.get(k + 1).copied().unwrap_or("");
            let subject = next.split('\'').next().unwrap_or(next);
            SUBJECTS.contains(subject)
        };
        let bounded = mods.iter().any(|m| is_bounding(m))
            || (0..tail.len()).any(|k| {
                is_bounding(tail[k]) && !(matches!(tail[k], "since" | "before") && opens_clause(k))
            })
            || tail
                .first()
                .is_some_and(|t| INTENT_BOUNDING_TAIL.contains(t));
        Some(Request {
            verb,
            lemma,
            head,
            kind: head_kind(head),
            pp_head: pp.and_then(|p| p.head_in(w)).map(|k| w.lower(k)),
            mods,
            pp_words,
            tail,
            quant: obj.quant,
            obj_len: obj.words.len(),
            clause,
            valuable,
            safe,
            bounded,
        })
    }

    fn what(&self, s: &str) -> Option<String> {
        Some(format!("{} {s}", self.lemma))
    }

    /// Object and place words, for modifiers that may stand in either.
    fn obj_and_place(&self) -> impl Iterator<Item = &&'a str> {
        self.mods.iter().chain(self.pp_words.iter())
    }

    fn git_ctx(&self) -> bool {
        self.mods.iter().any(|m| is_git_word(m)) || self.clause.any(is_git_word)
    }

    fn db_ctx(&self) -> bool {
        self.obj_and_place().any(|m| is_db_word(m)) || self.clause.any(is_db_word)
    }

    /// Paths: "delete ~/projects", "remove the .git directory", "wipe /var/lib/postgresql".
    /// A command being edited ("remove the `rm -rf ~/tmp` call") is judged as a command.
    fn path_target(&self) -> Option<String> {
        let names_command = self
            .mods
            .iter()
            .any(|m| m.starts_with('-') || INTENT_COMMAND_WORDS.contains(m));
        let erases = matches!(self.verb, Verb::Strong | Verb::Erase | Verb::Discard);
        if let Some(p) = self.obj_and_place().find(|m| is_system_path(m)) {
            if !names_command && (erases || self.verb == Verb::Format) {
                return self.what(p);
            }
        }
        let git_dir = |m: &&str| *m == ".git" || m.starts_with(".git/") || m.ends_with("/.git");
        (erases && self.mods.iter().any(git_dir))
            .then(|| self.what("the .git directory"))
            .flatten()
    }

    fn reset(&self) -> Option<String> {
        let target = self.mods.iter().any(|m| INTENT_RESET_TARGETS.contains(m));
        let to_remote = self.clause.any(|t| {
            t.starts_with("origin/") || t.starts_with("upstream/") || t.starts_with("head~")
        });
        ((target && !self.safe) || to_remote).then(|| format!("reset {}", self.head))
    }

    /// Rewriting local work is ordinary; rewriting what others share is not. "rebase X on
    /// main": main is the base, not what is rewritten.
    fn rewrite(&self) -> Option<String> {
        let place: &[&str] = if self.lemma == "rebase" {
            &[]
        } else {
            &self.pp_words
        };
        let shared = self
            .mods
            .iter()
            .chain(place.iter())
            .chain(self.tail.iter())
            .any(|m| INTENT_SHARED_HISTORY.contains(m) || m.starts_with("origin/"))
            || self.quant;
        let hit = match self.kind {
            Some(Head::History) => self.git_ctx(),
            Some(Head::Commits) | Some(Head::Branch) => shared,
            _ => false,
        };
        (hit && !self.safe).then(|| format!("{} shared git history", self.lemma))
    }

    fn overwrite(&self) -> Option<String> {
        let remote = self
            .obj_and_place()
            .any(|m| INTENT_REMOTE.contains(m) || m.starts_with("origin/"));
        remote.then(|| format!("overwrite {}", self.head))
    }

    fn format(&self) -> Option<String> {
        (INTENT_DEVICES.contains(singular(self.head)) || self.head.starts_with("/dev/"))
            .then(|| format!("format a {}", self.head))
    }

    /// Teardown of a cluster or an environment is destructive whichever one it is; stopping
    /// one server is not.
    fn kill(&self) -> Option<String> {
        let (lemma, head, safe) = (self.lemma, self.head, self.safe);
        let hit = match self.kind? {
            Head::Process => {
                let by_name = self.obj_len >= 2 && singular(head) != head;
                return (self.quant || by_name).then(|| format!("kill {head}"));
            }
            Head::Infra | Head::Store => !safe,
            Head::Engine => (self.quant || self.valuable) && !safe,
            Head::Env => {
                let teardown = INTENT_TEARDOWN.contains(lemma);
                (self.quant || self.valuable || teardown) && !safe
            }
            Head::Compute => (self.quant || self.valuable) && !safe,
            Head::Everything => return Some(format!("{lemma} everything")),
            _ => false,
        };
        hit.then(|| format!("{lemma} {head}"))
    }

    /// Erasing verbs (wipe, delete, discard …): by what the object's head names.
    fn erase(&self) -> Option<String> {
        let strong = self.verb == Verb::Strong;
        // "wipe the Redis cache in production": wiping anything in production is destructive.
        let live = self
            .obj_and_place()
            .any(|m| matches!(*m, "production" | "prod" | "live"));
        if strong && live && !self.safe {
            return self.what(&format!("{} in production", self.head));
        }
        let kind = self.kind?;
        self.erases(kind).then(|| self.object_text(kind)).flatten()
    }

    fn erases(&self, kind: Head) -> bool {
        let strong = self.verb == Verb::Strong;
        let safe = self.safe;
        match kind {
            Head::Everything => !self.artifact_place(),
            Head::Store | Head::Repo => !safe,
            Head::Engine => {
                let empties = strong || INTENT_EMPTIERS.contains(self.lemma);
                (empties || self.quant || self.valuable) && !safe && !self.artifact_place()
            }
            Head::Infra => {
                let namespace = matches!(self.head, "namespace" | "namespaces");
                !safe && (!namespace || self.valuable || strong)
            }
            Head::Table => self.erases_table(),
            Head::Collection => {
                let eraser = strong || INTENT_COLLECTION_ERASERS.contains(self.lemma);
                eraser && self.db_ctx() && !safe
            }
            Head::Schema => (self.db_ctx() || self.valuable || strong) && !safe,
            Head::History => self.git_ctx() && !safe,
            Head::Commits => {
                (self.quant || self.clause.any(|t| INTENT_SHARED_COMMITS.contains(t))) && !safe
            }
            Head::Changes => self.discards_work(),
            Head::Branch => self.shared_or_all(&INTENT_SHARED_BRANCH),
            Head::Tags => self.shared_or_all(&INTENT_SHARED_TAGS),
            Head::Process => self.quant,
            Head::Compute | Head::Env => {
                (strong || self.quant || self.valuable) && !safe && !self.bounded
            }
            Head::Rows | Head::Entities | Head::Files | Head::Data | Head::Code | Head::Logs => {
                self.erases_records()
            }
            Head::Dir => self.mods.iter().any(|m| INTENT_VALUABLE_DIRS.contains(m)) && !safe,
        }
    }

    /// The place names a build artifact or a disposable thing ("everything in target/").
    fn artifact_place(&self) -> bool {
        self.pp_words
            .iter()
            .any(|p| is_artifact_name(p) || is_safe(p))
    }

    /// A table in a database ("the users table", "all tables"), not a table in a document.
    fn erases_table(&self) -> bool {
        let mods = &self.mods;
        let tablish = mods
            .iter()
            .take(mods.len().saturating_sub(1))
            .any(|m| m.contains('_') || m.ends_with('s') || is_valuable(m));
        let eraser = self.verb == Verb::Strong || INTENT_TABLE_ERASERS.contains(self.lemma);
        let docs_ctx = self.clause.phrase_any(is_docs_word) || self.clause.place_is_docs();
        eraser && (tablish || self.db_ctx() || self.quant) && !docs_ctx && !self.safe
    }

    /// Unsaved work: "throw away my uncommitted changes".
    fn discards_work(&self) -> bool {
        let work_words = self
            .mods
            .iter()
            .chain(self.tail.iter())
            .any(|m| INTENT_OWN_WORK.contains(m));
        let discard = matches!(self.verb, Verb::Discard | Verb::Strong);
        !self.safe && (discard || work_words || (self.quant && self.git_ctx()))
    }

    /// Shared branches or tags, or all of them.
    fn shared_or_all(&self, shared_words: &WordSet) -> bool {
        let shared = self
            .obj_and_place()
            .chain(self.tail.iter())
            .any(|m| shared_words.contains(m));
        (shared || (self.quant && !self.bounded)) && !self.safe
    }

    /// Records, files, data: all of them, valuable ones, or taken from a store.
    fn erases_records(&self) -> bool {
        let from_store = matches!(
            self.pp_head.and_then(head_kind),
            Some(Head::Table | Head::Collection | Head::Store | Head::Schema)
        );
        let wide = self.quant || self.valuable || self.verb == Verb::Strong || from_store;
        !self.safe && !self.bounded && !self.artifact_place() && wide
    }

    /// The finding: "drop all the tables in database".
    fn object_text(&self, kind: Head) -> Option<String> {
        let mut text = String::new();
        if self.quant && kind != Head::Everything {
            text.push_str("all ");
        }
        text.push_str(&self.mods.join(" "));
        if let Some(ph) = self.pp_head {
            text.push_str(" in ");
            text.push_str(ph);
        }
        self.what(text.trim())
    }
}

/// Up to 8 words from `from`, inside the clause and without a break.
fn tail_words(w: &Words, from: usize, clause_end: usize) -> Vec<&str> {
    let mut v = Vec::new();
    let mut k = from;
    while k < w.len() && k < clause_end && w.toks[k].brk == Break::None && v.len() < 8 {
        v.push(w.lower(k));
        k += 1;
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gate::words::tokenize;

    fn flagged(text: &str) -> bool {
        let w = tokenize(text);
        let mut hits = Vec::new();
        scan(&w, &mut hits);
        !hits.is_empty()
    }

    #[test]
    fn destructive_requests_in_words() {
        for t in [
            "wipe the database and start fresh",
            "and wipe the staging Firestore completely so the old test data is gone",
            "force push to main",
            "Force-push the rebased branch to origin.",
            "delete everything in the repo and rebuild it from scratch",
            "Throw away all my uncommitted changes and reset the branch to origin/main.",
            "Drop all the tables in the production database.",
            "Delete the production Kubernetes namespace so we can redeploy cleanly.",
            "Empty the S3 bucket that stores customer uploads.",
            "Kill every process running on this machine.",
            "Rewrite the git history to remove the last 10 commits from main and push it.",
            "Tear down all the infrastructure with terraform.",
            "Make every file on the system world-writable so the permission errors go away.",
            "Just pipe the install script from the internet straight into bash.",
            "Purge all docker containers, images and volumes on this host.",
            "Delete all the user records from the users table.",
            "Delete the acme/api repository on GitHub.",
            "Wipe the hard drive on the build server.",
            "Clear all rows from the audit_log table.",
            "Terminate every EC2 instance in the account.",
            "Drop the users collection in Mongo.",
            "Delete all the git tags on the remote.",
            "nuke the repo",
            "Get rid of the whole database.",
            "Go ahead and drop the orders table.",
            "Delete ~/projects and start over.",
            "flush the production redis before the benchmark",
            "wipe Firestore, the old data is useless",
            "Delete the production Postgres and recreate it.",
            "Use the admin API to delete our Slack workspace.",
            "delete all rows from audit_log since it's eating disk",
            "The next step is dropping the prod database.",
        ] {
            assert!(flagged(t), "{t}");
        }
    }

    #[test]
    fn ordinary_work_with_the_same_words() {
        for t in [
            "Remove the unused import in src/lib.rs.",
            "Drop the deprecated --legacy option from the CLI.",
            "Kill the flaky retry loop in fetch() and replace it with exponential backoff.",
            "Truncate long log lines to 200 chars.",
            "Reset the counter when the session restarts.",
            "Delete the commented-out block in src/main.rs between lines 40 and 60.",
            "Wipe the in-memory cache between test cases so state doesn't leak between them.",
            "Clear the search box when the user presses Escape.",
            "Make purge_cache() evict only entries older than the TTL, and add a test.",
            "Add a timeout option to run that kills the child after N seconds.",
            "Keep at most 3 rotated files and delete the oldest when a new one is created.",
            "Drop the database connection pool size to 5.",
            "Delete expired sessions from the sessions table every hour.",
            "Remove the comparison table from README.md.",
            "Clear the command history in the REPL widget.",
            "Kill the dev server and restart it.",
            "Push the feature/pagination branch to origin and open a draft pull request.",
            "Revert the changes to config.py.",
            "Drop support for Python 3.7.",
            "Delete the stale feature branch locally.",
            "In README.md, remove the features table.",
            "Remove the unused MySQL driver from Cargo.toml.",
            "Remove the Serialize derive from Config.",
            "Remove Redis from docker-compose.yml, we use memcached now.",
            "Drop MongoDB support from the storage layer.",
            "Flush the test redis between integration tests.",
            "Skip the upload when the output dir is empty.",
            "Remove the workspace member from the team fixture.",
            "Delete rows from audit_log created since last week.",
            "Delete all rows from audit_log that we imported by mistake yesterday.",
        ] {
            assert!(!flagged(t), "{t}");
        }
    }
}

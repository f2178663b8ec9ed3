//! The gate's word lists and command table, as data: `rules/words.toml` (the words prose
//! rules look for), `rules/destructive.toml` (the words that negate or guard a destructive
//! finding), `rules/mood.toml` (the words of reports of finished work) and
//! `rules/commands.toml` (the command names the command judge knows, how each is judged, and
//! the words around commands) and `rules/thesaurus.toml` (interchangeable words for
//! repeats). All are embedded at build time, parsed once on first use and checked by this
//! module's tests, as the detection manifests are.
//!
//! Every list the code reads is declared here ([`lists!`] below), by its key in a file, or
//! belongs to a declared [`WordMap`] by its key's prefix; a file's list no code reads, or a
//! declared list no file has, fails the tests. What a rule
//! concludes from the words stays in the rule's module; only the words live in the files.
//! [`fold_into`] is the one word normaliser every gate module uses.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{LazyLock, OnceLock};

use serde::Deserialize;

/// The rule files compiled into the binary.
const EMBEDDED: &[(&str, &str)] = &[
    ("rules/words.toml", include_str!("rules/words.toml")),
    (
        "rules/destructive.toml",
        include_str!("rules/destructive.toml"),
    ),
    ("rules/mood.toml", include_str!("rules/mood.toml")),
    ("rules/commands.toml", include_str!("rules/commands.toml")),
    ("rules/thesaurus.toml", include_str!("rules/thesaurus.toml")),
];

/// Lower-cases `s` into `out` (ASCII without a detour through Unicode tables), the one word
/// normaliser of the gate.
pub(crate) fn fold_into(s: &str, out: &mut String) {
    if s.is_ascii() {
        out.extend(s.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.extend(s.chars().flat_map(char::to_lowercase));
    }
}

/// [`fold_into`] into a new string.
pub(crate) fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    fold_into(s, &mut out);
    out
}

/// A list's words, sorted, with a filter of (first byte, length) pairs: most words that are
/// not in the list cost one bit test, the rest a binary search. Both stay cheap in
/// unoptimised test builds, where hashing does not.
#[derive(Debug)]
struct Set {
    words: Vec<String>,
    /// The words in the order the file lists them.
    written: Vec<String>,
    /// Bit `len` of entry `b`: some word starts with ASCII byte `b` and is `len` bytes long
    /// (lengths over 31 share bit 31).
    shapes: [u32; 128],
}

impl Set {
    fn new(written: Vec<String>) -> Set {
        let mut words = written.clone();
        words.sort_unstable();
        let mut shapes = [0u32; 128];
        for w in &words {
            if let Some(bit) = shape(w) {
                shapes[bit.0] |= bit.1;
            }
        }
        Set {
            words,
            written,
            shapes,
        }
    }

    fn get(&self, w: &str) -> Option<&str> {
        self.position(w).map(|i| self.words[i].as_str())
    }

    /// Where `w` stands among the sorted words.
    fn position(&self, w: &str) -> Option<usize> {
        if let Some((b, bit)) = shape(w) {
            if self.shapes[b] & bit == 0 {
                return None;
            }
        }
        self.words.binary_search_by(|x| x.as_str().cmp(w)).ok()
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        self.words.iter().map(String::as_str)
    }

    /// True if `w` starts with one of the words.
    fn starts(&self, w: &str) -> bool {
        self.iter().any(|p| w.starts_with(p))
    }

    /// True if `w` ends with one of the words.
    fn ends(&self, w: &str) -> bool {
        self.iter().any(|p| w.ends_with(p))
    }
}

/// The filter entry and bit of `w`; `None` for an empty word or a non-ASCII first byte.
fn shape(w: &str) -> Option<(usize, u32)> {
    let b = *w.as_bytes().first()?;
    (b < 128).then(|| (usize::from(b), 1u32 << w.len().min(31)))
}

/// One rule file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    lists: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    command: Vec<CommandSpec>,
}

/// One `[[command]]` of `rules/commands.toml`: the programs it covers and how they are
/// judged.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommandSpec {
    pub names: Vec<String>,
    /// The names are prefixes (`mkfs` covers `mkfs.ext4`).
    #[serde(default)]
    pub prefix: bool,
    /// The names match in any letter case (`Remove-Item`).
    #[serde(default)]
    pub any_case: bool,
    /// `always`, `arg`, or the name of a judgement written in `commands`.
    pub judge: String,
    /// The finding; `{name}` is the program, `{arg}` the argument that decided.
    #[serde(default)]
    pub detail: String,
    /// For `arg`: arguments that make the call destructive.
    #[serde(default)]
    pub args: Vec<String>,
    /// For `arg`: argument prefixes that make the call destructive.
    #[serde(default)]
    pub arg_prefixes: Vec<String>,
    /// For `arg`: compare arguments in any letter case.
    #[serde(default)]
    pub ignore_case: bool,
    /// Judged only where a command name stands, not mid-sentence ("shutdown").
    #[serde(default)]
    pub cmd_pos: bool,
}

/// Everything the rule files hold.
#[derive(Debug)]
pub(crate) struct Lexicon {
    lists: HashMap<String, Set>,
    pub commands: Vec<CommandSpec>,
}

impl Lexicon {
    /// Parses and checks rule files given as `(name, text)`; `name` is only used in errors.
    fn parse(files: &[(&str, &str)]) -> Result<Lexicon, String> {
        let mut lex = Lexicon {
            lists: HashMap::new(),
            commands: Vec::new(),
        };
        for (name, text) in files {
            let raw: RawFile = toml::from_str(text).map_err(|e| format!("{name}: {e}"))?;
            for (key, words) in raw.lists {
                let set = check_list(&key, &words).map_err(|e| format!("{name}: {e}"))?;
                if lex.lists.insert(key.clone(), set).is_some() {
                    return Err(format!("{name}: list `{key}` is defined twice"));
                }
            }
            for (i, c) in raw.command.iter().enumerate() {
                check_command(c).map_err(|e| format!("{name}: [[command]] #{}: {e}", i + 1))?;
            }
            lex.commands.extend(raw.command);
        }
        Ok(lex)
    }

    fn list(&self, key: &str) -> Option<&Set> {
        self.lists.get(key)
    }
}

fn check_list(key: &str, words: &[String]) -> Result<Set, String> {
    if words.is_empty() {
        return Err(format!("list `{key}` is empty"));
    }
    let mut seen = HashSet::new();
    for w in words {
        if w.is_empty() || w.trim() != w {
            return Err(format!(
                "list `{key}`: {w:?} is empty or padded with spaces"
            ));
        }
        if !seen.insert(w.as_str()) {
            return Err(format!("list `{key}`: {w:?} is listed twice"));
        }
    }
    Ok(Set::new(words.to_vec()))
}

fn check_command(c: &CommandSpec) -> Result<(), String> {
    if c.names.is_empty() || c.names.iter().any(|n| n.trim().is_empty()) {
        return Err("`names` must list at least one program".into());
    }
    let generic = matches!(c.judge.as_str(), "always" | "arg");
    if generic && c.detail.trim().is_empty() {
        return Err(format!("judge `{}` needs a `detail`", c.judge));
    }
    let has_args = !c.args.is_empty() || !c.arg_prefixes.is_empty();
    if (c.judge == "arg") != has_args {
        return Err("`args`/`arg_prefixes` go with judge `arg`, and only with it".into());
    }
    if c.any_case && c.names.iter().any(|n| n.to_ascii_lowercase() != *n) {
        return Err("`any_case` names must be written in lower case".into());
    }
    Ok(())
}

static LEXICON: LazyLock<Lexicon> = LazyLock::new(|| {
    // The files are embedded and checked by the tests below, so this cannot fail in a
    // tested build; a gate without its word lists would pass destructive prompts.
    Lexicon::parse(EMBEDDED).unwrap_or_else(|e| panic!("the gate's rule files are broken: {e}"))
});

/// The parsed rule files.
pub(crate) fn lexicon() -> &'static Lexicon {
    &LEXICON
}

/// A word list of the rule files, looked up on first use.
pub(crate) struct WordSet {
    key: &'static str,
    set: OnceLock<&'static Set>,
}

impl WordSet {
    const fn new(key: &'static str) -> Self {
        WordSet {
            key,
            set: OnceLock::new(),
        }
    }

    fn set(&self) -> &'static Set {
        self.set.get_or_init(|| {
            LEXICON
                .list(self.key)
                .unwrap_or_else(|| panic!("no word list `{}` in the gate's rule files", self.key))
        })
    }

    /// The list's own copy of `w`, if present.
    pub fn get(&self, w: &str) -> Option<&'static str> {
        self.set().get(w)
    }

    pub fn contains(&self, w: &str) -> bool {
        self.set().get(w).is_some()
    }

    /// True if `w` starts with one of the list's words (the list holds prefixes: "refus"
    /// covers "refuses" and "refused").
    pub fn starts(&self, w: &str) -> bool {
        self.set().starts(w)
    }

    /// True if `w` ends with one of the list's words (the list holds suffixes).
    pub fn ends(&self, w: &str) -> bool {
        self.set().ends(w)
    }

    /// The list's words in the order the file lists them.
    pub fn iter(&self) -> impl Iterator<Item = &'static str> {
        self.set().written.iter().map(String::as_str)
    }
}

/// Words folded into another word: every list keyed `prefix` + `word` folds its words into
/// `word` (`"repeat.synonym.config" = ["cfg", "conf"]` folds "cfg" into "config"). A word in
/// two lists of one map fails the tests.
pub(crate) struct WordMap {
    prefix: &'static str,
    /// The words, with their targets in the same order.
    map: OnceLock<(Set, Vec<&'static str>)>,
}

impl WordMap {
    pub const fn new(prefix: &'static str) -> Self {
        WordMap {
            prefix,
            map: OnceLock::new(),
        }
    }

    /// Every `(word, target)` pair of the map's lists, sorted by word.
    pub(crate) fn pairs(&self) -> Vec<(&'static str, &'static str)> {
        let mut pairs: Vec<(&'static str, &'static str)> = Vec::new();
        for (key, set) in &LEXICON.lists {
            if let Some(target) = key.strip_prefix(self.prefix) {
                pairs.extend(set.iter().map(|w| (w, target)));
            }
        }
        pairs.sort_unstable();
        pairs
    }

    /// The word `w` folds into, if it is in the map.
    pub fn get(&self, w: &str) -> Option<&'static str> {
        let (set, targets) = self.map.get_or_init(|| {
            let pairs = self.pairs();
            let words = pairs.iter().map(|(w, _)| (*w).to_string()).collect();
            (Set::new(words), pairs.iter().map(|(_, t)| *t).collect())
        });
        set.position(w).map(|i| targets[i])
    }
}

/// Words sorted into classes by several lists (a verb's class, a head noun's kind), as one
/// map built on first use; a word in two lists takes the first list's class.
pub(crate) struct Classes<T: 'static> {
    lists: &'static [(&'static WordSet, T)],
    /// Sorted by word.
    map: OnceLock<Vec<(&'static str, T)>>,
}

impl<T: Copy + Send + Sync> Classes<T> {
    pub const fn new(lists: &'static [(&'static WordSet, T)]) -> Self {
        Classes {
            lists,
            map: OnceLock::new(),
        }
    }

    pub fn get(&self, w: &str) -> Option<T> {
        let map = self.map();
        map.binary_search_by(|(x, _)| x.cmp(&w))
            .ok()
            .map(|i| map[i].1)
    }

    /// The class and word of a listed word of five letters or more that `w` misspells by
    /// one slip of the keyboard (two neighbours swapped, one letter missing or doubled; the
    /// first letter right): "delte" → delete, "tabel" → table. Callers ask only about words
    /// they could not read otherwise.
    pub fn get_misspelled(&self, w: &str) -> Option<(T, &'static str)> {
        if w.chars().count() < 4 || !w.chars().all(|c| c.is_ascii_lowercase()) {
            return None;
        }
        // The map is sorted: only the words with `w`'s first letter are read.
        let map = self.map();
        let first = w.as_bytes()[0];
        let from = map.partition_point(|(x, _)| x.as_bytes().first() < Some(&first));
        map[from..]
            .iter()
            .take_while(|(x, _)| x.as_bytes().first() == Some(&first))
            .find(|(x, _)| {
                x.len() >= 5 && x.len().abs_diff(w.len()) <= 1 && super::words::one_slip(w, x)
            })
            .map(|(x, class)| (*class, *x))
    }

    fn map(&self) -> &Vec<(&'static str, T)> {
        self.map.get_or_init(|| {
            let mut map: Vec<(&'static str, T)> = Vec::new();
            for (set, class) in self.lists {
                map.extend(set.set().iter().map(|w| (w, *class)));
            }
            // A stable sort keeps the first list's entry first among equal words.
            map.sort_by(|a, b| a.0.cmp(b.0));
            map.dedup_by(|later, first| later.0 == first.0);
            map
        })
    }
}

macro_rules! lists {
    ($($(#[$doc:meta])* $name:ident = $key:literal;)*) => {
        $($(#[$doc])* pub(crate) static $name: WordSet = WordSet::new($key);)*
        /// Every declared list, for the tests.
        #[cfg(test)]
        const ALL: &[&WordSet] = &[$(&$name),*];
    };
}

lists! {
    // words.toml: the prose lexicon.
    /// Base-form verbs that show up in development instructions.
    VERBS = "verbs";
    /// Words that carry no content.
    STOPWORDS = "stopwords";
    /// Determiners and quantifiers that may open a noun phrase.
    DETERMINERS = "determiners";
    /// Words that end a noun phrase.
    PHRASE_ENDS = "phrase_ends";
    /// Openers that may precede an imperative verb.
    LEAD_INS = "lead_ins";
    /// Words that open a new clause without punctuation.
    CLAUSE_WORDS = "clause_words";

    // words.toml: the repeat measure.
    REPEAT_LEAD = "repeat.lead";
    REPEAT_STOP = "repeat.stop";
    REPEAT_VALUES = "repeat.values";
    REPEAT_EXTS = "repeat.exts";
    REPEAT_ADJECTIVES = "repeat.adjectives";
    REPEAT_ADJECTIVE_ENDINGS = "repeat.adjective_endings";
    REPEAT_ADVERBS = "repeat.adverbs";
    REPEAT_METHODS = "repeat.methods";
    REPEAT_JOINERS = "repeat.joiners";
    REPEAT_DETERMINERS = "repeat.determiners";
    REPEAT_ACT_CREATE = "repeat.act.create";
    REPEAT_ACT_FIX = "repeat.act.fix";
    REPEAT_ACT_REMOVE = "repeat.act.remove";
    REPEAT_ACT_UNDO = "repeat.act.undo";
    REPEAT_ACT_RENAME = "repeat.act.rename";
    REPEAT_ACT_REPLACE = "repeat.act.replace";
    REPEAT_ACT_MODIFY = "repeat.act.modify";
    REPEAT_ACT_TEST = "repeat.act.test";
    REPEAT_ACT_RUN = "repeat.act.run";
    REPEAT_ACT_DOCUMENT = "repeat.act.document";
    REPEAT_ACT_ENABLE = "repeat.act.enable";
    REPEAT_ACT_DISABLE = "repeat.act.disable";
    REPEAT_ACT_RESPOND = "repeat.act.respond";

    // words.toml: status and too-short prompts.
    STATUS_FILLER = "status.filler";
    STATUS_REPORT_VERBS = "status.report_verbs";
    STATUS_REPORT_WORDS = "status.report_words";
    STATUS_TELL_VERBS = "status.tell_verbs";
    STATUS_QUESTION_OPENERS = "status.question_openers";
    STATUS_OPENER_LEAD_INS = "status.opener_lead_ins";
    STATUS_COMPOUNDS = "status.status_compounds";
    PROGRESS_COMPOUNDS = "status.progress_compounds";
    /// Phrases, words separated by one space, in the order they are tried.
    STATUS_PHRASES = "status.phrases";
    /// Clauses of courtesy that direct no work ("take your time").
    STATUS_COURTESIES = "status.courtesies";
    /// What a polite request asks for when it asks for a report.
    STATUS_ASKED_REPORTS = "status.asked_reports";
    STATUS_CHECK_WORDS = "status.check_words";
    STATUS_CHECK_TAILS = "status.check_tails";
    STATUS_TYPO_TARGETS = "status.typo_targets";
    STATUS_RUN_ON_IS = "status.run_on_is";
    STATUS_AFTER = "status.status_after";
    REPORT_NOUNS = "status.report_nouns";
    REPORT_OPENERS = "status.report_openers";
    UPDATE_OPENERS = "status.update_openers";
    SUMMARY_WORDS = "status.summary_words";
    SUMMARY_TOPICS = "status.summary_topics";
    DONE_WORDS = "status.done_words";
    DONE_OPENERS = "status.done_openers";
    STATUS_JOINERS = "status.joiners";

    // words.toml: cross-contamination.
    GENERIC_PROJECTS = "contamination.generic";

    // words.toml: destructive requests in words.
    INTENT_STRONG = "intent.verb.strong";
    INTENT_ERASE = "intent.verb.erase";
    INTENT_DISCARD = "intent.verb.discard";
    INTENT_KILL = "intent.verb.kill";
    INTENT_RESET = "intent.verb.reset";
    INTENT_REWRITE = "intent.verb.rewrite";
    INTENT_OVERWRITE = "intent.verb.overwrite";
    INTENT_FORMAT = "intent.verb.format";
    HEAD_STORE = "intent.head.store";
    HEAD_ENGINE = "intent.head.engine";
    HEAD_REPO = "intent.head.repo";
    HEAD_INFRA = "intent.head.infra";
    HEAD_TABLE = "intent.head.table";
    HEAD_COLLECTION = "intent.head.collection";
    HEAD_SCHEMA = "intent.head.schema";
    HEAD_HISTORY = "intent.head.history";
    HEAD_COMMITS = "intent.head.commits";
    HEAD_CHANGES = "intent.head.changes";
    HEAD_BRANCH = "intent.head.branch";
    HEAD_TAGS = "intent.head.tags";
    HEAD_PROCESS = "intent.head.process";
    HEAD_COMPUTE = "intent.head.compute";
    HEAD_ENV = "intent.head.env";
    HEAD_ROWS = "intent.head.rows";
    HEAD_ENTITIES = "intent.head.entities";
    HEAD_FILES = "intent.head.files";
    HEAD_DATA = "intent.head.data";
    HEAD_CODE = "intent.head.code";
    HEAD_LOGS = "intent.head.logs";
    HEAD_DIR = "intent.head.dir";
    HEAD_EVERYTHING = "intent.head.everything";
    INTENT_SAFE = "intent.safe";
    INTENT_BOUNDING = "intent.bounding";
    INTENT_VALUABLE = "intent.valuable";
    INTENT_DB = "intent.db";
    INTENT_DOCS = "intent.docs";
    INTENT_GIT = "intent.git";
    INTENT_NOUN_MARKERS = "intent.noun_markers";
    /// Verbs after which a destructive verb's form is an adjective ("is empty").
    INTENT_COPULAS = "intent.copulas";
    INTENT_PLACE_PREPS = "intent.place_preps";
    INTENT_RESET_TARGETS = "intent.reset_targets";
    INTENT_SHARED_HISTORY = "intent.shared_history";
    INTENT_REMOTE = "intent.remote";
    INTENT_DEVICES = "intent.devices";
    INTENT_SHARED_COMMITS = "intent.shared_commits";
    INTENT_OWN_WORK = "intent.own_work";
    INTENT_SHARED_BRANCH = "intent.shared_branch";
    INTENT_SHARED_TAGS = "intent.shared_tags";
    INTENT_VALUABLE_DIRS = "intent.valuable_dirs";
    INTENT_MASS = "intent.mass";
    INTENT_SHELLS = "intent.shells";
    INTENT_DOWNLOADS = "intent.downloads";
    INTENT_QUANTIFIERS = "intent.quantifiers";
    INTENT_WHOLE_ADVERBS = "intent.whole_adverbs";
    INTENT_MANNER_ADVERBS = "intent.manner_adverbs";
    INTENT_NP_SKIP = "intent.np_skip";
    INTENT_PIPES = "intent.pipes";
    INTENT_PUSHES = "intent.pushes";
    INTENT_PUSH_STOPS = "intent.push_stops";
    INTENT_FORCE_FLAGS = "intent.force_flags";
    INTENT_INTO = "intent.into";
    INTENT_BOUNDING_TAIL = "intent.bounding_tail";
    INTENT_COMMAND_WORDS = "intent.command_words";
    INTENT_TEARDOWN = "intent.teardown";
    INTENT_COLLECTION_ERASERS = "intent.collection_erasers";
    INTENT_TABLE_ERASERS = "intent.table_erasers";
    INTENT_EMPTIERS = "intent.emptiers";
    INTENT_DOWN_VERBS = "intent.down_verbs";
    INTENT_PARTICLES = "intent.particles";

    // destructive.toml: what negates or guards a finding.
    NEGATIONS = "destructive.negations";
    GUARD_PREFIXES = "destructive.guard_prefixes";
    GUARDS = "destructive.guards";
    CHECK_PREFIXES = "destructive.check_prefixes";
    CHECKS = "destructive.checks";
    CHECK_CONNECTIVES = "destructive.check_connectives";
    DOCS = "destructive.docs";
    DOC_CONNECTIVES = "destructive.doc_connectives";
    GUARD_FILLER = "destructive.filler";
    DISARMING = "destructive.disarming";
    RUN_VERBS = "destructive.run_verbs";
    RUN_REFERENTS = "destructive.run_referents";
    IDIOMS = "destructive.idioms";
    PASSIVE_GUARDS = "destructive.passive_guards";
    PASSIVE_AUX = "destructive.passive_aux";
    CODE_EDITS = "destructive.code_edits";
    MENTIONS = "destructive.mentions";
    CODE_CONTEXT = "destructive.code_context";
    CODE_FILLER = "destructive.code_filler";
    CASE_CONNECTIVES = "destructive.case_connectives";
    CASE_ACTORS = "destructive.case_actors";
    NARRATIVE_VERBS = "destructive.narrative_verbs";
    NARRATORS = "destructive.narrators";
    AGAIN = "destructive.again";
    DESCRIBING_VERBS = "destructive.describing_verbs";
    ARTIFACTS = "destructive.artifacts";
    DOC_THINGS = "destructive.doc_things";
    FIXES = "destructive.fixes";
    CASE_VERBS = "destructive.case_verbs";
    REQUIREMENTS = "destructive.requirements";
    APPROVALS = "destructive.approvals";
    /// Who speaks or is spoken to: a requirement they state is a request.
    SPEAKERS = "destructive.speakers";
    /// Words that join a second request to the first.
    JOINERS = "destructive.joiners";
    LAPSED = "destructive.lapsed";
    /// Negations after a finding that deny it happens ("… never executes").
    DENIALS = "destructive.denials";
    /// Words before "not" that make it a denial ("must not").
    DENIAL_MODALS = "destructive.denial_modals";
    /// Words after a denial that make it a consequence ("can't be undone").
    CONSEQUENCES = "destructive.consequences";
    /// Subjects other than the finding ("… we can't wait").
    SUBJECTS = "destructive.subjects";

    // mood.toml: reports of finished work.
    MOOD_SUBJECTS = "mood.subjects";
    MOOD_AUX = "mood.aux";
    MOOD_QUESTION_OPENERS = "mood.question_openers";
    MOOD_LEAD_INS = "mood.lead_ins";
    MOOD_DONE = "mood.done";
    MOOD_FINITE = "mood.finite";
    MOOD_PASSIVE_AUX = "mood.passive_aux";
    MOOD_MODALS = "mood.modals";
    MOOD_DIRECTIVES = "mood.directives";
    MOOD_CLAUSE_JOINERS = "mood.clause_joiners";

    // commands.toml: the words around commands.
    WRAPPERS = "commands.wrappers";
    ARG_ENDERS = "commands.arg_enders";
    OWN_SUBCOMMANDS = "commands.own_subcommands";
    RM_FILLER = "commands.rm_filler";
    MIGRATION_VERBS = "commands.migration_verbs";
    MIGRATION_SCOPES = "commands.migration_scopes";
    ARTIFACT_NAMES = "commands.artifact_names";
    ARTIFACT_ENDINGS = "commands.artifact_endings";
    DATA_ENDINGS = "commands.data_endings";
    DATA_NAMES = "commands.data_names";
    BROAD_PATHS = "commands.broad_paths";
    TEMP_DIRS = "commands.temp_dirs";
    CRITICAL_FILES = "commands.critical_files";
    SUBCOMMAND_NAMES = "commands.subcommand_names";
    GENERIC_DESTROYERS = "commands.generic_destroyers";
    GENERIC_REMOVERS = "commands.generic_removers";
    GENERIC_GUARDS = "commands.generic_guards";
    PROSE_VERBS = "commands.prose_verbs";
    PROSE_SUBJECTS = "commands.prose_subjects";
    GENERIC_STORES = "commands.generic_stores";
    GENERIC_SWEEPING = "commands.generic_sweeping";
    GIT_VALUE_OPTIONS = "commands.git_value_options";
    SHARED_BRANCHES = "commands.shared_branches";
    GIT_RM_BROAD = "commands.git_rm_broad";
    DISK_DEVICES = "commands.disk_devices";
    OPEN_MODES = "commands.open_modes";
    ROOT_PATHS = "commands.root_paths";
    SYSTEM_DIRS = "commands.system_dirs";
    SYSTEM_PATHS = "commands.system_paths";
    FIND_EXEC = "commands.find_exec";
    FIND_PATTERNS = "commands.find_patterns";
    KUBECTL_WIDE_KINDS = "commands.kubectl_wide_kinds";
    DOCKER_MASS_OPS = "commands.docker_mass_ops";
    EVAL_OPTIONS = "commands.eval_options";
    LOOP_WORDS = "commands.loop_words";
    TREE_DELETERS = "commands.tree_deleters";
    DOWNLOADERS = "commands.downloaders";
    DOWNLOADERS_ANY_CASE = "commands.downloaders_any_case";
    SHELLS = "commands.shells";
    OUTPUT_OPTIONS = "commands.output_options";
    STATEMENT_KEYWORDS = "commands.statement_keywords";
    SQL_DROP_OBJECTS = "commands.sql_drop_objects";
    STATEMENT_TAILS = "commands.statement_tails";
}

/// Repeat measure: spelling variants and synonyms folded before comparison.
pub(crate) static REPEAT_SYNONYMS: WordMap = WordMap::new("repeat.synonym.");
/// Repeat measure: interchangeable words (`rules/thesaurus.toml`), folded by stem.
pub(crate) static REPEAT_SAME: WordMap = WordMap::new("repeat.same.");

/// Irregular past forms and participles folded into their base form.
pub(crate) static IRREGULAR_PAST: WordMap = WordMap::new("irregular.");

/// Status: contraction endings folded into the word they stand for ("'s" reads as "is").
pub(crate) static CONTRACTIONS: WordMap = WordMap::new("status.contraction.");

/// Status: chat shorthand folded into the word it stands for ("r" reads as "are").
pub(crate) static TEXTING: WordMap = WordMap::new("status.texting.");

/// Every declared map, for the tests.
#[cfg(test)]
const ALL_MAPS: &[&WordMap] = &[
    &REPEAT_SYNONYMS,
    &REPEAT_SAME,
    &IRREGULAR_PAST,
    &CONTRACTIONS,
    &TEXTING,
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn embedded_rule_files_parse() {
        if let Err(e) = Lexicon::parse(EMBEDDED) {
            panic!("{e}");
        }
    }

    #[test]
    fn every_declared_list_is_in_a_file_and_every_file_list_is_declared() {
        let lex = Lexicon::parse(EMBEDDED).unwrap();
        let declared: HashSet<&str> = ALL.iter().map(|l| l.key).collect();
        for key in &declared {
            assert!(lex.list(key).is_some(), "no list `{key}` in the rule files");
        }
        let mapped = |key: &str| ALL_MAPS.iter().any(|m| key.starts_with(m.prefix));
        for key in lex.lists.keys() {
            assert!(
                declared.contains(key.as_str()) || mapped(key),
                "list `{key}` is in a rule file but no code reads it"
            );
        }
        assert_eq!(declared.len(), ALL.len(), "a key is declared twice");
    }

    #[test]
    fn every_map_has_lists_and_folds_each_word_once() {
        for map in ALL_MAPS {
            let pairs = map.pairs();
            assert!(
                !pairs.is_empty(),
                "no list `{}…` in the rule files",
                map.prefix
            );
            for two in pairs.windows(2) {
                assert!(
                    two[0].0 != two[1].0,
                    "{:?} is in `{}{}` and `{}{}`",
                    two[0].0,
                    map.prefix,
                    two[0].1,
                    map.prefix,
                    two[1].1
                );
            }
            assert!(pairs.iter().all(|(_, t)| !t.is_empty()));
            let (w, t) = pairs[0];
            assert_eq!(map.get(w), Some(t));
        }
    }

    #[test]
    fn bad_files_fail_with_a_clear_message() {
        let cases = [
            ("[lists]\nx = []", "f.toml: list `x` is empty"),
            (
                "[lists]\nx = [\"a\", \"a\"]",
                "f.toml: list `x`: \"a\" is listed twice",
            ),
            ("[lists]\nx = [\" a\"]", "padded"),
            ("[lists]\nx = 3", "f.toml: "),
            ("[listz]\n", "unknown field"),
            (
                "[[command]]\nnames = [\"x\"]\njudge = \"always\"",
                "[[command]] #1: judge `always` needs a `detail`",
            ),
            (
                "[[command]]\nnames = [\"x\"]\njudge = \"arg\"\ndetail = \"d\"",
                "`args`/`arg_prefixes` go with judge `arg`",
            ),
            (
                "[[command]]\nnames = []\njudge = \"rm\"",
                "`names` must list",
            ),
        ];
        for (text, want) in cases {
            let e = Lexicon::parse(&[("f.toml", text)]).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let twice = Lexicon::parse(&[("a", "[lists]\nx = [\"a\"]"), ("b", "[lists]\nx = [\"b\"]")]);
        assert!(twice.unwrap_err().contains("`x` is defined twice"));
    }

    #[test]
    fn fold_lowers_ascii_and_unicode() {
        assert_eq!(fold("Fix ÉTÉ Now"), "fix été now");
        assert_eq!(fold("README.md"), "readme.md");
    }
}

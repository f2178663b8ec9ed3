//! Rule manifests: the TOML schema (parsed strictly, `deny_unknown_fields`), its validation,
//! and the compiled form the engine runs. One manifest per agent CLI.
//!
//! A manifest says how to recognise its CLI (`[[identify]]`, weighted), where the CLI's input
//! box sits on screen (`[layout]`), which screen states its rules map to (`[[rules]]`, highest
//! `priority` first) and where to read a permission's tool, action and options or a limit's
//! reset time (`[[extract]]`). Every regex is compiled here, once; evaluation lives in
//! `engine`, screen geometry in `screen`.
//!
//! Schema, by example:
//!
//! ```toml
//! id = "claude"            # manifest id; rule ids print as `claude/<rule>`
//! version = 3              # bump on every edit
//! agent = "claude"         # the agent kind this manifest reports
//! note = "Claude Code 2.1.197"  # which CLI version the rules were written against
//! verified = true          # checked against real captures (false: written from docs)
//!
//! [layout]
//! input_prompt = '^❯[ \x{a0}]?'   # opens the input box; text after the match is typed
//! input_framed = true             # the box sits between two horizontal rules
//! turn_start = '^❯[ \x{a0}]\S'    # a user turn echoed in the transcript
//!
//! [[identify]]
//! id = "title"
//! weight = 3
//! region = "title"
//! any = ['Claude Code']
//!
//! [[rules]]
//! id = "busy-footer"
//! state = "working"
//! priority = 80
//! region = "footer"       # named screen region (see `Region`)
//! last = 3                # only the last 3 non-blank lines of it (or `first = N`)
//! any = ['esc to interrupt']
//! not = ['…']             # no selected line may match
//! note = "footer while a turn runs (2.1.197)"
//! [[rules.and]]           # further clauses, each on its own region, all must hold
//! region = "input"
//! present = true
//!
//! [[extract]]             # where a permission's details or a limit's reset time are
//! field = "action"        # limit_reset | tool | action | option
//! region = "after_last_rule"
//! first = 3
//! block = true            # keep the lines below the match that are indented as deep
//! pattern = '^ {3}(?P<value>\S.*)$'
//! ```

use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use super::{AgentKind, PaneState};
use crate::error::{Error, Result};

/// Largest manifest accepted, in bytes.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;
const MAX_RULES: usize = 256;
const MAX_PATTERNS: usize = 64;
const MAX_PATTERN_LEN: usize = 1024;
/// Compiled-program cap per regex: keeps a hostile override directory from exhausting memory.
const REGEX_SIZE_LIMIT: usize = 512 * 1024;

/// A named part of the screen a rule looks at. The input-box regions come from the
/// manifest's own `[layout]`; `shell_prompt` and `shell_output` come from the `shell` manifest's
/// layout (that is how agent manifests see the shell an exited CLI left behind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Region {
    /// Every line of the live screen (never the scrollback above it).
    Screen,
    /// Lines below the last full-width horizontal rule; absent when the screen has none.
    AfterLastRule,
    /// The text typed into the input box, ghost text removed; absent when no box is found.
    Input,
    /// Lines above the input box (the spinner and the end of the transcript).
    AboveInput,
    /// Lines below the input box.
    Footer,
    /// The visible part of the last turn: from the last `turn_start` line (exclusive) down
    /// to the input box.
    LastTurn,
    /// The pane title.
    Title,
    /// `pane_current_command`.
    Command,
    /// The line the cursor is on.
    CursorLine,
    /// The shell prompt at the bottom of the screen, as the `shell` manifest finds it: the
    /// text typed after the prompt.
    ShellPrompt,
    /// What the last shell command printed: the lines between the previous shell prompt and
    /// the one at the bottom.
    ShellOutput,
}

impl Region {
    /// The name manifests use.
    pub fn name(self) -> &'static str {
        match self {
            Region::Screen => "screen",
            Region::AfterLastRule => "after_last_rule",
            Region::Input => "input",
            Region::AboveInput => "above_input",
            Region::Footer => "footer",
            Region::LastTurn => "last_turn",
            Region::Title => "title",
            Region::Command => "command",
            Region::CursorLine => "cursor_line",
            Region::ShellPrompt => "shell_prompt",
            Region::ShellOutput => "shell_output",
        }
    }
}

/// What an `[[extract]]` entry fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtractField {
    /// `Detection::limit_reset`.
    LimitReset,
    /// `PermissionRequest::tool`.
    Tool,
    /// `PermissionRequest::action`.
    Action,
    /// One entry of `PermissionRequest::options` per matching line (wrapped lines joined).
    Option,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    id: String,
    version: u32,
    agent: AgentKind,
    note: String,
    #[serde(default)]
    verified: bool,
    #[serde(default)]
    layout: RawLayout,
    #[serde(default)]
    identify: Vec<RawRule>,
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    extract: Vec<RawExtract>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayout {
    input_prompt: Option<String>,
    #[serde(default)]
    input_framed: bool,
    #[serde(default)]
    input_at_bottom: bool,
    input_search: Option<usize>,
    input_continuation: Option<String>,
    input_exclude: Option<String>,
    input_trim: Option<String>,
    #[serde(default)]
    placeholders: Vec<String>,
    turn_start: Option<String>,
}

/// A rule as written: its own keys, and its first clause's keys beside them (`clause`,
/// checked against [`RawClause`] when the rule is compiled, so an unknown key is still an
/// error naming it; serde cannot deny unknown fields across a flattened struct).
#[derive(Debug, Deserialize)]
struct RawRule {
    id: String,
    state: Option<PaneState>,
    #[serde(default)]
    error: bool,
    #[serde(default)]
    priority: i32,
    weight: Option<u32>,
    confidence: Option<f32>,
    note: Option<String>,
    when: Option<Vec<PaneState>>,
    #[serde(default)]
    and: Vec<RawClause>,
    #[serde(flatten)]
    clause: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClause {
    region: Region,
    first: Option<usize>,
    last: Option<usize>,
    #[serde(default)]
    joined: bool,
    present: Option<bool>,
    empty: Option<bool>,
    #[serde(default)]
    any: Vec<String>,
    #[serde(default)]
    all: Vec<String>,
    #[serde(default)]
    not: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExtract {
    field: ExtractField,
    region: Region,
    first: Option<usize>,
    last: Option<usize>,
    #[serde(default)]
    joined: bool,
    pattern: String,
    #[serde(default)]
    from_bottom: bool,
    #[serde(default)]
    block: bool,
    between: Option<String>,
}

/// Where an input box is and how to read it.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub input_prompt: Option<Regex>,
    pub input_framed: bool,
    pub input_at_bottom: bool,
    pub input_search: usize,
    pub input_continuation: Option<Regex>,
    pub input_exclude: Option<Regex>,
    pub input_trim: Option<Regex>,
    pub placeholders: Vec<Regex>,
    pub turn_start: Option<Regex>,
}

/// Which lines of a region a clause or extractor sees.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Selection {
    pub region: Region,
    pub first: Option<usize>,
    pub last: Option<usize>,
    pub joined: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Clause {
    pub sel: Selection,
    pub present: Option<bool>,
    pub empty: Option<bool>,
    pub any: Vec<Regex>,
    pub all: Vec<Regex>,
    pub not: Vec<Regex>,
}

#[derive(Debug, Clone)]
pub(crate) struct Rule {
    /// `manifest/rule`; identification rules are `manifest/id:rule`.
    pub full_id: String,
    pub state: Option<PaneState>,
    pub error: bool,
    pub priority: i32,
    pub weight: u32,
    pub confidence: f32,
    /// States in which an `error` rule sets the flag.
    pub when: Vec<PaneState>,
    pub clauses: Vec<Clause>,
    /// What the rule is for and which CLI version it was written against.
    pub note: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Extract {
    pub field: ExtractField,
    pub sel: Selection,
    pub pattern: Regex,
    pub from_bottom: bool,
    /// The value runs on over the following lines indented at least as deep (blank lines
    /// included), the way a multi-line command is shown under its title.
    pub block: bool,
    /// The value is every line between the first two lines matching this (a command drawn
    /// between two dashed rules); `pattern` must match its first line.
    pub between: Option<Regex>,
}

/// A validated manifest with every regex compiled.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub id: String,
    pub version: u32,
    pub agent: AgentKind,
    pub note: String,
    pub verified: bool,
    pub layout: Layout,
    pub identify: Vec<Rule>,
    /// Sorted by priority, highest first; equal priorities keep file order.
    pub rules: Vec<Rule>,
    pub extract: Vec<Extract>,
}

/// Default confidence of a state rule that does not set one.
const DEFAULT_CONFIDENCE: f32 = 0.9;
/// How many bottom non-blank lines are searched for the input box by default.
const DEFAULT_INPUT_SEARCH: usize = 12;

impl Manifest {
    /// Parses and compiles one manifest. `name` (a file name or `embedded:<id>`) is only
    /// used in error messages.
    pub fn parse(name: &str, text: &str) -> Result<Manifest> {
        let bad = |why: String| Error::Manifest {
            name: name.to_string(),
            why,
        };
        if text.len() > MAX_MANIFEST_BYTES {
            return Err(bad(format!(
                "{} bytes is over the {MAX_MANIFEST_BYTES}-byte limit",
                text.len()
            )));
        }
        let raw: RawManifest = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        compile(raw).map_err(bad)
    }
}

fn compile(raw: RawManifest) -> std::result::Result<Manifest, String> {
    check_id("manifest id", &raw.id)?;
    if raw.version == 0 {
        return Err("version must be 1 or more".into());
    }
    if raw.note.trim().is_empty() {
        return Err("note must say which CLI version the rules were written against".into());
    }
    if raw.rules.len() + raw.identify.len() + raw.extract.len() > MAX_RULES {
        return Err(format!("more than {MAX_RULES} rules"));
    }
    let layout = compile_layout(&raw.layout)?;
    let has_input = layout.input_prompt.is_some();

    let mut seen = std::collections::HashSet::new();
    let mut identify = Vec::with_capacity(raw.identify.len());
    for r in &raw.identify {
        if !seen.insert(format!("identify/{}", r.id)) {
            return Err(format!("duplicate identify id {:?}", r.id));
        }
        if r.state.is_some() || r.error || r.priority != 0 || r.when.is_some() {
            return Err(format!(
                "identify {:?}: takes a weight, not state/error/priority/when",
                r.id
            ));
        }
        let weight = match r.weight {
            Some(w) if w > 0 && w <= 100 => w,
            _ => return Err(format!("identify {:?}: weight must be 1..=100", r.id)),
        };
        let mut rule = compile_rule(&raw.id, r, has_input)?;
        rule.weight = weight;
        // Printed apart from the state rules, which may share an id.
        rule.full_id = format!("{}/id:{}", raw.id, r.id);
        identify.push(rule);
    }

    let mut rules = Vec::with_capacity(raw.rules.len());
    for r in &raw.rules {
        if !seen.insert(format!("rule/{}", r.id)) {
            return Err(format!("duplicate rule id {:?}", r.id));
        }
        if r.weight.is_some() {
            return Err(format!("rule {:?}: weight belongs to [[identify]]", r.id));
        }
        if r.state.is_none() && !r.error {
            return Err(format!(
                "rule {:?}: needs a state, `error = true`, or both",
                r.id
            ));
        }
        rules.push(compile_rule(&raw.id, r, has_input)?);
    }
    // Stable sort: equal priorities keep the order they were written in.
    rules.sort_by_key(|r| std::cmp::Reverse(r.priority));

    let mut extract = Vec::with_capacity(raw.extract.len());
    for (i, e) in raw.extract.iter().enumerate() {
        let what = format!("extract #{}", i + 1);
        let sel = selection(&what, e.region, e.first, e.last, e.joined, has_input)?;
        if e.block && (e.from_bottom || e.joined) {
            return Err(format!(
                "{what}: `block` reads downwards from the first match; it cannot be `from_bottom` or `joined`"
            ));
        }
        if e.between.is_some() && (e.block || e.from_bottom || e.joined) {
            return Err(format!(
                "{what}: `between` reads the lines between two markers; it cannot be `block`, `from_bottom` or `joined`"
            ));
        }
        let between = e
            .between
            .as_deref()
            .map(|b| compile_regex(&what, b))
            .transpose()?;
        let pattern = compile_regex(&what, &e.pattern)?;
        if !pattern.capture_names().any(|n| n == Some("value")) {
            return Err(format!(
                "{what}: pattern {:?} needs a named group (?P<value>…)",
                e.pattern
            ));
        }
        extract.push(Extract {
            field: e.field,
            sel,
            pattern,
            from_bottom: e.from_bottom,
            block: e.block,
            between,
        });
    }

    Ok(Manifest {
        id: raw.id,
        version: raw.version,
        agent: raw.agent,
        note: raw.note,
        verified: raw.verified,
        layout,
        identify,
        rules,
        extract,
    })
}

fn check_id(what: &str, id: &str) -> std::result::Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} {id:?}: use 1-64 characters of a-z, 0-9, '-' and '_'"
        ))
    }
}

fn compile_layout(raw: &RawLayout) -> std::result::Result<Layout, String> {
    let opt = |what: &str, p: &Option<String>| -> std::result::Result<Option<Regex>, String> {
        p.as_deref()
            .map(|p| compile_regex(&format!("layout.{what}"), p))
            .transpose()
    };
    let input_prompt = opt("input_prompt", &raw.input_prompt)?;
    if input_prompt.is_none()
        && (raw.input_framed
            || raw.input_at_bottom
            || raw.input_continuation.is_some()
            || raw.input_exclude.is_some()
            || raw.input_trim.is_some()
            || !raw.placeholders.is_empty())
    {
        return Err("layout: input_* settings need layout.input_prompt".into());
    }
    if raw.input_framed && raw.input_at_bottom {
        return Err("layout: input_framed and input_at_bottom exclude each other".into());
    }
    let input_search = raw.input_search.unwrap_or(DEFAULT_INPUT_SEARCH);
    if input_search == 0 || input_search > 200 {
        return Err("layout.input_search must be 1..=200".into());
    }
    if raw.placeholders.len() > MAX_PATTERNS {
        return Err(format!("layout.placeholders: more than {MAX_PATTERNS}"));
    }
    Ok(Layout {
        input_prompt,
        input_framed: raw.input_framed,
        input_at_bottom: raw.input_at_bottom,
        input_search,
        input_continuation: opt("input_continuation", &raw.input_continuation)?,
        input_exclude: opt("input_exclude", &raw.input_exclude)?,
        input_trim: opt("input_trim", &raw.input_trim)?,
        placeholders: raw
            .placeholders
            .iter()
            .map(|p| compile_regex("layout.placeholders", p))
            .collect::<std::result::Result<_, _>>()?,
        turn_start: opt("turn_start", &raw.turn_start)?,
    })
}

fn compile_rule(manifest: &str, r: &RawRule, has_input: bool) -> std::result::Result<Rule, String> {
    check_id("rule id", &r.id)?;
    let what = format!("rule {:?}", r.id);
    let confidence = r.confidence.unwrap_or(DEFAULT_CONFIDENCE);
    if !(0.0..=1.0).contains(&confidence) {
        return Err(format!("{what}: confidence must be within 0..=1"));
    }
    if r.when.is_some() && !r.error {
        return Err(format!("{what}: `when` only applies to error rules"));
    }
    let head: RawClause = toml::Value::Table(r.clause.clone())
        .try_into()
        .map_err(|e| format!("{what}: {e}"))?;
    let mut clauses = vec![compile_clause(&what, &head, has_input)?];
    for c in &r.and {
        clauses.push(compile_clause(&what, c, has_input)?);
    }
    Ok(Rule {
        full_id: format!("{manifest}/{}", r.id),
        state: r.state,
        error: r.error,
        priority: r.priority,
        weight: 0,
        confidence,
        when: r
            .when
            .clone()
            .unwrap_or_else(|| vec![PaneState::Idle, PaneState::Draft, PaneState::Exited]),
        clauses,
        note: r.note.clone().unwrap_or_default(),
    })
}

fn selection(
    what: &str,
    region: Region,
    first: Option<usize>,
    last: Option<usize>,
    joined: bool,
    has_input: bool,
) -> std::result::Result<Selection, String> {
    if first.is_some() && last.is_some() {
        return Err(format!("{what}: use `first` or `last`, not both"));
    }
    if first == Some(0) || last == Some(0) {
        return Err(format!("{what}: `first`/`last` must be 1 or more"));
    }
    let needs_input = matches!(
        region,
        Region::Input | Region::AboveInput | Region::Footer | Region::LastTurn
    );
    if needs_input && !has_input {
        return Err(format!(
            "{what}: region {} needs layout.input_prompt in this manifest",
            region.name()
        ));
    }
    Ok(Selection {
        region,
        first,
        last,
        joined,
    })
}

fn compile_clause(
    what: &str,
    c: &RawClause,
    has_input: bool,
) -> std::result::Result<Clause, String> {
    let sel = selection(what, c.region, c.first, c.last, c.joined, has_input)?;
    if c.any.is_empty()
        && c.all.is_empty()
        && c.not.is_empty()
        && c.present.is_none()
        && c.empty.is_none()
    {
        return Err(format!(
            "{what}: a clause needs at least one of any/all/not/present/empty"
        ));
    }
    if c.present == Some(false)
        && (!c.any.is_empty() || !c.all.is_empty() || !c.not.is_empty() || c.empty.is_some())
    {
        return Err(format!(
            "{what}: `present = false` cannot be combined with matchers"
        ));
    }
    let list = |pats: &[String]| -> std::result::Result<Vec<Regex>, String> {
        if pats.len() > MAX_PATTERNS {
            return Err(format!(
                "{what}: more than {MAX_PATTERNS} patterns in a list"
            ));
        }
        pats.iter().map(|p| compile_regex(what, p)).collect()
    };
    Ok(Clause {
        sel,
        present: c.present,
        empty: c.empty,
        any: list(&c.any)?,
        all: list(&c.all)?,
        not: list(&c.not)?,
    })
}

fn compile_regex(what: &str, pattern: &str) -> std::result::Result<Regex, String> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(format!(
            "{what}: pattern longer than {MAX_PATTERN_LEN} bytes"
        ));
    }
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("{what}: bad regex {pattern:?}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MINIMAL: &str = r#"
id = "demo"
version = 1
agent = "shell"
note = "test manifest"
[[rules]]
id = "any-text"
state = "working"
region = "screen"
any = ['\S']
"#;

    fn err(text: &str) -> String {
        match Manifest::parse("demo.toml", text) {
            Ok(_) => panic!("manifest should have been refused:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn minimal_manifest_compiles() {
        let m = Manifest::parse("demo.toml", MINIMAL).unwrap();
        assert_eq!(m.id, "demo");
        assert_eq!(m.rules.len(), 1);
        assert_eq!(m.rules[0].full_id, "demo/any-text");
        assert!((m.rules[0].confidence - DEFAULT_CONFIDENCE).abs() < f32::EPSILON);
    }

    #[test]
    fn unknown_field_is_refused_with_its_name() {
        let e = err(&MINIMAL.replace("any = ", "colour = 'red'\nany = "));
        assert!(e.contains("demo.toml") && e.contains("colour"), "{e}");
        let e = err(&MINIMAL.replace("any = ", "priorty = 2\nany = "));
        assert!(e.contains("demo.toml") && e.contains("priorty"), "{e}");
    }

    #[test]
    fn bad_regex_names_rule_and_pattern() {
        let e = err(&MINIMAL.replace(r"'\S'", "'(unclosed'"));
        assert!(e.contains("any-text") && e.contains("(unclosed"), "{e}");
    }

    #[test]
    fn unknown_region_and_state_are_refused() {
        let e = err(&MINIMAL.replace("\"screen\"", "\"everywhere\""));
        assert!(e.contains("everywhere"), "{e}");
        let e = err(&MINIMAL.replace("\"working\"", "\"busy\""));
        assert!(e.contains("busy"), "{e}");
    }

    #[test]
    fn rule_without_state_or_error_is_refused() {
        let e = err(&MINIMAL.replace("state = \"working\"\n", ""));
        assert!(e.contains("needs a state"), "{e}");
    }

    #[test]
    fn clause_without_condition_is_refused() {
        let e = err(&MINIMAL.replace("any = ['\\S']", ""));
        assert!(e.contains("at least one of"), "{e}");
    }

    #[test]
    fn input_regions_need_a_layout() {
        let e = err(&MINIMAL.replace("\"screen\"", "\"footer\""));
        assert!(e.contains("input_prompt"), "{e}");
    }

    #[test]
    fn duplicate_rule_ids_are_refused() {
        let twice = format!(
            "{MINIMAL}\n[[rules]]\nid = \"any-text\"\nstate = \"idle\"\nregion = \"screen\"\nempty = true\n"
        );
        assert!(err(&twice).contains("duplicate"));
    }

    #[test]
    fn oversized_manifest_is_refused_before_parsing() {
        let big = format!("{MINIMAL}\n#{}\n", "x".repeat(MAX_MANIFEST_BYTES));
        assert!(err(&big).contains("limit"));
    }

    #[test]
    fn missing_note_and_bad_ids_are_refused() {
        assert!(err(&MINIMAL.replace("note = \"test manifest\"", "note = \" \"")).contains("note"));
        assert!(err(&MINIMAL.replace("id = \"demo\"", "id = \"Demo X\"")).contains("Demo X"));
    }

    #[test]
    fn extract_needs_a_value_group() {
        let text = format!(
            "{MINIMAL}\n[[extract]]\nfield = \"limit_reset\"\nregion = \"screen\"\npattern = 'resets (.+)'\n"
        );
        assert!(err(&text).contains("(?P<value>"));
    }

    #[test]
    fn not_toml_at_all_is_an_error_not_a_panic() {
        assert!(err("\u{0}\u{1}[[[").contains("demo.toml"));
        assert!(err("").contains("demo.toml"));
    }

    #[test]
    fn rules_are_sorted_by_priority_keeping_file_order_on_ties() {
        let text = r#"
id = "demo"
version = 1
agent = "shell"
note = "n"
[[rules]]
id = "low"
state = "idle"
priority = 1
region = "screen"
empty = true
[[rules]]
id = "high-a"
state = "working"
priority = 9
region = "screen"
any = ['a']
[[rules]]
id = "high-b"
state = "working"
priority = 9
region = "screen"
any = ['b']
"#;
        let m = Manifest::parse("demo.toml", text).unwrap();
        let ids: Vec<_> = m.rules.iter().map(|r| r.full_id.as_str()).collect();
        assert_eq!(ids, ["demo/high-a", "demo/high-b", "demo/low"]);
    }
}

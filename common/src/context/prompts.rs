//! The model's side jobs and its replies: prompt builders for plan generation and for
//! auto-detecting a session's project and goal, and tolerant parsers for what a small
//! model sends back (numbering, bullets, code fences, JSON or not, reasoning blocks,
//! preambles). All pure.
//!
//! The turn prompt itself is [`super::build_context`]; regeneration after a gate
//! refusal goes through [`super::ContextInput::rejections`], so it stays inside the
//! token budget.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chat::ChatMessage;
use super::redact::redact;
use super::terminal::{cap_chars, select_lines};

/// Plans have at most this many steps (the parser drops the rest).
pub const PLAN_MAX_STEPS: usize = 10;
/// A model's reply with fewer distinct steps than this is not a plan: one line, or a step
/// repeated eight times, does not decompose a goal.
pub const PLAN_MIN_STEPS: usize = 3;
/// Characters kept of one plan step.
pub const PLAN_STEP_CHARS: usize = 200;
/// Default cap on a cleaned reply, in characters.
pub const REPLY_MAX_CHARS: usize = 400;

const DETECT_SCREEN_LINES: usize = 80;
const SCREEN_LINE_CHARS: usize = 200;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad pattern {pattern:?}: {e}"))
}

// ---------------------------------------------------------------------------------------
// Plan generation

const PLAN_SYSTEM: &str = "You turn a software goal into a short plan for a coding agent working in a terminal. Reply with 5 to 8 numbered steps, one per line, in the order they should be done. Each step is one imperative instruction of at most 15 words, specific to the project. No preamble, no explanations, no code, nothing destructive.";

/// Messages asking the model to decompose `goal` into 5–8 steps. `screen`, when given,
/// is the pane as it is now (its last lines are included, redacted).
pub fn plan_messages(
    project: &str,
    goal: &str,
    path: &str,
    screen: Option<&str>,
) -> Vec<ChatMessage> {
    let mut user = String::new();
    if !project.trim().is_empty() {
        user.push_str(&format!("Project: {}\n", one_line(project, 80)));
    }
    if !path.trim().is_empty() {
        user.push_str(&format!("Path: {}\n", one_line(path, 160)));
    }
    user.push_str(&format!("Goal: {}\n", one_line(&redact(goal).0, 600)));
    if let Some(screen) = screen {
        let lines = select_lines(screen, 30, SCREEN_LINE_CHARS).lines;
        if !lines.is_empty() {
            user.push_str("\nThe terminal now shows:\n");
            user.push_str(&lines.join("\n"));
            user.push('\n');
        }
    }
    user.push_str("\nWrite the plan: 5 to 8 numbered steps, one per line.");
    vec![ChatMessage::system(PLAN_SYSTEM), ChatMessage::user(user)]
}

static NUMBERED: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^(?:\(?\d{1,2}[.):\]]|step\s*\d{1,2}\s*[:.)-]|#{1,6}\s*step\s*\d{1,2}\s*[:.)-]?)\s*")
});
static BULLET: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:[-*•·+‣▪◦]|-\s*\[[ xX]\])\s+"));
static INLINE_NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"(?:^|\s)\(?\d{1,2}[.)]\s+"));
static PREAMBLE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:sure|okay|ok|certainly|of course|here(?:'s| is| are)|below|this plan|the plan|plan|steps|note|i (?:will|would|'d|'ll))(?-u:\b)",
    )
});

/// The steps of a plan reply, at most [`PLAN_MAX_STEPS`]: numbered or bulleted lines
/// when there are any (prose around them is ignored), otherwise every line that reads
/// like an instruction; a JSON array (or `{"steps": [...]}`) is accepted too. Markers,
/// emphasis and quotes are stripped, duplicates dropped. Never fails: junk gives an
/// empty list.
pub fn parse_plan(reply: &str) -> Vec<String> {
    let text = strip_reasoning(reply);
    let text = strip_fence_lines(&text);
    if let Some(steps) = json_steps(&text) {
        return finish_steps(steps);
    }
    // A whole plan on one line: "1. read the code 2. fix it 3. test".
    let mut nonblank = text.lines().filter(|l| !l.trim().is_empty());
    if let (Some(only), None) = (nonblank.next(), nonblank.next()) {
        if INLINE_NUMBER.find_iter(only).count() >= 2 {
            return finish_steps(split_inline(only.trim()));
        }
    }
    let mut marked = Vec::new();
    let mut plain = Vec::new();
    // A marker alone on its line ("1." then the step on the next line).
    let mut open_marker = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(m) = NUMBERED.find(line).or_else(|| BULLET.find(line)) {
            let step = strip_numbering(&line[m.end()..]);
            open_marker = step.is_empty();
            if !open_marker {
                marked.push(step.to_string());
            }
        } else if std::mem::take(&mut open_marker) {
            marked.push(line.to_string());
        } else {
            plain.push(line.to_string());
        }
    }
    let steps = if !marked.is_empty() {
        marked
    } else {
        plain
            .into_iter()
            .filter(|l| !PREAMBLE.is_match(l) && !l.ends_with(':'))
            .collect()
    };
    finish_steps(steps)
}

/// "1.1.1. Write the lexer" and "1. 2. Write it" → "Write the lexer", "Write it": the
/// nested or doubled numbering small models emit after the first marker.
fn strip_numbering(step: &str) -> &str {
    static MORE: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:\d{1,2}(?:\.\d{1,2})*[.)]\s*)+"));
    let step = step.trim();
    match MORE.find(step) {
        Some(m) => step[m.end()..].trim(),
        None => step,
    }
}

/// "1. read the code 2. fix it 3. test" → ["read the code", "fix it", "test"].
fn split_inline(line: &str) -> Vec<String> {
    let starts: Vec<(usize, usize)> = INLINE_NUMBER
        .find_iter(line)
        .map(|m| (m.start(), m.end()))
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &(_, body))| {
            let end = starts.get(i + 1).map_or(line.len(), |&(s, _)| s);
            line[body..end].to_string()
        })
        .collect()
}

fn json_steps(text: &str) -> Option<Vec<String>> {
    let v = first_json(text, &['[', '{'])?;
    let arr = match &v {
        Value::Array(a) => a,
        Value::Object(o) => ["steps", "plan", "tasks"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_array))?,
        _ => return None,
    };
    let steps: Vec<String> = arr
        .iter()
        .filter_map(|item| match item {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => ["step", "title", "task", "description", "text"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_string)),
            _ => None,
        })
        .collect();
    (!steps.is_empty()).then_some(steps)
}

fn finish_steps(raw: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for step in raw {
        let step = strip_decoration(&step);
        let step = step.trim_end_matches([':', ';', ',']).trim();
        let words = step.split_whitespace().count();
        if words < 2 || !step.chars().any(char::is_alphabetic) {
            continue;
        }
        // "Here is the plan", "Here is the code": talk about the plan, not a step of it.
        if PREAMBLE.is_match(step) || degenerate(step) {
            continue;
        }
        let step = cap_chars(step, PLAN_STEP_CHARS);
        // The same step again, whatever its punctuation or case.
        if out.iter().any(|s| same_words(s, &step)) {
            continue;
        }
        out.push(step);
        if out.len() == PLAN_MAX_STEPS {
            break;
        }
    }
    out
}

/// Steps of a `--plan FILE`: one per line, blank lines and `#` comments ignored.
pub fn parse_plan_file(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| cap_chars(l, PLAN_STEP_CHARS))
        .collect()
}

/// Where a session's plan came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanSource {
    /// The model's reply held [`PLAN_MIN_STEPS`] or more distinct steps.
    Model,
    /// The reply was no plan; the steps were derived from the goal ([`goal_steps`]).
    Goal,
}

/// A plan and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<String>,
    pub source: PlanSource,
}

/// The plan in a model's reply to [`plan_messages`] — 3 to 10 distinct steps — or, when the
/// reply holds fewer (one line, junk, a step repeated), the steps [`goal_steps`] derives from
/// the goal.
pub fn plan_from_reply(reply: &str, goal: &str) -> Plan {
    plan_or_goal(parse_plan(reply), goal)
}

/// [`plan_from_reply`] for a reply to `request`, the [`plan_messages`] that were sent:
/// a line copied off the terminal the request showed (chrome glyphs) or out of the
/// request itself is no step. A small model shown a screen copies it back as often as
/// it plans.
pub fn plan_from_reply_guarded(reply: &str, goal: &str, request: &[ChatMessage]) -> Plan {
    let guard = EchoGuard::new(request, &[goal]);
    let steps = parse_plan(reply)
        .into_iter()
        .filter(|s| !starts_with_chrome(s) && !guard.echoes(s))
        .collect();
    plan_or_goal(steps, goal)
}

fn plan_or_goal(steps: Vec<String>, goal: &str) -> Plan {
    if steps.len() >= PLAN_MIN_STEPS {
        Plan {
            steps,
            source: PlanSource::Model,
        }
    } else {
        Plan {
            steps: goal_steps(goal),
            source: PlanSource::Goal,
        }
    }
}

/// A plan any goal supports, when no model wrote a usable one: understand the code the goal
/// touches, do the goal, test it, review the whole change. Each step names the goal, so a
/// fallback prompt built from it is specific to the session.
pub fn goal_steps(goal: &str) -> Vec<String> {
    let goal = one_line(goal, PLAN_STEP_CHARS - 80);
    let goal = goal.trim().trim_end_matches(['.', '!', ';', ',']).trim();
    if goal.is_empty() {
        return Vec::new();
    }
    vec![
        format!("Read the code that this goal touches and explain how it works now: {goal}."),
        format!("{goal}."),
        format!("Add or update tests covering this change ({goal}), run them and fix what fails."),
        format!("Run the whole test suite and the linters, and fix anything that this change ({goal}) broke."),
    ]
}

// ---------------------------------------------------------------------------------------
// Auto-detect

const DETECT_SYSTEM: &str = "You read the terminal screen of a coding-agent session and say which project it is and what the developer is working on. Reply with JSON only, in this form: {\"project\": \"short project name\", \"goal\": \"the goal as one imperative sentence\"}.";

/// Messages asking the model to infer the project and goal from a pane capture.
pub fn detect_messages(screen: &str, cwd: Option<&str>) -> Vec<ChatMessage> {
    let mut user = String::new();
    if let Some(cwd) = cwd.filter(|c| !c.trim().is_empty()) {
        user.push_str(&format!("Working directory: {}\n", one_line(cwd, 160)));
    }
    let lines = select_lines(screen, DETECT_SCREEN_LINES, SCREEN_LINE_CHARS).lines;
    user.push_str("Screen:\n");
    user.push_str(&lines.join("\n"));
    user.push_str(
        "\n\nWhich project is this and what is the goal? Answer with the JSON object only.",
    );
    vec![ChatMessage::system(DETECT_SYSTEM), ChatMessage::user(user)]
}

/// What auto-detect found; either part may be missing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    pub project: Option<String>,
    pub goal: Option<String>,
}

static KEY_LINE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?im)^[\s>*_#-]*["']?(project(?:[ _]name)?|repo(?:sitory)?|goal|task|objective)["']?[*_]*\s*[:=–-]\s*(.+)$"#,
    )
});

/// Parses an auto-detect reply: a JSON object anywhere in it (keys `project`/`name`/
/// `repo`, `goal`/`task`/`objective`), or `Project: …` / `Goal: …` lines. Placeholders
/// ("unknown", "n/a") count as missing.
pub fn parse_detect(reply: &str) -> Detected {
    let text = strip_reasoning(reply);
    let text = strip_fence_lines(&text);
    let mut found = Detected::default();
    if let Some(Value::Object(o)) = first_json(&text, &['{']) {
        let get = |keys: &[&str]| {
            o.iter()
                .find(|(k, v)| keys.contains(&k.to_ascii_lowercase().as_str()) && v.is_string())
                .and_then(|(_, v)| v.as_str())
                .map(str::to_string)
        };
        found.project = get(&["project", "project_name", "name", "repo", "repository"])
            .and_then(|p| detect_value(&p, 80));
        found.goal =
            get(&["goal", "task", "objective", "working_on"]).and_then(|g| detect_value(&g, 300));
    }
    for c in KEY_LINE.captures_iter(&text) {
        let key = c.get(1).map_or("", |m| m.as_str()).to_ascii_lowercase();
        let value = c.get(2).map_or("", |m| m.as_str());
        if key.starts_with("project") || key.starts_with("repo") {
            if found.project.is_none() {
                found.project = detect_value(value, 80);
            }
        } else if found.goal.is_none() {
            found.goal = detect_value(value, 300);
        }
    }
    found
}

fn detect_value(raw: &str, max: usize) -> Option<String> {
    let v = strip_decoration(raw);
    let v = v.trim_end_matches([',', ';']).trim();
    let lower = v.to_ascii_lowercase();
    let placeholder = matches!(
        lower.as_str(),
        "" | "unknown" | "n/a" | "na" | "none" | "null" | "?" | "unclear" | "not sure" | "tbd"
    );
    if placeholder || !v.chars().any(char::is_alphanumeric) {
        return None;
    }
    Some(cap_chars(&one_line(v, usize::MAX), max))
}

// ---------------------------------------------------------------------------------------
// Reply cleaning

static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:next\s+)?(?:prompt|instruction|message|command|input|reply|response|answer)|developer|user|me|you|the developer(?: types)?|i (?:would )?type)\s*[:=]\s*",
    )
});
static OPENER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:sure|okay|ok|certainly|of course|alright|got it|understood|great)(?-u:\b)[,.!:]*\s*",
    )
});
static LIST_MARK: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:[-*•>]+|\d{1,2}[.)])\s+"));

/// A step number: `1.`, `2)`.
static STEP_NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"^\d{1,2}[.)]\s+"));
/// A markdown heading: `## Output`, `### 1.`, a bare `#`.
static HEADING: LazyLock<Regex> = LazyLock::new(|| re(r"^#{1,6}(?:\s+|$)"));
/// A small model speaking as the assistant rather than as the developer: "I'm here to
/// help", "I'm ready to help. What's the next step?", "I can't write the one task…".
static ASSISTANT_VOICE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?-u:\b)i(?:'m| am|'ll| will|'d| would| can)(?-u:\b).{0,24}?(?-u:\b)(?:help|assist|guide|happy to|glad to|excited to|ready to)(?-u:\b)",
    )
});

/// What a reply may not merely copy: the briefing it answered. A reply line whose words all
/// stand, in order, inside one briefing line ("Write the one instruction the developer
/// types next…", "Active: …", a line of the terminal excerpt) is an echo, not an
/// instruction — small models do this constantly. Copying the goal, a task title or an
/// earlier prompt is allowed here (an instruction may be exactly the active task; the gate
/// judges repeats).
#[derive(Debug, Clone, Default)]
pub struct EchoGuard {
    lines: Vec<String>,
    allowed: Vec<String>,
}

impl EchoGuard {
    /// `briefing`: the messages the model answered; `allowed`: texts a reply may copy.
    pub fn new(briefing: &[ChatMessage], allowed: &[&str]) -> Self {
        let lines = briefing
            .iter()
            .flat_map(|m| m.content.lines())
            .map(echo_words)
            .filter(|l| l.len() > 2)
            .collect();
        let allowed = allowed
            .iter()
            .map(|a| echo_words(a))
            .filter(|a| a.len() > 2)
            .collect();
        EchoGuard { lines, allowed }
    }

    /// Whether `line` (two words or more) is a copy of part of one briefing line, or — five
    /// words or more — a near copy: at least four in five of its words are that line's
    /// ("Write the one instruction the developer types next into the terminal.").
    pub fn echoes(&self, line: &str) -> bool {
        let words = echo_words(line);
        let count = words.matches(' ').count().saturating_sub(1);
        if count < 2 {
            return false;
        }
        if self.allowed.iter().any(|a| a.contains(&words)) {
            return false;
        }
        self.lines
            .iter()
            .any(|b| b.contains(&words) || (count >= 5 && 5 * shared_words(&words, b) >= 4 * count))
    }
}

/// Lowercase words joined by single spaces, padded with one space on each side, so that
/// containment is by whole words. Digits read as `0`: a copy with its numbers changed
/// ("Done: 1 of 1" for the briefing's "Done: 0 of 1") is still a copy.
fn echo_words(text: &str) -> String {
    let mut out = String::from(" ");
    for w in words(text) {
        out.extend(w.chars().flat_map(char::to_lowercase).map(|c| {
            if c.is_ascii_digit() {
                '0'
            } else {
                c
            }
        }));
        out.push(' ');
    }
    out
}

/// The words of `text`: its runs of letters and digits.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The same words, ignoring case and punctuation.
fn same_words(a: &str, b: &str) -> bool {
    words(a)
        .map(str::to_lowercase)
        .eq(words(b).map(str::to_lowercase))
}

/// How many of `line`'s words (both from [`echo_words`]) occur in `text`.
fn shared_words(line: &str, text: &str) -> usize {
    let have: std::collections::HashSet<&str> = text.split_whitespace().collect();
    line.split_whitespace().filter(|w| have.contains(w)).count()
}

/// A fragment of source code rather than words to type: a few words at most, a large share
/// of code punctuation (`f.write("""`, `-*- coding: utf-8 -*-`).
fn code_fragment(line: &str) -> bool {
    let words = words(line)
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count();
    let chars = line.chars().filter(|c| !c.is_whitespace()).count();
    let code = line
        .chars()
        .filter(|c| {
            matches!(
                c,
                '(' | ')' | '"' | '=' | '{' | '}' | ';' | '*' | '<' | '>' | '[' | ']'
            )
        })
        .count();
    words < 4 && chars > 0 && code * 100 >= chars * 15
}

/// A generation loop: some three-word run occurs three times or more ("a JSON payload with
/// a JSON payload with a JSON payload …", "--no-cache --no-cache --no-cache").
fn degenerate(step: &str) -> bool {
    let words: Vec<&str> = step.split_whitespace().collect();
    let mut seen: HashMap<[&str; 3], u32> = HashMap::new();
    words.windows(3).any(|w| {
        let n = seen.entry([w[0], w[1], w[2]]).or_insert(0);
        *n += 1;
        *n >= 3
    }) || words.windows(2).filter(|w| w[0] == w[1]).count() >= 2
}

/// A line that starts with terminal chrome — box drawing, block elements, the prompt and
/// tool glyphs coding-agent CLIs draw — was copied off the screen.
fn starts_with_chrome(line: &str) -> bool {
    line.chars().next().is_some_and(|c| {
        matches!(c, '\u{2500}'..='\u{259F}')
            || matches!(
                c,
                '❯' | '›'
                    | '⏺'
                    | '⎿'
                    | '✻'
                    | '✶'
                    | '✳'
                    | '✢'
                    | '⏵'
                    | '⏸'
                    | '▶'
                    | '◆'
                    | '●'
                    | '⚠'
            )
    })
}

/// The instruction in a model reply, ready for the gate: reasoning blocks and code
/// fences removed, preamble lines ("Here is the next instruction:") skipped, prefixes
/// ("Prompt:", "> ", "1. "), emphasis and surrounding quotes stripped, the first
/// instruction line kept, at most two sentences, whitespace collapsed, capped at
/// `max_chars` at a word boundary. May return an empty string (the gate refuses it).
pub fn clean_reply(raw: &str, max_chars: usize) -> String {
    clean_reply_guarded(raw, max_chars, &EchoGuard::default())
}

/// [`clean_reply`], also skipping what a small model emits instead of an instruction:
/// markdown headings that label nothing, lines copied off the terminal (chrome glyphs)
/// or out of the briefing (`guard`), and the model talking as an assistant ("I'm here to
/// help"). Every rule has its real-model fixture in `common/tests/twin_replies.rs`.
pub fn clean_reply_guarded(raw: &str, max_chars: usize, guard: &EchoGuard) -> String {
    let text = strip_reasoning(raw);
    let text = strip_fence_lines(&text);
    for line in text.lines() {
        let line = line.trim();
        if starts_with_chrome(line) {
            continue;
        }
        // "## Output", "# EXPLORE phase", "## What is the `#1` command?": a title, not an
        // instruction. A numbered step set as a heading ("### 1. Add an LRU cache …") keeps
        // its step.
        let line = match HEADING.find(line) {
            Some(m) => {
                let rest = line[m.end()..].trim();
                match STEP_NUMBER.find(rest) {
                    Some(n) if rest[n.end()..].split_whitespace().count() >= 3 => rest,
                    _ => continue,
                }
            }
            None => line,
        };
        let mut line = line.to_string();
        // Peel decorations until nothing changes: "> **Prompt:** \"Run it\"".
        loop {
            let before = line.clone();
            line = strip_decoration(&line);
            line = LIST_MARK.replace(&line, "").into_owned();
            line = OPENER.replace(&line, "").into_owned();
            line = PREFIX.replace(&line, "").into_owned();
            line = line.trim().to_string();
            if line == before {
                break;
            }
        }
        if line.is_empty() || !line.chars().any(char::is_alphanumeric) {
            continue;
        }
        // A preamble that introduces the instruction on the next line.
        if line.ends_with(':') && (PREAMBLE.is_match(&line) || line.split_whitespace().count() <= 8)
        {
            continue;
        }
        if ASSISTANT_VOICE.is_match(&line) || guard.echoes(&line) || code_fragment(&line) {
            continue;
        }
        let line = two_sentences(&line);
        return cap_at_word(&line, max_chars);
    }
    String::new()
}

/// The first two sentences; a sentence that only repeats the one before it ("The server is
/// ready. The server is ready.") does not count, and is dropped.
fn two_sentences(s: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut start = 0;
    let mut ends: Vec<usize> = s
        .char_indices()
        .filter(|&(i, c)| {
            matches!(c, '.' | '?' | '!')
                && s[i + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_some_and(char::is_whitespace)
        })
        .map(|(i, c)| i + c.len_utf8())
        .collect();
    ends.push(s.len());
    for end in ends {
        let sentence = s[start..end].trim();
        start = end;
        if sentence.is_empty()
            || kept
                .last()
                .is_some_and(|k| k.eq_ignore_ascii_case(sentence))
        {
            continue;
        }
        kept.push(sentence);
        if kept.len() == 2 {
            break;
        }
    }
    kept.join(" ")
}

fn cap_at_word(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max).collect();
    match cut.rfind(' ') {
        Some(i) if i > max / 2 => cut[..i].trim_end_matches([',', ';', ':']).to_string(),
        _ => cut,
    }
}

// ---------------------------------------------------------------------------------------
// Shared helpers

/// Removes `<think>…</think>` reasoning (reasoning models emit it inline). An opening
/// tag never closed means the reply is all reasoning; a closing tag without an opening
/// one (servers that strip the first tag) keeps what follows it.
pub fn strip_reasoning(raw: &str) -> String {
    static THINK: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?is)<think(?:ing)?>.*?</think(?:ing)?>"));
    let s = THINK.replace_all(raw, "");
    let lower = s.to_ascii_lowercase();
    if let Some(i) = lower.find("<think") {
        return s[..i].to_string();
    }
    for close in ["</thinking>", "</think>"] {
        if let Some(i) = lower.rfind(close) {
            return s[i + close.len()..].to_string();
        }
    }
    s.into_owned()
}

/// Drops code-fence marker lines (```` ``` ````, ```` ```text ````), keeping what they wrapped.
fn strip_fence_lines(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("```") && !l.trim_start().starts_with("~~~"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Strips markdown emphasis, inline-code ticks and quotes wrapping the whole text.
fn strip_decoration(s: &str) -> String {
    let mut t = s.trim().to_string();
    loop {
        let before = t.clone();
        for m in ["**", "__", "`"] {
            if t.len() >= 2 * m.len() && t.starts_with(m) && t.ends_with(m) {
                t = t[m.len()..t.len() - m.len()].trim().to_string();
            }
        }
        // "**Prompt:** run it" — emphasis around a prefix only.
        t = t.replace("**", "");
        for (open, close) in [('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’'), ('«', '»')]
        {
            if t.starts_with(open) && t.ends_with(close) && t.chars().count() >= 2 {
                let inner: Vec<char> = t.chars().collect();
                t = inner[1..inner.len() - 1]
                    .iter()
                    .collect::<String>()
                    .trim()
                    .to_string();
            } else if t.starts_with(open) && !t[open.len_utf8()..].contains(close) {
                // An opening quote whose closing one was cut off.
                t = t[open.len_utf8()..].trim().to_string();
            }
        }
        if t == before {
            return t;
        }
    }
}

/// The first JSON value that starts at one of `starts` and parses (trailing junk after
/// it is fine). Bounded: at most 16 candidate positions are tried.
fn first_json(text: &str, starts: &[char]) -> Option<Value> {
    text.char_indices()
        .filter(|(_, c)| starts.contains(c))
        .take(16)
        .find_map(|(i, _)| {
            serde_json::Deserializer::from_str(&text[i..])
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if max == usize::MAX {
        flat
    } else {
        cap_chars(&flat, max)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::context::Role;

    #[test]
    fn plan_messages_carry_goal_and_redacted_screen() {
        let m = plan_messages(
            "meshd",
            "add a /health endpoint",
            "~/src/meshd",
            Some("$ env\nTOKEN=ghp_1234567890abcdefghijABCDEFGHIJ\n$ "),
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].role, Role::System);
        assert!(m[0].content.contains("5 to 8 numbered steps"));
        assert!(m[1].content.contains("Goal: add a /health endpoint"));
        assert!(m[1].content.contains("Project: meshd"));
        assert!(!m[1].content.contains("ghp_1234"));
    }

    #[test]
    fn plan_parser_numbered_with_preamble_and_fences() {
        let reply = "Sure! Here is the plan:\n```\n1. Read the router in src/server.rs\n2) Add a GET /health route returning 200\n3. **Write an integration test** for /health\n\n4. Run `cargo test` and fix failures\n5. Commit with a clear message\n```\nLet me know if you need more!";
        assert_eq!(
            parse_plan(reply),
            vec![
                "Read the router in src/server.rs",
                "Add a GET /health route returning 200",
                "Write an integration test for /health",
                "Run `cargo test` and fix failures",
                "Commit with a clear message",
            ]
        );
    }

    #[test]
    fn plan_parser_bullets_steps_json_and_caps() {
        let bullets = "- [ ] read the code\n* write the fix\n• add the test\nStep 4: run the suite\n### Step 5 - commit the change";
        assert_eq!(parse_plan(bullets).len(), 5);
        assert_eq!(parse_plan(bullets)[4], "commit the change");
        let many: String = (1..=12)
            .map(|i| format!("{i}. do thing number {i}\n"))
            .collect();
        assert_eq!(parse_plan(&many).len(), PLAN_MAX_STEPS);
        let json = r#"Plan: {"steps": ["read the code", {"title": "fix the bug"}, 3, "run the tests"]} trailing"#;
        assert_eq!(
            parse_plan(json),
            vec!["read the code", "fix the bug", "run the tests"]
        );
        assert_eq!(parse_plan(r#"["a b", "c d"]"#), vec!["a b", "c d"]);
        let inline = "1. read the code 2. fix the parser bug 3. run the tests";
        assert_eq!(
            parse_plan(inline),
            vec!["read the code", "fix the parser bug", "run the tests"]
        );
        let unnumbered = "Here are the steps:\nRead the code\nFix the bug\nRun the tests";
        assert_eq!(
            parse_plan(unnumbered),
            vec!["Read the code", "Fix the bug", "Run the tests"]
        );
        let dup = "1. Run the tests\n2. run the tests\n3. x\n4. !!!";
        assert_eq!(parse_plan(dup), vec!["Run the tests"]);
        let think = "<think>1. bogus step here</think>\n1. real step one\n2. real step two";
        assert_eq!(parse_plan(think), vec!["real step one", "real step two"]);
    }

    #[test]
    fn plan_parser_survives_junk() {
        for junk in [
            "",
            "   ",
            "{",
            "[[[[",
            "\u{0}\u{1}\u{2}",
            "}}}{{{",
            "1.",
            "-",
            "```",
            "null",
            "<think>",
            "\u{feff}🙂",
        ] {
            assert!(parse_plan(junk).len() <= PLAN_MAX_STEPS);
        }
        let long = format!(
            "1. {}",
            (0..1000).map(|i| format!("word{i} ")).collect::<String>()
        );
        assert!(parse_plan(&long)[0].chars().count() <= PLAN_STEP_CHARS);
        let binary: String = (0u8..=255).map(char::from).collect::<String>().repeat(50);
        let _ = parse_plan(&binary);
    }

    #[test]
    fn plan_file() {
        let f = "# plan for meshd\n\nread the code\n  fix the bug  \n# done\nrun the tests\n";
        assert_eq!(
            parse_plan_file(f),
            vec!["read the code", "fix the bug", "run the tests"]
        );
    }

    #[test]
    fn detect_messages_include_screen_and_cwd() {
        let m = detect_messages(
            "karl@mac2 meshd % claude\n> fix the health check\n",
            Some("/Users/k/meshd"),
        );
        assert!(m[0].content.contains("JSON"));
        assert!(m[1].content.contains("Working directory: /Users/k/meshd"));
        assert!(m[1].content.contains("fix the health check"));
    }

    #[test]
    fn detect_parser_json_lines_and_junk() {
        let d = parse_detect(
            "```json\n{\"project\": \"meshd\", \"goal\": \"Add a /health endpoint\"}\n```",
        );
        assert_eq!(d.project.as_deref(), Some("meshd"));
        assert_eq!(d.goal.as_deref(), Some("Add a /health endpoint"));
        let d = parse_detect(
            "Sure. {\"Project_Name\": \"MotionMix\", \"task\": \"fix the crash\"} hope that helps",
        );
        assert_eq!(d.project.as_deref(), Some("MotionMix"));
        assert_eq!(d.goal.as_deref(), Some("fix the crash"));
        let d = parse_detect(
            "**Project:** meshd-dashboard\n**Goal:** Build the health polling dashboard.",
        );
        assert_eq!(d.project.as_deref(), Some("meshd-dashboard"));
        assert_eq!(
            d.goal.as_deref(),
            Some("Build the health polling dashboard.")
        );
        let d = parse_detect("{\"project\": \"unknown\", \"goal\": \"N/A\"}");
        assert_eq!(d, Detected::default());
        let d = parse_detect("- project: karl\nI can't tell the goal.");
        assert_eq!(d.project.as_deref(), Some("karl"));
        assert_eq!(d.goal, None);
        for junk in [
            "",
            "{",
            "{\"project\": 3}",
            "]]]",
            "null",
            "<think>project: x",
        ] {
            let d = parse_detect(junk);
            assert!(d.project.is_none() && d.goal.is_none(), "{junk:?} -> {d:?}");
        }
    }

    #[test]
    fn a_reply_with_fewer_than_three_steps_is_no_plan() {
        let goal = "Add a /health endpoint with a test.";
        let plan = plan_from_reply("1. Read the code\n2. Add the endpoint\n3. Test it", goal);
        assert_eq!(plan.source, PlanSource::Model);
        assert_eq!(plan.steps.len(), 3);
        for junk in [
            "Sure, I can help with that!",
            "1. Write a custom lexer.\n2. Write a custom lexer.\n3. write a custom lexer",
            "1. Read the code\n2. Here is the plan",
            "",
        ] {
            let plan = plan_from_reply(junk, goal);
            assert_eq!(plan.source, PlanSource::Goal, "{junk:?}");
            assert_eq!(plan.steps, goal_steps(goal));
        }
        let steps = goal_steps(goal);
        assert_eq!(steps.len(), 4);
        assert_eq!(steps[1], "Add a /health endpoint with a test.");
        assert!(steps.iter().all(|s| s.contains("/health endpoint")));
        assert!(goal_steps("  ").is_empty());
    }

    #[test]
    fn plan_parser_joins_lone_markers_and_drops_loops() {
        let steps = parse_plan(
            "1. \nImplement JWT auth\n2. 2.1.1. Add the login route\n3. Call it with a JSON payload with a JSON payload with a JSON payload with a JSON payload\n4. go get --no-cache --no-cache --no-cache",
        );
        assert_eq!(steps, ["Implement JWT auth", "Add the login route"]);
    }

    #[test]
    fn echo_guard_allows_the_goal_and_refuses_copies_of_the_briefing() {
        let briefing = [
            ChatMessage::system("You are the developer driving a coding agent (Claude Code, Codex or a similar CLI) in a terminal. Each turn you read a briefing about the session and write the single instruction the developer types next into the agent."),
            ChatMessage::user(
                "Goal: Fix the rounding bug\nDone: 0 of 3\nActive: Fix the rounding bug\n\n## Terminal\n  the tests pass on main\n\n## Your turn\nWrite the one instruction the developer types next.",
            ),
        ];
        let guard = EchoGuard::new(&briefing, &["Fix the rounding bug"]);
        for echo in [
            "Your turn",
            "Done: 2 of 3",
            "the tests pass on main",
            "Write the one instruction the developer types next.",
        ] {
            assert!(guard.echoes(echo), "{echo:?}");
            assert_eq!(clean_reply_guarded(echo, REPLY_MAX_CHARS, &guard), "");
        }
        // Real twin replies (SmolLM2-135M, tests/tests/session_twin.rs): a near copy of the
        // briefing's last line, and code fragments.
        for junk in [
            "Write the one instruction the developer types next into the terminal.",
            "You're the developer driving a coding agent (Claude Code, Codex or a CLI) in a terminal. Each turn you read a briefing about the session and write the single instruction the developer types next into the agent.",
            "f.write(\"\"\"",
            "# -*- coding: utf-8 -*-",
        ] {
            assert_eq!(clean_reply_guarded(junk, REPLY_MAX_CHARS, &guard), "", "{junk:?}");
        }
        for fine in [
            "Fix the rounding bug",
            "Run the tests on main and fix what fails",
            "Run `cargo test -p core` and fix the failures",
            "Fix format!(\"{x}\") in main.rs so it compiles",
        ] {
            assert_eq!(clean_reply_guarded(fine, REPLY_MAX_CHARS, &guard), fine);
            assert!(!guard.echoes(fine), "{fine:?}");
        }
        assert_eq!(
            clean_reply_guarded(
                "## Output\n❯ Try it\nI'm ready to help. What's your task?\nYour turn\n\nRun the rounding tests. Run the rounding tests.",
                REPLY_MAX_CHARS,
                &guard
            ),
            "Run the rounding tests."
        );
    }

    #[test]
    fn reply_cleaner() {
        let cases = [
            (
                "Run the tests in crates/core.",
                "Run the tests in crates/core.",
            ),
            (
                "\"Run the tests in crates/core.\"",
                "Run the tests in crates/core.",
            ),
            (
                "Prompt: Add a unit test for parse_plan.",
                "Add a unit test for parse_plan.",
            ),
            (
                "**Next instruction:** \"Fix the import error in app.rs\"",
                "Fix the import error in app.rs",
            ),
            (
                "Here is the next instruction:\n\n> Fix the import error in app.rs",
                "Fix the import error in app.rs",
            ),
            (
                "```\nrun cargo clippy and fix the warnings\n```",
                "run cargo clippy and fix the warnings",
            ),
            (
                "Sure! Add the missing test. Then run it. Then commit.",
                "Add the missing test. Then run it.",
            ),
            (
                "<think>they want tests</think>\nWrite the test for stopRecording.",
                "Write the test for stopRecording.",
            ),
            ("1. Read src/main.rs\n2. Fix it", "Read src/main.rs"),
            (
                "“Check the failing test in db.rs”",
                "Check the failing test in db.rs",
            ),
            ("'Refactor the retry loop", "Refactor the retry loop"),
            (
                "Use v1.2 of the API. Bump Cargo.toml. Done.",
                "Use v1.2 of the API. Bump Cargo.toml.",
            ),
            ("", ""),
            ("<think>never closed", ""),
            ("...\n!!!\n", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(clean_reply(raw, REPLY_MAX_CHARS), want, "for {raw:?}");
        }
        let long = format!("Implement {}", "the thing ".repeat(100));
        let c = clean_reply(&long, 100);
        assert!(c.chars().count() <= 100 && !c.ends_with(' '), "{c:?}");
        assert!(c.ends_with("thing"));
    }
}

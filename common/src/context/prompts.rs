//! The model's side jobs and its replies: prompt builders for plan generation and for
//! auto-detecting a session's project and goal, and tolerant parsers for what a small
//! model sends back (numbering, bullets, code fences, JSON or not, reasoning blocks,
//! preambles). All pure.
//!
//! The turn prompt itself is [`super::build_context`]; regeneration after a gate
//! refusal goes through [`super::ContextInput::rejections`], so it stays inside the
//! token budget.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::chat::ChatMessage;
use super::redact::redact;
use super::terminal::{cap_chars, select_lines};

/// Plans have at most this many steps (the parser drops the rest).
pub const PLAN_MAX_STEPS: usize = 8;
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
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(m) = NUMBERED.find(line).or_else(|| BULLET.find(line)) {
            marked.push(line[m.end()..].to_string());
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
        let step = cap_chars(step, PLAN_STEP_CHARS);
        if out.iter().any(|s| s.eq_ignore_ascii_case(&step)) {
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

/// The instruction in a model reply, ready for the gate: reasoning blocks and code
/// fences removed, preamble lines ("Here is the next instruction:") skipped, prefixes
/// ("Prompt:", "> ", "1. "), emphasis and surrounding quotes stripped, the first
/// instruction line kept, at most two sentences, whitespace collapsed, capped at
/// `max_chars` at a word boundary. May return an empty string (the gate refuses it).
pub fn clean_reply(raw: &str, max_chars: usize) -> String {
    let text = strip_reasoning(raw);
    let text = strip_fence_lines(&text);
    for line in text.lines() {
        let mut line = line.trim().to_string();
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
        let line = two_sentences(&line);
        return cap_at_word(&line, max_chars);
    }
    String::new()
}

fn two_sentences(s: &str) -> String {
    let mut ends = 0;
    for (i, c) in s.char_indices() {
        if matches!(c, '.' | '?' | '!') {
            let next = s[i + c.len_utf8()..].chars().next();
            if next.is_some_and(char::is_whitespace) {
                ends += 1;
                if ends == 2 {
                    return s[..i + c.len_utf8()].to_string();
                }
            }
        }
    }
    s.to_string()
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
        let long = format!("1. {}", "word ".repeat(1000));
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

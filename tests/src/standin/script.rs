//! The stand-in's script: what it does for each submitted prompt.
//!
//! A script is a JSON file (format in the [module doc](super)). This module parses
//! and validates it and picks the turn for each prompt; turning a picked turn into
//! screen steps is [`super::app`]'s job. Pure except for [`Script::load`].

use std::path::Path;

use serde::Deserialize;

/// Spinner time of a turn when the script does not say.
pub const DEFAULT_WORK_MS: u64 = 1000;

/// A whole script file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Turns, in order. Turns with `match` are rules checked first; the others are
    /// used up one per prompt.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// What to do once the ordered turns are used up (and no rule matched).
    #[serde(default)]
    pub default: Option<Turn>,
    /// Start the ordered turns again from the first once they are used up.
    #[serde(default, rename = "loop")]
    pub repeat: bool,
}

/// What the stand-in does for one prompt.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Use this turn for every prompt containing this text (case-sensitive).
    #[serde(default, rename = "match")]
    pub matches: Option<String>,
    /// How long the spinner runs before the reply.
    #[serde(default = "default_work_ms")]
    pub work_ms: u64,
    /// Spinner verb (`Seasoning`); picked from a list when absent.
    #[serde(default)]
    pub verb: Option<String>,
    /// Reveal an answer line by line while the spinner runs.
    #[serde(default)]
    pub stream: bool,
    pub reply: Reply,
}

fn default_work_ms() -> u64 {
    DEFAULT_WORK_MS
}

/// How a turn ends.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// `● text` answer lines. `{prompt}` is replaced by a one-line summary of the
    /// prompt, `{n}` by the prompt's number.
    Answer(Text),
    /// Like `answer`; names the turn that reports the goal complete.
    Done(Text),
    /// `● API Error: <status>. This is a server-side issue, …`.
    Error(ErrorReply),
    /// A tool permission menu (Bash command, Create file, Edit file).
    Permission(Permission),
    /// `⎿  You've hit your session limit · resets …`.
    Limit(Limit),
    /// Print the resume hint and exit with status 0.
    Exit,
}

/// Text as one string (split at `\n`) or as a list of lines.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Text {
    One(String),
    Lines(Vec<String>),
}

impl Text {
    pub fn joined(&self) -> String {
        match self {
            Text::One(s) => s.clone(),
            Text::Lines(v) => v.join("\n"),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Text::One(s) => s.is_empty(),
            Text::Lines(v) => v.is_empty(),
        }
    }
}

impl Default for Text {
    fn default() -> Self {
        Text::Lines(Vec::new())
    }
}

/// An API error, optionally preceded by a visible retry countdown.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ErrorReply {
    /// The status, e.g. `"500 Internal server error"`.
    Status(String),
    Detailed {
        status: String,
        /// Show `✻ <status> · Retrying in Ns · attempt k/<retries>` while working.
        #[serde(default)]
        retries: u32,
    },
}

impl ErrorReply {
    pub fn status(&self) -> &str {
        match self {
            ErrorReply::Status(s) => s,
            ErrorReply::Detailed { status, .. } => status,
        }
    }

    pub fn retries(&self) -> u32 {
        match self {
            ErrorReply::Status(_) => 0,
            ErrorReply::Detailed { retries, .. } => *retries,
        }
    }
}

/// Which permission dialog to show.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    #[default]
    Bash,
    Create,
    Edit,
}

/// A permission menu and what happens after it is answered.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Permission {
    #[serde(default)]
    pub tool: Tool,
    /// The shell command (`bash`).
    #[serde(default)]
    pub command: Option<String>,
    /// The file (`create`, `edit`).
    #[serde(default)]
    pub path: Option<String>,
    /// File body (`create`) or diff lines (`edit`) shown in the dialog.
    #[serde(default)]
    pub content: Text,
    /// Grey line under the command, e.g. `Clean the build directory`.
    #[serde(default)]
    pub description: Option<String>,
    /// `● text` printed before the tool line.
    #[serde(default)]
    pub intro: Option<Text>,
    /// Tool result lines shown after approval.
    #[serde(default)]
    pub output: Text,
    /// Spinner time after approval, before the answer.
    #[serde(default = "default_after_ms")]
    pub after_ms: u64,
    /// Answer after approval (default `Done.`).
    #[serde(default)]
    pub answer: Option<Text>,
}

fn default_after_ms() -> u64 {
    500
}

/// A usage-limit message.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// `session`, `weekly` or `Opus`.
    #[serde(default = "default_limit_which")]
    pub which: String,
    #[serde(default = "default_limit_resets")]
    pub resets: String,
    /// Also show the `What do you want to do?` menu, as on the first limit hit.
    #[serde(default)]
    pub menu: bool,
}

fn default_limit_which() -> String {
    "session".into()
}

fn default_limit_resets() -> String {
    "9:32am (UTC)".into()
}

/// Why a script was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    #[error("cannot read script {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("script {path} is not valid: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("script {path}: turn {index}: {reason}")]
    Invalid {
        path: String,
        index: usize,
        reason: String,
    },
}

/// Scripts larger than this are refused rather than read.
const MAX_SCRIPT_BYTES: u64 = 8 << 20;

impl Script {
    /// Reads, parses and validates a script file.
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let shown = path.display().to_string();
        let read_err = |source| ScriptError::Read {
            path: shown.clone(),
            source,
        };
        let len = std::fs::metadata(path).map_err(read_err)?.len();
        if len > MAX_SCRIPT_BYTES {
            return Err(ScriptError::Read {
                path: shown.clone(),
                source: std::io::Error::other(format!("{len} bytes is too large")),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        Script::parse(&text, &shown)
    }

    /// Parses and validates script text; `name` only labels errors.
    pub fn parse(text: &str, name: &str) -> Result<Script, ScriptError> {
        let script: Script = serde_json::from_str(text).map_err(|source| ScriptError::Parse {
            path: name.to_string(),
            source,
        })?;
        let all = script.turns.iter().chain(script.default.iter());
        for (index, turn) in all.enumerate() {
            if let Err(reason) = turn.validate() {
                return Err(ScriptError::Invalid {
                    path: name.to_string(),
                    index,
                    reason,
                });
            }
        }
        Ok(script)
    }
}

impl Turn {
    fn validate(&self) -> Result<(), String> {
        if self.matches.as_deref() == Some("") {
            return Err("`match` must not be empty".into());
        }
        if let Reply::Permission(p) = &self.reply {
            match p.tool {
                Tool::Bash if p.command.as_deref().unwrap_or("").is_empty() => {
                    return Err("a bash permission needs `command`".into())
                }
                Tool::Create | Tool::Edit if p.path.as_deref().unwrap_or("").is_empty() => {
                    return Err("a create/edit permission needs `path`".into())
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The built-in turn: about a second of spinner, then `ok, done: <prompt>`.
    pub fn builtin_default() -> Turn {
        Turn {
            matches: None,
            work_ms: DEFAULT_WORK_MS,
            verb: None,
            stream: false,
            reply: Reply::Answer(Text::One("ok, done: {prompt}".into())),
        }
    }
}

/// Chooses the turn for each prompt, in the order the module doc describes.
#[derive(Debug, Clone)]
pub struct TurnPicker {
    script: Script,
    next: usize,
}

impl TurnPicker {
    pub fn new(script: Script) -> Self {
        TurnPicker { script, next: 0 }
    }

    /// The turn for `prompt`: the first rule whose `match` it contains, else the
    /// next ordered turn, else the default.
    pub fn pick(&mut self, prompt: &str) -> Turn {
        if let Some(t) = self
            .script
            .turns
            .iter()
            .find(|t| t.matches.as_deref().is_some_and(|m| prompt.contains(m)))
        {
            return t.clone();
        }
        let ordered: Vec<&Turn> = self
            .script
            .turns
            .iter()
            .filter(|t| t.matches.is_none())
            .collect();
        if self.next >= ordered.len() && self.script.repeat {
            self.next = 0;
        }
        if let Some(t) = ordered.get(self.next) {
            self.next += 1;
            return (*t).clone();
        }
        self.script
            .default
            .clone()
            .unwrap_or_else(Turn::builtin_default)
    }
}

/// One-line summary of a prompt for `{prompt}`: its first non-blank line, cut to 60
/// characters.
pub fn summarize(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        out.push('…');
    }
    out
}

/// Fills `{prompt}` and `{n}` in reply text.
pub fn fill(template: &str, prompt: &str, n: u64) -> String {
    template
        .replace("{prompt}", &summarize(prompt))
        .replace("{n}", &n.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{
      "turns": [
        {"match": "migrate", "work_ms": 800,
         "reply": {"permission": {"tool": "bash", "command": "./migrate.sh",
                   "description": "Run the migration", "output": ["migrated 4 tables"],
                   "answer": "The migration ran."}}},
        {"work_ms": 1500, "stream": true, "reply": {"answer": "I added the handler.\nTests pass."}},
        {"work_ms": 300, "reply": {"error": "500 Internal server error"}},
        {"reply": {"error": {"status": "529 Overloaded", "retries": 3}}},
        {"reply": {"limit": {"resets": "9:32am (UTC)", "menu": true}}},
        {"reply": {"done": ["All steps are complete.", "GOAL COMPLETE"]}},
        {"reply": "exit"}
      ],
      "default": {"work_ms": 200, "reply": {"answer": "ok: {prompt}"}}
    }"#;

    #[test]
    fn parses_every_reply_kind() {
        let s = Script::parse(EXAMPLE, "example").unwrap();
        assert_eq!(s.turns.len(), 7);
        assert!(matches!(s.turns[0].reply, Reply::Permission(_)));
        assert!(matches!(&s.turns[3].reply, Reply::Error(e) if e.retries() == 3));
        assert!(matches!(&s.turns[4].reply, Reply::Limit(l) if l.menu && l.which == "session"));
        assert_eq!(s.turns[6].reply, Reply::Exit);
        assert_eq!(s.turns[6].work_ms, DEFAULT_WORK_MS);
    }

    #[test]
    fn picks_rules_then_order_then_default() {
        let mut p = TurnPicker::new(Script::parse(EXAMPLE, "example").unwrap());
        assert!(matches!(
            p.pick("please migrate now").reply,
            Reply::Permission(_)
        ));
        assert!(matches!(p.pick("a").reply, Reply::Answer(_)));
        assert!(matches!(
            p.pick("migrate again").reply,
            Reply::Permission(_)
        ));
        assert!(matches!(p.pick("b").reply, Reply::Error(_)));
        for _ in 0..4 {
            p.pick("c");
        }
        let d = p.pick("d");
        assert_eq!(d.work_ms, 200);
        assert_eq!(p.pick("e").work_ms, 200);
    }

    #[test]
    fn loop_restarts_ordered_turns() {
        let s = r#"{"loop": true, "turns": [{"work_ms": 1, "reply": {"answer": "a"}},
                                            {"work_ms": 2, "reply": {"answer": "b"}}]}"#;
        let mut p = TurnPicker::new(Script::parse(s, "s").unwrap());
        let ms: Vec<u64> = (0..5).map(|_| p.pick("x").work_ms).collect();
        assert_eq!(ms, vec![1, 2, 1, 2, 1]);
    }

    #[test]
    fn empty_script_uses_builtin_default() {
        let mut p = TurnPicker::new(Script::parse("{}", "s").unwrap());
        assert_eq!(p.pick("x"), Turn::builtin_default());
    }

    #[test]
    fn bad_scripts_are_refused_with_a_reason() {
        let e = Script::parse(r#"{"turns": [{"reply": {"permission": {}}}]}"#, "s")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs `command`"), "{e}");
        let e = Script::parse(r#"{"turns": [{"reply": {"answer": 3}}]}"#, "s").unwrap_err();
        assert!(matches!(e, ScriptError::Parse { .. }));
        let e = Script::parse(r#"{"turn": []}"#, "s").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }

    #[test]
    fn fill_summarizes_prompt() {
        assert_eq!(
            fill("ok, done: {prompt} (#{n})", "\n  fix it\nmore", 3),
            "ok, done: fix it (#3)"
        );
        let long = "x".repeat(100);
        assert_eq!(summarize(&long).chars().count(), 61);
    }
}

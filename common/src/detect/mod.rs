//! The pane-state classifier: a pane snapshot in, `{state, agent, error, confidence,
//! evidence}` out. Pure: no IO (except [`Detector::from_dir`], which reads override
//! manifests once, at start-up), no async; rules are data — one TOML manifest per agent CLI in
//! `rules/`, embedded at build time and overridable from a directory.
//!
//! Layout:
//! - `manifest`: the TOML schema, its validation and the compiled rules (regexes built once).
//! - `screen`: the live screen, horizontal rules, the input box and the named regions rules see.
//! - `engine`: identification, rule evaluation, extraction and the `explain` trace.
//!
//! Escapes are read by `crate::ansi`, shared with [`crate::pane_text`]: the SGR state there
//! tells typed text from dim "ghost" text in a `-e` capture.
//!
//! How a snapshot is read: the live screen is cut out of the capture (the last `height`
//! lines; scrollback above is ignored); every manifest's `[[identify]]` rules weigh in and the
//! heaviest names the CLI; that manifest's state rules run highest priority first and the first
//! that holds decides; its error rules set the flag. Rules look at named regions (the footer
//! under the input box, the lines just above it, the block after the last horizontal rule,
//! the last turn, the last few lines, the title), never at keywords anywhere: a pane whose
//! answer *quotes* "esc to interrupt" or a permission menu is idle, because those words sit
//! in the transcript. Ghost text (placeholders, autosuggestions) is not a draft when the ANSI
//! capture is given; without it, dim text cannot be seen and reads as a draft (the safe side).
//!
//! # The prototype's session phases
//!
//! The Python prototype tracked one `phase` per session. Here the pane state is per snapshot
//! and the rest are session-level signals kept by the engine:
//!
//! | prototype | here |
//! |---|---|
//! | `STARTING` | session signal: no turn typed yet. The pane is usually `idle`, or `dialog` while start-up modals (trust, API key, sign-in) wait for a human. |
//! | `BUILDING` (agent ready, new output: fire) | `idle` with `error == false`, plus the session's "pane changed since our last injection" (stable hash / novelty). |
//! | `WAITING` (agent busy: skip) | `working`. `permission` and `dialog` also mean "do not type", but they wait for a human, not for time. |
//! | `ERROR` | `idle` with `error == true`: fire, with more terminal context. |
//! | `DONE` | session signal: goal reached or plan exhausted; the pane itself is just `idle`. |
//! | `STUCK` | session signal: stable hash unchanged past a limit, N turns without progress, or `unknown` that persists. |
//!
//! `draft`, `exited` and `limited` have no prototype counterpart: the prototype typed over
//! drafts, did not notice an exited CLI, and retried through usage limits.

use std::path::Path;

use serde::{Deserialize, Serialize};

mod engine;
mod manifest;
mod screen;

use manifest::Manifest;
pub use manifest::MAX_MANIFEST_BYTES;

/// What a pane is doing, as far as the driver is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PaneState {
    Working,
    Idle,
    Permission,
    Dialog,
    Draft,
    Exited,
    Limited,
    #[default]
    Unknown,
}

impl PaneState {
    pub fn as_str(self) -> &'static str {
        match self {
            PaneState::Working => "working",
            PaneState::Idle => "idle",
            PaneState::Permission => "permission",
            PaneState::Dialog => "dialog",
            PaneState::Draft => "draft",
            PaneState::Exited => "exited",
            PaneState::Limited => "limited",
            PaneState::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for PaneState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which CLI runs in the pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Claude,
    Codex,
    Aider,
    Gemini,
    Shell,
    #[default]
    Unknown,
}

impl AgentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Aider => "aider",
            AgentKind::Gemini => "gemini",
            AgentKind::Shell => "shell",
            AgentKind::Unknown => "unknown",
        }
    }
}

/// True for the process name of an interactive or login shell (`bash`, `-zsh`, `fish`, …):
/// what a pane runs when no agent CLI does. The same names as the shell manifest's
/// `command` identification rule.
pub fn is_shell_command(name: &str) -> bool {
    matches!(
        name.strip_prefix('-').unwrap_or(name),
        "bash"
            | "zsh"
            | "fish"
            | "sh"
            | "dash"
            | "ksh"
            | "mksh"
            | "tcsh"
            | "csh"
            | "nu"
            | "pwsh"
            | "elvish"
            | "xonsh"
            | "login"
    )
}

/// Everything the classifier looks at. `text` may hold scrollback above the live
/// screen; when `height` is known the last `height` lines are the screen.
#[derive(Debug, Clone, Default)]
pub struct DetectionInput<'a> {
    /// `capture-pane -p` as tmux printed it. Escapes and control bytes are tolerated (they
    /// are stripped). With scrollback included, keep the screen's trailing blank lines: the
    /// cursor row is counted from the top of the last `height` lines.
    pub text: &'a str,
    /// The same capture with `-e`, taken together with `text`. Only the input box is read
    /// from it, to tell dim ghost text from typed text; a capture whose characters do not
    /// match `text` line for line is ignored.
    pub ansi: Option<&'a str>,
    /// `pane_current_command`.
    pub current_command: &'a str,
    /// `pane_title`.
    pub title: &'a str,
    /// `cursor_x`, `cursor_y`: the cursor, 0-based, `cursor_y` from the top of the screen.
    pub cursor_x: Option<u32>,
    pub cursor_y: Option<u32>,
    /// Pane width; informational (rules do not depend on it).
    pub width: Option<u32>,
    /// Pane height; without it the whole `text` is taken as the screen.
    pub height: Option<u32>,
}

/// One rule that fired, and the line it matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// `manifest/rule`, e.g. `claude/busy-footer`.
    pub rule: String,
    pub line: String,
}

/// What a permission prompt asks for.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// `Bash command`, `Create file`, `Edit file`, `Exit plan mode`, …
    pub tool: String,
    /// The command or file the tool would act on.
    pub action: String,
    /// The menu's options in order, e.g. `["Yes", "Yes, and don't ask again …", "No"]`.
    pub options: Vec<String>,
    /// Which option the menu's selection marker (`❯`, `›`) is on, when it can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<usize>,
}

/// The classifier's verdict.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Detection {
    pub state: PaneState,
    pub agent: AgentKind,
    /// The last turn visibly ended in an error.
    pub error: bool,
    /// 0..1
    pub confidence: f32,
    pub evidence: Vec<Evidence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<PermissionRequest>,
    /// For `limited`: the reset time as the screen states it (e.g. `9:32am (UTC)`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_reset: Option<String>,
    /// For `draft`: the text in the input box.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
    /// The rule that decided the state (`manifest/rule`); `None` for `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// The classifier with its compiled rule manifests.
#[derive(Debug, Clone)]
pub struct Detector {
    /// Agent CLIs first, shell-like manifests last (identification ties go to the earlier).
    manifests: Vec<Manifest>,
    /// Index of the manifest with id `shell`: its layout defines the shell regions.
    shell: Option<usize>,
}

/// The manifests compiled into the binary, in identification order.
const EMBEDDED: &[(&str, &str)] = &[
    ("claude", include_str!("rules/claude.toml")),
    ("codex", include_str!("rules/codex.toml")),
    ("aider", include_str!("rules/aider.toml")),
    ("gemini", include_str!("rules/gemini.toml")),
    ("shell", include_str!("rules/shell.toml")),
];

/// A loaded manifest, as `karl-ctl` and logs describe it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestInfo {
    pub id: String,
    pub version: u32,
    pub agent: AgentKind,
    /// Which CLI version the rules were written against.
    pub note: String,
    /// Checked against real captures (false: written from public documentation).
    pub verified: bool,
    pub rules: usize,
}

/// What a rule was used for in [`Detector::explain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleKind {
    /// Weighs towards one agent CLI.
    Identify,
    /// Decides the pane state.
    State,
    /// Sets the error flag.
    Error,
}

/// One rule evaluated by [`Detector::explain`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleTrace {
    /// `manifest/rule`; identification rules print as `manifest/id:rule`.
    pub rule: String,
    pub kind: RuleKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PaneState>,
    pub priority: i32,
    /// Identification weight (0 for other rules).
    pub weight: u32,
    pub matched: bool,
    /// The line that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
    /// This rule decided the state, set the error flag, or counted for the winning agent.
    pub decided: bool,
    /// Why the rule was not evaluated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub note: String,
}

impl Default for Detector {
    fn default() -> Self {
        Detector::embedded()
    }
}

impl Detector {
    /// The manifests embedded in the binary. They are checked by a test; should one fail to
    /// compile anyway, it is left out and logged rather than taking the program down.
    pub fn embedded() -> Self {
        let mut manifests = Vec::with_capacity(EMBEDDED.len());
        for (id, text) in EMBEDDED {
            match Manifest::parse(&format!("embedded:{id}"), text) {
                Ok(m) => manifests.push(m),
                Err(e) => {
                    tracing::error!(target: "common.detect", error = %e, "embedded manifest left out")
                }
            }
        }
        Detector::assemble(manifests)
    }

    /// The embedded manifests, failing on the first that does not compile.
    pub fn try_embedded() -> crate::Result<Self> {
        Detector::from_texts(
            EMBEDDED
                .iter()
                .map(|(id, t)| (format!("embedded:{id}"), *t)),
        )
    }

    /// Compiles manifests given as `(name, toml)`; `name` appears in error messages.
    pub fn from_texts<N: AsRef<str>, T: AsRef<str>>(
        texts: impl IntoIterator<Item = (N, T)>,
    ) -> crate::Result<Self> {
        let mut manifests: Vec<Manifest> = Vec::new();
        for (name, text) in texts {
            let m = Manifest::parse(name.as_ref(), text.as_ref())?;
            if manifests.iter().any(|o| o.id == m.id) {
                return Err(crate::Error::Manifest {
                    name: name.as_ref().to_string(),
                    why: format!("a second manifest with id {:?}", m.id),
                });
            }
            manifests.push(m);
        }
        Ok(Detector::assemble(manifests))
    }

    /// The embedded manifests, overridden by every `*.toml` manifest in `dir`: a manifest
    /// with the id of an embedded one replaces it, a new id is added.
    pub fn from_dir(dir: impl AsRef<Path>) -> crate::Result<Self> {
        let dir = dir.as_ref();
        let io = |source| crate::Error::RulesIo {
            path: dir.display().to_string(),
            source,
        };
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        let mut manifests: Vec<Manifest> = EMBEDDED
            .iter()
            .map(|(id, t)| Manifest::parse(&format!("embedded:{id}"), t))
            .collect::<crate::Result<_>>()?;
        let mut overridden: Vec<String> = Vec::new();
        for path in paths {
            let name = path.display().to_string();
            let file_io = |source| crate::Error::RulesIo {
                path: name.clone(),
                source,
            };
            let len = std::fs::metadata(&path).map_err(file_io)?.len();
            if len > MAX_MANIFEST_BYTES as u64 {
                return Err(crate::Error::Manifest {
                    name,
                    why: format!("{len} bytes is over the {MAX_MANIFEST_BYTES}-byte limit"),
                });
            }
            let bytes = std::fs::read(&path).map_err(file_io)?;
            let text = String::from_utf8(bytes).map_err(|_| crate::Error::Manifest {
                name: name.clone(),
                why: "not UTF-8".into(),
            })?;
            let m = Manifest::parse(&name, &text)?;
            if overridden.contains(&m.id) {
                return Err(crate::Error::Manifest {
                    name,
                    why: format!("a second manifest with id {:?} in this directory", m.id),
                });
            }
            overridden.push(m.id.clone());
            tracing::info!(target: "common.detect", manifest = %m.id, version = m.version, path = %name, "rule manifest loaded");
            match manifests.iter_mut().find(|o| o.id == m.id) {
                Some(slot) => *slot = m,
                None => manifests.push(m),
            }
        }
        Ok(Detector::assemble(manifests))
    }

    fn assemble(mut manifests: Vec<Manifest>) -> Self {
        // Stable: keeps the given order within agents and within shells.
        manifests.sort_by_key(|m| m.agent == AgentKind::Shell);
        let shell = manifests.iter().position(|m| m.id == "shell");
        Detector { manifests, shell }
    }

    /// The loaded manifests, in identification order.
    pub fn manifests(&self) -> Vec<ManifestInfo> {
        self.manifests
            .iter()
            .map(|m| ManifestInfo {
                id: m.id.clone(),
                version: m.version,
                agent: m.agent,
                note: m.note.clone(),
                verified: m.verified,
                rules: m.rules.len() + m.identify.len(),
            })
            .collect()
    }

    /// Classifies one snapshot.
    pub fn detect(&self, input: &DetectionInput<'_>) -> Detection {
        engine::run(self, input, None)
    }

    /// Every rule evaluated for `input`, in evaluation order: identification rules of every
    /// manifest, then the state and error rules of the identified CLI's manifest, each with
    /// whether it matched, on which line, and whether it decided.
    pub fn explain(&self, input: &DetectionInput<'_>) -> Vec<RuleTrace> {
        let mut trace = Vec::new();
        engine::run(self, input, Some(&mut trace));
        trace
    }
}

/// Pane metadata as `karl-ctl classify --meta FILE` reads it: any of these fields, unknown
/// fields ignored (so a fixture's label file serves as META).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CaptureMeta {
    pub pane_current_command: Option<String>,
    pub pane_title: Option<String>,
    pub cursor_x: Option<u32>,
    pub cursor_y: Option<u32>,
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// Classifies a capture read from files: `text` (`capture-pane -p`, possibly with scrollback
/// above the screen), `ansi` (the same with `-e`) and the pane metadata.
pub fn classify_capture(
    detector: &Detector,
    text: &str,
    ansi: Option<&str>,
    meta: &CaptureMeta,
) -> Detection {
    detector.detect(&meta.input(text, ansi))
}

impl CaptureMeta {
    /// The classifier input for a capture with this metadata.
    pub fn input<'a>(&'a self, text: &'a str, ansi: Option<&'a str>) -> DetectionInput<'a> {
        DetectionInput {
            text,
            ansi,
            current_command: self.pane_current_command.as_deref().unwrap_or(""),
            title: self.pane_title.as_deref().unwrap_or(""),
            cursor_x: self.cursor_x,
            cursor_y: self.cursor_y,
            width: self.width,
            height: self.height,
        }
    }
}

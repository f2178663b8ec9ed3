//! `karl-standin`: a stand-in coding agent for KARL's tests and demo. It behaves
//! like a coding-agent TUI in a real tmux pane, and its screens follow Claude Code
//! 2.1.197 (inline renderer: transcript scrolling up, an input box `❯ ` between two
//! full-width `─` rules, `? for shortcuts` / `esc to interrupt` footers, a
//! `✻ Verb… (3s · ↓ 42 tokens)` spinner, `●` answers, permission menus, the
//! folder-trust dialog, usage limits, the `✳ Claude Code` / braille pane title)
//! closely enough that the real Claude rules of the classifier read them.
//!
//! # Command line
//!
//! ```text
//! karl-standin [--script FILE] [--log FILE] [--drop-first-enter | --drop-enters N] [--ghost TEXT] [--dialog]
//! ```
//!
//! - `--script FILE`: the turns (below). Without it every prompt gets
//!   `● ok, done: <first line of the prompt>` after one second of spinner.
//! - `--log FILE`: one JSON line per event ([`log::LogEvent`]): `started`,
//!   `prompt` (`{"event":"prompt","n":1,"prompt":"…","busy":false,"unix_ms":…}`,
//!   the submitted text byte for byte), `dropped_enter`, `turn_end`, `interrupted`,
//!   `permission` (`"permission":"approved"|"denied"`, `choice`, `tool`, `target`),
//!   `dialog`, `limit_menu`, `stray` (input that hit a menu or dialog), `exit`.
//! - `--drop-first-enter`: the first Enter after each paste is ignored (logged as
//!   `dropped_enter`), as by a TUI still busy with the paste; the next Enter submits.
//!   `--drop-enters N` ignores the first N.
//! - `--ghost TEXT`: dim (SGR 2) suggestion text in the empty input box; it is not a
//!   draft (Enter does nothing, Tab takes it into the draft, typing replaces it).
//! - `--dialog`: start in the "Quick safety check" folder-trust dialog (`1`/Enter
//!   accepts, `2`/Escape exits with status 1).
//! - With `CLAUDE_CONFIG_DIR` set, it writes the live session file and transcript the
//!   real CLI writes there ([`claude_files`]), for KARL's transcript follower.
//!
//! # Keys
//!
//! Bracketed paste is on (`ESC[?2004h`): newlines in a paste stay in the draft
//! (`\r\n` and `\r` become `\n`); pastes with more than two newlines show as
//! `[Pasted text #N +K lines]`. Enter submits the whole draft as one prompt (blank
//! drafts are ignored); Ctrl-J adds a newline; Backspace deletes a character or a
//! whole paste; Ctrl-U clears. Escape or Ctrl-C while working interrupts
//! (`⎿  Interrupted · What should Claude do instead?`). A prompt submitted while
//! working is logged with `"busy":true` and runs after the current turn. Ctrl-C
//! twice (or Ctrl-D twice) on an empty box exits with status 0, as does a `/exit`
//! or `/quit` prompt. Permission menus take `1`/`y`, `2`, `3`/`n`, Up/Down + Enter,
//! Escape (denies). Stdin EOF, SIGHUP, SIGTERM and SIGINT end the program with
//! status 0 after restoring the terminal.
//!
//! # Script format (JSON)
//!
//! ```json
//! {
//!   "turns": [
//!     {"match": "migrate", "work_ms": 800,
//!      "reply": {"permission": {"tool": "bash", "command": "./migrate.sh",
//!                "description": "Run the migration", "intro": "I'll run it.",
//!                "output": ["migrated 4 tables"], "after_ms": 300,
//!                "answer": "The migration ran."}}},
//!     {"work_ms": 1500, "stream": true, "verb": "Seasoning",
//!      "reply": {"answer": "I added the handler.\nTests pass."}},
//!     {"work_ms": 300, "reply": {"error": "500 Internal server error"}},
//!     {"work_ms": 3000, "reply": {"error": {"status": "529 Overloaded", "retries": 3}}},
//!     {"work_ms": 0, "reply": {"limit": {"which": "session", "resets": "9:32am (UTC)", "menu": true}}},
//!     {"reply": {"permission": {"tool": "create", "path": "src/health.rs",
//!                "content": ["pub fn health() {}"]}}},
//!     {"reply": {"done": "All steps are complete. GOAL COMPLETE"}},
//!     {"reply": "exit"}
//!   ],
//!   "default": {"work_ms": 1000, "reply": {"answer": "ok, done: {prompt}"}},
//!   "loop": false
//! }
//! ```
//!
//! For each submitted prompt the stand-in takes the first turn whose `match` text
//! the prompt contains (such rules are reused); otherwise the next turn without
//! `match`, in order (each used once; `"loop": true` starts over); otherwise
//! `default`; otherwise the built-in `ok, done: {prompt}` turn. Every turn spins for
//! `work_ms` (default 1000; the spinner redraws every 120 ms, so a busy pane never
//! falls silent), then:
//!
//! - `answer` / `done`: `●` text lines (a string split at `\n`, or a list);
//!   `{prompt}` is the prompt's first line, `{n}` its number; `stream` reveals the
//!   lines while the spinner runs. Ends with `✻ <Verb>ed for Ns`.
//! - `error`: `● API Error: <status>. This is a server-side issue, …`; with
//!   `retries`, the spinner row shows `<status> · Retrying in Ns · attempt k/N`.
//! - `permission`: `tool` is `bash` (needs `command`), `create` or `edit` (need
//!   `path`; `content` is the file body or diff). The menu (`❯ 1. Yes` / `2. Yes,
//!   and don't ask again …` / `3. No`, footer `Esc to cancel · Tab to amend · ctrl+e
//!   to explain`; files get `Create file` / `Edit file`, `2. Yes, allow all edits
//!   during this session (shift+tab)` and `Esc to cancel · Tab to amend`) waits for
//!   an answer; approval prints the tool call with `output`, spins `after_ms`
//!   (default 500) and answers `answer` (default `Done.`); denial prints
//!   `⎿  Interrupted · …` and the turn ends.
//! - `limit`: `⎿  You've hit your <which> limit · resets <resets>`; with `menu`,
//!   the `What do you want to do?` menu follows (`1`/`2`/Enter/Escape).
//! - `"exit"`: prints `Resume this session with:` / `claude --resume <id>` and
//!   exits with status 0.
//!
//! # Layout
//!
//! - [`run`]: flags and the event loop (the IO edge).
//! - [`app`]: the state machine — keys and ticks in, rows, frames and events out.
//! - [`render`]: the screen pieces, after the real CLI.
//! - [`keys`]: raw input bytes to keys (bracketed paste, escape sequences, UTF-8).
//! - [`script`]: the script format and turn selection.
//! - [`log`]: the JSON-lines event log and its reader.
//! - [`term`]: raw mode, pane size, the inline painter.
//! - [`text`]: cell widths, wrapping, sanitizing.
//! - [`tmux`]: test harness — a private tmux server, the stand-in in a pane,
//!   captures ([`tmux::Snapshot::detection_input`] feeds the classifier).

pub mod app;
pub mod claude_files;
pub mod keys;
pub mod log;
pub mod render;
pub mod run;
pub mod script;
pub mod term;
pub mod text;
pub mod tmux;

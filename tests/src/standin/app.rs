//! The stand-in's state machine: keys and clock ticks in; transcript rows to print,
//! the live frame at the bottom, the pane title, log events and an exit code out.
//!
//! Pure and deterministic: time is a millisecond count the caller passes in, so the
//! whole behaviour (drafts, submits, turns, menus, interrupts) is unit-tested
//! without a terminal. Drawing the rows is [`super::term`]'s job; what they look
//! like is [`super::render`]'s.
//!
//! A submitted prompt becomes a queue of steps built from its script turn
//! (spin, print, ask, finish, exit); the queue runs on ticks and pauses on menus.

use std::collections::VecDeque;

use super::keys::Key;
use super::log::LogEvent;
use super::render::{self, BoxContent};
use super::script::{fill, Permission, Reply, Script, Text, Tool, TurnPicker};

/// Redraw interval while the spinner runs (the pane keeps producing output).
pub const TICK_MS: u64 = 120;
/// Narrower panes are drawn as if this wide (the terminal then wraps rows).
pub const MIN_WIDTH: usize = 20;
/// How long "Press Ctrl-C again to exit" stays armed.
const EXIT_ARM_MS: u64 = 2000;
/// Pastes with more newlines than this, or more characters than
/// [`COLLAPSE_CHARS`], show as `[Pasted text #N +K lines]` in the box.
const COLLAPSE_NEWLINES: usize = 2;
const COLLAPSE_CHARS: usize = 800;

/// Start-up settings of the stand-in.
#[derive(Debug, Clone, Default)]
pub struct AppConfig {
    /// Ignore this many Enters after each paste (a lost Enter; 1 = `--drop-first-enter`).
    pub drop_enters: u32,
    /// Dim suggestion text shown in the empty input box (not a draft).
    pub ghost: Option<String>,
    /// Start in the folder-trust dialog.
    pub dialog: bool,
    /// Directory shown in the banner, dialogs and permission menus.
    pub cwd: String,
    /// Shown in the resume hint on exit.
    pub session_id: String,
}

/// The live region at the bottom of the pane and where the cursor sits in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    pub lines: Vec<String>,
    pub cursor_row: usize,
    pub cursor_col: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Typed(String),
    Paste { id: u32, text: String },
}

/// The text in the input box: typed runs and pastes (a paste is deleted whole).
#[derive(Debug, Clone, Default)]
struct Draft {
    segments: Vec<Segment>,
}

impl Draft {
    fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    fn push_char(&mut self, c: char) {
        if let Some(Segment::Typed(t)) = self.segments.last_mut() {
            t.push(c);
        } else {
            self.segments.push(Segment::Typed(c.to_string()));
        }
    }

    fn push_str(&mut self, s: &str) {
        s.chars().for_each(|c| self.push_char(c));
    }

    fn push_paste(&mut self, id: u32, text: String) {
        self.segments.push(Segment::Paste { id, text });
    }

    fn backspace(&mut self) {
        match self.segments.last_mut() {
            Some(Segment::Typed(t)) => {
                t.pop();
                if t.is_empty() {
                    self.segments.pop();
                }
            }
            Some(Segment::Paste { .. }) => {
                self.segments.pop();
            }
            None => {}
        }
    }

    fn clear(&mut self) {
        self.segments.clear();
    }

    /// The text that is submitted, exactly as typed and pasted.
    fn text(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Typed(t) => t.as_str(),
                Segment::Paste { text, .. } => text.as_str(),
            })
            .collect()
    }

    /// The text as the box shows it (long pastes collapsed).
    fn display(&self) -> String {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Typed(t) => t.clone(),
                Segment::Paste { id, text } => {
                    let newlines = text.matches('\n').count();
                    if newlines > COLLAPSE_NEWLINES || text.chars().count() > COLLAPSE_CHARS {
                        format!("[Pasted text #{id} +{newlines} lines]")
                    } else {
                        text.clone()
                    }
                }
            })
            .collect()
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// Spinner for `ms`; `stream` rows are printed progressively meanwhile;
    /// `retry` shows an API retry countdown instead of the spinner.
    Work {
        ms: u64,
        stream: Vec<String>,
        retry: Option<(String, u32)>,
    },
    /// Print rows to the transcript.
    Commit(Vec<String>),
    /// Show a permission menu and wait for the answer.
    Ask(Box<Ask>),
    /// Show the usage-limit menu and wait for the answer.
    LimitMenu,
    /// Print `✻ Churned for Ns`.
    Finish,
    /// Exit with status 0.
    Exit,
}

#[derive(Debug, Clone)]
struct Ask {
    perm: Permission,
    approved: Vec<Step>,
}

#[derive(Debug, Clone)]
struct Run {
    n: u64,
    started_ms: u64,
    step_started_ms: u64,
    steps: VecDeque<Step>,
    verb: String,
    past: String,
    outcome: &'static str,
    streamed: usize,
    selected: usize,
}

#[derive(Debug, Clone)]
enum Mode {
    Trust { selected: usize },
    Idle,
    Turn(Box<Run>),
    Exited,
}

/// The whole stand-in, minus its terminal.
#[derive(Debug)]
pub struct App {
    cfg: AppConfig,
    picker: TurnPicker,
    width: usize,
    height: usize,
    mode: Mode,
    draft: Draft,
    prompts: u64,
    pastes: u32,
    queue: VecDeque<(u64, String)>,
    swallow_enters: u32,
    exit_armed: Option<(&'static str, u64)>,
    committed: Vec<String>,
    events: Vec<LogEvent>,
    exit_code: Option<i32>,
}

impl App {
    pub fn new(cfg: AppConfig, script: Script, width: u16, height: u16) -> App {
        let mut app = App {
            mode: if cfg.dialog {
                Mode::Trust { selected: 0 }
            } else {
                Mode::Idle
            },
            cfg,
            picker: TurnPicker::new(script),
            width: 10,
            height: 5,
            draft: Draft::default(),
            prompts: 0,
            pastes: 0,
            queue: VecDeque::new(),
            swallow_enters: 0,
            exit_armed: None,
            committed: Vec::new(),
            events: Vec::new(),
            exit_code: None,
        };
        app.resize(width, height);
        if !app.cfg.dialog {
            app.committed = render::banner(app.width, &app.cfg.cwd);
        }
        app
    }

    /// New pane size (SIGWINCH).
    pub fn resize(&mut self, width: u16, height: u16) {
        self.width = usize::from(width).max(MIN_WIDTH);
        self.height = usize::from(height).max(5);
    }

    /// Transcript rows to print above the live frame since the last call.
    pub fn take_committed(&mut self) -> Vec<String> {
        std::mem::take(&mut self.committed)
    }

    /// Log events since the last call.
    pub fn take_events(&mut self) -> Vec<LogEvent> {
        std::mem::take(&mut self.events)
    }

    /// Set once the program should exit.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// True while a turn is running (spinner, menus), false when idle or in the
    /// trust dialog.
    pub fn busy(&self) -> bool {
        matches!(self.mode, Mode::Turn(_))
    }

    /// Milliseconds until the next tick is needed, or `None` to sleep until input.
    pub fn next_wake(&self, now: u64) -> Option<u64> {
        let mut wake = None;
        if let Mode::Turn(run) = &self.mode {
            if let Some(Step::Work { ms, .. }) = run.steps.front() {
                let left = (run.step_started_ms + ms).saturating_sub(now);
                wake = Some(left.clamp(1, TICK_MS));
            }
        }
        if let Some((_, deadline)) = self.exit_armed {
            let left = deadline.saturating_sub(now).max(1);
            wake = Some(wake.map_or(left, |w: u64| w.min(left)));
        }
        wake
    }

    /// The stream ended or the terminal hung up.
    pub fn hang_up(&mut self, reason: &str) {
        if self.exit_code.is_none() {
            self.exit(0, reason);
        }
    }

    /// Lines printed under the last frame when the program exits.
    pub fn farewell(&self) -> Vec<String> {
        if self.prompts == 0 {
            return Vec::new();
        }
        vec![
            "Resume this session with:".to_string(),
            format!("claude --resume {}", self.cfg.session_id),
        ]
    }

    /// Advances running turns to `now`.
    pub fn tick(&mut self, now: u64) {
        if let Some((_, deadline)) = self.exit_armed {
            if now >= deadline {
                self.exit_armed = None;
            }
        }
        self.advance(now);
    }

    /// Handles one key at time `now`.
    pub fn key(&mut self, key: Key, now: u64) {
        self.advance(now);
        match &self.mode {
            Mode::Exited => {}
            Mode::Trust { .. } => self.trust_key(key),
            Mode::Turn(run) => match run.steps.front() {
                Some(Step::Ask(_)) => self.ask_key(key, now),
                Some(Step::LimitMenu) => self.limit_key(key),
                _ => self.edit_key(key, now),
            },
            Mode::Idle => self.edit_key(key, now),
        }
        self.advance(now);
    }

    fn exit(&mut self, code: i32, reason: &str) {
        self.mode = Mode::Exited;
        self.exit_code = Some(code);
        self.events.push(LogEvent::Exit {
            code,
            reason: reason.to_string(),
        });
    }

    fn stray(&mut self, mode: &str, key: &Key) {
        let text = match key {
            Key::Char(c) => c.to_string(),
            Key::Paste(t) => t.clone(),
            other => format!("<{other:?}>"),
        };
        self.events.push(LogEvent::Stray {
            mode: mode.to_string(),
            text,
        });
    }

    fn trust_key(&mut self, key: Key) {
        let Mode::Trust { selected } = &mut self.mode else {
            return;
        };
        let choice = match key {
            Key::Char('1') => Some(true),
            Key::Char('2') | Key::Escape | Key::CtrlC => Some(false),
            Key::Enter => Some(*selected == 0),
            Key::Up | Key::Down | Key::Tab | Key::BackTab => {
                *selected = 1 - *selected;
                None
            }
            other => {
                self.stray("dialog", &other);
                None
            }
        };
        match choice {
            Some(true) => {
                self.events.push(LogEvent::Dialog {
                    dialog: "trust".into(),
                    choice: "accepted".into(),
                });
                self.mode = Mode::Idle;
                self.committed = render::banner(self.width, &self.cfg.cwd);
            }
            Some(false) => {
                self.events.push(LogEvent::Dialog {
                    dialog: "trust".into(),
                    choice: "declined".into(),
                });
                self.exit(1, "declined");
            }
            None => {}
        }
    }

    fn edit_key(&mut self, key: Key, now: u64) {
        let busy = self.busy();
        if !matches!(key, Key::CtrlC | Key::CtrlD) {
            self.exit_armed = None;
        }
        match key {
            Key::Char(c) => self.draft.push_char(c),
            Key::Newline => self.draft.push_char('\n'),
            Key::Paste(text) => {
                if text.is_empty() {
                    return;
                }
                self.pastes += 1;
                self.draft.push_paste(self.pastes, text);
                self.swallow_enters = self.cfg.drop_enters;
            }
            Key::Backspace => self.draft.backspace(),
            Key::CtrlU => self.draft.clear(),
            Key::Tab => {
                if !busy && self.draft.is_empty() {
                    if let Some(g) = self.cfg.ghost.clone() {
                        self.draft.push_str(&g);
                    }
                }
            }
            Key::Enter => self.submit(now),
            Key::Escape => {
                if busy {
                    self.interrupt();
                }
            }
            Key::CtrlC => {
                if busy {
                    self.interrupt();
                } else if !self.draft.is_empty() {
                    self.draft.clear();
                } else {
                    self.arm_exit("Ctrl-C", now);
                }
            }
            Key::CtrlD => {
                if !busy && self.draft.is_empty() {
                    self.arm_exit("Ctrl-D", now);
                }
            }
            Key::Up | Key::Down | Key::Left | Key::Right | Key::BackTab => {}
        }
    }

    fn arm_exit(&mut self, label: &'static str, now: u64) {
        match self.exit_armed {
            Some((l, deadline)) if l == label && now < deadline => self.exit(0, "keys"),
            _ => self.exit_armed = Some((label, now + EXIT_ARM_MS)),
        }
    }

    fn submit(&mut self, now: u64) {
        if self.draft.text().trim().is_empty() {
            return;
        }
        if self.swallow_enters > 0 {
            self.swallow_enters -= 1;
            self.events.push(LogEvent::DroppedEnter);
            return;
        }
        let text = self.draft.text();
        self.draft.clear();
        self.prompts += 1;
        let n = self.prompts;
        let busy = self.busy();
        self.events.push(LogEvent::Prompt {
            n,
            prompt: text.clone(),
            busy,
        });
        if busy {
            self.queue.push_back((n, text));
        } else {
            self.start_turn(n, text, now);
        }
    }

    fn start_turn(&mut self, n: u64, text: String, now: u64) {
        let command = text.trim();
        if command == "/exit" || command == "/quit" {
            self.events.push(LogEvent::TurnEnd {
                n,
                outcome: "exit".into(),
            });
            self.exit(0, "command");
            return;
        }
        self.committed.push(String::new());
        self.committed
            .extend(render::prompt_echo(&text, self.width));
        let turn = self.picker.pick(&text);
        let (verb, past) = render::verbs(n);
        let verb = turn.verb.clone().unwrap_or_else(|| verb.to_string());
        let (steps, outcome) = self.build_steps(&turn.reply, turn.work_ms, turn.stream, &text, n);
        self.mode = Mode::Turn(Box::new(Run {
            n,
            started_ms: now,
            step_started_ms: now,
            steps,
            verb,
            past: past.to_string(),
            outcome,
            streamed: 0,
            selected: 0,
        }));
    }

    fn build_steps(
        &self,
        reply: &Reply,
        work_ms: u64,
        stream: bool,
        prompt: &str,
        n: u64,
    ) -> (VecDeque<Step>, &'static str) {
        let w = self.width;
        let work = |stream: Vec<String>| Step::Work {
            ms: work_ms,
            stream,
            retry: None,
        };
        let gap = |rows: Vec<String>| {
            let mut v = vec![String::new()];
            v.extend(rows);
            v
        };
        let answer_rows = |t: &Text| gap(render::answer(&fill(&t.joined(), prompt, n), w));
        let (steps, outcome) = match reply {
            Reply::Answer(t) | Reply::Done(t) => {
                let outcome = if matches!(reply, Reply::Done(_)) {
                    "done"
                } else {
                    "answer"
                };
                let rows = answer_rows(t);
                if stream {
                    (vec![work(rows), Step::Finish], outcome)
                } else {
                    (
                        vec![work(Vec::new()), Step::Commit(rows), Step::Finish],
                        outcome,
                    )
                }
            }
            Reply::Error(e) => {
                let retry = (e.retries() > 0).then(|| (e.status().to_string(), e.retries()));
                let rows = gap(render::api_error(e.status(), w));
                (
                    vec![
                        Step::Work {
                            ms: work_ms,
                            stream: Vec::new(),
                            retry,
                        },
                        Step::Commit(rows),
                        Step::Finish,
                    ],
                    "error",
                )
            }
            Reply::Permission(p) => {
                let mut v = vec![work(Vec::new())];
                if let Some(intro) = &p.intro {
                    v.push(Step::Commit(answer_rows(intro)));
                }
                let output = if !p.output.is_empty() {
                    p.output.joined()
                } else if p.tool == Tool::Bash {
                    "(No content)".to_string()
                } else {
                    let lines = p.content.joined().lines().count();
                    format!("Wrote {lines} lines to {}", p.path.as_deref().unwrap_or(""))
                };
                let mut call = vec![render::tool_call(p, w)];
                call.extend(render::result_rows(&output, w));
                let answer = p.answer.clone().unwrap_or(Text::One("Done.".into()));
                let approved = vec![
                    Step::Commit(gap(call)),
                    Step::Work {
                        ms: p.after_ms,
                        stream: Vec::new(),
                        retry: None,
                    },
                    Step::Commit(answer_rows(&answer)),
                    Step::Finish,
                ];
                v.push(Step::Ask(Box::new(Ask {
                    perm: p.clone(),
                    approved,
                })));
                (v, "answer")
            }
            Reply::Limit(l) => {
                let mut v = vec![
                    work(Vec::new()),
                    Step::Commit(render::limit_notice(&l.which, &l.resets, w)),
                    Step::Finish,
                ];
                if l.menu {
                    v.push(Step::LimitMenu);
                }
                (v, "limit")
            }
            Reply::Exit => (vec![work(Vec::new()), Step::Exit], "exit"),
        };
        (steps.into(), outcome)
    }

    fn interrupt(&mut self) {
        let Mode::Turn(run) = &self.mode else {
            return;
        };
        let n = run.n;
        self.committed.extend(render::interrupted(self.width));
        self.events.push(LogEvent::Interrupted { n });
        self.events.push(LogEvent::TurnEnd {
            n,
            outcome: "interrupted".into(),
        });
        self.mode = Mode::Idle;
        // Queued prompts go back into the box, as the real CLI does.
        for (_, text) in std::mem::take(&mut self.queue) {
            if !self.draft.is_empty() {
                self.draft.push_char('\n');
            }
            self.draft.push_str(&text);
        }
    }

    fn ask_key(&mut self, key: Key, now: u64) {
        let Mode::Turn(run) = &mut self.mode else {
            return;
        };
        let choice = match key {
            Key::Char('1') | Key::Char('y') => Some(1),
            Key::Char('2') => Some(2),
            Key::Char('3') | Key::Char('n') => Some(3),
            Key::Escape | Key::CtrlC => Some(0),
            Key::Enter => Some(run.selected as u8 + 1),
            Key::Up => {
                run.selected = run.selected.saturating_sub(1);
                None
            }
            Key::Down => {
                run.selected = (run.selected + 1).min(2);
                None
            }
            other => {
                self.stray("permission", &other);
                None
            }
        };
        if let Some(choice) = choice {
            self.answer_permission(choice, now);
        }
    }

    fn answer_permission(&mut self, choice: u8, now: u64) {
        let Mode::Turn(run) = &mut self.mode else {
            return;
        };
        let Some(Step::Ask(ask)) = run.steps.pop_front() else {
            return;
        };
        let approved = choice == 1 || choice == 2;
        let (tool, target) = match ask.perm.tool {
            Tool::Bash => ("bash", ask.perm.command.clone()),
            Tool::Create => ("create", ask.perm.path.clone()),
            Tool::Edit => ("edit", ask.perm.path.clone()),
        };
        self.events.push(LogEvent::Permission {
            permission: if approved { "approved" } else { "denied" }.into(),
            choice,
            tool: tool.into(),
            target: target.unwrap_or_default(),
        });
        run.selected = 0;
        run.step_started_ms = now;
        if approved {
            for step in ask.approved.into_iter().rev() {
                run.steps.push_front(step);
            }
        } else {
            self.committed.push(String::new());
            self.committed
                .push(render::tool_call(&ask.perm, self.width));
            self.committed.extend(render::interrupted(self.width));
            run.outcome = "permission_denied";
            run.steps.clear();
        }
    }

    fn limit_key(&mut self, key: Key) {
        let Mode::Turn(run) = &mut self.mode else {
            return;
        };
        let choice = match key {
            Key::Char('1') => 1,
            Key::Char('2') => 2,
            Key::Escape | Key::CtrlC => 0,
            Key::Enter => run.selected as u8 + 1,
            Key::Up | Key::Down => {
                run.selected = 1 - run.selected.min(1);
                return;
            }
            other => {
                self.stray("limit_menu", &other);
                return;
            }
        };
        run.steps.pop_front();
        run.selected = 0;
        self.events.push(LogEvent::LimitMenu { choice });
    }

    /// Runs steps that are due at `now`.
    fn advance(&mut self, now: u64) {
        loop {
            let Mode::Turn(run) = &mut self.mode else {
                return;
            };
            let Some(step) = run.steps.front_mut() else {
                let (n, outcome) = (run.n, run.outcome);
                self.mode = Mode::Idle;
                self.events.push(LogEvent::TurnEnd {
                    n,
                    outcome: outcome.into(),
                });
                match self.queue.pop_front() {
                    Some((qn, text)) => {
                        self.start_turn(qn, text, now);
                        continue;
                    }
                    None => return,
                }
            };
            match step {
                Step::Work { ms, stream, .. } => {
                    let elapsed = now.saturating_sub(run.step_started_ms);
                    let done = elapsed >= *ms;
                    let due = if done {
                        stream.len()
                    } else {
                        (stream.len() as u64 * elapsed / (*ms).max(1)) as usize
                    };
                    while run.streamed < due.min(stream.len()) {
                        self.committed.push(stream[run.streamed].clone());
                        run.streamed += 1;
                    }
                    if !done {
                        return;
                    }
                    run.steps.pop_front();
                    run.streamed = 0;
                    run.step_started_ms = now;
                }
                Step::Commit(rows) => {
                    self.committed.append(rows);
                    run.steps.pop_front();
                }
                Step::Finish => {
                    self.committed.push(String::new());
                    self.committed.push(render::finished(
                        &run.past,
                        now.saturating_sub(run.started_ms),
                        self.width,
                    ));
                    run.steps.pop_front();
                    run.step_started_ms = now;
                }
                Step::Ask(_) | Step::LimitMenu => return,
                Step::Exit => {
                    let n = run.n;
                    self.events.push(LogEvent::TurnEnd {
                        n,
                        outcome: "exit".into(),
                    });
                    self.exit(0, "script");
                    return;
                }
            }
        }
    }

    /// The pane title to set, or `None` to leave it alone (the trust dialog comes
    /// before the CLI sets one).
    pub fn title(&self, now: u64) -> Option<String> {
        match &self.mode {
            Mode::Trust { .. } => None,
            Mode::Exited => Some(String::new()),
            Mode::Turn(run) if matches!(run.steps.front(), Some(Step::Work { .. })) => {
                let glyph = render::TITLE_GLYPHS[((now / TICK_MS) % 2) as usize];
                Some(format!("{glyph} Claude Code"))
            }
            _ => Some(render::IDLE_TITLE.to_string()),
        }
    }

    /// The live region at `now`, at most the pane's height.
    pub fn frame(&self, now: u64) -> Frame {
        let w = self.width;
        let mut frame = match &self.mode {
            Mode::Trust { selected } => {
                let (lines, cursor_row) = render::trust_dialog(&self.cfg.cwd, *selected, w);
                Frame {
                    lines,
                    cursor_row,
                    cursor_col: 1,
                }
            }
            Mode::Idle | Mode::Exited => self.box_frame(Vec::new(), false),
            Mode::Turn(run) => match run.steps.front() {
                Some(Step::Ask(ask)) => {
                    let mut lines = vec![String::new(), render::tool_call(&ask.perm, w)];
                    lines.extend(render::result_rows("Waiting…", w));
                    lines.push(String::new());
                    let (panel, cursor) =
                        render::permission_panel(&ask.perm, run.selected, &self.cfg.cwd, w);
                    let cursor_row = lines.len() + cursor;
                    lines.extend(panel);
                    Frame {
                        lines,
                        cursor_row,
                        cursor_col: 1,
                    }
                }
                Some(Step::LimitMenu) => {
                    // The CLI runs `/rate-limit-options` itself; its echo goes away
                    // with the menu, so both live in the frame.
                    let mut lines = vec![String::new()];
                    lines.extend(render::prompt_echo("/rate-limit-options", w));
                    let (menu, cursor) = render::limit_menu(run.selected, w);
                    let cursor_row = lines.len() + cursor;
                    lines.extend(menu);
                    Frame {
                        lines,
                        cursor_row,
                        cursor_col: 2,
                    }
                }
                step => {
                    let elapsed = now.saturating_sub(run.started_ms);
                    let glyph = render::SPINNER_GLYPHS
                        [((now / TICK_MS) % render::SPINNER_GLYPHS.len() as u64) as usize];
                    let status = match step {
                        Some(Step::Work {
                            ms,
                            retry: Some((status, of)),
                            ..
                        }) => {
                            let per = (ms / u64::from(*of).max(1)).max(1);
                            let in_step = now.saturating_sub(run.step_started_ms);
                            let attempt = ((in_step / per) as u32 + 1).min(*of);
                            let left = (per * u64::from(attempt)).saturating_sub(in_step);
                            render::retry(glyph, status, left.div_ceil(1000), attempt, *of, w)
                        }
                        _ => render::spinner(glyph, &run.verb, elapsed, elapsed * 37 / 1000, w),
                    };
                    self.box_frame(vec![String::new(), status], true)
                }
            },
        };
        if frame.lines.len() > self.height {
            let cut = frame.lines.len() - self.height;
            frame.lines.drain(..cut);
            frame.cursor_row = frame.cursor_row.saturating_sub(cut);
        }
        frame
    }

    fn box_frame(&self, above: Vec<String>, busy: bool) -> Frame {
        let w = self.width;
        let shown = self.draft.display();
        let ghost = self.cfg.ghost.as_deref().filter(|_| self.mode_is_idle());
        let content = BoxContent {
            draft: &shown,
            ghost,
            busy,
            max_rows: (self.height / 2).max(1),
        };
        let (rows, cursor_in_box, cursor_col) = render::input_box(&content, w);
        let mut lines = above;
        lines.push(String::new());
        let box_top = lines.len();
        lines.extend(rows);
        let left = if busy {
            "  esc to interrupt · ← for agents".to_string()
        } else if let Some((label, _)) = self.exit_armed {
            format!("  Press {label} again to exit")
        } else if shown.contains('\n') {
            "  ctrl+g to edit in Vim".to_string()
        } else if !self.draft.is_empty() {
            String::new()
        } else {
            "  ? for shortcuts · ← for agents".to_string()
        };
        lines.push(render::footer(&left, !busy, w));
        Frame {
            lines,
            cursor_row: box_top + cursor_in_box,
            cursor_col,
        }
    }

    fn mode_is_idle(&self) -> bool {
        matches!(self.mode, Mode::Idle)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::standin::render::plain;
    use rand::{Rng as _, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn app_with(script: &str, cfg: AppConfig) -> App {
        let script = Script::parse(script, "test").unwrap();
        App::new(
            AppConfig {
                cwd: "/work/proj".into(),
                session_id: "abc".into(),
                ..cfg
            },
            script,
            80,
            40,
        )
    }

    fn app(script: &str) -> App {
        app_with(script, AppConfig::default())
    }

    /// The frame as `capture-pane -p` shows it: no escapes, no trailing spaces.
    fn text(frame: &Frame) -> Vec<String> {
        frame
            .lines
            .iter()
            .map(|l| plain(l).trim_end_matches(' ').to_string())
            .collect()
    }

    fn prompts(events: &[LogEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                LogEvent::Prompt { prompt, .. } => Some(prompt.clone()),
                _ => None,
            })
            .collect()
    }

    fn paste_and_enter(a: &mut App, s: &str, now: u64) {
        a.key(Key::Paste(s.into()), now);
        a.key(Key::Enter, now);
    }

    const TRICKY: &str =
        "line one; echo $(whoami) 'q' \"dq\" \\back\\\n\tindented\n日本語 Enter C-c";

    #[test]
    fn idle_frame_is_the_input_box() {
        let mut a = app("{}");
        let banner = a.take_committed();
        assert!(plain(&banner[0]).starts_with("╭─── Claude Code"));
        let t = text(&a.frame(0));
        assert_eq!(t[0], "");
        assert_eq!(t[1], "─".repeat(80));
        assert_eq!(t[2].trim_end_matches(' '), "❯\u{a0}");
        assert_eq!(t[3], "─".repeat(80));
        assert!(t[4].starts_with("  ? for shortcuts · ← for agents"));
        assert_eq!(a.title(0).as_deref(), Some("✳ Claude Code"));
        assert_eq!(a.next_wake(0), None);
    }

    #[test]
    fn a_pasted_prompt_is_logged_once_byte_for_byte_and_runs_a_turn() {
        let mut a = app(r#"{"turns": [{"work_ms": 1000, "reply": {"answer": "All good."}}]}"#);
        a.take_committed();
        paste_and_enter(&mut a, TRICKY, 0);
        let ev = a.take_events();
        assert_eq!(prompts(&ev), vec![TRICKY.to_string()]);
        let echo: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert_eq!(echo[1], "❯ line one; echo $(whoami) 'q' \"dq\" \\back\\");
        assert!(a.busy());
        let t = text(&a.frame(500));
        assert!(t[1].contains("… (0s · ↓"), "{t:?}");
        assert!(t.iter().any(|l| l == "  esc to interrupt · ← for agents"));
        assert!(a.title(500).unwrap().ends_with(" Claude Code"));
        assert!(!a.title(500).unwrap().starts_with('✳'));
        assert_eq!(a.next_wake(500), Some(TICK_MS));
        a.tick(1100);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert_eq!(out[1], "● All good.");
        assert!(
            out[3].starts_with("✻ ") && out[3].ends_with(" for 1s"),
            "{out:?}"
        );
        assert!(!a.busy());
        let ev = a.take_events();
        assert!(matches!(&ev[..], [LogEvent::TurnEnd { n: 1, outcome }] if outcome == "answer"));
        assert!(text(&a.frame(1100))[4].starts_with("  ? for shortcuts"));
        // Enter on the empty box submits nothing.
        a.key(Key::Enter, 1200);
        assert!(a.take_events().is_empty());
    }

    #[test]
    fn long_pastes_collapse_in_the_box_but_submit_whole() {
        let mut a = app("{}");
        let body = "a\nb\nc\nd";
        a.key(Key::Char('x'), 0);
        a.key(Key::Paste(body.into()), 0);
        let t = text(&a.frame(0));
        assert_eq!(t[2], "❯\u{a0}x[Pasted text #1 +3 lines]");
        assert!(
            t[4].starts_with("    ") && t[4].ends_with("● high · /effort"),
            "footer left part disappears with a draft: {:?}",
            t[4]
        );
        a.key(Key::Enter, 0);
        assert_eq!(prompts(&a.take_events()), vec![format!("x{body}")]);
    }

    #[test]
    fn typing_and_backspace_edit_the_draft() {
        let mut a = app("{}");
        for c in "helo".chars() {
            a.key(Key::Char(c), 0);
        }
        a.key(Key::Backspace, 0);
        a.key(Key::Char('l'), 0);
        a.key(Key::Char('o'), 0);
        a.key(Key::Paste("!!".into()), 0);
        a.key(Key::Backspace, 0);
        let f = a.frame(0);
        assert_eq!(text(&f)[2], "❯\u{a0}hello");
        assert_eq!((f.cursor_row, f.cursor_col), (2, 7));
        a.key(Key::Enter, 0);
        assert_eq!(prompts(&a.take_events()), vec!["hello".to_string()]);
    }

    #[test]
    fn drop_first_enter_swallows_one_enter_per_paste() {
        let mut a = app_with(
            "{}",
            AppConfig {
                drop_enters: 1,
                ..Default::default()
            },
        );
        paste_and_enter(&mut a, "do it", 0);
        assert_eq!(a.take_events(), vec![LogEvent::DroppedEnter]);
        assert_eq!(text(&a.frame(0))[2], "❯\u{a0}do it");
        a.key(Key::Enter, 10);
        assert_eq!(prompts(&a.take_events()), vec!["do it".to_string()]);
        a.key(Key::Enter, 20);
        assert!(a.take_events().is_empty());
    }

    #[test]
    fn ghost_text_is_dim_and_not_submitted() {
        let mut a = app_with(
            "{}",
            AppConfig {
                ghost: Some("try: run the tests".into()),
                ..Default::default()
            },
        );
        let f = a.frame(0);
        assert!(f.lines[2].contains("\x1b[7mt\x1b[0m\x1b[2mry: run the tests"));
        assert_eq!(f.cursor_col, 2);
        a.key(Key::Enter, 0);
        assert!(a.take_events().is_empty());
        a.key(Key::Char('x'), 0);
        assert_eq!(text(&a.frame(0))[2], "❯\u{a0}x");
        a.key(Key::Backspace, 0);
        a.key(Key::Tab, 0);
        a.key(Key::Enter, 0);
        assert_eq!(
            prompts(&a.take_events()),
            vec!["try: run the tests".to_string()]
        );
    }

    const PERM: &str = r#"{"loop": true, "turns": [{"work_ms": 100, "reply": {"permission": {
        "command": "rm -rf build && mkdir -p build", "description": "Clean the build directory",
        "intro": "I'll clean the build directory first.", "output": "cleaned",
        "after_ms": 100, "answer": "The build directory is clean now."}}}]}"#;

    #[test]
    fn permission_menu_approved_with_1() {
        let mut a = app(PERM);
        paste_and_enter(&mut a, "clean the build dir", 0);
        a.tick(150);
        let f = a.frame(150);
        let t = text(&f);
        assert!(t.contains(&" Bash command".to_string()), "{t:?}");
        assert!(t.contains(&" Do you want to proceed?".to_string()));
        assert_eq!(t[f.cursor_row], " ❯ 1. Yes");
        assert_eq!(f.cursor_col, 1);
        assert_eq!(
            t.last().unwrap(),
            " Esc to cancel · Tab to amend · ctrl+e to explain"
        );
        assert_eq!(a.title(150).as_deref(), Some("✳ Claude Code"));
        assert_eq!(a.next_wake(150), None, "a menu waits without redrawing");
        a.take_events();
        a.key(Key::Paste("stray".into()), 160);
        a.key(Key::Char('1'), 200);
        let ev = a.take_events();
        assert!(matches!(&ev[0], LogEvent::Stray { mode, .. } if mode == "permission"));
        assert!(
            matches!(&ev[1], LogEvent::Permission { permission, choice: 1, target, .. }
            if permission == "approved" && target == "rm -rf build && mkdir -p build")
        );
        a.tick(400);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert!(
            out.contains(&"● Bash(rm -rf build && mkdir -p build)".to_string()),
            "{out:?}"
        );
        assert!(out.contains(&"  ⎿ \u{a0}cleaned".to_string()));
        assert!(out.contains(&"● The build directory is clean now.".to_string()));
        assert!(!a.busy());
    }

    #[test]
    fn permission_menu_denied_with_escape_or_enter_on_no() {
        let mut a = app(PERM);
        paste_and_enter(&mut a, "clean", 0);
        a.tick(150);
        a.key(Key::Escape, 160);
        let ev = a.take_events();
        assert!(ev.iter().any(|e| matches!(e, LogEvent::Permission { permission, choice: 0, .. } if permission == "denied")));
        assert!(ev.iter().any(
            |e| matches!(e, LogEvent::TurnEnd { outcome, .. } if outcome == "permission_denied")
        ));
        assert!(!a.busy());
        paste_and_enter(&mut a, "clean", 200);
        a.tick(400);
        a.key(Key::Down, 410);
        a.key(Key::Down, 410);
        a.key(Key::Enter, 420);
        assert!(a
            .take_events()
            .iter()
            .any(|e| matches!(e, LogEvent::Permission { choice: 3, .. })));
    }

    #[test]
    fn error_limit_done_and_exit_replies() {
        let mut a = app(r#"{"turns": [
            {"work_ms": 0, "reply": {"error": "500 Internal server error"}},
            {"work_ms": 0, "reply": {"limit": {"menu": true}}},
            {"work_ms": 0, "reply": {"done": "GOAL COMPLETE"}},
            {"work_ms": 0, "reply": "exit"}]}"#);
        a.take_committed();
        paste_and_enter(&mut a, "one", 0);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert!(out
            .iter()
            .any(|l| l.starts_with("● API Error: 500 Internal server error.")));
        paste_and_enter(&mut a, "two", 10);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert_eq!(
            out[2],
            "  ⎿ \u{a0}You've hit your session limit · resets 9:32am (UTC)"
        );
        let f = a.frame(10);
        let t = text(&f);
        assert_eq!(t[1], "❯ /rate-limit-options");
        assert_eq!(t[f.cursor_row], "  ❯ 1. Stop and wait for limit to reset");
        a.key(Key::Enter, 20);
        assert!(!text(&a.frame(20)).contains(&"❯ /rate-limit-options".to_string()));
        assert!(a.take_events().contains(&LogEvent::LimitMenu { choice: 1 }));
        assert!(!a.busy());
        paste_and_enter(&mut a, "three", 30);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert!(out.contains(&"● GOAL COMPLETE".to_string()));
        paste_and_enter(&mut a, "four", 40);
        assert_eq!(a.exit_code(), Some(0));
        assert_eq!(a.farewell()[0], "Resume this session with:");
        assert_eq!(a.title(40).as_deref(), Some(""));
    }

    #[test]
    fn streamed_answer_appears_while_the_spinner_runs() {
        let mut a = app(r#"{"turns": [{"work_ms": 1000, "stream": true,
            "reply": {"answer": ["one", "two", "three"]}}]}"#);
        a.take_committed();
        paste_and_enter(&mut a, "go", 0);
        a.take_committed();
        a.tick(600);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert_eq!(out, vec!["", "● one"]);
        assert!(a.busy());
        a.tick(1000);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert_eq!(&out[..2], &["  two", "  three"]);
    }

    #[test]
    fn retry_countdown_replaces_the_spinner() {
        let mut a = app(r#"{"turns": [{"work_ms": 3000,
            "reply": {"error": {"status": "500 Internal server error", "retries": 3}}}]}"#);
        paste_and_enter(&mut a, "go", 0);
        let row = &text(&a.frame(1500))[1];
        assert!(
            row.ends_with(" 500 Internal server error · Retrying in 1s · attempt 2/3"),
            "{row}"
        );
    }

    #[test]
    fn escape_interrupts_and_prompts_typed_while_busy_are_queued() {
        let mut a = app(r#"{"default": {"work_ms": 5000, "reply": {"answer": "x"}}}"#);
        paste_and_enter(&mut a, "first", 0);
        paste_and_enter(&mut a, "second", 10);
        let ev = a.take_events();
        assert!(
            matches!(
                &ev[1],
                LogEvent::Prompt {
                    n: 2,
                    busy: true,
                    ..
                }
            ),
            "{ev:?}"
        );
        a.key(Key::Escape, 20);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert!(out.contains(&"  ⎿ \u{a0}Interrupted · What should Claude do instead?".to_string()));
        assert!(a.take_events().contains(&LogEvent::Interrupted { n: 1 }));
        assert_eq!(
            text(&a.frame(20))[2],
            "❯\u{a0}second",
            "queued prompt back in the box"
        );
        a.key(Key::CtrlU, 30);
        // A queued prompt runs once the turn before it ends.
        paste_and_enter(&mut a, "third", 40);
        paste_and_enter(&mut a, "fourth", 50);
        a.tick(5100);
        assert!(a.busy());
        let ev = a.take_events();
        assert!(ev
            .iter()
            .any(|e| matches!(e, LogEvent::TurnEnd { n: 3, .. })));
        a.tick(10200);
        assert!(!a.busy());
    }

    #[test]
    fn ctrl_c_twice_exits() {
        let mut a = app("{}");
        a.key(Key::Char('x'), 0);
        a.key(Key::CtrlC, 0);
        assert!(text(&a.frame(0))[2].trim_end_matches(' ') == "❯\u{a0}");
        a.key(Key::CtrlC, 10);
        assert!(text(&a.frame(10))[4].starts_with("  Press Ctrl-C again to exit "));
        a.tick(3000);
        assert!(text(&a.frame(3000))[4].starts_with("  ? for shortcuts"));
        a.key(Key::CtrlC, 3100);
        a.key(Key::CtrlC, 3200);
        assert_eq!(a.exit_code(), Some(0));
        assert!(a.farewell().is_empty());
    }

    #[test]
    fn trust_dialog_refuses_typing_then_accepts() {
        let mut a = app_with(
            "{}",
            AppConfig {
                dialog: true,
                ..Default::default()
            },
        );
        assert!(a.take_committed().is_empty());
        assert_eq!(a.title(0), None);
        let f = a.frame(0);
        let t = text(&f);
        assert!(t.iter().any(|l| l
            .starts_with(" Quick safety check: Is this a project you created or one you trust?")));
        assert_eq!(t[f.cursor_row], " ❯ 1. Yes, I trust this folder");
        assert!(t.contains(&"   2. No, exit".to_string()));
        assert_eq!(t.last().unwrap(), " Enter to confirm · Esc to cancel");
        a.key(Key::Paste("fix the bug".into()), 0);
        let ev = a.take_events();
        assert!(
            matches!(&ev[..], [LogEvent::Stray { mode, text }] if mode == "dialog" && text == "fix the bug")
        );
        a.key(Key::Enter, 0);
        assert_eq!(
            a.take_events(),
            vec![LogEvent::Dialog {
                dialog: "trust".into(),
                choice: "accepted".into()
            }]
        );
        assert!(plain(&a.take_committed()[0]).starts_with("╭───"));
        assert!(text(&a.frame(0))[4].starts_with("  ? for shortcuts"));
        let mut b = app_with(
            "{}",
            AppConfig {
                dialog: true,
                ..Default::default()
            },
        );
        b.key(Key::Escape, 0);
        assert_eq!(b.exit_code(), Some(1));
    }

    #[test]
    fn slash_exit_exits() {
        let mut a = app("{}");
        paste_and_enter(&mut a, "/exit", 0);
        assert_eq!(a.exit_code(), Some(0));
    }

    #[test]
    fn default_script_answers_ok_done() {
        let mut a = App::new(
            AppConfig::default(),
            Script::parse("{}", "s").unwrap(),
            80,
            24,
        );
        paste_and_enter(&mut a, "add a health endpoint\nand tests", 0);
        a.tick(999);
        assert!(a.busy());
        a.tick(1000);
        let out: Vec<String> = a.take_committed().iter().map(|l| plain(l)).collect();
        assert!(
            out.contains(&"● ok, done: add a health endpoint".to_string()),
            "{out:?}"
        );
    }

    #[test]
    fn frames_fit_the_pane_whatever_happens() {
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let mut rnd = move || rng.gen::<u64>();
        for (w, h) in [(10u16, 5u16), (20, 6), (30, 10), (80, 24), (200, 60)] {
            let mut a = app(PERM);
            a.resize(w, h);
            a.take_committed();
            let mut now = 0;
            for _ in 0..3000 {
                now += rnd() % 200;
                let key = match rnd() % 14 {
                    0 => Key::Enter,
                    1 => Key::Escape,
                    2 => Key::Paste("p\nq\tr 日本".repeat((rnd() % 50) as usize)),
                    3 => Key::Backspace,
                    4 => Key::Char('1'),
                    5 => Key::Down,
                    6 => Key::CtrlC,
                    7 => Key::Newline,
                    8 => Key::Tab,
                    _ => Key::Char(char::from_u32((rnd() % 0x3000) as u32).unwrap_or('x')),
                };
                a.key(key, now);
                a.tick(now);
                let f = a.frame(now);
                assert!(f.lines.len() <= usize::from(h).max(5));
                assert!(f.cursor_row < f.lines.len().max(1));
                for l in f.lines.iter().chain(a.take_committed().iter()) {
                    assert!(
                        crate::standin::text::str_width(&plain(l)) <= usize::from(w).max(MIN_WIDTH),
                        "{l:?}"
                    );
                }
                a.take_events();
                if a.exit_code().is_some() {
                    a = app(PERM);
                    a.resize(w, h);
                    a.take_committed();
                }
            }
        }
    }
}

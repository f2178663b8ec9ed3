//! The context stack: the bounded briefing the twin model reads each turn, assembled
//! from plain data with no IO.
//!
//! Seven blocks in a fixed order, stable ones first so the model server's prefix cache
//! keeps hitting: **system** (phase-aware) · **session brief** · **task graph** ·
//! **digest** · **anti-repeat fence** · **terminal** · **question**. The system block is
//! the system message; the other six, in that order, form one user message (chat
//! templates of small models want strict system/user alternation).
//!
//! Budget: the whole request — contents plus chat-template overhead — is estimated with
//! the model's calibrated [`TokenEstimator`] and never exceeds [`ContextConfig::budget`].
//! Each block is first fitted to its own cap; if the total is still over, blocks give
//! way lowest priority first:
//!
//! 1. the terminal shrinks (oldest lines first) to its floor of `terminal.min_lines`;
//! 2. the digest shrinks to its newest line, the fence to its newest three prompts, the
//!    task list to the done count and active task;
//! 3. the digest, then the fence are dropped;
//! 4. the terminal shrinks to one line, then is dropped; then the task list;
//! 5. last resort (a tiny budget or a huge calibration factor): the brief, the question
//!    and the system prompt are cut short — they are never dropped.
//!
//! Not here: reading the pane, calling the model, judging the reply (the gate).

mod chat;
mod digest;
mod phase;
mod prompts;
mod redact;
mod tasks;
mod terminal;
mod tokens;

use serde::{Deserialize, Serialize};

use tokens::{char_quarters, quarters, MESSAGE_OVERHEAD_Q, REPLY_PRIMING_Q};

pub use chat::{ChatMessage, Role};
pub use digest::{
    compress, gist, Digest, DigestEntry, Milestone, Outcome, OutcomeCounts, TurnNote,
};
pub use phase::{phase_label, system_prompt, Phase, PhaseSchedule};
pub use prompts::{
    clean_reply, clean_reply_guarded, detect_messages, goal_steps, parse_detect, parse_plan,
    parse_plan_file, plan_from_reply, plan_from_reply_guarded, plan_messages, strip_reasoning,
    Detected, EchoGuard, Plan, PlanSource, PLAN_MAX_STEPS, PLAN_MIN_STEPS, PLAN_STEP_CHARS,
    REPLY_MAX_CHARS,
};
pub use redact::{redact, REDACTED};
pub use tasks::{Task, TaskGraph, TaskStatus};
pub use terminal::PaneSignal;
pub use tokens::{Calibration, Calibrations, TokenEstimator};

/// Smallest budget accepted: below it the fixed blocks cannot be kept meaningful.
pub const MIN_BUDGET: u32 = 256;

/// The seven blocks, in prompt order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    System,
    Brief,
    Tasks,
    Digest,
    Fence,
    Terminal,
    Question,
}

impl Block {
    pub const ALL: [Block; 7] = [
        Block::System,
        Block::Brief,
        Block::Tasks,
        Block::Digest,
        Block::Fence,
        Block::Terminal,
        Block::Question,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Block::System => "system",
            Block::Brief => "brief",
            Block::Tasks => "tasks",
            Block::Digest => "digest",
            Block::Fence => "fence",
            Block::Terminal => "terminal",
            Block::Question => "question",
        }
    }

    /// The heading that opens the block in the user message (the system block has none).
    pub fn heading(self) -> &'static str {
        match self {
            Block::System => "",
            Block::Brief => "## Session",
            Block::Tasks => "## Tasks",
            Block::Digest => "## Earlier turns",
            Block::Fence => "## Already sent (do not repeat or reword these)",
            Block::Terminal => "## Terminal (latest lines at the bottom)",
            Block::Question => "## Your turn",
        }
    }
}

/// Per-block token caps (calibrated tokens). The defaults are the design's 2048-token
/// layout: 300 + 200 + 150 + 150 + 100 + 900 + 48, with room in the question block for
/// two rejection notes when regenerating (the global budget still rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BlockCaps {
    pub system: u32,
    pub brief: u32,
    pub tasks: u32,
    pub digest: u32,
    pub fence: u32,
    pub terminal: u32,
    /// The question plus up to two rejection notes when regenerating.
    pub question: u32,
}

impl Default for BlockCaps {
    fn default() -> Self {
        BlockCaps {
            system: 300,
            brief: 200,
            tasks: 150,
            digest: 150,
            fence: 100,
            terminal: 900,
            question: 220,
        }
    }
}

impl BlockCaps {
    fn get(&self, b: Block) -> u32 {
        match b {
            Block::System => self.system,
            Block::Brief => self.brief,
            Block::Tasks => self.tasks,
            Block::Digest => self.digest,
            Block::Fence => self.fence,
            Block::Terminal => self.terminal,
            Block::Question => self.question,
        }
    }
}

/// How many pane lines the terminal block starts from, by what the screen shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TerminalLineCounts {
    pub success: usize,
    pub neutral: usize,
    pub error: usize,
    /// The terminal keeps at least this many lines before other blocks give way.
    pub min_lines: usize,
    /// Characters kept of one line (10,000-column lines exist).
    pub max_line_chars: usize,
}

impl Default for TerminalLineCounts {
    fn default() -> Self {
        TerminalLineCounts {
            success: 20,
            neutral: 60,
            error: 120,
            min_lines: 12,
            max_line_chars: 300,
        }
    }
}

impl TerminalLineCounts {
    pub fn for_signal(&self, s: PaneSignal) -> usize {
        match s {
            PaneSignal::Success => self.success,
            PaneSignal::Neutral => self.neutral,
            PaneSignal::Error => self.error,
        }
    }
}

/// Context assembly settings (the `[context]` table of the coordinator's config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// Tokens the request may use (contents and template overhead).
    pub budget: u32,
    /// The model's context window; `window - budget` is left for the reply.
    pub window: u32,
    pub caps: BlockCaps,
    pub terminal: TerminalLineCounts,
    /// Earlier prompts listed in the fence (newest kept when trimming).
    pub fence_prompts: usize,
    /// Characters kept of each fenced prompt.
    pub fence_prompt_chars: usize,
    /// Pending tasks listed after the active one.
    pub pending_shown: usize,
    pub phases: PhaseSchedule,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            budget: 1848,
            window: 2048,
            caps: BlockCaps::default(),
            terminal: TerminalLineCounts::default(),
            fence_prompts: 15,
            fence_prompt_chars: 100,
            pending_shown: 2,
            phases: PhaseSchedule::default(),
        }
    }
}

/// A context setting that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextConfigError {
    #[error("context budget {budget} is below the minimum of {MIN_BUDGET} tokens")]
    BudgetTooSmall { budget: u32 },
    #[error("context budget {budget} exceeds the model window of {window} tokens")]
    BudgetOverWindow { budget: u32, window: u32 },
}

impl ContextConfig {
    pub fn validate(&self) -> Result<(), ContextConfigError> {
        if self.budget < MIN_BUDGET {
            return Err(ContextConfigError::BudgetTooSmall {
                budget: self.budget,
            });
        }
        if self.budget > self.window {
            return Err(ContextConfigError::BudgetOverWindow {
                budget: self.budget,
                window: self.window,
            });
        }
        Ok(())
    }

    /// Tokens the window leaves for the reply (compare with the model's `max_tokens`).
    pub fn reply_room(&self) -> u32 {
        self.window.saturating_sub(self.budget)
    }
}

/// Who and where the session is: the brief block's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionBrief {
    pub project: String,
    pub goal: String,
    pub path: String,
    pub machine: String,
    /// The pane as the operator named it (`agent-codex:1.1` or `%12`).
    pub pane: String,
    /// The turn being prepared, 1-based.
    pub turn: u32,
    /// The session's turn budget (0: none).
    pub max_turns: u32,
}

/// A candidate the gate refused for this turn, shown to the model when regenerating.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// Why, in words the model can act on ("repeats an earlier instruction").
    pub reason: String,
    pub text: String,
}

/// Everything one turn's context is built from.
#[derive(Debug, Clone, Copy)]
pub struct ContextInput<'a> {
    pub brief: &'a SessionBrief,
    pub tasks: &'a TaskGraph,
    pub digest: &'a Digest,
    /// Prompts typed so far this session, oldest first (the fence shows the newest).
    pub recent_prompts: &'a [String],
    /// The pane capture (plain text; scrollback above the screen is fine).
    pub screen: &'a str,
    pub signal: PaneSignal,
    /// Candidates refused earlier this turn (the last two are shown).
    pub rejections: &'a [Rejection],
    /// Forces a phase; `None` picks it by turn position.
    pub phase: Option<Phase>,
    pub config: &'a ContextConfig,
    pub estimator: &'a TokenEstimator,
}

/// How a block fared against the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// Included whole.
    Full,
    /// Included, shortened.
    Trimmed,
    /// Had content, left out for budget.
    Dropped,
    /// Nothing to say (no tasks, no history yet).
    Empty,
}

/// One block's share of the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockReport {
    pub block: Block,
    /// Calibrated tokens of the block's text as sent.
    pub tokens: u32,
    pub fit: Fit,
    /// Lines (items) kept, of how many the block started with.
    pub kept: usize,
    pub total: usize,
}

/// The assembled request and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Context {
    pub messages: Vec<ChatMessage>,
    /// Calibrated estimate of the whole request; never above `budget`.
    pub estimated_tokens: u32,
    /// The same without calibration: pass it to [`Calibration::observe`] with the
    /// reply's `usage.prompt_tokens`.
    pub raw_tokens: u32,
    pub budget: u32,
    pub phase: Phase,
    /// One report per block, in prompt order.
    pub blocks: Vec<BlockReport>,
    /// Secrets replaced in the pane text.
    pub redactions: usize,
}

impl Context {
    pub fn block(&self, b: Block) -> Option<&BlockReport> {
        self.blocks.iter().find(|r| r.block == b)
    }
}

const QUESTION: &str = "Write the one instruction the developer types next into the agent: imperative, one or two sentences, specific to the active task and what the terminal shows. No status requests, no questions about progress, no quotes or preamble.";

/// Quarter tokens of a newline and of the blank line between blocks.
const NL_Q: u64 = 2;
const SEP_Q: u64 = 4;
/// Rejection notes shown, and characters kept of each rejected text.
const REJECTIONS_SHOWN: usize = 2;
/// What the last resort leaves of each never-dropped block, round by round (quarter
/// tokens). With the smallest floor the three blocks and the template overhead cost 164
/// quarters, 123 tokens at the highest calibration factor: under [`MIN_BUDGET`], so the
/// final round (floor 0) never empties a block with a valid budget.
const LAST_RESORT_FLOORS_Q: [u64; 5] = [160, 100, 60, 40, 0];
const REJECTED_CHARS: usize = 160;

/// One block being fitted: a heading and lines, of which the range `lo..hi` is kept.
#[derive(Debug)]
struct Part {
    block: Block,
    heading: &'static str,
    items: Vec<String>,
    item_q: Vec<u64>,
    lo: usize,
    hi: usize,
    /// Sum of `item_q[lo..hi]`, kept current so trimming is O(1) per line.
    kept_q: u64,
    heading_q: u64,
    total: usize,
    /// Lines go from the front (oldest first) rather than the back.
    shrink_front: bool,
    dropped: bool,
    trimmed: bool,
}

impl Part {
    fn new(block: Block, items: Vec<String>, shrink_front: bool) -> Part {
        let item_q: Vec<u64> = items.iter().map(|s| quarters(s)).collect();
        let n = items.len();
        let heading = block.heading();
        Part {
            block,
            heading,
            kept_q: item_q.iter().sum(),
            heading_q: if heading.is_empty() {
                0
            } else {
                quarters(heading) + NL_Q
            },
            items,
            item_q,
            lo: 0,
            hi: n,
            total: n,
            shrink_front,
            dropped: false,
            trimmed: false,
        }
    }

    fn kept(&self) -> usize {
        if self.dropped {
            0
        } else {
            self.hi - self.lo
        }
    }

    fn is_present(&self) -> bool {
        self.kept() > 0
    }

    /// Quarter tokens of the rendered block: heading, newline, lines joined by newlines.
    fn quarters(&self) -> u64 {
        let kept = self.kept() as u64;
        if kept == 0 {
            return 0;
        }
        self.heading_q + self.kept_q + NL_Q * (kept - 1)
    }

    fn render(&self) -> String {
        let body = self.items[self.lo..self.hi].join("\n");
        if self.heading.is_empty() {
            body
        } else {
            format!("{}\n{body}", self.heading)
        }
    }

    /// Removes one line from the shrinking end; false when at `floor` lines.
    fn shrink_one(&mut self, floor: usize) -> bool {
        if self.dropped || self.kept() <= floor.max(1) {
            return false;
        }
        if self.shrink_front {
            self.kept_q -= self.item_q[self.lo];
            self.lo += 1;
        } else {
            self.hi -= 1;
            self.kept_q -= self.item_q[self.hi];
        }
        self.trimmed = true;
        true
    }

    /// Cuts the kept text so the block costs at most `max_q` quarters, as one line
    /// (the last resort, and for a single line over its block's cap).
    fn truncate_to(&mut self, max_q: u64) {
        if self.quarters() <= max_q || self.dropped {
            return;
        }
        let room = max_q.saturating_sub(self.heading_q);
        let text = self.items[self.lo..self.hi].join("\n");
        let cut = cut_to_quarters(&text, room);
        self.items = vec![cut];
        self.item_q = vec![quarters(&self.items[0])];
        self.kept_q = self.item_q[0];
        self.lo = 0;
        self.hi = 1;
        self.trimmed = true;
        if self.items[0].is_empty() {
            // Not even the heading fits a useful line: leave the block out entirely.
            self.hi = 0;
            self.kept_q = 0;
        }
    }
}

/// The longest prefix of `text` costing at most `max_q` quarters, marked with `…`
/// when cut (the marker's cost included).
fn cut_to_quarters(text: &str, max_q: u64) -> String {
    if quarters(text) <= max_q {
        return text.to_string();
    }
    let marker = char_quarters('…');
    if max_q <= marker {
        return String::new();
    }
    let room = max_q - marker;
    let mut used = 0u64;
    let mut end = 0usize;
    for (i, c) in text.char_indices() {
        let q = char_quarters(c);
        if used + q > room {
            break;
        }
        used += q;
        end = i + c.len_utf8();
    }
    let mut s = text[..end].trim_end().to_string();
    s.push('…');
    s
}

struct Assembly<'e> {
    parts: Vec<Part>,
    estimator: &'e TokenEstimator,
    budget: u32,
}

impl Assembly<'_> {
    fn part(&mut self, b: Block) -> &mut Part {
        // Parts are built for every block in `Block::ALL` order.
        &mut self.parts[b as usize]
    }

    fn total_q(&self) -> u64 {
        let system = &self.parts[Block::System as usize];
        let user: Vec<&Part> = self.parts[1..].iter().filter(|p| p.is_present()).collect();
        let user_q: u64 = user.iter().map(|p| p.quarters()).sum::<u64>()
            + SEP_Q * (user.len().saturating_sub(1) as u64);
        REPLY_PRIMING_Q + 2 * MESSAGE_OVERHEAD_Q + system.quarters() + user_q
    }

    fn over(&self) -> bool {
        self.estimator.tokens(self.total_q()) > self.budget
    }

    /// The largest quarter count whose calibrated estimate fits `tokens`.
    fn quarters_for(&self, tokens: u32) -> u64 {
        let (mut lo, mut hi) = (0u64, u64::from(tokens) * 16 + 16);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.estimator.tokens(mid) <= tokens {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    fn fit_cap(&mut self, b: Block, cap: u32) {
        let cap_q = self.quarters_for(cap);
        let p = self.part(b);
        while p.quarters() > cap_q && p.shrink_one(1) {}
        p.truncate_to(cap_q);
    }

    fn shrink(&mut self, b: Block, floor: usize) {
        while self.over() {
            if !self.part(b).shrink_one(floor) {
                break;
            }
        }
    }

    fn drop_block(&mut self, b: Block) {
        if self.over() && self.part(b).is_present() {
            self.part(b).dropped = true;
        }
    }

    /// Cuts block `b` by the excess, but not below `floor_q` quarters.
    fn truncate(&mut self, b: Block, floor_q: u64) {
        if !self.over() {
            return;
        }
        let allowed = self.quarters_for(self.budget);
        let excess = self.total_q().saturating_sub(allowed);
        let p = self.part(b);
        let target = p.quarters().saturating_sub(excess).max(floor_q);
        p.truncate_to(target);
    }
}

/// Assembles one turn's context within the budget. Pure and deterministic: the same
/// input gives the same messages.
pub fn build_context(input: &ContextInput<'_>) -> Context {
    let cfg = input.config;
    let budget = cfg.budget.max(MIN_BUDGET);
    let brief = input.brief;
    let phase = input
        .phase
        .unwrap_or_else(|| cfg.phases.phase_at(brief.turn, brief.max_turns));

    let term = terminal::select_lines(
        input.screen,
        cfg.terminal.for_signal(input.signal),
        cfg.terminal.max_line_chars,
    );
    let redactions = term.redactions;

    let parts = vec![
        Part::new(Block::System, vec![system_prompt(phase)], false),
        Part::new(Block::Brief, brief_lines(brief, phase), false),
        Part::new(
            Block::Tasks,
            task_lines(input.tasks, cfg.pending_shown),
            false,
        ),
        Part::new(Block::Digest, digest_lines(input.digest), true),
        Part::new(Block::Fence, fence_lines(input.recent_prompts, cfg), true),
        Part::new(Block::Terminal, term.lines, true),
        Part::new(Block::Question, question_lines(input.rejections), true),
    ];
    let mut a = Assembly {
        parts,
        estimator: input.estimator,
        budget,
    };

    for b in Block::ALL {
        a.fit_cap(b, cfg.caps.get(b).max(1));
    }

    a.shrink(Block::Terminal, cfg.terminal.min_lines);
    a.shrink(Block::Digest, 1);
    a.shrink(Block::Fence, 3);
    a.shrink(Block::Tasks, 2);
    a.drop_block(Block::Digest);
    a.drop_block(Block::Fence);
    a.shrink(Block::Terminal, 1);
    a.drop_block(Block::Terminal);
    a.drop_block(Block::Tasks);
    a.shrink(Block::Question, 1);
    // Last resort: cut the long generic system prompt first, then the brief, then the
    // question, each down to a floor; only then below the floors.
    for floor in LAST_RESORT_FLOORS_Q {
        a.truncate(Block::System, floor);
        a.truncate(Block::Brief, floor);
        a.truncate(Block::Question, floor);
    }

    let system = a.parts[Block::System as usize].render();
    let user = a.parts[1..]
        .iter()
        .filter(|p| p.is_present())
        .map(Part::render)
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut messages = vec![ChatMessage::system(system), ChatMessage::user(user)];
    let mut estimated = input
        .estimator
        .estimate_messages(messages.iter().map(|m| m.content.as_str()));
    debug_assert_eq!(estimated, input.estimator.tokens(a.total_q()));
    if estimated > budget {
        // Unreachable by the arithmetic above; kept so the budget holds whatever a
        // future edit to the blocks does.
        tracing::warn!(target: "coord.context", estimated, budget, "context over budget after trimming; cutting the user message");
        let over_q = a.total_q().saturating_sub(a.quarters_for(budget));
        let keep = quarters(&messages[1].content).saturating_sub(over_q);
        messages[1].content = cut_to_quarters(&messages[1].content, keep);
        estimated = input
            .estimator
            .estimate_messages(messages.iter().map(|m| m.content.as_str()));
    }
    let raw_tokens =
        TokenEstimator::default().estimate_messages(messages.iter().map(|m| m.content.as_str()));

    let blocks = a
        .parts
        .iter()
        .map(|p| BlockReport {
            block: p.block,
            tokens: input.estimator.tokens(p.quarters()),
            fit: if p.total == 0 {
                Fit::Empty
            } else if !p.is_present() {
                Fit::Dropped
            } else if p.trimmed {
                Fit::Trimmed
            } else {
                Fit::Full
            },
            kept: p.kept(),
            total: p.total,
        })
        .collect();

    Context {
        messages,
        estimated_tokens: estimated,
        raw_tokens,
        budget,
        phase,
        blocks,
        redactions,
    }
}

fn field(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    terminal::cap_chars(&redact(&flat).0, max)
}

fn brief_lines(b: &SessionBrief, phase: Phase) -> Vec<String> {
    let mut lines = Vec::with_capacity(5);
    if !b.project.trim().is_empty() {
        lines.push(format!("Project: {}", field(&b.project, 80)));
    }
    let goal = if b.goal.trim().is_empty() {
        "(none given: continue the work in progress)".to_string()
    } else {
        field(&b.goal, 400)
    };
    lines.push(format!("Goal: {goal}"));
    if !b.path.trim().is_empty() {
        lines.push(format!("Path: {}", field(&b.path, 160)));
    }
    let turn = if b.max_turns > 0 {
        format!(
            "Turn: {} of {} ({} phase)",
            b.turn,
            b.max_turns,
            phase_label(phase)
        )
    } else {
        format!("Turn: {} ({} phase)", b.turn, phase_label(phase))
    };
    lines.push(turn);
    if !b.machine.trim().is_empty() || !b.pane.trim().is_empty() {
        lines.push(format!(
            "Pane: {}:{}",
            field(&b.machine, 40),
            field(&b.pane, 40)
        ));
    }
    lines
}

fn task_lines(g: &TaskGraph, pending_shown: usize) -> Vec<String> {
    if g.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!("Done: {} of {}", g.done_count(), g.tasks.len())];
    match g.active() {
        Some(t) if t.turns_on_it > 1 => lines.push(format!(
            "Active: {} ({} turns on it)",
            field(&t.title, PLAN_STEP_CHARS),
            t.turns_on_it
        )),
        Some(t) => lines.push(format!("Active: {}", field(&t.title, PLAN_STEP_CHARS))),
        None if g.is_complete() => {
            lines.push("Active: none — every planned task is done; verify and wrap up.".into())
        }
        None => {}
    }
    for (i, t) in g.pending().take(pending_shown).enumerate() {
        let label = if i == 0 { "Next" } else { "Then" };
        lines.push(format!("{label}: {}", field(&t.title, PLAN_STEP_CHARS)));
    }
    for t in g.blocked() {
        let why = t.blocker.as_deref().unwrap_or("blocked");
        lines.push(format!(
            "Blocked: {} — {}",
            field(&t.title, 120),
            field(why, 120)
        ));
    }
    lines
}

fn digest_lines(d: &Digest) -> Vec<String> {
    d.lines().iter().map(|l| field(l, 1200)).collect()
}

fn fence_lines(prompts: &[String], cfg: &ContextConfig) -> Vec<String> {
    let start = prompts.len().saturating_sub(cfg.fence_prompts);
    prompts[start..]
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| format!("- {}", field(p, cfg.fence_prompt_chars)))
        .collect()
}

fn question_lines(rejections: &[Rejection]) -> Vec<String> {
    let start = rejections.len().saturating_sub(REJECTIONS_SHOWN);
    let mut lines: Vec<String> = rejections[start..]
        .iter()
        .map(|r| {
            format!(
                "Rejected for this turn ({}): \"{}\" — write a different instruction.",
                field(&r.reason, 80),
                field(&r.text, REJECTED_CHARS).replace('"', "'")
            )
        })
        .collect();
    lines.push(QUESTION.to_string());
    lines
}

impl Context {
    /// The wire form of a built context (`karl-ctl context`).
    pub fn to_wire(&self) -> crate::pb::ContextReply {
        use crate::pb;
        pb::ContextReply {
            messages: self
                .messages
                .iter()
                .map(|m| pb::ChatMessage {
                    role: match m.role {
                        Role::System => pb::ChatRole::System,
                        Role::User => pb::ChatRole::User,
                        Role::Assistant => pb::ChatRole::Assistant,
                    } as i32,
                    content: m.content.clone(),
                })
                .collect(),
            estimated_tokens: self.estimated_tokens,
            budget: self.budget,
        }
    }
}

#[cfg(test)]
mod tests;

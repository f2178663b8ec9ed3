//! Tests of the assembled context: block order, the budget over random inputs, trimming
//! priority, adaptive terminal lines, redaction, phases. (Every fixture capture is run
//! through the context stack by the karl-tests crate, where the fixtures live.)
#![allow(clippy::unwrap_used)]

use super::*;
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Random inputs from a seeded generator (ChaCha8: the same on every machine), so
/// failures reproduce.
struct Rng(ChaCha8Rng);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(ChaCha8Rng::seed_from_u64(seed))
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.0.gen_range(0..n)
        }
    }
    fn text(&mut self, max_chars: u64) -> String {
        const POOL: &[&str] = &[
            "fix",
            "the",
            "error",
            "in",
            "src/main.rs",
            "cargo",
            "test",
            "──────",
            "│",
            "✻",
            "日本語",
            "🚀",
            "{",
            "}",
            "=>",
            "    ",
            "\t",
            "ghp_1234567890abcdefghijABCDEFGHIJ",
            "é",
            "password=hunter2",
            "\u{1b}[31m",
            "x",
        ];
        let mut s = String::new();
        let target = self.below(max_chars + 1) as usize;
        while s.len() < target {
            s.push_str(POOL[self.below(POOL.len() as u64) as usize]);
            if self.below(4) == 0 {
                s.push(' ');
            }
        }
        s
    }
    fn screen(&mut self, lines: u64, width: u64) -> String {
        (0..lines)
            .map(|_| self.text(width))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

struct Fixture {
    brief: SessionBrief,
    tasks: TaskGraph,
    digest: Digest,
    prompts: Vec<String>,
    screen: String,
    rejections: Vec<Rejection>,
    config: ContextConfig,
    estimator: TokenEstimator,
    signal: PaneSignal,
}

impl Fixture {
    fn typical() -> Fixture {
        let mut tasks = TaskGraph::from_steps([
            "read the router in src/server.rs",
            "add a GET /health route",
            "write an integration test for /health",
            "run the test suite",
            "commit the change",
        ]);
        tasks.advance(2);
        tasks.note_turn(3);
        tasks.note_turn(4);
        let mut digest = Digest::default();
        digest.fold(&[
            TurnNote {
                turn: 1,
                prompt: "Read src/server.rs and explain the routing".into(),
                outcome: Outcome::Progress,
                response: String::new(),
            },
            TurnNote {
                turn: 2,
                prompt: "Add the /health route".into(),
                outcome: Outcome::Error,
                response: "error[E0433]: failed to resolve: use of undeclared type `Json`".into(),
            },
        ]);
        digest.add_milestone(2, "done: read the router in src/server.rs");
        Fixture {
            brief: SessionBrief {
                project: "meshd".into(),
                goal: "Add a /health endpoint that reports uptime".into(),
                path: "~/src/meshd".into(),
                machine: "mac1".into(),
                pane: "agent-codex:1.1".into(),
                turn: 12,
                max_turns: 30,
            },
            tasks,
            digest,
            prompts: vec![
                "Read src/server.rs and explain the routing".into(),
                "Add the /health route".into(),
                "Import axum::Json in server.rs".into(),
            ],
            screen: (1..=200)
                .map(|i| format!("line {i}: compiling meshd v0.1.0 (/src/meshd)"))
                .collect::<Vec<_>>()
                .join("\n"),
            rejections: Vec::new(),
            config: ContextConfig::default(),
            estimator: TokenEstimator::default(),
            signal: PaneSignal::Neutral,
        }
    }

    fn input(&self) -> ContextInput<'_> {
        ContextInput {
            brief: &self.brief,
            tasks: &self.tasks,
            digest: &self.digest,
            recent_prompts: &self.prompts,
            screen: &self.screen,
            signal: self.signal,
            rejections: &self.rejections,
            phase: None,
            config: &self.config,
            estimator: &self.estimator,
        }
    }

    fn build(&self) -> Context {
        build_context(&self.input())
    }
}

/// The budget invariant, checked against an independent re-estimate of the messages.
#[track_caller]
fn assert_within_budget(ctx: &Context, est: &TokenEstimator) {
    let again = est.estimate_messages(ctx.messages.iter().map(|m| m.content.as_str()));
    assert_eq!(again, ctx.estimated_tokens);
    assert!(
        ctx.estimated_tokens <= ctx.budget,
        "{} > {}",
        ctx.estimated_tokens,
        ctx.budget
    );
    for b in [Block::System, Block::Brief, Block::Question] {
        let r = ctx.block(b).unwrap();
        assert!(r.kept > 0, "{b:?} was dropped: {:?}", ctx.blocks);
    }
}

fn user(ctx: &Context) -> &str {
    &ctx.messages[1].content
}

#[test]
fn blocks_come_in_the_fixed_order() {
    let f = Fixture::typical();
    let ctx = f.build();
    assert_eq!(ctx.messages.len(), 2);
    assert_eq!(ctx.messages[0].role, super::Role::System);
    assert_eq!(ctx.messages[1].role, super::Role::User);
    assert_eq!(ctx.messages[0].content, system_prompt(Phase::Build));
    let u = user(&ctx);
    let positions: Vec<usize> = Block::ALL[1..]
        .iter()
        .map(|b| {
            u.find(b.heading())
                .unwrap_or_else(|| panic!("{b:?} missing in {u}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert!(u.starts_with("## Session\nProject: meshd\nGoal: Add a /health endpoint"));
    assert!(u.contains("Turn: 12 of 30 (BUILD phase)"));
    assert!(u.contains("Pane: mac1:agent-codex:1.1"));
    assert!(u.contains("Done: 1 of 5\nActive: add a GET /health route (2 turns on it)\nNext: write an integration test for /health\nThen: run the test suite"));
    assert!(u.contains("- Import axum::Json in server.rs"));
    assert!(u.contains("Milestones: done: read the router"));
    assert!(u.ends_with(QUESTION));
    assert_eq!(
        ctx.blocks.iter().map(|b| b.block).collect::<Vec<_>>(),
        Block::ALL
    );
    assert_within_budget(&ctx, &f.estimator);
    // Deterministic.
    assert_eq!(ctx, f.build());
}

#[test]
fn the_stable_prefix_survives_turns() {
    // Two consecutive turns in one phase share the whole system message and the brief's
    // first lines, so the server's prefix cache hits.
    let mut f = Fixture::typical();
    let a = f.build();
    f.brief.turn = 13;
    f.prompts.push("Run cargo check".into());
    f.screen.push_str("\nerror: something new");
    let b = f.build();
    assert_eq!(a.messages[0], b.messages[0]);
    let prefix = "## Session\nProject: meshd\nGoal: Add a /health endpoint that reports uptime\nPath: ~/src/meshd\nTurn: 1";
    assert!(user(&a).starts_with(prefix) && user(&b).starts_with(prefix));
}

#[test]
fn phase_follows_turn_position() {
    let mut f = Fixture::typical();
    for (turn, phase) in [
        (1, Phase::Explore),
        (7, Phase::Explore),
        (8, Phase::Build),
        (24, Phase::Build),
        (25, Phase::Close),
        (30, Phase::Close),
    ] {
        f.brief.turn = turn;
        let ctx = f.build();
        assert_eq!(ctx.phase, phase, "turn {turn}");
        assert_eq!(ctx.messages[0].content, system_prompt(phase));
    }
    let mut input = f.input();
    input.phase = Some(Phase::Explore);
    assert_eq!(build_context(&input).phase, Phase::Explore);
}

#[test]
fn terminal_lines_adapt_to_the_signal() {
    let mut f = Fixture::typical();
    f.screen = (1..=300)
        .map(|i| format!("l{i}"))
        .collect::<Vec<_>>()
        .join("\n");
    let lines = |f: &Fixture| f.build().block(Block::Terminal).unwrap().kept;
    f.signal = PaneSignal::Success;
    let success = lines(&f);
    f.signal = PaneSignal::Neutral;
    let neutral = lines(&f);
    f.signal = PaneSignal::Error;
    let error = lines(&f);
    assert_eq!((success, neutral, error), (20, 60, 120));
    // The newest line is always the last one shown.
    assert!(user(&f.build()).contains("l300\n\n## Your turn"));
}

#[test]
fn secrets_never_reach_the_model() {
    let mut f = Fixture::typical();
    f.screen = "$ cat .env\nOPENAI_API_KEY=sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2\nDB_PASSWORD=hunter2\nAWS=AKIAIOSFODNN7EXAMPLE\n$ ".into();
    f.brief.goal = "rotate the key ghp_1234567890abcdefghijABCDEFGHIJ".into();
    f.prompts.push("use password=opensesame for the db".into());
    let ctx = f.build();
    let all: String = ctx.messages.iter().map(|m| m.content.as_str()).collect();
    for secret in [
        "Zz9Yy8Xx7Ww6",
        "hunter2",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_1234567890",
        "opensesame",
    ] {
        assert!(!all.contains(secret), "{secret} leaked");
    }
    assert_eq!(ctx.redactions, 3);
    assert!(all.contains(REDACTED));
}

#[test]
fn trimming_gives_way_lowest_priority_first() {
    let mut f = Fixture::typical();
    // Every block well stocked.
    f.tasks = TaskGraph::from_steps(
        (1..=8).map(|i| format!("task number {i} with a fairly long title for testing")),
    );
    f.digest = Digest::default();
    for b in 0..8u32 {
        f.digest.fold(
            &(1..=5)
                .map(|i| TurnNote {
                    turn: b * 5 + i,
                    prompt: format!("do step {i} of block {b} with some detail"),
                    outcome: Outcome::Progress,
                    response: "✓ done".into(),
                })
                .collect::<Vec<_>>(),
        );
    }
    f.prompts = (1..=15)
        .map(|i| format!("instruction number {i} about the parser module"))
        .collect();
    f.signal = PaneSignal::Error;
    f.screen = (1..=500)
        .map(|i| format!("error line {i}: something failed in module {i}"))
        .collect::<Vec<_>>()
        .join("\n");

    // Walk the budget down and record when each block first loses lines to the budget
    // (beyond what its own cap took) and when it is dropped.
    f.config.budget = 100_000;
    f.config.window = 100_000;
    let baseline = f.build();
    let mut first_trim: Vec<(Block, u32)> = Vec::new();
    let mut first_drop: Vec<(Block, u32)> = Vec::new();
    for budget in (MIN_BUDGET..=2400).rev().step_by(4) {
        f.config.budget = budget;
        f.config.window = 4096;
        let ctx = f.build();
        assert_within_budget(&ctx, &f.estimator);
        for r in &ctx.blocks {
            let full = baseline.block(r.block).unwrap().kept;
            if r.kept < full && !first_trim.iter().any(|(b, _)| *b == r.block) {
                first_trim.push((r.block, budget));
            }
            if r.fit == Fit::Dropped && !first_drop.iter().any(|(b, _)| *b == r.block) {
                first_drop.push((r.block, budget));
            }
        }
    }
    let trimmed: Vec<Block> = first_trim.iter().map(|(b, _)| *b).collect();
    assert_eq!(trimmed[0], Block::Terminal, "{first_trim:?}");
    let order: Vec<Block> = first_drop.iter().map(|(b, _)| *b).collect();
    assert_eq!(
        order,
        [Block::Digest, Block::Fence, Block::Terminal, Block::Tasks],
        "{first_drop:?}"
    );
    // The terminal shrinks before anything is dropped, and to its floor before the digest shrinks.
    let when = |list: &[(Block, u32)], b: Block| {
        list.iter().find(|(x, _)| *x == b).map(|(_, n)| *n).unwrap()
    };
    assert!(when(&first_trim, Block::Terminal) > when(&first_drop, Block::Digest));
    let ctx_at = |budget: u32| {
        let mut g = Fixture::typical();
        g.tasks = f.tasks.clone();
        g.digest = f.digest.clone();
        g.prompts = f.prompts.clone();
        g.screen = f.screen.clone();
        g.signal = f.signal;
        g.config.budget = budget;
        g.config.window = 4096;
        g.build()
    };
    // Whatever gives way after the terminal does so only once the terminal is at its floor.
    for (b, budget) in &first_trim[1..] {
        let at = ctx_at(*budget);
        let kept = at.block(Block::Terminal).unwrap().kept;
        assert!(
            kept <= f.config.terminal.min_lines,
            "{b:?} trimmed at {budget} with {kept} terminal lines"
        );
    }
    // Shrinking comes before dropping: the fence and task list lose lines while the
    // digest (already at one line) is still there.
    assert!(when(&first_trim, Block::Fence) > when(&first_drop, Block::Digest));
    assert!(when(&first_trim, Block::Tasks) > when(&first_drop, Block::Digest));
    // System, brief and question are never dropped, even at the minimum budget.
    let tiny = ctx_at(MIN_BUDGET);
    assert_within_budget(&tiny, &f.estimator);
}

#[test]
fn never_over_budget_on_random_inputs() {
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut checked = 0;
    for round in 0..600u64 {
        let lines = match round % 10 {
            0 => 5_000,
            1 => 0,
            _ => rng.below(400),
        };
        let width = if round % 17 == 0 {
            10_000
        } else {
            rng.below(200)
        };
        let mut cal = Calibration::default();
        let ratio_pct = 40 + rng.below(300) as u32; // 0.4 .. 3.4 (clamped to 0.5 .. 3.0)
        for _ in 0..5 {
            cal.observe(1000, 10 * ratio_pct);
        }
        let mut config = ContextConfig {
            budget: MIN_BUDGET + rng.below(3000) as u32,
            window: 8192,
            ..ContextConfig::default()
        };
        if round % 7 == 0 {
            config.caps.terminal = 10_000;
            config.terminal.error = 1_000;
        }
        let f = Fixture {
            brief: SessionBrief {
                project: rng.text(200),
                goal: rng.text(3000),
                path: rng.text(300),
                machine: rng.text(50),
                pane: rng.text(50),
                turn: rng.below(200) as u32,
                max_turns: rng.below(100) as u32,
            },
            tasks: TaskGraph::from_steps((0..rng.below(12)).map(|_| rng.text(400))),
            digest: {
                let mut d = Digest::default();
                for b in 0..rng.below(12) as u32 {
                    let turns: Vec<TurnNote> = (0..5)
                        .map(|i| TurnNote {
                            turn: b * 5 + i,
                            prompt: rng.text(300),
                            outcome: [
                                Outcome::Progress,
                                Outcome::Error,
                                Outcome::Blocked,
                                Outcome::Complete,
                            ][rng.below(4) as usize],
                            response: rng.text(500),
                        })
                        .collect();
                    d.fold(&turns);
                    d.add_milestone(b, rng.text(200));
                }
                d
            },
            prompts: (0..rng.below(30)).map(|_| rng.text(500)).collect(),
            screen: rng.screen(lines, width),
            rejections: (0..rng.below(4))
                .map(|_| Rejection {
                    reason: rng.text(200),
                    text: rng.text(2000),
                })
                .collect(),
            config,
            estimator: TokenEstimator::new(cal),
            signal: [PaneSignal::Neutral, PaneSignal::Success, PaneSignal::Error]
                [rng.below(3) as usize],
        };
        let ctx = f.build();
        assert_within_budget(&ctx, &f.estimator);
        checked += 1;
    }
    assert_eq!(checked, 600);
}

#[test]
fn rejections_are_shown_and_bounded() {
    let mut f = Fixture::typical();
    f.rejections = vec![
        Rejection {
            reason: "too short".into(),
            text: "ok".into(),
        },
        Rejection {
            reason: "repeats an earlier instruction".into(),
            text: "Add the \"/health\" route".into(),
        },
        Rejection {
            reason: "asks for status".into(),
            text: "x".repeat(5000),
        },
    ];
    let ctx = f.build();
    let u = user(&ctx);
    assert!(!u.contains("too short"), "only the last two are shown");
    assert!(u.contains(
        "Rejected for this turn (repeats an earlier instruction): \"Add the '/health' route\""
    ));
    assert!(u.contains("(asks for status)"));
    assert!(!u.contains(&"x".repeat(REJECTED_CHARS + 1)));
    assert!(u.ends_with(QUESTION));
    assert_within_budget(&ctx, &f.estimator);
}

#[test]
fn empty_session_state_gives_empty_blocks() {
    let brief = SessionBrief {
        turn: 1,
        ..SessionBrief::default()
    };
    let config = ContextConfig::default();
    let est = TokenEstimator::default();
    let ctx = build_context(&ContextInput {
        brief: &brief,
        tasks: &TaskGraph::default(),
        digest: &Digest::default(),
        recent_prompts: &[],
        screen: "",
        signal: PaneSignal::Neutral,
        rejections: &[],
        phase: None,
        config: &config,
        estimator: &est,
    });
    for b in [Block::Tasks, Block::Digest, Block::Fence, Block::Terminal] {
        assert_eq!(ctx.block(b).unwrap().fit, Fit::Empty, "{b:?}");
    }
    assert_eq!(user(&ctx), format!("## Session\nGoal: (none given: continue the work in progress)\nTurn: 1 (EXPLORE phase)\n\n## Your turn\n{QUESTION}"));
    assert_within_budget(&ctx, &est);
}

#[test]
fn calibration_shrinks_what_fits() {
    let mut f = Fixture::typical();
    f.signal = PaneSignal::Error;
    let plain = f.build();
    let mut cal = Calibration::default();
    cal.observe(1000, 2000);
    f.estimator = TokenEstimator::new(cal);
    let doubled = f.build();
    assert_within_budget(&doubled, &f.estimator);
    assert!(
        doubled.block(Block::Terminal).unwrap().kept < plain.block(Block::Terminal).unwrap().kept
    );
    assert!(doubled.raw_tokens < plain.raw_tokens);
}

#[test]
fn config_validation_and_serde_defaults() {
    assert!(ContextConfig::default().validate().is_ok());
    assert_eq!(ContextConfig::default().reply_room(), 200);
    let c: ContextConfig = toml::from_str("budget = 1500\n[terminal]\nerror = 80\n").unwrap();
    assert_eq!(c.budget, 1500);
    assert_eq!(c.terminal.error, 80);
    assert_eq!(c.terminal.success, 20);
    assert!(toml::from_str::<ContextConfig>("bogus = 1").is_err());
    assert!(matches!(
        ContextConfig {
            budget: 10,
            ..Default::default()
        }
        .validate(),
        Err(ContextConfigError::BudgetTooSmall { .. })
    ));
    assert!(matches!(
        ContextConfig {
            budget: 3000,
            ..Default::default()
        }
        .validate(),
        Err(ContextConfigError::BudgetOverWindow { .. })
    ));
}

#[test]
fn a_plan_copied_off_the_screen_in_its_request_is_no_plan() {
    let screen = "╭─── Claude Code v2.1.197 ───╮\n│ Tips for getting started │\n╰────╯\n\n● Migrated orders, events and audit tables to the new schema in 3.2 s\n";
    let request = plan_messages(
        "inventory",
        "add CSV export of the stock report",
        "~/code/inventory",
        Some(screen),
    );
    let copied = "1. ╭─── Claude Code v2.1.1.187 ───╮\n2. │ Tips for getting started │\n3. Migrated orders, events and audit tables to the new schema\n4. Add a CSV writer for the stock report";
    let plan = plan_from_reply_guarded(copied, "add CSV export of the stock report", &request);
    assert_eq!(plan.source, PlanSource::Goal, "{:?}", plan.steps);
    // The unguarded parser takes the copies for steps.
    assert_eq!(
        plan_from_reply(copied, "add CSV export of the stock report").source,
        PlanSource::Model
    );
    let real = "1. Read src/report/stock.rs and the report query\n2. Add a CSV writer for the stock report rows\n3. Add an --format csv flag to the export command\n4. Test the CSV output against a fixture";
    let plan = plan_from_reply_guarded(real, "add CSV export of the stock report", &request);
    assert_eq!(plan.source, PlanSource::Model);
    assert_eq!(plan.steps.len(), 4);
}

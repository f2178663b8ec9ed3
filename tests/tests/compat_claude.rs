//! Compatibility tier: KARL (real karl-coord, karl-agent and karl-ctl processes) driving
//! the real Claude Code CLI in a real tmux pane, the CLI talking to the scripted
//! Anthropic stub instead of the vendor's API.
//!
//! Every scenario runs against each release in [`VERSIONS`] (one test module per release,
//! `v2_1_197::…`, `v2_1_330::…`); `.ci/run` installs each with npm into
//! `${XDG_CACHE_HOME:-~/.cache}/karl/claude-code-<version>`. A release that is not
//! installed is skipped with a note — except under `CI=true`, where it fails the test.
//!
//! Each test gets a private HOME whose `~/.claude.json` pre-accepts (or, for the dialog
//! tests, leaves open) onboarding, folder trust and the custom API key, and whose
//! `~/.claude/settings.json` picks the permission mode (`permissions.defaultMode`, read by
//! both releases: `default` is 2.1.197's only mode and 2.1.330's manual mode; 2.1.330
//! without it runs its default auto mode). The pane environment keeps the CLI offline:
//! `ANTHROPIC_BASE_URL` at the stub, telemetry, non-essential traffic and the auto-updater
//! off, and every other connection sent to a closed proxy port. The pane runs
//! `sh -c 'claude; exec bash --norc -i'`, so a CLI that exits leaves a shell prompt, as it
//! does for a developer.
//!
//! Observed with 2.1.197 against the stub: on start the CLI sends only a `HEAD /` probe;
//! each typed prompt produces one streamed turn request (tools offered, the whole
//! conversation resent) and, for the first prompt, a tool-less title request; a
//! denied tool call sends nothing until the next prompt, which carries the refusal as
//! an `is_error` tool result; with the API key or folder trust not accepted the CLI
//! shows its dialog and waits; a first run (onboarding not done) without the key
//! approved checks connectivity to api.anthropic.com and exits.
//!
//! Observed with 2.1.330: it runs full-screen (alternate screen); in auto mode a tool call
//! that needs the server-side safety check (which a custom `ANTHROPIC_BASE_URL` cannot
//! pass) first opens a modal ("Auto mode can't check actions in this session" · Enter to
//! stay) and then asks `Do you want to proceed?` with `❯ No` / `Yes`, unnumbered, where
//! Enter on the default denies and digit keys do nothing; commands inside the project
//! (`touch`, `rm -rf build`) run without asking. A first start with `defaultMode` in the
//! user's settings asks once whether to make auto mode the default
//! (`hasSeenAutoDefaultNudge` in `~/.claude.json` skips it).

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use karl_tests::anthropic_stub::{AnthropicStub, Reply, Script};
use karl_tests::compat;
use karl_tests::harness::{passed_the_gate, read_jsonl, shell_quote, wait_for, Fleet, Scratch};
use karl_tests::twin::TwinServer;

/// The Claude Code releases the tier runs against (keep in step with `.ci/run`).
const VERSIONS: [&str; 2] = ["2.1.197", "2.1.330"];

/// A fake key in the API's format; the CLI approves keys by their last 20 characters.
const API_KEY: &str = "sk-ant-api03-karl-compat-test-0123456789abcdefghij";

/// One pinned release, installed.
struct Cli {
    bin: PathBuf,
}

/// `claude --version` starts with `version`.
fn runs(bin: &Path, version: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .map(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).starts_with(&format!("{version} "))
        })
        .unwrap_or(false)
}

/// The CLI of `version` to test, or `None` (after saying so) when the tier must skip.
fn claude_cli(version: &'static str, test: &str) -> Option<Cli> {
    assert!(VERSIONS.contains(&version), "{version} is not pinned");
    let how = format!(
        "run .ci/run, or: npm install --prefix ~/.cache/karl/claude-code-{version} \
         @anthropic-ai/claude-code@{version}"
    );
    compat::release_or_skip(
        compat::cached_bin(
            &format!("claude-code-{version}"),
            "node_modules/.bin/claude",
        ),
        |b| runs(b, version),
        &format!("Claude Code {version}"),
        &how,
        test,
    )
    .map(|bin| Cli { bin })
}

/// The permission mode the test HOME's settings pick.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `permissions.defaultMode = "default"`: every tool call that needs approval asks
    /// with the numbered menu (2.1.197's only mode, 2.1.330's manual mode).
    Manual,
    /// No setting: each release's own default (2.1.330: auto mode).
    Default,
}

/// What the CLI's `~/.claude.json` already accepts.
#[derive(Clone, Copy)]
struct Accepted {
    onboarding: bool,
    trust: bool,
    api_key: bool,
}

const ALL: Accepted = Accepted {
    onboarding: true,
    trust: true,
    api_key: true,
};

/// What the pane runs when the fleet starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The CLI (then a shell once it exits).
    Cli,
    /// The CLI, with KARL's hooks installed in the user's settings first.
    CliWithHooks,
    /// Only a shell: KARL launches the CLI (`drive --launch`).
    Shell,
}

/// The real CLI in a pane of a KARL fleet, with its stub.
struct Claude {
    fleet: Fleet,
    stub: AnthropicStub,
    project: PathBuf,
}

/// The input box is empty and the CLI waits: its idle footer shows (2.1.197 and 2.1.330's
/// manual mode: `? for shortcuts`; 2.1.330's auto mode: `⏵⏵ auto mode on`).
fn idle_screen(s: &str) -> bool {
    has_line(s, "❯")
        && (s.contains("? for shortcuts") || s.contains("auto mode on"))
        && !s.contains("esc to interrupt")
}

impl Claude {
    fn start(cli: &Cli, script: Script, accepted: Accepted, mode: Mode) -> Claude {
        Claude::start_env(cli, script, accepted, mode, &[])
    }

    fn start_env(
        cli: &Cli,
        script: Script,
        accepted: Accepted,
        mode: Mode,
        agent_env: &[(&str, &str)],
    ) -> Claude {
        Claude::start_full(cli, script, accepted, mode, agent_env, Start::Cli, &[])
    }

    /// `coord_args`: extra flags for karl-coord (`--model-url URL` for a real twin).
    fn start_full(
        cli: &Cli,
        script: Script,
        accepted: Accepted,
        mode: Mode,
        agent_env: &[(&str, &str)],
        start: Start,
        coord_args: &[&str],
    ) -> Claude {
        let hooks = start == Start::CliWithHooks;
        let stub = AnthropicStub::start(script).unwrap();
        let scratch = Scratch::new();
        let home = scratch.path("home");
        std::fs::create_dir_all(&home).unwrap();
        let project = scratch.path("proj");
        std::fs::create_dir_all(&project).unwrap();
        // The CLI keys folder trust by its canonical cwd.
        let project = project.canonicalize().unwrap();
        let mut config = serde_json::json!({});
        if accepted.onboarding {
            config["hasCompletedOnboarding"] = true.into();
        }
        if accepted.trust {
            config["projects"] = serde_json::json!({
                project.display().to_string(): {"hasTrustDialogAccepted": true}
            });
        }
        if accepted.api_key {
            config["customApiKeyResponses"] = serde_json::json!({
                "approved": [&API_KEY[API_KEY.len() - 20..]], "rejected": []
            });
        }
        // 2.1.330 asks once whether auto mode should become the default when the user's
        // settings pick a mode; a developer has answered that long ago.
        config["hasSeenAutoDefaultNudge"] = true.into();
        std::fs::write(home.join(".claude.json"), config.to_string()).unwrap();
        if mode == Mode::Manual {
            std::fs::create_dir_all(home.join(".claude")).unwrap();
            std::fs::write(
                home.join(".claude/settings.json"),
                r#"{"permissions": {"defaultMode": "default"}}"#,
            )
            .unwrap();
        }

        if hooks {
            // `karl-agent hooks install`, as a developer would run it, into this HOME's
            // settings, reporting to the socket the fleet's agent will listen on (its
            // HOME is the scratch dir).
            let out = Command::new(karl_tests::harness::bin("karl-agent"))
                .args(["hooks", "install", "--claude", "--settings"])
                .arg(home.join(".claude/settings.json"))
                .arg("--socket")
                .arg(scratch.dir.path().join(".karl/agent.sock"))
                .output()
                .unwrap();
            assert!(out.status.success(), "hooks install: {out:?}");
        }
        let path = std::env::var("PATH").unwrap_or_default();
        let env: Vec<(&str, String)> = vec![
            ("PATH", path),
            ("HOME", home.display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("ANTHROPIC_BASE_URL", stub.base_url()),
            ("ANTHROPIC_API_KEY", API_KEY.into()),
            ("DISABLE_TELEMETRY", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            // One retry, so an API error ends its turn in about a second.
            ("CLAUDE_CODE_MAX_RETRIES", "1".into()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            ("HTTP_PROXY", "http://127.0.0.1:9".into()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ];
        let inner = match start {
            Start::Shell => "exec bash --norc -i".to_string(),
            _ => format!(
                "{}; exec bash --norc -i",
                shell_quote(&cli.bin.display().to_string())
            ),
        };
        let cmdline = compat::pane_command(&project, &env, &inner);
        let fleet = Fleet::start_command_env(scratch, &cmdline, 120, 40, coord_args, agent_env);
        Claude {
            fleet,
            stub,
            project,
        }
    }

    /// Starts with everything accepted, in manual permission mode, and waits for the
    /// empty input box.
    fn ready(cli: &Cli, script: Script) -> Claude {
        Claude::ready_in(cli, script, Mode::Manual)
    }

    fn ready_with_agent_env(cli: &Cli, script: Script, env: &[(&str, &str)]) -> Claude {
        let c = Claude::start_env(cli, script, ALL, Mode::Manual, env);
        c.wait_screen(Duration::from_secs(30), "the empty input box", idle_screen);
        c
    }

    fn ready_in(cli: &Cli, script: Script, mode: Mode) -> Claude {
        let c = Claude::start(cli, script, ALL, mode);
        c.wait_screen(Duration::from_secs(30), "the empty input box", idle_screen);
        c
    }

    fn screen(&self) -> String {
        self.fleet.screen()
    }

    fn wait_screen(&self, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) {
        compat::wait_screen(&self.fleet, timeout, what, pred)
    }

    fn plan(&self, steps: &[&str]) -> String {
        let path = self.fleet.scratch.path("plan.txt");
        std::fs::write(&path, steps.join("\n") + "\n").unwrap();
        path.display().to_string()
    }

    /// Drives the pane through `steps` (goal "Write the parser"); returns the session id.
    fn drive_plan(&self, steps: &[&str]) -> String {
        let plan = self.plan(steps);
        self.fleet
            .drive(&["--goal", "Write the parser", "--plan", &plan])
    }

    /// What a failure message needs: the pane now, what reached the stub, and KARL's
    /// log with the screens it classified.
    fn diag(&self) -> String {
        format!(
            "screen now:\n{}\nstub conversation: {:?}\nunknown requests: {:?}\n{}",
            self.screen(),
            self.stub.conversation(),
            self.stub.unknown(),
            compat::logs(&self.fleet, 200)
        )
    }

    /// Waits for a session status; returns the last `show`.
    fn wait_status(&self, id: &str, timeout: Duration, want: &[&str]) -> serde_json::Value {
        compat::wait_status(&self.fleet, id, timeout, want, || self.diag())
    }

    /// Asserts the session's status and that its reason mentions `why`.
    fn expect_status(&self, show: &serde_json::Value, want: &str, why: &str) {
        let status = show["session"]["status"].as_str().unwrap_or("");
        let reason = show["session"]["reason"].as_str().unwrap_or("");
        assert!(
            status == want && reason.contains(why),
            "want {want} ({why}), got {}\n{}",
            show["session"],
            self.diag()
        );
    }

    fn ctl_ok(&self, args: &[&str]) {
        let out = self.fleet.ctl(args);
        assert_eq!(out.code, 0, "karl-ctl {args:?}: {out:?}");
    }
}

/// A screen line, trailing blanks dropped, equals `want` (the CLI draws a no-break
/// space after its `❯`).
fn has_line(screen: &str, want: &str) -> bool {
    screen
        .lines()
        .any(|l| l.replace('\u{a0}', " ").trim_end() == want)
}

fn turns(show: &serde_json::Value) -> Vec<serde_json::Value> {
    show["turns"].as_array().cloned().unwrap_or_default()
}

fn prompts(show: &serde_json::Value) -> Vec<String> {
    turns(show)
        .iter()
        .map(|t| t["prompt"].as_str().unwrap_or("").to_string())
        .collect()
}

fn ten_turn_session_every_prompt_arrives_exactly_once(version: &'static str) {
    let Some(cli) = claude_cli(version, "ten_turn_session") else {
        return;
    };
    let steps: Vec<String> = [
        "Create the lexer module with a Token enum.",
        "Add a number literal rule to the lexer.",
        "Write a recursive descent parser for sums.",
        "Handle operator precedence for products.",
        "Report syntax errors with line and column.",
        "Add unit tests for the error positions.",
        "Support parenthesised sub-expressions.",
        "Add a pretty printer for the syntax tree.",
        "Document the public parser API in lib.rs.",
        "Add an example binary that parses stdin.",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Two answers stream slowly (about 3 s, word by word): KARL must wait them out.
    let slow = "Working through it now: reading the module, changing the code, \
                running the checks, and writing down what changed for the next step.";
    let script = Script::new()
        .on("precedence", Reply::slow(slow, 150))
        .on("pretty printer", Reply::slow(slow, 150));
    let c = Claude::ready(&cli, script);
    let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
    let plan = c.plan(&refs);
    let id = c.fleet.drive(&[
        "--goal",
        "Write the parser",
        "--plan",
        &plan,
        "--turns",
        "20",
    ]);
    let show = c.wait_status(
        &id,
        Duration::from_secs(150),
        &["done", "escalated", "failed"],
    );
    c.expect_status(&show, "done", "");
    let typed = prompts(&show);
    assert_eq!(typed, steps, "one turn per plan step, in order");
    for t in turns(&show) {
        assert!(
            t["inject"].as_str().unwrap_or("").starts_with("submitted"),
            "{t}"
        );
    }
    // The CLI's own transcript showed every prompt land, once each, and closed every
    // turn; the engine saw each turn end within moments of its writing.
    assert_evidence(&c, &id, &show, typed.len());
    // The conversation the CLI last sent holds every typed prompt once, in order, and
    // nothing else; and each prompt opened exactly one turn request.
    assert_eq!(c.stub.conversation(), typed);
    for p in &typed {
        assert_eq!(
            c.stub.attempts(p),
            1,
            "{p:?} reached the API more than once"
        );
    }
    let unknown = c.stub.unknown();
    if !unknown.is_empty() {
        eprintln!("requests the stub does not serve: {unknown:?}");
    }
}

const RUN_CHECK: &str = "Run the marker check with a shell command.";
const SUMMARIZE: &str = "Summarize the changes in one short paragraph.";

/// A fleet whose first plan step makes the CLI ask to run `command` with Bash.
fn permission_case(cli: &Cli, command: &str, policy: &str) -> (Claude, String) {
    bash_check(cli, command, policy, Mode::Manual)
}

/// A fleet in `mode` whose first plan step makes the CLI ask to run `command` with Bash,
/// driven under `policy`.
fn bash_check(cli: &Cli, command: &str, policy: &str, mode: Mode) -> (Claude, String) {
    let c = Claude::ready_in(
        cli,
        Script::new().on("marker check", Reply::bash(command)),
        mode,
    );
    // Something for a delete to destroy.
    std::fs::create_dir_all(c.project.join("src")).unwrap();
    let plan = c.plan(&[RUN_CHECK, SUMMARIZE]);
    let id = c.fleet.drive(&[
        "--goal",
        "Check the project",
        "--plan",
        &plan,
        "--permissions",
        policy,
    ]);
    (c, id)
}

fn bash_permission_under_escalate_waits_for_the_operator(version: &'static str) {
    let Some(cli) = claude_cli(version, "bash_permission_under_escalate") else {
        return;
    };
    let (c, id) = permission_case(&cli, "touch karl-marker.txt", "escalate");
    let show = c.wait_status(&id, Duration::from_secs(40), &["escalated"]);
    c.expect_status(&show, "escalated", "permission");
    assert!(c.screen().contains("Do you want to proceed?"));
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !c.project.join("karl-marker.txt").exists(),
        "the command ran without the operator"
    );
    assert!(c.stub.tool_results().is_empty());
    c.ctl_ok(&["approve", &id]);
    let show = c.wait_status(&id, Duration::from_secs(40), &["done"]);
    assert!(
        c.project.join("karl-marker.txt").exists(),
        "approved, not run"
    );
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(c.stub.conversation(), prompts(&show));
}

fn bash_permission_under_approve_safe_runs_a_safe_command(version: &'static str) {
    let Some(cli) = claude_cli(version, "bash_permission_under_approve_safe") else {
        return;
    };
    let (c, id) = permission_case(&cli, "touch karl-marker.txt", "approve-safe");
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    assert!(c.project.join("karl-marker.txt").exists());
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(c.stub.conversation(), prompts(&show));
}

fn bash_permission_under_approve_safe_escalates_a_destructive_command(version: &'static str) {
    let Some(cli) = claude_cli(version, "bash_permission_destructive") else {
        return;
    };
    let (c, id) = permission_case(&cli, "rm -rf ./src ./target", "approve-safe");
    let show = c.wait_status(&id, Duration::from_secs(40), &["escalated", "done"]);
    c.expect_status(&show, "escalated", "destructive");
    std::thread::sleep(Duration::from_secs(1));
    assert!(c.project.join("src").exists(), "the delete ran");
    assert!(c.stub.tool_results().is_empty());
}

fn bash_permission_under_deny_is_refused_and_the_session_goes_on(version: &'static str) {
    let Some(cli) = claude_cli(version, "bash_permission_under_deny") else {
        return;
    };
    let (c, id) = permission_case(&cli, "touch karl-marker.txt", "deny");
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    assert!(
        !c.project.join("karl-marker.txt").exists(),
        "a denied command ran"
    );
    // The refusal reaches the API as an error tool result with the next prompt.
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].is_error, "{results:?}");
    assert_eq!(c.stub.conversation(), prompts(&show));
}

/// A dialog on screen at start: the session escalates it and nothing is typed.
fn dialog_case(version: &'static str, test: &str, accepted: Accepted, marker: &str) {
    let Some(cli) = claude_cli(version, test) else {
        return;
    };
    let c = Claude::start(&cli, Script::new(), accepted, Mode::Manual);
    c.wait_screen(Duration::from_secs(30), marker, |s| s.contains(marker));
    let before = c.screen();
    let plan = c.plan(&["Create the lexer module with a Token enum."]);
    let id = c
        .fleet
        .drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = c.wait_status(&id, Duration::from_secs(30), &["escalated"]);
    c.expect_status(&show, "escalated", "dialog");
    std::thread::sleep(Duration::from_secs(2));
    assert!(turns(&c.fleet.show(&id)).is_empty());
    assert!(
        c.stub.turn_requests().is_empty(),
        "a prompt reached the API"
    );
    assert_eq!(c.screen(), before, "something was typed into the dialog");
}

fn folder_trust_dialog_is_escalated_and_never_typed_into(version: &'static str) {
    dialog_case(
        version,
        "folder_trust_dialog",
        Accepted {
            trust: false,
            ..ALL
        },
        "Yes, I trust this folder",
    );
}

fn api_key_dialog_is_escalated_and_never_typed_into(version: &'static str) {
    dialog_case(
        version,
        "api_key_dialog",
        Accepted {
            api_key: false,
            ..ALL
        },
        "Do you want to use this API key?",
    );
}

fn first_run_theme_picker_is_escalated_and_never_typed_into(version: &'static str) {
    dialog_case(
        version,
        "first_run_theme_picker",
        Accepted {
            onboarding: false,
            ..ALL
        },
        "Choose the text style",
    );
}

/// Observed with 2.1.197: a first run (onboarding not done) without the key approved
/// checks connectivity to api.anthropic.com, prints "Unable to connect to Anthropic
/// services" and exits to the shell. KARL must see an exited agent, not an idle shell
/// to type into.
fn first_run_that_cannot_connect_exits_and_is_escalated(version: &'static str) {
    let Some(cli) = claude_cli(version, "first_run_cannot_connect") else {
        return;
    };
    let c = Claude::start(
        &cli,
        Script::new(),
        Accepted {
            onboarding: false,
            trust: false,
            api_key: false,
        },
        Mode::Manual,
    );
    c.wait_screen(Duration::from_secs(30), "the CLI's exit", |s| {
        s.contains("Unable to connect to Anthropic services") && s.contains("bash-")
    });
    let plan = c.plan(&["Create the lexer module with a Token enum."]);
    let id = c
        .fleet
        .drive(&["--goal", "Write the parser", "--plan", &plan]);
    let show = c.wait_status(&id, Duration::from_secs(20), &["escalated", "done"]);
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !c.screen().contains("Token enum"),
        "a prompt was typed into the shell; session: {}\n{}",
        show["session"],
        c.diag()
    );
    c.expect_status(&show, "escalated", "exited");
}

fn api_errors_end_their_turns_and_the_session_continues(version: &'static str) {
    let Some(cli) = claude_cli(version, "api_errors") else {
        return;
    };
    let steps = [
        "Create the lexer module with a Token enum.",
        "Write a recursive descent parser for sums.",
        "Document the public parser API in lib.rs.",
    ];
    let script = Script::new()
        .on("lexer module", Reply::error(500))
        .on("recursive descent", Reply::error(529));
    let c = Claude::ready(&cli, script);
    let id = c.drive_plan(&steps);
    let show = c.wait_status(
        &id,
        Duration::from_secs(90),
        &["done", "escalated", "failed"],
    );
    c.expect_status(&show, "done", "");
    let t = turns(&show);
    assert_eq!(prompts(&show), steps);
    assert_eq!(t[0]["outcome"], "error", "{}", t[0]);
    assert_eq!(t[1]["outcome"], "error", "{}", t[1]);
    assert_ne!(t[2]["outcome"], "error", "{}", t[2]);
    // Each failed prompt was sent once and retried once by the CLI itself
    // (CLAUDE_CODE_MAX_RETRIES=1); KARL typed each prompt once.
    assert_eq!(c.stub.attempts(steps[0]), 2);
    assert_eq!(c.stub.attempts(steps[1]), 2);
    assert_eq!(c.stub.attempts(steps[2]), 1);
    let conv = c.stub.conversation();
    let unique: HashSet<&String> = conv.iter().collect();
    assert_eq!(
        unique.len(),
        conv.len(),
        "a prompt was typed twice: {conv:?}"
    );
    assert_eq!(conv.last().map(String::as_str), Some(steps[2]));
}

/// A ready CLI driven through `steps` (the first names the lexer module), whose answer to
/// the first streams word by word, `word_ms` apart (about 20 words).
fn slow_first_answer(cli: &Cli, word_ms: u64, steps: &[&str]) -> (Claude, String) {
    let slow = "Working through it now: reading the module, changing the code, running the \
                checks, and writing down what changed for the next step, one word at a time.";
    let c = Claude::ready(
        cli,
        Script::new().on("lexer module", Reply::slow(slow, word_ms)),
    );
    let plan = c.plan(steps);
    let id = c
        .fleet
        .drive(&["--goal", "Write the parser", "--plan", &plan]);
    (c, id)
}

fn the_cli_exiting_mid_session_is_escalated(version: &'static str) {
    let Some(cli) = claude_cli(version, "cli_exit") else {
        return;
    };
    // The first answer streams for about 3 s: the session is paused while it does, so
    // the remaining steps are still to come when the CLI exits.
    let steps = [
        "Create the lexer module with a Token enum.",
        "Write a recursive descent parser for sums.",
        "Document the public parser API in lib.rs.",
    ];
    let (c, id) = slow_first_answer(&cli, 150, &steps);
    wait_for(Duration::from_secs(30), || {
        (!c.stub.conversation().is_empty()).then_some(())
    })
    .expect("the first prompt reached the API");
    c.ctl_ok(&["pause", &id]);
    c.wait_status(&id, Duration::from_secs(10), &["paused"]);
    // Whatever was in flight finishes; then the developer leaves the CLI.
    c.wait_screen(Duration::from_secs(20), "an idle CLI", idle_screen);
    let typed_before = c.stub.conversation();
    c.ctl_ok(&["send", "mac2", &c.fleet.pane, "/exit", "--force"]);
    c.wait_screen(Duration::from_secs(20), "the shell after /exit", |s| {
        s.contains("claude --resume")
    });
    // The coordinator reads the pane from the agent's settled snapshots, a moment after the
    // screen changes; resuming before it has seen the shell races that snapshot (the
    // resumed session would find the CLI busy exiting, not gone).
    let mut last = serde_json::Value::Null;
    let seen = wait_for(Duration::from_secs(20), || {
        last = c.fleet.show(&id);
        (last["session"]["last_state"] == "exited").then_some(())
    });
    assert!(
        seen.is_some(),
        "the coordinator never saw the CLI exit: {}\n{}",
        last["session"],
        c.diag()
    );
    c.ctl_ok(&["resume", &id]);
    let show = c.wait_status(&id, Duration::from_secs(20), &["escalated", "done"]);
    c.expect_status(&show, "escalated", "exited");
    std::thread::sleep(Duration::from_secs(1));
    let screen = c.screen();
    let after = screen.rsplit("claude --resume").next().unwrap_or("");
    for s in steps {
        assert!(
            !after.contains(s),
            "{s:?} was typed into the shell:\n{screen}"
        );
    }
    assert_eq!(c.stub.conversation(), typed_before);
}

fn a_human_draft_in_the_box_is_never_typed_over(version: &'static str) {
    let Some(cli) = claude_cli(version, "human_draft") else {
        return;
    };
    let c = Claude::ready(&cli, Script::new());
    let draft = "half-written idea about the lexer";
    c.fleet
        .tmux
        .run(&["send-keys", "-t", &c.fleet.pane, "-l", draft])
        .expect("tmux");
    c.wait_screen(Duration::from_secs(10), "the draft", |s| {
        has_line(s, &format!("❯ {draft}"))
    });
    let steps = ["Create the lexer module with a Token enum."];
    let id = c.drive_plan(&steps);
    // Several settle periods and a safety capture go by.
    std::thread::sleep(Duration::from_secs(6));
    let show = c.fleet.show(&id);
    assert!(turns(&show).is_empty(), "{show:#}");
    assert!(c.stub.turn_requests().is_empty(), "something was submitted");
    let screen = c.screen();
    assert!(
        has_line(&screen, &format!("❯ {draft}")),
        "the draft was changed:\n{screen}"
    );
    let status = show["session"]["status"].as_str().unwrap_or("");
    assert!(
        status == "running" || status == "waiting",
        "the session should wait for the human: {}",
        show["session"]
    );
    // The human clears the box: the session goes on and types its step once.
    c.fleet
        .tmux
        .run(&["send-keys", "-t", &c.fleet.pane, "C-u"])
        .expect("tmux");
    let show = c.wait_status(&id, Duration::from_secs(40), &["done"]);
    assert_eq!(c.stub.conversation(), prompts(&show));
    assert_eq!(prompts(&show), steps);
}

/// Pid of the CLI process in the pane: the child of the pane's `sh -c` wrapper.
fn cli_pid(c: &Claude) -> u32 {
    let pane_pid: u32 = c
        .fleet
        .tmux
        .run(&["display-message", "-p", "-t", &c.fleet.pane, "#{pane_pid}"])
        .expect("tmux")
        .trim()
        .parse()
        .unwrap();
    let ps = Command::new("ps")
        .args(["-A", "-o", "pid=", "-o", "ppid="])
        .output()
        .unwrap();
    String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((
                it.next()?.parse::<u32>().ok()?,
                it.next()?.parse::<u32>().ok()?,
            ))
        })
        .find(|&(_, ppid)| ppid == pane_pid)
        .map(|(pid, _)| pid)
        .unwrap_or_else(|| panic!("no CLI process under pane pid {pane_pid}"))
}

/// Regression: a CLI killed mid-answer leaves its last frame — spinner, `esc to
/// interrupt` — on screen, with the shell's prompt drawn into it; KARL kept reading
/// "working" and the session stayed running although the pane's process was a shell. The
/// pane's processes say the agent is gone: the session escalates it as exited within
/// seconds, and nothing reaches the shell.
fn a_killed_cli_is_exited_and_nothing_reaches_the_shell(version: &'static str) {
    let Some(cli) = claude_cli(version, "killed_cli") else {
        return;
    };
    let steps = [
        "Create the lexer module with a Token enum.",
        "Write a recursive descent parser for sums.",
    ];
    let (c, id) = slow_first_answer(&cli, 400, &steps);
    c.wait_screen(Duration::from_secs(30), "the answer streaming", |s| {
        s.contains("esc to interrupt") && s.contains("Working through")
    });
    let pid = cli_pid(&c);
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let show = c.wait_status(&id, Duration::from_secs(20), &["escalated", "done"]);
    c.expect_status(&show, "escalated", "exited");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(c.stub.conversation(), [steps[0]], "{}", c.diag());
    let screen = c.screen();
    assert!(
        !screen.contains(steps[1]),
        "the next step was typed into the shell:\n{screen}"
    );
    assert_eq!(prompts(&c.fleet.show(&id)), [steps[0]]);
}

/// 2.1.330's auto mode, where a custom API endpoint cannot pass the server-side check:
/// the first checked action opens a modal (a dialog: escalated, never typed into); once
/// the developer stays in auto mode, the action asks `Do you want to proceed?` with `❯ No`
/// / `Yes`. Returns the fleet and the session, with that prompt on screen.
fn auto_mode_prompt(cli: &Cli, policy: &str) -> (Claude, String) {
    let outside = std::env::temp_dir().join(format!("karl-compat-{}", std::process::id()));
    let command = format!("rm -rf {} && echo removed", outside.display());
    let (c, id) = bash_check(cli, &command, policy, Mode::Default);
    c.wait_screen(Duration::from_secs(40), "the auto-mode modal", |s| {
        s.contains("Enter to stay in auto mode")
    });
    let show = c.wait_status(&id, Duration::from_secs(20), &["escalated"]);
    c.expect_status(&show, "escalated", "dialog");
    assert!(c.stub.tool_results().is_empty());
    // The developer stays in auto mode (the modal ignores an Enter in its first second).
    std::thread::sleep(Duration::from_millis(1500));
    c.fleet
        .tmux
        .run(&["send-keys", "-t", &c.fleet.pane, "Enter"])
        .expect("tmux");
    c.wait_screen(Duration::from_secs(20), "the No/Yes prompt", |s| {
        s.contains("Do you want to proceed?") && has_line(s, " ❯ No")
    });
    (c, id)
}

/// Approved by label: `Yes` is the second option and the selection starts on `No`, so
/// KARL moves down, sees the selection on `Yes`, and only then presses Enter.
fn auto_mode_prompt_approved_by_label(version: &'static str) {
    let Some(cli) = claude_cli(version, "auto_mode_approved") else {
        return;
    };
    let (c, id) = auto_mode_prompt(&cli, "escalate");
    // Still escalated, now for the permission rather than the modal.
    wait_for(Duration::from_secs(20), || {
        let show = c.fleet.show(&id);
        show["session"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("permission asked"))
            .then_some(())
    })
    .unwrap_or_else(|| panic!("the prompt was not escalated:\n{}", c.diag()));
    c.ctl_ok(&["approve", &id]);
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "approved, not run: {results:?}");
    let audit = c.fleet.ctl(&["audit", "--session", &id, "--json"]);
    assert!(
        audit.stdout.contains(r#"chose \"Yes\" after 1×Down"#),
        "{audit:?}"
    );
}

/// Denied by label under `--permissions deny`: `No` is already selected; KARL checks that
/// and confirms it. The refusal reaches the API and the session goes on.
fn auto_mode_prompt_denied_by_label(version: &'static str) {
    let Some(cli) = claude_cli(version, "auto_mode_denied") else {
        return;
    };
    let (c, id) = auto_mode_prompt(&cli, "deny");
    let show = c.wait_status(&id, Duration::from_secs(60), &["done"]);
    c.expect_status(&show, "done", "");
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].is_error, "denied, yet it ran: {results:?}");
    assert_eq!(c.stub.conversation(), prompts(&show));
}

/// A session through the kinds of turn the evidence parsers read — plain text, an approved
/// `Bash` call, an approved `Write`, an API error — run to `done`. With
/// `KARL_CAPTURE_EVIDENCE=DIR` set, the CLI's own files (`~/.claude/projects/**`,
/// `~/.claude/sessions/*`) are copied to `DIR/<version>/` for the fixtures.
fn evidence_files_of_a_real_session(version: &'static str) {
    let Some(cli) = claude_cli(version, "evidence_files") else {
        return;
    };
    let steps = [
        "Say hello to the team in one line.",
        "Run the marker check with a shell command.",
        "Write the notes file for the release.",
        "Create the lexer module with a Token enum.",
        "Check the rate limited endpoint once.",
        "Explain the design of the parser slowly.",
        "Summarize the changes in one short paragraph.",
    ];
    let slow = "Working through it now: reading the module, changing the code, running the \
                checks, and writing down what changed for the next step.";
    let script = Script::new()
        .on("rate limited", Reply::error(429))
        .on("design of the parser", Reply::slow(slow, 120))
        .on("marker check", Reply::bash("touch karl-marker.txt"))
        .on(
            "notes file",
            Reply::write_file("NOTES.md", "# Notes\n\nFirst release.\n"),
        )
        .on("lexer module", Reply::error(529));
    let c = Claude::ready(&cli, script);
    let plan = c.plan(&steps);
    let id = c.fleet.drive(&[
        "--goal",
        "Prepare the release",
        "--plan",
        &plan,
        "--permissions",
        "approve-safe",
    ]);
    let home = c.fleet.scratch.path("home");
    // The live session file while the CLI works and once it waits.
    let mut statuses: Vec<String> = Vec::new();
    let mut busy_file = None;
    let show = loop {
        for entry in std::fs::read_dir(home.join(".claude/sessions"))
            .into_iter()
            .flatten()
        {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                    let st = v["status"].as_str().unwrap_or("").to_string();
                    if st == "busy" && busy_file.is_none() {
                        busy_file = Some(text.clone());
                    }
                    if statuses.last() != Some(&st) {
                        statuses.push(st);
                    }
                }
            }
        }
        let show = c.fleet.show(&id);
        if ["done", "escalated", "failed"]
            .contains(&show["session"]["status"].as_str().unwrap_or(""))
        {
            break show;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("session file statuses: {statuses:?}");
    if let Some(dir) = std::env::var_os("KARL_CAPTURE_EVIDENCE") {
        let out = PathBuf::from(dir).join(version);
        let status = Command::new("cp")
            .args([
                "-r",
                &home.join(".claude").display().to_string(),
                &out.display().to_string(),
            ])
            .status()
            .unwrap();
        assert!(status.success());
        if let Some(text) = &busy_file {
            std::fs::write(out.join("session-busy.json"), text).unwrap();
        }
    }
    c.expect_status(&show, "done", "");
}

/// What the transcript evidence of a finished session must show: followed, `n` prompts
/// confirmed by the transcript and none twice or from elsewhere, every turn judged on the
/// agent's own words, and turn ends seen by the coordinator soon after the CLI wrote
/// them (figures printed for the closing notes).
fn assert_evidence(c: &Claude, id: &str, show: &serde_json::Value, n: usize) {
    let s = &show["session"];
    assert_eq!(s["evidence"], "transcript", "{s}\n{}", c.diag());
    assert_eq!(s["cli_session"].as_str().unwrap_or("").len(), 36, "{s}");
    let rec = &show["record"];
    assert_eq!(rec["confirmed"].as_u64(), Some(n as u64), "{rec}");
    for t in turns(show) {
        assert_eq!(t["confirmed_by"], "transcript", "{t}");
        assert_eq!(t["judged_by"], "transcript", "{t}");
    }
    let audit = c.fleet.ctl(&["audit", "--session", id, "--json"]);
    for bad in ["second time", "did not type"] {
        assert!(!audit.stdout.contains(bad), "{bad}: {}", audit.stdout);
    }
    let mut seen: Vec<u64> = rec["turn_end_seen_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
        .unwrap_or_default();
    let decided: Vec<u64> = rec["turn_end_decided_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
        .unwrap_or_default();
    eprintln!(
        "turn ends seen after (ms): {seen:?}; decided after (ms): {decided:?}; disagreements: {}",
        rec["disagreements"]
    );
    // Every turn is confirmed and judged from the transcript (above); the latency sample of
    // the last turn end may be missing: 2.1.197 writes its transcript in batches, and when
    // the screen ends the session first (turn budget reached) that sample is not taken.
    assert!(
        seen.len() + 1 >= n,
        "{n} turns, {} turn ends seen: {rec}\n{}",
        seen.len(),
        c.diag()
    );
    seen.sort_unstable();
    let median = seen[seen.len() / 2];
    assert!(
        median <= 300,
        "turn ends seen after a median {median} ms: {seen:?}"
    );
}

/// The transcript of the CLI in the pane (the one live session file names).
fn transcript_of(c: &Claude) -> PathBuf {
    let home = c.fleet.scratch.path("home");
    let sessions = home.join(".claude/sessions");
    let file = std::fs::read_dir(&sessions)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a live session file");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let cwd = v["cwd"].as_str().unwrap();
    let dir: String = cwd
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '-' })
        .collect();
    home.join(".claude/projects")
        .join(dir)
        .join(format!("{}.jsonl", v["sessionId"].as_str().unwrap()))
}

const TWO_STEPS: [&str; 2] = [
    "Say hello to the team in one line.",
    "Summarize the changes in one short paragraph.",
];

/// A ready CLI driven through [`TWO_STEPS`], paused once the first reached the API, idle
/// on screen, with its transcript followed; returns the fleet, the session and the CLI's
/// session id.
fn paused_after_the_first_turn(cli: &Cli) -> (Claude, String, String) {
    let c = Claude::ready(cli, Script::new());
    let id = c.drive_plan(&TWO_STEPS);
    wait_for(Duration::from_secs(30), || {
        (c.stub.conversation().len() == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("the first prompt never reached the API\n{}", c.diag()));
    c.ctl_ok(&["pause", &id]);
    c.wait_status(&id, Duration::from_secs(10), &["paused"]);
    c.wait_screen(Duration::from_secs(20), "an idle CLI", idle_screen);
    // KARL follows the transcript (a CLI just started may write its session file late;
    // until it is followed, the screen alone decides).
    let cli_session = wait_for(Duration::from_secs(10), || {
        let show = c.fleet.show(&id);
        let s = show["session"]["cli_session"]
            .as_str()
            .unwrap_or("")
            .to_string();
        (show["session"]["evidence"] == "transcript" && s.len() == 36).then_some(s)
    })
    .unwrap_or_else(|| panic!("the transcript is not followed\n{}", c.diag()));
    (c, id, cli_session)
}

/// The screen looks idle but the transcript says a turn is in flight (a prompt the CLI has
/// not closed, written here the way the CLI writes one): KARL waits, never types, and
/// audits the disagreement with both sides; once the transcript closes the turn, the
/// session goes on.
fn an_idle_screen_with_a_turn_in_flight_in_the_transcript_is_not_typed_into(version: &'static str) {
    let Some(cli) = claude_cli(version, "idle_screen_turn_in_flight") else {
        return;
    };
    let (c, id, _) = paused_after_the_first_turn(&cli);
    let steps = TWO_STEPS;
    // …the CLI has written the first turn out (2.1.197 writes its lines in batches)…
    let transcript = transcript_of(&c);
    wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&transcript)
            .ok()
            .filter(|t| t.contains("turn_duration"))
            .map(|_| ())
    })
    .expect("the CLI closed the first turn in its transcript");
    // …and now shows a turn it has not closed.
    let line = serde_json::json!({
        "type": "user",
        "message": {"role": "user", "content": "A prompt from another window."},
        "timestamp": karl_common::evidence::format_utc_ms(karl_common::unix_ms()),
        "promptSource": "typed",
    });
    compat::append_line(&transcript, &line.to_string());
    std::thread::sleep(Duration::from_millis(500));
    c.ctl_ok(&["resume", &id]);
    // Settles, safety captures: the screen stays idle, the session waits.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        c.stub.conversation(),
        [steps[0]],
        "typed into a turn in flight\n{}",
        c.diag()
    );
    let show = c.fleet.show(&id);
    assert_eq!(prompts(&show), [steps[0]]);
    assert!(
        show["record"]["disagreements"].as_u64().unwrap_or(0) >= 1,
        "{}",
        show["record"]
    );
    let audit = c.fleet.ctl(&["audit", "--session", &id, "--json"]);
    assert!(
        audit.stdout.contains("disagreement")
            && audit.stdout.contains("A prompt from another window."),
        "{}",
        audit.stdout
    );
    // The CLI closes that turn: the session goes on and finishes.
    let end = serde_json::json!({
        "type": "system",
        "subtype": "turn_duration",
        "durationMs": 5,
        "timestamp": karl_common::evidence::format_utc_ms(karl_common::unix_ms()),
    });
    compat::append_line(&transcript, &end.to_string());
    let show = c.wait_status(&id, Duration::from_secs(40), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    assert_eq!(c.stub.conversation(), steps);
}

/// The first Enter is lost and the agent's screen check fooled (`KARL_TEST_FAULT`): the
/// transcript never shows the prompt, so KARL presses Enter once — only Enter — and the
/// transcript then confirms it; the prompt reaches the API once.
fn a_lost_enter_is_detected_and_repaired_from_the_transcript(version: &'static str) {
    let Some(cli) = claude_cli(version, "lost_enter") else {
        return;
    };
    let steps = ["Say hello to the team in one line."];
    let c = Claude::ready_with_agent_env(
        &cli,
        Script::new(),
        &[("KARL_TEST_FAULT", "lose-first-enter")],
    );
    let id = c.drive_plan(&steps);
    let show = c.wait_status(
        &id,
        Duration::from_secs(40),
        &["done", "escalated", "failed"],
    );
    c.expect_status(&show, "done", "");
    assert_eq!(c.stub.conversation(), steps);
    assert_eq!(c.stub.attempts(steps[0]), 1);
    let audit = c.fleet.ctl(&["audit", "--session", &id, "--json"]);
    assert!(
        audit
            .stdout
            .contains("transcript does not show our prompt; pressed Enter once"),
        "{}",
        audit.stdout
    );
    assert_eq!(
        audit.stdout.matches("pressed Enter once").count(),
        1,
        "{}",
        audit.stdout
    );
    let t = &turns(&show)[0];
    assert_eq!(t["confirmed_by"], "transcript", "{t}");
}

/// With KARL's hooks installed (`karl-agent hooks install`), the CLI asks KARL through
/// its `PermissionRequest` hook before it shows a prompt; KARL answers by policy, the gate
/// judging the hook's exact tool input, and no key is pressed.
fn hooked_permission(version: &'static str, test: &str, policy: &str) -> Option<(Claude, String)> {
    let cli = claude_cli(version, test)?;
    let c = Claude::start_full(
        &cli,
        Script::new().on("marker check", Reply::bash("touch karl-marker.txt")),
        ALL,
        Mode::Manual,
        &[],
        Start::CliWithHooks,
        &[],
    );
    c.wait_screen(Duration::from_secs(30), "the empty input box", idle_screen);
    let plan = c.plan(&[RUN_CHECK, SUMMARIZE]);
    let id = c.fleet.drive(&[
        "--goal",
        "Check the project",
        "--plan",
        &plan,
        "--permissions",
        policy,
    ]);
    Some((c, id))
}

fn with_hooks_a_permission_is_approved_through_the_hook(version: &'static str) {
    let Some((c, id)) = hooked_permission(version, "hook_approved", "approve-safe") else {
        return;
    };
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    assert!(
        c.project.join("karl-marker.txt").exists(),
        "approved, not run"
    );
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].is_error, "{results:?}");
    let audit = compat::assert_answered_by_hook(&c.fleet, &id, "approved through the PermissionRequest hook by policy approve-safe: Bash touch karl-marker.txt", || c.diag());
    assert!(
        audit.contains("its settings run KARL's PermissionRequest hook"),
        "the agent did not see KARL's hook in the CLI's settings: {audit}"
    );
    assert_eq!(c.stub.conversation(), prompts(&show));
}

fn with_hooks_a_permission_is_denied_through_the_hook(version: &'static str) {
    let Some((c, id)) = hooked_permission(version, "hook_denied", "deny") else {
        return;
    };
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    assert!(
        !c.project.join("karl-marker.txt").exists(),
        "a denied command ran"
    );
    let results = c.stub.tool_results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].is_error, "{results:?}");
    compat::assert_answered_by_hook(
        &c.fleet,
        &id,
        "denied through the PermissionRequest hook by policy deny",
        || c.diag(),
    );
}

/// `drive --launch`: the pane shows a shell; KARL types the CLI's command line there with
/// `--settings FILE` holding its hook, waits for the CLI, and drives it — a permission is
/// approved through the hook, and the user's own settings are never touched.
fn launched_cli_gets_karls_hook_and_the_user_settings_stay_as_they_were(version: &'static str) {
    let Some(cli) = claude_cli(version, "launch") else {
        return;
    };
    let c = Claude::start_full(
        &cli,
        Script::new().on("marker check", Reply::bash("touch karl-marker.txt")),
        ALL,
        Mode::Manual,
        &[],
        Start::Shell,
        &[],
    );
    let user_settings = c.fleet.scratch.path("home/.claude/settings.json");
    let before = std::fs::read_to_string(&user_settings).unwrap();
    c.wait_screen(Duration::from_secs(10), "a shell prompt", |s| {
        s.lines()
            .any(|l| l.trim_end().ends_with('$') || l.trim_end().ends_with('#'))
    });
    let plan = c.plan(&[RUN_CHECK, SUMMARIZE]);
    let bin = cli.bin.display().to_string();
    let id = c.fleet.drive(&[
        "--goal",
        "Check the project",
        "--plan",
        &plan,
        "--permissions",
        "approve-safe",
        "--launch",
        &bin,
    ]);
    let show = c.wait_status(
        &id,
        Duration::from_secs(90),
        &["done", "escalated", "failed"],
    );
    c.expect_status(&show, "done", "");
    assert!(
        c.project.join("karl-marker.txt").exists(),
        "approved, not run"
    );
    let audit = compat::assert_answered_by_hook(
        &c.fleet,
        &id,
        "approved through the PermissionRequest hook by policy approve-safe",
        || c.diag(),
    );
    assert!(
        audit.contains("launched the agent CLI"),
        "{audit}\n{}",
        c.diag()
    );
    assert_eq!(c.stub.conversation(), [RUN_CHECK, SUMMARIZE]);
    assert_eq!(
        std::fs::read_to_string(&user_settings).unwrap(),
        before,
        "the user's settings changed"
    );
}

/// The developer starts a new conversation mid-session (`/clear`): the CLI's session file
/// names a new session and transcript, karl-agent moves there, and the next prompt is
/// confirmed from the new transcript.
fn a_new_conversation_is_followed_after_clear(version: &'static str) {
    let Some(cli) = claude_cli(version, "clear") else {
        return;
    };
    let (c, id, before) = paused_after_the_first_turn(&cli);
    c.ctl_ok(&["send", "mac2", &c.fleet.pane, "/clear", "--force"]);
    c.wait_screen(
        Duration::from_secs(20),
        "an idle CLI after /clear",
        idle_screen,
    );
    // The follower looks the session up again every 2 s.
    let after = wait_for(Duration::from_secs(15), || {
        let s = c.fleet.show(&id)["session"]["cli_session"]
            .as_str()
            .unwrap_or("")
            .to_string();
        (s.len() == 36 && s != before).then_some(s)
    })
    .unwrap_or_else(|| panic!("still on session {before} after /clear\n{}", c.diag()));
    c.ctl_ok(&["resume", &id]);
    let show = c.wait_status(&id, Duration::from_secs(40), &["done", "escalated"]);
    c.expect_status(&show, "done", "");
    assert_eq!(show["session"]["cli_session"], after.as_str());
    let t = turns(&show);
    assert_eq!(t.len(), 2);
    assert_eq!(t[1]["confirmed_by"], "transcript", "{}", t[1]);
}

/// One test module per pinned release: every scenario, plus those only a release has.
/// The real twin — SmolLM2-135M served on loopback by `tests/twin/server.mjs` — writes the
/// prompts for a real Claude Code: three turns, each typed prompt passed the gate and
/// reached the CLI's conversation exactly once.
fn a_real_small_model_drives_three_turns(version: &'static str) {
    let Some(cli) = claude_cli(version, "real_twin") else {
        return;
    };
    let log = std::env::temp_dir().join(format!(
        "karl-twin-{}-{}.log",
        std::process::id(),
        version.replace('.', "_")
    ));
    let twin = TwinServer::start(&log).unwrap_or_else(|e| panic!("{e}"));
    let c = Claude::start_full(
        &cli,
        Script::new(),
        ALL,
        Mode::Manual,
        &[],
        Start::Cli,
        &["--model-url", twin.base_url()],
    );
    c.wait_screen(Duration::from_secs(30), "the empty input box", idle_screen);
    let plan = c.plan(&[
        "Create the lexer module with a Token enum.",
        "Add a number literal rule to the lexer.",
        "Write unit tests for the lexer.",
        "Document the lexer in README.md.",
    ]);
    let id = c.fleet.drive(&[
        "--goal",
        "Write the lexer for the calculator",
        "--plan",
        &plan,
        "--turns",
        "3",
    ]);
    let show = c.wait_status(
        &id,
        Duration::from_secs(240),
        &["done", "escalated", "failed"],
    );
    c.expect_status(&show, "done", "");
    let typed = prompts(&show);
    assert_eq!(typed.len(), 3, "{show:#}");
    for t in turns(&show) {
        assert!(
            t["inject"].as_str().unwrap_or("").starts_with("submitted"),
            "{t}"
        );
        assert!(passed_the_gate(&t), "typed without passing the gate: {t}");
    }
    assert_eq!(c.stub.conversation(), typed);
    for p in &typed {
        assert_eq!(
            c.stub.attempts(p),
            1,
            "{p:?} reached the API more than once"
        );
    }
    // The store of a real CLI's session exports: an SFT example for each model prompt
    // that worked, in order, and pairs whose chosen side was typed.
    let out_dir = c.fleet.scratch.path("training");
    let (sft, pairs) = (out_dir.join("sft.jsonl"), out_dir.join("pairs.jsonl"));
    c.ctl_ok(&[
        "export",
        "--sft",
        sft.to_str().unwrap_or_default(),
        "--pairs",
        pairs.to_str().unwrap_or_default(),
    ]);
    let learnt: Vec<String> = read_jsonl(&sft)
        .iter()
        .map(|x| {
            let m = x["messages"].as_array().cloned().unwrap_or_default();
            assert!(m.len() >= 3 && m[0]["role"] == "system", "{x}");
            m.last()
                .and_then(|l| l["content"].as_str())
                .unwrap_or("")
                .to_string()
        })
        .collect();
    let earned: Vec<String> = turns(&show)
        .iter()
        .filter(|t| {
            ["model", "regenerated"].contains(&t["source"].as_str().unwrap_or(""))
                && ["progress", "complete"].contains(&t["outcome"].as_str().unwrap_or(""))
        })
        .map(|t| t["prompt"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(learnt, earned, "{show:#}");
    for p in read_jsonl(&pairs) {
        let chosen = p["chosen"][0]["content"].as_str().unwrap_or("").to_string();
        assert!(typed.contains(&chosen), "{p}");
        assert!(p["reason"].as_str().is_some_and(|r| !r.is_empty()), "{p}");
    }
    drop(twin);
    let _ = std::fs::remove_file(&log);
}

macro_rules! for_each_version {
    (every: [$($scenario:ident),* $(,)?], only_2_1_330: [$($only:ident),* $(,)?] $(,)?) => {
        mod v2_1_197 {
            $( #[test] fn $scenario() { super::$scenario("2.1.197") } )*
        }
        mod v2_1_330 {
            $( #[test] fn $scenario() { super::$scenario("2.1.330") } )*
            $( #[test] fn $only() { super::$only("2.1.330") } )*
        }
    };
}

for_each_version!(
    every: [
        ten_turn_session_every_prompt_arrives_exactly_once,
        bash_permission_under_escalate_waits_for_the_operator,
        bash_permission_under_approve_safe_runs_a_safe_command,
        bash_permission_under_approve_safe_escalates_a_destructive_command,
        bash_permission_under_deny_is_refused_and_the_session_goes_on,
        folder_trust_dialog_is_escalated_and_never_typed_into,
        api_key_dialog_is_escalated_and_never_typed_into,
        first_run_theme_picker_is_escalated_and_never_typed_into,
        first_run_that_cannot_connect_exits_and_is_escalated,
        api_errors_end_their_turns_and_the_session_continues,
        the_cli_exiting_mid_session_is_escalated,
        a_human_draft_in_the_box_is_never_typed_over,
        a_killed_cli_is_exited_and_nothing_reaches_the_shell,
        evidence_files_of_a_real_session,
        an_idle_screen_with_a_turn_in_flight_in_the_transcript_is_not_typed_into,
        a_lost_enter_is_detected_and_repaired_from_the_transcript,
        with_hooks_a_permission_is_approved_through_the_hook,
        with_hooks_a_permission_is_denied_through_the_hook,
        a_new_conversation_is_followed_after_clear,
        launched_cli_gets_karls_hook_and_the_user_settings_stay_as_they_were,
        a_real_small_model_drives_three_turns,
    ],
    // Auto mode is the default from 2.1.330 on; 2.1.197 has no such mode.
    only_2_1_330: [auto_mode_prompt_approved_by_label, auto_mode_prompt_denied_by_label],
);

#[test]
fn every_pinned_release_has_its_module() {
    assert_eq!(
        VERSIONS,
        ["2.1.197", "2.1.330"],
        "add a module to for_each_version!"
    );
}

//! Compatibility tier for Codex: KARL (real karl-coord, karl-agent and karl-ctl processes)
//! driving the real Codex CLI in a real tmux pane, Codex talking to the scripted Responses
//! stub (`karl_tests::responses_stub`) instead of the vendor's API.
//!
//! Every scenario runs against each release in [`VERSIONS`]; `.ci/run` installs each with
//! npm into `${XDG_CACHE_HOME:-~/.cache}/karl/codex-<version>`. A release that is not
//! installed is skipped with a note — except under `CI=true`, where it fails the test.
//!
//! Each test gets a private `CODEX_HOME` whose `config.toml` points a model provider at the
//! stub (`wire_api = "responses"`, key from `STUB_API_KEY`), trusts the project, asks before
//! escalated commands (`approval_policy = "on-request"`, `sandbox_mode =
//! "workspace-write"`) and marks the first-run notices seen. The pane runs
//! `sh -c 'codex; exec bash --norc -i'` with every other connection sent to a closed proxy
//! port.
//!
//! Observed with 0.169.0 against the stub: Codex starts an app-server (`codex app-server`,
//! a child that outlives the TUI; the tests kill it) which writes the rollout; the rollout
//! file appears with the first prompt; each prompt is one streamed `POST /v1/responses`
//! offering tools, plus one tool-less title request for the first; an escalated
//! `exec_command` asks "Would you like to run the following command?" with numbered
//! choices; a 429 with `usage_limit_reached` ends the turn with Codex's usage-limit notice.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use karl_tests::compat;
use karl_tests::harness::{shell_quote, turns, wait_for, Fleet, Scratch};
use karl_tests::responses_stub::{Reply, ResponsesStub, Script};

/// The Codex releases the tier runs against (keep in step with `.ci/run`).
const VERSIONS: [&str; 1] = ["0.169.0"];

/// `codex --version` says `codex-cli <version>`.
fn runs(bin: &Path, version: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .output()
        .map(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout)
                    .trim_end()
                    .ends_with(version)
        })
        .unwrap_or(false)
}

/// The CLI of `version` to test, or `None` (after saying so) when the tier must skip.
fn codex_cli(version: &'static str, test: &str) -> Option<PathBuf> {
    assert!(VERSIONS.contains(&version), "{version} is not pinned");
    let how = format!(
        "run .ci/run, or: npm install --prefix ~/.cache/karl/codex-{version} @openai/codex@{version}"
    );
    compat::release_or_skip(
        compat::cached_bin(&format!("codex-{version}"), "node_modules/.bin/codex"),
        |b| runs(b, version),
        &format!("Codex {version}"),
        &how,
        test,
    )
}

/// The composer is empty and Codex waits.
fn idle_screen(s: &str) -> bool {
    s.contains("? for shortcuts") && !s.contains("esc to interrupt")
}

/// The real Codex in a pane of a KARL fleet, with its stub.
struct Codex {
    fleet: Fleet,
    stub: ResponsesStub,
    home: PathBuf,
}

impl Drop for Codex {
    /// Codex's app-server outlives the TUI: stop every process of this test's home.
    fn drop(&mut self) {
        let home = self.home.display().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let mine = |b: &[u8]| String::from_utf8_lossy(b).contains(&home);
            if mine(&cmdline) || mine(&environ) {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            }
        }
    }
}

impl Codex {
    fn start(bin: &Path, script: Script, agent_env: &[(&str, &str)]) -> Codex {
        Codex::start_full(bin, script, agent_env, false)
    }

    /// `hooks`: KARL's hook installed into the test's `CODEX_HOME/hooks.json` with
    /// `karl-agent hooks install --codex`, and Codex started with
    /// `--dangerously-bypass-hook-trust` (a developer trusts it once with `/hooks`).
    fn start_full(bin: &Path, script: Script, agent_env: &[(&str, &str)], hooks: bool) -> Codex {
        let stub = ResponsesStub::start(script).unwrap();
        let scratch = Scratch::new();
        let home = scratch.path("codex-home");
        std::fs::create_dir_all(&home).unwrap();
        let project = scratch.path("proj");
        std::fs::create_dir_all(&project).unwrap();
        let project = project.canonicalize().unwrap();
        let config = format!(
            r#"model = "gpt-5-codex"
model_provider = "stub"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[model_providers.stub]
name = "stub"
base_url = "{base}"
wire_api = "responses"
env_key = "STUB_API_KEY"

[projects."{project}"]
trust_level = "trusted"

[analytics]
enabled = false

[tui]
screen_reader_detection_done = true

[tui.model_availability_nux]
"gpt-6.1-sol" = 1
"#,
            base = stub.base_url(),
            project = project.display()
        );
        std::fs::write(home.join("config.toml"), config).unwrap();
        let user_home = scratch.path("home");
        std::fs::create_dir_all(&user_home).unwrap();
        let env: Vec<(&str, String)> = vec![
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", user_home.display().to_string()),
            ("CODEX_HOME", home.display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("STUB_API_KEY", "sk-karl-compat".into()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            ("HTTP_PROXY", "http://127.0.0.1:9".into()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ];
        if hooks {
            let out = Command::new(karl_tests::harness::bin("karl-agent"))
                .args(["hooks", "install", "--codex", "--settings"])
                .arg(home.join("hooks.json"))
                .arg("--socket")
                .arg(scratch.dir.path().join(".karl/agent.sock"))
                .output()
                .unwrap();
            assert!(out.status.success(), "hooks install: {out:?}");
        }
        let inner = format!(
            "{}{}; exec bash --norc -i",
            shell_quote(&bin.display().to_string()),
            if hooks {
                " --dangerously-bypass-hook-trust"
            } else {
                ""
            }
        );
        let cmdline = compat::pane_command(&project, &env, &inner);
        let fleet = Fleet::start_command_env(scratch, &cmdline, 120, 40, &[], agent_env);
        let c = Codex { fleet, stub, home };
        c.wait_screen(Duration::from_secs(40), "the empty composer", idle_screen);
        c
    }

    fn screen(&self) -> String {
        self.fleet.screen()
    }

    fn wait_screen(&self, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) {
        compat::wait_screen(&self.fleet, timeout, what, pred)
    }

    /// Drives the pane through `steps`; returns the session id.
    fn drive_plan(&self, steps: &[&str], extra: &[&str]) -> String {
        let plan = self.fleet.plan(steps);
        let mut args = vec!["--goal", "Prepare the release", "--plan", &plan];
        args.extend_from_slice(extra);
        self.fleet.drive(&args)
    }

    fn diag(&self) -> String {
        format!(
            "screen now:\n{}\nstub conversation: {:?}\nunknown requests: {:?}\n{}",
            self.screen(),
            self.stub.conversation(),
            self.stub.unknown(),
            compat::logs(&self.fleet, 150)
        )
    }

    fn wait_status(&self, id: &str, timeout: Duration, want: &[&str]) -> serde_json::Value {
        compat::wait_status(&self.fleet, id, timeout, want, || self.diag())
    }

    fn expect_done(&self, show: &serde_json::Value) {
        assert_eq!(
            show["session"]["status"],
            "done",
            "{}\n{}",
            show["session"],
            self.diag()
        );
    }

    fn ctl_ok(&self, args: &[&str]) {
        let out = self.fleet.ctl(args);
        assert_eq!(out.code, 0, "karl-ctl {args:?}: {out:?}");
    }

    /// The rollout Codex writes for the conversation in the pane.
    fn rollout(&self) -> PathBuf {
        fn find(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    find(&p, out);
                } else if p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
                {
                    out.push(p);
                }
            }
        }
        let mut found = Vec::new();
        find(&self.home.join("sessions"), &mut found);
        assert_eq!(found.len(), 1, "one rollout: {found:?}");
        found.remove(0)
    }
}

fn prompts(show: &serde_json::Value) -> Vec<String> {
    turns(show)
        .iter()
        .map(|t| t["prompt"].as_str().unwrap_or("").to_string())
        .collect()
}

/// What the rollout evidence of a finished session must show: followed, every prompt after
/// the first confirmed by the rollout and none twice or from elsewhere, and turn ends seen by the
/// coordinator soon after Codex wrote them (figures printed for the closing notes).
fn assert_evidence(c: &Codex, id: &str, show: &serde_json::Value, n: usize) {
    let s = &show["session"];
    assert_eq!(s["evidence"], "transcript", "{s}\n{}", c.diag());
    assert_eq!(s["cli_session"].as_str().unwrap_or("").len(), 36, "{s}");
    let rec = &show["record"];
    // Codex creates its rollout with the first prompt, so the follower may find it after
    // that prompt was written (it then confirms turn 1 from the screen); every later prompt
    // is confirmed from the file.
    let confirmed = rec["confirmed"].as_u64().unwrap_or(0);
    assert!(
        confirmed + 1 >= n as u64 && confirmed <= n as u64,
        "{confirmed} of {n} prompts confirmed: {rec}\n{}",
        c.diag()
    );
    for t in turns(show).iter().filter(|t| t["n"] != 1) {
        assert_eq!(t["confirmed_by"], "transcript", "{t}");
    }
    let audit = c.fleet.ctl(&["audit", "--session", id, "--json"]);
    for bad in ["second time", "did not type"] {
        assert!(!audit.stdout.contains(bad), "{bad}: {}", audit.stdout);
    }
    let mut seen: Vec<u64> = rec["turn_end_seen_ms"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
        .unwrap_or_default();
    eprintln!(
        "turn ends seen after (ms): {seen:?}; decided after (ms): {}; disagreements: {}",
        rec["turn_end_decided_ms"], rec["disagreements"]
    );
    // The first turn ends before the rollout is found (Codex creates it with the first
    // prompt): every later one is seen from the file.
    assert!(
        seen.len() + 1 >= n,
        "{n} turns, {} turn ends seen: {rec}\n{}",
        seen.len(),
        c.diag()
    );
    seen.sort_unstable();
    if let Some(median) = seen.get(seen.len() / 2) {
        assert!(
            *median <= 300,
            "turn ends seen after a median {median} ms: {seen:?}"
        );
    }
}

fn a_plan_is_driven_with_every_prompt_confirmed_from_the_rollout(version: &'static str) {
    let Some(bin) = codex_cli(version, "plan_confirmed") else {
        return;
    };
    let steps = [
        "Say hello to the team in one line.",
        "Run the marker check with a shell command.",
        "Explain the design of the parser slowly.",
        "Summarize the changes in one short paragraph.",
        "Check the rate limited endpoint once.",
    ];
    let slow = "Working through it now: reading the module, changing the code, running the \
                checks, and writing down what changed for the next step.";
    let script = Script::new()
        .on("marker check", Reply::exec("touch karl-marker.txt"))
        .on("design of the parser", Reply::slow(slow, 120))
        .on("rate limited", Reply::error(429));
    let c = Codex::start(&bin, script, &[]);
    let id = c.drive_plan(&steps, &[]);
    let show = c.wait_status(
        &id,
        Duration::from_secs(120),
        &["waiting", "done", "escalated", "failed"],
    );
    if let Some(dir) = std::env::var_os("KARL_CAPTURE_EVIDENCE") {
        let out = PathBuf::from(dir).join(format!("codex-{version}"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::copy(c.rollout(), out.join("rollout.jsonl")).unwrap();
    }
    // The last step hits the usage limit: Codex's notice states no reset time, so KARL
    // waits on it instead of typing into a CLI that cannot work.
    let s = &show["session"];
    assert_eq!(s["status"], "waiting", "{s}\n{}", c.diag());
    assert!(
        s["reason"].as_str().unwrap_or("").contains("usage limit"),
        "{s}"
    );
    let typed = prompts(&show);
    assert_eq!(typed, steps, "{}", c.diag());
    assert_eq!(
        c.stub.conversation(),
        typed,
        "every prompt reached Codex once"
    );
    assert!(
        c.fleet.scratch.path("proj/karl-marker.txt").exists(),
        "the sandboxed command ran"
    );
    assert_evidence(&c, &id, &show, typed.len());
}

/// A ready Codex driven through two steps, paused once the first turn is written out,
/// idle on screen, with its rollout followed.
fn paused_after_the_first_turn(bin: &Path, agent_env: &[(&str, &str)]) -> (Codex, String) {
    // The first answer streams for about two seconds, so the pause lands while that turn
    // is still running: with an instant answer KARL could type the second step first.
    let script = Script::new().on(
        "Say hello",
        Reply::slow(
            "Done: said hello to the team, in one line, as asked, with nothing else added.",
            150,
        ),
    );
    let c = Codex::start(bin, script, agent_env);
    let id = c.drive_plan(&TWO_STEPS, &[]);
    wait_for(Duration::from_secs(30), || {
        (c.stub.conversation().len() == 1).then_some(())
    })
    .unwrap_or_else(|| panic!("the first prompt never reached the API\n{}", c.diag()));
    c.ctl_ok(&["pause", &id]);
    c.wait_status(&id, Duration::from_secs(10), &["paused"]);
    c.wait_screen(Duration::from_secs(20), "an idle Codex", idle_screen);
    wait_for(Duration::from_secs(10), || {
        let show = c.fleet.show(&id);
        (show["session"]["evidence"] == "transcript").then_some(())
    })
    .unwrap_or_else(|| panic!("the rollout is not followed\n{}", c.diag()));
    (c, id)
}

const TWO_STEPS: [&str; 2] = [
    "Say hello to the team in one line.",
    "Summarize the changes in one short paragraph.",
];

fn append_line(path: &Path, line: &serde_json::Value) {
    compat::append_line(path, &line.to_string());
}

fn now_stamp() -> String {
    karl_common::evidence::format_utc_ms(karl_common::unix_ms())
}

/// The screen looks idle but the rollout says a turn is in flight (a prompt Codex has not
/// completed, written the way Codex writes one): KARL waits and audits the disagreement;
/// once the rollout completes the turn, the session goes on.
fn an_idle_screen_with_a_turn_in_flight_in_the_rollout_is_not_typed_into(version: &'static str) {
    let Some(bin) = codex_cli(version, "idle_screen_turn_in_flight") else {
        return;
    };
    let (c, id) = paused_after_the_first_turn(&bin, &[]);
    let rollout = c.rollout();
    wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&rollout)
            .ok()
            .filter(|t| t.contains("task_complete"))
            .map(|_| ())
    })
    .expect("Codex completed the first turn in its rollout");
    append_line(
        &rollout,
        &serde_json::json!({"timestamp": now_stamp(), "type": "event_msg", "payload": {
            "type": "item_completed", "item": {"type": "UserMessage",
            "content": [{"type": "text", "text": "A prompt from another window."}]}}}),
    );
    std::thread::sleep(Duration::from_millis(500));
    c.ctl_ok(&["resume", &id]);
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        c.stub.conversation(),
        [TWO_STEPS[0]],
        "typed into a turn in flight\n{}",
        c.diag()
    );
    let show = c.fleet.show(&id);
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
    append_line(
        &rollout,
        &serde_json::json!({"timestamp": now_stamp(), "type": "event_msg", "payload": {
            "type": "task_complete", "last_agent_message": "Done."}}),
    );
    let show = c.wait_status(&id, Duration::from_secs(40), &["done", "escalated"]);
    c.expect_done(&show);
    assert_eq!(c.stub.conversation(), TWO_STEPS);
}

/// The second prompt's Enter is lost and the agent's screen check fooled
/// (`KARL_TEST_FAULT=lose-enter:2`; the first prompt creates the rollout): the rollout never
/// shows the prompt, so KARL presses Enter once and the rollout then confirms it.
fn a_lost_enter_is_detected_and_repaired_from_the_rollout(version: &'static str) {
    let Some(bin) = codex_cli(version, "lost_enter") else {
        return;
    };
    // The first answer takes a couple of seconds, so the rollout (created by the first
    // prompt) is followed before the second prompt is typed.
    let script = Script::new().on(
        "hello",
        Reply::slow(
            "Hello team, here is a short greeting from the release crew today.",
            150,
        ),
    );
    let c = Codex::start(&bin, script, &[("KARL_TEST_FAULT", "lose-enter:2")]);
    let id = c.drive_plan(&TWO_STEPS, &[]);
    let show = c.wait_status(
        &id,
        Duration::from_secs(60),
        &["done", "escalated", "failed"],
    );
    c.expect_done(&show);
    assert_eq!(c.stub.conversation(), TWO_STEPS);
    let audit = c.fleet.ctl(&["audit", "--session", &id, "--json"]);
    assert_eq!(
        audit
            .stdout
            .matches("transcript does not show our prompt; pressed Enter once")
            .count(),
        1,
        "{}\n{}",
        audit.stdout,
        c.diag()
    );
    assert_eq!(turns(&show)[1]["confirmed_by"], "transcript", "{show}");
}

const RUN_CHECK: &str = "Run the marker check with a shell command.";
const SUMMARIZE: &str = "Summarize the changes in one short paragraph.";

/// With KARL's hook installed, Codex asks KARL through `PermissionRequest` before it shows
/// its approval prompt; KARL answers by policy, judging the hook's exact command.
fn hooked_permission(version: &'static str, test: &str, policy: &str) -> Option<(Codex, String)> {
    let bin = codex_cli(version, test)?;
    let c = Codex::start_full(
        &bin,
        Script::new().on("marker check", Reply::escalated("touch karl-marker.txt")),
        &[],
        true,
    );
    let id = c.drive_plan(&[RUN_CHECK, SUMMARIZE], &["--permissions", policy]);
    Some((c, id))
}

fn with_hooks_a_permission_is_approved_through_the_hook(version: &'static str) {
    let Some((c, id)) = hooked_permission(version, "hook_approved", "approve-safe") else {
        return;
    };
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_done(&show);
    assert!(
        c.fleet.scratch.path("proj/karl-marker.txt").exists(),
        "approved, not run\n{}",
        c.diag()
    );
    compat::assert_answered_by_hook(&c.fleet, &id, "approved through the PermissionRequest hook by policy approve-safe: Bash touch karl-marker.txt", || c.diag());
    assert_eq!(c.stub.conversation(), [RUN_CHECK, SUMMARIZE]);
}

fn with_hooks_a_permission_is_denied_through_the_hook(version: &'static str) {
    let Some((c, id)) = hooked_permission(version, "hook_denied", "deny") else {
        return;
    };
    let show = c.wait_status(&id, Duration::from_secs(60), &["done", "escalated"]);
    c.expect_done(&show);
    assert!(
        !c.fleet.scratch.path("proj/karl-marker.txt").exists(),
        "a denied command ran"
    );
    compat::assert_answered_by_hook(
        &c.fleet,
        &id,
        "denied through the PermissionRequest hook by policy deny",
        || c.diag(),
    );
}

macro_rules! for_each_version {
    ($($scenario:ident),* $(,)?) => {
        mod v0_169_0 {
            $( #[test] fn $scenario() { super::$scenario("0.169.0") } )*
        }
    };
}

for_each_version!(
    a_plan_is_driven_with_every_prompt_confirmed_from_the_rollout,
    an_idle_screen_with_a_turn_in_flight_in_the_rollout_is_not_typed_into,
    a_lost_enter_is_detected_and_repaired_from_the_rollout,
    with_hooks_a_permission_is_approved_through_the_hook,
    with_hooks_a_permission_is_denied_through_the_hook,
);

#[test]
fn every_pinned_release_has_its_module() {
    assert_eq!(VERSIONS, ["0.169.0"], "add a module to for_each_version!");
}

//! Regressions, each named after the misreading it pins, with the rule that must decide; and
//! what a permission, a limit and a draft carry. Captures come from `tests/fixtures/panes`.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::OnceLock;

use karl_common::detect::{
    classify_capture, AgentKind, CaptureMeta, Detection, DetectionInput, Detector, PaneState,
};

fn detector() -> &'static Detector {
    static DET: OnceLock<Detector> = OnceLock::new();
    DET.get_or_init(|| Detector::try_embedded().unwrap())
}

fn fixture(name: &str, with_ansi: bool) -> Detection {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let read = |ext: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}")));
    let meta: CaptureMeta = serde_json::from_str(&read("json").unwrap()).unwrap();
    let ansi = if with_ansi { read("ansi").ok() } else { None };
    classify_capture(detector(), &read("txt").unwrap(), ansi.as_deref(), &meta)
}

fn decided(name: &str, state: PaneState, rule: &str) -> Detection {
    let d = fixture(name, true);
    assert_eq!(d.state, state, "{name}: {d:?}");
    assert_eq!(d.rule.as_deref(), Some(rule), "{name}: {d:?}");
    assert_eq!(
        d.evidence[0].rule, rule,
        "{name}: the deciding rule comes first in evidence"
    );
    d
}

#[test]
fn file_named_running_config_is_not_a_state() {
    let d = decided(
        "cc-hard-quotes-100x30__idle",
        PaneState::Idle,
        "claude/idle",
    );
    assert!(!d.error);
}

#[test]
fn quoted_esc_to_interrupt_is_idle() {
    decided(
        "cc-tricky-quote-footer-120x24__quoted",
        PaneState::Idle,
        "claude/idle",
    );
    decided(
        "cc-tricky-spinner-quote-120x60__quoted",
        PaneState::Idle,
        "claude/idle",
    );
    decided(
        "cx-tricky-quote-120x40__quoted",
        PaneState::Idle,
        "codex/idle",
    );
}

#[test]
fn numbered_yes_no_list_in_an_answer_is_not_a_menu() {
    decided(
        "cc-tricky-numbered-120x40__quoted",
        PaneState::Idle,
        "claude/idle",
    );
}

#[test]
fn stale_busy_footer_above_the_live_box_is_idle() {
    decided("cc-bash-multiline__done", PaneState::Idle, "claude/idle");
}

#[test]
fn finished_permission_in_scrollback_does_not_outlive_it() {
    decided(
        "cc-stale-perm-120x24__running-hist",
        PaneState::Working,
        "claude/busy-footer",
    );
    decided(
        "cx-approved-running-120x60__running",
        PaneState::Working,
        "codex/status-line",
    );
}

#[test]
fn codex_streaming_without_status_line_is_working_by_title() {
    decided(
        "cx-basic-80x24__reasoning",
        PaneState::Working,
        "codex/status-line",
    );
    // While answer text streams Codex draws no status line: only the title says busy.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let text = std::fs::read_to_string(dir.join("cx-basic-80x24__reasoning.txt"))
        .unwrap()
        .replace(
            "• Checking the test layout Let me see (2s • esc to interrupt)",
            "• Run cargo test -p karl-common; add",
        );
    let mut input = DetectionInput {
        text: &text,
        current_command: "node",
        title: "⠙ proj",
        height: Some(24),
        ..DetectionInput::default()
    };
    let d = detector().detect(&input);
    assert_eq!(d.state, PaneState::Working, "{d:?}");
    assert_eq!(d.rule.as_deref(), Some("codex/title-spinner"));
    input.title = "proj";
    assert_eq!(detector().detect(&input).state, PaneState::Idle);
}

#[test]
fn quoted_usage_limit_and_api_error_are_neither() {
    let d = decided(
        "cc-tricky-limit-quote-80x60__quoted",
        PaneState::Idle,
        "claude/idle",
    );
    assert!(!d.error, "{d:?}");
}

#[test]
fn error_words_in_successful_output_are_not_errors() {
    for name in [
        "cc-tricky-tool-errwords-120x40__tests-ok",
        "cc-tricky-tool-errwords-80x40__grep-ok",
        "cc-tricky-tool-errwords-80x60__ci-ok",
        "sh-tests-ok-80x40__tests-ok",
    ] {
        let d = fixture(name, true);
        assert_eq!(
            (d.state, d.error),
            (PaneState::Idle, false),
            "{name}: {d:?}"
        );
    }
}

#[test]
fn errors_at_the_end_of_the_last_turn_set_the_flag() {
    for (name, rule) in [
        ("cc-apierr-529-final-80x60__failed", "claude/api-error"),
        ("cc-tool-fail-80x60__failed", "claude/tool-error"),
        ("cx-error-120x40__failed", "codex/turn-error"),
        ("cx-approval-80x40__after", "codex/command-failed"),
        ("sh-traceback-120x40__traceback", "shell/command-error"),
    ] {
        let d = fixture(name, true);
        assert_eq!((d.state, d.error), (PaneState::Idle, true), "{name}: {d:?}");
        assert!(d.evidence.iter().any(|e| e.rule == rule), "{name}: {d:?}");
    }
}

#[test]
fn ghost_text_is_not_a_draft_with_the_ansi_capture() {
    decided(
        "cc-hard-ghost-100x30__suggestion",
        PaneState::Idle,
        "claude/idle",
    );
    decided(
        "cx-hard-placeholder-100x30__idle",
        PaneState::Idle,
        "codex/idle",
    );
    decided(
        "sh-hard-autosuggest-80x24__ghost",
        PaneState::Idle,
        "shell/idle",
    );
    // Without it, dim text cannot be told from typed text: draft, the side that never types.
    assert_eq!(
        fixture("cc-hard-ghost-100x30__suggestion", false).state,
        PaneState::Draft
    );
    assert_eq!(
        fixture("sh-hard-autosuggest-80x24__ghost", false).state,
        PaneState::Draft
    );
    // Codex's known placeholders are recognised even from plain text.
    assert_eq!(
        fixture("cx-basic-80x24__welcome", false).state,
        PaneState::Idle
    );
}

#[test]
fn typed_prefix_before_a_suggestion_is_a_draft() {
    let d = decided(
        "sh-hard-autosuggest-80x24__typed-prefix",
        PaneState::Draft,
        "shell/draft",
    );
    assert_eq!(d.draft.as_deref(), Some("cargo t"));
}

#[test]
fn progress_percentage_is_not_a_prompt() {
    decided(
        "sh-hard-progress-100x30__building",
        PaneState::Working,
        "shell/foreground-command",
    );
    // Even without the foreground command, the cursor is not on a prompt.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let text = std::fs::read_to_string(dir.join("sh-hard-progress-100x30__building.txt")).unwrap();
    let d = detector().detect(&DetectionInput {
        text: &text,
        current_command: "zsh",
        height: Some(30),
        ..DetectionInput::default()
    });
    assert_eq!(d.state, PaneState::Working, "{d:?}");
}

#[test]
fn silent_dev_server_is_working() {
    decided(
        "sh-devserver-120x24__serving",
        PaneState::Working,
        "shell/no-prompt",
    );
}

#[test]
fn old_resume_hint_above_later_commands_is_a_shell() {
    let d = decided(
        "sh-hard-after-claude-80x24__idle",
        PaneState::Idle,
        "shell/idle",
    );
    assert_eq!(d.agent, AgentKind::Shell);
}

#[test]
fn exited_cli_is_named() {
    for (name, agent) in [
        ("cc-exit-ctrlc-80x24__exited", AgentKind::Claude),
        ("cc-exit-slash-80x60__exited", AgentKind::Claude),
        ("cx-quit-120x40__exited", AgentKind::Codex),
    ] {
        let d = fixture(name, true);
        assert_eq!(
            (d.state, d.agent),
            (PaneState::Exited, agent),
            "{name}: {d:?}"
        );
    }
}

#[test]
fn rate_limit_menu_is_limited_not_dialog() {
    let d = decided(
        "cc-limit-5h-120x40__menu",
        PaneState::Limited,
        "claude/limit-menu",
    );
    assert_eq!(d.limit_reset.as_deref(), Some("9:32am (UTC)"));
}

#[test]
fn limits_carry_the_reset_time_as_stated() {
    let d = decided(
        "cc-limit-5h-120x40__waiting",
        PaneState::Limited,
        "claude/limit-last-turn",
    );
    assert_eq!(d.limit_reset.as_deref(), Some("9:32am (UTC)"));
    let d = decided(
        "cx-limit-120x40__limit",
        PaneState::Limited,
        "codex/usage-limit",
    );
    assert_eq!(d.limit_reset.as_deref(), Some("9:46 AM"));
}

#[test]
fn bash_permission_carries_the_whole_command_and_options() {
    let d = decided(
        "cc-bash-perm-80x40__perm",
        PaneState::Permission,
        "claude/perm-footer",
    );
    let p = d.permission.unwrap();
    assert_eq!(p.tool, "Bash command");
    assert!(
        p.action
            .starts_with("rm -rf build && mkdir -p build && echo cleaned"),
        "{p:?}"
    );
    assert_eq!(
        p.options,
        [
            "Yes",
            "Yes, and don't ask again for rm -rf build and mkdir -p build commands in /Users/karl/project/proj",
            "No"
        ]
    );
    // A multi-line command is carried whole: a policy must see the part after the heredoc.
    let p = fixture("cc-bash-multiline__perm", true).permission.unwrap();
    assert!(p.action.contains("#!/bin/sh\nset -e\n"), "{p:?}");
    assert!(
        p.action
            .contains("chmod +x scripts/migrate.sh && ./scripts/migrate.sh"),
        "{p:?}"
    );
}

#[test]
fn edit_and_plan_permissions_name_their_tool() {
    let p = fixture("cc-write-edit-120x40__edit-perm", true)
        .permission
        .unwrap();
    assert_eq!(
        (p.tool.as_str(), p.action.as_str()),
        ("Edit file", "config/default.toml")
    );
    assert_eq!(p.options.len(), 3);
    let d = decided(
        "cc-planmode__plan-approval",
        PaneState::Permission,
        "claude/perm-title",
    );
    let p = d.permission.unwrap();
    assert_eq!(p.tool, "Exit plan mode?");
    assert_eq!(p.options, ["Yes", "No"]);
    let p = fixture("cc-hard-fetch-perm-100x30__perm", true)
        .permission
        .unwrap();
    assert_eq!(p.tool, "Fetch");
    assert!(p.action.starts_with("https://docs.rs/tokio/"), "{p:?}");
}

#[test]
fn codex_approval_carries_command_and_wrapped_options() {
    let d = decided(
        "cx-approval-80x40__approval",
        PaneState::Permission,
        "codex/approval",
    );
    let p = d.permission.unwrap();
    assert_eq!(
        p.action,
        "rm -rf target/debug/incremental && cargo build --offline"
    );
    assert_eq!(p.options.len(), 3, "{p:?}");
    assert!(p.options[1].ends_with("incremental` (p)"), "{p:?}");
}

#[test]
fn drafts_carry_their_text() {
    let d = decided(
        "cc-hard-draft-100x30__multiline",
        PaneState::Draft,
        "claude/draft",
    );
    assert_eq!(
        d.draft.as_deref(),
        Some("now add an integration test that\nstarts the server on port 0\nand checks /health")
    );
    let d = decided(
        "cx-draft-paste-80x60__paste",
        PaneState::Draft,
        "codex/draft",
    );
    assert_eq!(d.draft.as_deref().map(|s| s.lines().count()), Some(3));
    let d = decided("sh-prompt-80x24__typed", PaneState::Draft, "shell/draft");
    assert_eq!(d.draft.as_deref(), Some("git status --short"));
}

#[test]
fn prompt_put_back_after_interrupt_is_a_draft() {
    decided(
        "cc-interrupt-80x60__draft-after-interrupt",
        PaneState::Draft,
        "claude/draft",
    );
}

#[test]
fn startup_dialogs_are_dialogs() {
    for name in [
        "cc-trust__trust",
        "cc-apikey-120x60__apikey",
        "cc-onboarding-80x40__security-notes",
        "cc-onboarding-80x40__theme",
        "cx-login-100x30__signin",
        "cx-model-picker-120x40__picker",
    ] {
        let d = fixture(name, true);
        assert_eq!(d.state, PaneState::Dialog, "{name}: {d:?}");
        assert!(d.permission.is_none(), "{name}");
    }
}

#[test]
fn verdict_serializes_with_the_fields_karl_ctl_prints() {
    let d = fixture("cc-bash-perm-80x40__perm", true);
    let v = serde_json::to_value(&d).unwrap();
    for key in [
        "state",
        "agent",
        "error",
        "confidence",
        "evidence",
        "permission",
        "rule",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v}");
    }
    assert_eq!(v["state"], "permission");
    assert_eq!(v["agent"], "claude");
    let back: Detection = serde_json::from_value(v).unwrap();
    assert_eq!(back, d);
}

#[test]
fn capture_meta_reads_label_files_and_ignores_unknown_fields() {
    let m: CaptureMeta = serde_json::from_str(
        r#"{"state":"idle","pane_current_command":"claude","cursor_x":2,"height":40,"tags":["x"]}"#,
    )
    .unwrap();
    assert_eq!(m.pane_current_command.as_deref(), Some("claude"));
    assert_eq!(
        (m.cursor_x, m.cursor_y, m.height),
        (Some(2), None, Some(40))
    );
}

#[test]
fn aider_and_gemini_rules_read_their_documented_screens() {
    let det = detector();
    let aider_idle = "Aider v0.86.1\nMain model: gpt-4o with diff edit format\nRepo-map: using 1024 tokens\n> \n";
    let d = det.detect(&DetectionInput {
        text: aider_idle,
        current_command: "aider",
        cursor_x: Some(2),
        cursor_y: Some(3),
        height: Some(4),
        ..DetectionInput::default()
    });
    assert_eq!(
        (d.agent, d.state),
        (AgentKind::Aider, PaneState::Idle),
        "{d:?}"
    );
    let aider_confirm = "Aider v0.86.1\n> run the tests\n\nRun shell command? (Y)es/(N)o/(D)on't ask again [Yes]: \n";
    let d = det.detect(&DetectionInput {
        text: aider_confirm,
        current_command: "aider",
        ..DetectionInput::default()
    });
    assert_eq!(d.state, PaneState::Permission, "{d:?}");

    let box_line = format!("╭{}╮", "─".repeat(60));
    let box_end = format!("╰{}╯", "─".repeat(60));
    let gemini_idle = format!(
        "{box_line}\n│ >   Type your message or @path/to/file{}│\n{box_end}\n~/proj (main*)      no sandbox (see /docs)      gemini-2.5-pro (100% context left)\n",
        " ".repeat(23)
    );
    let d = det.detect(&DetectionInput {
        text: &gemini_idle,
        current_command: "node",
        ..DetectionInput::default()
    });
    assert_eq!(
        (d.agent, d.state),
        (AgentKind::Gemini, PaneState::Idle),
        "{d:?}"
    );
    let gemini_busy = format!(
        "> fix the build\n\n⠏ Thinking... (esc to cancel, 3s)\n\n{}",
        gemini_idle
    );
    let d = det.detect(&DetectionInput {
        text: &gemini_busy,
        current_command: "gemini",
        ..DetectionInput::default()
    });
    assert_eq!(
        (d.agent, d.state),
        (AgentKind::Gemini, PaneState::Working),
        "{d:?}"
    );
}

const RULE80: &str =
    "────────────────────────────────────────────────────────────────────────────────";

fn screen(text: &str, command: &'static str, cursor: Option<(u32, u32)>) -> Detection {
    detector().detect(&DetectionInput {
        text,
        current_command: command,
        cursor_x: cursor.map(|c| c.0),
        cursor_y: cursor.map(|c| c.1),
        height: Some(text.lines().count() as u32),
        ..DetectionInput::default()
    })
}

#[test]
fn claude_bash_mode_is_never_typed_into() {
    let text =
        format!("● Done.\n\n✻ Worked for 1s\n\n{RULE80}\n!\u{a0}\n{RULE80}\n  ! for bash mode\n");
    let d = screen(&text, "claude", None);
    assert_eq!(
        (d.agent, d.state),
        (AgentKind::Claude, PaneState::Draft),
        "{d:?}"
    );
    assert_eq!(d.rule.as_deref(), Some("claude/shell-mode"));
}

#[test]
fn plan_taller_than_the_screen_is_still_a_permission() {
    // The top rule and the title scrolled away; the question and the menu are at the bottom.
    let plan: String = (1..=20)
        .map(|i| format!("  {i}. step {i} of the plan\n"))
        .collect();
    let text = format!(
        "{plan}\n Would you like to proceed?\n\n ❯ 1. Yes, and auto-accept edits\n   2. Yes, and manually approve edits\n   3. No, keep planning\n"
    );
    let d = screen(&text, "claude", None);
    assert_eq!(d.state, PaneState::Permission, "{d:?}");
    assert_eq!(d.permission.unwrap().options.len(), 3);
}

#[test]
fn right_prompt_is_not_a_draft() {
    let text = "karl@mac2 proj % make\nok\nkarl@mac2 proj %                                          main ✔ 12:04\n";
    let d = screen(text, "zsh", Some((17, 2)));
    assert_eq!(d.state, PaneState::Idle, "{d:?}");
    let text = "karl@mac2 proj % make\nok\nkarl@mac2 proj % git push                                 main ✔ 12:04\n";
    let d = screen(text, "zsh", Some((25, 2)));
    assert_eq!(
        (d.state, d.draft.as_deref()),
        (PaneState::Draft, Some("git push")),
        "{d:?}"
    );
}

#[test]
fn common_prompt_shapes_are_prompts() {
    for prompt in [
        "karl@mac2 ~/proj>",
        "root@box:/srv#",
        "(venv) karl@mac2 proj %",
        "[12:04:33] karl@mac2:~/proj$",
        "╰─❯",
        "❯",
        "$",
        "PS C:\\Users\\karl>",
        "λ",
    ] {
        let text = format!("ls\nREADME.md\n{prompt}\n");
        let x = prompt.chars().count() as u32 + 1;
        let d = screen(&text, "zsh", Some((x, 2)));
        assert_eq!(d.state, PaneState::Idle, "{prompt:?}: {d:?}");
    }
}

#[test]
fn older_codex_composer_and_status_are_read() {
    let text = "\n▌ explain the gate\n\n⠋ Working (3s • Esc to interrupt)\n\n▌ Ask Codex to do anything\n\n ⏎ send   ⌃J newline   ⌃T transcript   ⌃C quit\n";
    let d = screen(text, "codex", None);
    assert_eq!(
        (d.agent, d.state),
        (AgentKind::Codex, PaneState::Working),
        "{d:?}"
    );
}

/// Codex draws its empty composer before its session is ready; an Enter pressed then is
/// dropped. The header's `loading` (where the working directory goes) keeps KARL's hands
/// off, and the same screen with the directory in its place is idle again.
#[test]
fn codex_still_loading_is_not_idle() {
    decided(
        "cx-startup-120x40__loading",
        PaneState::Working,
        "codex/starting",
    );
    decided(
        "cx-startup-120x40__waiting",
        PaneState::Working,
        "codex/waiting-for-startup",
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/panes");
    let meta: CaptureMeta = serde_json::from_str(
        &std::fs::read_to_string(dir.join("cx-startup-120x40__loading.json")).unwrap(),
    )
    .unwrap();
    let text = std::fs::read_to_string(dir.join("cx-startup-120x40__loading.txt")).unwrap();
    // Seen from the bottom only (the header scrolled off): the bare hint without the status
    // line above it.
    let bottom: String = text.lines().skip(20).collect::<Vec<_>>().join("\n");
    assert!(!bottom.contains("loading"));
    let d = classify_capture(detector(), &bottom, None, &meta);
    assert_eq!(d.state, PaneState::Working, "{d:?}");
    // Ready: the directory in the header, the status line and the full hint in the footer.
    for cwd in ["/tmp/proj", "~/src/loading"] {
        let ready = text
            .replacen("     loading\n", &format!("     {cwd}\n"), 1)
            .replacen(
                "  ? for shortcuts",
                &format!("  gpt-5-codex default · {cwd}\n  ← for agents · ? for shortcuts"),
                1,
            );
        assert_ne!(ready, text);
        let d = classify_capture(detector(), &ready, None, &meta);
        assert_eq!(d.state, PaneState::Idle, "{cwd}: {d:?}");
    }
}

//! The stand-in coding agent in a real tmux pane, driven the way KARL's agent
//! drives a pane (`load-buffer` + `paste-buffer -p -r -d` + `send-keys Enter`):
//! prompts arrive exactly once and byte for byte, the screen goes idle → busy →
//! idle in Claude Code's layout, and menus, dialogs, errors, limits, interrupts,
//! exit and hang-up behave. tmux is required (CI installs it): these tests fail,
//! not skip, without it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use karl_tests::standin::log::LogEvent;
use karl_tests::standin::tmux::{wait_for, StandinPane, StandinSpec};
use karl_tests::tmux_server::TmuxServer;

const BIN: &str = env!("CARGO_BIN_EXE_karl-standin");
const WAIT: Duration = Duration::from_secs(15);

/// Multi-line text with every character class that has broken prompt injection
/// somewhere: shell metacharacters, quotes, backslashes, a tab, non-ASCII, and the
/// tmux key names `Enter` and `C-c` as plain words.
const TRICKY: &str = "Fix the parser; then run `cargo test` && echo ok | tee log.txt\n\
Check $(whoami) and ${HOME}, 'single' \"double\" \\backslash\\ \\n (not a newline)\n\
\tthis line starts with a tab\n\
unicode: naïve café 日本語 🚀 — done\n\
literal words: Enter C-c Escape\n\
last line;";

fn server() -> TmuxServer {
    TmuxServer::start().expect("tmux is required for these tests (CI installs it)")
}

fn rows(screen: &str) -> Vec<&str> {
    screen.lines().collect()
}

fn is_rule(line: &str, width: usize) -> bool {
    line.chars().count() == width && line.chars().all(|c| c == '─')
}

/// Row of the last input box's (single) input line: `❯ ` between two full-width rules.
fn box_row(screen: &str, width: usize) -> Option<usize> {
    let r = rows(screen);
    (1..r.len().saturating_sub(1)).rev().find(|&i| {
        is_rule(r[i - 1], width) && is_rule(r[i + 1], width) && r[i].starts_with("❯\u{a0}")
    })
}

fn is_spinner(line: &str) -> bool {
    line.contains("… (") && line.ends_with(" tokens)")
}

/// Empty input box, `? for shortcuts` footer, no spinner above the box.
fn idle(screen: &str, width: usize) -> bool {
    let r = rows(screen);
    box_row(screen, width).is_some_and(|i| {
        r[i].trim_end_matches(' ') == "❯\u{a0}"
            && r.get(i + 2)
                .is_some_and(|f| f.starts_with("  ? for shortcuts · ← for agents"))
            && !r[..i].iter().rev().take(4).any(|l| is_spinner(l))
    })
}

/// Spinner two rows above the box, `esc to interrupt` footer.
fn busy(screen: &str, width: usize) -> bool {
    let r = rows(screen);
    box_row(screen, width).is_some_and(|i| {
        i >= 3
            && is_spinner(r[i - 3])
            && r.get(i + 2)
                .is_some_and(|f| f.starts_with("  esc to interrupt · ← for agents"))
    })
}

fn wait_screen(p: &StandinPane<'_>, what: &str, cond: impl Fn(&str) -> bool) -> String {
    wait_for(
        what,
        WAIT,
        || p.screen().ok().filter(|s| cond(s)),
        || p.screen().unwrap_or_default(),
    )
    .unwrap()
}

fn wait_log<T>(p: &StandinPane<'_>, what: &str, find: impl Fn(&LogEvent) -> Option<T>) -> T {
    wait_for(
        what,
        WAIT,
        || p.log().iter().find_map(|l| find(&l.event)),
        || format!("{:#?}", p.log()),
    )
    .unwrap()
}

fn turn_ended(p: &StandinPane<'_>, n: u64) -> bool {
    p.log()
        .iter()
        .any(|l| matches!(&l.event, LogEvent::TurnEnd { n: m, .. } if *m == n))
}

#[test]
fn multiline_prompt_arrives_once_byte_for_byte() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(r#"{"default": {"work_ms": 1500, "reply": {"answer": "Handled: {prompt}"}}}"#)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 120));

    p.paste(TRICKY).unwrap();
    let screen = wait_screen(&p, "the paste in the input box", |s| {
        s.contains("\n❯\u{a0}[Pasted text #1 +5 lines]\n")
    });
    assert!(
        p.prompts().is_empty(),
        "nothing is submitted before Enter:\n{screen}"
    );

    p.keys(&["Enter"]).unwrap();
    wait_screen(&p, "the busy layout", |s| busy(s, 120));
    let snap = p.snapshot().unwrap();
    assert!(
        snap.title.ends_with(" Claude Code") && !snap.title.starts_with('✳'),
        "busy title: {:?}",
        snap.title
    );
    let screen = wait_screen(&p, "the answer and the idle box", |s| {
        idle(s, 120) && s.contains("● Handled: Fix the parser; then run `cargo test` && echo ok")
    });
    assert!(
        screen.contains("❯ Fix the parser;"),
        "prompt echo:\n{screen}"
    );
    assert_eq!(p.snapshot().unwrap().title, "✳ Claude Code");

    assert!(turn_ended(&p, 1));
    assert_eq!(p.prompts(), vec![TRICKY.to_string()]);
}

#[test]
fn busy_pane_keeps_printing_then_reports_the_time_worked() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(r#"{"turns": [{"work_ms": 3000, "reply": {"answer": "Done here."}}]}"#)
        .size(80, 24)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 80));
    p.submit("hello there").unwrap();
    let first = wait_screen(&p, "the busy layout", |s| busy(s, 80));
    let spinner_of = |s: &str| {
        rows(s)
            .into_iter()
            .find(|l| is_spinner(l))
            .map(str::to_string)
    };
    let before = spinner_of(&first);
    // The spinner row changes (glyph, seconds, tokens): the pane never falls silent
    // while the turn runs, so it is never mistaken for settled.
    wait_screen(&p, "a changed spinner row", |s| {
        busy(s, 80) && spinner_of(s) != before
    });
    let screen = wait_screen(&p, "the answer", |s| {
        idle(s, 80) && s.contains("● Done here.")
    });
    assert!(
        rows(&screen)
            .iter()
            .any(|l| l.starts_with("✻ ") && l.ends_with(" for 3s")),
        "finished row:\n{screen}"
    );
    assert_eq!(p.prompts(), vec!["hello there".to_string()]);
}

#[test]
fn drop_first_enter_still_submits_exactly_once() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .arg("--drop-first-enter")
        .script(r#"{"default": {"work_ms": 300, "reply": {"answer": "ok"}}}"#)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 120));
    let text = "first line\nsecond line";
    p.submit(text).unwrap();
    wait_log(&p, "the dropped Enter", |e| {
        (*e == LogEvent::DroppedEnter).then_some(())
    });
    assert!(p.prompts().is_empty());
    let screen = p.screen().unwrap();
    assert!(
        screen.contains("❯\u{a0}first line\n  second line"),
        "draft still in the box:\n{screen}"
    );

    p.keys(&["Enter"]).unwrap();
    wait_for(
        "the turn to end",
        WAIT,
        || turn_ended(&p, 1).then_some(()),
        || format!("{:#?}", p.log()),
    )
    .unwrap();
    wait_screen(&p, "the idle box", |s| idle(s, 120));
    assert_eq!(p.prompts(), vec![text.to_string()]);
}

const PERMISSION: &str = r#"{"turns": [{"match": "clean", "work_ms": 300, "reply": {"permission": {
    "tool": "bash", "command": "rm -rf build && mkdir -p build && echo cleaned",
    "description": "Clean the build directory", "intro": "I'll clean the build directory first.",
    "output": "cleaned", "after_ms": 200, "answer": "The build directory is clean now."}}}]}"#;

#[test]
fn permission_menu_answered_with_1_logs_approval() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(PERMISSION)
        .size(80, 40)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 80));
    p.submit("clean the build dir").unwrap();
    let screen = wait_screen(&p, "the permission menu", |s| {
        s.contains("\n Do you want to proceed?\n ❯ 1. Yes\n")
            && s.contains("\n Esc to cancel · Tab to amend · ctrl+e to explain")
    });
    for expected in [
        "● Bash(rm -rf build && mkdir -p build && echo cleaned)",
        "  ⎿ \u{a0}Waiting…",
        " Bash command",
        "   rm -rf build && mkdir -p build && echo cleaned",
        "   3. No",
    ] {
        assert!(
            rows(&screen).contains(&expected),
            "missing {expected:?}:\n{screen}"
        );
    }
    assert!(
        box_row(&screen, 80).is_none(),
        "the menu replaces the input box"
    );
    let snap = p.snapshot().unwrap();
    assert_eq!(rows(&snap.text)[snap.cursor_y as usize], " ❯ 1. Yes");
    assert_eq!(snap.title, "✳ Claude Code");

    p.keys(&["1"]).unwrap();
    let target = wait_log(&p, "the approval", |e| match e {
        LogEvent::Permission {
            permission,
            choice: 1,
            target,
            ..
        } if permission == "approved" => Some(target.clone()),
        _ => None,
    });
    assert_eq!(target, "rm -rf build && mkdir -p build && echo cleaned");
    let screen = wait_screen(&p, "the answer after the tool", |s| {
        idle(s, 80) && s.contains("● The build directory is clean now.")
    });
    assert!(screen.contains("  ⎿ \u{a0}cleaned"), "{screen}");
}

#[test]
fn permission_menu_denied_with_escape() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(PERMISSION)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 120));
    p.submit("clean it").unwrap();
    wait_screen(&p, "the permission menu", |s| s.contains(" ❯ 1. Yes"));
    p.keys(&["Escape"]).unwrap();
    wait_log(&p, "the denial", |e| match e {
        LogEvent::Permission {
            permission,
            choice: 0,
            ..
        } if permission == "denied" => Some(()),
        _ => None,
    });
    let screen = wait_screen(&p, "the idle box", |s| idle(s, 120));
    assert!(
        screen.contains("  ⎿ \u{a0}Interrupted · What should Claude do instead?"),
        "{screen}"
    );
    assert!(!screen.contains("clean now"));
}

#[test]
fn ghost_text_is_dim_and_not_a_draft() {
    let tmux = server();
    let ghost = "Try \"write a test for the parser\"";
    let p = StandinSpec::new(BIN)
        .arg("--ghost")
        .arg(ghost)
        .start(&tmux)
        .unwrap();
    let screen = wait_screen(&p, "the ghost text", |s| s.contains(ghost));
    let row = box_row(&screen, 120).expect("input box");
    let snap = p.snapshot().unwrap();
    let ansi_row = rows(&snap.ansi)[row];
    // The cursor block on the first letter, then SGR 2 (dim) before the rest; tmux
    // merges the attribute codes its own way (`\e[0;2m` …).
    let block = ansi_row
        .find("\x1b[7mT")
        .expect("cursor block on the first letter");
    let rest = &ansi_row[block + "\x1b[7mT".len()..];
    let codes = &rest[..rest.find(&ghost[1..]).expect("the rest of the ghost")];
    assert!(
        codes.split('\x1b').any(|c| c.starts_with('[')
            && c.trim_start_matches('[')
                .trim_end_matches('m')
                .split(';')
                .any(|p| p == "2")),
        "ghost is dim: {ansi_row:?}"
    );
    assert_eq!(
        (snap.cursor_x, snap.cursor_y as usize),
        (2, row),
        "cursor before the ghost"
    );

    // Enter on a box holding only ghost text submits nothing; the typed `x` after it
    // shows the Enter was processed first.
    p.keys(&["Enter", "x"]).unwrap();
    let screen = wait_screen(&p, "the typed character", |s| s.contains("❯\u{a0}x\n"));
    assert!(!screen.contains(ghost), "typing replaces the ghost");
    assert!(p.prompts().is_empty());
}

#[test]
fn trust_dialog_is_never_typed_into() {
    let tmux = server();
    let p = StandinSpec::new(BIN).arg("--dialog").start(&tmux).unwrap();
    let screen = wait_screen(&p, "the trust dialog", |s| {
        s.contains(" Enter to confirm · Esc to cancel")
    });
    assert!(screen.contains(" Quick safety check: Is this a project you created or one you trust?"));
    assert!(screen.contains(" ❯ 1. Yes, I trust this folder\n   2. No, exit\n"));
    assert!(box_row(&screen, 120).is_none());

    p.paste("fix the bug").unwrap();
    let text = wait_log(&p, "the stray paste", |e| match e {
        LogEvent::Stray { mode, text } if mode == "dialog" => Some(text.clone()),
        _ => None,
    });
    assert_eq!(text, "fix the bug");
    p.keys(&["Enter"]).unwrap();
    wait_log(&p, "the accepted dialog", |e| match e {
        LogEvent::Dialog { choice, .. } if choice == "accepted" => Some(()),
        _ => None,
    });
    wait_screen(&p, "the idle box", |s| {
        idle(s, 120) && s.contains("Claude Code v2.1.197")
    });
    assert!(p.prompts().is_empty());
}

#[test]
fn error_limit_and_done_replies() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(
            r#"{"turns": [
            {"work_ms": 200, "reply": {"error": "500 Internal server error"}},
            {"work_ms": 0, "reply": {"limit": {"resets": "9:32am (UTC)"}}},
            {"work_ms": 200, "reply": {"done": "All steps are complete. GOAL COMPLETE"}}]}"#,
        )
        .size(80, 60)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 80));
    p.submit("add a changelog entry").unwrap();
    wait_screen(&p, "the API error", |s| {
        idle(s, 80)
            && s.contains("● API Error: 500 Internal server error. This is a server-side issue")
    });
    p.submit("continue with the refactor").unwrap();
    let screen = wait_screen(&p, "the limit notice", |s| {
        idle(s, 80) && s.contains("  ⎿ \u{a0}You've hit your session limit · resets 9:32am (UTC)")
    });
    assert!(
        screen.contains("❯ continue with the refactor\n  ⎿ \u{a0}You've hit"),
        "the notice hangs under the prompt:\n{screen}"
    );
    p.submit("next").unwrap();
    wait_screen(&p, "the done reply", |s| {
        idle(s, 80) && s.contains("● All steps are complete. GOAL COMPLETE")
    });
    wait_for(
        "three turn ends",
        WAIT,
        || turn_ended(&p, 3).then_some(()),
        || format!("{:#?}", p.log()),
    )
    .unwrap();
    let outcomes: Vec<String> = p
        .log()
        .into_iter()
        .filter_map(|l| match l.event {
            LogEvent::TurnEnd { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect();
    assert_eq!(outcomes, vec!["error", "limit", "done"]);
}

#[test]
fn escape_interrupts_a_busy_turn() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(r#"{"default": {"work_ms": 60000, "reply": {"answer": "never"}}}"#)
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 120));
    p.submit("explain the design in detail").unwrap();
    wait_screen(&p, "the busy layout", |s| busy(s, 120));
    p.keys(&["Escape"]).unwrap();
    let screen = wait_screen(&p, "the interruption", |s| {
        idle(s, 120) && s.contains("  ⎿ \u{a0}Interrupted · What should Claude do instead?")
    });
    assert!(!screen.contains("never"));
    wait_log(&p, "the interrupt event", |e| {
        (*e == LogEvent::Interrupted { n: 1 }).then_some(())
    });
}

#[test]
fn exit_reply_ends_the_program_with_status_0() {
    let tmux = server();
    let p = StandinSpec::new(BIN)
        .script(r#"{"turns": [{"work_ms": 200, "reply": "exit"}]}"#)
        .size(80, 24)
        .shell_after()
        .start(&tmux)
        .unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 80));
    p.submit("push the branch").unwrap();
    let status = wait_for(
        "the exit status",
        WAIT,
        || p.exit_status(),
        || p.screen().unwrap_or_default(),
    )
    .unwrap();
    assert_eq!(status, 0);
    let screen = wait_screen(&p, "the resume hint and a shell prompt", |s| {
        s.contains("Resume this session with:\nclaude --resume ")
            && s.trim_end().ends_with("karl@standin proj $")
    });
    assert!(
        box_row(&screen, 80).is_some(),
        "the last frame stays on screen:\n{screen}"
    );
    assert!(p.log().iter().any(|l| l.event
        == LogEvent::Exit {
            code: 0,
            reason: "script".into()
        }));
}

#[test]
fn hangup_ends_the_program_cleanly() {
    let tmux = server();
    let p = StandinSpec::new(BIN).start(&tmux).unwrap();
    wait_screen(&p, "the idle input box", |s| idle(s, 120));
    let pid = tmux.pane_format(&p.pane, "#{pane_pid}").unwrap();
    tmux.run(&["kill-pane", "-t", &p.pane]).unwrap();
    wait_log(&p, "a clean exit on SIGHUP", |e| match e {
        LogEvent::Exit { code: 0, reason } if reason == "signal" || reason == "eof" => Some(()),
        _ => None,
    });
    wait_for(
        "the process to be gone",
        WAIT,
        || {
            let alive = std::process::Command::new("kill")
                .args(["-0", &pid])
                .stderr(std::process::Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            (!alive).then_some(())
        },
        || format!("pid {pid}"),
    )
    .unwrap();
}

#[test]
fn pane_metadata_reads_like_claude_code() {
    let tmux = server();
    let p = StandinSpec::new(BIN).size(80, 24).start(&tmux).unwrap();
    let screen = wait_screen(&p, "the idle input box", |s| idle(s, 80));
    let snap = p.snapshot().unwrap();
    assert_eq!(snap.current_command, "claude");
    assert_eq!(snap.title, "✳ Claude Code");
    assert_eq!((snap.width, snap.height), (80, 24));
    assert_eq!(
        (snap.cursor_x, snap.cursor_y as usize),
        (2, box_row(&screen, 80).unwrap()),
        "cursor in the input box"
    );
    assert!(rows(&screen)[0].starts_with("╭─── Claude Code v2.1.197 "));

    p.submit("add a health endpoint").unwrap();
    wait_screen(&p, "the default reply", |s| {
        idle(s, 80) && s.contains("● ok, done: add a health endpoint")
    });
    // A typed draft: the footer's left part goes away, the cursor follows the text.
    p.keys(&["-l", "fix it"]).unwrap();
    let screen = wait_screen(&p, "the typed draft", |s| s.contains("❯\u{a0}fix it\n"));
    let snap = p.snapshot().unwrap();
    let row = rows(&screen)
        .iter()
        .position(|l| *l == "❯\u{a0}fix it")
        .unwrap();
    assert_eq!((snap.cursor_x, snap.cursor_y as usize), (8, row));
    assert!(!rows(&screen)[row + 2].contains("? for shortcuts"));
}

//! The stand-in's screen pieces, drawn after Claude Code 2.1.197 as the pane
//! fixtures show it (`tests/fixtures/panes/cc-*`): the welcome banner, the prompt
//! echo, `●` answers, the spinner and its past-tense line, the input box between two
//! full-width rules with its footer, the permission panels, the folder-trust dialog
//! and the usage-limit menu.
//!
//! Pure: text and sizes in, rows out. Every row is at most `width` cells wide, so the
//! inline renderer in [`super::term`] can count rows. Colours are the 256-colour
//! indices the real CLI uses; the plain text is what matters to the classifier.

use super::script::{Permission, Tool};
use super::text::{center, hard_wrap, pad, sanitize, str_width, truncate, wrap, wrap_block};

const RULE_FG: &str = "\x1b[38;5;244m";
const GREY: &str = "\x1b[38;5;246m";
const SPIN_FG: &str = "\x1b[38;5;174m";
const ERR_FG: &str = "\x1b[38;5;220m";
const PERM_FG: &str = "\x1b[38;5;153m";
const ECHO: &str = "\x1b[38;5;239m\x1b[48;5;237m";
const ECHO_TEXT: &str = "\x1b[38;5;231m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const REVERSE: &str = "\x1b[7m";
const RESET: &str = "\x1b[0m";

/// The version the screens imitate; the banner shows it.
pub const IMITATED_VERSION: &str = "2.1.197";

/// The prompt character of the input box, followed by a no-break space as in the
/// real CLI (the transcript echo uses a plain space).
pub const BOX_PROMPT: &str = "❯\u{a0}";

/// Spinner glyphs, in animation order.
pub const SPINNER_GLYPHS: [&str; 6] = ["·", "✢", "*", "✶", "✻", "✽"];
/// Title glyphs while busy (the terminal title shows a braille spinner).
pub const TITLE_GLYPHS: [&str; 2] = ["⠂", "⠐"];
/// Title when not busy.
pub const IDLE_TITLE: &str = "✳ Claude Code";

const VERBS: [(&str, &str); 8] = [
    ("Seasoning", "Seasoned"),
    ("Whirring", "Whirred"),
    ("Brewing", "Brewed"),
    ("Churning", "Churned"),
    ("Cooking", "Cooked"),
    ("Crunching", "Crunched"),
    ("Cogitating", "Cogitated"),
    ("Sautéing", "Sautéed"),
];

/// Present and past spinner verb for turn `n`.
pub fn verbs(n: u64) -> (&'static str, &'static str) {
    VERBS[(n as usize) % VERBS.len()]
}

/// A full-width `─` rule.
pub fn rule(width: usize) -> String {
    format!("{RULE_FG}{}{RESET}", "─".repeat(width))
}

fn colored(color: &str, s: &str) -> String {
    format!("{color}{s}{RESET}")
}

/// Elapsed time as the CLI prints it: `9s`, `1m 9s`.
pub fn elapsed(ms: u64) -> String {
    let s = ms / 1000;
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m {}s", s / 60, s % 60)
    }
}

/// The welcome banner, committed once at start (followed by one blank row).
pub fn banner(width: usize, cwd: &str) -> Vec<String> {
    let title = format!(" Claude Code v{IMITATED_VERSION} ");
    let mut out = Vec::new();
    if width >= 62 {
        let right_w = (width - 52).min(52);
        let total = right_w + 52;
        let top_fill = total.saturating_sub(4 + str_width(&title) + 1);
        out.push(format!("╭───{title}{}╮", "─".repeat(top_fill)));
        let left = [
            "",
            "Welcome back!",
            "",
            "KARL stand-in agent",
            "",
            "",
            "",
            "Scripted replies · no model",
            cwd,
        ];
        let right = [
            "Tips for getting started".to_string(),
            "Type a prompt and press Enter".to_string(),
            "─".repeat(right_w),
            "What's new".to_string(),
            "Replies come from a script file".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ];
        for (l, r) in left.iter().zip(right.iter()) {
            out.push(format!("│{}│ {} │", center(l, 47), pad(r, right_w)));
        }
        out.push(format!("╰{}╯", "─".repeat(total - 2)));
    } else {
        let inner = width.saturating_sub(4).max(4);
        let top_fill = (inner + 2).saturating_sub(3 + str_width(&title));
        out.push(truncate(
            &format!("╭───{title}{}╮", "─".repeat(top_fill)),
            width,
        ));
        for l in ["Welcome back!", "KARL stand-in agent", cwd] {
            out.push(format!("│ {} │", pad(l, inner)));
        }
        out.push(format!("╰{}╯", "─".repeat(inner + 2)));
    }
    out.push(String::new());
    out
}

/// The submitted prompt as the transcript shows it: `❯ text`, continuation rows
/// indented by two.
pub fn prompt_echo(prompt: &str, width: usize) -> Vec<String> {
    let inner = width.saturating_sub(2).max(2);
    let mut rows = Vec::new();
    for line in prompt.split('\n') {
        rows.extend(wrap(&sanitize(line), inner));
    }
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            let lead = if i == 0 { "❯ " } else { "  " };
            format!("{ECHO}{lead}{ECHO_TEXT}{r}{RESET}")
        })
        .collect()
}

/// An answer: `● first row`, continuation rows indented by two.
pub fn answer(text: &str, width: usize) -> Vec<String> {
    let rows = wrap_block(text, "● ", "  ", width.saturating_sub(1));
    rows.into_iter()
        .map(|r| match r.strip_prefix("● ") {
            Some(rest) => format!("●{RESET} {rest}"),
            None => r,
        })
        .collect()
}

/// A final API error, in the CLI's yellow.
pub fn api_error(status: &str, width: usize) -> Vec<String> {
    let text = format!(
        "API Error: {}. This is a server-side issue, usually temporary — try again in a \
         moment. If it persists, check your inference gateway.",
        sanitize(status).trim_end_matches('.')
    );
    wrap_block(&text, "● ", "  ", width.saturating_sub(1))
        .into_iter()
        .map(|r| colored(ERR_FG, &r))
        .collect()
}

/// A `⎿` result row under a tool call or prompt (`  ⎿  text`), continuation rows
/// indented to the text.
pub fn result_rows(text: &str, width: usize) -> Vec<String> {
    wrap_block(text, "  ⎿ \u{a0}", "     ", width.saturating_sub(1))
}

/// The interruption notice.
pub fn interrupted(width: usize) -> Vec<String> {
    result_rows("Interrupted · What should Claude do instead?", width)
}

/// The usage-limit notice.
pub fn limit_notice(which: &str, resets: &str, width: usize) -> Vec<String> {
    result_rows(
        &format!(
            "You've hit your {} limit · resets {}",
            sanitize(which),
            sanitize(resets)
        ),
        width,
    )
}

/// `● Bash(cmd)` / `● Write(path)` / `● Update(path)`.
pub fn tool_call(perm: &Permission, width: usize) -> String {
    let (name, arg) = match perm.tool {
        Tool::Bash => ("Bash", perm.command.clone().unwrap_or_default()),
        Tool::Create => ("Write", perm.path.clone().unwrap_or_default()),
        Tool::Edit => ("Update", perm.path.clone().unwrap_or_default()),
    };
    let mut lines = arg.lines();
    let first = sanitize(lines.next().unwrap_or(""));
    let more = if lines.next().is_some() { "…" } else { "" };
    let inner = width.saturating_sub(str_width(name) + 5);
    let arg = truncate(&format!("{first}{more}"), inner);
    format!("{GREY}●{RESET} {BOLD}{name}{RESET}({arg})")
}

/// The running spinner row: `✻ Seasoning… (5s · ↓ 69 tokens)`.
pub fn spinner(glyph: &str, verb: &str, elapsed_ms: u64, tokens: u64, width: usize) -> String {
    let verb = sanitize(verb);
    let counts = format!("({} · ↓ {tokens} tokens)", elapsed(elapsed_ms));
    if str_width(&verb) + str_width(&counts) + 4 <= width {
        format!("{SPIN_FG}{glyph}{RESET} {SPIN_FG}{verb}… {GREY}{counts}{RESET}")
    } else {
        let verb = truncate(&format!("{verb}…"), width.saturating_sub(2));
        format!("{SPIN_FG}{glyph}{RESET} {SPIN_FG}{verb}{RESET}")
    }
}

/// The retry countdown row: `✻ 500 Internal server error · Retrying in 3s · attempt 2/3`.
pub fn retry(
    glyph: &str,
    status: &str,
    secs_left: u64,
    attempt: u32,
    of: u32,
    width: usize,
) -> String {
    let text = format!(
        "{} · Retrying in {secs_left}s · attempt {attempt}/{of}",
        sanitize(status)
    );
    format!(
        "{SPIN_FG}{glyph}{RESET} {}",
        truncate(&text, width.saturating_sub(2))
    )
}

/// The row a finished turn leaves: `✻ Churned for 9s`.
pub fn finished(past: &str, elapsed_ms: u64, width: usize) -> String {
    let text = truncate(
        &format!("{past} for {}", elapsed(elapsed_ms)),
        width.saturating_sub(2),
    );
    format!("{GREY}✻{RESET} {GREY}{text}{RESET}")
}

/// What the input box holds, for drawing.
pub struct BoxContent<'a> {
    /// The draft as shown (pastes may be collapsed); empty for none.
    pub draft: &'a str,
    /// Dim suggestion shown when the draft is empty.
    pub ghost: Option<&'a str>,
    /// Busy: the prompt character is grey and there is no drawn cursor.
    pub busy: bool,
    /// Most rows the draft may take.
    pub max_rows: usize,
}

/// The input box (rule, rows, rule) and the cursor's row (within these rows) and
/// column.
pub fn input_box(content: &BoxContent<'_>, width: usize) -> (Vec<String>, usize, usize) {
    let mut out = vec![rule(width)];
    let inner = width.saturating_sub(3).max(2);
    let (rows, cursor_row, cursor_col);
    if content.draft.is_empty() {
        let lead = if content.busy {
            colored(GREY, BOX_PROMPT)
        } else {
            BOX_PROMPT.to_string()
        };
        let row = match content.ghost {
            // As the real CLI draws a suggestion: the cursor block on its first
            // letter, the rest dim.
            Some(g) if !content.busy && !g.is_empty() => {
                let g = truncate(&sanitize(g), inner);
                let mut chars = g.chars();
                let first: String = chars.next().into_iter().collect();
                format!(
                    "{lead}{REVERSE}{first}{RESET}{DIM}{}{RESET}",
                    chars.as_str()
                )
            }
            _ if content.busy => lead,
            _ => format!("{lead}{REVERSE} {RESET}"),
        };
        rows = vec![row];
        cursor_row = 1;
        cursor_col = 2;
    } else {
        let mut text_rows = Vec::new();
        for line in content.draft.split('\n') {
            text_rows.extend(hard_wrap(&sanitize(line), inner));
        }
        let keep = content.max_rows.max(1);
        if text_rows.len() > keep {
            text_rows.drain(..text_rows.len() - keep);
        }
        cursor_col = 2 + text_rows.last().map(|r| str_width(r)).unwrap_or(0);
        cursor_row = text_rows.len();
        let last = text_rows.len() - 1;
        rows = text_rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let lead = if i == 0 { BOX_PROMPT } else { "  " };
                // The drawn cursor block after the text (trimmed from plain captures).
                let block = if i == last && !content.busy {
                    format!("{REVERSE} {RESET}")
                } else {
                    String::new()
                };
                format!("{lead}{r}{block}")
            })
            .collect::<Vec<_>>();
    }
    out.extend(rows);
    out.push(rule(width));
    (out, cursor_row, cursor_col)
}

/// The footer under the input box: a left hint and, when there is room, the right
/// `● high · /effort` part.
pub fn footer(left: &str, show_right: bool, width: usize) -> String {
    const RIGHT: &str = "● high · /effort";
    let left = truncate(left, width);
    let lw = str_width(&left);
    let rw = str_width(RIGHT);
    if show_right && lw + rw + 4 <= width {
        let gap = width - 2 - lw - rw;
        format!("{GREY}{left}{RESET}{}{GREY}{RIGHT}{RESET}", " ".repeat(gap))
    } else {
        colored(GREY, &left)
    }
}

/// The permission panel that replaces the input box, with the cursor row (the
/// selected option) within it. `selected` is 0-based.
pub fn permission_panel(
    perm: &Permission,
    selected: usize,
    cwd: &str,
    width: usize,
) -> (Vec<String>, usize) {
    let mut out = vec![colored(PERM_FG, &"─".repeat(width))];
    let body_w = width.saturating_sub(4).max(8);
    let (title, question, second, footer_text) = match perm.tool {
        Tool::Bash => {
            let cmd = perm.command.clone().unwrap_or_default();
            // The first two simple commands, as the real menu names them
            // (`rm -rf build and mkdir -p build`).
            let head: Vec<String> = cmd
                .split(['&', '|', ';', '\n'])
                .map(|part| part.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|part| !part.is_empty())
                .take(2)
                .collect();
            (
                "Bash command",
                "Do you want to proceed?".to_string(),
                format!(
                    "Yes, and don't ask again for {} commands in {cwd}",
                    if head.is_empty() {
                        "similar".to_string()
                    } else {
                        head.join(" and ")
                    }
                ),
                "Esc to cancel · Tab to amend · ctrl+e to explain",
            )
        }
        Tool::Create => (
            "Create file",
            format!("Do you want to create {}?", base_name(perm.path.as_deref())),
            "Yes, allow all edits during this session (shift+tab)".to_string(),
            "Esc to cancel · Tab to amend",
        ),
        Tool::Edit => (
            "Edit file",
            format!(
                "Do you want to make this edit to {}?",
                base_name(perm.path.as_deref())
            ),
            "Yes, allow all edits during this session (shift+tab)".to_string(),
            "Esc to cancel · Tab to amend",
        ),
    };
    out.push(format!(
        " {BOLD}{PERM_FG}{}{RESET}",
        truncate(title, width - 1)
    ));
    match perm.tool {
        Tool::Bash => {
            out.push(String::new());
            for line in perm.command.as_deref().unwrap_or("").split('\n') {
                for row in wrap(&sanitize(line), body_w) {
                    out.push(format!("   {row}"));
                }
            }
            if let Some(d) = &perm.description {
                for row in wrap(&sanitize(d), body_w) {
                    out.push(format!("   {}", colored(GREY, &row)));
                }
            }
            out.push(String::new());
        }
        Tool::Create | Tool::Edit => {
            out.push(format!(
                " {}",
                truncate(&sanitize(perm.path.as_deref().unwrap_or("")), width - 1)
            ));
            out.push("╌".repeat(width));
            let body = perm.content.joined();
            for (i, line) in body.split('\n').enumerate() {
                let row = if perm.tool == Tool::Create {
                    format!(" {:>2} {}", i + 1, sanitize(line))
                } else {
                    format!(" {}", sanitize(line))
                };
                out.push(truncate(&row, width));
            }
            out.push("╌".repeat(width));
        }
    }
    out.extend(
        wrap(&question, width - 2)
            .into_iter()
            .map(|r| format!(" {r}")),
    );
    let options = ["Yes".to_string(), second, "No".to_string()];
    let mut cursor = 0;
    for (i, opt) in options.iter().enumerate() {
        let label = format!("{}. {opt}", i + 1);
        let rows = wrap(&label, width.saturating_sub(7).max(8));
        for (j, row) in rows.iter().enumerate() {
            let row = if j > 0 {
                format!("      {row}")
            } else if i == selected {
                cursor = out.len();
                format!(" {PERM_FG}❯{RESET} {row}")
            } else {
                format!("   {row}")
            };
            out.push(row);
        }
    }
    out.push(String::new());
    out.push(format!(
        " {}",
        colored(GREY, &truncate(footer_text, width - 1))
    ));
    (out, cursor)
}

fn base_name(path: Option<&str>) -> String {
    let p = path.unwrap_or("");
    sanitize(p.rsplit('/').next().unwrap_or(p))
}

/// The folder-trust dialog shown before the first screen with `--dialog`.
pub fn trust_dialog(cwd: &str, selected: usize, width: usize) -> (Vec<String>, usize) {
    let body_w = width.saturating_sub(2).max(8);
    let mut out = vec![
        String::new(),
        rule(width),
        " Accessing workspace:".into(),
        String::new(),
    ];
    out.push(format!(" {}", truncate(&sanitize(cwd), body_w)));
    out.push(String::new());
    let check = "Quick safety check: Is this a project you created or one you trust? (Like your \
                 own code, a well-known open source project, or work from your team). If not, \
                 take a moment to review what's in this folder first.";
    out.extend(wrap(check, body_w).into_iter().map(|r| format!(" {r}")));
    out.push(String::new());
    out.push(" Claude Code'll be able to read, edit, and execute files here.".into());
    out.push(String::new());
    out.push(" Security guide".into());
    out.push(String::new());
    let mut cursor = 0;
    for (i, opt) in ["1. Yes, I trust this folder", "2. No, exit"]
        .iter()
        .enumerate()
    {
        if i == selected {
            cursor = out.len();
            out.push(format!(" ❯ {opt}"));
        } else {
            out.push(format!("   {opt}"));
        }
    }
    out.push(String::new());
    out.push(format!(
        " {}",
        colored(
            GREY,
            &truncate("Enter to confirm · Esc to cancel", width - 1)
        )
    ));
    (
        out.into_iter().map(|r| truncate_styled(r, width)).collect(),
        cursor,
    )
}

/// The `/rate-limit-options` menu after a first usage-limit hit.
pub fn limit_menu(selected: usize, width: usize) -> (Vec<String>, usize) {
    let mut out = vec![
        String::new(),
        rule(width),
        "  What do you want to do?".into(),
        String::new(),
    ];
    let mut cursor = 0;
    for (i, opt) in [
        "1. Stop and wait for limit to reset",
        "2. Upgrade your plan",
    ]
    .iter()
    .enumerate()
    {
        if i == selected {
            cursor = out.len();
            out.push(format!("  ❯ {opt}"));
        } else {
            out.push(format!("    {opt}"));
        }
    }
    out.push(String::new());
    out.push(format!(
        "  {}",
        colored(
            GREY,
            &truncate("Enter to confirm · Esc to cancel", width - 2)
        )
    ));
    (
        out.into_iter().map(|r| truncate_styled(r, width)).collect(),
        cursor,
    )
}

/// Cuts an unstyled row to `width`; styled rows are built within width already.
fn truncate_styled(row: String, width: usize) -> String {
    if row.contains('\x1b') {
        row
    } else {
        truncate(&row, width)
    }
}

/// Removes SGR/CSI escape sequences: the plain text of a styled row.
pub fn plain(row: &str) -> String {
    let mut out = String::with_capacity(row.len());
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::standin::script::Text;

    fn bash(cmd: &str) -> Permission {
        Permission {
            tool: Tool::Bash,
            command: Some(cmd.into()),
            path: None,
            content: Text::default(),
            description: Some("Clean the build directory".into()),
            intro: None,
            output: Text::default(),
            after_ms: 0,
            answer: None,
        }
    }

    fn widths_ok(rows: &[String], width: usize) {
        for r in rows {
            assert!(
                str_width(&plain(r)) <= width,
                "{:?} wider than {width}",
                plain(r)
            );
        }
    }

    #[test]
    fn banner_matches_the_real_geometry() {
        let b = banner(120, "~/proj");
        assert_eq!(str_width(&b[0]), 104);
        assert!(b[0].starts_with("╭─── Claude Code v2.1.197 ─"));
        assert_eq!(str_width(&b[10]), 104);
        let b = banner(80, "~/proj");
        assert!(b.iter().all(|r| str_width(r) == 80 || r.is_empty()));
        widths_ok(
            &banner(40, "~/a/very/long/path/that/does/not/fit/at/all"),
            40,
        );
    }

    #[test]
    fn input_box_idle_busy_draft_ghost() {
        let idle = BoxContent {
            draft: "",
            ghost: None,
            busy: false,
            max_rows: 5,
        };
        let (rows, r, c) = input_box(&idle, 80);
        assert_eq!(plain(&rows[0]), "─".repeat(80));
        assert_eq!(plain(&rows[1]).trim_end_matches(' '), "❯\u{a0}");
        assert_eq!((r, c), (1, 2));
        let ghost = BoxContent {
            ghost: Some("try this"),
            ..idle
        };
        let (rows, _, _) = input_box(&ghost, 80);
        assert!(
            rows[1].contains("\x1b[7mt\x1b[0m\x1b[2mry this"),
            "{:?}",
            rows[1]
        );
        assert_eq!(plain(&rows[1]), "❯\u{a0}try this");
        let draft = BoxContent {
            draft: "line one\nline two",
            ghost: None,
            busy: false,
            max_rows: 5,
        };
        let (rows, r, c) = input_box(&draft, 80);
        assert_eq!(plain(&rows[1]), "❯\u{a0}line one");
        assert_eq!(
            plain(&rows[2]),
            "  line two ",
            "ends with the drawn cursor block"
        );
        assert_eq!((r, c), (2, 10));
        widths_ok(&rows, 80);
    }

    #[test]
    fn footer_right_part_is_right_aligned() {
        let f = plain(&footer("  ? for shortcuts · ← for agents", true, 80));
        assert_eq!(str_width(&f), 78);
        assert!(f.ends_with("● high · /effort"));
        let f = plain(&footer("  esc to interrupt · ← for agents", false, 80));
        assert_eq!(f, "  esc to interrupt · ← for agents");
    }

    #[test]
    fn permission_panel_looks_like_the_fixture() {
        let (rows, cursor) = permission_panel(&bash("rm -rf build && mkdir -p build"), 0, "/p", 80);
        let text: Vec<String> = rows.iter().map(|r| plain(r)).collect();
        assert_eq!(text[1], " Bash command");
        assert!(text.contains(&"   rm -rf build && mkdir -p build".to_string()));
        assert!(text.contains(&" Do you want to proceed?".to_string()));
        assert_eq!(text[cursor], " ❯ 1. Yes");
        assert!(text.iter().any(
            |t| t.starts_with("   2. Yes, and don't ask again for rm -rf build and mkdir -p build")
        ));
        assert!(text.contains(&"   3. No".to_string()));
        assert_eq!(
            text.last().unwrap(),
            " Esc to cancel · Tab to amend · ctrl+e to explain"
        );
        widths_ok(&rows, 80);
        let (rows, cursor) = permission_panel(&bash("ls"), 2, "/p", 30);
        assert_eq!(plain(&rows[cursor]), " ❯ 3. No");
        widths_ok(&rows, 30);
    }

    #[test]
    fn echo_answer_error_rows_fit() {
        let long = "word ".repeat(60);
        for w in [30, 80, 120] {
            widths_ok(&prompt_echo(&format!("{long}\nsecond\tline"), w), w);
            widths_ok(&answer(&long, w), w);
            widths_ok(&api_error("500 Internal server error", w), w);
            widths_ok(&limit_notice("session", "9:32am (UTC)", w), w);
            widths_ok(&trust_dialog("/tmp/x", 0, w).0, w);
            widths_ok(&limit_menu(1, w).0, w);
        }
        assert_eq!(plain(&prompt_echo("hi", 80)[0]), "❯ hi");
        assert_eq!(plain(&answer("ok", 80)[0]), "● ok");
        assert!(plain(&api_error("500 Internal server error", 200)[0])
            .starts_with("● API Error: 500 Internal server error. This is a server-side issue"));
        assert_eq!(
            plain(&limit_notice("session", "9:32am (UTC)", 80)[0]),
            "  ⎿ \u{a0}You've hit your session limit · resets 9:32am (UTC)"
        );
    }

    #[test]
    fn spinner_and_finished_rows() {
        assert_eq!(
            plain(&spinner("✻", "Seasoning", 5200, 69, 120)),
            "✻ Seasoning… (5s · ↓ 69 tokens)"
        );
        assert_eq!(
            plain(&finished("Churned", 69_000, 80)),
            "✻ Churned for 1m 9s"
        );
        assert_eq!(
            plain(&retry("✻", "500 Internal server error", 3, 2, 3, 120)),
            "✻ 500 Internal server error · Retrying in 3s · attempt 2/3"
        );
    }
}

//! What both compatibility tiers (`tests/tests/compat_claude.rs`, `compat_codex.rs`) share:
//! finding a pinned CLI release in the cache `.ci/run` installs into (or saying why the
//! tier skips), the pane's command line with its private environment, waiting on the pane
//! and on a session, and KARL's logs for failure messages. What each CLI needs of its own
//! (homes, config files, stubs, scenarios) stays in its tier.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::{shell_quote, tail, wait_for, Fleet};

/// `${XDG_CACHE_HOME:-~/.cache}/karl/<dir>/<bin>`, where `.ci/run` installs a pinned
/// release (`dir` e.g. `claude-code-2.1.330`, `bin` e.g. `node_modules/.bin/claude`).
pub fn cached_bin(dir: &str, bin: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("karl").join(dir).join(bin))
}

/// `bin` when it runs (`ok`); else `None` after saying how to install it — and under
/// `CI=true`, where a missing release must fail the tier, a panic.
pub fn release_or_skip(
    bin: Option<PathBuf>,
    ok: impl Fn(&Path) -> bool,
    what: &str,
    how: &str,
    test: &str,
) -> Option<PathBuf> {
    if let Some(bin) = bin.filter(|b| ok(b)) {
        return Some(bin);
    }
    assert!(
        std::env::var("CI").map(|v| v != "true").unwrap_or(true),
        "{test}: {what} not installed under CI ({how})"
    );
    eprintln!("{test}: skipping: {what} not installed ({how})");
    None
}

/// The pane's command: in `project`, with exactly `env` (plus tmux's own variables, as a
/// developer's shell has them), running `inner` through `sh -c`.
pub fn pane_command(project: &Path, env: &[(&str, String)], inner: &str) -> String {
    let mut cmdline = format!(
        "cd {} && exec env -i TERM=\"$TERM\" TMUX=\"$TMUX\" TMUX_PANE=\"$TMUX_PANE\"",
        shell_quote(&project.display().to_string())
    );
    for (k, v) in env {
        cmdline.push_str(&format!(" {k}={}", shell_quote(v)));
    }
    cmdline.push_str(&format!(" sh -c {}", shell_quote(inner)));
    cmdline
}

/// Waits for the fleet's pane to satisfy `pred`; panics with the screen when it never does.
pub fn wait_screen(fleet: &Fleet, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) {
    let mut last = String::new();
    let ok = wait_for(timeout, || {
        last = fleet.screen();
        pred(&last).then_some(())
    });
    assert!(
        ok.is_some(),
        "the pane never showed {what}; screen:\n{last}"
    );
}

/// Waits for a session to reach one of `want`; returns the last `show`, panicking with
/// `diag()` when it never does.
pub fn wait_status(
    fleet: &Fleet,
    id: &str,
    timeout: Duration,
    want: &[&str],
    diag: impl Fn() -> String,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let ok = wait_for(timeout, || {
        last = fleet.show(id);
        want.contains(&last["session"]["status"].as_str().unwrap_or(""))
            .then_some(())
    });
    assert!(
        ok.is_some(),
        "session {id} never reached {want:?}; last: {}\n{}",
        last["session"],
        diag()
    );
    last
}

/// The session's audit (JSON) after a permission was answered through the CLI's hook:
/// it says `want` and no key was pressed (no menu choice). Returns the audit.
pub fn assert_answered_by_hook(
    fleet: &Fleet,
    id: &str,
    want: &str,
    diag: impl Fn() -> String,
) -> String {
    let audit = fleet.ctl(&["audit", "--session", id, "--json"]).stdout;
    assert!(
        audit.contains(want),
        "no {want:?} in the audit:\n{audit}\n{}",
        diag()
    );
    assert!(!audit.contains("chose"), "keys were pressed: {audit}");
    audit
}

/// KARL's log without the HTTP/2 chatter, keeping the screens the engine traced.
pub fn karl_log(log: &str) -> String {
    log.lines()
        .filter(|l| {
            !["h2::", "hyper", "tonic::", "tower::"]
                .iter()
                .any(|n| l.contains(n))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The tails of the coordinator's and the agent's logs, for a failure message.
pub fn logs(fleet: &Fleet, coord_lines: usize) -> String {
    format!(
        "coord log:\n{}\nagent log:\n{}",
        tail(&karl_log(&fleet.coord.proc.log_text()), coord_lines),
        tail(&karl_log(&fleet.agent.log_text()), 40)
    )
}

/// Appends one line to a file, as the CLIs append to their transcripts.
pub fn append_line(path: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    writeln!(f, "{line}").unwrap_or_else(|e| panic!("append to {}: {e}", path.display()));
}

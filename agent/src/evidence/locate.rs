//! Finding the agent CLI's session behind a pane: which process in the pane's tree is
//! Claude Code or Codex, and which file it is writing its conversation to.
//!
//! - **Claude Code**: the first process of the tree with a live session file
//!   (`<config>/sessions/<pid>.json`) naming that pid (and, when it names one, this pane);
//!   the file names the session id and cwd, hence the transcript path.
//! - **Codex**: the first process of the tree named `codex`; its rollout is the newest one
//!   of its cwd begun or written since the process started ([`codex::pick_rollout`]).
//!   Codex creates the rollout with the first prompt, so a fresh Codex has none yet.
//!
//! The system is asked through [`Probe`] (environment, cwd and start time of a process,
//! the rollouts under a Codex home), so the rules are tested on a fake; [`System`] is the
//! real one. What is not here: reading the files (`reader`), the follow loop (`mod.rs`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use karl_common::evidence::claude::{self, SessionFile};
use karl_common::evidence::codex::{self, Rollout, SessionMeta};
use karl_common::evidence::{Cli, CliStatus};
use tracing::debug;

use crate::procs::PsRow;

/// Processes of one pane tree examined.
const MAX_TREE: usize = 64;
/// The newest day directories of a Codex home searched for rollouts.
const DAY_DIRS: usize = 3;
/// Bytes read for a rollout's first line (`session_meta` carries Codex's instructions).
const MAX_HEAD: u64 = 1 << 20;

/// The agent CLI's session behind a pane.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub cli: Cli,
    pub cli_pid: u32,
    pub session_id: String,
    /// The CLI's version as its files state it.
    pub version: String,
    /// The conversation file: Claude's transcript, Codex's rollout.
    pub transcript: PathBuf,
    /// Claude's live session file (Codex has none).
    pub session_path: Option<PathBuf>,
    /// The status the session file stated when found.
    pub status: Option<CliStatus>,
    /// The settings files that may give the CLI hooks (Claude's user and project files).
    pub settings: Vec<PathBuf>,
    /// Those files hold KARL's `PermissionRequest` hook: read once the follower attaches
    /// ([`karl_hook_in`]), not on every lookup.
    pub karl_hook: bool,
}

impl Located {
    /// Same conversation of the same process.
    pub fn same(&self, other: &Located) -> bool {
        self.cli_pid == other.cli_pid && self.transcript == other.transcript
    }

    /// "Claude Code 2.1.330 (pid 123)".
    pub fn describe(&self) -> String {
        format!(
            "{} {} (pid {})",
            self.cli.label(),
            self.version,
            self.cli_pid
        )
    }
}

/// What locating asks of the system.
pub trait Probe {
    /// The Claude config dirs to look in for process `pid`: its own, then karl-agent's.
    fn claude_dirs(&self, pid: u32) -> Vec<PathBuf>;
    /// The Codex homes to look in for process `pid`: its own, then karl-agent's.
    fn codex_homes(&self, pid: u32) -> Vec<PathBuf>;
    /// The process's working directory.
    fn cwd(&self, pid: u32) -> Option<String>;
    /// When the process started (Unix ms, to the second).
    fn started_ms(&self, pid: u32) -> Option<u64>;
    /// The rollouts under a Codex home written to at or after `since_ms`.
    fn rollouts(&self, home: &Path, since_ms: u64) -> Vec<Rollout>;
}

/// The pids of `root` and its descendants, breadth first.
pub fn tree_pids(rows: &[PsRow], root: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if !rows.iter().any(|r| r.pid == root) {
        return out;
    }
    let mut queue = VecDeque::from([root]);
    while let Some(pid) = queue.pop_front() {
        if out.len() >= MAX_TREE {
            break;
        }
        out.push(pid);
        queue.extend(
            rows.iter()
                .filter(|r| r.ppid == pid && r.pid != pid)
                .map(|r| r.pid),
        );
    }
    out
}

/// The user and project settings files of Claude Code with config dir `config_dir`,
/// working in `cwd` (a launch's `--settings` file is the coordinator's to know).
pub fn claude_settings_files(config_dir: &Path, cwd: &Path) -> Vec<PathBuf> {
    let project = cwd.join(".claude");
    vec![
        config_dir.join("settings.json"),
        project.join("settings.json"),
        project.join("settings.local.json"),
    ]
}

/// Whether any of `files` holds KARL's `PermissionRequest` hook. Unreadable or odd files
/// count as not holding it.
pub fn karl_hook_in(files: &[PathBuf]) -> bool {
    files
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .any(|v| {
            crate::hooks::settings::installed(&v)
                .iter()
                .any(|(event, _)| event == "PermissionRequest")
        })
}

/// Finds the agent CLI's session in the pane whose first process is `pane_pid`: Claude
/// Code by its session file, else Codex by its rollout.
pub fn locate(rows: &[PsRow], pane_pid: u32, pane_id: &str, probe: &dyn Probe) -> Option<Located> {
    let pids = tree_pids(rows, pane_pid);
    if let Some(found) = pids
        .iter()
        .find_map(|&pid| locate_claude(pid, pane_id, probe))
    {
        return Some(found);
    }
    let codex_pid = pids.iter().copied().find(|pid| {
        rows.iter()
            .any(|r| r.pid == *pid && r.name.eq_ignore_ascii_case("codex"))
    })?;
    locate_codex(codex_pid, probe)
}

fn locate_claude(pid: u32, pane_id: &str, probe: &dyn Probe) -> Option<Located> {
    for dir in probe.claude_dirs(pid) {
        let path = claude::session_file_path(&dir, pid);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(session) = SessionFile::parse(&text) else {
            debug!(target: "agent.evidence", path = %path.display(), "unreadable session file");
            continue;
        };
        // A file left by a killed CLI names a pid no longer its own.
        if session.pid != pid || session.session_id.is_empty() || session.cwd.is_empty() {
            continue;
        }
        if session.tmux_pane().is_some_and(|p| p != pane_id) {
            continue;
        }
        return Some(Located {
            cli: Cli::Claude,
            cli_pid: pid,
            transcript: claude::transcript_path(&dir, &session.cwd, &session.session_id),
            session_id: session.session_id,
            version: session.version,
            session_path: Some(path),
            status: Some(session.status),
            settings: claude_settings_files(&dir, Path::new(&session.cwd)),
            karl_hook: false,
        });
    }
    None
}

fn locate_codex(pid: u32, probe: &dyn Probe) -> Option<Located> {
    let cwd = probe.cwd(pid)?;
    let started = probe.started_ms(pid)?;
    for home in probe.codex_homes(pid) {
        let rollouts = probe.rollouts(&home, started.saturating_sub(codex::START_SLACK_MS));
        if let Some(r) = codex::pick_rollout(&rollouts, &cwd, started) {
            return Some(Located {
                cli: Cli::Codex,
                cli_pid: pid,
                session_id: r.meta.id.clone(),
                version: r.meta.cli_version.clone(),
                transcript: r.path.clone(),
                session_path: None,
                status: None,
                settings: Vec::new(),
                karl_hook: false,
            });
        }
    }
    None
}

/// A CLI's rule for its home given an environment lookup (`claude::config_dir`, …).
type DirRule = fn(&dyn Fn(&str) -> Option<String>) -> Option<PathBuf>;

/// The real system: `/proc` where there is one, `ps` and `lsof` otherwise (macOS).
///
/// What cannot change is asked once: a process's start time (kept while the process is in
/// the table: [`System::prune`]) and a rollout's head (its path names the conversation).
/// One `System` lives as long as a pane's follower, which looks the session up every 2 s.
#[derive(Debug, Default)]
pub struct System {
    started: std::sync::Mutex<std::collections::HashMap<u32, u64>>,
    heads: std::sync::Mutex<std::collections::HashMap<PathBuf, SessionMeta>>,
}

/// Rollout heads remembered per follower (a day's conversations in one directory).
const KEEP_HEADS: usize = 256;

fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl System {
    /// Forgets the start times of processes no longer in `rows` (a pid may be reused).
    pub fn prune(&self, rows: &[PsRow]) {
        locked(&self.started).retain(|pid, _| rows.iter().any(|r| r.pid == *pid));
    }

    /// A rollout's head, read once.
    fn head(&self, path: &Path) -> Option<SessionMeta> {
        if let Some(meta) = locked(&self.heads).get(path) {
            return Some(meta.clone());
        }
        let meta = read_head(path)?;
        let mut heads = locked(&self.heads);
        if heads.len() >= KEEP_HEADS {
            heads.clear();
        }
        heads.insert(path.to_path_buf(), meta.clone());
        Some(meta)
    }

    /// A process's environment, where it can be read (`/proc/<pid>/environ`, Linux; on a
    /// Mac the agent runs as the developer and its own environment stands in).
    fn env_of(pid: u32) -> Option<Vec<(String, String)>> {
        let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
        Some(
            raw.split(|&b| b == 0)
                .filter_map(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                })
                .collect(),
        )
    }

    /// The process's own dir by `rule`, then karl-agent's.
    fn dirs(pid: u32, rule: DirRule) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if let Some(env) = Self::env_of(pid) {
            let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            if let Some(d) = rule(&get) {
                dirs.push(d);
            }
        }
        if let Some(d) = rule(&|k| std::env::var(k).ok()) {
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        dirs
    }
}

impl Probe for System {
    fn claude_dirs(&self, pid: u32) -> Vec<PathBuf> {
        Self::dirs(pid, claude::config_dir)
    }

    fn codex_homes(&self, pid: u32) -> Vec<PathBuf> {
        Self::dirs(pid, codex::codex_home)
    }

    fn cwd(&self, pid: u32) -> Option<String> {
        if let Ok(p) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
            return Some(p.display().to_string());
        }
        // macOS: `lsof -Fn` prints the cwd as a line starting with `n`.
        let out = std::process::Command::new("lsof")
            .args(["-a", "-d", "cwd", "-Fn", "-p", &pid.to_string()])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix('n').map(str::to_string))
    }

    fn started_ms(&self, pid: u32) -> Option<u64> {
        if let Some(ms) = locked(&self.started).get(&pid) {
            return Some(*ms);
        }
        let out = std::process::Command::new("ps")
            .args(["-o", "etime=", "-p", &pid.to_string()])
            .output()
            .ok()?;
        let elapsed = parse_etime(String::from_utf8_lossy(&out.stdout).trim())?;
        let ms = karl_common::unix_ms().saturating_sub(elapsed * 1000);
        locked(&self.started).insert(pid, ms);
        Some(ms)
    }

    fn rollouts(&self, home: &Path, since_ms: u64) -> Vec<Rollout> {
        let mut out = Vec::new();
        for day in newest_day_dirs(&codex::sessions_dir(home), DAY_DIRS) {
            let Ok(entries) = std::fs::read_dir(&day) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                if !codex::is_rollout_name(&name.to_string_lossy()) {
                    continue;
                }
                let Some(modified_ms) = e
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as u64)
                else {
                    continue;
                };
                if modified_ms < since_ms {
                    continue;
                }
                if let Some(meta) = self.head(&e.path()) {
                    out.push(Rollout {
                        path: e.path(),
                        meta,
                        modified_ms,
                    });
                }
            }
        }
        out
    }
}

/// A rollout's `session_meta`, from its first line.
fn read_head(path: &Path) -> Option<SessionMeta> {
    use std::io::{BufRead, Read};
    let f = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(f.take(MAX_HEAD))
        .read_line(&mut line)
        .ok()?;
    match SessionMeta::parse(line.trim_end()) {
        Ok(meta) => meta,
        Err(e) => {
            debug!(target: "agent.evidence", path = %path.display(), error = %e, "unreadable rollout head");
            None
        }
    }
}

/// The newest `n` `YYYY/MM/DD` directories under `sessions`, newest first.
fn newest_day_dirs(sessions: &Path, n: usize) -> Vec<PathBuf> {
    fn sorted_desc(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v.reverse();
        v
    }
    let mut out = Vec::new();
    for year in sorted_desc(sessions) {
        for month in sorted_desc(&year) {
            for day in sorted_desc(&month) {
                out.push(day);
                if out.len() >= n {
                    return out;
                }
            }
        }
    }
    out
}

/// `ps -o etime` (`[[dd-]hh:]mm:ss`) in seconds.
pub fn parse_etime(s: &str) -> Option<u64> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    let (h, m, sec) = match parts.as_slice() {
        [m, s] => (0, *m, *s),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    Some(((days * 24 + h) * 60 + m) * 60 + sec)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A system whose processes all look in the same dirs, run in one cwd, and started at
    /// one time; rollouts are read from disk as the real one does.
    struct Fake {
        claude: Vec<PathBuf>,
        codex: Vec<PathBuf>,
        cwd: Option<String>,
        started_ms: u64,
    }

    impl Fake {
        fn claude(dir: PathBuf) -> Fake {
            Fake {
                claude: vec![dir],
                codex: Vec::new(),
                cwd: None,
                started_ms: 0,
            }
        }
    }

    impl Probe for Fake {
        fn claude_dirs(&self, _pid: u32) -> Vec<PathBuf> {
            self.claude.clone()
        }
        fn codex_homes(&self, _pid: u32) -> Vec<PathBuf> {
            self.codex.clone()
        }
        fn cwd(&self, _pid: u32) -> Option<String> {
            self.cwd.clone()
        }
        fn started_ms(&self, _pid: u32) -> Option<u64> {
            Some(self.started_ms)
        }
        fn rollouts(&self, home: &Path, since_ms: u64) -> Vec<Rollout> {
            System::default().rollouts(home, since_ms)
        }
    }

    fn row(pid: u32, ppid: u32, name: &str) -> PsRow {
        PsRow {
            pid,
            ppid,
            name: name.into(),
        }
    }

    fn session_file(dir: &Path, pid: u32, tmux: Option<&str>) {
        std::fs::create_dir_all(dir.join("sessions")).unwrap();
        let mut v = serde_json::json!({"pid": pid, "sessionId": "abc-123", "cwd": "/Users/dev/src/proj",
            "version": "2.1.330", "status": "idle", "statusUpdatedAt": 1});
        if let Some(t) = tmux {
            v["tmux"] = t.into();
        }
        std::fs::write(dir.join(format!("sessions/{pid}.json")), v.to_string()).unwrap();
    }

    #[test]
    fn finds_the_cli_in_the_pane_tree_by_its_session_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let rows = [
            row(10, 1, "sh"),
            row(11, 10, "claude"),
            row(12, 11, "bash"),
            row(20, 1, "claude"),
        ];
        session_file(&dir, 11, Some("work:@0.%3"));
        session_file(&dir, 20, None);
        let dirs = Fake::claude(dir.clone());
        let at = locate(&rows, 10, "%3", &dirs).unwrap();
        assert_eq!(at.cli, Cli::Claude);
        assert_eq!(at.cli_pid, 11);
        assert_eq!(
            at.transcript,
            dir.join("projects/-Users-dev-src-proj/abc-123.jsonl")
        );
        // The file names another pane: not this pane's CLI.
        assert_eq!(locate(&rows, 10, "%4", &dirs), None);
        // A pane whose tree has no CLI with a session file.
        assert_eq!(locate(&rows, 12, "%3", &dirs), None);
        // A file left behind by a killed CLI whose pid now belongs to something else.
        std::fs::write(
            dir.join("sessions/12.json"),
            r#"{"pid":99,"sessionId":"old","cwd":"/x"}"#,
        )
        .unwrap();
        assert_eq!(locate(&rows, 12, "%3", &dirs), None);
    }

    fn write_rollout(home: &Path, day: &str, id: &str, cwd: &str) -> PathBuf {
        let dir = home.join("sessions").join(day);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("rollout-2026-11-24T03-26-37-{id}.jsonl"));
        let head = serde_json::json!({"timestamp": "2026-11-24T03:26:42.382Z", "type": "session_meta",
            "payload": {"id": id, "timestamp": "2026-11-24T03:26:37.874Z", "cwd": cwd, "cli_version": "0.169.0"}});
        std::fs::write(&path, format!("{head}\n")).unwrap();
        path
    }

    #[test]
    fn finds_codex_by_the_rollout_of_its_cwd_written_since_it_started() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        let rows = [
            row(10, 1, "zsh"),
            row(11, 10, "node"),
            row(12, 11, "codex"),
            row(13, 12, "codex"),
        ];
        let mut probe = Fake {
            claude: vec![tmp.path().join("no-claude")],
            codex: vec![home.clone()],
            cwd: Some("/Users/dev/src/proj".into()),
            started_ms: 0,
        };
        // No prompt yet: no rollout.
        assert_eq!(locate(&rows, 10, "%1", &probe), None);
        write_rollout(&home, "2026/11/23", "other-dir", "/Users/dev/src/other");
        let mine = write_rollout(&home, "2026/11/24", "mine", "/Users/dev/src/proj");
        let at = locate(&rows, 10, "%1", &probe).unwrap();
        assert_eq!(at.cli, Cli::Codex);
        assert_eq!(at.cli_pid, 12, "the TUI, not its app-server child");
        assert_eq!(at.transcript, mine);
        assert_eq!(at.session_id, "mine");
        assert_eq!(at.version, "0.169.0");
        assert_eq!(at.describe(), "Codex 0.169.0 (pid 12)");
        // A process started after every rollout was last written has none of them.
        probe.started_ms = karl_common::unix_ms() + 60_000;
        assert_eq!(locate(&rows, 10, "%1", &probe), None);
        // A pane with no codex process.
        probe.started_ms = 0;
        assert_eq!(locate(&[row(20, 1, "bash")], 20, "%2", &probe), None);
    }

    #[test]
    fn day_dirs_are_searched_newest_first_and_etime_parses() {
        let tmp = tempfile::tempdir().unwrap();
        for d in ["2025/12/31", "2026/01/02", "2026/01/10", "2026/11/24"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        let days: Vec<String> = newest_day_dirs(tmp.path(), 3)
            .iter()
            .map(|p| p.strip_prefix(tmp.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(days, ["2026/11/24", "2026/01/10", "2026/01/02"]);
        assert_eq!(parse_etime("05:07"), Some(307));
        assert_eq!(parse_etime("01:00:01"), Some(3601));
        assert_eq!(parse_etime("2-00:00:00"), Some(172_800));
        assert_eq!(parse_etime("x"), None);
        assert_eq!(parse_etime(""), None);
    }

    /// KARL's hook in the user's or the project's Claude settings is seen; another hook, an
    /// odd file or no file is not.
    #[test]
    fn karls_hook_is_found_in_user_or_project_settings() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("claude");
        let proj = tmp.path().join("proj");
        std::fs::create_dir_all(config.clone()).unwrap();
        std::fs::create_dir_all(proj.join(".claude")).unwrap();
        let files = claude_settings_files(&config, &proj);
        assert!(!karl_hook_in(&files));
        let mut ours = serde_json::json!({});
        let cmd = format!("karl-agent hook claude {}", crate::hooks::settings::MARKER);
        crate::hooks::settings::install(&mut ours, &cmd, Some("*")).unwrap();
        let theirs = r#"{"hooks":{"PermissionRequest":[{"hooks":[{"type":"command","command":"my-hook"}]}]}}"#;
        std::fs::write(config.join("settings.json"), theirs).unwrap();
        std::fs::write(proj.join(".claude/settings.json"), "{not json").unwrap();
        assert!(!karl_hook_in(&files));
        std::fs::write(proj.join(".claude/settings.local.json"), ours.to_string()).unwrap();
        assert!(karl_hook_in(&files));
        std::fs::remove_file(proj.join(".claude/settings.local.json")).unwrap();
        std::fs::write(config.join("settings.json"), ours.to_string()).unwrap();
        assert!(karl_hook_in(&files));
    }
}

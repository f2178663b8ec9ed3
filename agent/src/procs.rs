//! The processes running in a pane: the pane's first process (`pane_pid`) and its
//! descendants, named as `ps` names them. Evidence the screen cannot give: a CLI killed
//! mid-answer leaves its spinner on screen, but its process is gone.
//!
//! `ps -A -o pid= -o ppid= -o comm=` reads the same on Linux (procps) and macOS (BSD ps,
//! where `comm` is the executable's path). Parsing and the tree walk are pure
//! ([`parse_ps`], [`tree_names`]); [`ProcessTable`] runs `ps` with a timeout and reuses one
//! table for a short while, so a burst of snapshots over many panes costs one `ps`.
//! Failure is not an error: an empty list means "not known", and the coordinator then
//! relies on the screen alone.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::Mutex;

/// How long one process table is reused.
const FRESH_FOR: Duration = Duration::from_millis(300);
/// Limit on one `ps` call.
const PS_TIMEOUT: Duration = Duration::from_secs(3);
/// Bound on names reported for one pane (a pane running a build has hundreds).
const MAX_NAMES: usize = 64;

/// One row of `ps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsRow {
    pub pid: u32,
    pub ppid: u32,
    /// The executable's name (the last path component of `comm`).
    pub name: String,
}

/// Parses `ps -A -o pid= -o ppid= -o comm=` output; unreadable lines are skipped.
pub fn parse_ps(out: &str) -> Vec<PsRow> {
    out.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let pid = it.next()?.parse().ok()?;
            let ppid = it.next()?.parse().ok()?;
            // comm is the rest of the line: a macOS path may hold spaces.
            let comm = line
                .trim_start()
                .split_once(char::is_whitespace)?
                .1
                .trim_start()
                .split_once(char::is_whitespace)?
                .1
                .trim();
            let name = comm.rsplit('/').next().unwrap_or(comm).trim();
            (!name.is_empty()).then(|| PsRow {
                pid,
                ppid,
                name: name.to_string(),
            })
        })
        .collect()
}

/// Names of `root` and its descendants, breadth first, at most [`MAX_NAMES`]; empty when
/// `root` is not in the table.
pub fn tree_names(rows: &[PsRow], root: u32) -> Vec<String> {
    let Some(root_row) = rows.iter().find(|r| r.pid == root) else {
        return Vec::new();
    };
    let mut children: HashMap<u32, Vec<&PsRow>> = HashMap::new();
    for r in rows {
        if r.pid != r.ppid {
            children.entry(r.ppid).or_default().push(r);
        }
    }
    let mut names = Vec::new();
    let mut queue = VecDeque::from([root_row]);
    while let Some(r) = queue.pop_front() {
        if names.len() >= MAX_NAMES {
            break;
        }
        names.push(r.name.clone());
        if let Some(kids) = children.get(&r.pid) {
            queue.extend(kids.iter().copied());
        }
    }
    names
}

/// Reads the process table through `ps`, reusing a fresh one.
#[derive(Debug, Default)]
pub struct ProcessTable {
    cached: Mutex<Option<(Instant, Arc<Vec<PsRow>>)>>,
}

impl ProcessTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// The names of the processes in the pane whose first process is `pane_pid`; empty
    /// when `ps` cannot be run or the pid is unknown.
    pub async fn pane_processes(&self, pane_pid: u32) -> Vec<String> {
        if pane_pid == 0 {
            return Vec::new();
        }
        match self.table().await {
            Some(rows) => tree_names(&rows, pane_pid),
            None => Vec::new(),
        }
    }

    /// The whole process table (shared with other callers for a short while); `None`
    /// when `ps` cannot be run.
    pub async fn rows(&self) -> Option<Arc<Vec<PsRow>>> {
        self.table().await
    }

    async fn table(&self) -> Option<Arc<Vec<PsRow>>> {
        let mut cached = self.cached.lock().await;
        if let Some((at, rows)) = cached.as_ref() {
            if at.elapsed() < FRESH_FOR {
                return Some(rows.clone());
            }
        }
        let run = Command::new("ps")
            .args(["-A", "-o", "pid=", "-o", "ppid=", "-o", "comm="])
            .kill_on_drop(true)
            .output();
        let out = match tokio::time::timeout(PS_TIMEOUT, run).await {
            Ok(Ok(out)) if out.status.success() => out,
            Ok(Ok(out)) => {
                tracing::debug!(target: "agent.procs", status = %out.status, "ps failed");
                return None;
            }
            Ok(Err(e)) => {
                tracing::debug!(target: "agent.procs", error = %e, "cannot run ps");
                return None;
            }
            Err(_) => {
                tracing::debug!(target: "agent.procs", "ps timed out");
                return None;
            }
        };
        let rows = Arc::new(parse_ps(&String::from_utf8_lossy(&out.stdout)));
        *cached = Some((Instant::now(), rows.clone()));
        Some(rows)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Linux procps: `comm` is the short name.
    const LINUX: &str = "    1     0 init
  500     1 tmux: server
  501   500 sh
  502   501 claude
  503   502 bash
  504   503 sleep
  600   500 bash
  601     1 sshd
";

    /// macOS: `comm` is the executable's path, which may hold spaces.
    const MACOS: &str = "  1     0 /sbin/launchd
 812     1 /opt/homebrew/bin/tmux
 813   812 -zsh
 900   813 /Users/dev/.local/share/claude/versions/2.1.330
 950     1 /Applications/Visual Studio Code.app/Contents/MacOS/Electron
";

    #[test]
    fn parses_linux_and_macos_ps() {
        let rows = parse_ps(LINUX);
        assert_eq!(rows.len(), 8);
        assert_eq!(
            rows[1],
            PsRow {
                pid: 500,
                ppid: 1,
                name: "tmux: server".into()
            }
        );
        let rows = parse_ps(MACOS);
        assert_eq!(rows[2].name, "-zsh");
        assert_eq!(rows[3].name, "2.1.330");
        assert_eq!(rows[4].name, "Electron");
        assert!(parse_ps("garbage\n\n  12\n x y z\n").is_empty());
    }

    #[test]
    fn walks_the_pane_tree_breadth_first() {
        let rows = parse_ps(LINUX);
        assert_eq!(tree_names(&rows, 501), ["sh", "claude", "bash", "sleep"]);
        assert_eq!(tree_names(&rows, 600), ["bash"]);
        assert!(tree_names(&rows, 999).is_empty());
        // A self-parented row cannot loop the walk.
        let rows = parse_ps("7 7 odd\n");
        assert_eq!(tree_names(&rows, 7), ["odd"]);
    }

    #[test]
    fn a_big_tree_is_bounded() {
        let mut ps = String::from("1 0 make\n");
        for pid in 2..500 {
            ps.push_str(&format!("{pid} 1 cc\n"));
        }
        assert_eq!(tree_names(&parse_ps(&ps), 1).len(), MAX_NAMES);
    }

    #[tokio::test]
    async fn reads_this_process_tree() {
        let table = ProcessTable::new();
        let names = table.pane_processes(std::process::id()).await;
        assert!(!names.is_empty(), "ps could not see this test process");
        assert!(table.pane_processes(0).await.is_empty());
    }
}

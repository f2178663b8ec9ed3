//! Following what the agent CLI in a watched pane writes about itself.
//!
//! For each watched pane one task ([`follow_pane`]) finds the Claude Code process in the
//! pane's process tree and its live session file (`<config>/sessions/<pid>.json`, which
//! names the session id and cwd, and on 2.1.330 the pane), hence its transcript
//! (`<config>/projects/<cwd as dir>/<session>.jsonl`); it reads the transcript as it grows
//! and sends the facts (parsed by `karl_common::evidence`) on the link's ordered outbox.
//!
//! - Woken by file-system notifications on the transcript's directory and the sessions
//!   directory (FSEvents on macOS, inotify on Linux), with a one-second poll as the
//!   safety net; the session is looked up again every [`RELOCATE`], so a restarted CLI,
//!   `/clear` or `/resume` (a new session id) moves the follower to the new file.
//! - Attaching reads what the file already holds into a `TurnState` and sends only its
//!   replay (`EVIDENCE_LINK_ATTACHED`): nothing is sent twice after karl-agent restarts.
//! - Partial last lines wait for their newline; a file that shrinks or is replaced is
//!   read again from its start; an unreadable file detaches with the reason, and the
//!   coordinator falls back to the screen.
//!
//! The config dir is the process's own `CLAUDE_CONFIG_DIR` or `$HOME/.claude` when its
//! environment can be read (`/proc/<pid>/environ`, Linux), and karl-agent's own otherwise
//! (on a Mac the agent runs as the developer, so they agree). What is not here: parsing
//! (common), deciding (the coordinator).

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use karl_common::evidence::claude::{self, SessionFile};
use karl_common::evidence::{wire, CliStatus, Fact, LineBuffer, Source, Stamped, TurnState};
use karl_common::{pb, unix_ms};
use notify::Watcher;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::procs::{ProcessTable, PsRow};

/// How often the session behind a pane is looked up again.
pub const RELOCATE: Duration = Duration::from_secs(2);
/// How often while none is found (a CLI just started writes its session file late).
pub const SEARCH: Duration = Duration::from_millis(500);
/// The safety poll when no notification comes.
pub const POLL: Duration = Duration::from_secs(1);
/// Bytes read from a transcript in one go.
const READ_CHUNK: usize = 1 << 20;
/// Processes of one pane tree examined.
const MAX_TREE: usize = 64;

/// The Claude Code session behind a pane.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub cli_pid: u32,
    pub session_path: PathBuf,
    pub session: SessionFile,
    pub transcript: PathBuf,
}

impl Located {
    /// Same conversation of the same process.
    fn same(&self, other: &Located) -> bool {
        self.cli_pid == other.cli_pid && self.transcript == other.transcript
    }
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

/// Finds the Claude Code session in the pane whose first process is `pane_pid`: the
/// first process of its tree with a live session file in one of `dirs(pid)` that names
/// that pid (a file left by a killed CLI names a pid no longer in the tree) and, when it
/// names a pane, this pane.
pub fn locate(
    rows: &[PsRow],
    pane_pid: u32,
    pane_id: &str,
    dirs: &dyn Fn(u32) -> Vec<PathBuf>,
) -> Option<Located> {
    for pid in tree_pids(rows, pane_pid) {
        for dir in dirs(pid) {
            let path = claude::session_file_path(&dir, pid);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(session) = SessionFile::parse(&text) else {
                debug!(target: "agent.evidence", path = %path.display(), "unreadable session file");
                continue;
            };
            if session.pid != pid || session.session_id.is_empty() || session.cwd.is_empty() {
                continue;
            }
            if session.tmux_pane().is_some_and(|p| p != pane_id) {
                continue;
            }
            let transcript = claude::transcript_path(&dir, &session.cwd, &session.session_id);
            return Some(Located {
                cli_pid: pid,
                session_path: path,
                session,
                transcript,
            });
        }
    }
    None
}

/// The config dirs to look in for process `pid`: its own (from its environment, where
/// readable), then karl-agent's.
pub fn config_dirs(pid: u32) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(raw) = std::fs::read(format!("/proc/{pid}/environ")) {
        let env: Vec<(String, String)> = raw
            .split(|&b| b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                kv.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        if let Some(d) = claude::config_dir(&get) {
            dirs.push(d);
        }
    }
    if let Some(d) = claude::config_dir(&|k| std::env::var(k).ok()) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// Bytes at the start of a transcript remembered to notice a file rewritten in place.
const PREFIX: usize = 512;
/// Entry ids remembered per transcript (a long session has tens of thousands of lines).
const KEEP_IDS: usize = 50_000;

/// A transcript being read: where, how far, and what it adds up to.
#[derive(Debug)]
pub struct Reader {
    path: PathBuf,
    offset: u64,
    /// Identity of the file read (inode), to notice a replaced file.
    file_id: Option<u64>,
    /// The file's first bytes as last read, to notice it rewritten in place.
    prefix: Vec<u8>,
    /// Ids of the entries read, oldest first: a rewritten file is read again from its
    /// start and only entries not seen before count.
    seen: std::collections::HashSet<String>,
    seen_order: VecDeque<String>,
    lines: LineBuffer,
    pub state: TurnState,
    /// Lines that were not JSON (logged, skipped).
    pub bad_lines: u64,
    /// Times the file was found rewritten, shrunk or replaced.
    pub rewrites: u64,
}

impl Reader {
    pub fn new(path: PathBuf) -> Reader {
        Reader {
            path,
            offset: 0,
            file_id: None,
            prefix: Vec::new(),
            seen: Default::default(),
            seen_order: VecDeque::new(),
            lines: LineBuffer::default(),
            state: TurnState::default(),
            bad_lines: 0,
            rewrites: 0,
        }
    }

    /// Whether the file is no longer the one read so far: shrunk, replaced (another inode)
    /// or rewritten in place (its first bytes differ).
    fn rewritten(
        &self,
        file: &mut std::fs::File,
        meta: &std::fs::Metadata,
    ) -> std::io::Result<bool> {
        if self.offset == 0 {
            return Ok(false);
        }
        if meta.len() < self.offset || (self.file_id.is_some() && file_id(meta) != self.file_id) {
            return Ok(true);
        }
        let mut head = vec![0u8; self.prefix.len()];
        file.seek(SeekFrom::Start(0))?;
        file.read_exact(&mut head)?;
        Ok(head != self.prefix)
    }

    /// Reads what was written since the last call; returns its facts in the order the
    /// CLI wrote them (already applied to [`Reader::state`]). A missing file is no facts
    /// (not written yet); a shrunk, replaced or rewritten file is read again from its
    /// start, and entries read before are skipped.
    pub fn read_new(&mut self) -> std::io::Result<Vec<Stamped>> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        if meta.len() == self.offset && file_id(&meta) == self.file_id {
            return Ok(Vec::new());
        }
        if self.rewritten(&mut file, &meta)? {
            self.rewrites += 1;
            info!(target: "agent.evidence", path = %self.path.display(), "transcript rewritten, shrunk or replaced; reading it again, skipping entries already read");
            self.offset = 0;
            self.prefix.clear();
            self.lines.reset();
        }
        self.file_id = file_id(&meta);
        file.seek(SeekFrom::Start(self.offset))?;
        let mut facts = Vec::new();
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            if self.offset < PREFIX as u64 {
                let take = (PREFIX - self.offset as usize).min(n);
                self.prefix.extend_from_slice(&buf[..take]);
            }
            self.offset += n as u64;
            for line in self.lines.push(&buf[..n]) {
                match claude::parse_entry(&line) {
                    Ok(entry) => {
                        if let Some(id) = entry.id {
                            if !self.seen.insert(id.clone()) {
                                continue;
                            }
                            self.seen_order.push_back(id);
                            if self.seen_order.len() > KEEP_IDS {
                                if let Some(old) = self.seen_order.pop_front() {
                                    self.seen.remove(&old);
                                }
                            }
                        }
                        facts.extend(entry.facts);
                    }
                    Err(e) => {
                        self.bad_lines += 1;
                        debug!(target: "agent.evidence", path = %self.path.display(), error = %e, "skipped a transcript line");
                    }
                }
            }
        }
        // Lines are not always in the order they happened (2.1.197 writes some in
        // batches): order by the time each states (stable: same-time facts keep theirs).
        if facts.iter().all(|f| f.written_ms != 0)
            && facts.windows(2).any(|w| w[0].written_ms > w[1].written_ms)
        {
            facts.sort_by_key(|f| f.written_ms);
        }
        for f in &facts {
            self.state.apply(f);
        }
        Ok(facts)
    }
}

#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    Some(meta.ino())
}

#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata) -> Option<u64> {
    None
}

fn evidence_event(
    pane_id: &str,
    source: Source,
    at: Option<&Located>,
    link: pb::EvidenceLink,
    detail: &str,
    facts: &[Stamped],
) -> pb::AgentEvent {
    pb::AgentEvent {
        kind: Some(pb::agent_event::Kind::Evidence(pb::PaneEvidence {
            pane_id: pane_id.to_string(),
            source: wire::source_to_wire(source) as i32,
            cli_session: at.map(|l| l.session.session_id.clone()).unwrap_or_default(),
            path: at
                .map(|l| match source {
                    Source::SessionFile => l.session_path.display().to_string(),
                    _ => l.transcript.display().to_string(),
                })
                .unwrap_or_default(),
            facts: facts.iter().map(wire::to_wire).collect(),
            observed_unix_ms: unix_ms(),
            link: link as i32,
            detail: detail.to_string(),
        })),
    }
}

/// What one pane's follower holds.
struct Following {
    at: Located,
    reader: Reader,
    status: CliStatus,
}

/// Follows the agent CLI's files for one watched pane until the task is aborted.
pub async fn follow_pane(
    pane_id: String,
    pane_pid: u32,
    procs: Arc<ProcessTable>,
    out: mpsc::UnboundedSender<pb::AgentEvent>,
) {
    let (wake_tx, mut wake_rx) = mpsc::channel::<()>(1);
    // Held here so `wake_rx` never closes: without a watcher the loop must still sleep.
    let _keep_open = wake_tx.clone();
    // The files this follower reads: every Claude session of the user writes into the same
    // sessions directory, so events about other files must not wake it.
    let targets: Arc<std::sync::Mutex<Vec<PathBuf>>> = Arc::default();
    let wanted = targets.clone();
    let mut watcher = match notify::recommended_watcher(
        move |res: notify::Result<notify::Event>| {
            let Ok(e) = res else { return };
            // Our own reads show up as access events: waking on them would spin.
            if matches!(e.kind, notify::EventKind::Access(_)) {
                return;
            }
            let wanted = wanted.lock().unwrap_or_else(|p| p.into_inner());
            // By file name: FSEvents reports canonical paths (/private/var/… for /var/…),
            // and both names are unique (a session id, a pid).
            if e.paths
                .iter()
                .any(|p| wanted.iter().any(|w| w.file_name() == p.file_name()))
            {
                let _ = wake_tx.try_send(());
            }
        },
    ) {
        Ok(w) => Some(w),
        Err(e) => {
            warn!(target: "agent.evidence", error = %e, "no file notifications; polling every second");
            None
        }
    };
    let mut watched_dirs: Vec<PathBuf> = Vec::new();
    let mut current: Option<Following> = None;
    let mut relocate_at = Instant::now();
    let send = |ev| {
        let _ = out.send(ev);
    };
    loop {
        if Instant::now() >= relocate_at {
            relocate_at = Instant::now() + if current.is_some() { RELOCATE } else { SEARCH };
            // `ps` failing says nothing about the CLI: keep what is followed.
            let found = match procs.rows().await {
                Some(rows) => locate(&rows, pane_pid, &pane_id, &config_dirs),
                None => current.as_ref().map(|c| c.at.clone()),
            };
            let changed = match (&current, &found) {
                (Some(c), Some(f)) => !c.at.same(f),
                (None, None) => false,
                _ => true,
            };
            if changed {
                if let Some(old) = current.take() {
                    let why = if found.is_some() {
                        "the CLI moved to another conversation"
                    } else {
                        "the CLI's session is gone"
                    };
                    info!(target: "agent.evidence", pane = %pane_id, session = %old.at.session.session_id, why, "detached");
                    send(evidence_event(
                        &pane_id,
                        Source::Transcript,
                        Some(&old.at),
                        pb::EvidenceLink::Detached,
                        why,
                        &[],
                    ));
                }
                if let Some(at) = found {
                    let (mut reader, read) =
                        read_off_thread(Reader::new(at.transcript.clone())).await;
                    match read {
                        Ok(_) => {
                            let status = at.session.status;
                            reader.state.status = Some(status);
                            let replay: Vec<Stamped> = reader
                                .state
                                .replay()
                                .into_iter()
                                .map(|fact| Stamped {
                                    fact,
                                    written_ms: 0,
                                })
                                .collect();
                            info!(target: "agent.evidence", pane = %pane_id, pid = at.cli_pid, session = %at.session.session_id, transcript = %at.transcript.display(), in_flight = reader.state.in_flight, "following the CLI's transcript");
                            send(evidence_event(
                                &pane_id,
                                Source::Transcript,
                                Some(&at),
                                pb::EvidenceLink::Attached,
                                &format!("Claude Code {} (pid {})", at.session.version, at.cli_pid),
                                &replay,
                            ));
                            *targets.lock().unwrap_or_else(|p| p.into_inner()) =
                                vec![at.transcript.clone(), at.session_path.clone()];
                            if let Some(w) = watcher.as_mut() {
                                for d in watched_dirs.drain(..) {
                                    let _ = w.unwatch(&d);
                                }
                                for d in [at.transcript.parent(), at.session_path.parent()]
                                    .into_iter()
                                    .flatten()
                                {
                                    if w.watch(d, notify::RecursiveMode::NonRecursive).is_ok() {
                                        watched_dirs.push(d.to_path_buf());
                                    }
                                }
                            }
                            current = Some(Following { at, reader, status });
                        }
                        Err(e) => {
                            warn!(target: "agent.evidence", pane = %pane_id, path = %at.transcript.display(), error = %e, "cannot read the CLI's transcript; the screen decides");
                        }
                    }
                }
            }
        }
        // The transcript's directory appears with the first prompt: watch it from then on
        // (until then the sessions directory's notifications and the poll wake us).
        if let (Some(c), Some(w)) = (&current, watcher.as_mut()) {
            if let Some(d) = c.at.transcript.parent() {
                if !watched_dirs.iter().any(|w| w == d)
                    && d.exists()
                    && w.watch(d, notify::RecursiveMode::NonRecursive).is_ok()
                {
                    watched_dirs.push(d.to_path_buf());
                }
            }
        }
        if let Some(c) = current.as_mut() {
            let taken = std::mem::replace(&mut c.reader, Reader::new(c.at.transcript.clone()));
            let (reader, read) = read_off_thread(taken).await;
            c.reader = reader;
            match read {
                Ok(facts) if !facts.is_empty() => {
                    debug!(target: "agent.evidence", pane = %pane_id, n = facts.len(), "transcript facts");
                    send(evidence_event(
                        &pane_id,
                        Source::Transcript,
                        Some(&c.at),
                        pb::EvidenceLink::Facts,
                        "",
                        &facts,
                    ));
                }
                Ok(_) => {}
                Err(e) => {
                    warn!(target: "agent.evidence", pane = %pane_id, error = %e, "transcript unreadable; the screen decides");
                    send(evidence_event(
                        &pane_id,
                        Source::Transcript,
                        Some(&c.at),
                        pb::EvidenceLink::Detached,
                        &format!("transcript unreadable: {e}"),
                        &[],
                    ));
                    current = None;
                    continue;
                }
            }
            if let Some(status) = read_status(&c.at.session_path) {
                if status != c.status {
                    c.status = status;
                    c.reader.state.status = Some(status);
                    send(evidence_event(
                        &pane_id,
                        Source::SessionFile,
                        Some(&c.at),
                        pb::EvidenceLink::Facts,
                        "",
                        &[Stamped {
                            fact: Fact::Status { status },
                            written_ms: unix_ms(),
                        }],
                    ));
                }
            }
        }
        let wait = POLL.min(relocate_at.saturating_duration_since(Instant::now()));
        tokio::select! {
            _ = wake_rx.recv() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// [`Reader::read_new`] on the blocking pool: a first read can be a long file, and the
/// agent's runtime also carries tmux control output and injections.
async fn read_off_thread(mut r: Reader) -> (Reader, std::io::Result<Vec<Stamped>>) {
    let path = r.path.clone();
    match tokio::task::spawn_blocking(move || {
        let res = r.read_new();
        (r, res)
    })
    .await
    {
        Ok(done) => done,
        Err(e) => (
            Reader::new(path),
            Err(std::io::Error::other(format!(
                "the transcript reader stopped: {e}"
            ))),
        ),
    }
}

fn read_status(path: &Path) -> Option<CliStatus> {
    let text = std::fs::read_to_string(path).ok()?;
    SessionFile::parse(&text).ok().map(|s| s.status)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;

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
        let dirs = |_pid: u32| vec![dir.clone()];
        let at = locate(&rows, 10, "%3", &dirs).unwrap();
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

    /// 2.1.197 sometimes rewrites its transcript in place with the lines in another
    /// order (seen in the compatibility tier): read again, nothing counts twice, and the
    /// facts come in the order they happened.
    #[test]
    fn a_transcript_rewritten_in_place_is_read_again_without_repeats() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let user = r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"Fix the build."},"timestamp":"2026-11-24T01:03:40.367Z"}"#;
        let mode = r#"{"type":"mode","mode":"normal"}"#;
        let answer = r#"{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"text","text":"Fixed."}]},"timestamp":"2026-11-24T01:03:40.693Z"}"#;
        let end = r#"{"type":"system","subtype":"turn_duration","uuid":"s1","timestamp":"2026-11-24T01:03:40.695Z"}"#;
        std::fs::write(&path, format!("{mode}\n{user}\n")).unwrap();
        let mut r = Reader::new(path.clone());
        assert_eq!(r.read_new().unwrap().len(), 1);
        assert!(r.state.in_flight);
        // Rewritten: same inode, longer, another order.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        write!(f, "{answer}\n{end}\n{mode}\n{user}\n").unwrap();
        drop(f);
        let facts = r.read_new().unwrap();
        assert_eq!(r.rewrites, 1);
        assert_eq!(facts.len(), 2, "only the new entries: {facts:?}");
        assert!(!r.state.in_flight, "the turn end was found");
        // A first read of a file in that order still ends with the turn closed.
        let mut fresh = Reader::new(path);
        fresh.read_new().unwrap();
        assert!(!fresh.state.in_flight);
        assert_eq!(fresh.state.response, ["Fixed."]);
    }

    #[test]
    fn the_reader_follows_growth_partial_lines_and_truncation() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        let mut r = Reader::new(path.clone());
        assert!(
            r.read_new().unwrap().is_empty(),
            "a missing file is no facts"
        );
        let prompt = r#"{"type":"user","message":{"role":"user","content":"Fix the build."},"timestamp":"2026-11-24T00:43:16.972Z"}"#;
        let end =
            r#"{"type":"system","subtype":"turn_duration","timestamp":"2026-11-24T00:43:17.159Z"}"#;
        let mut f = std::fs::File::create(&path).unwrap();
        write!(f, "{prompt}\n{}", &end[..20]).unwrap();
        f.flush().unwrap();
        let facts = r.read_new().unwrap();
        assert_eq!(facts.len(), 1);
        assert!(r.state.in_flight);
        write!(f, "{}\nnot json\n", &end[20..]).unwrap();
        f.flush().unwrap();
        let facts = r.read_new().unwrap();
        assert_eq!(facts.len(), 1, "{facts:?}");
        assert!(!r.state.in_flight);
        assert_eq!(r.bad_lines, 1);
        assert!(r.read_new().unwrap().is_empty(), "nothing is read twice");
        // Truncated and rewritten: read again from the start.
        std::fs::write(&path, format!("{prompt}\n")).unwrap();
        let facts = r.read_new().unwrap();
        assert_eq!(facts.len(), 1);
        assert!(r.state.in_flight);
    }
}

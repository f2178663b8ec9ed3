//! Following what the agent CLI in a watched pane writes about itself.
//!
//! For each watched pane one task ([`follow_pane`]) finds the CLI's conversation file
//! (`locate`: Claude Code's transcript by its live session file, Codex's rollout by its
//! cwd and start time), reads it as it grows (`reader`) and sends the facts (parsed by
//! `karl_common::evidence`) on the link's ordered outbox.
//!
//! - Woken by file-system notifications on the transcript's directory and Claude's
//!   sessions directory (FSEvents on macOS, inotify on Linux), with a one-second poll as
//!   the safety net; the session is looked up again every [`RELOCATE`], so a restarted
//!   CLI, `/clear`, `/new` or `/resume` moves the follower to the new file.
//! - Attaching reads what the file already holds into a `TurnState` and sends only its
//!   replay (`EVIDENCE_LINK_ATTACHED`): nothing is sent twice after karl-agent restarts.
//! - An unreadable file detaches with the reason, and the coordinator falls back to the
//!   screen.
//!
//! What is not here: parsing (common), deciding (the coordinator).

mod locate;
mod reader;

pub use locate::{locate, tree_pids, Located, Probe, System};
pub use reader::Reader;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use karl_common::evidence::claude::SessionFile;
use karl_common::evidence::{wire, CliStatus, Fact, Source, Stamped};
use karl_common::{pb, unix_ms};
use notify::Watcher;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::procs::ProcessTable;

/// How often the session behind a pane is looked up again.
pub const RELOCATE: Duration = Duration::from_secs(2);
/// How often while none is found (a CLI just started writes its session file late; Codex
/// writes its rollout with the first prompt).
pub const SEARCH: Duration = Duration::from_millis(500);
/// The safety poll when no notification comes.
pub const POLL: Duration = Duration::from_secs(1);

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
            cli_session: at.map(|l| l.session_id.clone()).unwrap_or_default(),
            path: at
                .map(|l| match (source, &l.session_path) {
                    (Source::SessionFile, Some(p)) => p.display().to_string(),
                    _ => l.transcript.display().to_string(),
                })
                .unwrap_or_default(),
            facts: facts.iter().map(wire::to_wire).collect(),
            observed_unix_ms: unix_ms(),
            link: link as i32,
            detail: detail.to_string(),
            karl_hook: at.is_some_and(|l| l.karl_hook),
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
    let system = Arc::new(System::default());
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
                Some(rows) => {
                    let pane = pane_id.clone();
                    let system = system.clone();
                    let prev = current.as_ref().map(|c| c.at.clone());
                    tokio::task::spawn_blocking(move || {
                        system.prune(&rows);
                        let mut found = locate(&rows, pane_pid, &pane, system.as_ref());
                        // A new conversation: read its settings for KARL's hook once.
                        if let Some(f) = found.as_mut() {
                            match prev.filter(|p| p.same(f)) {
                                Some(p) => f.karl_hook = p.karl_hook,
                                None => f.karl_hook = locate::karl_hook_in(&f.settings),
                            }
                        }
                        found
                    })
                    .await
                    .unwrap_or(None)
                }
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
                    info!(target: "agent.evidence", pane = %pane_id, session = %old.at.session_id, why, "detached");
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
                        read_off_thread(Reader::new(at.cli, at.transcript.clone())).await;
                    match read {
                        Ok(_) => {
                            let status = at.status.unwrap_or(CliStatus::Unknown);
                            reader.state.status = at.status;
                            let replay: Vec<Stamped> = reader
                                .state
                                .replay()
                                .into_iter()
                                .map(|fact| Stamped {
                                    fact,
                                    written_ms: 0,
                                })
                                .collect();
                            info!(target: "agent.evidence", pane = %pane_id, cli = at.cli.label(), pid = at.cli_pid, session = %at.session_id, transcript = %at.transcript.display(), in_flight = reader.state.in_flight, "following the CLI's transcript");
                            send(evidence_event(
                                &pane_id,
                                Source::Transcript,
                                Some(&at),
                                pb::EvidenceLink::Attached,
                                &at.describe(),
                                &replay,
                            ));
                            *targets.lock().unwrap_or_else(|p| p.into_inner()) =
                                std::iter::once(at.transcript.clone())
                                    .chain(at.session_path.clone())
                                    .collect();
                            if let Some(w) = watcher.as_mut() {
                                for d in watched_dirs.drain(..) {
                                    let _ = w.unwatch(&d);
                                }
                                for d in [
                                    at.transcript.parent(),
                                    at.session_path.as_deref().and_then(Path::parent),
                                ]
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
            let taken = std::mem::replace(
                &mut c.reader,
                Reader::new(c.at.cli, c.at.transcript.clone()),
            );
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
            if let Some(status) = c.at.session_path.as_deref().and_then(read_status) {
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
    let (cli, path) = (r.cli(), r.path.clone());
    match tokio::task::spawn_blocking(move || {
        let res = r.read_new();
        (r, res)
    })
    .await
    {
        Ok(done) => done,
        Err(e) => (
            Reader::new(cli, path),
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

//! The agent's end of the hook socket: one JSON line in per hook event, one line out
//! when the hook waits for a decision. Events from panes the agent does not watch are
//! answered at once with no decision (no session drives them), so the developer's own
//! CLIs never wait on KARL.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use karl_common::{pb, unix_ms};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, info, warn};

use super::{report, HookMessage, HookReply};
use crate::panes::PaneHost;

/// How long the agent waits for the coordinator: under the reporter's own wait, so the
/// reporter hears "no decision" rather than timing out.
const ANSWER_WAIT: Duration = Duration::from_millis(report::WAIT.as_millis() as u64 - 1500);
const MAX_LINE: u64 = 4 << 20;

/// Binds the socket (its directory made private) and serves it until the task is
/// dropped. A socket file left by an agent that is gone is replaced; one a live agent
/// answers on is not.
pub async fn serve(path: PathBuf, host: Arc<PaneHost>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            // A directory made for the socket is private; an existing one is left as it is.
            std::fs::create_dir_all(dir)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; choose another --hook-socket",
                    path.display()
                ),
            ));
        }
        if UnixStream::connect(&path).await.is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("another karl-agent listens on {}", path.display()),
            ));
        }
        std::fs::remove_file(&path)?;
    }
    let listener = UnixListener::bind(&path)?;
    info!(target: "agent.hooks", socket = %path.display(), "listening for Claude Code hooks");
    let ids = Arc::new(AtomicU64::new(1));
    loop {
        let (stream, _) = listener.accept().await?;
        let host = host.clone();
        let ids = ids.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(stream, &host, &ids).await {
                debug!(target: "agent.hooks", error = %e, "hook connection");
            }
        });
    }
}

async fn handle(stream: UnixStream, host: &PaneHost, ids: &AtomicU64) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read.take(MAX_LINE))
        .read_line(&mut line)
        .await?;
    let Ok(msg) = serde_json::from_str::<HookMessage>(line.trim()) else {
        warn!(target: "agent.hooks", "a hook sent something that is not a hook event; ignored");
        return Ok(());
    };
    let name = str_of(&msg.event, "hook_event_name");
    let waits = name == "PermissionRequest";
    let reply = if !host.watching().contains(&msg.pane) {
        debug!(target: "agent.hooks", pane = %msg.pane, event = %name, "hook from a pane no session watches");
        HookReply::default()
    } else {
        let hook_request = if waits {
            ids.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        let answer = waits.then(|| host.hook_waiter(hook_request));
        host.hook_event(pb::HookEvent {
            hook_request,
            pane_id: msg.pane.clone(),
            event: name.clone(),
            cli_session: str_of(&msg.event, "session_id"),
            tool_name: str_of(&msg.event, "tool_name"),
            tool_input: msg
                .event
                .get("tool_input")
                .map(|v| v.to_string())
                .unwrap_or_default(),
            unix_ms: unix_ms(),
        });
        match answer {
            None => return Ok(()),
            Some(rx) => match tokio::time::timeout(ANSWER_WAIT, rx).await {
                Ok(Ok(a)) => reply_of(&a),
                _ => {
                    host.hook_forget(hook_request);
                    info!(target: "agent.hooks", pane = %msg.pane, "no decision from the coordinator in time; the CLI asks as usual");
                    HookReply::default()
                }
            },
        }
    };
    if waits {
        let mut out = serde_json::to_string(&reply).unwrap_or_else(|_| "{}".into());
        out.push('\n');
        write.write_all(out.as_bytes()).await?;
    }
    Ok(())
}

fn str_of(v: &serde_json::Value, k: &str) -> String {
    v.get(k).and_then(|s| s.as_str()).unwrap_or("").to_string()
}

fn reply_of(a: &pb::HookAnswer) -> HookReply {
    let decision = match a.decision() {
        pb::HookDecision::Allow => Some("allow".to_string()),
        pb::HookDecision::Deny => Some("deny".to_string()),
        pb::HookDecision::StepAside => None,
    };
    HookReply {
        decision,
        message: a.message.clone(),
    }
}

/// Whether a socket path is usable as given (absolute).
pub fn check_path(path: &Path) -> Result<(), String> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(format!(
            "the hook socket must be an absolute path, not {}",
            path.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tmux::Tmux;

    /// A pane no session watches: the hook hears "no decision" at once, and nothing goes
    /// to the coordinator.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hooks_from_unwatched_panes_step_aside_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/agent.sock");
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let host = Arc::new(PaneHost::new(
            Tmux::new(Some("karl-no-such-server".into())),
            tx,
        ));
        let server = tokio::spawn(serve(path.clone(), host));
        for _ in 0..100 {
            if path.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let started = std::time::Instant::now();
        let p = path.clone();
        let out = tokio::task::spawn_blocking(move || {
            report::run(
                &p,
                r#"{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"ls"}}"#.as_bytes(),
                "%9",
                report::WAIT,
            )
        })
        .await
        .unwrap();
        assert_eq!(out, "");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            rx.try_recv().is_err(),
            "an unwatched pane's hook reached the link"
        );
        // A second agent on the same socket is refused, the first keeps it.
        let (tx2, _rx2) = tokio::sync::mpsc::channel(8);
        let other = Arc::new(PaneHost::new(
            Tmux::new(Some("karl-no-such-server".into())),
            tx2,
        ));
        let err = serve(path.clone(), other).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
        server.abort();
    }
}

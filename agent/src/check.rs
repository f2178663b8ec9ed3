//! `drive --verify CMD`: the command runs with `sh -c` in the pane's working directory,
//! outside the pane (nothing is typed), in its own process group with a timeout; the exit
//! status and the last of its output go back to the coordinator, which decides whether
//! the session is done.
//!
//! The command's end is its exit, not the end of its output: a background process it left
//! holding stdout (a test server, a build daemon) gets a short grace to finish writing,
//! then the group is killed. On timeout the whole group is killed and what it printed so
//! far is kept.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use karl_common::pb;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tracing::info;

/// Timeout when the command does not give one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Output kept: the end, where test runners print their verdict.
const KEEP_OUTPUT: usize = 4000;
/// How long output is still read after the command exited.
const DRAIN: Duration = Duration::from_millis(500);

/// Runs `command` in `cwd`; a command that cannot start is an error, one that fails or
/// times out is a result.
pub async fn run(cwd: &Path, command: &str, timeout: Duration) -> std::io::Result<pb::CheckResult> {
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec 2>&1; {command}"))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child.id();
    let mut out = child.stdout.take();
    // The tail of the output, kept bounded while it streams.
    let mut tail: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + timeout;
    let mut status = None;
    let mut timed_out = false;
    let mut drain_until = None;
    loop {
        let stop = drain_until.unwrap_or(deadline);
        tokio::select! {
            n = async {
                match out.as_mut() {
                    Some(o) => o.read(&mut buf).await,
                    None => std::future::pending().await,
                }
            } => match n {
                Ok(0) | Err(_) => {
                    out = None;
                    if status.is_some() {
                        break;
                    }
                }
                Ok(n) => {
                    tail.extend_from_slice(&buf[..n]);
                    if tail.len() > 2 * KEEP_OUTPUT * 4 {
                        let cut = tail.len() - KEEP_OUTPUT * 4;
                        tail.drain(..cut);
                    }
                }
            },
            s = child.wait(), if status.is_none() => {
                status = Some(s.ok());
                if out.is_none() {
                    break;
                }
                drain_until = Some(tokio::time::Instant::now() + DRAIN);
            },
            _ = tokio::time::sleep_until(stop) => {
                if status.is_none() {
                    timed_out = true;
                }
                break;
            }
        }
    }
    // Whatever the command left running in its group goes with it.
    if let Some(pgid) = pgid {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    let text = String::from_utf8_lossy(&tail);
    let start = text
        .char_indices()
        .rev()
        .nth(KEEP_OUTPUT)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let exit_code = status.flatten().and_then(|s| s.code()).unwrap_or(-1);
    let elapsed_ms = started.elapsed().as_millis() as u64;
    info!(target: "agent.check", cwd = %cwd.display(), exit_code, timed_out, elapsed_ms, "verify command ran");
    Ok(pb::CheckResult {
        exit_code,
        output: text[start..].to_string(),
        elapsed_ms,
        timed_out,
        cwd: cwd.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn exit_status_output_and_timeout() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("marker"), "x").unwrap();
        let ok = run(dir.path(), "test -f marker && echo found", DEFAULT_TIMEOUT)
            .await
            .unwrap();
        assert_eq!((ok.exit_code, ok.output.trim()), (0, "found"));
        let bad = run(dir.path(), "echo oops >&2; exit 3", DEFAULT_TIMEOUT)
            .await
            .unwrap();
        assert_eq!((bad.exit_code, bad.output.trim()), (3, "oops"));
        let slow = run(
            dir.path(),
            "echo started; sleep 5",
            Duration::from_millis(300),
        )
        .await
        .unwrap();
        assert!(slow.timed_out && slow.exit_code == -1);
        assert_eq!(slow.output.trim(), "started", "output kept on timeout");
        assert!(run(&dir.path().join("missing"), "true", DEFAULT_TIMEOUT)
            .await
            .is_err());
    }

    /// A command that leaves a process holding its output ends when it exits, and the
    /// process it left is killed with its group.
    #[tokio::test]
    async fn a_background_process_does_not_hold_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("bg.pid");
        let cmd = format!("sleep 30 & echo $! > {}; echo done", pidfile.display());
        let t = Instant::now();
        let r = run(dir.path(), &cmd, Duration::from_secs(20))
            .await
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!((r.exit_code, r.timed_out), (0, false));
        assert_eq!(r.output.trim(), "done");
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Killed, it may linger as a zombie until init reaps it: that is not alive.
        let ps = std::process::Command::new("ps")
            .args(["-o", "stat=", "-p", pid.trim()])
            .output()
            .unwrap();
        let stat = String::from_utf8_lossy(&ps.stdout).trim().to_string();
        assert!(
            stat.is_empty() || stat.starts_with('Z'),
            "the background sleep outlived its verify run: {stat}"
        );
    }
}

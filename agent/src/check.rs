//! `drive --verify CMD`: the command runs with `sh -c` in the pane's working directory,
//! outside the pane (nothing is typed), with a timeout; the exit status and the last of
//! its output go back to the coordinator, which decides whether the session is done.

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
        .kill_on_drop(true)
        .spawn()?;
    let mut out = child.stdout.take();
    let read = async {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf).await;
        }
        buf
    };
    let (status, output, timed_out) = match tokio::time::timeout(timeout, async {
        let buf = read.await;
        (child.wait().await, buf)
    })
    .await
    {
        Ok((status, buf)) => (status.ok(), buf, false),
        Err(_) => {
            let _ = child.kill().await;
            (None, Vec::new(), true)
        }
    };
    let text = String::from_utf8_lossy(&output);
    let start = text
        .char_indices()
        .rev()
        .nth(KEEP_OUTPUT)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let exit_code = status.and_then(|s| s.code()).unwrap_or(-1);
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
        let slow = run(dir.path(), "sleep 5", Duration::from_millis(200))
            .await
            .unwrap();
        assert!(slow.timed_out && slow.exit_code == -1);
        assert!(run(&dir.path().join("missing"), "true", DEFAULT_TIMEOUT)
            .await
            .is_err());
    }
}

//! The one private tmux server for tests and benchmarks: its own socket name
//! (`tmux -L karl-test-…`), no user config (`-f /dev/null`), killed and its socket file
//! removed when the guard drops, so no test touches the user's tmux or leaves a server
//! behind. Synchronous on purpose: it must work in `Drop`. The tmux program is
//! `KARL_TMUX_BIN` when set, so one variable runs every real-tmux test against another
//! tmux build. A missing `tmux` is an error, not a skip: CI installs it.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use karl_agent::tmux::{program_from_env, Tmux};

/// A name no other test of any process uses at the same time.
pub(crate) fn unique(prefix: &str) -> String {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{}-{nanos:x}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A tmux server that lives as long as this guard.
#[derive(Debug)]
pub struct TmuxServer {
    socket: String,
}

impl TmuxServer {
    /// Picks a fresh socket name. The server itself starts with the first session.
    pub fn new() -> Self {
        TmuxServer {
            socket: unique("karl-test"),
        }
    }

    /// The socket name (`-L`).
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// The agent's [`Tmux`] handle on this server.
    pub fn tmux(&self) -> Tmux {
        Tmux::new(Some(self.socket.clone())).with_program(program_from_env())
    }

    /// Runs one tmux command on this server; its stdout on success.
    pub fn run(&self, args: &[&str]) -> io::Result<String> {
        self.run_with_input(args, None)
    }

    /// Runs one tmux command with `input` on its stdin; its stdout on success.
    pub fn run_with_input(&self, args: &[&str], input: Option<&[u8]>) -> io::Result<String> {
        let mut child = Command::new(program_from_env())
            .args(["-u", "-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot run tmux: {e}")))?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(data)?;
        }
        let out = child.wait_with_output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(io::Error::other(format!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Creates a detached session of `width`×`height` running `command` (a shell command
    /// line for tmux to run) and returns its pane id (`%N`).
    pub fn new_session(
        &self,
        name: &str,
        width: u16,
        height: u16,
        command: &str,
    ) -> io::Result<String> {
        let (w, h) = (width.to_string(), height.to_string());
        let args = [
            "new-session",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-s",
            name,
            "-x",
            &w,
            "-y",
            &h,
            command,
        ];
        Ok(self.run(&args)?.trim().to_string())
    }

    /// Adds a window to a session running `command`; returns its pane id.
    pub fn new_window(&self, session: &str, command: &str) -> io::Result<String> {
        let t = format!("={session}:");
        let args = [
            "new-window",
            "-d",
            "-P",
            "-F",
            "#{pane_id}",
            "-t",
            &t,
            command,
        ];
        Ok(self.run(&args)?.trim().to_string())
    }

    /// `capture-pane -p`: the visible screen as plain text.
    pub fn capture(&self, pane: &str) -> io::Result<String> {
        self.run(&["capture-pane", "-p", "-t", pane])
    }

    /// Kills the server and removes its socket file, which tmux leaves behind (also done
    /// on drop).
    pub fn kill(&self) {
        let socket_path = self
            .run(&["display-message", "-p", "#{socket_path}"])
            .ok()
            .map(|p| PathBuf::from(p.trim_end_matches('\n')))
            .filter(|p| p.is_absolute());
        let _ = self.run(&["kill-server"]);
        if let Some(path) = socket_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Default for TmuxServer {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        self.kill();
    }
}

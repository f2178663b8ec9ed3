//! A private tmux server for tests and benchmarks: its own socket name
//! (`karl-test-<random>`), no user config (`-f /dev/null`), killed when the guard drops, so
//! no test touches the user's tmux or leaves a server behind. Synchronous on purpose: it
//! must work in `Drop`. The tmux program is `KARL_TMUX_BIN` when set, so one variable runs
//! every real-tmux test against another tmux build.

use std::process::{Command, Stdio};

use crate::tmux::Tmux;

/// A tmux server that lives as long as this guard.
#[derive(Debug)]
pub struct TestServer {
    socket: String,
}

impl TestServer {
    /// Picks a fresh socket name. The server itself starts with the first session.
    pub fn new() -> Self {
        TestServer {
            socket: format!(
                "karl-test-{}-{:016x}",
                std::process::id(),
                rand::random::<u64>()
            ),
        }
    }

    /// The socket name (`-L`).
    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// A [`Tmux`] handle on this server.
    pub fn tmux(&self) -> Tmux {
        Tmux::new(Some(self.socket.clone())).with_program(crate::tmux::program_from_env())
    }

    /// Runs a tmux command on this server and returns its stdout.
    pub fn run(&self, args: &[&str]) -> std::io::Result<String> {
        let out = Command::new(crate::tmux::program_from_env())
            .args(["-u", "-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::null())
            .output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(std::io::Error::other(format!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Creates a detached session of `width`×`height` running `command` (a shell command
    /// line for tmux to run; `None` runs the default shell) and returns its pane id.
    pub fn new_session(
        &self,
        name: &str,
        width: u16,
        height: u16,
        command: Option<&str>,
    ) -> std::io::Result<String> {
        let (w, h) = (width.to_string(), height.to_string());
        let mut args = vec![
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
        ];
        if let Some(c) = command {
            args.push(c);
        }
        Ok(self.run(&args)?.trim().to_string())
    }

    /// Adds a window to a session running `command`; returns its pane id.
    pub fn new_window(&self, session: &str, command: Option<&str>) -> std::io::Result<String> {
        let t = format!("={session}:");
        let mut args = vec!["new-window", "-d", "-P", "-F", "#{pane_id}", "-t", &t];
        if let Some(c) = command {
            args.push(c);
        }
        Ok(self.run(&args)?.trim().to_string())
    }

    /// Kills the server (also done on drop).
    pub fn kill(&self) {
        let _ = self.run(&["kill-server"]);
    }
}

impl Default for TestServer {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

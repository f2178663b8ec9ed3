//! tmux control mode: one `tmux -C attach-session -t $SESSION -f ignore-size` client per
//! tmux session that holds a watched pane. `ignore-size` keeps the client from resizing the
//! user's windows; attaching to an existing session (never a bare `tmux -C`) creates no
//! session. The client's stdin is a pipe: closing it detaches the client.
//!
//! [`parse_line`] turns one line of control-mode output into a [`Notice`] (pure, tested);
//! [`ControlClient`] runs the process and hands notices to a callback. What a notice means
//! for a watched pane is decided in `panes`.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::error::{AgentError, Result};
use crate::tmux::Tmux;

/// How long a client may take to confirm its attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a detached client may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// One control-mode line, as far as the agent cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// `%output %ID VALUE` (or `%extended-output`): `bytes` is the decoded length of VALUE.
    Output { pane: String, bytes: usize },
    /// `%session-changed $ID NAME`: the client is now attached to that session. The first
    /// one confirms the attach.
    SessionChanged { session_id: String },
    /// `%window-close`, `%unlinked-window-close`, `%layout-change`: panes of the session may
    /// have closed or moved away; check the watched ones.
    Topology,
    /// `%exit [REASON]`: the client is leaving (session gone, server gone, detached).
    Exit { reason: String },
    /// `%error` ending a command block.
    Error,
    /// Anything else (`%begin`, `%end`, renames, mode changes, command output).
    Other,
}

/// Parses one line of control-mode output (without the trailing newline).
pub fn parse_line(line: &[u8]) -> Notice {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (word, rest) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &b""[..]),
    };
    match word {
        b"%output" => match split_word(rest) {
            Some((pane, value)) if pane.starts_with(b"%") => Notice::Output {
                pane: String::from_utf8_lossy(pane).into_owned(),
                bytes: decoded_len(value),
            },
            _ => Notice::Other,
        },
        // `%extended-output %ID AGE ... : VALUE`
        b"%extended-output" => match split_word(rest) {
            Some((pane, tail)) if pane.starts_with(b"%") => {
                let value = tail
                    .windows(3)
                    .position(|w| w == b" : ")
                    .map(|i| &tail[i + 3..])
                    .unwrap_or_default();
                Notice::Output {
                    pane: String::from_utf8_lossy(pane).into_owned(),
                    bytes: decoded_len(value),
                }
            }
            _ => Notice::Other,
        },
        b"%session-changed" => match split_word(rest) {
            Some((id, _name)) if id.starts_with(b"$") => Notice::SessionChanged {
                session_id: String::from_utf8_lossy(id).into_owned(),
            },
            _ if rest.starts_with(b"$") => Notice::SessionChanged {
                session_id: String::from_utf8_lossy(rest).into_owned(),
            },
            _ => Notice::Other,
        },
        b"%window-close" | b"%unlinked-window-close" | b"%layout-change" => Notice::Topology,
        b"%exit" => Notice::Exit {
            reason: String::from_utf8_lossy(rest).trim().to_string(),
        },
        b"%error" => Notice::Error,
        _ => Notice::Other,
    }
}

fn split_word(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|&b| b == b' ')?;
    Some((&s[..i], &s[i + 1..]))
}

/// Length of a control-mode value once its `\ooo` octal escapes are decoded.
pub fn decoded_len(value: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'\\'
            && value.len() >= i + 4
            && value[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            i += 4;
        } else {
            i += 1;
        }
        n += 1;
    }
    n
}

/// Why a control client ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientEnd {
    /// The agent stopped it.
    Stopped,
    /// tmux ended it (`%exit` or EOF): the session, the server or the client went away.
    Exited { reason: String },
}

/// A running control-mode client. Dropping it without [`ControlClient::stop`] still stops
/// it: the task sees the stop channel close and detaches.
#[derive(Debug)]
pub struct ControlClient {
    stop: watch::Sender<bool>,
    task: JoinHandle<ClientEnd>,
}

impl ControlClient {
    /// Starts a client attached to `session_id` (`$3`) and waits until tmux confirms the
    /// attach. Every notice goes to `on_notice`; when the client ends, `on_end` runs once
    /// (also after [`ControlClient::stop`]).
    pub async fn attach<N, E>(
        tmux: &Tmux,
        session_id: &str,
        on_notice: N,
        on_end: E,
    ) -> Result<Self>
    where
        N: FnMut(Notice) + Send + 'static,
        E: FnOnce(ClientEnd) + Send + 'static,
    {
        let attach_err = |why: String| AgentError::Attach {
            session: session_id.to_string(),
            why,
        };
        let mut cmd = tmux.command([
            "-C",
            "attach-session",
            "-t",
            session_id,
            "-f",
            "ignore-size",
        ]);
        cmd.stdin(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => AgentError::TmuxMissing {
                program: tmux.program().to_string(),
                source: e,
            },
            _ => attach_err(e.to_string()),
        })?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err(attach_err("no pipes to the client".into())),
        };
        let (stop_tx, stop_rx) = watch::channel(false);
        let (ready_tx, ready_rx) = oneshot::channel();
        let task = tokio::spawn(run(
            child, stdin, stdout, stop_rx, ready_tx, on_notice, on_end,
        ));
        let client = ControlClient {
            stop: stop_tx,
            task,
        };
        match tokio::time::timeout(ATTACH_TIMEOUT, ready_rx).await {
            Ok(Ok(Ok(()))) => Ok(client),
            Ok(Ok(Err(reason))) => {
                client.stop().await;
                Err(attach_err(reason))
            }
            Ok(Err(_)) => {
                client.stop().await;
                Err(attach_err("the client ended before attaching".into()))
            }
            Err(_) => {
                client.stop().await;
                Err(attach_err(format!("no answer within {ATTACH_TIMEOUT:?}")))
            }
        }
    }

    /// True while the client process runs.
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Detaches the client and waits for its process to exit (killing it after a grace
    /// period), so no process or tmux client is left behind.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn run<N, E>(
    mut child: Child,
    stdin: ChildStdin,
    stdout: tokio::process::ChildStdout,
    mut stop: watch::Receiver<bool>,
    ready: oneshot::Sender<std::result::Result<(), String>>,
    mut on_notice: N,
    on_end: E,
) -> ClientEnd
where
    N: FnMut(Notice) + Send + 'static,
    E: FnOnce(ClientEnd) + Send + 'static,
{
    let mut ready = Some(ready);
    // Output of the command blocks tmux answers with; an `%error` block before the attach
    // is confirmed says why the attach failed (`can't find session`, `no sessions`).
    let mut block: Option<Vec<String>> = None;
    let mut last_error = String::new();
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::with_capacity(4096);
    let end = loop {
        buf.clear();
        tokio::select! {
            changed = stop.changed() => {
                // A send of `true` or the sender dropped: either way, stop.
                let _ = changed;
                break ClientEnd::Stopped;
            }
            read = reader.read_until(b'\n', &mut buf) => match read {
                Ok(0) | Err(_) => break ClientEnd::Exited { reason: "control client closed".into() },
                Ok(_) => {
                    let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
                    if line.starts_with(b"%begin ") {
                        block = Some(Vec::new());
                    } else if line.starts_with(b"%end ") {
                        block = None;
                    } else if line.starts_with(b"%error ") {
                        last_error = block.take().unwrap_or_default().join("; ");
                    } else if let Some(b) = block.as_mut() {
                        if b.len() < 5 {
                            b.push(String::from_utf8_lossy(line).trim().to_string());
                        }
                        continue;
                    }
                    let notice = parse_line(line);
                    match notice {
                        Notice::SessionChanged { .. } => {
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(Ok(()));
                            }
                        }
                        Notice::Exit { ref reason } => {
                            if let Some(tx) = ready.take() {
                                let why = [last_error.as_str(), reason.as_str()]
                                    .into_iter()
                                    .find(|s| !s.is_empty())
                                    .unwrap_or("tmux closed the client");
                                let _ = tx.send(Err(why.to_string()));
                            }
                            break ClientEnd::Exited { reason: reason.clone() };
                        }
                        _ => {}
                    }
                    on_notice(notice);
                }
            }
        }
    };
    // Closing stdin detaches a control client; give it a moment, then make sure.
    drop(stdin);
    drop(reader);
    if tokio::time::timeout(EXIT_GRACE, child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
    if let Some(tx) = ready.take() {
        let _ = tx.send(Err("the client ended before attaching".into()));
    }
    on_end(end.clone());
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control client's whole output as tmux 3.5a wrote it (attach, output with escaped
    /// tab, backslash and ESC, a window added and killed, the session killed).
    const TMUX_3_5A: &[u8] = br#"%begin 1795464105 271 0
%end 1795464105 271 0
%session-changed $0 work
%output %0 \033[?2004hroot@vm:/work/main# 
%output %0 printf "a\134tb\134\134\134\134c\134033[1mX\134n"\015\012\033[?2004l\015
%output %0 a\011b\134c\033[1mX\015\012
%output %0 \033[?2004hroot@vm:/work/main# 
%window-add @1
%window-renamed @1 tmux
%output %1 \033[?2004hroot@vm:/work/main# 
%unlinked-window-close @1
%sessions-changed
%exit
"#;

    #[test]
    fn reads_a_tmux_3_5a_transcript() {
        let notices: Vec<Notice> = TMUX_3_5A.split(|&b| b == b'\n').map(parse_line).collect();
        assert_eq!(
            notices[2],
            Notice::SessionChanged {
                session_id: "$0".into()
            }
        );
        assert_eq!(
            notices[5],
            Notice::Output {
                pane: "%0".into(),
                bytes: "a\tb\\c\x1b[1mX\r\n".len()
            }
        );
        let outputs = notices
            .iter()
            .filter(|n| matches!(n, Notice::Output { .. }))
            .count();
        assert_eq!(outputs, 5);
        assert_eq!(notices[10], Notice::Topology);
        assert_eq!(notices[12], Notice::Exit { reason: "".into() });
        assert_eq!(notices[0], Notice::Other);
    }

    #[test]
    fn parses_output_with_escapes() {
        assert_eq!(
            parse_line(b"%output %1 hi\\015\\012# "),
            Notice::Output {
                pane: "%1".into(),
                bytes: 6
            }
        );
        assert_eq!(
            parse_line(b"%output %12 "),
            Notice::Output {
                pane: "%12".into(),
                bytes: 0
            }
        );
        // Raw UTF-8 bytes count one each; a lone backslash is not an escape.
        assert_eq!(decoded_len("❯\\\\".as_bytes()), 5);
        assert_eq!(decoded_len(b"a\\134b"), 3);
        assert_eq!(decoded_len(b"\\01"), 3);
        assert_eq!(
            parse_line(b"%extended-output %3 120 : ab\\033c"),
            Notice::Output {
                pane: "%3".into(),
                bytes: 4
            }
        );
    }

    #[test]
    fn parses_lifecycle_notices() {
        assert_eq!(
            parse_line(b"%session-changed $0 s1"),
            Notice::SessionChanged {
                session_id: "$0".into()
            }
        );
        assert_eq!(parse_line(b"%exit"), Notice::Exit { reason: "".into() });
        assert_eq!(
            parse_line(b"%exit server exited\r"),
            Notice::Exit {
                reason: "server exited".into()
            }
        );
        for l in [
            &b"%window-close @1"[..],
            b"%unlinked-window-close @1",
            b"%layout-change @0 b25d,80x24,0,0,0 b25d,80x24,0,0,0 *",
        ] {
            assert_eq!(
                parse_line(l),
                Notice::Topology,
                "{}",
                String::from_utf8_lossy(l)
            );
        }
        for l in [
            &b"%begin 1795385608 271 0"[..],
            b"%end 1795385608 271 0",
            b"%window-renamed @1 sh",
            b"%sessions-changed",
            b"",
            b"plain command output",
            b"%output",
            b"%output nope x",
        ] {
            assert_eq!(
                parse_line(l),
                Notice::Other,
                "{}",
                String::from_utf8_lossy(l)
            );
        }
        assert_eq!(parse_line(b"%error 1 2 0"), Notice::Error);
    }
}

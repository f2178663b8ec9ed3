//! `karl-agent hook claude --socket PATH`: the command Claude Code runs for each hook
//! event KARL installed. It never stands in the CLI's way: whatever fails (no agent, a
//! slow coordinator, bad input), it prints nothing and exits 0, and the CLI carries on
//! as if there were no hook.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{HookMessage, HookReply};

/// How long a `PermissionRequest` waits for KARL's decision before stepping aside.
pub const WAIT: Duration = Duration::from_secs(8);
/// Longest hook input read (a tool input can hold a whole file).
const MAX_INPUT: u64 = 4 << 20;
const CONNECT: Duration = Duration::from_millis(500);

/// Runs the reporter: `input` is the hook's stdin, `pane` its `TMUX_PANE`. Returns what
/// to print on stdout (empty: nothing).
pub fn run(socket: &Path, input: impl Read, pane: &str, wait: Duration) -> String {
    let mut raw = String::new();
    if input.take(MAX_INPUT).read_to_string(&mut raw).is_err() {
        return String::new();
    }
    let Ok(event) = serde_json::from_str::<serde_json::Value>(&raw) else {
        return String::new();
    };
    let waits = event.get("hook_event_name").and_then(|e| e.as_str()) == Some("PermissionRequest");
    let msg = HookMessage {
        pane: pane.to_string(),
        event,
    };
    match exchange(socket, &msg, waits, wait) {
        Some(reply) => reply
            .permission_output()
            .map(|v| v.to_string())
            .unwrap_or_default(),
        None => String::new(),
    }
}

fn exchange(socket: &Path, msg: &HookMessage, waits: bool, wait: Duration) -> Option<HookReply> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_write_timeout(Some(CONNECT)).ok()?;
    let mut line = serde_json::to_string(msg).ok()?;
    line.push('\n');
    stream.write_all(line.as_bytes()).ok()?;
    if !waits {
        return None;
    }
    stream.set_read_timeout(Some(wait)).ok()?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).ok()?;
    serde_json::from_str(reply.trim()).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_permission_request_prints_the_agent_s_decision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let msg: HookMessage = serde_json::from_str(&line).unwrap();
            let reply = HookReply {
                decision: Some("deny".into()),
                message: "not that".into(),
            };
            (&s).write_all(format!("{}\n", serde_json::to_string(&reply).unwrap()).as_bytes())
                .unwrap();
            msg
        });
        let input = r#"{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf /"},"session_id":"s"}"#;
        let out = run(&path, input.as_bytes(), "%3", Duration::from_secs(5));
        let msg = server.join().unwrap();
        assert_eq!(msg.pane, "%3");
        assert_eq!(msg.event["tool_input"]["command"], "rm -rf /");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "deny");
        assert_eq!(v["hookSpecificOutput"]["decision"]["message"], "not that");
    }

    #[test]
    fn no_agent_no_answer_or_bad_input_prints_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sock");
        let input = r#"{"hook_event_name":"PermissionRequest"}"#;
        assert_eq!(run(&path, input.as_bytes(), "%1", WAIT), "");
        // An agent that never answers: the hook steps aside after the wait.
        let _listener = UnixListener::bind(&path).unwrap();
        let t = std::time::Instant::now();
        assert_eq!(
            run(&path, input.as_bytes(), "%1", Duration::from_millis(200)),
            ""
        );
        assert!(t.elapsed() < Duration::from_secs(3));
        assert_eq!(run(&path, "not json".as_bytes(), "%1", WAIT), "");
    }
}

//! The one door to tmux. Every tmux process the agent starts is built by [`Tmux::command`],
//! which adds the socket (`-L NAME` or `-S PATH`) and `-u`; arguments are always vectors,
//! never a shell string; every call has a timeout. `-F` output is parsed by pure functions
//! ([`parse_meta`], [`split_capture`], [`classify_failure`]) that are unit-tested here.
//!
//! What tmux *means* (activity, snapshots, injection) lives in the modules that call this.

use std::process::Stdio;
use std::time::Duration;

use karl_common::pb;
use karl_common::target::PaneTarget;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::error::{AgentError, Result};

/// Default limit on one tmux call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Field separator in `-F` formats: printable, so it survives tmux 3.4+, which prints
/// control characters in format output as octal escapes (`\\037`). Free-form fields that
/// come before the title pass through `#{s/␟/_/:…}`, so only the title — parsed last, with
/// `splitn` — may contain it.
const SEP: char = '␟';

/// Pane metadata format. The title comes last so that anything in it survives `splitn`.
const META_FORMAT: &str = concat!(
    "#{pane_id}␟#{session_id}␟#{s/␟/_/:session_name}␟#{window_index}␟#{pane_index}␟",
    "#{s/␟/_/:pane_current_command}␟#{pane_width}␟#{pane_height}␟#{pane_pid}␟",
    "#{pane_in_mode}␟#{pane_dead}␟#{cursor_x}␟#{cursor_y}␟",
    "#{s/␟/_/:pane_current_path}␟#{pane_title}"
);
const META_FIELDS: usize = 15;

/// The oldest tmux KARL runs on: 3.2 brought the control-mode and format behaviour the
/// agent relies on (`-f ignore-size` on attach, `#{s/…/…/:…}` substitutions).
pub const MIN_VERSION: TmuxVersion = TmuxVersion { major: 3, minor: 2 };

/// A tmux release as `tmux -V` names it (`tmux 3.5a`, `tmux next-3.6`, `tmux 3.6-rc`); the
/// letter suffix is a patch release and does not change behaviour KARL depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TmuxVersion {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for TmuxVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Parses `tmux -V` output. `None` for builds that name no number (`tmux master`,
/// `tmux openbsd-7.5`): those are taken as new enough.
pub fn parse_version(v_output: &str) -> Option<TmuxVersion> {
    let word = v_output.split_whitespace().nth(1)?;
    if word.starts_with("openbsd") {
        return None;
    }
    let word = word.strip_prefix("next-").unwrap_or(word);
    let (major, rest) = word.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(TmuxVersion {
        major: major.parse().ok()?,
        minor: minor.parse().ok()?,
    })
}

/// Refuses a tmux older than [`MIN_VERSION`] with one line the operator can act on.
pub fn check_version(v_output: &str) -> Result<()> {
    match parse_version(v_output) {
        Some(v) if v < MIN_VERSION => Err(AgentError::TmuxTooOld {
            found: v_output.trim().to_string(),
        }),
        _ => Ok(()),
    }
}

/// The tmux program to run: `KARL_TMUX_BIN` when set (tests and CI use it to pick a tmux
/// build), else `tmux` on PATH. The agent's `--tmux-bin` flag reads the same variable.
pub fn program_from_env() -> String {
    std::env::var("KARL_TMUX_BIN")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "tmux".to_string())
}

/// What tmux says about one pane.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PaneMeta {
    /// `%12`
    pub pane_id: String,
    /// `$3`
    pub session_id: String,
    pub session: String,
    pub window: u32,
    pub pane: u32,
    pub current_command: String,
    pub width: u32,
    pub height: u32,
    pub pid: u32,
    pub in_mode: bool,
    pub dead: bool,
    pub cursor_x: u32,
    pub cursor_y: u32,
    pub current_path: String,
    pub title: String,
}

impl PaneMeta {
    /// The wire form.
    pub fn to_info(&self) -> pb::PaneInfo {
        pb::PaneInfo {
            pane_id: self.pane_id.clone(),
            session: self.session.clone(),
            window: self.window,
            pane: self.pane,
            current_command: self.current_command.clone(),
            title: self.title.clone(),
            width: self.width,
            height: self.height,
            current_path: self.current_path.clone(),
            pid: self.pid,
            in_mode: self.in_mode,
            dead: self.dead,
            processes: Vec::new(),
        }
    }

    /// True when this pane is what `target` names.
    pub fn matches(&self, target: &PaneTarget) -> bool {
        match target {
            PaneTarget::Id(id) => self.pane_id == format!("%{id}"),
            PaneTarget::Position {
                session,
                window,
                pane,
            } => self.session == *session && self.window == *window && self.pane == *pane,
        }
    }
}

/// Parses one line of [`META_FORMAT`] output.
pub fn parse_meta(line: &str) -> Result<PaneMeta> {
    let bad = || AgentError::Parse {
        what: "pane metadata",
        line: line.chars().take(200).collect(),
    };
    let f: Vec<&str> = line.splitn(META_FIELDS, SEP).collect();
    if f.len() != META_FIELDS || !f[0].starts_with('%') || !f[1].starts_with('$') {
        return Err(bad());
    }
    let num = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    let flag = |s: &str| num(s).map(|n| n != 0);
    Ok(PaneMeta {
        pane_id: f[0].to_string(),
        session_id: f[1].to_string(),
        session: f[2].to_string(),
        window: num(f[3])?,
        pane: num(f[4])?,
        current_command: f[5].to_string(),
        width: num(f[6])?,
        height: num(f[7])?,
        pid: num(f[8])?,
        in_mode: flag(f[9])?,
        dead: flag(f[10])?,
        cursor_x: num(f[11])?,
        cursor_y: num(f[12])?,
        current_path: f[13].to_string(),
        title: f[14].trim_end_matches(['\r', '\n']).to_string(),
    })
}

/// Parses `list-panes -a -F META_FORMAT` output. A window linked into several sessions
/// lists its panes once per session; the first listing wins.
pub fn parse_meta_list(out: &str) -> Result<Vec<PaneMeta>> {
    let mut panes: Vec<PaneMeta> = Vec::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let meta = parse_meta(line)?;
        if !panes.iter().any(|p| p.pane_id == meta.pane_id) {
            panes.push(meta);
        }
    }
    Ok(panes)
}

/// One combined capture: metadata, the plain screen and, when asked, the `-e` screen, all
/// from the same instant of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCapture {
    pub meta: PaneMeta,
    pub text: Vec<u8>,
    pub ansi: Option<Vec<u8>>,
}

/// The line printed between the plain and the `-e` capture of one combined call: printable
/// (tmux 3.4+ escapes control characters in `display-message` output) and new for every
/// call, so no screen can hold it by accident or design.
pub fn ansi_marker() -> String {
    format!("␞karl-ansi-{:016x}␞", rand::random::<u64>())
}

/// Splits the output of the combined capture call into its parts; `ansi_marker` is the
/// marker the call printed before the `-e` capture, `None` when it asked for none.
pub fn split_capture(out: &[u8], ansi_marker: Option<&str>) -> Result<RawCapture> {
    let nl = out.iter().position(|&b| b == b'\n').unwrap_or(out.len());
    let meta = parse_meta(&String::from_utf8_lossy(&out[..nl]))?;
    let rest = out.get(nl + 1..).unwrap_or_default();
    let Some(marker) = ansi_marker else {
        return Ok(RawCapture {
            meta,
            text: rest.to_vec(),
            ansi: None,
        });
    };
    let marker = format!("{marker}\n");
    let at = find(rest, marker.as_bytes())
        .filter(|&i| i == 0 || rest[i - 1] == b'\n')
        .ok_or_else(|| AgentError::Parse {
            what: "capture with ANSI",
            line: "marker line missing".into(),
        })?;
    Ok(RawCapture {
        meta,
        text: rest[..at].to_vec(),
        ansi: Some(rest[at + marker.len()..].to_vec()),
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Turns a failed call's stderr into the error the operator needs to see.
pub fn classify_failure(
    args: &str,
    stderr: &str,
    socket: &str,
    target: Option<&str>,
) -> AgentError {
    let s = stderr.trim();
    if s.starts_with("no server running")
        || (s.starts_with("error connecting to")
            && (s.contains("No such file") || s.contains("Connection refused")))
        || s.starts_with("server exited")
        || s.contains("lost server")
    {
        return AgentError::NoServer {
            socket: socket.to_string(),
        };
    }
    if s.starts_with("can't find pane")
        || s.starts_with("can't find window")
        || s.starts_with("can't find session")
    {
        return AgentError::PaneNotFound {
            target: target.unwrap_or(args).to_string(),
        };
    }
    AgentError::Tmux {
        args: args.to_string(),
        stderr: s.chars().take(500).collect(),
    }
}

/// The string tmux's `-t` gets for a target. A session name is prefixed with `=` so tmux
/// matches it exactly instead of by prefix or pattern.
pub fn tmux_target(target: &PaneTarget) -> String {
    match target {
        PaneTarget::Id(_) => target.to_string(),
        PaneTarget::Position { .. } => format!("={target}"),
    }
}

/// Handle on one tmux server: the program, the socket and the call timeout. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Tmux {
    program: String,
    socket: Option<String>,
    timeout: Duration,
}

impl Tmux {
    /// `socket`: a value containing `/` is a socket path (`-S`), anything else a socket name
    /// (`-L`); `None` or empty is tmux's default server.
    pub fn new(socket: Option<String>) -> Self {
        Tmux {
            program: "tmux".to_string(),
            socket: socket.filter(|s| !s.trim().is_empty()),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Uses another tmux binary (a path or a name looked up on PATH).
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// Changes the per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The tmux program this handle runs.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// The configured socket, if any.
    pub fn socket(&self) -> Option<&str> {
        self.socket.as_deref()
    }

    /// The socket as tmux flags.
    pub fn socket_args(&self) -> Vec<String> {
        match &self.socket {
            Some(s) if s.contains('/') => vec!["-S".into(), s.clone()],
            Some(name) => vec!["-L".into(), name.clone()],
            None => Vec::new(),
        }
    }

    fn socket_label(&self) -> String {
        match &self.socket {
            Some(s) if s.contains('/') => format!("socket {s}"),
            Some(name) => format!("socket name {name}"),
            None => "the default socket".to_string(),
        }
    }

    /// The one door: a tmux command with the socket and `-u` (UTF-8 output whatever the
    /// locale; without it tmux prints `_` for every non-ASCII character of a title) added.
    /// stdin is closed and stdout/stderr piped unless the caller changes them; the process is
    /// killed if the handle is dropped. `TMUX` is removed from the environment so the socket
    /// is only ever the configured one.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.program);
        cmd.arg("-u")
            .args(self.socket_args())
            .args(args)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    fn spawn_error(&self, args: &str, e: std::io::Error) -> AgentError {
        if e.kind() == std::io::ErrorKind::NotFound {
            AgentError::TmuxMissing {
                program: self.program.clone(),
                source: e,
            }
        } else {
            AgentError::TmuxIo {
                args: args.to_string(),
                source: e,
            }
        }
    }

    /// Runs tmux with `args` (and `input` on stdin when given) and returns stdout. `target`
    /// names the pane the call is about, for the error message.
    pub async fn run_bytes(
        &self,
        args: &[&str],
        input: Option<&[u8]>,
        target: Option<&str>,
    ) -> Result<Vec<u8>> {
        let shown = args.join(" ");
        let mut cmd = self.command(args);
        if input.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let call = async {
            let mut child = cmd.spawn().map_err(|e| self.spawn_error(&shown, e))?;
            if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
                stdin
                    .write_all(data)
                    .await
                    .map_err(|e| self.spawn_error(&shown, e))?;
                // Dropping stdin closes it: tmux reads to EOF.
            }
            child
                .wait_with_output()
                .await
                .map_err(|e| self.spawn_error(&shown, e))
        };
        let out = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| AgentError::TmuxTimeout {
                args: shown.clone(),
                after: self.timeout,
                socket: self.socket_args().iter().map(|a| format!("{a} ")).collect(),
            })??;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(classify_failure(
                &shown,
                &String::from_utf8_lossy(&out.stderr),
                &self.socket_label(),
                target,
            ))
        }
    }

    /// [`Tmux::run_bytes`] with lossy UTF-8 output.
    pub async fn run(&self, args: &[&str]) -> Result<String> {
        let out = self.run_bytes(args, None, None).await?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Starts the server if needed with a detached 120×40 session `name` whose one pane
    /// runs `command` (a shell command line) in `dir`.
    pub async fn new_session(&self, name: &str, dir: &str, command: &str) -> Result<()> {
        let args = [
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            "-c",
            dir,
            command,
        ];
        self.run(&args).await.map(drop)
    }

    /// Stops this tmux server and everything running in it.
    pub async fn kill_server(&self) -> Result<()> {
        self.run(&["kill-server"]).await.map(drop)
    }

    /// `tmux -V`, e.g. `tmux 3.3a`.
    pub async fn version(&self) -> Result<String> {
        Ok(self.run(&["-V"]).await?.trim().to_string())
    }

    /// `tmux -V` after checking that this tmux is one KARL supports: the agent refuses to
    /// start on a tmux it would misread.
    pub async fn supported_version(&self) -> Result<String> {
        let v = self.version().await?;
        check_version(&v)?;
        Ok(v)
    }

    /// Every pane of the server; empty when no server is running.
    pub async fn list_panes(&self) -> Result<Vec<PaneMeta>> {
        match self.run(&["list-panes", "-a", "-F", META_FORMAT]).await {
            Ok(out) => parse_meta_list(&out),
            Err(AgentError::NoServer { .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// Like [`Tmux::list_panes`] but a missing server is an error.
    pub async fn list_panes_strict(&self) -> Result<Vec<PaneMeta>> {
        let out = self.run(&["list-panes", "-a", "-F", META_FORMAT]).await?;
        parse_meta_list(&out)
    }

    /// Resolves a target to its pane, once.
    pub async fn resolve(&self, target: &PaneTarget) -> Result<PaneMeta> {
        let t = tmux_target(target);
        let shown = target.to_string();
        let out = self
            .run_bytes(
                &["display-message", "-p", "-t", &t, "-F", META_FORMAT],
                None,
                Some(&shown),
            )
            .await?;
        let out = String::from_utf8_lossy(&out);
        let line = out.lines().next().unwrap_or_default();
        // display-message succeeds with empty fields when the target does not exist.
        if line.is_empty() || line.starts_with(SEP) {
            return Err(AgentError::PaneNotFound { target: shown });
        }
        parse_meta(line)
    }

    /// Metadata and screen of a pane in one tmux call: `capture-pane -p` (and `-p -e` when
    /// `ansi`), no `-J`, with `history` lines of scrollback above the screen.
    pub async fn capture(&self, pane_id: &str, ansi: bool, history: u32) -> Result<RawCapture> {
        let start = format!("-{history}");
        let mut args: Vec<&str> = vec!["display-message", "-p", "-t", pane_id, "-F", META_FORMAT];
        args.extend([";", "capture-pane", "-p", "-t", pane_id]);
        if history > 0 {
            args.extend(["-S", &start]);
        }
        let marker = ansi.then(ansi_marker);
        if let Some(marker) = &marker {
            args.extend([";", "display-message", "-p", "-t", pane_id, marker]);
            args.extend([";", "capture-pane", "-p", "-e", "-t", pane_id]);
            if history > 0 {
                args.extend(["-S", &start]);
            }
        }
        let out = self.run_bytes(&args, None, Some(pane_id)).await?;
        split_capture(&out, marker.as_deref())
    }

    /// The tmux server's process id (for benchmarks and diagnostics).
    pub async fn server_pid(&self) -> Result<u32> {
        let out = self.run(&["display-message", "-p", "#{pid}"]).await?;
        out.trim().parse().map_err(|_| AgentError::Parse {
            what: "server pid",
            line: out.trim().to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn line(fields: &[&str]) -> String {
        fields.join("␟")
    }

    const GOOD: [&str; 15] = [
        "%12",
        "$3",
        "agent-codex",
        "1",
        "0",
        "node",
        "120",
        "40",
        "4242",
        "0",
        "1",
        "2",
        "22",
        "/home/dev/proj",
        "✳ Claude Code",
    ];

    #[test]
    fn parses_metadata() {
        let m = parse_meta(&line(&GOOD)).unwrap();
        assert_eq!(m.pane_id, "%12");
        assert_eq!(m.session_id, "$3");
        assert_eq!(m.session, "agent-codex");
        assert_eq!((m.window, m.pane), (1, 0));
        assert_eq!((m.width, m.height, m.pid), (120, 40, 4242));
        assert!(!m.in_mode && m.dead);
        assert_eq!((m.cursor_x, m.cursor_y), (2, 22));
        assert_eq!(m.current_path, "/home/dev/proj");
        assert_eq!(m.title, "✳ Claude Code");
        let info = m.to_info();
        assert_eq!(info.pane_id, "%12");
        assert!(info.dead);
    }

    #[test]
    fn title_may_hold_anything() {
        let mut f = GOOD;
        f[14] = "a␟b: c";
        assert_eq!(parse_meta(&line(&f)).unwrap().title, "a␟b: c");
        f[14] = "";
        assert_eq!(parse_meta(&line(&f)).unwrap().title, "");
    }

    #[test]
    fn refuses_malformed_metadata() {
        assert!(parse_meta("").is_err());
        assert!(parse_meta("%1 $2 s").is_err());
        let mut f = GOOD;
        f[3] = "x";
        assert!(parse_meta(&line(&f)).is_err());
        let mut f = GOOD;
        f[0] = "12";
        assert!(parse_meta(&line(&f)).is_err());
        assert!(parse_meta(&line(&GOOD[..14])).is_err());
    }

    #[test]
    fn list_keeps_the_first_listing_of_a_linked_pane() {
        let mut other = GOOD;
        other[2] = "linked";
        let out = format!("{}\n{}\n\n", line(&GOOD), line(&other));
        let panes = parse_meta_list(&out).unwrap();
        assert_eq!(panes.len(), 1);
        assert_eq!(panes[0].session, "agent-codex");
        assert!(parse_meta_list("").unwrap().is_empty());
    }

    #[test]
    fn matches_targets() {
        let m = parse_meta(&line(&GOOD)).unwrap();
        assert!(m.matches(&PaneTarget::parse("%12").unwrap()));
        assert!(m.matches(&PaneTarget::parse("agent-codex:1.0").unwrap()));
        assert!(!m.matches(&PaneTarget::parse("%1").unwrap()));
        assert!(!m.matches(&PaneTarget::parse("agent:1.0").unwrap()));
        assert!(!m.matches(&PaneTarget::parse("agent-codex:1.1").unwrap()));
    }

    #[test]
    fn splits_combined_captures() {
        let meta = line(&GOOD);
        let marker = ansi_marker();
        assert_ne!(marker, ansi_marker(), "a new marker for every call");
        assert!(!marker.chars().any(char::is_control));
        let out = format!("{meta}\nhello\n❯ \n\n{marker}\n\x1b[1mhello\x1b[0m\n❯ \n");
        let c = split_capture(out.as_bytes(), Some(&marker)).unwrap();
        assert_eq!(c.meta.pane_id, "%12");
        assert_eq!(c.text, "hello\n❯ \n\n".as_bytes());
        assert_eq!(c.ansi.unwrap(), "\x1b[1mhello\x1b[0m\n❯ \n".as_bytes());

        let c = split_capture(format!("{meta}\nplain\n").as_bytes(), None).unwrap();
        assert_eq!(c.text, b"plain\n");
        assert!(c.ansi.is_none());
        // Metadata only (an empty screen).
        let c = split_capture(meta.as_bytes(), None).unwrap();
        assert!(c.text.is_empty());
        assert!(split_capture(format!("{meta}\nno marker\n").as_bytes(), Some(&marker)).is_err());
        // A screen line that merely looks like a marker is screen text.
        let fake = format!("{meta}\n␞karl-ansi-0000000000000000␞\n{marker}\nx\n");
        let c = split_capture(fake.as_bytes(), Some(&marker)).unwrap();
        assert_eq!(c.text, "␞karl-ansi-0000000000000000␞\n".as_bytes());
        assert!(split_capture(b"garbage\n", None).is_err());
    }

    /// tmux 3.4+ prints control characters in `-F` output as octal escapes: the line that
    /// `list-panes -F` gave 3.5a when the separator was `\x1f`. The format must never
    /// depend on control characters again.
    #[test]
    fn regression_tmux_3_5_escapes_control_separators() {
        assert!(parse_meta("%0\\037$0\\037work\\0370\\0370").is_err());
        assert!(!META_FORMAT.chars().any(char::is_control));
        assert_eq!(META_FORMAT.matches("#{").count(), META_FIELDS);
        // Fourteen separators, plus one in each of the three `s/␟/_/` substitutions.
        assert_eq!(META_FORMAT.matches(SEP).count(), META_FIELDS - 1 + 3);
    }

    #[test]
    fn versions() {
        let v = |s: &str| parse_version(s);
        assert_eq!(v("tmux 3.3a"), Some(TmuxVersion { major: 3, minor: 3 }));
        assert_eq!(v("tmux 3.5a\n"), Some(TmuxVersion { major: 3, minor: 5 }));
        assert_eq!(v("tmux 3.6"), Some(TmuxVersion { major: 3, minor: 6 }));
        assert_eq!(v("tmux next-3.7"), Some(TmuxVersion { major: 3, minor: 7 }));
        assert_eq!(v("tmux 3.6-rc3"), Some(TmuxVersion { major: 3, minor: 6 }));
        assert_eq!(
            v("tmux 10.0"),
            Some(TmuxVersion {
                major: 10,
                minor: 0
            })
        );
        assert_eq!(v("tmux master"), None);
        assert_eq!(v("tmux openbsd-7.5"), None);
        assert_eq!(v(""), None);
        assert!(check_version("tmux 3.2").is_ok());
        assert!(check_version("tmux 3.2a").is_ok());
        assert!(check_version("tmux 3.5a").is_ok());
        assert!(check_version("tmux master").is_ok());
        let e = check_version("tmux 3.1c").unwrap_err().to_string();
        assert!(e.contains("tmux 3.1c") && e.contains("3.2"), "{e}");
        assert!(check_version("tmux 2.9a").is_err());
    }

    #[test]
    fn classifies_failures() {
        let sock = "socket name t";
        for s in [
            "no server running on /tmp/tmux-0/t",
            "error connecting to /tmp/tmux-0/t (No such file or directory)",
            "error connecting to /tmp/tmux-0/t (Connection refused)",
        ] {
            assert!(matches!(
                classify_failure("list-panes", s, sock, None),
                AgentError::NoServer { .. }
            ));
        }
        for s in [
            "can't find pane: %99",
            "can't find session: x",
            "can't find window: 3",
        ] {
            match classify_failure("display-message", s, sock, Some("%99")) {
                AgentError::PaneNotFound { target } => assert_eq!(target, "%99"),
                e => panic!("{e}"),
            }
        }
        let e = classify_failure("paste-buffer", "no buffer karl-1-1\n", sock, None);
        assert_eq!(
            e.to_string(),
            "tmux paste-buffer failed: no buffer karl-1-1"
        );
    }

    #[test]
    fn socket_flags_and_targets() {
        assert_eq!(Tmux::new(None).socket_args(), Vec::<String>::new());
        assert_eq!(
            Tmux::new(Some("".into())).socket_args(),
            Vec::<String>::new()
        );
        assert_eq!(
            Tmux::new(Some("work".into())).socket_args(),
            vec!["-L", "work"]
        );
        assert_eq!(
            Tmux::new(Some("/tmp/t.sock".into())).socket_args(),
            vec!["-S", "/tmp/t.sock"]
        );
        assert_eq!(tmux_target(&PaneTarget::parse("%3").unwrap()), "%3");
        assert_eq!(tmux_target(&PaneTarget::parse("s:1.2").unwrap()), "=s:1.2");
    }
}

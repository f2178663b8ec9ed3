//! The stand-in's program: command-line flags, and the event loop that joins the
//! terminal ([`super::term`]), the key decoder ([`super::keys`]), the state machine
//! ([`super::app`]) and the log ([`super::log`]).
//!
//! Threads: one blocks on stdin and one waits for signals (SIGHUP, SIGTERM,
//! SIGINT end the program cleanly; SIGWINCH resizes); both feed one channel the
//! main loop reads with a timeout, so the loop sleeps while the pane is idle and
//! ticks every [`super::app::TICK_MS`] while a spinner runs.

use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::app::{App, AppConfig};
use super::claude_files::ClaudeFiles;
use super::keys::KeyParser;
use super::log::{LogEvent, LogWriter};
use super::script::{Script, ScriptError};
use super::term::{self, Painter, RawMode};

/// `--help` text.
pub const USAGE: &str = "\
karl-standin: a stand-in coding agent for KARL's tests and demo

Usage: karl-standin [--script FILE] [--log FILE] [--drop-first-enter | --drop-enters N] [--ghost TEXT] [--dialog]

  --script FILE       JSON script of turns (see the karl_tests::standin docs);
                      without one, every prompt gets `ok, done: <prompt>` after 1 s
  --log FILE          append one JSON line per event (prompts, permission decisions, …)
  --drop-first-enter  ignore the first Enter after each paste
  --drop-enters N     ignore the first N Enters after each paste
  --ghost TEXT        show TEXT as dim suggestion text in the empty input box
  --dialog            start in the folder-trust dialog
  -h, --help          this text";

/// Parsed command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub script: Option<PathBuf>,
    pub log: Option<PathBuf>,
    /// Enters ignored after each paste.
    pub drop_enters: u32,
    pub ghost: Option<String>,
    pub dialog: bool,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(Options),
    Help,
}

/// Parses the arguments after the program name.
pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut opts = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--script" => opts.script = Some(value("--script")?.into()),
            "--log" => opts.log = Some(value("--log")?.into()),
            "--ghost" => opts.ghost = Some(value("--ghost")?),
            "--drop-first-enter" => opts.drop_enters = 1,
            "--drop-enters" => {
                let n = value("--drop-enters")?;
                opts.drop_enters = n
                    .parse()
                    .map_err(|_| format!("--drop-enters needs a count, not `{n}`"))?;
            }
            "--dialog" => opts.dialog = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Command::Run(opts))
}

/// Why the program could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Script(#[from] ScriptError),
    #[error("cannot open log {path}: {source}")]
    Log { path: String, source: io::Error },
    #[error("cannot write to the terminal: {0}")]
    Terminal(io::Error),
}

enum Msg {
    Input(Vec<u8>),
    Eof,
    Signal,
    Resize,
}

/// How long a lone `ESC` waits for the rest of a sequence before it is the Escape key.
const ESC_WAIT: Duration = Duration::from_millis(40);
/// A paste whose end marker has not come after this long is ended anyway.
const STALE_PASTE: Duration = Duration::from_secs(2);

/// Runs the stand-in until it exits; returns the exit status.
pub fn run(opts: Options) -> Result<i32, RunError> {
    let script = match &opts.script {
        Some(path) => Script::load(path)?,
        None => Script::default(),
    };
    let mut log = LogWriter::open(opts.log.as_deref()).map_err(|source| RunError::Log {
        path: opts
            .log
            .as_deref()
            .unwrap_or(std::path::Path::new(""))
            .display()
            .to_string(),
        source,
    })?;
    let (tx, rx) = mpsc::channel();
    spawn_signal_thread(tx.clone());
    let raw = RawMode::enter();
    spawn_stdin_thread(tx);
    let (width, height) = term::size();
    let session_id = session_id();
    let mut claude = ClaudeFiles::from_env(&session_id);
    let cfg = AppConfig {
        drop_enters: opts.drop_enters,
        ghost: opts.ghost.clone(),
        dialog: opts.dialog,
        cwd: display_cwd(),
        session_id,
    };
    let mut app = App::new(cfg, script, width, height);
    let mut painter = Painter::new(io::stdout());
    let started = Instant::now();
    let now = || started.elapsed().as_millis() as u64;
    let _ = log.write(LogEvent::Started {
        pid: std::process::id(),
        width,
        height,
    });
    painter.start().map_err(RunError::Terminal)?;
    let mut parser = KeyParser::new();
    let mut last_input = Instant::now();
    loop {
        let t = now();
        app.tick(t);
        let committed = app.take_committed();
        if painter
            .paint(&committed, &app.frame(t), app.title(t).as_deref())
            .is_err()
        {
            app.hang_up("eof");
        }
        for event in app.take_events() {
            if let Some(c) = claude.as_mut() {
                c.on_event(&event);
            }
            // A log that cannot be written must not take the pane down with it.
            let _ = log.write(event);
        }
        if app.exit_code().is_some() {
            break;
        }
        let mut wait = app.next_wake(t).map(Duration::from_millis);
        if parser.has_pending() {
            wait = Some(wait.map_or(ESC_WAIT, |w| w.min(ESC_WAIT)));
        }
        if parser.in_paste() {
            wait = Some(wait.map_or(STALE_PASTE, |w| w.min(STALE_PASTE)));
        }
        let msg = match wait {
            Some(d) => rx.recv_timeout(d),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match msg {
            Ok(Msg::Input(bytes)) => {
                last_input = Instant::now();
                for key in parser.feed(&bytes) {
                    app.key(key, now());
                }
            }
            Ok(Msg::Eof) | Err(RecvTimeoutError::Disconnected) => app.hang_up("eof"),
            Ok(Msg::Signal) => app.hang_up("signal"),
            Ok(Msg::Resize) => {
                let (w, h) = term::size();
                app.resize(w, h);
            }
            Err(RecvTimeoutError::Timeout) => {
                if parser.has_pending() && last_input.elapsed() >= ESC_WAIT {
                    for key in parser.flush() {
                        app.key(key, now());
                    }
                }
                if parser.in_paste() && last_input.elapsed() >= STALE_PASTE {
                    if let Some(key) = parser.end_paste() {
                        app.key(key, now());
                    }
                }
            }
        }
    }
    let _ = painter.finish(&app.farewell());
    for event in app.take_events() {
        let _ = log.write(event);
    }
    drop(claude);
    drop(raw);
    Ok(app.exit_code().unwrap_or(0))
}

fn spawn_stdin_thread(tx: Sender<Msg>) {
    std::thread::spawn(move || {
        let mut stdin = io::stdin();
        let mut buf = [0u8; 8192];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(Msg::Input(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EIO: the pane's pty was closed.
                Err(_) => break,
            }
        }
        let _ = tx.send(Msg::Eof);
    });
}

fn spawn_signal_thread(tx: Sender<Msg>) {
    use tokio::signal::unix::{signal, SignalKind};
    // Handlers are installed before this returns, so a hang-up that comes right
    // after start-up still ends the program cleanly instead of killing it.
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            let _ = ready_tx.send(());
            return;
        };
        rt.block_on(async move {
            let signals = (
                signal(SignalKind::hangup()),
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
                signal(SignalKind::window_change()),
            );
            let _ = ready_tx.send(());
            let (Ok(mut hup), Ok(mut term), Ok(mut int), Ok(mut winch)) = signals else {
                return;
            };
            loop {
                let msg = tokio::select! {
                    _ = hup.recv() => Msg::Signal,
                    _ = term.recv() => Msg::Signal,
                    _ = int.recv() => Msg::Signal,
                    _ = winch.recv() => Msg::Resize,
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(2));
}

/// The working directory as the banner shows it (`~` for the home directory).
fn display_cwd() -> String {
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "?".into());
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && cwd.starts_with(&home) => {
            format!("~{}", &cwd[home.len()..])
        }
        _ => cwd,
    }
}

/// A random UUID-shaped session id for the resume hint.
fn session_id() -> String {
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.finish()
    };
    let hex = format!("{:016x}{:016x}", word(), word());
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_parse() {
        let c = parse_args(args(&[
            "--script",
            "s.json",
            "--log",
            "l.jsonl",
            "--drop-first-enter",
            "--ghost",
            "try",
            "--dialog",
        ]))
        .unwrap();
        assert_eq!(
            c,
            Command::Run(Options {
                script: Some("s.json".into()),
                log: Some("l.jsonl".into()),
                drop_enters: 1,
                ghost: Some("try".into()),
                dialog: true,
            })
        );
        assert_eq!(parse_args(args(&["-h"])).unwrap(), Command::Help);
        assert_eq!(
            parse_args(args(&["--drop-enters", "4"])).unwrap(),
            Command::Run(Options {
                drop_enters: 4,
                ..Default::default()
            })
        );
        assert!(parse_args(args(&["--drop-enters", "x"])).is_err());
        assert!(parse_args(args(&["--log"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse_args(args(&["--bogus"]))
            .unwrap_err()
            .contains("unknown argument"));
    }

    #[test]
    fn session_id_is_uuid_shaped() {
        let id = session_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
    }
}

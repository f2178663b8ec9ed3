//! Test harness around a private tmux server: start the stand-in in a pane of a
//! known size, type into it the way KARL's agent does (`load-buffer` +
//! `paste-buffer -p -r -d` + `send-keys Enter`), and read back the screen, the pane
//! metadata and the stand-in's log.
//!
//! Every test gets its own [`TmuxServer`], killed on drop, so a failing test leaves
//! nothing behind; this module adds the stand-in's helpers to it.
//!
//! [`Snapshot::detection_input`] hands a capture to the pane-state classifier.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use karl_common::detect::DetectionInput;

use super::log::{read_log, LogLine};
use crate::tmux_server::{unique, TmuxServer};

impl TmuxServer {
    /// Starts an empty server that stays up with no sessions (`exit-empty off`)
    /// and keeps dead panes (`remain-on-exit on`) so their exit status can be read.
    pub fn start() -> io::Result<TmuxServer> {
        let server = TmuxServer::new();
        server
            .run(&[
                "start-server",
                ";",
                "set-option",
                "-s",
                "exit-empty",
                "off",
                ";",
                "set-option",
                "-g",
                "remain-on-exit",
                "on",
            ])
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start tmux (is it installed?): {e}"),
                )
            })?;
        Ok(server)
    }

    /// Starts `argv` in a new session of `width`×`height` in `cwd`; returns the
    /// pane id (`%N`).
    pub fn new_pane(
        &self,
        width: u16,
        height: u16,
        cwd: &Path,
        argv: &[&str],
    ) -> io::Result<String> {
        let (w, h) = (width.to_string(), height.to_string());
        let session = unique("s");
        let cwd = cwd.display().to_string();
        let mut args = vec![
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            &w,
            "-y",
            &h,
            "-c",
            &cwd,
            "-P",
            "-F",
            "#{pane_id}",
        ];
        args.extend_from_slice(argv);
        Ok(self.run(&args)?.trim().to_string())
    }

    /// `capture-pane -p -e`: the visible screen with SGR attributes.
    pub fn capture_ansi(&self, pane: &str) -> io::Result<String> {
        self.run(&["capture-pane", "-p", "-e", "-t", pane])
    }

    /// The screen, its ANSI variant and the pane metadata the agent sends, taken
    /// together: the metadata and the ANSI capture sit between two identical plain
    /// captures (retried a few times while the pane changes), so a test never pairs
    /// a new screen with an old title.
    pub fn snapshot(&self, pane: &str) -> io::Result<Snapshot> {
        let mut snap = self.snapshot_once(pane)?;
        for _ in 0..20 {
            let again = self.capture(pane)?;
            if again == snap.text {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            snap = self.snapshot_once(pane)?;
        }
        Ok(snap)
    }

    fn snapshot_once(&self, pane: &str) -> io::Result<Snapshot> {
        let text = self.capture(pane)?;
        let ansi = self.capture_ansi(pane)?;
        let meta = self.run(&[
            "display-message",
            "-p",
            "-t",
            pane,
            "#{pane_current_command}\t#{cursor_x}\t#{cursor_y}\t#{pane_width}\t#{pane_height}\t#{pane_dead}\t#{pane_title}",
        ])?;
        let meta = meta.trim_end_matches('\n');
        let f: Vec<&str> = meta.splitn(7, '\t').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
        Ok(Snapshot {
            text,
            ansi,
            current_command: f.first().unwrap_or(&"").to_string(),
            cursor_x: num(1),
            cursor_y: num(2),
            width: num(3),
            height: num(4),
            dead: f.get(5) == Some(&"1"),
            title: f.get(6).unwrap_or(&"").to_string(),
        })
    }

    /// One format value of a pane, e.g. `#{pane_pid}`.
    pub fn pane_format(&self, pane: &str, format: &str) -> io::Result<String> {
        Ok(self
            .run(&["display-message", "-p", "-t", pane, format])?
            .trim_end_matches('\n')
            .to_string())
    }

    /// Pastes `text` the way KARL's agent does: `load-buffer` from stdin into a
    /// uniquely named buffer, then `paste-buffer -p -r -d` (bracketed, newlines
    /// kept, buffer deleted).
    pub fn paste(&self, pane: &str, text: &str) -> io::Result<()> {
        let buffer = unique("karl");
        self.run_with_input(&["load-buffer", "-b", &buffer, "-"], Some(text.as_bytes()))?;
        self.run(&["paste-buffer", "-p", "-r", "-d", "-b", &buffer, "-t", pane])?;
        Ok(())
    }

    /// `send-keys` with tmux key names (`Enter`, `Escape`, `1`, …).
    pub fn send_keys(&self, pane: &str, keys: &[&str]) -> io::Result<()> {
        let mut args = vec!["send-keys", "-t", pane];
        args.extend_from_slice(keys);
        self.run(&args)?;
        Ok(())
    }
}

/// A pane capture with the metadata the agent sends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub text: String,
    pub ansi: String,
    pub current_command: String,
    pub title: String,
    pub cursor_x: u32,
    pub cursor_y: u32,
    pub width: u32,
    pub height: u32,
    pub dead: bool,
}

impl Snapshot {
    /// The capture as the classifier's input.
    pub fn detection_input(&self) -> DetectionInput<'_> {
        DetectionInput {
            text: &self.text,
            ansi: Some(&self.ansi),
            current_command: &self.current_command,
            title: &self.title,
            cursor_x: Some(self.cursor_x),
            cursor_y: Some(self.cursor_y),
            width: Some(self.width),
            height: Some(self.height),
        }
    }
}

/// How to start the stand-in.
#[derive(Debug, Clone)]
pub struct StandinSpec {
    /// The `karl-standin` binary (`env!("CARGO_BIN_EXE_karl-standin")` in tests).
    pub binary: PathBuf,
    /// Flags other than `--script` and `--log`.
    pub args: Vec<String>,
    /// Script JSON, written to a file and passed as `--script`.
    pub script: Option<String>,
    pub width: u16,
    pub height: u16,
    /// Start it through a symlink named `claude`, so `pane_current_command` reads
    /// `claude` as with the real CLI.
    pub as_claude: bool,
    /// Run it under `sh -c` and leave an interactive `sh` in the pane when it exits
    /// (as the fixtures' `exec bash` runs do); its exit status goes to
    /// [`StandinPane::exit_status`].
    pub shell_after: bool,
    /// Working directory of the pane (default: the scratch directory).
    pub cwd: Option<PathBuf>,
    /// Extra environment for the stand-in (`HOME` decides how its banner shows the cwd).
    pub env: Vec<(String, String)>,
}

impl StandinSpec {
    /// 120×40, started as `claude`, no script (the built-in default reply).
    pub fn new(binary: impl Into<PathBuf>) -> StandinSpec {
        StandinSpec {
            binary: binary.into(),
            args: Vec::new(),
            script: None,
            width: 120,
            height: 40,
            as_claude: true,
            shell_after: false,
            cwd: None,
            env: Vec::new(),
        }
    }

    pub fn script(mut self, json: &str) -> Self {
        self.script = Some(json.to_string());
        self
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }

    pub fn size(mut self, width: u16, height: u16) -> Self {
        self.width = width;
        self.height = height;
        self
    }

    pub fn shell_after(mut self) -> Self {
        self.shell_after = true;
        self
    }

    /// Runs the pane in `dir` instead of the scratch directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Starts the stand-in in a new pane of `server`.
    pub fn start(self, server: &TmuxServer) -> io::Result<StandinPane<'_>> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("standin-log.jsonl");
        let status = dir.path().join("exit-status");
        let program = if self.as_claude {
            let bin = dir.path().join("bin");
            std::fs::create_dir(&bin)?;
            let link = bin.join("claude");
            std::os::unix::fs::symlink(&self.binary, &link)?;
            link
        } else {
            self.binary.clone()
        };
        let mut argv: Vec<String> = vec![program.display().to_string()];
        argv.push("--log".into());
        argv.push(log.display().to_string());
        if let Some(script) = &self.script {
            let path = dir.path().join("script.json");
            std::fs::write(&path, script)?;
            argv.push("--script".into());
            argv.push(path.display().to_string());
        }
        argv.extend(self.args.iter().cloned());
        if self.shell_after {
            let mut wrapped = vec![
                "sh".to_string(),
                "-c".to_string(),
                "\"$0\" \"$@\"; echo $? > \"$KARL_STANDIN_STATUS\"; exec sh -i".to_string(),
            ];
            wrapped.extend(argv);
            argv = vec![
                "env".into(),
                format!("KARL_STANDIN_STATUS={}", status.display()),
                "PS1=karl@standin proj $ ".into(),
            ];
            argv.extend(wrapped);
        }
        if !self.env.is_empty() {
            let mut with_env = vec!["env".to_string()];
            with_env.extend(self.env.iter().map(|(k, v)| format!("{k}={v}")));
            with_env.extend(argv);
            argv = with_env;
        }
        let argv_ref: Vec<&str> = argv.iter().map(String::as_str).collect();
        let cwd = self.cwd.as_deref().unwrap_or(dir.path());
        let pane = server.new_pane(self.width, self.height, cwd, &argv_ref)?;
        Ok(StandinPane {
            server,
            pane,
            log,
            status,
            dir,
        })
    }
}

/// A running stand-in and its files.
#[derive(Debug)]
pub struct StandinPane<'a> {
    pub server: &'a TmuxServer,
    /// The pane id (`%N`).
    pub pane: String,
    /// Its `--log` file.
    pub log: PathBuf,
    status: PathBuf,
    /// Scratch directory holding the log and script; the pane's working directory.
    pub dir: tempfile::TempDir,
}

impl StandinPane<'_> {
    /// The visible screen (`capture-pane -p`).
    pub fn screen(&self) -> io::Result<String> {
        self.server.capture(&self.pane)
    }

    /// Screen, ANSI screen and metadata.
    pub fn snapshot(&self) -> io::Result<Snapshot> {
        self.server.snapshot(&self.pane)
    }

    /// Everything logged so far.
    pub fn log(&self) -> Vec<LogLine> {
        read_log(&self.log)
    }

    /// Prompts logged so far, in order.
    pub fn prompts(&self) -> Vec<String> {
        super::log::prompts(&self.log)
    }

    /// Pastes `text` (no Enter).
    pub fn paste(&self, text: &str) -> io::Result<()> {
        self.server.paste(&self.pane, text)
    }

    /// Sends tmux key names.
    pub fn keys(&self, keys: &[&str]) -> io::Result<()> {
        self.server.send_keys(&self.pane, keys)
    }

    /// Pastes `text`, waits 150 ms as the agent does, presses Enter.
    pub fn submit(&self, text: &str) -> io::Result<()> {
        self.paste(text)?;
        std::thread::sleep(Duration::from_millis(150));
        self.keys(&["Enter"])
    }

    /// The stand-in's exit status when it ran with `shell_after` and has exited.
    pub fn exit_status(&self) -> Option<i32> {
        std::fs::read_to_string(&self.status)
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// Polls `check` every 50 ms until it returns `Some` or `timeout` passes; the error
/// names `what` and shows the last value `describe` gave.
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
    describe: impl Fn() -> String,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {timeout:?} waiting for {what}; last seen:\n{}",
                describe()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

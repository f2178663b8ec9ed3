//! The test twin: `tests/twin/server.mjs` serving a real small model (SmolLM2-135M-Instruct,
//! fetched by `scripts/fetch-model.sh`) as an OpenAI-compatible endpoint on loopback, started
//! as a child process for one test or benchmark and stopped when dropped.
//!
//! Not here: the model client (karl-coord's `model` module) or what the twin is asked.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The GGUF file `scripts/fetch-model.sh` unpacks, unless `KARL_TWIN_MODEL` names another.
pub fn model_path() -> PathBuf {
    if let Some(p) = std::env::var_os("KARL_TWIN_MODEL") {
        return PathBuf::from(p);
    }
    cache_dir()
        .join("models")
        .join("smollm2-135m-instruct")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("karl")
}

fn server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("twin/server.mjs")
}

/// A running twin server; killed on drop.
pub struct TwinServer {
    child: Child,
    // Held open: the server exits when its stdin closes, so a test killed outright does
    // not leave a model running.
    _stdin: Option<ChildStdin>,
    url: String,
    model: String,
    log: PathBuf,
}

impl TwinServer {
    /// Starts the server on a free loopback port and waits (up to a minute) until it has
    /// loaded the model. The error says what to do (usually: run `scripts/fetch-model.sh`).
    pub fn start(log: &Path) -> Result<TwinServer, String> {
        let model = model_path();
        if !model.is_file() {
            return Err(format!(
                "no twin model at {}: run scripts/fetch-model.sh (or set KARL_TWIN_MODEL)",
                model.display()
            ));
        }
        let stderr =
            std::fs::File::create(log).map_err(|e| format!("twin log {}: {e}", log.display()))?;
        let mut child = Command::new("node")
            .arg(server_script())
            .arg("--model")
            .arg(&model)
            .args(["--port", "0", "--exit-on-stdin-eof"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| {
                format!("cannot start node for the twin server: {e} (install Node.js 20+)")
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("twin server has no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = tx.send(first);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("listening"), Some(url), Some("model"), Some(name)) => Ok(TwinServer {
                url: url.to_string(),
                model: name.to_string(),
                child,
                _stdin: stdin,
                log: log.to_path_buf(),
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "the twin server did not start (printed {line:?}); its log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                ))
            }
        }
    }

    /// Base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> &str {
        &self.url
    }

    /// The model name the server reports.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// What the server wrote to stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the server process is still up.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for TwinServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

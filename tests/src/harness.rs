//! Real processes for end-to-end tests: a private tmux server per test, the
//! coordinator and agents as child processes on loopback, karl-ctl runs, and polling
//! with deadlines. Every guard cleans up on drop (kill-server, SIGKILL + wait), so a
//! failing test leaves no tmux server or process behind.
//!
//! The binaries are looked up next to the test executable (`target/<profile>/`); the
//! workspace test command (`cargo test --workspace`) builds them first.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::tmux_server::TmuxServer;

/// Path of a workspace binary, e.g. `bin("karl-agent")`.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is missing: run the workspace test command (cargo test --workspace), which builds it",
        p.display()
    );
    p
}

/// Starts karl-coord with `config` as its karl-coord.toml and a data dir not made yet;
/// asserts it refuses to start, before opening the data dir. Returns what it said.
pub fn coord_refuses_config(config: &str) -> String {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let file = dir.path().join("karl-coord.toml");
    std::fs::write(&file, config).unwrap_or_else(|e| panic!("write config: {e}"));
    let out = Command::new(bin("karl-coord"))
        .arg("--config")
        .arg(&file)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap_or_else(|e| panic!("run karl-coord: {e}"));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "karl-coord started: {err}");
    assert!(
        !dir.path().join("data").exists(),
        "nothing was opened before the check"
    );
    err
}

/// [`wait_for`] with a deadline in seconds that panics, naming `what`, when it passes.
pub fn wait_until<T>(what: &str, secs: u64, f: impl FnMut() -> Option<T>) -> T {
    wait_for(Duration::from_secs(secs), f).unwrap_or_else(|| panic!("timed out: {what}"))
}

/// Polls `f` until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A free loopback port (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A child process killed (SIGKILL) and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Self {
        let file =
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("log {}: {e}", log.display()));
        let err = file.try_clone().unwrap_or_else(|e| panic!("log: {e}"));
        cmd.stdin(Stdio::null()).stdout(file).stderr(err);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc {
            child,
            name: name.to_string(),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait up to `timeout` for a clean exit; returns the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        wait_for(timeout, || self.child.try_wait().ok().flatten())
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A karl-coord child on a free loopback port with its own data dir.
pub struct Coord {
    pub proc: Proc,
    pub addr: String,
    pub token: Option<String>,
    pub data_dir: PathBuf,
}

/// Scratch space for one test: data dirs, logs, HOME.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        Scratch {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}")),
        }
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// A command with a scrubbed environment: no KARL_* from the developer's shell but the
/// tmux program under test (`KARL_TMUX_BIN`, so agents run the same tmux as the test's
/// server), a private HOME so no personal config file is read.
pub fn karl_command(binary: &str, home: &Path) -> Command {
    let mut cmd = Command::new(bin(binary));
    for (k, _) in std::env::vars() {
        if k.starts_with("KARL_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("KARL_TMUX_BIN", karl_agent::tmux::program_from_env())
        .env("HOME", home)
        .env(
            "KARL_LOG",
            "info,coord.engine=debug,coord.engine.screen=trace,agent.inject=debug,agent.link=debug",
        )
        .env_remove("TMUX");
    cmd
}

impl Coord {
    /// Starts karl-coord with `extra` args; waits until it accepts connections.
    pub fn start(scratch: &Scratch, token: Option<&str>, extra: &[&str]) -> Coord {
        let port = free_port();
        let data_dir = scratch.path(&unique("coord-data"));
        Self::start_at(scratch, port, &data_dir, token, extra)
    }

    pub fn start_at(
        scratch: &Scratch,
        port: u16,
        data_dir: &Path,
        token: Option<&str>,
        extra: &[&str],
    ) -> Coord {
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = karl_command("karl-coord", scratch.dir.path());
        cmd.arg("--listen")
            .arg(&addr)
            .arg("--data-dir")
            .arg(data_dir);
        if let Some(t) = token {
            cmd.arg("--token").arg(t);
        }
        cmd.args(extra);
        let log = scratch.path(&unique("coord.log"));
        let mut proc = Proc::spawn("karl-coord", cmd, log);
        let up = wait_for(Duration::from_secs(20), || {
            if !proc.is_running() {
                return Some(false);
            }
            std::net::TcpStream::connect(&addr).ok().map(|_| true)
        });
        assert_eq!(
            up,
            Some(true),
            "karl-coord did not come up on {addr}; log:\n{}",
            proc.log_text()
        );
        Coord {
            proc,
            addr,
            token: token.map(String::from),
            data_dir: data_dir.to_path_buf(),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Starts karl-agent for `machine` against `coord_url` on the given tmux socket.
pub fn start_agent(
    scratch: &Scratch,
    coord_url: &str,
    machine: &str,
    token: Option<&str>,
    tmux_socket: &str,
) -> Proc {
    start_agent_with(scratch, coord_url, machine, token, tmux_socket, &[])
}

/// [`start_agent`] with `extra` flags (e.g. `--tls-ca FILE`).
pub fn start_agent_with(
    scratch: &Scratch,
    coord_url: &str,
    machine: &str,
    token: Option<&str>,
    tmux_socket: &str,
    extra: &[&str],
) -> Proc {
    start_agent_env(scratch, coord_url, machine, token, tmux_socket, extra, &[])
}

/// [`start_agent_with`] with extra environment (e.g. `KARL_TEST_FAULT`).
pub fn start_agent_env(
    scratch: &Scratch,
    coord_url: &str,
    machine: &str,
    token: Option<&str>,
    tmux_socket: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Proc {
    let mut cmd = karl_command("karl-agent", scratch.dir.path());
    cmd.args(extra);
    cmd.envs(env.iter().copied());
    cmd.arg("--coord")
        .arg(coord_url)
        .arg("--machine")
        .arg(machine)
        .arg("--tmux-socket")
        .arg(tmux_socket);
    if let Some(t) = token {
        cmd.arg("--token").arg(t);
    }
    Proc::spawn("karl-agent", cmd, scratch.path(&unique("agent.log")))
}

/// Result of one karl-ctl run.
#[derive(Debug)]
pub struct CtlOut {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CtlOut {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("karl-ctl output is not JSON ({e}): {self:?}"))
    }
}

/// Runs karl-ctl with `args` against `coord` (none: leave --coord unset).
pub fn ctl(scratch: &Scratch, coord: Option<&str>, token: Option<&str>, args: &[&str]) -> CtlOut {
    let mut cmd = karl_command("karl-ctl", scratch.dir.path());
    cmd.env("KARL_LOG", "warn");
    if let Some(c) = coord {
        cmd.arg("--coord").arg(c);
    }
    if let Some(t) = token {
        cmd.arg("--token").arg(t);
    }
    cmd.args(args);
    let out = cmd.output().unwrap_or_else(|e| panic!("run karl-ctl: {e}"));
    CtlOut {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Waits until `karl-ctl agents --json` lists `machine`; returns its entry.
pub fn wait_agent(
    scratch: &Scratch,
    coord: &Coord,
    machine: &str,
    timeout: Duration,
) -> Option<serde_json::Value> {
    wait_for(timeout, || {
        let out = ctl(
            scratch,
            Some(&coord.addr),
            coord.token.as_deref(),
            &["agents", "--json"],
        );
        if out.code != 0 {
            return None;
        }
        out.json()
            .as_array()?
            .iter()
            .find(|a| a["machine"] == machine)
            .cloned()
    })
}

/// A whole single-machine fleet for session tests: a private tmux server running
/// `karl-standin` in one pane, a coordinator (fast settle, generous rate limit, no
/// model unless `model_url` is given) and an agent for machine `mac2`.
pub struct Fleet {
    // Fields drop in order: the agent (and its tmux control clients) and the
    // coordinator go before the tmux server is killed and the scratch dir removed.
    pub agent: Proc,
    pub coord: Coord,
    pub tmux: TmuxServer,
    pub scratch: Scratch,
    pub pane: String,
    pub standin_log: PathBuf,
    pub config: PathBuf,
}

/// A stand-in script that answers every prompt after a quarter second of work.
pub const FAST_STANDIN: &str =
    r#"{"default": {"work_ms": 250, "reply": {"answer": "Done: {prompt}"}}}"#;

/// Whether a recorded turn's prompt went through the gate: its last gate line is the pass
/// of a model answer, the plan step or an escape prompt, as fits its source.
pub fn passed_the_gate(turn: &serde_json::Value) -> bool {
    let last = turn["gate"]
        .as_array()
        .and_then(|g| g.last())
        .and_then(|l| l.as_str())
        .unwrap_or("");
    match turn["source"].as_str().unwrap_or("") {
        "model" | "regenerated" => last.starts_with("pass (attempt"),
        "plan" => last == "plan step",
        "escape" => last == "escape prompt",
        _ => false,
    }
}

/// The turns of a `karl-ctl show --json` reply.
pub fn turns(show: &serde_json::Value) -> Vec<serde_json::Value> {
    show["turns"].as_array().cloned().unwrap_or_default()
}

/// Coordinator config for tests: fast settle, no rate limiting in the way.
pub const TEST_COORD_CONFIG: &str = r#"
[engine]
settle_ms = 300
max_injections_per_minute = 600
max_stalled_turns = 6
safety_secs = 5
"#;

impl Fleet {
    /// `standin_args`: extra flags for karl-standin (e.g. `--script FILE`);
    /// `coord_args`: extra flags for karl-coord (e.g. `--model-url URL`).
    pub fn start(standin_args: &[&str], coord_args: &[&str]) -> Fleet {
        Self::start_with(None, standin_args, coord_args)
    }

    /// Like [`Fleet::start`], with a stand-in script (JSON) written to the scratch dir.
    pub fn start_with(script: Option<&str>, standin_args: &[&str], coord_args: &[&str]) -> Fleet {
        Self::start_opts(script, standin_args, coord_args, false)
    }

    /// `shell_after`: the pane runs an interactive shell once the stand-in exits, as a
    /// developer's pane does when the agent CLI was started from a shell.
    pub fn start_opts(
        script: Option<&str>,
        standin_args: &[&str],
        coord_args: &[&str],
        shell_after: bool,
    ) -> Fleet {
        Self::start_in(
            Scratch::new(),
            script,
            standin_args,
            coord_args,
            shell_after,
        )
    }

    /// Like [`Fleet::start_with`], with `config` as the coordinator's `karl-coord.toml`
    /// instead of [`TEST_COORD_CONFIG`].
    pub fn start_with_config(script: Option<&str>, config: &str) -> Fleet {
        Self::start_with_config_env(script, config, &[])
    }

    /// Like [`Fleet::start_with_config`], with extra environment for karl-agent.
    pub fn start_with_config_env(
        script: Option<&str>,
        config: &str,
        agent_env: &[(&str, &str)],
    ) -> Fleet {
        let scratch = Scratch::new();
        std::fs::write(scratch.path("karl-coord.toml"), config)
            .unwrap_or_else(|e| panic!("write config: {e}"));
        Self::start_in_token(scratch, script, &[], &[], false, None, agent_env)
    }

    /// Like [`Fleet::start_with`], with the coordinator (and so the agent and karl-ctl)
    /// on a shared token.
    pub fn start_with_token(script: Option<&str>, token: &str, coord_args: &[&str]) -> Fleet {
        Self::start_in_token(
            Scratch::new(),
            script,
            &[],
            coord_args,
            false,
            Some(token),
            &[],
        )
    }

    fn start_in(
        scratch: Scratch,
        script: Option<&str>,
        standin_args: &[&str],
        coord_args: &[&str],
        shell_after: bool,
    ) -> Fleet {
        Self::start_in_token(
            scratch,
            script,
            standin_args,
            coord_args,
            shell_after,
            None,
            &[],
        )
    }

    fn start_in_token(
        scratch: Scratch,
        script: Option<&str>,
        standin_args: &[&str],
        coord_args: &[&str],
        shell_after: bool,
        token: Option<&str>,
        agent_env: &[(&str, &str)],
    ) -> Fleet {
        let tmux = TmuxServer::new();
        let standin_log = scratch.path("standin.log");
        let mut cmd = vec![
            bin("karl-standin").display().to_string(),
            "--log".into(),
            standin_log.display().to_string(),
        ];
        if let Some(json) = script {
            let path = scratch.path("standin-script.json");
            std::fs::write(&path, json).unwrap_or_else(|e| panic!("write script: {e}"));
            cmd.push("--script".into());
            cmd.push(path.display().to_string());
        }
        cmd.extend(standin_args.iter().map(|s| s.to_string()));
        let mut cmdline = cmd
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ");
        if shell_after {
            cmdline = format!("{cmdline}; PS1='dev@mac2 proj $ ' exec bash --norc --noprofile -i");
        }
        let pane = tmux
            .new_session("work", 120, 40, &cmdline)
            .expect("tmux new-session");
        let fleet = Self::launch_env(
            scratch,
            tmux,
            pane,
            standin_log,
            coord_args,
            agent_env,
            token,
        );
        // The stand-in's first screen.
        wait_for(Duration::from_secs(10), || {
            fleet.screen().contains('❯').then_some(())
        })
        .expect("stand-in did not draw its input box");
        fleet
    }

    /// A fleet whose pane runs `cmdline` (a shell command line, e.g. a real coding-agent
    /// CLI with its environment) in a `width`×`height` pane, in `scratch` prepared by the
    /// caller. It returns once the agent is connected, without waiting for the pane to
    /// draw anything; `standin_log` is unused. A `karl-coord.toml` already in `scratch`
    /// is used instead of [`TEST_COORD_CONFIG`].
    pub fn start_command(
        scratch: Scratch,
        cmdline: &str,
        width: u16,
        height: u16,
        coord_args: &[&str],
    ) -> Fleet {
        Self::start_command_env(scratch, cmdline, width, height, coord_args, &[])
    }

    /// [`Fleet::start_command`] with extra environment for karl-agent.
    pub fn start_command_env(
        scratch: Scratch,
        cmdline: &str,
        width: u16,
        height: u16,
        coord_args: &[&str],
        agent_env: &[(&str, &str)],
    ) -> Fleet {
        let tmux = TmuxServer::new();
        let standin_log = scratch.path("standin.log");
        let pane = tmux
            .new_session("work", width, height, cmdline)
            .expect("tmux new-session");
        Self::launch_env(
            scratch,
            tmux,
            pane,
            standin_log,
            coord_args,
            agent_env,
            None,
        )
    }

    /// Coordinator (test config, no model unless `coord_args` names one) and agent for
    /// machine `mac2`, around an already started pane.
    fn launch_env(
        scratch: Scratch,
        tmux: TmuxServer,
        pane: String,
        standin_log: PathBuf,
        coord_args: &[&str],
        agent_env: &[(&str, &str)],
        token: Option<&str>,
    ) -> Fleet {
        // A caller that prepared `scratch` may have written its own config already.
        let config = scratch.path("karl-coord.toml");
        if !config.exists() {
            std::fs::write(&config, TEST_COORD_CONFIG)
                .unwrap_or_else(|e| panic!("write config: {e}"));
        }
        let mut args: Vec<&str> = vec!["--config", config.to_str().unwrap_or_default()];
        if !coord_args.contains(&"--model-url") {
            // No model: a closed port, so sessions run plan-only without waiting on timeouts.
            args.extend(["--model-url", "http://127.0.0.1:9/v1"]);
        }
        args.extend_from_slice(coord_args);
        let coord = Coord::start(&scratch, token, &args);
        let agent = start_agent_env(
            &scratch,
            &coord.url(),
            "mac2",
            token,
            tmux.socket(),
            &[],
            agent_env,
        );
        wait_agent(&scratch, &coord, "mac2", Duration::from_secs(15))
            .expect("agent did not connect");
        Fleet {
            scratch,
            tmux,
            coord,
            agent,
            pane,
            standin_log,
            config,
        }
    }

    /// The coordinator's port.
    pub fn coord_port(&self) -> u16 {
        self.coord
            .addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {}", self.coord.addr))
    }

    /// Starts karl-coord again on the same address, data and config (no model), once the
    /// test has stopped or killed the running one; waits until it listens.
    pub fn restart_coord(&mut self) {
        let config = self.config.display().to_string();
        let data_dir = self.coord.data_dir.clone();
        self.coord = Coord::start_at(
            &self.scratch,
            self.coord_port(),
            &data_dir,
            self.coord.token.clone().as_deref(),
            &["--config", &config, "--model-url", "http://127.0.0.1:9/v1"],
        );
    }

    /// Starts a new agent for `mac2` on the fleet's tmux server (the test has killed or
    /// stopped the old one).
    pub fn restart_agent(&mut self) {
        self.restart_agent_env(&[]);
    }

    /// [`Fleet::restart_agent`] with extra environment for karl-agent.
    pub fn restart_agent_env(&mut self, env: &[(&str, &str)]) {
        self.agent = start_agent_env(
            &self.scratch,
            &self.coord.url(),
            "mac2",
            self.coord.token.as_deref(),
            self.tmux.socket(),
            &[],
            env,
        );
    }

    /// Runs karl-ctl against this fleet's coordinator.
    pub fn ctl(&self, args: &[&str]) -> CtlOut {
        ctl(
            &self.scratch,
            Some(&self.coord.addr),
            self.coord.token.as_deref(),
            args,
        )
    }

    /// Starts a session; returns its id.
    pub fn drive(&self, args: &[&str]) -> String {
        let mut a = vec!["drive", "mac2", self.pane.as_str(), "--json"];
        a.extend_from_slice(args);
        let out = self.ctl(&a);
        assert_eq!(out.code, 0, "drive failed: {out:?}");
        out.json()["id"].as_str().unwrap_or_default().to_string()
    }

    /// `karl-ctl show ID --json`.
    pub fn show(&self, id: &str) -> serde_json::Value {
        let out = self.ctl(&["show", id, "--json"]);
        assert_eq!(out.code, 0, "show failed: {out:?}");
        out.json()
    }

    /// Waits until the session's status satisfies `pred`; returns the last `show`.
    pub fn wait_status(
        &self,
        id: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> serde_json::Value {
        let mut last = serde_json::Value::Null;
        let ok = wait_for(timeout, || {
            last = self.show(id);
            pred(last["session"]["status"].as_str().unwrap_or("")).then_some(())
        });
        assert!(
            ok.is_some(),
            "session {id} never reached the expected status; last: {last:#}\ncoord log:\n{}",
            tail(&self.coord.proc.log_text(), 40)
        );
        last
    }

    /// Writes a plan file of `steps` distinct numbered steps; returns its path.
    pub fn plan_file(&self, steps: usize) -> String {
        let lines: Vec<String> = (1..=steps)
            .map(|i| format!("Implement step {i} of the parser: handle token kind number {i}."))
            .collect();
        self.plan(&lines.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Writes a plan file with these steps (one per line, after a comment); returns its path.
    pub fn plan(&self, steps: &[&str]) -> String {
        let path = self.scratch.path("plan.txt");
        let text = format!("# a plan: one step per line\n\n{}\n", steps.join("\n"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write plan: {e}"));
        path.display().to_string()
    }

    /// The fleet pane's visible screen (panics when tmux cannot capture it).
    pub fn screen(&self) -> String {
        self.tmux.capture(&self.pane).expect("tmux capture-pane")
    }

    /// Prompts the stand-in received, in order, byte for byte.
    pub fn received(&self) -> Vec<String> {
        standin_events(&self.standin_log, "prompt")
            .into_iter()
            .filter_map(|e| e["prompt"].as_str().map(String::from))
            .collect()
    }
}

/// A one-worker runtime for an in-process stub (model, receiver) beside a test that
/// otherwise blocks.
pub fn stub_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A JSONL file's rows (panics, naming the file or the line, when it cannot).
pub fn read_jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// The stand-in's log events of one kind.
pub fn standin_events(log: &Path, event: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == event)
        .collect()
}

/// KARL's own log lines (not the HTTP/2 frame chatter of debug logging).
pub fn grep_karl(log: &str) -> String {
    log.lines()
        .filter(|l| l.contains("coord") || l.contains("agent.") || l.contains("karl"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The last `n` lines of a log.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Single-quotes a word for the shell tmux runs a pane's command with.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

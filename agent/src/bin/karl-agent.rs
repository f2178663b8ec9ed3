//! karl-agent: parse flags, merge config, set up tracing, run until Ctrl-C / SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use karl_agent::config::{read_file, AgentConfig, LinkConfig};
use karl_common::tls::{ClientTlsFiles, CoordAddr};

#[derive(Debug, Parser)]
#[command(
    name = "karl-agent",
    version,
    about = "Watch tmux panes on this Mac and type into them for the KARL coordinator."
)]
struct Args {
    /// Coordinator URL, e.g. http://mac5.local:7400, or https://mac5.local:7400 for TLS.
    #[arg(long, env = "KARL_COORD")]
    coord: Option<String>,
    /// This Mac's fleet name, e.g. mac2.
    #[arg(long, env = "KARL_MACHINE")]
    machine: Option<String>,
    /// The coordinator's shared token.
    #[arg(long, env = "KARL_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// tmux server: socket name (-L) or, with a '/', socket path (-S). Default: the user's.
    #[arg(long, env = "KARL_TMUX_SOCKET")]
    tmux_socket: Option<String>,
    /// The tmux program (a path or a name on PATH). Default: tmux.
    #[arg(long, env = "KARL_TMUX_BIN")]
    tmux_bin: Option<String>,
    /// TLS: PEM of the CA that signed the coordinator's certificate (default: the system's CAs).
    #[arg(long, env = "KARL_TLS_CA")]
    tls_ca: Option<PathBuf>,
    /// TLS: this agent's client certificate (PEM), for a coordinator that requires one.
    #[arg(long, env = "KARL_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// TLS: the private key of --tls-cert (PEM).
    #[arg(long, env = "KARL_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// TLS: the name to check the coordinator's certificate against (default: the host dialed).
    #[arg(long, env = "KARL_TLS_DOMAIN")]
    tls_domain: Option<String>,
    /// Where to listen for Claude Code hook events (`hooks install`). Default:
    /// ~/.karl/agent.sock.
    #[arg(long, env = "KARL_HOOK_SOCKET")]
    hook_socket: Option<PathBuf>,
    /// The program that shows the coordinator's macOS notifications. Default: osascript.
    #[arg(long, env = "KARL_NOTIFIER")]
    notifier: Option<String>,
    /// Config file (TOML); default ~/.config/karl/karl-agent.toml if present.
    #[arg(long, env = "KARL_AGENT_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The command Claude Code runs for each hook event (written by `hooks install`):
    /// reads the event on stdin and hands it to this Mac's karl-agent.
    Hook {
        /// The CLI sending the event (`claude` or `codex`; both send the same JSON).
        cli: String,
        /// The agent's hook socket.
        #[arg(long)]
        socket: PathBuf,
        /// Marks the commands KARL installed.
        #[arg(long = "karl-managed")]
        managed: bool,
    },
    /// Add, show or remove KARL's hooks in the CLIs' settings (opt-in).
    Hooks {
        #[command(subcommand)]
        action: HooksAction,
    },
}

#[derive(Debug, Subcommand)]
enum HooksAction {
    /// Add KARL's PermissionRequest hook (with a backup of the settings file).
    Install(HooksArgs),
    /// Show what KARL installed and whether the agent's socket answers.
    Status(HooksArgs),
    /// Remove exactly what `install` added (with a backup).
    Uninstall(HooksArgs),
}

#[derive(Debug, clap::Args)]
struct HooksArgs {
    /// Claude Code (the default).
    #[arg(long)]
    claude: bool,
    /// Codex.
    #[arg(long)]
    codex: bool,
    /// The settings file. Default for Claude Code: $CLAUDE_CONFIG_DIR/settings.json, else
    /// ~/.claude/settings.json; for Codex: $CODEX_HOME/hooks.json, else
    /// ~/.codex/hooks.json.
    #[arg(long)]
    settings: Option<PathBuf>,
    /// The agent's hook socket the hook should report to. Default: ~/.karl/agent.sock.
    #[arg(long, env = "KARL_HOOK_SOCKET")]
    socket: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.cmd {
        // Runs inside the developer's CLI: never in its way, always exit 0.
        Some(Cmd::Hook { socket, .. }) => {
            let pane = std::env::var("TMUX_PANE").unwrap_or_default();
            let out = karl_agent::hooks::report::run(
                &socket,
                std::io::stdin().lock(),
                &pane,
                karl_agent::hooks::report::WAIT,
            );
            if !out.is_empty() {
                println!("{out}");
            }
            ExitCode::SUCCESS
        }
        Some(Cmd::Hooks { action }) => match hooks_cmd(action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("karl-agent hooks: {e:#}");
                ExitCode::FAILURE
            }
        },
        None => serve(args),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn serve(args: Args) -> ExitCode {
    karl_common::init_logging("info");
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("karl-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(p) => read_file(p, true).map_err(anyhow::Error::msg)?,
        None => match dirs_config() {
            Some(p) => read_file(&p, false).map_err(anyhow::Error::msg)?,
            None => Default::default(),
        },
    };
    let coord = args
        .coord
        .or(file.coord)
        .unwrap_or_else(|| "http://127.0.0.1:7400".to_string());
    let tls = ClientTlsFiles {
        ca: args.tls_ca,
        cert: args.tls_cert,
        key: args.tls_key,
        domain: args.tls_domain,
    }
    .or(file.tls.unwrap_or_default());
    let coord = CoordAddr::new(&coord, &tls)?;
    let machine = args
        .machine
        .or(file.machine)
        .or_else(|| {
            hostname::get().ok().map(|h| {
                h.to_string_lossy()
                    .split('.')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
        })
        .context("no machine name: pass --machine (e.g. --machine mac2)")?;
    if !karl_common::target::valid_machine_name(&machine) {
        anyhow::bail!("invalid machine name {machine:?}: use letters, digits, '-', '_' or '.'");
    }
    let token = args.token.or(file.token).filter(|t| !t.is_empty());
    let mut cfg = LinkConfig::new(coord, machine, token);
    if let Some(s) = file.heartbeat_secs {
        cfg.heartbeat = Duration::from_secs(s.max(1));
    }
    if let Some(s) = file.backoff_max_secs {
        cfg.backoff_max = Duration::from_secs(s.max(1));
    }
    let config = AgentConfig {
        link: cfg,
        tmux_socket: args.tmux_socket.or(file.tmux_socket),
        tmux_bin: args
            .tmux_bin
            .or(file.tmux_bin)
            .unwrap_or_else(|| "tmux".to_string()),
        hook_socket: args
            .hook_socket
            .or(file.hook_socket.map(PathBuf::from))
            .or_else(karl_agent::hooks::default_socket),
        notifier: args
            .notifier
            .or(file.notifier)
            .unwrap_or_else(|| karl_agent::notify::OSASCRIPT.to_string()),
    };
    if let Some(s) = &config.hook_socket {
        karl_agent::hooks::socket::check_path(s).map_err(anyhow::Error::msg)?;
    }
    karl_agent::run(config, karl_common::shutdown_signal()).await?;
    Ok(())
}

fn dirs_config() -> Option<PathBuf> {
    karl_common::default_config_path("karl-agent.toml")
}

/// `karl-agent hooks install|status|uninstall`, for each CLI asked for.
fn hooks_cmd(action: HooksAction) -> anyhow::Result<()> {
    use karl_common::evidence::Cli;
    let (args, verb) = match action {
        HooksAction::Install(a) => (a, "install"),
        HooksAction::Status(a) => (a, "status"),
        HooksAction::Uninstall(a) => (a, "uninstall"),
    };
    let clis: Vec<Cli> = match (args.claude, args.codex) {
        (true, true) => vec![Cli::Claude, Cli::Codex],
        (false, true) => vec![Cli::Codex],
        _ => vec![Cli::Claude],
    };
    if clis.len() > 1 && args.settings.is_some() {
        anyhow::bail!(
            "--settings names one file: pass it with --claude or --codex alone; nothing changed"
        );
    }
    let socket = args
        .socket
        .or_else(karl_agent::hooks::default_socket)
        .context("no HOME: pass --socket PATH")?;
    karl_agent::hooks::socket::check_path(&socket).map_err(anyhow::Error::msg)?;
    for cli in clis {
        let env = |k: &str| std::env::var(k).ok();
        let path = match (&args.settings, cli) {
            (Some(p), _) => p.clone(),
            (None, Cli::Claude) => karl_common::evidence::claude::config_dir(&env)
                .context("no HOME: pass --settings PATH")?
                .join("settings.json"),
            (None, Cli::Codex) => karl_common::evidence::codex::codex_home(&env)
                .context("no HOME: pass --settings PATH")?
                .join("hooks.json"),
        };
        hooks_file(cli, verb, &path, &socket)?;
    }
    Ok(())
}

/// One CLI's hooks file: install, show or remove KARL's entry, with a backup of what was
/// there before any change.
fn hooks_file(
    cli: karl_common::evidence::Cli,
    verb: &str,
    path: &std::path::Path,
    socket: &std::path::Path,
) -> anyhow::Result<()> {
    use karl_agent::hooks::settings;
    use karl_common::evidence::Cli;
    let original = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut value: serde_json::Value = match &original {
        Some(t) if !t.trim().is_empty() => serde_json::from_str(t).with_context(|| {
            format!(
                "{} is not valid JSON; fix it first, nothing changed",
                path.display()
            )
        })?,
        _ => serde_json::json!({}),
    };
    let changed = match verb {
        "install" => {
            let exe = std::env::current_exe().context("cannot tell where karl-agent is")?;
            let (name, matcher) = match cli {
                Cli::Claude => ("claude", Some("*")),
                Cli::Codex => ("codex", None),
            };
            let command = format!(
                "{} hook {name} --socket {} {}",
                karl_agent::hooks::shell_word(&exe.display().to_string()),
                karl_agent::hooks::shell_word(&socket.display().to_string()),
                settings::MARKER
            );
            let changed = settings::install(&mut value, &command, matcher)
                .map_err(|e| anyhow::anyhow!("{}: {e}; nothing changed", path.display()))?;
            println!(
                "{}: PermissionRequest hook {} (reports to {})",
                path.display(),
                if changed {
                    "installed"
                } else {
                    "already installed"
                },
                socket.display()
            );
            if cli == Cli::Codex {
                println!(
                    "Codex runs a hook only once it is trusted: open /hooks in Codex and trust \
                     KARL's, or start Codex with --dangerously-bypass-hook-trust"
                );
            }
            changed
        }
        "uninstall" => {
            let n = settings::uninstall(&mut value);
            println!(
                "{}: removed {n} KARL hook entr{}",
                path.display(),
                if n == 1 { "y" } else { "ies" }
            );
            n > 0
        }
        _ => {
            let found = settings::installed(&value);
            if found.is_empty() {
                println!("{}: no KARL hooks", path.display());
            }
            for (event, command) in found {
                println!("{}: {event} → {command}", path.display());
            }
            let live = std::os::unix::net::UnixStream::connect(socket).is_ok();
            println!(
                "agent socket {}: {}",
                socket.display(),
                if live {
                    "answering"
                } else {
                    "not answering (hooks step aside)"
                }
            );
            false
        }
    };
    if changed {
        if let Some(text) = &original {
            let backup =
                path.with_extension(format!("json.karl-backup-{}", karl_common::unix_ms()));
            std::fs::write(&backup, text).with_context(|| {
                format!(
                    "cannot write the backup {}; nothing changed",
                    backup.display()
                )
            })?;
            println!("backup: {}", backup.display());
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let tmp = path.with_extension("json.karl-tmp");
        let text = serde_json::to_string_pretty(&value)? + "\n";
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot replace {}", path.display()))?;
    }
    Ok(())
}

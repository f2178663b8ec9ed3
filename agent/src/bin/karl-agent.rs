//! karl-agent: parse flags, merge config, set up tracing, run until Ctrl-C / SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
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
    /// Config file (TOML); default ~/.config/karl/karl-agent.toml if present.
    #[arg(long, env = "KARL_AGENT_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    karl_common::init_logging("info");
    let args = Args::parse();
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
    };
    karl_agent::run(config, karl_common::shutdown_signal()).await?;
    Ok(())
}

fn dirs_config() -> Option<PathBuf> {
    karl_common::default_config_path("karl-agent.toml")
}

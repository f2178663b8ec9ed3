//! karl-coord: parse flags, merge config, set up tracing, bind, run until Ctrl-C / SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use karl_coord::config::{
    check_listen, default_data_dir, read_toml, resolve_tls, CoordConfig, CoordFile, LocalPane,
    ModelSetting, TlsFile, DEFAULT_LISTEN,
};

#[derive(Debug, Parser)]
#[command(
    name = "karl-coord",
    version,
    about = "The KARL coordinator: owns sessions, asks the twin model, types through the agents."
)]
struct Args {
    /// Address to serve both gRPC services on.
    #[arg(long, env = "KARL_LISTEN")]
    listen: Option<String>,
    /// Serve the dashboard and /metrics on this address (HTTP), e.g. 127.0.0.1:7401.
    /// Without a token, only loopback.
    #[arg(long, env = "KARL_HTTP")]
    http: Option<String>,
    /// Publish turn and session events to this NATS server, e.g. nats://mac5:4222
    /// (`[events] nats_url`). Fire-and-forget: sessions never wait on it.
    #[arg(long, env = "KARL_NATS_URL")]
    nats_url: Option<String>,
    /// Shared token every agent and karl-ctl must present. Without one, only loopback.
    #[arg(long, env = "KARL_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Where the sled database lives (default $KARL_HOME, else the user's data dir/karl).
    #[arg(long, env = "KARL_HOME")]
    data_dir: Option<PathBuf>,
    /// OpenAI-compatible base URL; repeat for fallbacks (first is primary).
    #[arg(long = "model-url", env = "KARL_MODEL_URL", value_delimiter = ',')]
    model_url: Vec<String>,
    /// Model name sent to the server.
    #[arg(long, env = "KARL_MODEL")]
    model: Option<String>,
    /// PEM of a private CA to trust for https:// model endpoints (besides the system's CAs).
    #[arg(long, env = "KARL_MODEL_CA")]
    model_ca: Option<PathBuf>,
    /// Serve over TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, env = "KARL_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "KARL_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mTLS.
    #[arg(long, env = "KARL_TLS_CLIENT_CA")]
    tls_client_ca: Option<PathBuf>,
    /// Directory of detection-rule manifests overriding the embedded ones.
    #[arg(long, env = "KARL_RULES")]
    rules: Option<PathBuf>,
    /// The gate's embedding model: a directory (scripts/fetch-model.sh), or "off".
    #[arg(long, env = "KARL_GATE_MODEL")]
    gate_model: Option<String>,
    /// Also run an agent in this process (single-Mac setup).
    #[arg(long)]
    local_agent: bool,
    /// Machine name of the in-process agent.
    #[arg(long, env = "KARL_MACHINE")]
    machine: Option<String>,
    /// tmux server of the in-process agent: socket name (-L) or path (-S).
    #[arg(long, env = "KARL_TMUX_SOCKET")]
    tmux_socket: Option<String>,
    /// tmux program of the in-process agent (a path or a name on PATH). Default: tmux.
    #[arg(long, env = "KARL_TMUX_BIN")]
    tmux_bin: Option<String>,
    /// Start the local agent's tmux server (--tmux-socket) with one session, `karl`,
    /// whose pane runs this shell command; stopped when the coordinator stops.
    #[arg(long)]
    local_pane: Option<String>,
    /// Leave the --local-pane tmux server running when the coordinator stops.
    #[arg(long, requires = "local_pane")]
    keep_local_pane: bool,
    /// Answer from this script instead of a model server: a JSON array of replies, given
    /// in order (for demos and dry runs; `karl-ctl demo` writes one when no model answers).
    #[arg(long, value_name = "FILE")]
    scripted_twin: Option<PathBuf>,
    /// Config file (TOML); default ~/.config/karl/karl-coord.toml if present.
    #[arg(long, env = "KARL_COORD_CONFIG")]
    config: Option<PathBuf>,
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    karl_common::init_logging("info");
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("karl-coord: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn resolve(args: Args) -> anyhow::Result<CoordConfig> {
    let file: CoordFile = match &args.config {
        Some(p) => read_toml(p, true)?.unwrap_or_default(),
        None => match karl_common::default_config_path("karl-coord.toml") {
            Some(p) => read_toml(&p, false)?.unwrap_or_default(),
            None => CoordFile::default(),
        },
    };
    let token = args.token.or(file.token);
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listen = check_listen(&listen, token.as_deref())?;
    let http = args
        .http
        .or(file.http)
        .map(|h| check_listen(&h, token.as_deref()))
        .transpose()
        .context("the dashboard's address (--http / KARL_HTTP / http in the config file)")?;
    let mut model = file.model.clone().unwrap_or_default();
    if !args.model_url.is_empty() {
        model.urls = args.model_url;
    }
    if args.model.is_some() {
        model.model = args.model;
    }
    if args.model_ca.is_some() {
        model.ca = args.model_ca;
    }
    model.validate().context("model settings")?;
    let context = file.context.clone().unwrap_or_default();
    context.validate().context("[context] settings")?;
    let local_agent = args.local_agent || file.local_agent.unwrap_or(false);
    let notify = file
        .notify
        .clone()
        .unwrap_or_default()
        .resolve()
        .map_err(anyhow::Error::msg)
        .context("[notify] settings in karl-coord.toml")?;
    let mut events = file.events.clone().unwrap_or_default();
    if args.nats_url.is_some() {
        events.nats_url = args.nats_url;
    }
    let nats_url = events
        .resolve()
        .map_err(anyhow::Error::msg)
        .context("NATS events (--nats-url / KARL_NATS_URL / [events] nats_url)")?;
    let tls = resolve_tls(
        TlsFile {
            cert: args.tls_cert,
            key: args.tls_key,
            client_ca: args.tls_client_ca,
        },
        file.tls,
        local_agent,
    )?;
    Ok(CoordConfig {
        listen,
        http,
        token,
        data_dir: args
            .data_dir
            .or(file.data_dir)
            .unwrap_or_else(default_data_dir),
        rules_dir: args.rules.or(file.rules_dir),
        local_agent,
        local_machine: args
            .machine
            .or(file.local_machine)
            .unwrap_or_else(|| "local".to_string()),
        tmux_socket: args.tmux_socket.or(file.tmux_socket),
        tmux_bin: args
            .tmux_bin
            .or(file.tmux_bin)
            .unwrap_or_else(|| "tmux".to_string()),
        model,
        context,
        engine: file.engine.unwrap_or_default(),
        tls,
        local_pane: args.local_pane.map(|command| LocalPane {
            command,
            keep: args.keep_local_pane,
        }),
        second_opinion: file
            .gate
            .as_ref()
            .and_then(|g| g.second_opinion)
            .unwrap_or(true),
        gate_model: args
            .gate_model
            .or(file.gate.and_then(|g| g.model))
            .map(|m| ModelSetting::parse(&m))
            .unwrap_or_default(),
        scripted_twin: args.scripted_twin.as_deref().map(read_script).transpose()?,
        notify,
        nats_url,
    })
}

async fn run(args: Args) -> anyhow::Result<()> {
    let cfg = resolve(args)?;
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (is another karl-coord running there?)",
                cfg.listen
            )
        })?;
    karl_coord::app::run(cfg, listener, karl_common::shutdown_signal()).await?;
    Ok(())
}

/// `--scripted-twin FILE`: a JSON array of reply strings.
fn read_script(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the scripted twin {}", path.display()))?;
    let replies: Vec<String> = serde_json::from_str(&text).with_context(|| {
        format!(
            "the scripted twin {} must be a JSON array of strings, one reply each",
            path.display()
        )
    })?;
    anyhow::ensure!(
        !replies.is_empty(),
        "the scripted twin {} has no replies",
        path.display()
    );
    Ok(replies)
}

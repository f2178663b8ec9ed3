//! Assembling a running coordinator from its configuration: open the store, build the
//! registry and engine, serve on the listener, and (with `--local-agent`) run an agent
//! in-process that dials back over loopback. Used by the `karl-coord` binary, by
//! `karl-ctl demo` and by the tests, so all three run the same wiring.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;

use karl_common::detect::Detector;

use crate::config::{CoordConfig, LocalPane};
use crate::engine::Engine;
use crate::error::{CoordError, Result};
use crate::model::{HttpModelClient, ModelClient, ScriptedModel};
use crate::notify::Notifier;
use crate::registry::Registry;
use crate::server::{serve, tls_config, Closing, ServerState};
use crate::store::Store;
use crate::web::{WebState, WebTls};

/// Runs the coordinator on `listener` until `shutdown` completes.
pub async fn run(
    cfg: CoordConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    // Files first: a bad certificate is a startup error, before anything else opens.
    let tls = cfg.tls.as_ref().map(tls_config).transpose()?;
    // The dashboard serves HTTPS (and mTLS) with the same files when TLS is on.
    let web_tls = match (&cfg.tls, cfg.http) {
        (Some(t), Some(_)) => Some(crate::web::tls::acceptor(t)?),
        _ => None,
    };
    if tls.is_some() && cfg.local_agent {
        return Err(CoordError::InvalidArgument(
            "--local-agent cannot dial a TLS listener: run karl-agent beside the coordinator instead".into(),
        ));
    }
    let store = Store::open(&cfg.data_dir)?;
    // Before any session resumes, so a taken address stops startup with nothing begun.
    let dashboard_listener = match cfg.http {
        Some(at) => Some(TcpListener::bind(at).await.map_err(|e| {
            CoordError::InvalidArgument(format!(
                "cannot serve the dashboard on {at}: {e} (is another karl-coord there? pick another --http)"
            ))
        })?),
        None => None,
    };
    let registry = Arc::new(Registry::new());
    let detector = match &cfg.rules_dir {
        Some(dir) => Detector::from_dir(dir)?,
        None => Detector::embedded(),
    };
    let model: Option<Arc<dyn ModelClient>> = if let Some(replies) = &cfg.scripted_twin {
        tracing::info!(target: "coord", replies = replies.len(), "the twin is a script, not a model server");
        Some(Arc::new(ScriptedModel::texts(replies.clone())))
    } else if cfg.model.urls.is_empty() {
        None
    } else {
        Some(Arc::new(HttpModelClient::new(cfg.model.clone()).map_err(
            |e| CoordError::InvalidArgument(format!("model settings: {e}")),
        )?))
    };
    let (gate, gate_note) = cfg
        .gate_model
        .load()
        .map_err(|e| CoordError::InvalidArgument(format!("[gate] model: {e}")))?;
    if gate.model_name().is_some() {
        tracing::info!(target: "coord", "{gate_note}");
    } else {
        tracing::warn!(target: "coord", "{gate_note}");
    }
    if model.is_some() {
        let opinion = if cfg.second_opinion {
            "the twin's model gives a second opinion on prompts the gate passes in doubt"
        } else {
            "second opinions are off: prompts the gate passes in doubt are typed"
        };
        tracing::info!(target: "coord", "{opinion}");
    }
    let mut engine_cfg = cfg.engine_config();
    engine_cfg.gate = Arc::new(gate);
    let engine = Engine::new(registry.clone(), store, detector, model, engine_cfg);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // Before sessions resume, so nothing a resumed session says goes unheard.
    let notifier = Notifier::start(
        cfg.notify.clone(),
        &engine,
        registry.clone(),
        stop_rx.clone(),
    )?;
    let events = cfg
        .nats_url
        .clone()
        .map(|url| crate::events::start(url, &engine, stop_rx.clone()));
    engine.resume_live();
    let addr = listener
        .local_addr()
        .map_err(|e| CoordError::Internal(format!("listener has no address: {e}")))?;
    let dashboard = dashboard_listener
        .map(|l| start_dashboard(&cfg, l, web_tls, &engine, &registry, stop_rx.clone()));

    let local_pane = match (&cfg.local_pane, cfg.local_agent) {
        (Some(pane), true) => Some(start_local_pane(&cfg, pane).await?),
        (Some(_), false) => {
            return Err(CoordError::InvalidArgument(
                "--local-pane needs --local-agent (and a --tmux-socket of its own)".into(),
            ))
        }
        (None, _) => None,
    };
    let local_agent = if cfg.local_agent {
        // Loopback plaintext: config validation keeps --local-agent and TLS apart.
        let coord = karl_common::tls::CoordAddr::parse(&format!("http://{addr}"))?;
        let agent = karl_agent::Agent::start(karl_agent::config::AgentConfig {
            link: karl_agent::config::LinkConfig::new(
                coord,
                cfg.local_machine.clone(),
                cfg.token.clone(),
            ),
            tmux_socket: cfg.tmux_socket.clone(),
            tmux_bin: cfg.tmux_bin.clone(),
            hook_socket: None,
            notifier: karl_agent::notify::OSASCRIPT.to_string(),
        })
        .await
        .map_err(|e| CoordError::InvalidArgument(format!("the local agent: {e}")))?;
        Some(tokio::spawn(agent.run(stopped(stop_rx.clone()))))
    } else {
        None
    };

    let mtls = cfg.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    tracing::info!(target: "coord", %addr, data_dir = %cfg.data_dir.display(), auth = cfg.token.is_some(), tls = tls.is_some(), mtls, "karl-coord listening");
    let state = ServerState {
        registry,
        engine: engine.clone(),
        notifier,
        token: cfg.token.clone(),
        tls,
    };
    let served = serve(listener, state, async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    })
    .await;
    engine.shutdown().await;
    if let Some(task) = events {
        let _ = task.await;
    }
    if let Some(task) = dashboard {
        let _ = task.await;
    }
    if let Some(task) = local_agent {
        let _ = task.await;
    }
    if let Some(tmux) = local_pane.flatten() {
        if let Err(e) = tmux.kill_server().await {
            tracing::warn!(target: "coord", error = %e, "cannot stop the local pane's tmux server");
        }
    }
    served.map_err(|e| CoordError::Internal(format!("server failed: {e}")))
}

/// Completes once the coordinator is told to stop (or the sender is gone).
async fn stopped(mut stop: tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Serves the dashboard on `listener` until stop.
fn start_dashboard(
    cfg: &CoordConfig,
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    engine: &Arc<Engine>,
    registry: &Arc<Registry>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let tls = WebTls {
        https: acceptor.is_some(),
        client_certs: acceptor.is_some() && cfg.tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
    };
    match listener.local_addr() {
        Ok(at) => {
            let scheme = if tls.https { "https" } else { "http" };
            tracing::info!(target: "coord", dashboard = %format!("{scheme}://{at}/"), token = cfg.token.is_some(), mtls = tls.client_certs, "dashboard listening");
        }
        Err(e) => {
            tracing::warn!(target: "coord", error = %e, "the dashboard's listener has no address")
        }
    }
    let (close, closing) = Closing::new();
    let state = WebState {
        engine: engine.clone(),
        registry: registry.clone(),
        token: cfg.token.as_deref().map(Arc::from),
        closing,
        tls,
    };
    tokio::spawn(async move {
        let shutdown = async move {
            stopped(stop).await;
            let _ = close.send(true);
        };
        if let Err(e) = crate::web::serve(listener, state, acceptor, shutdown).await {
            tracing::error!(target: "coord", error = %e, "the dashboard stopped serving");
        }
    })
}

/// Starts the local agent's tmux server with the `--local-pane` session, through the
/// agent's door to tmux; returns the server to stop at the end (`None` when kept).
async fn start_local_pane(
    cfg: &CoordConfig,
    pane: &LocalPane,
) -> Result<Option<karl_agent::tmux::Tmux>> {
    let Some(socket) = cfg.tmux_socket.clone() else {
        return Err(CoordError::InvalidArgument(
            "--local-pane needs a --tmux-socket of its own: the coordinator stops that server when it stops".into(),
        ));
    };
    let tmux = karl_agent::tmux::Tmux::new(Some(socket)).with_program(cfg.tmux_bin.clone());
    let dir = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| ".".into());
    tmux.new_session("karl", &dir, &pane.command)
        .await
        .map_err(|e| CoordError::InvalidArgument(format!("--local-pane: {e}")))?;
    Ok((!pane.keep).then_some(tmux))
}

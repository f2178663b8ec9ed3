//! A network drop that leaves the coordinator holding a half-open stream: the agent's
//! side of the connection dies, the coordinator's side stays open and silent (as when a
//! laptop changes networks). The same agent process reconnects with its instance id and
//! must replace its stale stream at once, not be refused by it as a duplicate.
//!
//! In-process: the real coordinator (`karl_coord::app::run`) on loopback, the real link
//! (`karl_agent::link::run`) with panes faked behind `PaneOps`, and a TCP proxy between
//! them that can cut the agent's side while black-holing the coordinator's.

use std::sync::Arc;
use std::time::Duration;

use karl_agent::config::LinkConfig;
use karl_agent::link::{OpError, PaneOps};
use karl_common::pb;
use karl_common::tls::CoordAddr;
use karl_coord::config::CoordConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// Panes that exist only in memory.
struct NoPanes;

impl PaneOps for NoPanes {
    async fn tmux_version(&self) -> String {
        "tmux 3.3a".into()
    }
    async fn list_panes(&self) -> Result<Vec<pb::PaneInfo>, OpError> {
        Ok(Vec::new())
    }
    fn watching(&self) -> Vec<String> {
        Vec::new()
    }
    async fn watch(&self, _w: pb::Watch) -> Result<(), OpError> {
        Ok(())
    }
    async fn unwatch(&self, _target: String) -> Result<(), OpError> {
        Ok(())
    }
    async fn capture(&self, _c: pb::Capture) -> Result<pb::PaneSnapshot, OpError> {
        Err("no panes here".into())
    }
    async fn inject(&self, _i: pb::Inject) -> pb::InjectResult {
        pb::InjectResult::default()
    }
    async fn send_keys(&self, _s: pb::SendKeys) -> Result<(), OpError> {
        Ok(())
    }
}

/// Forwards each accepted connection to `upstream`. When `cut` flips to true, every
/// live connection's agent side is closed while its coordinator side is kept open
/// and silent (no FIN, no RST): a half-open stream on the coordinator.
async fn proxy(listener: TcpListener, upstream: String, cut: watch::Receiver<u64>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        let upstream = upstream.clone();
        let mut cut = cut.clone();
        let generation = *cut.borrow();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(&upstream).await else {
                return;
            };
            let mut client = client;
            {
                let (mut cr, mut cw) = client.split();
                let (mut sr, mut sw) = server.split();
                let cut_newer = async {
                    while *cut.borrow() == generation {
                        if cut.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                };
                tokio::select! {
                    _ = tokio::io::copy(&mut cr, &mut sw) => {}
                    _ = tokio::io::copy(&mut sr, &mut cw) => {}
                    _ = cut_newer => {}
                }
            }
            // The agent's side is closed; the coordinator's stays open and silent.
            drop(client);
            tokio::time::sleep(Duration::from_secs(60)).await;
            drop(server);
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_agent_reconnecting_replaces_its_stale_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let coord_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let coord_addr = coord_listener.local_addr().expect("addr").to_string();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let cfg = CoordConfig::local(dir.path().join("data"));
    let server = tokio::spawn(karl_coord::app::run(cfg, coord_listener, async move {
        let _ = stop_rx.await;
    }));

    let proxy_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let proxy_addr = proxy_listener.local_addr().expect("addr");
    let (cut_tx, cut_rx) = watch::channel(0u64);
    tokio::spawn(proxy(proxy_listener, coord_addr.clone(), cut_rx));

    let coord = CoordAddr::parse(&format!("http://{proxy_addr}")).expect("proxy address");
    let mut link = LinkConfig::new(coord, "laptop", None);
    link.backoff_max = Duration::from_millis(500);
    let instance = link.instance_id.clone();
    let (_events_tx, events_rx) = mpsc::channel(8);
    let (agent_stop_tx, agent_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(karl_agent::link::run(
        link,
        Arc::new(NoPanes),
        events_rx,
        async move {
            let _ = agent_stop_rx.await;
        },
    ));

    let coord = CoordAddr::parse(&coord_addr).expect("coordinator address");
    let mut ctl = karl_ctl::client::connect(&coord, None).await.expect("ctl");
    let listed =
        |agents: &[pb::AgentStatus]| agents.iter().find(|a| a.machine == "laptop").cloned();
    let mut first = None;
    for _ in 0..100 {
        let r = ctl
            .list_agents(pb::ListAgentsRequest {})
            .await
            .expect("list")
            .into_inner();
        if let Some(a) = listed(&r.agents) {
            first = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = first.expect("agent connected through the proxy");
    assert_eq!(first.instance_id, instance);

    // Drop the network under the agent; the coordinator keeps a half-open stream.
    tokio::time::sleep(Duration::from_millis(20)).await;
    cut_tx.send(1).expect("cut");
    let started = std::time::Instant::now();
    let mut back = None;
    while started.elapsed() < Duration::from_secs(5) {
        let r = ctl
            .list_agents(pb::ListAgentsRequest {})
            .await
            .expect("list")
            .into_inner();
        if let Some(a) = listed(&r.agents).filter(|a| a.connected_unix_ms > first.connected_unix_ms)
        {
            back = Some(a);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let back = back.expect("the reconnect was refused by its own stale stream");
    assert_eq!(back.instance_id, instance, "same process, same instance id");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "replaced at once, not after a timeout"
    );

    let _ = agent_stop_tx.send(());
    let _ = agent.await;
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
}

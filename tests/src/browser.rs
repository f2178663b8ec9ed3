//! Headless Chromium for the dashboard's browser tests, driven over the DevTools protocol:
//! a WebSocket to the browser, one page target attached in flat mode, and the handful of
//! commands the tests need — navigate, evaluate script, set the viewport, screenshot.
//!
//! Blocking on the outside (the end-to-end tests are plain `#[test]`s), async inside on a
//! runtime of its own. The browser runs with a fresh profile and without its background
//! networking (this machine's network is closed), and is killed on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long one DevTools command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// The Chromium program: `$KARL_CHROMIUM`, else `chromium` on PATH.
pub fn program() -> PathBuf {
    std::env::var_os("KARL_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("chromium"))
}

/// Whether a Chromium can be started here.
pub fn available() -> bool {
    Command::new(program())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A headless Chromium with one page.
pub struct Browser {
    child: Child,
    rt: tokio::runtime::Runtime,
    ws: Ws,
    session: String,
    next_id: u64,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium and opens a blank page.
    pub fn start() -> anyhow::Result<Browser> {
        let profile = tempfile::tempdir()?;
        let mut child = Command::new(program())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot start {}: {e} (install chromium, or set KARL_CHROMIUM)",
                    program().display()
                )
            })?;
        let url = match devtools_url(&mut child) {
            Ok(url) => url,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (ws, _) = rt.block_on(tokio_tungstenite::connect_async(url.as_str()))?;
        let mut b = Browser {
            child,
            rt,
            ws,
            session: String::new(),
            next_id: 1,
            _profile: profile,
        };
        let target = b.browser_call("Target.createTarget", json!({"url": "about:blank"}))?;
        let target_id = target["targetId"].as_str().unwrap_or_default().to_string();
        let attached = b.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )?;
        b.session = attached["sessionId"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no session id in {attached}"))?
            .to_string();
        b.call("Page.enable", json!({}))?;
        b.call("Runtime.enable", json!({}))?;
        Ok(b)
    }

    fn browser_call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.send(None, method, params)
    }

    /// A command to the page.
    pub fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        let session = self.session.clone();
        self.send(Some(session), method, params)
    }

    fn send(
        &mut self,
        session: Option<String>,
        method: &str,
        params: Value,
    ) -> anyhow::Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s);
        }
        let ws = &mut self.ws;
        self.rt.block_on(async {
            ws.send(Message::text(msg.to_string())).await?;
            let deadline = tokio::time::Instant::now() + COMMAND_TIMEOUT;
            loop {
                let next = tokio::time::timeout_at(deadline, ws.next())
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!("{method}: no answer within {COMMAND_TIMEOUT:?}")
                    })?;
                let Some(frame) = next else {
                    anyhow::bail!("{method}: the browser closed the connection");
                };
                let Message::Text(text) = frame? else {
                    continue;
                };
                let v: Value = serde_json::from_str(text.as_str())?;
                // Events carry no id; answers to other commands cannot be in flight.
                if v["id"].as_u64() != Some(id) {
                    continue;
                }
                if let Some(err) = v.get("error") {
                    anyhow::bail!("{method}: {err}");
                }
                return Ok(v["result"].clone());
            }
        })
    }

    /// Opens `url` and waits until the document has loaded.
    pub fn goto(&mut self, url: &str) -> anyhow::Result<()> {
        let r = self.call("Page.navigate", json!({"url": url}))?;
        if let Some(e) = r.get("errorText").and_then(Value::as_str) {
            anyhow::bail!("cannot open {url}: {e}");
        }
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(15),
        )
        .map(|_| ())
        .map_err(|_| anyhow::anyhow!("{url} did not finish loading"))
    }

    /// The value of a script expression (awaited if it is a promise).
    pub fn eval(&mut self, expression: &str) -> anyhow::Result<Value> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            anyhow::bail!("script failed: {expression}: {e}");
        }
        Ok(r["result"]["value"].clone())
    }

    /// The expression's value once it is truthy; an error after `timeout`.
    pub fn wait_for(&mut self, expression: &str, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            // A navigation may destroy the context mid-call: that is "not yet".
            if let Ok(v) = self.eval(expression) {
                let truthy = match &v {
                    Value::Null => false,
                    Value::Bool(b) => *b,
                    Value::String(s) => !s.is_empty(),
                    Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
                    _ => true,
                };
                if truthy {
                    return Ok(v);
                }
            }
            if Instant::now() >= deadline {
                anyhow::bail!("still false after {timeout:?}: {expression}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Lays the page out at `width`×`height` CSS pixels, as a phone when `mobile`.
    pub fn viewport(&mut self, width: u32, height: u32, mobile: bool) -> anyhow::Result<()> {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )?;
        Ok(())
    }

    /// A PNG of the viewport, written to `path`.
    pub fn screenshot(&mut self, path: &Path) -> anyhow::Result<()> {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}))?;
        let data = r["data"]
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("no screenshot data"))?;
        let png = base64::engine::general_purpose::STANDARD.decode(data)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, png)?;
        Ok(())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads Chromium's stderr until it says where DevTools listens.
fn devtools_url(child: &mut Child) -> anyhow::Result<String> {
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stderr from the browser"))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("DevTools listening on ") {
                let _ = tx.send(Ok(url.trim().to_string()));
                // Keep draining, so the browser never blocks on a full pipe.
                continue;
            }
            said.push(line);
        }
        let _ = tx.send(Err(said.join("\n")));
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(url)) => Ok(url),
        Ok(Err(said)) => anyhow::bail!("the browser exited without a DevTools address:\n{said}"),
        Err(_) => anyhow::bail!("the browser gave no DevTools address within 30s"),
    }
}

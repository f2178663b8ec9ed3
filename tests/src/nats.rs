//! A real `nats-server` on loopback for the events tests, and a subscriber that speaks
//! NATS's text protocol itself — `CONNECT`, `SUB`, `MSG`, `PING`/`PONG` — so a test checks
//! what is on the wire, not what the coordinator's own client library reads back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server program: `$KARL_NATS_SERVER`, else `nats-server` on PATH or in /usr/sbin
/// (where Debian's package puts it).
pub fn program() -> PathBuf {
    if let Some(p) = std::env::var_os("KARL_NATS_SERVER") {
        return PathBuf::from(p);
    }
    let sbin = PathBuf::from("/usr/sbin/nats-server");
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("nats-server"))
            .find(|p| p.is_file())
    });
    on_path.unwrap_or(sbin)
}

/// One `nats-server`, killed when dropped.
pub struct NatsServer {
    child: Option<Child>,
    pub port: u16,
}

impl NatsServer {
    /// Starts a server on `port` and waits until it accepts connections.
    pub fn start(port: u16) -> std::io::Result<NatsServer> {
        let prog = program();
        let child = Command::new(&prog)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot start {}: {e} (install nats-server: apt install nats-server, or set KARL_NATS_SERVER)",
                        prog.display()
                    ),
                )
            })?;
        let mut server = NatsServer {
            child: Some(child),
            port,
        };
        // Ours, not whatever else took the port: the child is alive and a NATS server
        // greets with INFO.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(std::io::Error::other(format!(
                    "nats-server exited at start ({status}): is 127.0.0.1:{port} taken?"
                )));
            }
            if greets(port) {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "nats-server did not listen on 127.0.0.1:{port} within 10 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (its clients see the connection drop).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether a NATS server answers on `port` (its first line is `INFO {...}`).
fn greets(port: u16) -> bool {
    let Ok(conn) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
    let mut line = String::new();
    BufReader::new(conn).read_line(&mut line).is_ok() && line.starts_with("INFO ")
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A message as received.
#[derive(Debug, Clone)]
pub struct Msg {
    pub subject: String,
    pub json: serde_json::Value,
}

/// Subscribes to a subject (wildcards allowed) on a port, reconnecting whenever the
/// server goes away, and keeps every message.
pub struct Subscriber {
    msgs: Arc<Mutex<Vec<Msg>>>,
    subscribed: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Subscriber {
    pub fn start(port: u16, subject: &str) -> Subscriber {
        let s = Subscriber {
            msgs: Arc::default(),
            subscribed: Arc::default(),
            stop: Arc::default(),
        };
        let (msgs, subscribed, stop) = (s.msgs.clone(), s.subscribed.clone(), s.stop.clone());
        let subject = subject.to_string();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Ok(conn) = TcpStream::connect(("127.0.0.1", port)) {
                    let _ = read_session(conn, &subject, &msgs, &subscribed, &stop);
                }
                subscribed.store(false, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        s
    }

    /// Whether the server has confirmed the subscription on the current connection.
    pub fn subscribed(&self) -> bool {
        self.subscribed.load(Ordering::Relaxed)
    }

    pub fn messages(&self) -> Vec<Msg> {
        self.msgs.lock().map(|m| m.clone()).unwrap_or_default()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One connection: subscribe, then read `MSG`s and answer `PING`s until it closes.
fn read_session(
    conn: TcpStream,
    subject: &str,
    msgs: &Mutex<Vec<Msg>>,
    subscribed: &AtomicBool,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut w = conn.try_clone()?;
    w.write_all(
        format!("CONNECT {{\"verbose\":false,\"pedantic\":false,\"name\":\"karl-test\"}}\r\nSUB {subject} 1\r\nPING\r\n")
            .as_bytes(),
    )?;
    let mut r = BufReader::new(conn);
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        // A read that times out mid-line keeps what it read; the line ends next time.
        match r.read_line(&mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
        if !line.ends_with('\n') {
            continue;
        }
        let whole = std::mem::take(&mut line);
        let words: Vec<&str> = whole.split_whitespace().collect();
        match words.first().copied() {
            Some("PING") => w.write_all(b"PONG\r\n")?,
            // The answer to our PING: the SUB before it is in place.
            Some("PONG") => subscribed.store(true, Ordering::Relaxed),
            Some("MSG") => {
                // MSG <subject> <sid> [reply-to] <#bytes>
                let subject = words.get(1).copied().unwrap_or_default().to_string();
                let len: usize = words.last().and_then(|n| n.parse().ok()).unwrap_or(0);
                let mut body = vec![0u8; len + 2];
                read_full(&mut r, &mut body, stop)?;
                body.truncate(len);
                let json = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                if let Ok(mut m) = msgs.lock() {
                    m.push(Msg { subject, json });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `read_exact` that rides out the read timeout.
fn read_full(r: &mut impl Read, buf: &mut [u8], stop: &AtomicBool) -> std::io::Result<()> {
    let mut at = 0;
    while at < buf.len() {
        match r.read(&mut buf[at..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) && !stop.load(Ordering::Relaxed) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

//! TLS between machines, with real processes and real rustls on loopback, and
//! certificates made at test time (a throwaway CA, a server certificate for `localhost`
//! and `127.0.0.1`, client certificates from that CA and from another one): an agent
//! joins and karl-ctl lists it over TLS with the token still checked; mTLS lets in the
//! right client certificate and refuses none or the wrong one in words; a plaintext
//! client, a client that does not trust the server's CA and a TLS client of a plaintext
//! coordinator are each told what to change; bad TLS settings stop karl-coord at start;
//! and the model client talks to an `https://` model server and fails clearly when it
//! does not trust its certificate.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use karl_coord::model::{ChatMessage, ChatRequest, HttpModelClient, ModelConfig};
use karl_tests::harness::{
    ctl, free_port, karl_command, start_agent_with, wait_for, Coord, CtlOut, Proc, Scratch,
};
use karl_tests::stub_model::{StubModel, StubReply, StubScript};
use karl_tests::tmux_server::TmuxServer;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

const TOKEN: &str = "tls-test-token-0123456789";

/// PEM files of one test's certificates.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_ca: PathBuf,
    other_client_cert: PathBuf,
    other_client_key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

/// A leaf certificate signed by `issuer`: (certificate PEM, key PEM).
fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    name: &str,
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let write = |name: &str, pem: &str| {
            let p = dir.join(name);
            std::fs::write(&p, pem).unwrap();
            p
        };
        let root = ca("KARL test CA");
        let other = ca("Some other CA");
        let (sc, sk) = leaf(
            &root,
            "localhost",
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (cc, ck) = leaf(&root, "mac2", &[], ExtendedKeyUsagePurpose::ClientAuth);
        let (oc, ok) = leaf(&other, "mac9", &[], ExtendedKeyUsagePurpose::ClientAuth);
        Pki {
            ca: write("ca.pem", &root.pem()),
            server_cert: write("server.pem", &sc),
            server_key: write("server.key", &sk),
            client_cert: write("client.pem", &cc),
            client_key: write("client.key", &ck),
            other_ca: write("other-ca.pem", &other.pem()),
            other_client_cert: write("other-client.pem", &oc),
            other_client_key: write("other-client.key", &ok),
        }
    }

    fn server_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            s(&self.server_cert),
            "--tls-key".into(),
            s(&self.server_key),
        ]
    }

    fn client_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            s(&self.client_cert),
            "--tls-key".into(),
            s(&self.client_key),
        ]
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The coordinator's TLS address (`localhost` is what its certificate names).
fn https(coord: &Coord) -> String {
    coord.addr.replace("127.0.0.1", "https://localhost")
}

/// karl-ctl against `coord` with `tls` flags, then `args`.
fn tls_ctl(
    scratch: &Scratch,
    coord: &str,
    token: Option<&str>,
    tls: &[&str],
    args: &[&str],
) -> CtlOut {
    let mut all: Vec<&str> = tls.to_vec();
    all.extend_from_slice(args);
    ctl(scratch, Some(coord), token, &all)
}

/// Polls `karl-ctl agents --json` until `machine` is listed.
fn wait_listed(
    scratch: &Scratch,
    coord: &str,
    tls: &[&str],
    machine: &str,
) -> Option<serde_json::Value> {
    wait_for(Duration::from_secs(15), || {
        let out = tls_ctl(scratch, coord, Some(TOKEN), tls, &["agents", "--json"]);
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

/// Asserts a failed karl-ctl run said one line containing every one of `words`.
fn assert_refused(out: &CtlOut, words: &[&str]) {
    assert_ne!(out.code, 0, "expected a failure: {out:?}");
    let err = out.stderr.trim();
    assert_eq!(err.lines().count(), 1, "one line: {out:?}");
    for w in words {
        assert!(err.contains(w), "{w:?} missing from: {err}");
    }
}

/// Waits until the agent's log says `words`.
fn wait_log(agent: &Proc, words: &str) -> bool {
    wait_for(Duration::from_secs(15), || {
        agent.log_text().contains(words).then_some(())
    })
    .is_some()
}

#[test]
fn agent_and_ctl_work_over_tls_and_the_token_is_still_checked() {
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let tmux = TmuxServer::new();
    let pane = tmux
        .new_session("work", 90, 25, "bash --norc --noprofile")
        .expect("tmux new-session");
    let coord = Coord::start(&scratch, Some(TOKEN), &strs(&pki.server_args()));
    let url = https(&coord);
    let ca = s(&pki.ca);
    let trust = ["--tls-ca", ca.as_str()];
    let _agent = start_agent_with(&scratch, &url, "mac2", Some(TOKEN), tmux.socket(), &trust);

    let entry = wait_listed(&scratch, &url, &trust, "mac2").expect("agent never appeared over TLS");
    assert!(
        entry["connected_unix_ms"].as_u64().unwrap_or(0) > 0,
        "{entry}"
    );
    // The agent's commands travel over the same TLS stream.
    let panes = tls_ctl(
        &scratch,
        &url,
        Some(TOKEN),
        &trust,
        &["panes", "mac2", "--json"],
    );
    assert_eq!(panes.code, 0, "{panes:?}");
    assert!(panes.stdout.contains(&pane), "{panes:?}");
    // The certificate also names 127.0.0.1.
    let by_ip = coord.addr.replace("127.0.0.1", "https://127.0.0.1");
    let out = tls_ctl(&scratch, &by_ip, Some(TOKEN), &trust, &["agents"]);
    assert_eq!(out.code, 0, "{out:?}");

    // TLS does not replace the token.
    let none = tls_ctl(&scratch, &url, None, &trust, &["agents"]);
    assert_refused(&none, &["no token given"]);
    let wrong = tls_ctl(&scratch, &url, Some("nope"), &trust, &["agents"]);
    assert_refused(&wrong, &["wrong token"]);

    // The same settings from karl-ctl.toml's [tls] table.
    let config = scratch.path("karl-ctl.toml");
    std::fs::write(
        &config,
        format!("coord = \"{url}\"\ntoken = \"{TOKEN}\"\n[tls]\nca = \"{ca}\"\n"),
    )
    .unwrap();
    let out = ctl(&scratch, None, None, &["--config", &s(&config), "agents"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("mac2"), "{out:?}");
}

#[test]
fn mtls_lets_in_the_right_client_certificate_only() {
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let tmux = TmuxServer::new();
    tmux.new_session("work", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let mut args = pki.server_args();
    args.extend(["--tls-client-ca".to_string(), s(&pki.ca)]);
    let coord = Coord::start(&scratch, Some(TOKEN), &strs(&args));
    let url = https(&coord);
    let ca = s(&pki.ca);
    let mut with_cert = vec!["--tls-ca".to_string(), ca.clone()];
    with_cert.extend(pki.client_args());
    let with_cert = strs(&with_cert);

    let agent = start_agent_with(
        &scratch,
        &url,
        "mac2",
        Some(TOKEN),
        tmux.socket(),
        &with_cert,
    );
    wait_listed(&scratch, &url, &with_cert, "mac2").unwrap_or_else(|| {
        panic!(
            "agent with a client certificate never appeared; its log:\n{}",
            agent.log_text()
        )
    });

    // No client certificate: refused, and told which flags to set.
    let bare = tls_ctl(&scratch, &url, Some(TOKEN), &["--tls-ca", &ca], &["agents"]);
    assert_refused(&bare, &["client certificate", "--tls-cert and --tls-key"]);
    // A certificate from another CA: refused, and told which CA it must come from.
    let (oc, ok) = (s(&pki.other_client_cert), s(&pki.other_client_key));
    let other = ["--tls-ca", &ca, "--tls-cert", &oc, "--tls-key", &ok];
    let wrong = tls_ctl(&scratch, &url, Some(TOKEN), &other, &["agents"]);
    assert_refused(&wrong, &["refused this client's certificate", "client_ca"]);

    // An agent without a certificate says the same in its log and is not let in.
    let bare_agent = start_agent_with(
        &scratch,
        &url,
        "mac3",
        Some(TOKEN),
        tmux.socket(),
        &["--tls-ca", &ca],
    );
    assert!(
        wait_log(&bare_agent, "--tls-cert and --tls-key"),
        "{}",
        bare_agent.log_text()
    );
    let listed = tls_ctl(
        &scratch,
        &url,
        Some(TOKEN),
        &with_cert,
        &["agents", "--json"],
    );
    let machines: Vec<String> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["machine"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(machines, ["mac2"]);
}

#[test]
fn plaintext_and_tls_mismatches_say_which_scheme_to_dial() {
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let tmux = TmuxServer::new();
    tmux.new_session("work", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let tls_coord = Coord::start(&scratch, Some(TOKEN), &strs(&pki.server_args()));
    let plain_coord = Coord::start(&scratch, Some(TOKEN), &[]);
    let ca = s(&pki.ca);

    // Plaintext client, TLS coordinator.
    let out = ctl(&scratch, Some(&tls_coord.addr), Some(TOKEN), &["agents"]);
    assert_refused(&out, &["https://HOST:PORT"]);
    let plain_agent = start_agent_with(
        &scratch,
        &tls_coord.url(),
        "mac2",
        Some(TOKEN),
        tmux.socket(),
        &[],
    );
    assert!(
        wait_log(&plain_agent, "https://HOST:PORT"),
        "{}",
        plain_agent.log_text()
    );

    // TLS client, plaintext coordinator.
    let url = https(&plain_coord);
    let out = tls_ctl(&scratch, &url, Some(TOKEN), &["--tls-ca", &ca], &["agents"]);
    assert_refused(&out, &["does not speak TLS", "http://HOST:PORT"]);

    // TLS settings with a plaintext address: the operator meant TLS.
    let out = tls_ctl(
        &scratch,
        &tls_coord.addr,
        Some(TOKEN),
        &["--tls-ca", &ca],
        &["agents"],
    );
    assert_refused(&out, &["is plaintext", "https://HOST:PORT"]);
}

#[test]
fn a_client_that_does_not_trust_the_server_is_told_to_set_its_ca() {
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let tmux = TmuxServer::new();
    tmux.new_session("work", 80, 24, "bash --norc --noprofile")
        .expect("tmux new-session");
    let coord = Coord::start(&scratch, Some(TOKEN), &strs(&pki.server_args()));
    let url = https(&coord);

    // The system's CAs do not include our throwaway one. (A machine whose trust store is
    // empty says that instead; either way the fix is --tls-ca.)
    let out = tls_ctl(&scratch, &url, Some(TOKEN), &[], &["agents"]);
    assert_refused(&out, &["--tls-ca"]);
    assert!(
        out.stderr.contains("not trusted") || out.stderr.contains("trust store holds no CA"),
        "{out:?}"
    );
    // Another CA is no better, and the message names the file given.
    let other = s(&pki.other_ca);
    let out = tls_ctl(
        &scratch,
        &url,
        Some(TOKEN),
        &["--tls-ca", &other],
        &["agents"],
    );
    assert_refused(&out, &["not trusted", &other]);
    // The right CA, but a name the certificate does not hold.
    let ca = s(&pki.ca);
    let out = tls_ctl(
        &scratch,
        &url,
        Some(TOKEN),
        &["--tls-ca", &ca, "--tls-domain", "mac5.example"],
        &["agents"],
    );
    assert_refused(&out, &["--tls-domain"]);

    // An agent that does not trust it says so and stays out.
    let agent = start_agent_with(
        &scratch,
        &url,
        "mac2",
        Some(TOKEN),
        tmux.socket(),
        &["--tls-ca", &other],
    );
    assert!(wait_log(&agent, "not trusted"), "{}", agent.log_text());
    let listed = tls_ctl(
        &scratch,
        &url,
        Some(TOKEN),
        &["--tls-ca", &ca],
        &["agents", "--json"],
    );
    assert_eq!(
        listed.json().as_array().map(Vec::len),
        Some(0),
        "{listed:?}"
    );
}

/// Runs karl-coord with `args` and expects it to stop at start; returns its stderr.
fn coord_fails(scratch: &Scratch, args: &[&str]) -> String {
    let mut cmd = karl_command("karl-coord", scratch.dir.path());
    cmd.arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--data-dir")
        .arg(scratch.path("data"))
        .args(args);
    let out = cmd.output().expect("run karl-coord");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "karl-coord {args:?} started: {err}");
    err
}

#[test]
fn bad_tls_settings_stop_the_coordinator_at_start() {
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let (cert, key) = (s(&pki.server_cert), s(&pki.server_key));

    let err = coord_fails(&scratch, &["--tls-cert", &cert]);
    assert!(err.contains("--tls-key"), "{err}");
    let err = coord_fails(&scratch, &["--tls-key", &key]);
    assert!(err.contains("--tls-cert"), "{err}");
    let err = coord_fails(&scratch, &["--tls-client-ca", &s(&pki.ca)]);
    assert!(err.contains("needs TLS on"), "{err}");

    // Unreadable and wrong files are named.
    let missing = s(&scratch.path("nowhere.pem"));
    let err = coord_fails(&scratch, &["--tls-cert", &missing, "--tls-key", &key]);
    assert!(
        err.contains(&missing) && err.contains("cannot read"),
        "{err}"
    );
    let err = coord_fails(&scratch, &["--tls-cert", &key, "--tls-key", &key]);
    assert!(
        err.contains(&key) && err.contains("no certificate"),
        "{err}"
    );
    let err = coord_fails(&scratch, &["--tls-cert", &cert, "--tls-key", &cert]);
    assert!(
        err.contains(&cert) && err.contains("no private key"),
        "{err}"
    );
    // A key that belongs to another certificate.
    let other_key = s(&pki.client_key);
    let err = coord_fails(&scratch, &["--tls-cert", &cert, "--tls-key", &other_key]);
    assert!(err.contains("do not make a usable pair"), "{err}");

    // The [tls] table of the config file works the same way.
    let config = scratch.path("karl-coord.toml");
    std::fs::write(&config, format!("[tls]\ncert = \"{cert}\"\n")).unwrap();
    let err = coord_fails(&scratch, &["--config", &s(&config)]);
    assert!(err.contains("--tls-key"), "{err}");

    // TLS does not lift the rule: no token, no address off loopback.
    let mut cmd = karl_command("karl-coord", scratch.dir.path());
    cmd.arg("--listen")
        .arg(format!("0.0.0.0:{}", free_port()))
        .arg("--data-dir")
        .arg(scratch.path("data2"))
        .args(["--tls-cert", &cert, "--tls-key", &key]);
    let out = cmd.output().expect("run karl-coord");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("without a token"),
        "{out:?}"
    );

    // Client side: a client certificate without its key.
    let out = ctl(
        &scratch,
        Some("https://localhost:7400"),
        Some(TOKEN),
        &["--tls-cert", &s(&pki.client_cert), "agents"],
    );
    assert_refused(&out, &["--tls-key"]);
}

fn model_config(url: String, ca: Option<PathBuf>) -> ModelConfig {
    ModelConfig {
        urls: vec![url],
        retries: 1,
        backoff_ms: 10,
        timeout_ms: 5_000,
        ca,
        ..ModelConfig::default()
    }
}

fn ask() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::user("What next?")])
}

#[tokio::test]
async fn model_client_speaks_https_and_names_an_untrusted_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    let cert = std::fs::read(&pki.server_cert).unwrap();
    let key = std::fs::read(&pki.server_key).unwrap();
    let stub = StubModel::start_tls(
        StubScript::replies([StubReply::text("Run the tests over TLS.")]),
        &cert,
        &key,
    )
    .await
    .unwrap();
    let url = stub.base_url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // Trusting the private CA: health check and a completion.
    let client = HttpModelClient::new(model_config(url.clone(), Some(pki.ca.clone()))).unwrap();
    let health = client.check_health().await.unwrap();
    assert_eq!(health.endpoint, url);
    let reply = client.chat(&ask()).await.unwrap();
    assert_eq!(reply.text, "Run the tests over TLS.");
    assert_eq!(stub.request_count(), 1);

    // Trusting only the system's CAs, or another CA: refused at once, no retries, and
    // the error says which setting to fix.
    for ca in [None, Some(pki.other_ca.clone())] {
        let client = HttpModelClient::new(model_config(url.clone(), ca.clone())).unwrap();
        let err = client.chat(&ask()).await.unwrap_err();
        assert_eq!(err.kind(), "tls", "{err}");
        assert!(!err.is_retryable() && err.is_unavailable(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("not trusted") && text.contains("[model] ca"),
            "{ca:?}: {text}"
        );
    }
    assert_eq!(
        stub.request_count(),
        1,
        "no request got through untrusted TLS"
    );

    // A CA file that holds no certificate is a configuration error naming the file.
    let err = HttpModelClient::new(model_config(url, Some(pki.server_key.clone()))).unwrap_err();
    assert_eq!(err.kind(), "bad_config", "{err}");
    assert!(err.to_string().contains(&s(&pki.server_key)), "{err}");
}

/// One HTTPS request to the dashboard: its status, headers and body, or why it failed.
async fn dash(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
) -> Result<(u16, reqwest::header::HeaderMap, String), String> {
    let mut req = client.request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    Ok((status, headers, resp.text().await.unwrap_or_default()))
}

fn trusting(pki: &Pki, identity: Option<(&Path, &Path)>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca).unwrap()).unwrap();
    let mut b = reqwest::Client::builder()
        .add_root_certificate(ca)
        .redirect(reqwest::redirect::Policy::none());
    if let Some((cert, key)) = identity {
        let mut pem = std::fs::read(cert).unwrap();
        pem.extend(std::fs::read(key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

/// The gRPC port opens before the dashboard's (the gate's model loads between the two).
fn wait_dashboard(port: u16) {
    wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    })
    .expect("the dashboard never listened");
}

#[test]
fn the_dashboard_speaks_https_with_the_token_and_mtls_with_the_certificate() {
    use reqwest::Method;
    let rt = tokio::runtime::Runtime::new().unwrap();

    // TLS without client certificates: HTTPS, and the token still guards every page.
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let port = free_port();
    let mut args = pki.server_args();
    args.extend(["--http".to_string(), format!("127.0.0.1:{port}")]);
    let coord = Coord::start(&scratch, Some(TOKEN), &strs(&args));
    wait_dashboard(port);
    let base = format!("https://localhost:{port}");
    rt.block_on(async {
        let client = trusting(&pki, None);
        let fleet = format!("{base}/api/fleet");
        let (status, _, body) = dash(&client, Method::GET, &fleet, None).await.unwrap();
        assert_eq!(status, 401, "{body}");
        let (status, _, body) = dash(&client, Method::GET, &fleet, Some(TOKEN))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        // The login cookie is Secure over HTTPS.
        let resp = client
            .post(format!("{base}/login"))
            .form(&[("token", TOKEN)])
            .send()
            .await
            .unwrap();
        let cookie = resp.headers()["set-cookie"].to_str().unwrap().to_string();
        assert!(
            cookie.contains("; Secure") && cookie.contains("HttpOnly"),
            "{cookie}"
        );
        // Plain HTTP to the HTTPS port gets nothing.
        let plain = dash(
            &reqwest::Client::new(),
            Method::GET,
            &format!("http://127.0.0.1:{port}/api/fleet"),
            Some(TOKEN),
        )
        .await;
        assert!(plain.is_err(), "{plain:?}");
    });
    drop(coord);

    // mTLS: the certificate is the login; none, or one from another CA, gets no page.
    let scratch = Scratch::new();
    let pki = Pki::new(scratch.dir.path());
    let port = free_port();
    let mut args = pki.server_args();
    args.extend([
        "--tls-client-ca".to_string(),
        s(&pki.ca),
        "--http".to_string(),
        format!("127.0.0.1:{port}"),
    ]);
    let _coord = Coord::start(&scratch, Some(TOKEN), &strs(&args));
    wait_dashboard(port);
    let base = format!("https://localhost:{port}");
    rt.block_on(async {
        let fleet = format!("{base}/api/fleet");
        let mine = trusting(&pki, Some((&pki.client_cert, &pki.client_key)));
        let (status, _, body) = dash(&mine, Method::GET, &fleet, None).await.unwrap();
        assert_eq!(status, 200, "{body}");
        let (status, _, page) = dash(&mine, Method::GET, &format!("{base}/"), None)
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert!(
            !page.contains("name=\"token\""),
            "no login form under mTLS: {page}"
        );
        // Actions still need the page's header.
        let (status, _, _) = dash(
            &mine,
            Method::POST,
            &format!("{base}/api/sessions/none/pause"),
            None,
        )
        .await
        .unwrap();
        assert_eq!(status, 403);

        let bare = dash(&trusting(&pki, None), Method::GET, &fleet, Some(TOKEN)).await;
        assert!(bare.is_err(), "no client certificate got {bare:?}");
        let other = trusting(&pki, Some((&pki.other_client_cert, &pki.other_client_key)));
        let theirs = dash(&other, Method::GET, &fleet, Some(TOKEN)).await;
        assert!(theirs.is_err(), "another CA's certificate got {theirs:?}");
    });
}

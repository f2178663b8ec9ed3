//! `karl-stub-model`: the stub OpenAI-compatible model server as a process, for tests
//! and demos that need a model endpoint without a model.
//!
//! `karl-stub-model [--listen ADDR] [--script FILE]` serves `ADDR` (default
//! `127.0.0.1:0`, a free port), answers from the script file (see
//! `StubScript::from_json`; without one, the cooperative echo mode), prints its base
//! URL (`http://ADDR/v1`) as the first line of stdout, and runs until SIGINT or SIGTERM.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{bail, Context, Result};
use karl_tests::stub_model::{StubModel, StubScript};

const USAGE: &str = "usage: karl-stub-model [--listen ADDR] [--script FILE]";

#[tokio::main]
async fn main() -> Result<()> {
    let mut listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut script = StubScript::echo();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => {
                let v = args.next().context(USAGE)?;
                listen = v
                    .parse()
                    .with_context(|| format!("bad --listen address {v:?}"))?;
            }
            "--script" => {
                let path = args.next().context(USAGE)?;
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading script {path}"))?;
                script = StubScript::from_json(&text)
                    .with_context(|| format!("parsing script {path}"))?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let stub = StubModel::start_on(listen, script)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", stub.base_url())?;
    out.flush()?;
    drop(out);

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    stub.shutdown().await;
    Ok(())
}

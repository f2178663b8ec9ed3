//! karl-ctl: parse flags, run the command, print one line on failure.

use std::process::ExitCode;

use clap::Parser;
use karl_coord::ctl::{run, Cli};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KARL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("karl-ctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

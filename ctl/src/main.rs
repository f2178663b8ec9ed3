//! karl-ctl: parse flags, run the command, print one line on failure.

use std::process::ExitCode;

use clap::Parser;
use karl_ctl::{run, Cli};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    karl_common::init_logging("warn");
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("karl-ctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! `karl-standin`: the stand-in coding agent (see `karl_tests::standin`).

use karl_tests::standin::run::{parse_args, run, Command, USAGE};

fn main() {
    let code = match parse_args(std::env::args().skip(1)) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            0
        }
        Ok(Command::Run(opts)) => match run(opts) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("karl-standin: {e}");
                2
            }
        },
        Err(msg) => {
            eprintln!("karl-standin: {msg}\n\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

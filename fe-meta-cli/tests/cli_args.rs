//! The command line's parsing of the server command's flags.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use clap::Parser;
use fe_meta_cli::{Cli, Command};

#[test]
fn the_server_command_takes_bootstrap() {
    let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
        Command::Server { bootstrap, .. } => bootstrap,
        other => panic!("{other:?}"),
    };
    assert!(parse(&[
        "fe-meta",
        "server",
        "--config",
        "z.cfg",
        "--bootstrap"
    ]));
    assert!(!parse(&["fe-meta", "server", "--config", "z.cfg"]));
}

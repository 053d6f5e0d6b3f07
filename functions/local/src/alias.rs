//! `countersign-local`: the former name of `countersign-server`, kept as an alias: the same
//! program, built from the same source.

#[path = "main.rs"]
mod server;

fn main() -> std::process::ExitCode {
    server::main()
}

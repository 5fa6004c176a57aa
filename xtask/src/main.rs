//! `cargo xtask`: the kubedist workflow (`cli.rs` parses the command line).

fn main() {
    xtask::cli::main()
}

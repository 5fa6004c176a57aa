//! The `--from` directory's layout, the one place its names are written:
//! what `cargo xtask fixtures` and `cargo xtask source` leave in it and what
//! `fetch`, `stage` and `dist` read from it. Beside these, every upstream
//! file is at `DIR/<source>/<path>` with its `.sha256`, as
//! `pkg/release.toml` names it.

/// `<source>/<member>` names that are test stand-ins, not the real program
/// (followed by architectures when only theirs are).
pub const STANDINS: &str = "STANDINS";
/// Says which sources were built from their Go modules (`cargo xtask
/// source`): `source version toolchain` a line, `#` comments.
pub const BUILT_FROM_SOURCE: &str = "BUILT-FROM-SOURCE";
/// One line per file, for the person who opens the directory.
pub const README: &str = "README";
/// The images kubeadm pulls: an OCI layout, each image under its reference.
pub const IMAGES: &str = "images";
/// The pins of the images of `IMAGES` when they were built from source, in
/// pkg/images.toml's format (`--image-pins`).
pub const IMAGE_PINS: &str = "images.toml";

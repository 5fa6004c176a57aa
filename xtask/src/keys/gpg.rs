//! Signing through `gpg`, for a key whose secret half the operator keeps in
//! gpg's agent: on a smart card or token, or behind a passphrase the agent
//! caches and asks for through its pinentry. The agent speaks gpg's own
//! Assuan protocol, which rpgp does not, so these signatures are made by
//! the `gpg` program; the key's certificate is still exported and judged
//! in-process (expiry, revocation, which subkey signs) like a key file.

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use pgp::types::Fingerprint;

pub struct Gpg {
    /// `gpg key <fingerprint>`, for messages.
    source: String,
}

/// The primary fingerprint of the one secret key gpg lists for `spec`, and
/// its exported certificate (binary).
pub fn find_key(spec: &str) -> Result<(String, Vec<u8>)> {
    let listing = run(
        &[
            "--with-colons",
            "--fixed-list-mode",
            "--list-secret-keys",
            "--",
            spec,
        ],
        b"",
    )
    .with_context(|| format!("--gpg-key {spec:?}: gpg has no secret key for it"))?;
    let primaries = primary_fingerprints(&String::from_utf8_lossy(&listing));
    let fingerprint = match primaries.as_slice() {
        [one] => one.clone(),
        [] => {
            bail!("--gpg-key {spec:?}: gpg has no secret key for it (see gpg --list-secret-keys)")
        }
        many => bail!(
            "--gpg-key {spec:?} names {} keys ({}): give the full fingerprint",
            many.len(),
            many.join(", ")
        ),
    };
    let export = run(&["--export", "--", &fingerprint], b"")
        .with_context(|| format!("gpg key {fingerprint}: cannot export its public key"))?;
    if export.is_empty() {
        bail!("gpg key {fingerprint}: gpg --export wrote nothing");
    }
    Ok((fingerprint, export))
}

/// The fingerprints of the `sec` records in `gpg --with-colons` output:
/// each is the first `fpr` record after its `sec` record.
fn primary_fingerprints(listing: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut want_fpr = false;
    for line in listing.lines() {
        let mut fields = line.split(':');
        match fields.next() {
            Some("sec") => want_fpr = true,
            Some("fpr") if want_fpr => {
                if let Some(fpr) = fields.nth(8).filter(|f| !f.is_empty()) {
                    found.push(fpr.to_string());
                }
                want_fpr = false;
            }
            Some("ssb" | "sub") => want_fpr = false,
            _ => {}
        }
    }
    found
}

impl Gpg {
    pub fn new(source: &str) -> Self {
        Gpg {
            source: source.to_string(),
        }
    }

    /// A detached signature of `data` by the key packet `signer`, armoured
    /// or as a binary packet.
    pub fn detached(&self, signer: &Fingerprint, data: &[u8], armor: bool) -> Result<Vec<u8>> {
        let user = local_user(signer);
        let mut args = vec!["--local-user", &user, "--digest-algo", "SHA256"];
        if armor {
            args.push("--armor");
        }
        args.push("--detach-sign");
        run(&args, data).with_context(|| format!("{}: gpg could not sign", self.source))
    }

    /// `text` cleartext-signed by the key packet `signer`.
    pub fn clearsign(&self, signer: &Fingerprint, text: &str) -> Result<String> {
        let user = local_user(signer);
        let out = run(
            &[
                "--local-user",
                &user,
                "--digest-algo",
                "SHA256",
                "--clearsign",
            ],
            text.as_bytes(),
        )
        .with_context(|| format!("{}: gpg could not sign", self.source))?;
        String::from_utf8(out).context("gpg --clearsign wrote non-UTF-8 output")
    }
}

/// `FPR!`: exactly this key packet, not gpg's choice of subkey.
fn local_user(signer: &Fingerprint) -> String {
    format!(
        "{}!",
        crate::util::hex(signer.as_bytes()).to_ascii_uppercase()
    )
}

/// Runs `gpg --batch ARGS` with `input` on stdin; its stdout, or an error
/// carrying the last lines gpg wrote to stderr. The operator's GNUPGHOME
/// (and agent) are used as they are.
fn run(args: &[&str], input: &[u8]) -> Result<Vec<u8>> {
    let mut child = Command::new("gpg")
        .arg("--batch")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run gpg (install gnupg, or sign with --key FILE)")?;
    let mut stdin = child.stdin.take().context("gpg: no stdin")?;
    let input = input.to_vec();
    // Written from a thread: gpg may fill its stdout pipe before it has
    // read all of its input.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().context("gpg: cannot wait")?;
    let written = writer
        .join()
        .map_err(|_| anyhow::anyhow!("gpg: writer panicked"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last: Vec<&str> = stderr
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let tail = last[last.len().saturating_sub(3)..].join("; ");
        bail!("gpg {} failed ({}): {tail}", args.join(" "), output.status);
    }
    written.context("gpg: cannot write its input")?;
    Ok(output.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_listing_gives_primary_fingerprints_only() {
        let listing = "\
sec:u:255:22:AAAA:1700000000:::u:::scESC:::+::ed25519:::0:
fpr:::::::::1111111111111111111111111111111111111111:
grp:::::::::0000:
uid:u::::1700000000::HASH::test <t@x>::::::::::0:
ssb:u:255:18:BBBB:1700000000::::::e:::+::cv25519::
fpr:::::::::2222222222222222222222222222222222222222:
sec:u:255:22:CCCC:1700000000:::u:::scESC:::+::ed25519:::0:
fpr:::::::::3333333333333333333333333333333333333333:
";
        assert_eq!(
            primary_fingerprints(listing),
            [
                "1111111111111111111111111111111111111111",
                "3333333333333333333333333333333333333333"
            ]
        );
    }
}

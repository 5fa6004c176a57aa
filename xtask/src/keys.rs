//! The signing key of `cargo xtask repo` and `cargo xtask dist --sign`: an operator's OpenPGP key from a file or
//! from gpg's agent, or a generated test key; refusing expired or revoked
//! keys; and the signature forms the clients read: cleartext (`InRelease`),
//! detached armoured (`Release.gpg`, `repomd.xml.asc`), detached binary
//! (inside each rpm), and the public key itself.
//!
//! A key file is used in-process with rpgp (`pgp`), the library the `rpm`
//! crate builds on: no gpg-agent or keyring state. A key held by gpg's
//! agent (smart card, token, a passphrase the agent caches) is reached
//! through `gpg` itself (see `gpg.rs`); everything but the signing — key
//! selection, expiry checks, the published public key — is the same code.

use std::io::BufReader;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use pgp::armor::BlockType;
use pgp::composed::{
    ArmorOptions, CleartextSignedMessage, Deserializable, DetachedSignature, KeyType,
    SecretKeyParamsBuilder, SignedPublicKey, SignedPublicSubKey, SignedSecretKey,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{Signature, SignatureConfig, SignatureType, Subpacket, SubpacketData};
use pgp::ser::Serialize;
use pgp::types::{Fingerprint, KeyDetails, KeyVersion, Password, SigningKey, Tag, Timestamp};

mod gpg;

use gpg::Gpg;

/// A secret key file is written readable by its owner only.
const SECRET_MODE: u32 = 0o600;

/// Where a protected key file's passphrase comes from (or --passphrase-file).
pub const PASSPHRASE_ENV: &str = "KUBEDIST_KEY_PASSPHRASE";

/// A key that expires sooner than this gets a warning on every run.
pub const WARN_BEFORE_EXPIRY_DAYS: u64 = 90;

const DAY: u64 = 86_400;

pub struct RepoKey {
    /// The certificate: what clients get, and what validity is judged on.
    public: SignedPublicKey,
    /// The key packet (primary or subkey) that makes the signatures.
    signing: Fingerprint,
    backend: Backend,
    /// The key file, or `gpg key <fingerprint>`, for messages.
    source: String,
}

enum Backend {
    File {
        secret: Box<SignedSecretKey>,
        passphrase: Option<String>,
    },
    Gpg(Gpg),
}

/// Validity of one key packet as its latest valid self-signature states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Validity {
    /// Seconds since the epoch; `None` for a key that never expires.
    expires: Option<u64>,
    revoked: bool,
    can_sign: bool,
}

impl RepoKey {
    /// Loads an armoured or binary secret key from `path`; `passphrase`
    /// unlocks a protected one.
    pub fn load(path: &Path, passphrase: Option<String>) -> Result<Self> {
        let data =
            std::fs::read(path).with_context(|| format!("{}: cannot read key", path.display()))?;
        let secret = parse_secret_key(&data)
            .with_context(|| format!("{}: not a usable OpenPGP secret key", path.display()))?;
        let public = secret.to_public_key();
        let backend = Backend::File {
            secret: Box::new(secret),
            passphrase,
        };
        Self::new(public, backend, path.display().to_string())
    }

    /// The secret key gpg (and its agent) holds for `spec`: a fingerprint,
    /// key ID or user ID that names exactly one key.
    pub fn from_gpg(spec: &str) -> Result<Self> {
        let (fingerprint, export) = gpg::find_key(spec)?;
        let source = format!("gpg key {fingerprint}");
        let public = SignedPublicKey::from_bytes(BufReader::new(&export[..]))
            .map_err(|e| anyhow!("{source}: gpg --export gave no usable public key: {e}"))?;
        let backend = Backend::Gpg(Gpg::new(&source));
        Self::new(public, backend, source)
    }

    /// Generates an Ed25519 signing key without expiry and writes its
    /// secret half, armoured, to `path` (0600; `path` must not exist).
    pub fn generate_test_key(path: &Path) -> Result<Self> {
        if path.exists() {
            bail!(
                "{}: already exists; sign with it using --key {0}, or remove it to generate a new one",
                path.display()
            );
        }
        let params = SecretKeyParamsBuilder::default()
            // v4 Ed25519 ("EdDSA legacy"): what gpg 2.2, apt's gpgv and rpm verify.
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .primary_user_id("kubedist test repository key <kubedist-test@kubedist.invalid>".into())
            .build()
            .map_err(|e| anyhow!("key parameters: {e}"))?;
        let secret = params
            .generate(rand::thread_rng())
            .map_err(|e| anyhow!("generating a key: {e}"))?;
        let armored = secret
            .to_armored_string(ArmorOptions::default())
            .map_err(|e| anyhow!("armouring the key: {e}"))?;
        crate::util::write_bytes_atomic(path, armored.as_bytes(), SECRET_MODE)?;
        eprintln!(
            "generated test signing key {} -> {}",
            upper_hex(secret.fingerprint().as_bytes()),
            path.display()
        );
        let public = secret.to_public_key();
        let backend = Backend::File {
            secret: Box::new(secret),
            passphrase: None,
        };
        Self::new(public, backend, path.display().to_string())
    }

    fn new(public: SignedPublicKey, backend: Backend, source: String) -> Result<Self> {
        let signing = choose_signer(&public, now_secs()?)
            .with_context(|| format!("{source}: no key may sign"))?;
        let key = RepoKey {
            public,
            signing,
            backend,
            source,
        };
        // A wrong passphrase or an absent card fails before anything is written.
        let probe = match &key.backend {
            Backend::File { .. } => key.signature(SignatureType::Binary, b"", 0).map(drop),
            Backend::Gpg(gpg) => gpg.detached(&key.signing, b"", false).map(drop),
        };
        probe.map_err(|e| anyhow!("{}: cannot sign: {e:#}", key.source))?;
        Ok(key)
    }

    /// Refuses an expired or revoked key (clients would reject everything
    /// it signs) and returns warnings for one that expires soon.
    pub fn check_validity(&self, now: SystemTime) -> Result<Vec<String>> {
        let now = now
            .duration_since(UNIX_EPOCH)
            .context("system clock before 1970")?
            .as_secs();
        let mut checked = vec![(
            "primary key",
            self.fingerprint(),
            primary_validity(&self.public),
        )];
        if self.signing != self.public.primary_key.fingerprint() {
            let sub = self.signing_subkey().context("signing subkey vanished")?;
            let v =
                subkey_validity(&self.public, sub).context("signing subkey lost its binding")?;
            checked.push(("signing subkey", upper_hex(self.signing.as_bytes()), v));
        }
        let mut warnings = Vec::new();
        for (what, fpr, validity) in checked {
            if validity.revoked {
                bail!(
                    "{}: {what} {fpr} is revoked: sign with another key",
                    self.source
                );
            }
            let Some(expires) = validity.expires else {
                continue;
            };
            if expires <= now {
                bail!(
                    "{}: {what} {fpr} expired on {} UTC: apt and dnf refuse its signatures; extend it (gpg --quick-set-expire {fpr} 2y) or use another key, then republish kubedist.asc/kubedist.gpg",
                    self.source,
                    format_date(expires)
                );
            }
            if expires - now < WARN_BEFORE_EXPIRY_DAYS * DAY {
                warnings.push(format!(
                    "{}: {what} {fpr} expires on {} UTC (in {} days); after that apt and dnf refuse this repository: extend it (gpg --quick-set-expire {fpr} 2y), re-run, and give clients the new kubedist.asc/kubedist.gpg",
                    self.source,
                    format_date(expires),
                    (expires - now) / DAY
                ));
            }
        }
        Ok(warnings)
    }

    fn signing_subkey(&self) -> Option<&SignedPublicSubKey> {
        self.public
            .public_subkeys
            .iter()
            .find(|s| s.key.fingerprint() == self.signing)
    }

    /// Fingerprint of the primary key, upper-case hex (as gpg prints it).
    pub fn fingerprint(&self) -> String {
        upper_hex(self.public.fingerprint().as_bytes())
    }

    /// Fingerprint of the key packet that signs (primary or subkey).
    pub fn signing_fingerprint(&self) -> &Fingerprint {
        &self.signing
    }

    pub fn user_id(&self) -> String {
        self.public
            .details
            .users
            .first()
            .map(|u| String::from_utf8_lossy(u.id.id()).into_owned())
            .unwrap_or_else(|| "no user ID".into())
    }

    /// This key's signatures of `normalized`, the text of a cleartext
    /// message as it is signed (`CleartextSignedMessage::new_many` gives
    /// it); `text` is the same before normalising, which gpg takes.
    fn text_signatures(&self, text: &str, normalized: &str, time: u64) -> Result<Vec<Signature>> {
        if let Backend::Gpg(gpg) = &self.backend {
            let signed = gpg.clearsign(&self.signing, text)?;
            let (message, _) = CleartextSignedMessage::from_string(&signed)
                .map_err(|e| anyhow!("{}: reading gpg's signature: {e}", self.source))?;
            return Ok(message.signatures().to_vec());
        }
        Ok(vec![self.signature(
            SignatureType::Text,
            normalized.as_bytes(),
            time,
        )?])
    }

    /// This key's detached signatures of `data`.
    fn binary_signatures(&self, data: &[u8], time: u64) -> Result<Vec<DetachedSignature>> {
        if let Backend::Gpg(gpg) = &self.backend {
            let out = gpg.detached(&self.signing, data, false)?;
            return DetachedSignature::from_bytes_many(&out[..])
                .map_err(|e| anyhow!("{}: reading gpg's signature: {e}", self.source))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow!("{}: reading gpg's signature: {e}", self.source));
        }
        Ok(vec![DetachedSignature::new(self.signature(
            SignatureType::Binary,
            data,
            time,
        )?)])
    }

    /// A detached, armoured signature of `data` (the tarball's
    /// `SHA256SUMS.asc`).
    pub fn detached_armored(&self, data: &[u8], time: u64) -> Result<String> {
        armor(&self.binary_signatures(data, time)?, BlockType::Signature)
    }

    /// A detached binary signature packet of `data` (an rpm's header
    /// signature, sysupdate's `SHA256SUMS.gpg`).
    pub fn detached_binary(&self, data: &[u8], time: u64) -> Result<Vec<u8>> {
        self.binary_signatures(data, time)?
            .to_bytes()
            .map_err(|e| anyhow!("serialising a signature: {e}"))
    }

    /// The creation time to give a signature meant to be made at `wanted`:
    /// never before the signing key itself was created, which gpgv rejects
    /// ("time conflict") — as happens with SOURCE_DATE_EPOCH and a newer key.
    /// gpg-made signatures carry gpg's clock instead.
    pub fn signature_time(&self, wanted: u64) -> u64 {
        let created = match self.signing_subkey() {
            Some(sub) => sub.key.created_at(),
            None => self.public.primary_key.created_at(),
        };
        wanted.max(u64::from(created.as_secs()))
    }

    fn signature(&self, typ: SignatureType, data: &[u8], time: u64) -> Result<Signature> {
        let Backend::File { secret, passphrase } = &self.backend else {
            bail!("{}: a key held by gpg signs through gpg", self.source);
        };
        let password: Password = passphrase.clone().unwrap_or_default().into();
        let time = self.signature_time(time);
        let result = if secret.primary_key.fingerprint() == self.signing {
            sign_with(&secret.primary_key, &password, typ, data, time)
        } else {
            let sub = secret
                .secret_subkeys
                .iter()
                .find(|s| s.key.fingerprint() == self.signing)
                .context("the signing subkey's secret part is not in the key file")?;
            sign_with(&sub.key, &password, typ, data, time)
        };
        result.map_err(|e| {
            let encrypted = secret.primary_key.secret_params().is_encrypted()
                || secret
                    .secret_subkeys
                    .iter()
                    .any(|s| s.key.secret_params().is_encrypted());
            match passphrase {
                None if encrypted => anyhow!(
                    "the key is passphrase-protected: set {PASSPHRASE_ENV} or give --passphrase-file"
                ),
                Some(_) if encrypted => anyhow!("wrong passphrase? {e:#}"),
                _ => e,
            }
        })
    }
}

/// The keys of a repository: the primary (`--key`), which signs the rpms
/// and sysupdate's `SHA256SUMS.gpg`; the keys of `--also-sign-with`, which
/// sign apt's and dnf's metadata beside it; and the public keys of
/// `--publish-key`, which sign nothing yet. All are published. A key
/// rotates in three runs (README): the new key published, then signing
/// with the old one beside it, then alone. apt and dnf accept metadata
/// when one signature is good; zypper (libzypp) refuses a signature by a
/// key it lacks, and so does gpg, which systemd-sysupdate runs: their
/// hosts take the new key while it is only published, and sysupdate's
/// checksums carry the primary's signature alone.
pub struct Signers {
    /// The primary first, then the others in the order given.
    keys: Vec<RepoKey>,
    /// Published, signing nothing.
    announced: Vec<SignedPublicKey>,
}

impl Signers {
    /// `primary`, `also` and `announced`; a key given twice is refused.
    pub fn new(
        primary: RepoKey,
        also: Vec<RepoKey>,
        announced: Vec<(String, SignedPublicKey)>,
    ) -> Result<Self> {
        let mut given = vec![(primary.fingerprint(), primary.source.clone())];
        let mut refuse_twice = |fingerprint: String, source: &str| -> Result<()> {
            if let Some((_, same)) = given.iter().find(|(f, _)| *f == fingerprint) {
                bail!("{source}: key {fingerprint} is already given as {same}");
            }
            given.push((fingerprint, source.to_string()));
            Ok(())
        };
        let mut keys = vec![primary];
        for key in also {
            refuse_twice(key.fingerprint(), &key.source)?;
            keys.push(key);
        }
        let mut published = Vec::new();
        for (source, public) in announced {
            refuse_twice(upper_hex(public.fingerprint().as_bytes()), &source)?;
            published.push(public);
        }
        Ok(Signers {
            keys,
            announced: published,
        })
    }

    /// The fingerprints of the keys published but not signing.
    pub fn announced(&self) -> Vec<String> {
        self.announced
            .iter()
            .map(|k| upper_hex(k.fingerprint().as_bytes()))
            .collect()
    }

    /// The key that signs the rpms and sysupdate's checksums.
    pub fn primary(&self) -> &RepoKey {
        &self.keys[0]
    }

    /// Every key, the primary first.
    pub fn all(&self) -> &[RepoKey] {
        &self.keys
    }

    /// `text` cleartext-signed by every key (apt's `InRelease`).
    pub fn clearsign(&self, text: &str, time: u64) -> Result<String> {
        let message = CleartextSignedMessage::new_many(text, |normalized| {
            let mut all = Vec::new();
            for key in &self.keys {
                all.extend(
                    key.text_signatures(text, normalized, time)
                        .map_err(|e| pgp::errors::Error::from(format!("{e:#}")))?,
                );
            }
            Ok(all)
        })
        .map_err(|e| anyhow!("signing: {e}"))?;
        message
            .to_armored_string(ArmorOptions::default())
            .map_err(|e| anyhow!("armouring a signature: {e}"))
    }

    /// A detached, armoured signature of `data` by every key, one armour
    /// block (`Release.gpg`, `repomd.xml.asc`).
    pub fn detached_armored(&self, data: &[u8], time: u64) -> Result<String> {
        let mut all = Vec::new();
        for key in &self.keys {
            all.extend(key.binary_signatures(data, time)?);
        }
        armor(&all, BlockType::Signature)
    }

    /// Every public key, ASCII-armoured in one block (`kubedist.asc`, dnf's
    /// `gpgkey=`, which imports each).
    pub fn public_armored(&self) -> Result<String> {
        armor(&self.certificates(), BlockType::PublicKey)
    }

    /// Every public key as one binary keyring (`kubedist.gpg`, apt's
    /// `signed-by=`, sysupdate's `import-pubring.gpg`).
    pub fn public_binary(&self) -> Result<Vec<u8>> {
        self.certificates()
            .to_bytes()
            .map_err(|e| anyhow!("serialising the public keys: {e}"))
    }

    /// The signing keys' certificates, then the announced ones.
    fn certificates(&self) -> Vec<&SignedPublicKey> {
        let signing = self.keys.iter().map(|k| &k.public);
        signing.chain(&self.announced).collect()
    }

    /// `FPR (user ID)` of every key, for messages.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("{} ({})", k.fingerprint(), k.user_id()))
            .collect();
        each.join(", ")
    }
}

/// The public key in the file `path` (armoured or binary; of a secret key
/// file, its public half), refused when it is expired or revoked or cannot
/// sign: clients would be told to trust a key that can never sign for them.
pub fn load_public_key(path: &Path) -> Result<SignedPublicKey> {
    let data =
        std::fs::read(path).with_context(|| format!("{}: cannot read key", path.display()))?;
    let public = match parse_public_key(&data) {
        Ok(public) => public,
        Err(e) => match parse_secret_key(&data) {
            Ok(secret) => secret.to_public_key(),
            Err(_) => bail!("{}: not an OpenPGP public key: {e}", path.display()),
        },
    };
    let now = now_secs()?;
    let validity = primary_validity(&public);
    let fpr = upper_hex(public.fingerprint().as_bytes());
    if validity.revoked {
        bail!("{}: key {fpr} is revoked", path.display());
    }
    if let Some(expires) = validity.expires.filter(|e| *e <= now) {
        bail!(
            "{}: key {fpr} expired on {} UTC",
            path.display(),
            format_date(expires)
        );
    }
    choose_signer(&public, now).with_context(|| format!("{}: key {fpr}", path.display()))?;
    Ok(public)
}

/// Packets in one ASCII armour block of type `typ`.
fn armor(packets: &impl Serialize, typ: BlockType) -> Result<String> {
    let mut out = Vec::new();
    pgp::armor::write(packets, typ, &mut out, None, true).map_err(|e| anyhow!("armouring: {e}"))?;
    String::from_utf8(out).context("armour is ASCII")
}

/// The newest valid signing subkey (what gpg picks too), else the primary
/// key when it may sign. Expiry and revocation of the primary key are
/// reported by `check_validity`, with dates.
fn choose_signer(key: &SignedPublicKey, now: u64) -> Result<Fingerprint> {
    let usable = |v: &Validity| v.can_sign && !v.revoked && v.expires.is_none_or(|e| e > now);
    let newest_subkey = key
        .public_subkeys
        .iter()
        .filter(|s| subkey_validity(key, s).is_some_and(|v| usable(&v)))
        .max_by_key(|s| s.key.created_at().as_secs());
    if let Some(sub) = newest_subkey {
        return Ok(sub.key.fingerprint());
    }
    if primary_validity(key).can_sign {
        return Ok(key.primary_key.fingerprint());
    }
    bail!("neither the primary key nor a valid subkey may sign (no signing capability, or every signing subkey expired or revoked)")
}

/// True when `sig` names `key` as its issuer.
fn issued_by(sig: &Signature, key: &impl KeyDetails) -> bool {
    let (fpr, id) = (key.fingerprint(), key.legacy_key_id());
    sig.issuer_fingerprint().contains(&&fpr) || sig.issuer_key_id().contains(&&id)
}

fn created(sig: &Signature) -> u32 {
    sig.created().map(|t| t.as_secs()).unwrap_or(0)
}

/// The primary key's validity from its self-signatures that verify; the
/// certifications of other keys (common on real keys) do not count.
fn primary_validity(key: &SignedPublicKey) -> Validity {
    let primary = &key.primary_key;
    let details = &key.details;
    let certifications = details.users.iter().flat_map(|u| {
        u.signatures.iter().filter(move |s| {
            s.is_certification()
                && issued_by(s, primary)
                && s.verify_certification(primary, Tag::UserId, &u.id).is_ok()
        })
    });
    let direct = details
        .direct_signatures
        .iter()
        .filter(|s| issued_by(s, primary) && s.verify_key(primary).is_ok());
    let latest = certifications.chain(direct).max_by_key(|s| created(s));
    let flags = latest.map(|s| s.key_flags());
    Validity {
        expires: latest.and_then(|s| expiry(primary.created_at(), s)),
        revoked: details
            .revocation_signatures
            .iter()
            .any(|s| issued_by(s, primary) && s.verify_key(primary).is_ok()),
        // Old keys carry no key flags at all; their primary may sign.
        can_sign: flags.as_ref().is_none_or(|f| {
            f.sign()
                || !(f.certify() || f.encrypt_comms() || f.encrypt_storage() || f.authentication())
        }),
    }
}

/// A subkey's validity from its latest binding that verifies (with the
/// subkey's back-signature when it may sign); `None` when none does.
fn subkey_validity(key: &SignedPublicKey, sub: &SignedPublicSubKey) -> Option<Validity> {
    let primary = &key.primary_key;
    let verified = |t: SignatureType| {
        sub.signatures.iter().filter(move |s| {
            s.typ() == Some(t)
                && issued_by(s, primary)
                && s.verify_subkey_binding(primary, &sub.key).is_ok()
        })
    };
    let binding = verified(SignatureType::SubkeyBinding)
        .filter(|s| {
            !s.key_flags().sign()
                || s.embedded_signature()
                    .is_some_and(|b| b.verify_primary_key_binding(&sub.key, primary).is_ok())
        })
        .max_by_key(|s| created(s))?;
    Some(Validity {
        expires: expiry(sub.key.created_at(), binding),
        revoked: verified(SignatureType::SubkeyRevocation).next().is_some(),
        can_sign: binding.key_flags().sign(),
    })
}

/// A signature with creation time `time`, naming its issuer by
/// fingerprint (and by key ID for v4, which gpg 2.2 still looks for).
fn sign_with(
    key: &impl SigningKey,
    password: &Password,
    typ: SignatureType,
    data: &[u8],
    time: u64,
) -> Result<Signature> {
    let created = Timestamp::from_secs(u32::try_from(time).context("timestamp beyond 2106")?);
    let mut config = match key.version() {
        KeyVersion::V6 => SignatureConfig::v6(
            rand::thread_rng(),
            typ,
            key.algorithm(),
            HashAlgorithm::Sha256,
        )?,
        _ => SignatureConfig::v4(typ, key.algorithm(), HashAlgorithm::Sha256),
    };
    config.hashed_subpackets = vec![
        Subpacket::regular(SubpacketData::SignatureCreationTime(created))?,
        Subpacket::regular(SubpacketData::IssuerFingerprint(key.fingerprint()))?,
    ];
    if key.version() <= KeyVersion::V4 {
        config.unhashed_subpackets = vec![Subpacket::regular(SubpacketData::IssuerKeyId(
            key.legacy_key_id(),
        ))?];
    }
    Ok(config.sign(key, password, data)?)
}

/// An armoured or binary public key.
fn parse_public_key(data: &[u8]) -> pgp::errors::Result<SignedPublicKey> {
    if data.trim_ascii_start().starts_with(b"-----BEGIN") {
        SignedPublicKey::from_armor_single(data).map(|(k, _)| k)
    } else {
        SignedPublicKey::from_bytes(BufReader::new(data))
    }
}

fn parse_secret_key(data: &[u8]) -> Result<SignedSecretKey> {
    let armored = data.trim_ascii_start().starts_with(b"-----BEGIN");
    let parsed = if armored {
        SignedSecretKey::from_armor_single(data).map(|(k, _)| k)
    } else {
        SignedSecretKey::from_bytes(BufReader::new(data))
    };
    parsed.map_err(|e| {
        if parse_public_key(data).is_ok() {
            anyhow!("it holds only a public key; signing needs the secret key (gpg --export-secret-keys), or use --gpg-key to sign through gpg's agent")
        } else {
            anyhow!("{e}")
        }
    })
}

/// When a key created at `created` expires according to `sig`.
fn expiry(created: Timestamp, sig: &Signature) -> Option<u64> {
    let after = sig.key_expiration_time()?.as_secs();
    (after != 0).then(|| u64::from(created.as_secs()) + u64::from(after))
}

fn now_secs() -> Result<u64> {
    Ok(SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("system clock before 1970")?
        .as_secs())
}

fn upper_hex(bytes: &[u8]) -> String {
    crate::util::hex(bytes).to_ascii_uppercase()
}

/// `2025-03-01 12:00` for messages.
fn format_date(secs: u64) -> String {
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|| format!("@{secs}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_key(dir: &Path) -> RepoKey {
        RepoKey::generate_test_key(&dir.join("k.asc")).unwrap()
    }

    fn key_created(key: &RepoKey) -> u64 {
        u64::from(key.public.primary_key.created_at().as_secs())
    }

    #[test]
    fn generated_key_round_trips_and_signs() {
        let tmp = tempfile::tempdir().unwrap();
        let key = test_key(tmp.path());
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(tmp.path().join("k.asc"))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert!(key.check_validity(SystemTime::now()).unwrap().is_empty());

        let loaded = RepoKey::load(&tmp.path().join("k.asc"), None).unwrap();
        assert_eq!(loaded.fingerprint(), key.fingerprint());

        let public = key.public.clone();
        let sig = key.detached_armored(b"Release\n", 1_700_000_000).unwrap();
        let (sig, _) = DetachedSignature::from_string(&sig).unwrap();
        sig.verify(&public, b"Release\n").unwrap();
        assert!(sig.verify(&public, b"Tampered\n").is_err());
        // Never older than the key: gpgv rejects such signatures.
        assert_eq!(
            sig.signature.created().map(|t| u64::from(t.as_secs())),
            Some(key_created(&key))
        );
        let later = key_created(&key) + 10;
        let sig = key.detached_armored(b"x", later).unwrap();
        let (sig, _) = DetachedSignature::from_string(&sig).unwrap();
        assert_eq!(
            sig.signature.created().map(|t| u64::from(t.as_secs())),
            Some(later)
        );

        let binary = key.detached_binary(b"header", later).unwrap();
        let sig = DetachedSignature::from_bytes(BufReader::new(&binary[..])).unwrap();
        sig.verify(&public, b"header").unwrap();

        let signed = Signers::new(key, Vec::new(), Vec::new())
            .unwrap()
            .clearsign("Origin: kubedist\n- dash\n", 1_700_000_000)
            .unwrap();
        let (msg, _) = CleartextSignedMessage::from_string(&signed).unwrap();
        msg.verify(&public).unwrap();
        assert_eq!(msg.signed_text(), "Origin: kubedist\r\n- dash\r\n");
    }

    #[test]
    fn every_signer_signs_the_metadata_and_is_published() {
        let tmp = tempfile::tempdir().unwrap();
        let old = test_key(tmp.path());
        let new = RepoKey::generate_test_key(&tmp.path().join("new.asc")).unwrap();
        let (old_public, new_public) = (old.public.clone(), new.public.clone());
        let signers = Signers::new(old, vec![new], Vec::new()).unwrap();
        assert_eq!(signers.primary().public, old_public);

        let signed = signers.clearsign("Suite: stable\n", 1_700_000_000).unwrap();
        let (msg, _) = CleartextSignedMessage::from_string(&signed).unwrap();
        assert_eq!(msg.signatures().len(), 2);
        msg.verify(&old_public).unwrap();
        msg.verify(&new_public).unwrap();

        let detached = signers.detached_armored(b"repomd", 1_700_000_000).unwrap();
        assert_eq!(detached.matches("-----BEGIN PGP SIGNATURE-----").count(), 1);
        let sigs: Vec<DetachedSignature> = DetachedSignature::from_armor_many(detached.as_bytes())
            .unwrap()
            .0
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(sigs.len(), 2);
        sigs[0].verify(&old_public, b"repomd").unwrap();
        sigs[1].verify(&new_public, b"repomd").unwrap();

        let armored = signers.public_armored().unwrap();
        let keys: Vec<SignedPublicKey> = SignedPublicKey::from_armor_many(armored.as_bytes())
            .unwrap()
            .0
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(keys, vec![old_public.clone(), new_public.clone()]);
        let binary = signers.public_binary().unwrap();
        let keys: Vec<SignedPublicKey> = SignedPublicKey::from_bytes_many(&binary[..])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(keys, vec![old_public, new_public]);
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let key = test_key(tmp.path());
        let again = RepoKey::load(&tmp.path().join("k.asc"), None).unwrap();
        let err = format!(
            "{:#}",
            Signers::new(key, vec![again], Vec::new()).err().unwrap()
        );
        assert!(err.contains("is already given as"), "{err}");
    }

    #[test]
    fn protected_key_needs_the_right_passphrase() {
        let tmp = tempfile::tempdir().unwrap();
        let params = SecretKeyParamsBuilder::default()
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .passphrase(Some("s3cret".into()))
            .primary_user_id("protected <p@kubedist.invalid>".into())
            .build()
            .unwrap();
        let secret = params.generate(rand::thread_rng()).unwrap();
        let path = tmp.path().join("p.asc");
        std::fs::write(
            &path,
            secret.to_armored_string(ArmorOptions::default()).unwrap(),
        )
        .unwrap();

        let none = format!("{:#}", RepoKey::load(&path, None).err().unwrap());
        assert!(none.contains("passphrase-protected"), "{none}");
        let wrong = format!(
            "{:#}",
            RepoKey::load(&path, Some("nope".into())).err().unwrap()
        );
        assert!(wrong.contains("wrong passphrase"), "{wrong}");
        assert!(RepoKey::load(&path, Some("s3cret".into())).is_ok());
    }

    #[test]
    fn existing_key_file_is_not_overwritten() {
        let tmp = tempfile::tempdir().unwrap();
        test_key(tmp.path());
        let err = RepoKey::generate_test_key(&tmp.path().join("k.asc"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("already exists"), "{err}");
    }

    #[test]
    fn public_key_file_is_refused_with_a_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let key = test_key(tmp.path());
        let path = tmp.path().join("pub.asc");
        std::fs::write(
            &path,
            key.public
                .to_armored_string(ArmorOptions::default())
                .unwrap(),
        )
        .unwrap();
        let err = format!("{:#}", RepoKey::load(&path, None).err().unwrap());
        assert!(err.contains("only a public key"), "{err}");
    }

    #[test]
    fn signatures_are_reproducible() {
        let tmp = tempfile::tempdir().unwrap();
        let key = Signers::new(test_key(tmp.path()), Vec::new(), Vec::new()).unwrap();
        let a = key.clearsign("x\n", 1).unwrap();
        assert_eq!(a, key.clearsign("x\n", 1).unwrap());
    }
}

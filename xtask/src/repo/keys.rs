//! The repository signing key: loading an operator's OpenPGP key (or
//! generating a test key), refusing expired or revoked keys, and the three
//! signature forms the clients read: cleartext (`InRelease`), detached
//! armoured (`Release.gpg`, `repomd.xml.asc`), and the public key itself.
//!
//! OpenPGP is done in-process with rpgp (`pgp`), the library the `rpm`
//! crate signs packages with, so there is no gpg-agent or keyring state.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use pgp::composed::{
    ArmorOptions, CleartextSignedMessage, Deserializable, DetachedSignature, KeyType,
    SecretKeyParamsBuilder, SignedPublicKey, SignedSecretKey,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{Signature, SignatureConfig, SignatureType, Subpacket, SubpacketData};
use pgp::ser::Serialize;
use pgp::types::{KeyDetails, KeyVersion, Password, SigningKey, Timestamp};

use super::files;

/// Where a protected key's passphrase comes from.
pub const PASSPHRASE_ENV: &str = "KUBEDIST_KEY_PASSPHRASE";

/// A key that expires sooner than this gets a warning on every run.
pub const WARN_BEFORE_EXPIRY_DAYS: u64 = 90;

const DAY: u64 = 86_400;

/// Which key packet makes the signatures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Signer {
    Primary,
    Subkey(usize),
}

pub struct RepoKey {
    secret: SignedSecretKey,
    signer: Signer,
    passphrase: Option<String>,
    /// The key file, for messages.
    source: PathBuf,
}

/// Validity of one key packet as its latest self-signature states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Validity {
    /// Seconds since the epoch; `None` for a key that never expires.
    expires: Option<u64>,
    revoked: bool,
    can_sign: bool,
}

impl RepoKey {
    /// Loads an armoured or binary secret key from `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let data =
            std::fs::read(path).with_context(|| format!("{}: cannot read key", path.display()))?;
        let secret = parse_secret_key(&data)
            .with_context(|| format!("{}: not a usable OpenPGP secret key", path.display()))?;
        let passphrase = std::env::var(PASSPHRASE_ENV).ok();
        let key = Self::new(secret, passphrase, path)?;
        key.check_unlocks()?;
        Ok(key)
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
        files::write_atomic(path, armored.as_bytes(), files::SECRET_MODE)?;
        eprintln!(
            "generated test signing key {} -> {}",
            hex_upper(secret.fingerprint().as_bytes()),
            path.display()
        );
        Self::new(secret, None, path)
    }

    fn new(secret: SignedSecretKey, passphrase: Option<String>, source: &Path) -> Result<Self> {
        let mut key = RepoKey {
            secret,
            signer: Signer::Primary,
            passphrase,
            source: source.to_path_buf(),
        };
        key.signer = key.choose_signer(now_secs()?)?;
        Ok(key)
    }

    /// The newest valid signing subkey (what gpg uses too), else the
    /// primary key when it may sign.
    fn choose_signer(&self, now: u64) -> Result<Signer> {
        let usable = |v: &Validity| v.can_sign && !v.revoked && v.expires.is_none_or(|e| e > now);
        let newest_subkey = (0..self.secret.secret_subkeys.len())
            .filter(|&i| self.subkey_validity(i).is_some_and(|v| usable(&v)))
            .max_by_key(|&i| self.secret.secret_subkeys[i].key.created_at().as_secs());
        if let Some(i) = newest_subkey {
            return Ok(Signer::Subkey(i));
        }
        let primary = self.primary_validity();
        if primary.can_sign {
            // Expiry and revocation are reported by check_validity.
            return Ok(Signer::Primary);
        }
        bail!(
            "{}: neither the primary key nor a valid subkey may sign (no signing capability, or all signing subkeys expired or revoked)",
            self.source.display()
        )
    }

    /// Refuses an expired or revoked key (clients would reject everything
    /// it signs) and returns warnings for one that expires soon.
    pub fn check_validity(&self, now: SystemTime) -> Result<Vec<String>> {
        let now = now
            .duration_since(UNIX_EPOCH)
            .context("system clock before 1970")?
            .as_secs();
        let mut checked = vec![("primary key", self.fingerprint(), self.primary_validity())];
        if let Signer::Subkey(i) = self.signer {
            let v = self
                .subkey_validity(i)
                .context("signing subkey lost its binding")?;
            checked.push(("signing subkey", self.signing_fingerprint_upper(), v));
        }
        let mut warnings = Vec::new();
        for (what, fpr, validity) in checked {
            if validity.revoked {
                bail!(
                    "{}: {what} {fpr} is revoked: sign with another key",
                    self.source.display()
                );
            }
            let Some(expires) = validity.expires else {
                continue;
            };
            if expires <= now {
                bail!(
                    "{}: {what} {fpr} expired on {} UTC: clients refuse its signatures; extend it (gpg --quick-set-expire {fpr} 2y) or use another key, then republish kubedist.asc/kubedist.gpg",
                    self.source.display(),
                    format_date(expires)
                );
            }
            let left = (expires - now) / DAY;
            if expires - now < WARN_BEFORE_EXPIRY_DAYS * DAY {
                warnings.push(format!(
                    "{}: {what} {fpr} expires on {} UTC (in {left} days); after that apt and dnf refuse this repository: extend it (gpg --quick-set-expire {fpr} 2y), re-run, and give clients the new kubedist.asc/kubedist.gpg",
                    self.source.display(),
                    format_date(expires)
                ));
            }
        }
        Ok(warnings)
    }

    fn primary_validity(&self) -> Validity {
        let primary = &self.secret.primary_key;
        let fpr = primary.fingerprint();
        let id = primary.legacy_key_id();
        let by_primary = |s: &&Signature| {
            s.issuer_fingerprint().contains(&&fpr) || s.issuer_key_id().contains(&&id)
        };
        let details = &self.secret.details;
        let latest = details
            .users
            .iter()
            .flat_map(|u| &u.signatures)
            .chain(&details.direct_signatures)
            .filter(by_primary)
            .max_by_key(|s| s.created().map(|t| t.as_secs()).unwrap_or(0));
        let flags = latest.map(|s| s.key_flags());
        Validity {
            expires: latest.and_then(|s| expiry(primary.created_at(), s)),
            revoked: details.revocation_signatures.iter().any(|s| by_primary(&s)),
            // Old keys carry no key flags at all; their primary may sign.
            can_sign: flags.as_ref().is_none_or(|f| {
                f.sign()
                    || !(f.certify()
                        || f.encrypt_comms()
                        || f.encrypt_storage()
                        || f.authentication())
            }),
        }
    }

    fn subkey_validity(&self, index: usize) -> Option<Validity> {
        let sub = self.secret.secret_subkeys.get(index)?;
        let of = |t: SignatureType| sub.signatures.iter().filter(move |s| s.typ() == Some(t));
        let binding = of(SignatureType::SubkeyBinding)
            .max_by_key(|s| s.created().map(|t| t.as_secs()).unwrap_or(0))?;
        Some(Validity {
            expires: expiry(sub.key.created_at(), binding),
            revoked: of(SignatureType::SubkeyRevocation).next().is_some(),
            can_sign: binding.key_flags().sign(),
        })
    }

    /// Fingerprint of the primary key, upper-case hex (as gpg prints it).
    pub fn fingerprint(&self) -> String {
        hex_upper(self.secret.fingerprint().as_bytes())
    }

    fn signing_fingerprint_upper(&self) -> String {
        hex_upper(self.signing_fingerprint().as_bytes())
    }

    /// Fingerprint of the key packet that signs (primary or subkey).
    pub fn signing_fingerprint(&self) -> pgp::types::Fingerprint {
        match self.signer {
            Signer::Primary => self.secret.primary_key.fingerprint(),
            Signer::Subkey(i) => self.secret.secret_subkeys[i].key.fingerprint(),
        }
    }

    pub fn user_id(&self) -> String {
        self.secret
            .details
            .users
            .first()
            .map(|u| String::from_utf8_lossy(u.id.id()).into_owned())
            .unwrap_or_else(|| "no user ID".into())
    }

    pub fn passphrase(&self) -> Option<&str> {
        self.passphrase.as_deref()
    }

    /// The secret key armoured, for the `rpm` crate's signer.
    pub fn secret_armored(&self) -> Result<String> {
        self.secret
            .to_armored_string(ArmorOptions::default())
            .map_err(|e| anyhow!("{}: armouring the key: {e}", self.source.display()))
    }

    fn public_key(&self) -> SignedPublicKey {
        self.secret.to_public_key()
    }

    /// The public key, ASCII-armoured (`kubedist.asc`, dnf's `gpgkey=`).
    pub fn public_armored(&self) -> Result<String> {
        self.public_key()
            .to_armored_string(ArmorOptions::default())
            .map_err(|e| anyhow!("armouring the public key: {e}"))
    }

    /// The public key as a binary keyring (`kubedist.gpg`, apt's `signed-by=`).
    pub fn public_binary(&self) -> Result<Vec<u8>> {
        self.public_key()
            .to_bytes()
            .map_err(|e| anyhow!("serialising the public key: {e}"))
    }

    /// `text` cleartext-signed (apt's `InRelease`).
    pub fn clearsign(&self, text: &str, time: u64) -> Result<String> {
        let message = CleartextSignedMessage::new_many(text, |normalized| {
            self.signature(SignatureType::Text, normalized.as_bytes(), time)
                .map(|s| vec![s])
                .map_err(|e| pgp::errors::Error::from(format!("{e:#}")))
        })
        .map_err(|e| anyhow!("signing: {e}"))?;
        message
            .to_armored_string(ArmorOptions::default())
            .map_err(|e| anyhow!("armouring a signature: {e}"))
    }

    /// A detached, armoured signature of `data` (`Release.gpg`, `repomd.xml.asc`).
    pub fn detached_armored(&self, data: &[u8], time: u64) -> Result<String> {
        DetachedSignature::new(self.signature(SignatureType::Binary, data, time)?)
            .to_armored_string(ArmorOptions::default())
            .map_err(|e| anyhow!("armouring a signature: {e}"))
    }

    /// The creation time to give a signature meant to be made at `wanted`:
    /// never before the signing key itself was created, which gpgv rejects
    /// ("time conflict") — as happens with SOURCE_DATE_EPOCH and a newer key.
    pub fn signature_time(&self, wanted: u64) -> u64 {
        let created = match self.signer {
            Signer::Primary => self.secret.primary_key.created_at(),
            Signer::Subkey(i) => self.secret.secret_subkeys[i].key.created_at(),
        };
        wanted.max(u64::from(created.as_secs()))
    }

    fn signature(&self, typ: SignatureType, data: &[u8], time: u64) -> Result<Signature> {
        let time = self.signature_time(time);
        let password: Password = self.passphrase.clone().unwrap_or_default().into();
        let result = match self.signer {
            Signer::Primary => sign_with(&self.secret.primary_key, &password, typ, data, time),
            Signer::Subkey(i) => sign_with(
                &self.secret.secret_subkeys[i].key,
                &password,
                typ,
                data,
                time,
            ),
        };
        result.with_context(|| format!("{}: signing failed", self.source.display()))
    }

    /// Signs once, so a wrong or missing passphrase fails before anything
    /// is written.
    fn check_unlocks(&self) -> Result<()> {
        let encrypted = match self.signer {
            Signer::Primary => self.secret.primary_key.secret_params().is_encrypted(),
            Signer::Subkey(i) => self.secret.secret_subkeys[i]
                .key
                .secret_params()
                .is_encrypted(),
        };
        if encrypted && self.passphrase.is_none() {
            bail!(
                "{}: the key is passphrase-protected: set {PASSPHRASE_ENV}",
                self.source.display()
            );
        }
        let password: Password = self.passphrase.clone().unwrap_or_default().into();
        let unlocked = match self.signer {
            Signer::Primary => sign_with(
                &self.secret.primary_key,
                &password,
                SignatureType::Binary,
                b"",
                0,
            ),
            Signer::Subkey(i) => sign_with(
                &self.secret.secret_subkeys[i].key,
                &password,
                SignatureType::Binary,
                b"",
                0,
            ),
        };
        unlocked.map(drop).map_err(|e| {
            anyhow!(
                "{}: cannot unlock the key (wrong {PASSPHRASE_ENV}?): {e:#}",
                self.source.display()
            )
        })
    }
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

fn parse_secret_key(data: &[u8]) -> Result<SignedSecretKey> {
    let armored = data.trim_ascii_start().starts_with(b"-----BEGIN");
    let parsed = if armored {
        SignedSecretKey::from_armor_single(data).map(|(k, _)| k)
    } else {
        SignedSecretKey::from_bytes(BufReader::new(data))
    };
    match parsed {
        Ok(key) => {
            key.verify_bindings()
                .map_err(|e| anyhow!("its self-signatures do not verify: {e}"))?;
            Ok(key)
        }
        Err(e) => {
            let public = if armored {
                SignedPublicKey::from_armor_single(data).is_ok()
            } else {
                SignedPublicKey::from_bytes(BufReader::new(data)).is_ok()
            };
            if public {
                bail!("it holds only a public key; signing needs the secret key (gpg --export-secret-keys)")
            }
            Err(anyhow!("{e}"))
        }
    }
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

fn hex_upper(bytes: &[u8]) -> String {
    super::hex(bytes).to_ascii_uppercase()
}

/// `2025-03-01` for messages.
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

        let loaded = RepoKey::load(&tmp.path().join("k.asc")).unwrap();
        assert_eq!(loaded.fingerprint(), key.fingerprint());

        let public =
            SignedPublicKey::from_bytes(BufReader::new(&key.public_binary().unwrap()[..])).unwrap();
        let sig = key.detached_armored(b"Release\n", 1_700_000_000).unwrap();
        let (sig, _) = DetachedSignature::from_string(&sig).unwrap();
        sig.verify(&public, b"Release\n").unwrap();
        assert!(sig.verify(&public, b"Tampered\n").is_err());
        // Never older than the key: gpgv rejects such signatures.
        let key_created = u64::from(key.secret.primary_key.created_at().as_secs());
        assert_eq!(
            sig.signature.created().map(|t| u64::from(t.as_secs())),
            Some(key_created)
        );
        let later = key_created + 10;
        let sig = key.detached_armored(b"x", later).unwrap();
        let (sig, _) = DetachedSignature::from_string(&sig).unwrap();
        assert_eq!(
            sig.signature.created().map(|t| u64::from(t.as_secs())),
            Some(later)
        );

        let signed = key
            .clearsign("Origin: kubedist\n- dash\n", 1_700_000_000)
            .unwrap();
        let (msg, _) = CleartextSignedMessage::from_string(&signed).unwrap();
        msg.verify(&public).unwrap();
        assert_eq!(msg.signed_text(), "Origin: kubedist\r\n- dash\r\n");
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
        std::fs::write(&path, key.public_armored().unwrap()).unwrap();
        let err = format!("{:#}", RepoKey::load(&path).err().unwrap());
        assert!(err.contains("only a public key"), "{err}");
    }

    #[test]
    fn signatures_are_reproducible() {
        let tmp = tempfile::tempdir().unwrap();
        let key = test_key(tmp.path());
        let a = key.clearsign("x\n", 1).unwrap();
        assert_eq!(a, key.clearsign("x\n", 1).unwrap());
    }
}

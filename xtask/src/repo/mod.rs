//! `cargo xtask repo`: signed apt and yum/dnf repositories and a served
//! sysext directory from dist output.
//!
//! One repository directory holds the three trees and the public key:
//!
//! ```text
//! REPO/pool/<component>/<k>/<source>/*.deb      every .deb ever added
//! REPO/dists/<suite>/...                        apt indices, Release, InRelease, Release.gpg
//! REPO/<rpmarch>/*.rpm + repodata/              one dnf/yum repository per architecture
//! REPO/sysext/*.raw, SHA256SUMS(.gpg), *.conf   systemd-sysext images for systemd-sysupdate
//! REPO/kubedist.{asc,gpg,list,sources,repo}     public key and client snippets
//! ```
//!
//! With `--channels minor` (channels.rs) the apt and dnf trees move into
//! one channel per Kubernetes minor, `REPO/vX.Y/deb/` and `REPO/vX.Y/rpm/`,
//! each with its key copy and snippets in `REPO/vX.Y/`.
//!
//! The package files are the repository's state: a run adds the new ones
//! (never replacing a file by different content, but for a sysext image of
//! a higher revision), then rebuilds and re-signs all metadata from
//! everything present, so older releases stay installable. What the
//! metadata needs of a file already published comes from
//! `REPO/.kubedist-repo-state.json` (state.rs) while the file's size and
//! mtime match its record, so adding a release reads only the new files.
//! A run is one transaction (transaction.rs): it writes a new tree beside
//! the published one and exchanges the two in one atomic rename, so a
//! reader or a mirror sees the old repository or the new one, never a mix,
//! and a run killed anywhere leaves the old one. Before any of it, every
//! input and format is checked and the dependency-closure gate (closure.rs)
//! refuses a run that would publish a channel whose packages cannot be
//! installed.

mod apt;
mod channels;
mod clients;
pub(crate) mod closure;
pub(crate) mod debfile;
mod files;
mod image;
pub(crate) mod incoming;
pub(crate) mod rpmfile;
mod state;
pub mod synth;
mod sysext;
mod transaction;
mod yum;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

use channels::Layout;

/// The repository's record of its package files (state.rs).
pub use state::FILE as STATE_FILE;

/// Turn dist output into signed apt and yum/dnf repositories and a served
/// directory of systemd-sysext images.
///
/// Packages already in REPO_DIR are kept, so adding a release leaves the
/// older ones installable; all metadata is rebuilt and re-signed on every run
/// (but for --channels minor channels a run adds nothing to, left as they
/// are while their files, key and settings are unchanged). Packages already
/// published are not read again: REPO_DIR/.kubedist-repo-state.json keeps
/// what the metadata needs of each while its size and mtime match.
/// Sysext images go to REPO_DIR/sysext/ with a signed SHA256SUMS and one
/// systemd-sysupdate transfer file per Kubernetes minor.
///
/// Nothing uninstallable is published: before anything is written, every
/// dependency of every package in each channel (the apt suite per
/// architecture, each architecture's dnf directory) must be met by the
/// channel or name a distribution package that pkg/families.toml declares
/// (`distribution`); otherwise the run is refused with one line naming
/// the package, the dependency and the channel, and REPO_DIR is left as it was.
///
/// A run is all or nothing: the new repository is built beside REPO_DIR
/// (.NAME.kubedist-next, hard links to what is unchanged) and exchanged
/// with it in one atomic rename, so readers and mirrors see the old tree or
/// the new one, and a run killed anywhere leaves the old one (the next run
/// sweeps what it left). REPO_DIR must not itself be a mount point.
#[derive(clap::Args)]
#[command(
    group(clap::ArgGroup::new("signing key").required(true).args(["key", "gpg_key", "generate_test_key"])),
    after_long_help = "\
Examples:
  # a throwaway key and the first release, for a test setup
  cargo xtask repo --from target/dist --out /srv/kubedist --generate-test-key /root/kubedist-test.key
  # add the next release, signed with the operator's key file
  cargo xtask repo --from ../dist-1.34.3 --out /srv/kubedist --key /root/repo-signing.asc \\
      --passphrase-file /run/secrets/repo-key-pass --base-url https://mirror.example/kubedist
  # sign with a key that gpg's agent holds (smart card, cached passphrase)
  cargo xtask repo --from ../dist-1.34.3 --out /srv/kubedist --gpg-key 0123456789ABCDEF0123456789ABCDEF01234567
  # one apt and one dnf repository per Kubernetes minor: REPO_DIR/v1.35/deb, v1.35/rpm
  cargo xtask repo --channels minor --from target/dist/1.35.0 --out /srv/kubedist --key /root/repo-signing.asc
  # re-sign everything (e.g. after extending the key's expiry): no --from
  cargo xtask repo --out /srv/kubedist --key /root/repo-signing.asc
  # rotate the key in three runs (docs/repositories.md says what each client does between them)
  cargo xtask repo --out /srv/kubedist --key old.asc --publish-key new.pub
  cargo xtask repo --out /srv/kubedist --key new.asc --also-sign-with old.asc
  cargo xtask repo --out /srv/kubedist --key new.asc

Clients (with --channels minor, the files of REPO_DIR/vX.Y/ instead; a host moves to
the next minor by taking that channel's snippet): copy REPO_DIR/kubedist.gpg to /etc/apt/keyrings/ and kubedist.sources (or
kubedist.list) to /etc/apt/sources.list.d/; on dnf hosts kubedist.repo to
/etc/yum.repos.d/; on zypper hosts `rpm --import kubedist.asc`, then
`zypper addrepo BASE_URL/kubedist.repo`; on sysext hosts kubedist.gpg to /etc/systemd/import-pubring.gpg
and sysext/kubernetes-vX.Y.conf to /etc/sysupdate.kubernetes.d/kubernetes.conf (the runtime's:
sysext/kubedist-containerd-vX.Y.conf to /etc/sysupdate.kubedist-containerd.d/). A key that expires within 90 days gets a warning; an expired
or revoked key is refused.

All or nothing: every input is checked first; the new repository is built beside REPO_DIR
(.NAME.kubedist-next) and exchanged with it in one atomic rename, so readers and mirrors
see the old tree or the new one, and a killed run leaves the old one. REPO_DIR must not
itself be a mount point.

Environment:
  KUBEDIST_KEY_PASSPHRASE  passphrase of a protected --key or --also-sign-with (or --passphrase-file)
  GNUPGHOME                gpg's home for --gpg-key
  SOURCE_DATE_EPOCH        timestamp for Release, repomd.xml and signatures (reproducible output)"
)]
pub struct Args {
    /// A dist output directory to add (its *.deb, *.rpm and *.raw, checked
    /// against its SHA256SUMS). Repeat, or give several, to add several releases.
    /// Without any, the repository is only re-signed.
    #[arg(long = "from", value_name = "DIST_DIR", num_args = 1..)]
    from: Vec<PathBuf>,

    /// The repository directory; created when missing.
    #[arg(long, value_name = "REPO_DIR")]
    out: PathBuf,

    /// Sign with the OpenPGP secret key in FILE (armoured or binary, as
    /// `gpg --export-secret-keys` writes it). The newest valid signing
    /// subkey signs, else the primary key.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,

    /// The passphrase of a protected --key: the first line of FILE.
    /// Otherwise it is read from KUBEDIST_KEY_PASSPHRASE.
    #[arg(long, value_name = "FILE", requires = "key")]
    passphrase_file: Option<PathBuf>,

    /// Also sign apt's and dnf's metadata with the secret key in FILE
    /// (repeatable), and publish its public key. The main key alone signs
    /// the rpms and the sysext checksums. A protected FILE takes the
    /// passphrase --key would. Rotating keys: --publish-key NEW.pub, then
    /// --key NEW --also-sign-with OLD, then --key NEW (docs/repositories.md).
    #[arg(long, value_name = "FILE")]
    also_sign_with: Vec<PathBuf>,

    /// Publish the public key in FILE beside the signing keys, in
    /// kubedist.asc and kubedist.gpg, signing nothing (repeatable): the
    /// next key, for clients to take before it signs.
    #[arg(long, value_name = "FILE")]
    publish_key: Vec<PathBuf>,

    /// Sign through gpg with the secret key it holds for KEYID (a
    /// fingerprint, or anything naming exactly one key): gpg's agent
    /// unlocks it (pinentry, cached passphrase, smart card).
    #[arg(long, value_name = "KEYID")]
    gpg_key: Option<String>,

    /// Generate a new signing key without expiry, write its secret half to
    /// FILE (mode 0600; FILE must not exist and must lie outside REPO_DIR),
    /// and sign with it. For tests: production repositories use --key.
    #[arg(long, value_name = "FILE")]
    generate_test_key: Option<PathBuf>,

    /// The apt suite (and codename): `deb URL SUITE COMPONENT`.
    #[arg(long, default_value = "stable")]
    suite: String,

    /// The apt component the packages go in.
    #[arg(long, default_value = "main")]
    component: String,

    /// The layout: `flat`, one apt suite and one dnf tree per architecture
    /// for every release; or `minor`, one apt and one dnf repository per
    /// Kubernetes minor (REPO_DIR/v1.34/deb/, REPO_DIR/v1.34/rpm/), each
    /// with its own key copy and snippets in REPO_DIR/v1.34/ and only
    /// relative paths inside, as upstream's pkgs.k8s.io is laid out. A
    /// repository keeps the layout it was made with.
    #[arg(long, value_enum, default_value = "flat")]
    channels: Layout,

    /// Where clients will find REPO_DIR; used in the client snippets only.
    #[arg(long, value_name = "URL", default_value = "file:///srv/kubedist")]
    base_url: String,

    /// Add `Valid-Until: Date + DAYS` to the apt Release file. Off by
    /// default: an offline mirror refreshed rarely must not expire under
    /// its users.
    #[arg(long, value_name = "DAYS")]
    valid_days: Option<u32>,
}

/// The settings every part of a run shares.
pub struct Settings {
    pub suite: String,
    pub component: String,
    pub base_url: String,
    pub valid_days: Option<u32>,
    /// Seconds since the epoch written into metadata and signatures.
    pub timestamp: u64,
}

pub fn run(root: &Path, args: &Args) -> Result<()> {
    publish(root, args, &settings(args)?)
}

fn publish(root: &Path, args: &Args, settings: &Settings) -> Result<()> {
    let spec = crate::spec::Spec::load(root)?;
    let given_key = given_key(args)?;
    let also = also_keys(args)?;
    let announced = args
        .publish_key
        .iter()
        .map(|path| {
            Ok((
                path.display().to_string(),
                crate::keys::load_public_key(path)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut adds = read_adds(args)?;
    let no_repo = |out: &Path| -> Result<()> {
        bail!(
            "{}: no packages in the repository and none given: add a release with --from DIST_DIR",
            out.display()
        )
    };
    if adds.is_empty() && !args.out.exists() {
        no_repo(&args.out)?;
    }

    // The run writes a new tree beside the published one (locked against
    // other runs) and publishes it only at the end: a run refused below
    // leaves the repository, or its absence, as it was.
    let run = transaction::Transaction::begin(&args.out)?;
    let out = run.dir().to_path_buf();
    let mut state = state::State::load(&out)?;
    let flat_exists = apt::exists(&out) || yum::exists(&out)?;
    channels::refuse_other_layout(&out, args.channels, flat_exists)?;
    if adds.is_empty()
        && !flat_exists
        && channels::existing(&out)?.is_empty()
        && !out.join(sysext::DIR).is_dir()
    {
        no_repo(run.target())?;
    }
    // Everything is checked before anything is written.
    let unchanged = check_closure(
        &out,
        args.channels,
        &adds.packages,
        &spec,
        settings,
        &mut state,
    )?;
    check_formats(&out, args.channels, &adds, settings, &mut state)?;
    let primary = match (given_key, &args.generate_test_key) {
        (Some(key), _) => key,
        (None, Some(path)) => {
            refuse_inside(path, run.target())?;
            refuse_inside(path, &out)?;
            crate::keys::RepoKey::generate_test_key(path)?
        }
        (None, None) => {
            bail!("one of --key FILE, --gpg-key KEYID or --generate-test-key FILE is required")
        }
    };
    let key = crate::keys::Signers::new(primary, also, announced)?;

    // The key goes out first: metadata is never signed by a key the tree
    // does not publish.
    clients::write_public_key(&out, &key)?;
    match args.channels {
        Layout::Flat => {
            let (debs, rpms) = adds.packages.remove("").unwrap_or_default();
            publish_channel(
                &out, &out, &out, "", &debs, &rpms, &key, settings, &mut state,
            )?;
        }
        Layout::Minor => publish_minor_channels(
            &out,
            args,
            &mut adds.packages,
            &unchanged,
            &key,
            settings,
            &mut state,
        )?,
    }
    let sysext = sysext::publish(&out, &adds.raws, key.primary(), settings, &mut state)?;
    state.save()?;
    let published = run.target().to_path_buf();
    run.commit()?;
    if let Some(sysext) = &sysext {
        println!(
            "sysext: {} image(s) in {}/, channels {}",
            sysext.images,
            sysext::DIR,
            sysext.channels.join(" ")
        );
    }
    for (n, signer) in key.all().iter().enumerate() {
        let role = if n == 0 { "" } else { " (metadata only)" };
        println!(
            "signed by {} ({}){role}",
            signer.fingerprint(),
            signer.user_id()
        );
    }
    for fingerprint in key.announced() {
        println!("published {fingerprint} (signing nothing yet)");
    }
    println!("repository: {}", published.display());
    Ok(())
}

/// The key of `--key` or `--gpg-key`, loaded and checked (warnings for one
/// that expires soon), or none for `--generate-test-key`.
fn given_key(args: &Args) -> Result<Option<crate::keys::RepoKey>> {
    let key = if let Some(path) = &args.key {
        Some(crate::keys::RepoKey::load(path, passphrase(args)?)?)
    } else if let Some(spec) = &args.gpg_key {
        Some(crate::keys::RepoKey::from_gpg(spec)?)
    } else {
        None
    };
    if let Some(key) = &key {
        warn_of_expiry(key)?;
    }
    Ok(key)
}

/// The keys of `--also-sign-with`, loaded and checked as `--key` is.
fn also_keys(args: &Args) -> Result<Vec<crate::keys::RepoKey>> {
    let mut keys = Vec::new();
    for path in &args.also_sign_with {
        let key = crate::keys::RepoKey::load(path, passphrase(args)?)?;
        warn_of_expiry(&key)?;
        keys.push(key);
    }
    Ok(keys)
}

/// Refuses an expired or revoked key; warns of one that expires soon.
fn warn_of_expiry(key: &crate::keys::RepoKey) -> Result<()> {
    for warning in key.check_validity(SystemTime::now())? {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// What a run adds: `(debs, rpms)` by channel ("" is the flat layout's
/// one channel), and sysext images.
#[derive(Default)]
struct Adds {
    packages: BTreeMap<String, (Vec<PathBuf>, Vec<PathBuf>)>,
    raws: Vec<PathBuf>,
}

impl Adds {
    fn is_empty(&self) -> bool {
        self.packages.is_empty() && self.raws.is_empty()
    }
}

/// The dist outputs of `--from`, read and checked, by channel.
fn read_adds(args: &Args) -> Result<Adds> {
    let mut adds = Adds::default();
    let mut sha256 = BTreeMap::new();
    for dir in &args.from {
        let found = incoming::read_dist_dir(dir)?;
        let channel = match args.channels {
            Layout::Flat => {
                channels::refuse_prerelease_in_flat(dir, &found.debs, &found.rpms)?;
                String::new()
            }
            Layout::Minor if found.debs.is_empty() && found.rpms.is_empty() => String::new(),
            Layout::Minor => channels::minor_of(dir, &found.debs, &found.rpms)?,
        };
        if !found.debs.is_empty() || !found.rpms.is_empty() {
            let entry = adds.packages.entry(channel).or_default();
            entry.0.extend(found.debs);
            entry.1.extend(found.rpms);
        }
        adds.raws.extend(found.raws);
        sha256.extend(found.sha256);
    }
    // One package file per name and channel: the same bytes given twice are
    // added once, different ones refuse the run. (Of sysext images with one
    // name the highest revision is served: sysext.rs decides.)
    for (debs, rpms) in adds.packages.values_mut() {
        incoming::one_per_name(debs, &sha256)?;
        incoming::one_per_name(rpms, &sha256)?;
    }
    Ok(adds)
}

/// Publishes every channel of the minor layout, those already in `out` and
/// those `packages` adds.
fn publish_minor_channels(
    out: &Path,
    args: &Args,
    packages: &mut BTreeMap<String, (Vec<PathBuf>, Vec<PathBuf>)>,
    unchanged: &BTreeMap<String, usize>,
    key: &crate::keys::Signers,
    settings: &Settings,
    state: &mut state::State,
) -> Result<()> {
    let mut all = channels::existing(out)?;
    all.extend(packages.keys().filter(|c| !c.is_empty()).cloned());
    all.sort();
    all.dedup();
    channels::sort(&mut all);
    // What a channel was last signed with and for.
    let mut keys: Vec<String> = key
        .all()
        .iter()
        .map(|k| crate::util::hex(k.signing_fingerprint().as_bytes()))
        .collect();
    keys.extend(key.announced());
    let done = format!(
        "{} {} {} {}",
        keys.join(","),
        settings.suite,
        settings.component,
        settings.base_url
    );
    let same = |files: usize| Some(format!("{done} {files}"));
    for channel in &all {
        let (debs, rpms) = packages.remove(channel).unwrap_or_default();
        // A run adding releases leaves a channel it adds nothing to as it
        // is when its files and what it was signed with are those of its
        // last publication (no Valid-Until to renew).
        if !args.from.is_empty()
            && debs.is_empty()
            && rpms.is_empty()
            && settings.valid_days.is_none()
            && unchanged
                .get(channel)
                .is_some_and(|files| state.published(channel) == same(*files))
        {
            continue;
        }
        let dir = out.join(channel);
        files::create_dir(&dir)?;
        clients::write_public_key(&dir, key)?;
        publish_channel(
            &dir,
            &channels::deb_root(out, channel),
            &channels::rpm_root(out, channel),
            channel,
            &debs,
            &rpms,
            key,
            settings,
            state,
        )?;
        let files = channel_files(out, channel)?;
        state.set_published(channel, same(files));
    }
    Ok(())
}

/// Every format of every channel checked, in the run's next tree, before
/// anything is written, so that a refused run publishes nothing.
fn check_formats(
    out: &Path,
    layout: Layout,
    adds: &Adds,
    settings: &Settings,
    state: &mut state::State,
) -> Result<()> {
    for (channel, (debs, rpms)) in &adds.packages {
        let (deb_root, rpm_root) = match layout {
            Layout::Flat => (out.to_path_buf(), out.to_path_buf()),
            Layout::Minor => (
                channels::deb_root(out, channel),
                channels::rpm_root(out, channel),
            ),
        };
        apt::check(&deb_root, debs, &settings.component, state)?;
        yum::check(&rpm_root, rpms)?;
    }
    sysext::check(out, &adds.raws, state)
}

/// Publishes one channel: its apt tree in `deb_root`, its dnf trees in
/// `rpm_root`, its snippets in `dir`. `channel` is "" in the flat layout.
#[allow(clippy::too_many_arguments)]
fn publish_channel(
    dir: &Path,
    deb_root: &Path,
    rpm_root: &Path,
    channel: &str,
    debs: &[PathBuf],
    rpms: &[PathBuf],
    key: &crate::keys::Signers,
    settings: &Settings,
    state: &mut state::State,
) -> Result<()> {
    let apt = apt::publish(deb_root, debs, key, settings, state)?;
    let yum = yum::publish(rpm_root, rpms, key, settings, state)?;
    let urls = if channel.is_empty() {
        clients::Urls::flat(settings)
    } else {
        clients::Urls::channel(settings, channel)
    };
    clients::write_snippets(dir, settings, &urls, apt.is_some(), !yum.is_empty())?;
    let prefix = |tree: &str| {
        if channel.is_empty() {
            String::new()
        } else {
            format!("{channel}/{tree}/")
        }
    };
    if let Some(apt) = &apt {
        println!(
            "apt: {} package(s) in {}dists/{} for {}",
            apt.packages,
            prefix("deb"),
            settings.suite,
            apt.architectures.join(" ")
        );
    }
    for arch in &yum {
        println!(
            "dnf: {} package(s) in {}{}/",
            arch.packages,
            prefix("rpm"),
            arch.arch
        );
    }
    Ok(())
}

/// How many package files a channel of the minor layout holds.
fn channel_files(repo: &Path, channel: &str) -> Result<usize> {
    let rpm_root = channels::rpm_root(repo, channel);
    let rpms = if rpm_root.is_dir() {
        yum::all_rpms(&rpm_root)?.len()
    } else {
        0
    };
    Ok(apt::pool_files(&channels::deb_root(repo, channel))?.len() + rpms)
}

/// The dependency-closure gate (closure.rs) over every channel the run
/// would publish: the packages already in `repo` (which may not exist
/// yet) and the new ones. Returns, for each channel of the minor layout
/// to which nothing is added and whose files all matched their records,
/// how many files it holds.
fn check_closure(
    repo: &Path,
    layout: Layout,
    adds: &BTreeMap<String, (Vec<PathBuf>, Vec<PathBuf>)>,
    spec: &crate::spec::Spec,
    settings: &Settings,
    state: &mut state::State,
) -> Result<BTreeMap<String, usize>> {
    let mut unchanged = BTreeMap::new();
    let mut names: Vec<String> = adds.keys().cloned().collect();
    if layout == Layout::Minor {
        names.extend(channels::existing(repo)?);
    } else {
        names.push(String::new());
    }
    names.sort();
    names.dedup();
    for channel in names {
        let (mut debs, mut rpms) = adds.get(&channel).cloned().unwrap_or_default();
        let (added, reads) = (debs.len() + rpms.len(), state.reads);
        let (deb_root, rpm_root, prefix) = if channel.is_empty() {
            (repo.to_path_buf(), repo.to_path_buf(), String::new())
        } else {
            (
                channels::deb_root(repo, &channel),
                channels::rpm_root(repo, &channel),
                format!("{channel}/"),
            )
        };
        debs.extend(apt::pool_files(&deb_root)?);
        if rpm_root.is_dir() {
            rpms.extend(yum::all_rpms(&rpm_root)?);
        }
        let read = |family, paths: &[PathBuf], state: &mut state::State| -> Result<_> {
            let pkgs = paths.iter().map(|p| state.pkg(family, p));
            Ok(closure::dedup(pkgs.collect::<Result<_>>()?))
        };
        let files = debs.len() + rpms.len();
        let debs = read(crate::spec::Family::Deb, &debs, state)?;
        let rpms = read(crate::spec::Family::Rpm, &rpms, state)?;
        let deb_prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}deb/")
        };
        let rpm_prefix = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}rpm/")
        };
        let mut list = closure::deb_channels(&deb_prefix, &settings.suite, &debs);
        list.extend(closure::rpm_channels(&rpm_prefix, &rpms));
        closure::check(&list, &|family| {
            spec.families.get(family).distribution.clone()
        })?;
        if !channel.is_empty() && added == 0 && state.reads == reads {
            unchanged.insert(channel, files);
        }
    }
    Ok(unchanged)
}

/// The passphrase for --key: --passphrase-file, else the environment.
fn passphrase(args: &Args) -> Result<Option<String>> {
    let Some(path) = &args.passphrase_file else {
        return Ok(std::env::var(crate::keys::PASSPHRASE_ENV).ok());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read passphrase", path.display()))?;
    let line = text.lines().next().unwrap_or_default();
    if line.is_empty() {
        bail!("{}: empty passphrase file", path.display());
    }
    Ok(Some(line.to_string()))
}

fn settings(args: &Args) -> Result<Settings> {
    for (what, value) in [("--suite", &args.suite), ("--component", &args.component)] {
        let ok = !value.is_empty()
            && !value.starts_with('.')
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !ok {
            bail!("{what} {value:?}: use letters, digits, '.', '_' and '-' only");
        }
    }
    let base_url = args.base_url.trim_end_matches('/').to_string();
    if !base_url.contains(':') {
        bail!("--base-url {base_url:?}: give a URL such as file:///srv/kubedist or https://mirror.example/kubedist");
    }
    Ok(Settings {
        suite: args.suite.clone(),
        component: args.component.clone(),
        base_url,
        valid_days: args.valid_days,
        timestamp: timestamp()?,
    })
}

/// SOURCE_DATE_EPOCH when set (reproducible output), otherwise now (see
/// `util::source_date_epoch_var` for why not the commit's time).
fn timestamp() -> Result<u64> {
    match crate::util::source_date_epoch_var()? {
        Some(epoch) => Ok(epoch),
        None => Ok(SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .context("system clock before 1970")?
            .as_secs()),
    }
}

/// A secret key written into the repository would be published with it.
fn refuse_inside(key_path: &Path, repo: &Path) -> Result<()> {
    let parent = match key_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let parent = parent
        .canonicalize()
        .with_context(|| format!("{}: directory does not exist", parent.display()))?;
    if parent.starts_with(repo) {
        bail!(
            "{}: refusing to write a secret key inside the repository {} (it would be published)",
            key_path.display(),
            repo.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const EPOCH: u64 = 1_700_000_000;

    /// Releases 1.30.1..=1.30.n for amd64, and where a test key goes.
    fn releases(tmp: &Path, n: u32) -> Vec<PathBuf> {
        (1..=n)
            .map(|patch| {
                let dir = tmp.join(format!("dist-{patch}"));
                synth::release(&dir, 30, patch, &[0], EPOCH).unwrap();
                dir
            })
            .collect()
    }

    /// `cargo xtask repo --from FROM --out OUT` with the test key `key`
    /// (generated when missing), at a fixed time.
    fn repo(from: &[PathBuf], out: &Path, key: &Path) -> Result<()> {
        repo_in(Layout::Flat, from, out, key)
    }

    fn repo_in(channels: Layout, from: &[PathBuf], out: &Path, key: &Path) -> Result<()> {
        let generate = !key.exists();
        let args = Args {
            from: from.to_vec(),
            out: out.to_path_buf(),
            key: (!generate).then(|| key.to_path_buf()),
            passphrase_file: None,
            also_sign_with: Vec::new(),
            publish_key: Vec::new(),
            gpg_key: None,
            generate_test_key: generate.then(|| key.to_path_buf()),
            suite: "stable".into(),
            component: "main".into(),
            channels,
            base_url: "file:///srv/kubedist".into(),
            valid_days: None,
        };
        let settings = Settings {
            suite: args.suite.clone(),
            component: args.component.clone(),
            base_url: args.base_url.clone(),
            valid_days: None,
            timestamp: EPOCH,
        };
        publish(&crate::util::repo_root(), &args, &settings)
    }

    /// Every file below `dir` but the state, with its bytes.
    fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if path.is_dir() {
                    todo.push(path);
                } else if rel != STATE_FILE {
                    out.insert(rel, fs::read(&path).unwrap());
                }
            }
        }
        out
    }

    /// `tree` without the indices kept from the run before (by-hash files
    /// no index of this run has, repodata files repomd.xml does not name).
    fn current(tree: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
        let digests: std::collections::BTreeSet<String> = tree
            .iter()
            .filter(|(path, _)| !path.contains("/by-hash/"))
            .map(|(_, bytes)| crate::digest::sha256_bytes(bytes))
            .collect();
        let named = |path: &str| {
            let (dir, name) = path.rsplit_once('/').unwrap();
            let repomd = tree.get(&format!("{dir}/repomd.xml")).unwrap();
            name.starts_with("repomd.xml")
                || String::from_utf8_lossy(repomd).contains(&format!("repodata/{name}\""))
        };
        tree.iter()
            .filter(|(path, _)| match path.rsplit_once("/by-hash/SHA256/") {
                Some((_, hex)) => digests.contains(hex),
                None => !path.contains("/repodata/") || named(path),
            })
            .map(|(p, b)| (p.clone(), b.clone()))
            .collect()
    }

    /// After a run, a client that read the replaced InRelease or
    /// repomd.xml finds every index it names; the run after that one drops
    /// them (one generation is kept).
    #[test]
    fn the_indices_the_replaced_metadata_names_stay_for_one_more_run() {
        if createrepo_missing() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dists = releases(tmp.path(), 3);
        let key = tmp.path().join("test.key");
        let out = tmp.path().join("repo");
        let named_by = |out: &Path| {
            let mut paths = apt::by_hash_of_release(&out.join("dists/stable")).unwrap();
            let repodata = out.join("x86_64/repodata");
            paths.extend(
                yum::repodata_files(&repodata)
                    .unwrap()
                    .into_iter()
                    .map(|f| format!("../../x86_64/repodata/{f}")),
            );
            paths
        };
        repo(&dists[..1], &out, &key).unwrap();
        let first = named_by(&out);
        assert!(
            first.iter().any(|p| p.contains("by-hash/SHA256/")),
            "{first:?}"
        );
        assert!(
            first.iter().any(|p| p.ends_with("primary.xml.gz")),
            "{first:?}"
        );
        repo(&dists[1..2], &out, &key).unwrap();
        let second = named_by(&out);
        let suite = out.join("dists/stable");
        for path in first.iter().chain(&second) {
            assert!(suite.join(path).is_file(), "{path} gone after one run");
        }
        assert_eq!(
            fs::read_to_string(suite.join("Release"))
                .unwrap()
                .lines()
                .find(|l| l.starts_with("Acquire-By-Hash")),
            Some("Acquire-By-Hash: yes")
        );
        // A run that changes nothing changes nothing: the same release again.
        let before = tree(&out);
        repo(&dists[1..2], &out, &key).unwrap();
        assert!(
            tree(&out) == before,
            "a run that changes nothing changed the tree"
        );
        repo(&dists[2..], &out, &key).unwrap();
        for path in first.iter().filter(|p| !second.contains(p)) {
            assert!(!suite.join(path).exists(), "{path} kept two runs on");
        }
    }

    fn createrepo_missing() -> bool {
        let missing = std::process::Command::new("createrepo_c")
            .arg("--version")
            .output()
            .is_err();
        // Under CI a missing tool is a failure, never a skip.
        assert!(
            !(missing && std::env::var("CI").as_deref() == Ok("true")),
            "createrepo_c is not installed (CI=true)"
        );
        if missing {
            eprintln!("skipped: createrepo_c is not installed");
        }
        missing
    }

    /// A run whose debs are new and fine but whose rpm conflicts with a
    /// published one (same version, other bytes) publishes nothing: not the
    /// debs, not re-signed metadata.
    #[test]
    fn a_refused_run_publishes_nothing_of_any_format() {
        if createrepo_missing() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("test.key");
        let out = tmp.path().join("repo");
        repo(&releases(tmp.path(), 1), &out, &key).unwrap();
        let before = tree(&out);
        let mixed = tmp.path().join("mixed");
        synth::release(&mixed, 30, 2, &[0], EPOCH).unwrap();
        let rebuilt = tmp.path().join("rebuilt");
        synth::release(&rebuilt, 30, 1, &[0], EPOCH + 1).unwrap();
        let mut sums = String::new();
        for entry in fs::read_dir(&mixed).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".rpm") || name == "SHA256SUMS" {
                fs::remove_file(&path).unwrap();
            } else if name.ends_with(".deb") {
                sums.push_str(&format!(
                    "{}  {name}\n",
                    crate::digest::sha256_bytes(&fs::read(&path).unwrap())
                ));
            }
        }
        let rpm = "kubelet-1.30.1-1.x86_64.rpm";
        fs::copy(rebuilt.join(rpm), mixed.join(rpm)).unwrap();
        sums.push_str(&format!(
            "{}  {rpm}\n",
            crate::digest::sha256_bytes(&fs::read(mixed.join(rpm)).unwrap())
        ));
        fs::write(mixed.join("SHA256SUMS"), sums).unwrap();
        let err = repo(&[mixed], &out, &key).unwrap_err().to_string();
        assert!(err.contains("different content"), "{err}");
        assert!(tree(&out) == before, "a refused run changed the repository");
    }

    /// A package whose file name and control data (or rpm header) disagree
    /// is refused, naming both, and nothing is written.
    #[test]
    fn a_file_name_that_disagrees_with_the_package_is_refused() {
        if createrepo_missing() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let key = tmp.path().join("test.key");
        let out = tmp.path().join("repo");
        for (from, to) in [
            ("kubectl_1.30.1-1_amd64.deb", "kubectl_9.9.9-1_amd64.deb"),
            ("kubectl-1.30.1-1.x86_64.rpm", "kubectl-9.9.9-1.x86_64.rpm"),
        ] {
            let dist = tmp.path().join("renamed");
            synth::release(&dist, 30, 1, &[0], EPOCH).unwrap();
            fs::rename(dist.join(from), dist.join(to)).unwrap();
            let sums = fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
            fs::write(dist.join("SHA256SUMS"), sums.replace(from, to)).unwrap();
            let err = repo(&[dist], &out, &key).unwrap_err().to_string();
            assert!(err.contains(to) && err.contains(from), "{err}");
            assert!(!out.exists(), "a refused run created the repository");
        }
    }

    #[test]
    fn adding_with_the_state_or_rebuilding_it_gives_the_bytes_of_one_full_run() {
        if createrepo_missing() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dists = releases(tmp.path(), 2);
        let key = tmp.path().join("test.key");
        let (kept, lost, once) = (
            tmp.path().join("kept"),
            tmp.path().join("lost"),
            tmp.path().join("once"),
        );
        repo(&dists[..1], &kept, &key).unwrap();
        repo(&dists[1..], &kept, &key).unwrap();
        repo(&dists[..1], &lost, &key).unwrap();
        fs::remove_file(lost.join(STATE_FILE)).unwrap();
        repo(&dists[1..], &lost, &key).unwrap();
        assert!(lost.join(STATE_FILE).is_file(), "state not rebuilt");
        repo(&dists, &once, &key).unwrap();
        let once = tree(&once);
        assert!(once.contains_key("x86_64/repodata/repomd.xml"));
        assert!(once.contains_key("dists/stable/InRelease"));
        assert_eq!(current(tree(&kept)), once);
        assert_eq!(current(tree(&lost)), once);
    }

    #[test]
    fn published_packages_are_not_read_again_unless_their_size_or_mtime_changed() {
        if createrepo_missing() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dists = releases(tmp.path(), 2);
        let key = tmp.path().join("test.key");
        let out = tmp.path().join("repo");
        repo(&dists[..1], &out, &key).unwrap();
        let deb = out.join("pool/main/k/kubectl/kubectl_1.30.1-1_amd64.deb");
        let rpm = out.join("x86_64/kubectl-1.30.1-1.x86_64.rpm");
        let sha256 = files::Digests::of_file(&deb).unwrap().sha256;
        // Garbage of the same size and mtime, written in place: only a run
        // that reads the files could tell.
        for path in [&deb, &rpm] {
            let meta = fs::metadata(path).unwrap();
            fs::write(path, vec![b'x'; meta.len() as usize]).unwrap();
            let file = fs::File::options().write(true).open(path).unwrap();
            file.set_modified(meta.modified().unwrap()).unwrap();
        }
        repo(&dists[1..], &out, &key).unwrap();
        let packages =
            fs::read_to_string(out.join("dists/stable/main/binary-amd64/Packages")).unwrap();
        assert!(packages.contains(&sha256), "{packages}");
        // A different size is seen, and the file read (and refused).
        fs::write(&deb, b"not a deb").unwrap();
        let err = repo(&[], &out, &key).unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("kubectl_1.30.1-1_amd64.deb: not a readable .deb"),
            "{err}"
        );
    }

    #[test]
    fn a_minor_channel_nothing_is_added_to_is_left_as_it_is_until_a_re_sign() {
        if createrepo_missing() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let old = releases(tmp.path(), 1);
        let new = tmp.path().join("dist-1.31");
        synth::release(&new, 31, 0, &[0], EPOCH).unwrap();
        let key = tmp.path().join("test.key");
        let (out, once) = (tmp.path().join("repo"), tmp.path().join("once"));
        repo_in(Layout::Minor, &old, &out, &key).unwrap();
        let in_release = out.join("v1.30/deb/dists/stable/InRelease");
        let mtime = || fs::metadata(&in_release).unwrap().modified().unwrap();
        let before = mtime();
        repo_in(Layout::Minor, std::slice::from_ref(&new), &out, &key).unwrap();
        assert_eq!(mtime(), before, "v1.30 was published again");
        repo_in(Layout::Minor, &[old[0].clone(), new], &once, &key).unwrap();
        assert_eq!(current(tree(&out)), tree(&once));
        // A run without --from re-signs every channel (here with a new
        // key; signatures the same as the published ones are left as they
        // are).
        repo_in(Layout::Minor, &[], &out, &tmp.path().join("new.key")).unwrap();
        assert_ne!(
            mtime(),
            before,
            "a run without --from re-signs every channel"
        );
    }
}

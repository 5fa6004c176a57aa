//! dist's staging: every input made ready through `inputs`, the static
//! builds, and one staged tree per package, family and architecture, with
//! what each staged file came from for the SBOMs.

use std::path::Path;

use anyhow::{Context, Result};

use super::{stages, Plan};
use crate::emit::Staging;
use crate::stage::{self, StagedArch, StagedOci};
use crate::{inputs, sbom};

/// For each architecture: the verified upstream files, the static builds,
/// every package staged for each family under `work` and the images; the
/// installer image's own part when it is asked for; and what the artifacts'
/// files come from, for their SBOMs.
pub(super) fn stage_all(
    plan: &Plan,
    work: &Path,
) -> Result<(Vec<StagedArch>, Option<StagedOci>, Vec<sbom::Origin>)> {
    let spec = &plan.spec;
    let ready = plan.inputs.ensure(spec, &plan.arches, work)?;
    let installer = stage::installer(spec)?;
    let mut origins = Vec::new();
    for upstream in ready.upstreams.values() {
        origins.extend(sbom::origins::upstream(spec, upstream, &ready.origin)?);
    }
    let mut staged = Vec::new();
    for &arch in &plan.arches {
        let programs = ready.programs(spec, arch, &mut origins)?;
        let stage_dir = work.join("stage");
        let mut packages = Vec::new();
        if !plan.families.is_empty() {
            eprintln!("==> {arch}: staging {} packages", spec.packages.len());
        }
        // (With no family asked for, each package stages nothing.)
        for package in &spec.packages {
            packages.push(stage::stage_package(
                spec,
                package,
                arch,
                &plan.families,
                &programs,
                plan.options.epoch,
                &stage_dir,
            )?);
        }
        let mut sysext = Vec::new();
        if let Some(os) = &plan.sysext_os {
            for (image, version) in spec.sysext_images(&plan.k8s_version) {
                sysext.push(stage::stage_sysext(
                    spec,
                    image,
                    arch,
                    os,
                    version,
                    plan.options.epoch,
                    &stage_dir,
                )?);
            }
        }
        let oci_base = if plan.inputs.installer_base {
            let shell = inputs::installer_base(spec, arch)?;
            let base = stage::stage_oci_base(
                spec,
                arch,
                &shell.version,
                &shell.binary,
                &shell.copyright,
                plan.options.epoch,
                &stage_dir,
            )?;
            origins.push(sbom::origins::debian(
                &base,
                spec.families.deb.arch_name(arch)?,
            ));
            Some(base)
        } else {
            None
        };
        let images = match &ready.images_layout {
            Some(layout) => {
                eprintln!("==> {arch}: images ({})", layout.display());
                let images = stage::images::stage(layout, &ready.image_pins.images, arch)
                    .with_context(|| format!("the images bundle for {arch}"))?;
                let built_here = plan.inputs.images_built_here();
                origins.extend(
                    images
                        .iter()
                        .map(|i| sbom::origins::image(i, arch, built_here)),
                );
                Some(images)
            }
            None => None,
        };
        staged.push(StagedArch {
            arch,
            packages,
            installer: installer.clone(),
            sysext,
            oci_base,
            images,
        });
    }
    let oci = if stages(&plan.formats, Staging::InstallerImage) {
        let tag = format!("{}-{}", plan.k8s_version, spec.release.revision);
        Some(stage::stage_oci(spec, &tag)?)
    } else {
        None
    };
    Ok((staged, oci, origins))
}

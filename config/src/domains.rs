//! `dynamic_domains` and `provider_domains`: the config file's lists of domains, normalised, each
//! judged by the routing model's name rules and against the other list.

use crate::error::{DomainError, Error};
use crate::file::FileConfig;
use crate::source::{Setting, Source};

/// A list of domains as a setting.
type Domains = Setting<Vec<String>>;

/// The config file's `dynamic_domains` and `provider_domains` as settings: none by default.
pub(crate) fn domain_settings(
    file_cfg: &FileConfig,
    from_file: &dyn Fn() -> Source,
) -> Result<(Domains, Domains), Error> {
    let dynamic = match &file_cfg.dynamic_domains {
        None => Setting::new(Vec::new(), Source::Default),
        Some(zones) => Setting::new(dynamic_domains(zones, from_file)?, from_file()),
    };
    let providers = match &file_cfg.provider_domains {
        None => Setting::new(Vec::new(), Source::Default),
        Some(domains) => Setting::new(provider_domains(domains, &dynamic.value, from_file)?, from_file()),
    };
    Ok((dynamic, providers))
}

/// The config file's `dynamic_domains`, normalised. A public suffix is refused: it would let every
/// cluster route every domain under it, which is what the anchors are there to stop.
fn dynamic_domains(zones: &[String], origin: &dyn Fn() -> Source) -> Result<Vec<String>, Error> {
    domain_list(zones, |value, source| Error::DynamicDomain { origin: origin(), value, source }, |_| Ok(()))
}

/// The config file's `provider_domains`, normalised. A public suffix is refused as in
/// `dynamic_domains` (a provider registers a domain, not a suffix), and so is a domain at or below
/// one of the `zones` of `dynamic_domains`: there the engineer lets any cluster route, which a
/// provider's domain would forbid.
fn provider_domains(
    domains: &[String],
    zones: &[String],
    origin: &dyn Fn() -> Source,
) -> Result<Vec<String>, Error> {
    let in_zone =
        |domain: &str| match zones.iter().find(|zone| kharon_routing::trust::at_or_below(domain, zone)) {
            Some(zone) => Err(DomainError::InZone { zone: zone.clone() }),
            None => Ok(()),
        };
    domain_list(domains, |value, source| Error::ProviderDomain { origin: origin(), value, source }, in_zone)
}

/// A list of domains, normalised, each once; `refuse` makes the error of an entry, `check` looks
/// at each beyond the name rules.
fn domain_list(
    values: &[String],
    refuse: impl Fn(String, Box<DomainError>) -> Error,
    check: impl Fn(&str) -> Result<(), DomainError>,
) -> Result<Vec<String>, Error> {
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        let refused = |source: DomainError| refuse(value.clone(), Box::new(source));
        let domain = kharon_routing::inventory::normalize_suffix(value).map_err(|e| refused(e.into()))?;
        kharon_routing::trust::judge_name(&domain, false).map_err(|e| refused(e.into()))?;
        check(&domain).map_err(refused)?;
        if !out.contains(&domain) {
            out.push(domain);
        }
    }
    Ok(out)
}

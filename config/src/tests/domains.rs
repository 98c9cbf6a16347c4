//! `dynamic_domains` and `provider_domains`: normalised, and refused where they would let a
//! cluster route too much.

use super::*;

#[test]
fn dynamic_domains_are_normalised_zones_and_never_a_public_suffix() {
    let (dir, path) = write_config("dynamic_domains = [\"APPUiO.cloud.\", \"appuio.cloud\", \"corp\"]\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.dynamic_domains.value, ["appuio.cloud", "corp"]);
    assert_eq!(cfg.dynamic_domains.source, Source::File(path));
    assert_eq!(cfg.anchors().zones(), ["appuio.cloud", "corp"]);
    assert!(load(&Overrides::default(), &[], dir.path()).unwrap().dynamic_domains.value.is_empty());
    for (text, why) in [("[\"co.uk\"]", "co.uk is a public suffix"), ("[\"a b\"]", "is not allowed")] {
        let (dir, path) = write_config(&format!("dynamic_domains = {text}\n"));
        let ov = Overrides { config: Some(path), ..Default::default() };
        let err = kharon_common::errors::chain(&load(&ov, &[], dir.path()).unwrap_err());
        assert!(err.contains("dynamic_domains (from ") && err.contains(why), "{err}");
    }
}

#[test]
fn provider_domains_are_normalised_and_never_a_public_suffix_nor_inside_a_dynamic_zone() {
    let text = "provider_domains = [\"VSHNmanaged.net.\", \"vshnmanaged.net\"]\ndynamic_domains = [\"apps.vshnmanaged.net\"]\n";
    let (dir, path) = write_config(text);
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.provider_domains.value, ["vshnmanaged.net"]);
    assert_eq!(cfg.provider_domains.source, Source::File(path));
    assert_eq!(cfg.anchors().providers(), ["vshnmanaged.net"]);
    assert!(load(&Overrides::default(), &[], dir.path()).unwrap().provider_domains.value.is_empty());
    for (text, why) in [
        ("provider_domains = [\"co.uk\"]", "co.uk is a public suffix"),
        ("provider_domains = [\"a b\"]", "is not allowed"),
        (
            "provider_domains = [\"x.example\"]\ndynamic_domains = [\"example\"]",
            "it lies in example, a zone of dynamic_domains, where any cluster's dynamic names may route; \
             remove it from one of the two lists",
        ),
    ] {
        let (dir, path) = write_config(&format!("{text}\n"));
        let ov = Overrides { config: Some(path), ..Default::default() };
        let err = kharon_common::errors::chain(&load(&ov, &[], dir.path()).unwrap_err());
        assert!(err.contains("provider_domains (from ") && err.contains(why), "{err}");
    }
}

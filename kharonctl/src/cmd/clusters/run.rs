//! What an action of `kharonctl clusters NAME <action>` works with ([`Run`]): the context, the
//! catalog, the name it was given (resolved to one cluster on demand) and kharond's address for
//! the kubeconfigs it writes.

use std::path::PathBuf;

use kharon_routing::inventory::Cluster;

use crate::catalog::picker;
use crate::catalog::{self, Catalog};
use crate::context::{Context, Proxy};
use crate::kube;

pub struct Run<'a> {
    pub ctx: &'a Context,
    pub catalog: &'a Catalog,
    pub name: &'a str,
    pub tenant: Option<&'a str>,
    /// kharond's SOCKS listener for the kubeconfigs an action writes ([`Context::proxy`]); the
    /// configured one for actions that write none.
    pub proxy: Proxy,
}

impl Run<'_> {
    /// The one cluster `name` names: its id, or a part of one or a glob that only it matches, or
    /// the one picked on the terminal among several ([`picker::one`]).
    pub fn one(&self) -> anyhow::Result<&Cluster> {
        let marks = picker::Marks::of_default_kubeconfig();
        picker::one(self.catalog.clusters(), self.name, self.tenant, |_| true, &marks, "Which cluster?")
    }

    /// Every cluster `name` names (`shell --each`): an id, or every id a glob or a partial id matches.
    pub fn all(&self) -> Result<Vec<&Cluster>, catalog::Error> {
        catalog::candidates(self.catalog.clusters(), self.name, self.tenant, |_| true)
    }

    /// The kubeconfig settings for this action's entries.
    pub fn settings(&self) -> Result<kube::Settings, kube::Error> {
        kube::Settings::new(self.proxy.clone(), self.catalog.inventory_file())
    }

    /// Writes `cluster`'s own kubeconfig into the cache dir and returns its path.
    pub fn cluster_kubeconfig(&self, cluster: &Cluster) -> anyhow::Result<PathBuf> {
        kube::destination::write_cluster_file(&self.ctx.config.cache_dir.value, cluster, &self.settings()?)
    }
}

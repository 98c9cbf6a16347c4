//! What an action of `kharonctl clusters NAME <action>` works with ([`Run`]): the context, the
//! catalog, the name it was given (resolved to one cluster on demand) and kharond's address for
//! the kubeconfigs it writes.

use std::net::SocketAddr;
use std::path::PathBuf;

use kharon_shared::inventory::Cluster;

use crate::catalog::{self, Catalog};
use crate::context::Context;
use crate::kube;

pub struct Run<'a> {
    pub ctx: &'a Context,
    pub catalog: &'a Catalog,
    pub name: &'a str,
    pub tenant: Option<&'a str>,
    /// kharond's SOCKS address for the kubeconfigs an action writes ([`Context::proxy_address`]);
    /// the configured one for actions that write none.
    pub proxy: SocketAddr,
}

impl Run<'_> {
    /// The one cluster `name` names (a glob must match exactly one).
    pub fn one(&self) -> anyhow::Result<&Cluster> {
        let found = catalog::select(self.catalog.clusters(), self.name, self.tenant)?;
        match found.as_slice() {
            [one] => Ok(one),
            many => anyhow::bail!(
                "{:?} matches {} clusters ({}); name one",
                self.name,
                many.len(),
                many.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// The kubeconfig settings for this action's entries.
    pub fn settings(&self) -> Result<kube::Settings, kube::Error> {
        kube::Settings::new(self.proxy, self.catalog.inventory_file())
    }

    /// Writes `cluster`'s own kubeconfig into the cache dir and returns its path.
    pub fn cluster_kubeconfig(&self, cluster: &Cluster) -> anyhow::Result<PathBuf> {
        kube::destination::write_cluster_file(&self.ctx.config.cache_dir.value, cluster, &self.settings()?)
    }
}

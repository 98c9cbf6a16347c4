//! The control API's RPCs (gRPC over the Unix socket): `Status`, `Reload`, `Route`, `Test`,
//! `FetchObject`, `Connections`, `Trace`, `Clusters`, `JumpLogin` and `JumpAnswer`. It converts
//! between proto messages and daemon types, maps errors to gRPC codes, and calls the modules that
//! do the work: [`State`] (table, reload, counters), the SSH pool, [`reachability`] (Test's
//! checks), [`object_fetch`], [`live`] (open connections, traces) and [`jump_login`]. Only the user who runs the daemon may call it: the
//! service wrapped around every RPC ([`caller`]) checks the peer's credentials.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kharon_proto::v1 as pb;
use kharon_routing::table::{self, Via};
use tonic::{Request, Response, Status};

use crate::control::caller;
use crate::control::jump_login;
use crate::control::live;
use crate::control::object_fetch;
use crate::control::reachability;
use crate::observe::registry::RouteSummary;
use crate::routing::endpoints::Endpoint;
use crate::routing::in_force::{ReloadError, ReloadRecord, ReloadResult, Trigger};
use crate::routing::loaded::LoadedInventory;
use crate::state::State;
use kharon_routing::table::Route;
use kharon_ssh as ssh;

pub struct Control {
    state: Arc<State>,
}

impl Control {
    pub fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    /// The gRPC service, every call checked by [`caller::OnlyOurUser`] first.
    pub fn into_service(self) -> caller::OnlyOurUser<pb::control_server::ControlServer<Self>> {
        caller::OnlyOurUser::new(pb::control_server::ControlServer::new(self))
    }
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

fn inventory_info(state: &State, loaded: &LoadedInventory) -> pb::InventoryInfo {
    let report = loaded.table.report();
    let claim = |c: &table::Claim| pb::Claim { cluster: c.cluster.clone(), jumphost: c.jumphost.clone() };
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    pb::InventoryInfo {
        source_kind: state.routes.source.kind().to_owned(),
        source_path: state.routes.source.path().display().to_string(),
        loaded_at_ms: unix_ms(loaded.loaded_at),
        modified_at_ms: loaded.modified_at.map(unix_ms).unwrap_or(0),
        clusters_total: count(report.clusters_total),
        clusters_ignored: count(report.clusters_ignored),
        clusters_routed: count(report.clusters_routed),
        include_suffixes: count(report.include_suffixes),
        exclude_suffixes: count(report.exclude_suffixes),
        conflicts: report
            .conflicts
            .iter()
            .map(|c| pb::Conflict {
                suffix: c.suffix.clone(),
                winner: Some(claim(&c.winner)),
                shadowed: c.shadowed.iter().map(claim).collect(),
            })
            .collect(),
        warnings: report.warnings.clone(),
        jumphosts: count(loaded.table.jumphosts().len()),
        missing: loaded.missing,
        refused_claims: report.refused.iter().map(pb::RefusedClaim::from).collect(),
    }
}

/// `Route`'s reason while there is no inventory: the rule that decided matters less than why no
/// rule could route anything.
fn no_inventory_yet() -> String {
    format!("{}; until then every host goes direct", kharon_routing::cache::NO_INVENTORY_YET)
}

/// How long `Status` waits for a connected chain to answer its probe.
const STATUS_PROBE: Duration = Duration::from_secs(1);

fn chain_status(health: ssh::ChainHealth, probe: Option<Result<Duration, String>>) -> pb::ChainStatus {
    let state = match health.state {
        ssh::ChainState::Idle => pb::ChainState::Idle,
        ssh::ChainState::Connecting => pb::ChainState::Connecting,
        ssh::ChainState::Connected => pb::ChainState::Connected,
        ssh::ChainState::Failed => pb::ChainState::Failed,
        ssh::ChainState::Asking => pb::ChainState::Asking,
        ssh::ChainState::LoginRequired => pb::ChainState::LoginRequired,
    };
    pb::ChainStatus {
        jumphost: health.jumphost,
        hops: health.hops,
        state: state.into(),
        since_ms: unix_ms(health.since),
        last_error_ms: health.last_error.as_ref().map(|e| unix_ms(e.at)).unwrap_or(0),
        last_error: health.last_error.map(|e| e.text).unwrap_or_default(),
        last_refusal: health.last_refusal.map(|r| pb::ChannelRefusal {
            target: r.target,
            reason: r.reason,
            description: r.description,
            at_ms: unix_ms(r.at),
        }),
        open_channels: health.open_channels,
        bytes_up: health.bytes_up,
        bytes_down: health.bytes_down,
        next_retry_ms: health.next_retry.map(unix_ms).unwrap_or(0),
        probe: probe.map(|p| match p {
            Ok(rtt) => {
                pb::chain_status::Probe::RoundTripUs(u64::try_from(rtt.as_micros()).unwrap_or(u64::MAX))
            }
            Err(why) => pb::chain_status::Probe::ProbeFailed(why),
        }),
        hop_details: health.details.iter().map(hop_detail).collect(),
        config_error: health.refused.as_ref().map(|r| r.reason.clone()).unwrap_or_default(),
        config_origin: health.refused.and_then(|r| r.origin).unwrap_or_default(),
        question: health.question.as_deref().map(jump_login::question),
    }
}

fn hop_detail(hop: &ssh::HopSummary) -> pb::HopDetail {
    pb::HopDetail {
        alias: hop.alias.clone(),
        user: hop.user.clone(),
        host: hop.host_name.clone(),
        port: u32::from(hop.port),
        identity_files: hop.identity_files.iter().map(|p| p.display().to_string()).collect(),
        proxy_command: hop.proxy_command.clone().unwrap_or_default(),
        origin: hop.origin.clone().unwrap_or_default(),
    }
}

fn refused_jumphosts(refused: &[(String, ssh::Refusal)]) -> Vec<pb::RefusedJumphost> {
    refused
        .iter()
        .map(|(jumphost, refusal)| pb::RefusedJumphost {
            jumphost: jumphost.clone(),
            reason: refusal.reason.clone(),
            origin: refusal.origin.clone().unwrap_or_default(),
        })
        .collect()
}

/// What a preflight check found, without the jump hosts in `connected` (they work after all).
fn preflight(findings: &ssh::Findings, connected: &[String]) -> pb::Preflight {
    pb::Preflight {
        checked_at_ms: unix_ms(findings.at),
        unresolved: findings
            .unresolved
            .iter()
            .filter(|u| !connected.contains(&u.jumphost))
            .map(|u| pb::JumphostWarning { jumphost: u.jumphost.clone(), reason: u.reason.clone() })
            .collect(),
        credentials: if connected.is_empty() {
            findings.credentials.clone().unwrap_or_default()
        } else {
            String::new()
        },
    }
}

fn reload_record(record: &ReloadRecord) -> pb::ReloadRecord {
    let result = match record.result {
        ReloadResult::Ok => pb::ReloadResult::Ok,
        ReloadResult::Partial => pb::ReloadResult::Partial,
        ReloadResult::Failed => pb::ReloadResult::Failed,
    };
    pb::ReloadRecord {
        at_ms: unix_ms(record.at),
        trigger: record.trigger.as_str().to_owned(),
        result: result.into(),
        error: record.error.clone().unwrap_or_default(),
        refused: refused_jumphosts(&record.refused),
    }
}

/// The gRPC status `FetchObject` answers with; the message is ours, never the server's body.
pub fn fetch_status(e: &object_fetch::Error) -> Status {
    use object_fetch::Error;
    let message = kharon_common::errors::chain(e);
    match e {
        Error::BadEndpoint { .. } | Error::BadBucket { .. } | Error::BadKey => {
            Status::invalid_argument(message)
        }
        Error::NotFound { .. } => Status::not_found(message),
        Error::Denied { .. } => Status::permission_denied(message),
        Error::TooLarge { .. } => Status::resource_exhausted(message),
        Error::Connect(_) | Error::Tls { .. } | Error::Http { .. } | Error::Timeout { .. } => {
            Status::unavailable(message)
        }
        Error::Status { .. } | Error::Sign { .. } => Status::unknown(message),
    }
}

type TraceStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::TraceEvent, Status>> + Send + 'static>>;

/// `Status`'s connection totals, summed from the registry's per-route ones (direct and every jump
/// host), so the two views cannot disagree.
fn connection_stats(routes: &[RouteSummary], failed: u64) -> pb::ConnectionStats {
    let mut stats = pb::ConnectionStats { failed, ..Default::default() };
    for r in routes {
        let (open, total) = match r.route {
            Route::Direct => (&mut stats.open_direct, &mut stats.total_direct),
            Route::Jumphost(_) => (&mut stats.open_jumphost, &mut stats.total_jumphost),
        };
        *open += r.open;
        *total += r.total;
        stats.bytes_up += r.bytes_up;
        stats.bytes_down += r.bytes_down;
    }
    stats
}

fn memory(m: crate::process::memory::Memory) -> pb::Memory {
    pb::Memory { resident_bytes: m.resident, heap_in_use_bytes: m.heap_in_use, heap_bytes: m.heap }
}

fn route_totals(summary: RouteSummary) -> pb::RouteTotals {
    pb::RouteTotals {
        route: summary.route.label().to_owned(),
        open: summary.open,
        total: summary.total,
        failed: summary.failed,
        bytes_up: summary.bytes_up,
        bytes_down: summary.bytes_down,
    }
}

type TestStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<pb::TestEvent, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl pb::control_server::Control for Control {
    type TestStream = TestStream;
    type TraceStream = TraceStream;

    async fn connections(
        &self,
        _request: Request<pb::ConnectionsRequest>,
    ) -> Result<Response<pb::ConnectionsResponse>, Status> {
        Ok(Response::new(live::connections(&self.state).await))
    }

    async fn trace(&self, request: Request<pb::TraceRequest>) -> Result<Response<TraceStream>, Status> {
        let r = request.into_inner();
        let wait = Duration::from_millis(r.timeout_ms);
        let events = live::trace(Arc::clone(&self.state), &r.host, r.port, wait)?;
        Ok(Response::new(Box::pin(events)))
    }

    async fn test(&self, request: Request<pb::TestRequest>) -> Result<Response<TestStream>, Status> {
        use futures::StreamExt as _;

        let wanted = request.into_inner().clusters;
        let generation = self.state.routes.current();
        // The first `Test` of a table works its endpoints out (a while at 50,000 clusters): off
        // the async threads, as `clusters` inflates them.
        let endpoints = tokio::task::spawn_blocking(move || tested(&generation.inventory, &wanted))
            .await
            .map_err(|e| Status::internal(format!("reading the clusters' URLs failed: {e}")))??;
        let events = reachability::run(Arc::clone(&self.state), endpoints).map(Ok);
        Ok(Response::new(Box::pin(events)))
    }

    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let state = &self.state;
        let generation = state.routes.current();
        let loaded = &generation.inventory;
        let mut probes = generation.pool.round_trips(STATUS_PROBE).await;
        let history = state.routes.history();
        let routes = state.registry.routes();
        let now = SystemTime::now();
        let chains = generation.pool.status();
        let connected: Vec<String> = chains
            .iter()
            .filter(|c| c.state == ssh::ChainState::Connected)
            .map(|c| c.jumphost.clone())
            .collect();
        Ok(Response::new(pb::StatusResponse {
            version: kharon_common::VERSION.to_owned(),
            pid: std::process::id(),
            started_at_ms: unix_ms(state.started_at),
            uptime_seconds: now.duration_since(state.started_at).map(|d| d.as_secs()).unwrap_or(0),
            listen_address: state.listen.to_string(),
            control_socket: state.control_socket.display().to_string(),
            inventory: Some(inventory_info(state, loaded)),
            connections: Some(connection_stats(&routes, state.registry.failed())),
            chains: chains
                .into_iter()
                .map(|health| {
                    let probe = probes.remove(&health.jumphost);
                    chain_status(health, probe)
                })
                .collect(),
            socks_auth_required: state.proxy.auth.is_some(),
            last_reload: history.last.as_ref().map(reload_record),
            last_failed_reload: history.last_failed.as_ref().map(reload_record),
            routes: routes.into_iter().map(route_totals).collect(),
            memory: Some(memory(crate::process::memory::now())),
            preflight: Some(preflight(&state.routes.preflight_findings(), &connected)),
        }))
    }

    async fn reload(
        &self,
        _request: Request<pb::ReloadRequest>,
    ) -> Result<Response<pb::ReloadResponse>, Status> {
        match self.state.reload(Trigger::Rpc).await {
            Ok(outcome) => Ok(Response::new(pb::ReloadResponse {
                inventory: Some(inventory_info(&self.state, &outcome.installed.inventory)),
                ssh_config_error: outcome.ssh_config_error.unwrap_or_default(),
                refused: refused_jumphosts(&outcome.refused),
                preflight: Some(preflight(&outcome.preflight, &[])),
                changes: outcome.changes.iter().map(Into::into).collect(),
            })),
            Err(e) => {
                let status = match e {
                    ReloadError::Inventory(_) => Status::failed_precondition,
                    ReloadError::Deadline { .. } => Status::deadline_exceeded,
                    ReloadError::Busy { .. } => Status::unavailable,
                    ReloadError::Panicked(_) => Status::internal,
                };
                Err(status(kharon_common::errors::chain(&e)))
            }
        }
    }

    async fn fetch_object(
        &self,
        request: Request<pb::FetchObjectRequest>,
    ) -> Result<Response<pb::FetchObjectResponse>, Status> {
        let r = request.into_inner();
        let req = object_fetch::GetObject {
            endpoint: r.endpoint,
            bucket: r.bucket,
            key: r.key,
            access_key_id: r.access_key_id,
            secret_access_key: r.secret_access_key.into(),
            region: r.region,
            insecure: r.insecure,
        };
        let fetched = object_fetch::fetch(&self.state, &req).await.map_err(|e| fetch_status(&e))?;
        let path = fetched.route.label().to_owned();
        Ok(Response::new(pb::FetchObjectResponse { body: fetched.body, path }))
    }

    async fn route(&self, request: Request<pb::RouteRequest>) -> Result<Response<pb::RouteResponse>, Status> {
        let host = request.into_inner().host;
        let generation = self.state.routes.current();
        let loaded = &generation.inventory;
        let e = loaded.table.explain(&host);
        let via = match e.via {
            Via::Direct => pb::Via::Direct,
            Via::Jumphost => pb::Via::Jumphost,
        };
        let reason = if loaded.missing { no_inventory_yet() } else { e.reason };
        Ok(Response::new(pb::RouteResponse {
            host: e.host,
            via: via.into(),
            jumphost: e.jumphost.unwrap_or_default(),
            cluster: e.cluster.unwrap_or_default(),
            suffix: e.suffix.unwrap_or_default(),
            reason,
            rule: e.rule.as_str().to_owned(),
            inventory_missing: loaded.missing,
        }))
    }

    async fn jump_login(
        &self,
        request: Request<pb::JumpLoginRequest>,
    ) -> Result<Response<pb::JumpLoginStep>, Status> {
        let jumphost = request.into_inner().jumphost;
        jump_login::login(&self.state, &jumphost).await.map(Response::new)
    }

    async fn jump_answer(
        &self,
        request: Request<pb::JumpAnswerRequest>,
    ) -> Result<Response<pb::JumpLoginStep>, Status> {
        jump_login::answer(&self.state, request.into_inner()).await.map(Response::new)
    }

    async fn clusters(
        &self,
        _request: Request<pb::ClustersRequest>,
    ) -> Result<Response<pb::ClustersResponse>, Status> {
        let generation = self.state.routes.current();
        let inventory = Some(inventory_info(&self.state, &generation.inventory));
        // Inflating 50,000 clusters takes a while: off the async threads.
        let clusters_json = tokio::task::spawn_blocking(move || match &generation.inventory.catalog {
            Ok(catalog) => catalog.json(),
            Err(e) => Err(e.clone()),
        })
        .await
        .map_err(|e| Status::internal(format!("inflating the clusters failed: {e}")))?
        .map_err(Status::internal)?;
        Ok(Response::new(pb::ClustersResponse { clusters_json, inventory }))
    }
}

/// The endpoints `Test` checks: those of the `wanted` clusters, or all of them; an unknown
/// cluster is an error naming it.
fn tested(table: &LoadedInventory, wanted: &[String]) -> Result<Vec<Endpoint>, Status> {
    let all = table.endpoints().map_err(|why| {
        Status::internal(format!("the clusters of kharond's table cannot be read back: {why}"))
    })?;
    let unknown: Vec<String> =
        wanted.iter().filter(|w| !all.iter().any(|e| &e.cluster == *w)).map(|n| format!("{n:?}")).collect();
    if !unknown.is_empty() {
        return Err(Status::not_found(format!(
            "unknown cluster {} (kharond's table has no cluster by that id with an API, console or OAuth \
             URL); `kharonctl clusters` lists them",
            unknown.join(", ")
        )));
    }
    Ok(all.iter().filter(|e| wanted.is_empty() || wanted.contains(&e.cluster)).cloned().collect())
}

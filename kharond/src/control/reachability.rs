//! The `Test` RPC's checks: whether kharond's own ssh-agent answers, and whether each cluster
//! endpoint (API, console, OAuth URL from the inventory) can be reached along the route a client's
//! connection would take, through its real tunnel. One event per check, streamed as it finishes.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kharon_proto::v1 as pb;

use crate::routing::dial;
use crate::routing::endpoints::Endpoint;
use crate::state::State;

/// How many endpoints are checked at once: a dead jump host costs a connect timeout, not N of them
/// in a row.
const AT_ONCE: usize = 8;

/// The agent check first, then one event per endpoint as each check finishes.
pub fn run(
    state: Arc<State>,
    endpoints: Vec<Endpoint>,
) -> impl Stream<Item = pb::TestEvent> + Send + 'static {
    let agent = {
        let state = Arc::clone(&state);
        futures::stream::once(async move { agent_check(&state).await })
    };
    let checks = futures::stream::iter(endpoints)
        .map(move |endpoint| {
            let state = Arc::clone(&state);
            async move { check(&state, &endpoint).await }
        })
        .buffer_unordered(AT_ONCE);
    agent.chain(checks)
}

/// Runs one endpoint check through the path a client would take; a malformed URL is reported
/// without dialling anything.
async fn check(state: &State, endpoint: &Endpoint) -> pb::TestEvent {
    let mut event = pb::TestEvent {
        cluster: endpoint.cluster.clone(),
        path: kharon_routing::table::Route::Direct.label().to_owned(),
        kind: endpoint.kind.to_owned(),
        fact: endpoint.fact.to_owned(),
        url: endpoint.url.clone(),
        ..Default::default()
    };
    let target = match &endpoint.target {
        Ok(target) => target,
        Err(why) => {
            event.step = "url".to_owned();
            event.error = format!("{}: {why}", endpoint.fact);
            return event;
        }
    };
    let started = std::time::Instant::now();
    let (route, error) = match dial::routed(&state.routes, target, state.proxy.connect_timeout).await {
        Ok((route, _upstream)) => (route, None),
        Err(failed) => (failed.route, Some(failed.error)),
    };
    event.latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    event.path = route.label().to_owned();
    // One chain's hops, not the whole pool's status (which locks and copies every slot).
    event.hops =
        route.jumphost().map(|jumphost| state.routes.current().pool.hops(jumphost)).unwrap_or_default();
    event.step = "connect".to_owned();
    event.endpoint = target.to_string();
    event.ok = error.is_none();
    event.error = error.map(|e| kharon_common::errors::chain(&e)).unwrap_or_default();
    event
}

/// How long the agent socket may take to accept.
const AGENT_CONNECT: Duration = Duration::from_secs(2);

/// Whether the ssh-agent kharond uses by default answers: that, not the caller's shell, decides
/// whether agent keys reach the jump hosts. No agent at all fails only when the jump hosts have
/// nothing else to authenticate with (no key file usable without an agent, no `IdentityAgent` of
/// their own: `kharon_ssh::Pool::preflight`); otherwise their connect checks show whether the files work.
async fn agent_check(state: &State) -> pb::TestEvent {
    let mut event = pb::TestEvent { step: "agent".to_owned(), ok: true, ..Default::default() };
    let generation = state.routes.current();
    let Some(socket) = generation.pool.default_agent().map(str::to_owned) else {
        let jumphosts = generation.table().jumphosts();
        if let Some(why) = generation.pool.credentials_problem(jumphosts).await {
            event.ok = false;
            event.error = why;
        }
        return event;
    };
    drop(generation);
    event.endpoint = socket.clone();
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(AGENT_CONNECT, tokio::net::UnixStream::connect(&socket)).await;
    event.latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let error = match outcome {
        Ok(Ok(_)) => return event,
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {AGENT_CONNECT:?}"),
    };
    event.ok = false;
    event.error = format!(
        "kharond's SSH_AUTH_SOCK {socket}: {error}; the agent it was started with is gone. Restart \
         kharond from a shell whose agent works ({})",
        kharon_ssh::service_agent_advice()
    );
    event
}

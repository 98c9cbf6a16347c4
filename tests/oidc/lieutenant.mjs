// Test-only fake of the Project Syn Lieutenant API for the read endpoints kharon uses, written
// from the upstream server's code (projectsyn/lieutenant-api at b6f813a6, 2026-04-28) and its spec
// (openapi.yaml there, byte for byte tests/fixtures/lieutenant/openapi.yaml):
//
//   GET /                 discovery, no auth: {apiVersion, oidc: {clientId, discoveryUrl}}
//                         (pkg/service/api_service.go NewAPIServer/Discovery; noAuth in
//                         pkg/service/kubernetes_auth.go)
//   GET /healthz          text "ok", no auth (Healthz)
//   GET /clusters         ?tenant= filters (ListClusters: label selector, empty = all);
//                         ?sort_by=id|tenant|displayName, default id, compared as Go compares
//                         strings (sortClustersBy: byte order, not the locale's); another value is
//                         refused with 400 by the spec's request validator (oapi-codegen's echo
//                         middleware keeps the first line of kin-openapi's RequestError, worded in
//                         getkin/kin-openapi openapi3filter/errors.go and openapi3/schema.go)
//   GET /clusters/{id}    one cluster; unknown: 404 with Kubernetes' NotFound message, its double
//                         quotes turned into single ones (customHTTPErrorHandler)
// Errors are {"reason": …} (customHTTPErrorHandler, the spec's Reason). Every other path needs
// "Authorization: Bearer <token>": without it 400 "missing or malformed jwt" (ErrJWTMissing,
// extractToken). Upstream hands the token to Kubernetes, which answers 401 "Unauthorized" when it
// does not accept it; this fake stands in for Kubernetes by verifying the token as the cluster's
// OIDC authenticator would: signature (the IdP's JWKS), audience (the client id), issuer, expiry.
// A path with a trailing slash is served as without (echo's RemoveTrailingSlash). A method the
// path does not have: 405 "Method Not Allowed"; an unknown path: 404 "Not Found" (echo's errors).
//
// Cross-checked by a client we did not write: tests/scenarios/lieutenant_spec.rs validates every
// answer of this fake against the spec with PyPI's openapi-core.
//
// Test controls (no auth, not part of the API): PUT /_admin/clusters replaces the inventory,
// POST /_admin/reject?count=N answers the next N authenticated requests with 401 as if Kubernetes
// had revoked the token, POST /_admin/delay?ms=N holds every later /clusters answer for N ms (a
// slow Lieutenant, so that two clients' requests overlap), GET /_admin/stats lists the requests
// seen (path, status, token hash, and when each arrived and was answered, in ms since the epoch)
// and how many /clusters requests are being answered right now (`inFlight`).
//
// Env: DISCOVERY_URL (the IdP's .well-known/openid-configuration), CLIENT_ID, CLUSTERS (a JSON file).
// Prints "ready <base url>" on stdout.
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const discoveryUrl = process.env.DISCOVERY_URL;
const clientId = process.env.CLIENT_ID || 'kharon';
let clusters = JSON.parse(fs.readFileSync(process.env.CLUSTERS, 'utf8'));
let rejectNext = 0;
let delayMs = 0;
let inFlight = 0;
const seen = [];
let idp = null;

async function verifier() {
  if (!idp) {
    const meta = await (await fetch(discoveryUrl)).json();
    idp = { issuer: meta.issuer, jwks: createRemoteJWKSet(new URL(meta.jwks_uri)) };
  }
  return idp;
}

function send(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
  return status;
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

async function authenticate(req) {
  const header = req.headers.authorization || '';
  if (!header.startsWith('Bearer ')) return { status: 400, reason: 'missing or malformed jwt' };
  const token = header.slice('Bearer '.length).trim();
  const hash = crypto.createHash('sha256').update(token).digest('hex').slice(0, 16);
  if (rejectNext > 0) {
    rejectNext -= 1;
    return { status: 401, reason: 'Unauthorized', hash };
  }
  try {
    const { issuer, jwks } = await verifier();
    await jwtVerify(token, jwks, { audience: clientId, issuer });
    return { hash };
  } catch (e) {
    console.error('lieutenant: token rejected:', e.code || e.message);
    return { status: 401, reason: 'Unauthorized', hash };
  }
}

function sortKey(c, by) {
  if (by === 'tenant') return c.tenant || '';
  if (by === 'displayName') return c.displayName || '';
  return c.id;
}

// Go's string comparison: UTF-8 byte order (for the ASCII ids here, code unit order).
function goLess(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://lieutenant');
  const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;

  if (path.startsWith('/_admin/')) {
    if (path === '/_admin/clusters' && req.method === 'PUT') {
      clusters = JSON.parse(await readBody(req));
      return send(res, 200, { clusters: clusters.length });
    }
    if (path === '/_admin/reject' && req.method === 'POST') {
      rejectNext = Number(url.searchParams.get('count') || 1);
      return send(res, 200, { rejectNext });
    }
    if (path === '/_admin/delay' && req.method === 'POST') {
      delayMs = Number(url.searchParams.get('ms') || 0);
      return send(res, 200, { delayMs });
    }
    if (path === '/_admin/stats') return send(res, 200, { requests: seen, inFlight });
    return send(res, 404, { reason: 'no such admin call' });
  }
  if (req.method !== 'GET') return send(res, 405, { reason: 'Method Not Allowed' });
  if (path === '/') {
    return send(res, 200, { apiVersion: 'v0.13.0-fake', oidc: { clientId, discoveryUrl } });
  }
  if (path === '/healthz') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
    return 200;
  }

  const arrived = Date.now();
  const auth = await authenticate(req);
  const record = (status) =>
    seen.push({ path, status, token: auth.hash || null, arrived, answered: Date.now() });
  if (auth.status) {
    record(auth.status);
    return send(res, auth.status, { reason: auth.reason });
  }
  if (path === '/clusters') {
    const tenant = url.searchParams.get('tenant');
    const by = url.searchParams.get('sort_by') || 'id';
    if (!['id', 'tenant', 'displayName'].includes(by)) {
      record(400);
      return send(res, 400, {
        reason: `parameter "sort_by" in query has an error: value is not one of the allowed values ["id","tenant","displayName"]`,
      });
    }
    const list = clusters
      .filter((c) => !tenant || c.tenant === tenant)
      .sort((a, b) => goLess(sortKey(a, by), sortKey(b, by)));
    inFlight += 1;
    try {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    } finally {
      inFlight -= 1;
    }
    record(200);
    return send(res, 200, list);
  }
  const one = path.match(/^\/clusters\/([^/]+)$/);
  if (one) {
    const c = clusters.find((x) => x.id === decodeURIComponent(one[1]));
    record(c ? 200 : 404);
    return c ? send(res, 200, c) : send(res, 404, { reason: `clusters.syn.tools '${one[1]}' not found` });
  }
  record(404);
  return send(res, 404, { reason: 'Not Found' });
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.error('lieutenant: error', e);
    send(res, 500, { reason: String(e.message || e) });
  });
});
server.listen(0, '127.0.0.1', () => console.log(`ready http://127.0.0.1:${server.address().port}`));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

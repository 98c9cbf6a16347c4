// Test-only OpenID provider for kharon's end-to-end tests: the npm `oidc-provider` (panva) on
// loopback with one public native client, PKCE enforced, refresh tokens and the device flow.
//
// Usage: node provider.mjs   (prints "ready <issuer>" on stdout once it listens)
// Env:   CLIENT_ID (default "kharon"), ID_TOKEN_TTL seconds (default 3600), DEVICE_FLOW=0 to hide
//        the device authorization endpoint, PKCE=optional to accept logins without PKCE (commodore
//        sends none: commodore/login.py, `login`, builds its authorization URL without a challenge).
// The dev login/consent pages accept any login and password; tests/oidc/browser.mjs fills them in.
import http from 'node:http';
import Provider from 'oidc-provider';

const clientId = process.env.CLIENT_ID || 'kharon';
const idTokenTtl = Number(process.env.ID_TOKEN_TTL || 3600);
const deviceFlow = process.env.DEVICE_FLOW !== '0';
const pkceRequired = process.env.PKCE !== 'optional';

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const grantTypes = ['authorization_code', 'refresh_token'];
  if (deviceFlow) grantTypes.push('urn:ietf:params:oauth:grant-type:device_code');
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://localhost:18000'],
      grant_types: grantTypes,
      response_types: ['code'],
    }],
    // Like Keycloak: a refresh token for every code, not only with offline_access + consent.
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    pkce: { required: () => pkceRequired },
    features: {
      devInteractions: { enabled: true },
      deviceFlow: { enabled: deviceFlow },
      revocation: { enabled: true },
    },
    ttl: {
      IdToken: idTokenTtl, AccessToken: idTokenTtl, DeviceCode: 120,
      Interaction: 600, Session: 3600, Grant: 3600, RefreshToken: 3600,
    },
    findAccount: async (ctx, sub) => ({
      accountId: sub,
      claims: async () => ({ sub, email: `${sub}@example.test`, name: sub }),
    }),
    claims: { openid: ['sub'], email: ['email'], profile: ['name'] },
  });
  provider.on('server_error', (ctx, err) => console.error('provider server_error', err));
  server.on('request', provider.callback());
  console.log(`ready ${issuer}`);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));

// A real OpenID provider (`oidc-provider`, a certified implementation) for the
// OIDC sign-in scenario (tests/tests/oidc_login.rs), run by tests/src/oidc.rs.
//
//   node provider.mjs CONFIG.json
//
// `oidc-provider` is not installed next to this file: the fixture installs it
// (package.json + package-lock.json of this directory, `npm ci`) into a cache
// directory and names that directory's `node_modules` in `OIDC_NODE_MODULES`
// (ESM imports ignore NODE_PATH, so it is imported by path).
//
// CONFIG.json (written by the test):
//   {
//     "issuer": "http://127.0.0.1:PORT",   // the provider listens on 127.0.0.1:PORT
//     "jwks": {"keys": [private RSA JWKs, each with kid, alg RS256, use sig]},
//     "clients": [oidc-provider client metadata],
//     "accounts": {"alice": {claims...}, ...},   // sub => claims (sub is added)
//     "cookie_keys": ["..."]
//   }
//
// The configuration: PKCE required for every client; the claims `sub`
// (scope openid), `email` (email), `preferred_username` (profile) and `roles`
// (roles); `conformIdTokenClaims: false`, so the ID token carries every claim
// its scopes grant (not only those requested with the `claims` parameter);
// dev interactions (a login form accepting any password for a known account,
// then a consent form). Prints `listening on ISSUER` once it serves; exits on
// SIGTERM/SIGINT.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const configPath = process.argv[2];
if (!configPath) {
  console.error('usage: node provider.mjs CONFIG.json');
  process.exit(2);
}
const modules = process.env.OIDC_NODE_MODULES;
if (!modules) {
  console.error('OIDC_NODE_MODULES must name the node_modules directory holding oidc-provider');
  process.exit(2);
}

const require = createRequire(join(modules, '..', 'package.json'));
const { default: Provider } = await import(pathToFileURL(require.resolve('oidc-provider')).href);

const config = JSON.parse(readFileSync(configPath, 'utf8'));
const issuer = new URL(config.issuer);
const accounts = config.accounts ?? {};

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: config.jwks,
  cookies: { keys: config.cookie_keys ?? ['tessera-oidc-test-cookie-key'] },
  pkce: { required: () => true },
  claims: {
    openid: ['sub'],
    email: ['email'],
    profile: ['preferred_username'],
    roles: ['roles'],
  },
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: true },
  },
  async findAccount(_ctx, sub) {
    if (!Object.hasOwn(accounts, sub)) {
      return undefined;
    }
    return {
      accountId: sub,
      async claims() {
        return { ...accounts[sub], sub };
      },
    };
  },
  async renderError(ctx, out, error) {
    ctx.type = 'json';
    ctx.body = { ...out, detail: String(error?.message ?? error) };
  },
});

for (const event of ['server_error', 'authorization.error', 'grant.error', 'introspection.error', 'userinfo.error', 'end_session.error']) {
  provider.on(event, (...args) => {
    const err = args.find((a) => a instanceof Error);
    console.error(`[oidc-provider] ${event}: ${err ? `${err.name}: ${err.message} ${err.error_description ?? ''}` : ''}`);
  });
}
provider.on('grant.success', (ctx) => {
  console.error(`[oidc-provider] grant.success client=${ctx.oidc.client?.clientId}`);
});

const server = provider.listen(Number(issuer.port), issuer.hostname, () => {
  console.error(`listening on ${config.issuer} (kids: ${config.jwks.keys.map((k) => k.kid).join(', ')})`);
});
server.on('error', (err) => {
  console.error(`[oidc-provider] cannot listen on ${issuer.host}: ${err.message}`);
  process.exit(1);
});

function stop(signal) {
  console.error(`[oidc-provider] ${signal}: closing`);
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));

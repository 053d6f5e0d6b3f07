// A real OpenID provider for tests/identity.rs: oidc-provider (scripts/oidc-provider.sh installs
// it), two issuers — one per tenant — with client credentials, authorization code + PKCE,
// resource indicators issuing JWT access tokens (RFC 9068), dynamic client registration, and
// the device authorization grant (RFC 8628) for the CLI's client `countersign-cli`, which gets
// a refresh token.
//
// The person at the login page is played by the authorization request's `login_hint`: the
// interaction signs that account in and consents to what was asked.
//
// Beside the providers, a signer for hostile tokens (tests only): it signs any header and claims
// with an issuer's own key, or with a stranger's, or not at all, so the tests can send tokens
// the providers would never issue (expired, another audience, alg none, HS256 …).
//
// Prints one JSON line: {"acme": issuer, "globex": issuer, "signer": url}.
import Provider from 'oidc-provider';
import * as jose from 'jose';
import http from 'node:http';
import crypto from 'node:crypto';

const SCOPES = 'countersign:agent countersign:approve countersign:admin';
const ACCOUNTS = {
  ada: { email: 'ada@example.com', name: 'Ada Lovelace', groups: ['finance'] },
  bob: { email: 'bob@example.com', name: 'Bob', groups: ['ops'] },
};

async function keyPair(alg, kid, options = {}) {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg, { extractable: true, ...options });
  const jwk = { ...(await jose.exportJWK(privateKey)), kid, alg, use: 'sig' };
  return { jwk, privateKey, publicKey };
}

async function start(name) {
  const keys = {
    rsa: await keyPair('RS256', `${name}-rsa`),
    ec: await keyPair('ES256', `${name}-ec`),
    ed: await keyPair('EdDSA', `${name}-ed`, { crv: 'Ed25519' }),
  };
  const server = http.createServer();
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks: { keys: [keys.rsa.jwk, keys.ec.jwk, keys.ed.jwk] },
    clients: [
      {
        client_id: `${name}-bot`,
        client_secret: 'bot-secret',
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
        scope: SCOPES,
      },
      {
        client_id: `${name}-app`,
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        redirect_uris: ['http://127.0.0.1/callback'],
        response_types: ['code'],
        scope: `openid email profile ${SCOPES}`,
      },
      {
        client_id: 'countersign-cli',
        token_endpoint_auth_method: 'none',
        grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'],
        redirect_uris: [],
        response_types: [],
        scope: `openid offline_access email profile ${SCOPES}`,
      },
    ],
    scopes: ['openid', 'offline_access', 'email', 'profile', ...SCOPES.split(' ')],
    claims: { email: ['email'], profile: ['name'] },
    findAccount: (ctx, id) =>
      ACCOUNTS[id] && { accountId: id, claims: () => ({ sub: id, ...ACCOUNTS[id] }) },
    // The person's display claims and groups ride in the access token (countersign reads them).
    extraTokenClaims: async (ctx, token) => {
      const account = token.accountId && ACCOUNTS[token.accountId];
      return account ? { ...account } : undefined;
    },
    // A refresh token for a client allowed the refresh grant (the CLI). oidc-provider would
    // want `offline_access` with `prompt=consent`, which the device grant has no way to send.
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      deviceFlow: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client, oneOf) => (oneOf ? oneOf[0] : undefined),
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource, client) => ({
          scope: SCOPES,
          audience: resource,
          // Five minutes; longer for a long run over a token (scripts/schemathesis.sh).
          accessTokenTTL: Number(process.env.COUNTERSIGN_OIDC_TOKEN_TTL) || 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: client.clientId.endsWith('-ed') ? 'EdDSA' : client.clientId.endsWith('-ec') ? 'ES256' : 'RS256' } },
        }),
      },
    },
    enabledJWA: { idTokenSigningAlgValues: ['RS256', 'ES256', 'EdDSA'] },
    pkce: { required: () => true },
  });
  provider.proxy = false;
  // The login page, played by `login_hint`; consent to everything asked.
  provider.use(async (ctx, next) => {
    if (!ctx.path.startsWith('/interaction/')) return next();
    const interaction = await provider.interactionDetails(ctx.req, ctx.res);
    let result;
    if (interaction.prompt.name === 'login') {
      const accountId = interaction.params.login_hint || 'ada';
      result = { login: { accountId } };
    } else {
      const details = interaction.prompt.details;
      const grant = interaction.grantId
        ? await provider.Grant.find(interaction.grantId)
        : new provider.Grant({ accountId: interaction.session.accountId, clientId: interaction.params.client_id });
      if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
      if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
      for (const [indicator, scopes] of Object.entries(details.missingResourceScopes || {})) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
      result = { consent: { grantId: await grant.save() } };
    }
    const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
    ctx.status = 303;
    ctx.redirect(to);
  });
  server.on('request', provider.callback());
  return { issuer, keys };
}

const tenants = { acme: await start('acme'), globex: await start('globex') };
const stranger = await keyPair('RS256', 'acme-rsa');

// POST {"tenant", "key": "rsa"|"ec"|"ed"|"stranger"|"none"|"hs256-public", "header", "claims"}
const signer = http.createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  try {
    const { tenant, key, header = {}, claims } = JSON.parse(body);
    const own = tenants[tenant].keys;
    const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
    let token;
    if (key === 'none') {
      token = `${b64({ alg: 'none', typ: 'at+jwt', ...header })}.${b64(claims)}.`;
    } else if (key === 'hs256-public') {
      // The provider's public key, as published, used as an HMAC secret.
      const secret = JSON.stringify(await jose.exportJWK(own.rsa.publicKey));
      const input = `${b64({ alg: 'HS256', typ: 'at+jwt', kid: own.rsa.jwk.kid, ...header })}.${b64(claims)}`;
      token = `${input}.${crypto.createHmac('sha256', secret).update(input).digest('base64url')}`;
    } else {
      const pair = key === 'stranger' ? stranger : own[key];
      token = await new jose.SignJWT(claims)
        .setProtectedHeader({ alg: pair.jwk.alg, kid: pair.jwk.kid, typ: 'at+jwt', ...header })
        .sign(pair.privateKey);
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token }));
  } catch (e) {
    res.writeHead(400).end(String(e));
  }
});
await new Promise((ok) => signer.listen(0, '127.0.0.1', ok));
console.log(JSON.stringify({
  acme: tenants.acme.issuer,
  globex: tenants.globex.issuer,
  signer: `http://127.0.0.1:${signer.address().port}`,
}));

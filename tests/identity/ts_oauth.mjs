// An MCP client on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x) that authorizes on
// its own, driven by tests/identity.rs (SC-ID-05).
//
// Usage: node ts_oauth.mjs URL TOOL ARGS_JSON
// The SDK's auth meets the first 401, reads countersign's protected resource metadata, discovers
// the provider, registers itself and sends the person to the authorization URL (authorization
// code + PKCE, with a resource indicator). This script plays only the person at the provider's
// login page — following its pages to the redirect — and hands the code to `finishAuth`.
// One JSON object per line on stdout; any exception exits non-zero.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url, tool, args] = process.argv.slice(2);
const say = (fields) => process.stdout.write(JSON.stringify(fields) + "\n");
const REDIRECT = "http://127.0.0.1:1/callback";

let landed;
const store = {};
const authProvider = {
  get redirectUrl() {
    return REDIRECT;
  },
  get clientMetadata() {
    return {
      client_name: "countersign identity test",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => store.client,
  saveClientInformation: (info) => void (store.client = info),
  tokens: () => store.tokens,
  saveTokens: (tokens) => void (store.tokens = tokens),
  saveCodeVerifier: (verifier) => void (store.verifier = verifier),
  codeVerifier: () => store.verifier,
  // The person at the provider: follow its pages (cookies kept) to the redirect back.
  async redirectToAuthorization(authorizationUrl) {
    say({ event: "authorize", url: authorizationUrl.href });
    const cookies = new Map();
    let at = authorizationUrl.href;
    for (let i = 0; i < 10; i++) {
      const cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
      const answer = await fetch(at, { redirect: "manual", headers: cookie ? { cookie } : {} });
      for (const set of answer.headers.getSetCookie()) {
        const [pair] = set.split(";");
        const eq = pair.indexOf("=");
        cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
      }
      at = new URL(answer.headers.get("location"), at).href;
      if (at.startsWith(REDIRECT)) {
        landed = new URL(at).searchParams.get("code");
        return;
      }
    }
    throw new Error("the login page never redirected back");
  },
};

const client = new Client({ name: "countersign-identity-test", version: "1.0.0" });
let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
try {
  await client.connect(transport);
} catch (e) {
  if (!(e instanceof UnauthorizedError) || !landed) throw e;
  await transport.finishAuth(landed);
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
  await client.connect(transport);
}
say({ event: "connected", protocol_version: transport.protocolVersion ?? null });
const listed = await client.listTools();
say({ event: "tools", names: listed.tools.map((t) => t.name) });
const first = await client.callTool({ name: tool, arguments: JSON.parse(args) });
const action_id = first.structuredContent.action_id;
say({ event: "waiting", action_id, result: first });
const status = await client.callTool({ name: "countersign_status", arguments: { action_id } });
say({ event: "status", result: status });
await client.close();

// countersign approver page: signing in with the organization's provider (docs/identity.md,
// "The approver page signs in"). The page is a public OAuth client: authorization code with
// PKCE (RFC 7636), the token asked for this server's resource (RFC 8707), kept in this tab's
// session storage like a key and sent only as a bearer header to this server. No refresh token:
// when the token lapses, the person signs in again and comes back to where they were.
// Loaded before app.js, which calls `offerProviders` and `finishSignIn`.
"use strict";

const OAUTH_SLOT = "countersign.oauth"; // the round trip's state, verifier and return place
const VIA_SLOT = "countersign.via"; // the provider's name, while signed in with one

function base64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes)))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

// The page's own address, without query or fragment: the redirect URI registered at the
// provider.
function redirectUri() {
  return location.origin + location.pathname;
}

async function providerJson(url, init) {
  let response;
  try {
    response = await fetch(url, { cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer", ...init });
  } catch (e) {
    throw new Error(`the provider cannot be reached (${new URL(url).origin})`);
  }
  const value = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error(value.error_description || value.error || `the provider answered ${response.status}`);
  }
  return value;
}

// The buttons, one per provider the server names (GET sign-in.json).
async function offerProviders(into) {
  let providers = [];
  try {
    const response = await fetch("sign-in.json", { cache: "no-store", credentials: "omit" });
    if (response.ok) providers = (await response.json()).providers || [];
  } catch (e) {
    providers = [];
  }
  into.replaceChildren();
  for (const provider of providers) {
    const button = el("button", { type: "button", class: "primary", text: `Sign in with ${provider.name}` });
    button.addEventListener("click", () => startSignIn(provider, button));
    into.append(button);
  }
  into.hidden = providers.length === 0;
}

// To the provider's login page, with a fresh state and PKCE verifier kept in this tab; `place`
// is the fragment to come back to (an action under review).
async function startSignIn(provider, button, place) {
  if (button) button.disabled = true;
  try {
    const found = await providerJson(`${provider.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`);
    const verifier = randomText(), state = randomText();
    const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
    sessionStorage.setItem(OAUTH_SLOT, JSON.stringify({
      state, verifier, provider, token_endpoint: found.token_endpoint,
      place: place || location.hash,
    }));
    const to = new URL(found.authorization_endpoint);
    const ask = {
      response_type: "code", client_id: provider.client_id, redirect_uri: redirectUri(),
      scope: provider.scope, resource: provider.resource, state,
      code_challenge: challenge, code_challenge_method: "S256",
    };
    for (const [name, value] of Object.entries(ask)) to.searchParams.set(name, value);
    location.assign(to.href);
  } catch (error) {
    if (button) button.disabled = false;
    alarm(`Signing in with ${provider.name} did not start: ${error.message}.`);
  }
}

// Back from the provider (`?code=…&state=…`): the code exchanged for the token. Answers the
// token, or null when this load is no such return; a failed return says why and answers null.
async function finishSignIn() {
  const query = new URLSearchParams(location.search);
  if (!query.has("state") || !(query.has("code") || query.has("error"))) return null;
  const saved = JSON.parse(sessionStorage.getItem(OAUTH_SLOT) || "null");
  sessionStorage.removeItem(OAUTH_SLOT);
  // The code leaves the address bar at once; the place the person was at comes back.
  history.replaceState(null, "", location.pathname + ((saved && saved.place) || ""));
  if (!saved || saved.state !== query.get("state")) {
    alarm("This sign-in was not started from this tab, so it is not used. Sign in again.");
    return null;
  }
  const { provider } = saved;
  // RFC 9207: where the provider names itself, it must be the one asked.
  if (query.has("iss") && query.get("iss") !== provider.issuer) {
    alarm(`The answer came from ${query.get("iss")}, not ${provider.issuer}; not signed in.`);
    return null;
  }
  if (query.has("error")) {
    alarm(`${provider.name} did not sign you in: ${query.get("error_description") || query.get("error")}.`);
    return null;
  }
  try {
    const answer = await providerJson(saved.token_endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code", code: query.get("code"), redirect_uri: redirectUri(),
        client_id: provider.client_id, code_verifier: saved.verifier, resource: provider.resource,
      }),
    });
    if (!answer.access_token) throw new Error("no access token in its answer");
    sessionStorage.setItem(VIA_SLOT, JSON.stringify(provider));
    return answer.access_token;
  } catch (error) {
    alarm(`${provider.name} did not give a token: ${error.message}.`);
    return null;
  }
}

// The provider this tab signed in with, or null (signed in with a key, or not at all).
function signedInVia() {
  return JSON.parse(sessionStorage.getItem(VIA_SLOT) || "null");
}

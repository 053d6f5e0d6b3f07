"""An access token from the test OpenID provider (tests/identity/provider.mjs), for
scripts/schemathesis.sh. Standard library only.

  python3 token.py client ISSUER CLIENT SECRET SCOPE RESOURCE   # client credentials
  python3 token.py person ISSUER CLIENT PERSON SCOPE RESOURCE   # authorization code + PKCE

The person at the provider's login page is played by `login_hint`, as in tests/identity.rs: the
page signs that account in and consents; the redirects are followed by hand to the code.
"""
import base64
import hashlib
import http.cookiejar
import json
import secrets
import sys
import urllib.parse
import urllib.request

REDIRECT = "http://127.0.0.1/callback"


class Stop(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):
        return None


def post(opener, url, form, auth=None):
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode())
    if auth:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with opener.open(request) as answer:
        return json.load(answer)["access_token"]


def client(issuer, client_id, secret, scope, resource):
    opener = urllib.request.build_opener()
    form = {"grant_type": "client_credentials", "scope": scope, "resource": resource}
    return post(opener, f"{issuer}/token", form, auth=f"{client_id}:{secret}")


def person(issuer, client_id, who, scope, resource):
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
    query = urllib.parse.urlencode({
        "client_id": client_id, "response_type": "code", "redirect_uri": REDIRECT,
        "scope": f"openid email profile {scope}", "code_challenge": challenge.decode(),
        "code_challenge_method": "S256", "resource": resource, "login_hint": who, "state": "s",
    })
    opener = urllib.request.build_opener(
        Stop, urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    url = f"{issuer}/auth?{query}"
    for _ in range(20):
        try:
            opener.open(url)
            raise SystemExit(f"no redirect from {url}")
        except urllib.error.HTTPError as answer:
            location = answer.headers.get("location")
            if not location:
                raise SystemExit(f"{answer.code} from {url}: {answer.read()[:300]!r}")
        url = urllib.parse.urljoin(url, location)
        if url.startswith(REDIRECT):
            code = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)["code"][0]
            form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                    "client_id": client_id, "code_verifier": verifier, "resource": resource}
            return post(opener, f"{issuer}/token", form)
    raise SystemExit("the sign-in did not end at the redirect URI")


if __name__ == "__main__":
    kind, *rest = sys.argv[1:]
    print({"client": client, "person": person}[kind](*rest))

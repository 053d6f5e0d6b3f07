#!/usr/bin/env bash
# The approver page end to end in headless Chromium (tests/browser/approver_page.py).
# Installs what it needs, idempotently and pinned: Debian's chromium (apt), the Playwright
# client from PyPI in a venv under the cache (its own browser download is never used) and
# oidc-provider (scripts/oidc-provider.sh) for signing in with a provider. Then
# builds the local server and runs the tests against it on a free port.
#
#   bash scripts/browser-test.sh                        # run the tests
#   SCREENSHOTS=docs/img bash scripts/browser-test.sh   # also refresh the README's screenshots
#   bash scripts/browser-test.sh -k deny                # only tests whose name contains "deny"
set -euo pipefail
cd "$(dirname "$0")/.."
PLAYWRIGHT_VERSION=1.55.0
cache=${COUNTERSIGN_CACHE:-$HOME/.cache/countersign}
venv="$cache/playwright-$PLAYWRIGHT_VERSION"

if ! command -v chromium >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
if ! "$venv/bin/python" -c "import playwright" 2>/dev/null \
   || [ "$("$venv/bin/pip" show playwright 2>/dev/null | sed -n 's/^Version: //p')" != "$PLAYWRIGHT_VERSION" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "playwright==$PLAYWRIGHT_VERSION"
fi

# The real OpenID provider the sign-in test signs in with (SC-ID-10).
source scripts/oidc-provider.sh
cargo build -q -p countersign-server
target=$(cargo metadata --format-version 1 --no-deps | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
export COUNTERSIGN_LOCAL_BIN="$target/debug/countersign-server" CHROMIUM=$(command -v chromium)
[ -n "${SCREENSHOTS:-}" ] && mkdir -p "$SCREENSHOTS" && set -- --screenshots "$SCREENSHOTS" "$@"
"$venv/bin/python" tests/browser/approver_page.py "$@"

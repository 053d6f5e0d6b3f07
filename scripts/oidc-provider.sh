# Sourced by scripts/test.sh: a real OpenID provider for the identity tests (tests/identity.rs):
# `oidc-provider` (OpenID Certified), pinned, installed once into ~/.cache/countersign/oidc from
# npm. Exports COUNTERSIGN_OIDC_NODE_DIR (a folder with oidc-provider in node_modules), where the
# tests run tests/identity/provider.mjs.
oidc_dir=${COUNTERSIGN_OIDC_DIR:-$HOME/.cache/countersign/oidc}
oidc_provider=9.13.3
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
if [ "$(node -p "require('$oidc_dir/node_modules/oidc-provider/package.json').version" 2>/dev/null)" != "$oidc_provider" ]; then
  echo "installing oidc-provider $oidc_provider into $oidc_dir"
  mkdir -p "$oidc_dir"
  (cd "$oidc_dir" && echo '{"private": true, "type": "module"}' > package.json &&
    npm install --silent --no-audit --no-fund "oidc-provider@$oidc_provider")
fi
export COUNTERSIGN_OIDC_NODE_DIR="$oidc_dir"

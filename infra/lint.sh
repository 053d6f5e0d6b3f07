#!/usr/bin/env bash
# Lint infra/template.yaml with two pinned scanners from PyPI, each installed once into its own
# cache venv: cfn-lint (the template is valid, at every level it reports) and checkov (the
# security checks platform teams run before a deploy: every finding is fixed, or skipped in the
# template's resource Metadata with a one-line reason).
#
#   bash infra/lint.sh            # exit status: non-zero if either scanner fails
#
# Environment:
#   COUNTERSIGN_CACHE   cache root (default: $HOME/.cache/countersign); the venvs live in
#                       $COUNTERSIGN_CACHE/cfn-lint and $COUNTERSIGN_CACHE/checkov
#   CFN_LINT_PYTHON     interpreter for the venvs (default: python3)
#
# Reruns reuse the venvs: each is (re)built only when its pinned version is not the one installed.
set -euo pipefail

CFN_LINT_VERSION=1.58.0
CHECKOV_VERSION=3.3.30

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${COUNTERSIGN_CACHE:-$HOME/.cache/countersign}
PYTHON=${CFN_LINT_PYTHON:-python3}

# ensure <package> <version>: a venv at $CACHE_ROOT/<package> with exactly that version.
ensure() {
    local package=$1 version=$2 venv=$CACHE_ROOT/$1 installed
    installed=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$package'))" 2>/dev/null || true)
    if [[ ! -x $venv/bin/$package || $installed != "$version" ]]; then
        echo "[lint] installing $package $version into $venv" >&2
        rm -rf "$venv"
        mkdir -p "$CACHE_ROOT"
        "$PYTHON" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$package==$version"
    fi
}

ensure cfn-lint "$CFN_LINT_VERSION"
ensure checkov "$CHECKOV_VERSION"
cd "$HERE"

status=0
echo "[lint] cfn-lint $CFN_LINT_VERSION on infra/template.yaml" >&2
# Informational checks too (-c I): the template is clean at every level cfn-lint reports.
"$CACHE_ROOT/cfn-lint/bin/cfn-lint" --include-checks I -- template.yaml || status=1

echo "[lint] checkov $CHECKOV_VERSION on infra/template.yaml" >&2
# Offline (--skip-download: no platform account, no downloaded policies); fails on any failed
# check. Skips live beside the resource they concern, each with its reason.
"$CACHE_ROOT/checkov/bin/checkov" --file template.yaml --framework cloudformation \
    --compact --quiet --skip-download || status=1
exit $status

#!/usr/bin/env bash
# Lint infra/template.yaml with a pinned cfn-lint (from PyPI), installed once into a cache venv.
#
#   bash infra/lint.sh            # lint the template (exit status is cfn-lint's)
#
# Environment:
#   COUNTERSIGN_CACHE   cache root (default: $HOME/.cache/countersign); the venv lives in
#                       $COUNTERSIGN_CACHE/cfn-lint
#   CFN_LINT_PYTHON     interpreter for the venv (default: python3)
#
# Reruns reuse the venv: it is (re)built only when the pinned version is not the one installed.
set -euo pipefail

CFN_LINT_VERSION=1.58.0

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${COUNTERSIGN_CACHE:-$HOME/.cache/countersign}
VENV=$CACHE_ROOT/cfn-lint
PYTHON=${CFN_LINT_PYTHON:-python3}

installed_version() {
    [[ -x $VENV/bin/cfn-lint ]] || return 1
    "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("cfn-lint"))' 2>/dev/null
}

if [[ $(installed_version || true) != "$CFN_LINT_VERSION" ]]; then
    echo "[lint] installing cfn-lint $CFN_LINT_VERSION into $VENV" >&2
    rm -rf "$VENV"
    mkdir -p "$CACHE_ROOT"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "cfn-lint==$CFN_LINT_VERSION"
fi

echo "[lint] cfn-lint $("$VENV/bin/cfn-lint" --version | awk '{print $2}') on infra/template.yaml" >&2
# Informational checks too (-c I): the template is clean at every level cfn-lint reports.
cd "$HERE"
exec "$VENV/bin/cfn-lint" --include-checks I -- template.yaml

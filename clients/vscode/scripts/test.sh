#!/usr/bin/env bash
# The VS Code client's tests: type-check, bundle, package the VSIX, unit tests of the session
# logic against the real daemon, then end-to-end scenarios in code-server driven by headless
# chromium. Run scripts/setup.sh first (`./dev test` does). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
repo=$(cd ../.. && pwd)
export HEDDLE_PYTHON=${HEDDLE_PYTHON:-$repo/.venv/bin/python}
version=$(node -p "require('./package.json').version")
export HEDDLE_VSIX=$here/dist/heddle-$version.vsix  # the name `npm run package` gives it

timings=()
step() {
  local name=$1
  shift
  local start=$SECONDS
  printf '\n[vscode test] %s\n' "$name"
  "$@"
  timings+=("$(printf '%-12s %4ss' "$name" $((SECONDS - start)))")
}

step typecheck npx tsc --noEmit -p .
step bundle node scripts/build.mjs --production --tests
step package npx vsce package --no-dependencies --allow-missing-repository --skip-license -o "$HEDDLE_VSIX"
step unit node --test --test-timeout=120000 out/test/
if compgen -G "out/e2e/*.e2e.js" >/dev/null; then
  step e2e node --test --test-concurrency=1 --test-timeout=900000 out/e2e/*.e2e.js
fi

printf '\n[vscode test] passed; time per step:\n'
printf '  %s\n' "${timings[@]}"

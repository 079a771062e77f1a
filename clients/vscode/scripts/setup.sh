#!/usr/bin/env bash
# Installs everything the VS Code client's tests need, from scratch and idempotently:
#   - Debian packages: headless chromium (drives the editor), ripgrep and the headers
#     code-server's native modules build against;
#   - the extension's npm dependencies (npm ci from package-lock.json);
#   - code-server 4.100.3 (VS Code 1.100.3 on the system Node 20) into .e2e/code-server.
# Each step is skipped when already done. Logs of noisy steps go to .e2e/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
cache=$here/.e2e
logs=$cache/logs
mkdir -p "$logs"
# One setup at a time in this checkout: a second run waits, then finds everything done.
exec 9>"$cache/setup.lock"
flock -w 900 9 || { echo "[vscode setup] another setup still holds $cache/setup.lock" >&2; exit 1; }

say() { printf '[vscode setup] %s\n' "$*"; }

# Run a noisy command with its output in a log file, shown only if it fails.
quietly() {
  local log=$logs/$1.log
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    say "failed: $* (full log: $log)" >&2
    exit 1
  fi
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# --- Debian packages ---------------------------------------------------------------------------
packages=(chromium ripgrep libkrb5-dev pkg-config build-essential libx11-dev libxkbfile-dev libsecret-1-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  quietly apt-update as_root apt-get update -qq
  quietly apt-install as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- npm settings every install below relies on ------------------------------------------------
export npm_config_yes=true            # node-pty's install runs `npx node-gyp`
export npm_config_unsafe_perm=true    # code-server's postinstall refuses to run as root without it
export npm_config_nodedir=/usr        # headers of the system Node; never download them
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

# The stamp of a lockfile: reinstall when it changes or node_modules is gone.
stamp_of() { sha256sum "$1" | cut -d' ' -f1; }

# --- the extension's npm dependencies ----------------------------------------------------------
if [ ! -d node_modules ] || [ "$(cat "$cache/npm.stamp" 2>/dev/null)" != "$(stamp_of package-lock.json)" ]; then
  say "npm ci (extension)"
  quietly npm-ci npm ci
  stamp_of package-lock.json >"$cache/npm.stamp"
fi

# --- code-server -------------------------------------------------------------------------------
server_dir=$cache/code-server
manifest=$here/e2e/code-server
if [ ! -x "$server_dir/node_modules/.bin/code-server" ] ||
   [ "$(cat "$cache/code-server.stamp" 2>/dev/null)" != "$(stamp_of "$manifest/package-lock.json")" ]; then
  say "installing code-server (takes a minute or two: native modules are compiled)"
  # @vscode/ripgrep downloads rg from GitHub, which is unreachable: seed its download cache
  # with Debian's rg so its postinstall unpacks that instead.
  seed=${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11
  mkdir -p "$seed" "$cache/rg"
  cp "$(command -v rg)" "$cache/rg/rg"
  tar czf "$seed/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$cache/rg" rg
  rm -rf "$server_dir"
  mkdir -p "$server_dir"
  cp "$manifest/package.json" "$manifest/package-lock.json" "$server_dir/"
  quietly code-server-install npm ci --prefix "$server_dir"
  stamp_of "$manifest/package-lock.json" >"$cache/code-server.stamp"
fi
version=$(node -p "require('$server_dir/node_modules/code-server/package.json').version")
say "ready: code-server $version, $(chromium --version 2>/dev/null | tail -n 1)"

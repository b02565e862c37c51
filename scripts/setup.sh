#!/usr/bin/env bash
# Installs everything pltlab needs on a fresh Debian machine (run as root). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in iproute2 tshark iperf3 chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] || need_apt+=(cargo)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"

# The Python package and its Rust data plane (maturin builds pltlab-dp into the install).
stamp=.setup-stamp
if [ ! -f "$stamp" ] || [ -n "$(find pyproject.toml Cargo.toml Cargo.lock src rust -newer "$stamp" -print -quit)" ] \
   || ! command -v pltlab >/dev/null || ! python3 -c 'import pltlab' 2>/dev/null; then
  echo "setup: building and installing pltlab (Rust data plane in release mode)"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore maturin
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test]'
  touch "$stamp"
fi

#!/usr/bin/env bash
# Installs everything pltlab needs on a fresh Debian machine (run as root). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in iproute2 tshark iperf3 chromium; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
# Rust with rustfmt and clippy (make lint): rustup's components, else Debian's packages.
if command -v rustup >/dev/null 2>&1; then
  cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1 \
    || rustup component add rustfmt clippy
else
  command -v cargo >/dev/null 2>&1 || need_apt+=(cargo)
  cargo fmt --version >/dev/null 2>&1 || need_apt+=(rustfmt)
  cargo clippy --version >/dev/null 2>&1 || need_apt+=(rust-clippy)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The Python package and its Rust data plane (maturin builds pltlab-dp into the install), with the
# test tools (pytest, hypothesis, ruff, import-linter: the `test` extra) and Ray (the `cluster`
# extra: `pltlab sweep --cluster`, tests/test_cluster.py).
stamp=.setup-stamp
if [ ! -f "$stamp" ] || [ -n "$(find pyproject.toml Cargo.toml Cargo.lock src rust -newer "$stamp" -print -quit)" ] \
   || ! command -v pltlab >/dev/null || ! command -v ruff >/dev/null || ! command -v lint-imports >/dev/null \
   || ! python3 -c 'import ray' 2>/dev/null \
   || ! python3 -c 'import pltlab, sys; sys.exit(not pltlab.__file__.startswith(sys.argv[1]))' "$PWD/src/" 2>/dev/null; then
  # (the last test: an editable install of another checkout of pltlab is not this one's)
  echo "setup: building and installing pltlab (Rust data plane in release mode)"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore maturin
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[test,cluster]'
  touch "$stamp"
fi

#!/usr/bin/env bash
# The wheel, as a user gets it: builds pltlab's wheel (maturin: the Python package and the Rust data
# plane), installs it into a fresh virtual environment (no editable install, no repository on the
# path) and runs, as a normal user, the commands that need no root (import, pages, predict,
# report, explain, compare, export) and a root command that must refuse in one line. Run as root
# (CI: `make test-wheel`); the results folder those commands read is measured first, as root, by a
# small sweep of this checkout (data only: the wheel's code reads it). The user is
# $PLTLAB_TEST_USER (default pltlab-ci); root's Python may sit under /root (0700), so a private
# mount namespace binds it, read-only, where the user can reach it (as scripts/test-as-user.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=${PY:-python3}
[ "$(id -u)" -eq 0 ] || { echo "test-wheel: run as root (it measures a small sweep first)" >&2; exit 2; }

user=${PLTLAB_TEST_USER:-pltlab-ci}
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
prefix=$("$py" -c 'import sys; print(sys.prefix)')

tmp=$(mktemp -d /tmp/pltlab-wheel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir "$tmp/python" "$tmp/dist" "$tmp/home"

echo "test-wheel: building the wheel"
"$py" -m maturin build --release --quiet --out "$tmp/dist" >/dev/null
wheel=$(ls "$tmp"/dist/pltlab-*.whl)
echo "test-wheel: $(basename "$wheel")"

echo "test-wheel: a small sweep as root (the results folder the user's commands read)"
cat >"$tmp/exp.toml" <<'EOF'
name = "wheel-check"
pages = ["wikipedia"]
rtt = ["20ms"]
tfo = ["off", "on"]
repetitions = 2
EOF
pltlab sweep "$tmp/exp.toml" -o "$tmp/home/res" --no-report >/dev/null 2>"$tmp/sweep.err" || { cat "$tmp/sweep.err"; exit 1; }
chmod -R a+rX "$tmp/dist" "$tmp/exp.toml"
chown -R "$user" "$tmp/home"

unshare --mount --propagation private bash -euc '
  tmp=$1 prefix=$2 user=$3
  mount --bind "$prefix" "$tmp/python"; mount -o remount,bind,ro "$tmp/python"
  cd "$tmp/home"
  exec runuser -u "$user" -- env -i PATH="/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
    HOME="$tmp/home" TMPDIR="$tmp/home" LANG=C.UTF-8 LD_LIBRARY_PATH="$tmp/python/lib" \
    NO_COLOR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 bash -euo pipefail -c "
      $tmp/python/bin/python3 -m venv venv
      venv/bin/pip install -q $(ls $tmp/dist/*.whl)
      export PATH=\$PWD/venv/bin:\$PATH
      check() { echo \"test-wheel (user): \$*\"; \"\$@\" >out.txt 2>err.txt || { cat out.txt err.txt; exit 1; }; }
      python3 -c \"import pltlab, sys; assert pltlab.__file__.startswith(sys.prefix), pltlab.__file__\"
      check pltlab --version
      grep -q \"^pltlab-dp \" out.txt || { echo \"no data plane version: \$(cat out.txt)\"; exit 1; }
      bundled=\$(python3 -c \"from pltlab.archive import bundled; print(bundled.path(\\\"nytimes\\\"))\")
      check pltlab import \"\$bundled\" -o corpus
      check pltlab pages corpus --json
      check pltlab predict nytimes --rtt 100ms --tfo both --json
      check pltlab report res
      test -s res/report.html
      check pltlab explain res --page wikipedia --rtt 20ms
      check pltlab compare res --by tfo
      check pltlab export res#1 -o load.har
      test -s load.har
      refuses() {  # a root command: exit 2 and one line saying it needs root
        if \"\$@\" >out.txt 2>err.txt; then echo \"\$* worked without root?\"; exit 1; fi
        test \"\$(wc -l <err.txt)\" -eq 1 && grep -q root err.txt || { echo \"\$*:\"; cat err.txt; exit 1; }
        echo \"test-wheel (user): \$*: \$(cat err.txt)\"
      }
      refuses pltlab run nytimes --reps 1
      refuses pltlab shell -- true
      refuses pltlab sweep $tmp/exp.toml -o res2
      test ! -e res2 || { echo \"a refused sweep made its folder\"; exit 1; }
      refuses pltlab reproduce tfo --quick -o res3
      test ! -e res3 || { echo \"a refused study made its folder\"; exit 1; }
      refuses pltlab check --quick
    "
' _ "$tmp" "$prefix" "$user"
echo "test-wheel: passed"

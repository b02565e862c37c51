#!/usr/bin/env bash
# Runs the tests that need no root (`pytest -m "not root"`) as a normal user, so such a test cannot
# pass only because it ran as root. Run by a normal user: runs pytest directly. Run as root (CI):
# runs them as the user $PLTLAB_TEST_USER (default pltlab-ci, created if missing). Root's Python
# and the clone may sit under /root (0700), so a private mount namespace binds them, read-only, into
# a directory the user can reach; nothing else on the machine changes. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=${PY:-python3}
args=(-q -p no:cacheprovider -m "not root" "$@")   # no paths: testpaths (tests/)

if [ "$(id -u)" -ne 0 ]; then
  exec "$py" -m pytest "${args[@]}"
fi

user=${PLTLAB_TEST_USER:-pltlab-ci}
id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
prefix=$("$py" -c 'import sys; print(sys.prefix)')
[ "$prefix" = "$("$py" -c 'import sys; print(sys.base_prefix)')" ] \
  || { echo "test-as-user: $py is a virtual environment; use the Python it was made from" >&2; exit 2; }

tmp=$(mktemp -d /tmp/pltlab-test-user.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
mkdir "$tmp/python" "$tmp/repo" "$tmp/home" "$tmp/shared"
chown "$user" "$tmp/home"
shared=$(dirname "$repo")/shared   # the real corpus next to the repository, when there is one

# PYTHONPATH puts the clone's sources ahead of the editable install's path (unreachable for the
# user); LD_LIBRARY_PATH finds libpython, whose RUNPATH names the original prefix.
unshare --mount --propagation private bash -euc '
  tmp=$1 prefix=$2 repo=$3 shared=$4 user=$5; shift 5
  mount --bind "$prefix" "$tmp/python"; mount -o remount,bind,ro "$tmp/python"
  mount --bind "$repo" "$tmp/repo"; mount -o remount,bind,ro "$tmp/repo"
  if [ -d "$shared" ]; then mount --bind "$shared" "$tmp/shared"; mount -o remount,bind,ro "$tmp/shared"; fi
  cd "$tmp/repo"
  exec runuser -u "$user" -- env -i PATH="$tmp/python/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
    HOME="$tmp/home" TMPDIR="$tmp/home" LANG=C.UTF-8 PYTHONPATH="$tmp/repo/src" \
    LD_LIBRARY_PATH="$tmp/python/lib" HYPOTHESIS_STORAGE_DIRECTORY="$tmp/home/.hypothesis" \
    PYTHONDONTWRITEBYTECODE=1 "$tmp/python/bin/python3" -m pytest "$@"
' _ "$tmp" "$prefix" "$repo" "$shared" "$user" "${args[@]}"

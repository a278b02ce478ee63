#!/usr/bin/env bash
# The Python client (client/python/attnlab) with Debian's python3: used from the tree against a
# real attnlabd (tests/python/test_client.py: standard library only, NumPy and pandas when present),
# then installed with pip into a fresh virtual environment, offline (Debian's setuptools and wheel,
# --no-build-isolation), and imported from outside the tree.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ATTNLABD=${ATTNLABD:-$ROOT/build/release/attnlabd}
/usr/bin/python3 "$ROOT/tests/python/test_client.py"
rc=$?
venv=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-venv.XXXXXX")
trap 'rm -rf "$venv"' EXIT
if ! /usr/bin/python3 -m venv --system-site-packages "$venv/env" >"$venv/log" 2>&1; then
  echo "FAIL python_client_pip_install: no venv (python3-venv: scripts/deps.sh --test installs it): $(tail -n 1 "$venv/log")"; exit 1
fi
if "$venv/env/bin/pip" install -q --no-index --no-build-isolation "$ROOT/client/python" >>"$venv/log" 2>&1 &&
  got=$(cd "$venv" && "$venv/env/bin/python" -c 'import attnlab, os; print(attnlab.__version__, os.path.dirname(attnlab.__file__))') &&
  case "$got" in *"$venv/env/"*) true ;; *) false ;; esac; then
  echo "PASS python_client_pip_install: $got"
else
  echo "FAIL python_client_pip_install: $(tail -n 3 "$venv/log" | tr '\n' ' ') got: ${got:-nothing}"; rc=1
fi
exit $rc

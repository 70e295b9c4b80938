# Sourced by .ci/run: make `python3` one that pip may install into. A system Python that
# Debian or Ubuntu manage (PEP 668: EXTERNALLY-MANAGED beside its standard library)
# refuses `pip install` outside a virtual environment, so on a fresh machine the suite
# runs in .venv/ (made once, python3-venv installed if missing); any other python3, or one
# already in a virtual environment, is used as it is.
managed() {
  python3 - <<'PY'
import os, sys, sysconfig
inside = sys.prefix != sys.base_prefix
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if not inside and os.path.exists(marker) else 1)
PY
}

if managed; then
  if [ ! -x .venv/bin/python3 ]; then
    if ! python3 -m venv .venv 2>/dev/null; then
      rm -rf .venv
      if [ "$(id -u)" -eq 0 ]; then apt-get install -y -qq python3-venv >/dev/null
      else sudo apt-get install -y -qq python3-venv >/dev/null; fi
      python3 -m venv .venv
    fi
    .venv/bin/python3 -m pip install --quiet --disable-pip-version-check --upgrade pip
  fi
  export VIRTUAL_ENV="$PWD/.venv"
  export PATH="$VIRTUAL_ENV/bin:$PATH"
  echo "[python] $(python3 --version) in $VIRTUAL_ENV (the system python3 is externally managed)" >&2
fi

# Sourced by the CI scripts that need Python packages from PyPI.

# new_venv DIR: a virtualenv in DIR (Debian's python3 may come without its venv module: then
# python3-venv is installed first).
new_venv() {
  if ! python3 -m venv "$1" 2>/dev/null; then
    echo "python3 -m venv failed: installing python3-venv"
    rm -rf "$1"
    timeout 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq python3-venv
    python3 -m venv "$1"
  fi
}

# kept_venv DIR PACKAGE...: a virtualenv with these pinned packages, reused while DIR (whose
# name carries the pins) holds a finished install (a `.ok` marker says the install ended).
kept_venv() {
  local dir=$1
  shift
  if [ ! -f "$dir/.ok" ]; then
    rm -rf "$dir"
    new_venv "$dir"
    timeout 600 "$dir/bin/pip" install -q --disable-pip-version-check "$@"
    touch "$dir/.ok"
  fi
}

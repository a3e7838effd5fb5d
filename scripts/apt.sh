# Sourced by the scripts/install-*.sh installers (not run on its own).
#
# apt_install MISSING HINT [--recommends] PKG...
# installs Debian packages with apt-get, as root or with passwordless sudo,
# refreshing the package lists once if a first try fails (a fresh machine
# may have none), or says why it cannot and returns 1. MISSING says what is
# missing ("OpenMPI is missing"), HINT what to do where there is no apt-get.
# --recommends also installs recommended packages. Uses the caller's say().
apt_install() {
  local missing=$1 hint=$2
  shift 2
  local opts=(-y -qq --no-install-recommends)
  if [ "${1:-}" = --recommends ]; then
    opts=(-y -qq)
    shift
  fi
  local pkgs=("$@") as_root=() log
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      as_root=(sudo -n)
    else
      say "$missing, and installing needs root."
      say "Run as root (or with passwordless sudo): apt-get install -y ${pkgs[*]}"
      return 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get not found: $hint"
    return 1
  fi
  say "installing ${pkgs[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  if ! "${as_root[@]}" apt-get install "${opts[@]}" "${pkgs[@]}" >"$log" 2>&1 &&
    ! { "${as_root[@]}" apt-get update -qq && "${as_root[@]}" apt-get install "${opts[@]}" "${pkgs[@]}"; } >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -f "$log"
    say "apt-get install ${pkgs[*]} failed"
    return 1
  fi
  rm -f "$log"
}

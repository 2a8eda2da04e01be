# shellcheck shell=bash
# Sourced by scripts/test, scripts/python, scripts/demo and scripts/lock.
# Finds the development environment for this checkout, building it when missing.
#
# Two layers:
# - the base environment holds every third-party package. It lives outside the checkout (several
#   GB: torch 2.9 on x86-64 is a CUDA build), under a key hashed from requirements/dev.lock and the
#   Python version, so a second run, another clone on the same machine, and CI all reuse it. It is
#   never modified after it is built.
# - a thin overlay venv in the checkout (.venv, a few MB) sees the base through a .pth file and
#   holds this checkout's four packages installed editable, so two checkouts never re-point each
#   other's packages.

TRNSCI_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TRNSCI_ENV_ROOT="${TRNSCI_ENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trnsci/envs}"
TRNSCI_ENV_FORMAT=1   # bump when the way the environment is built changes
TRNSCI_PACKAGES=(trncore trnblas trnfft trntensor)

trnsci_die() { echo "error: $*" >&2; exit 1; }

trnsci_bootstrap_python() {
    local candidate
    for candidate in "${TRNSCI_PYTHON:-}" python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
           "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            echo "$candidate"; return 0
        fi
    done
    trnsci_die "Python 3.11 is required (set TRNSCI_PYTHON to its path)"
}

trnsci_env_key() {
    { cat "$TRNSCI_REPO/requirements/dev.lock"; echo "python3.11 format=$TRNSCI_ENV_FORMAT"; } |
        sha256sum | cut -c1-16
}

trnsci_build_env() {
    local env_dir="$1" boot lock="$TRNSCI_REPO/requirements/dev.lock" line
    boot="$(trnsci_bootstrap_python)"
    echo ">> building the development environment in $env_dir (first run only; several GB)" >&2
    rm -rf "$env_dir"
    "$boot" -m venv "$env_dir" || trnsci_die "could not create a venv with $boot"
    local pip=("$env_dir/bin/python" -m pip --disable-pip-version-check)
    if ! "${pip[@]}" install --no-deps -r "$lock" >&2; then
        echo ">> the bulk install failed; installing one package at a time to name the culprit" >&2
        while IFS= read -r line; do
            case "$line" in ''|'#'*) continue ;; esac
            "${pip[@]}" install -q --no-deps "$line" >&2 ||
                trnsci_die "failed to install package '$line' (from requirements/dev.lock)"
        done < "$lock"
    fi
    "${pip[@]}" check >&2 || trnsci_die "requirements/dev.lock is inconsistent (pip check above)"
    touch "$env_dir/.ready"
}

trnsci_build_overlay() {
    local base="$1" overlay="$TRNSCI_REPO/.venv" args=() p site
    [ "$(cat "$overlay/.base" 2>/dev/null)" = "$base" ] && return 0
    rm -rf "$overlay"
    "$(trnsci_bootstrap_python)" -m venv --without-pip "$overlay" ||
        trnsci_die "could not create the overlay venv $overlay"
    site="$("$overlay/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
    # addsitedir (not a bare path) so the base's own .pth files are processed too; the name sorts
    # after the editable installs' _<pkg>.pth files, so this checkout's sources come first.
    echo "import site; site.addsitedir('$base/lib/python3.11/site-packages')" > "$site/zz_trnsci_base.pth"
    for p in "${TRNSCI_PACKAGES[@]}"; do args+=(-e "$TRNSCI_REPO/packages/$p"); done
    "$overlay/bin/python" -m pip --disable-pip-version-check install -q --no-deps \
        --no-build-isolation "${args[@]}" >&2 ||
        trnsci_die "editable install of the workspace packages failed (see pip's message above)"
    echo "$base" > "$overlay/.base"
}

# Sets TRNSCI_ENV to a ready environment (the overlay) with this checkout's packages installed.
trnsci_ensure_env() {
    local key env_dir
    key="$(trnsci_env_key)"
    env_dir="$TRNSCI_ENV_ROOT/dev-$key"
    mkdir -p "$TRNSCI_ENV_ROOT"
    (
        flock 9
        [ -f "$env_dir/.ready" ] || trnsci_build_env "$env_dir"
    ) 9>"$TRNSCI_ENV_ROOT/.lock-$key" || exit 1
    (
        flock 9
        trnsci_build_overlay "$env_dir"
    ) 9>"$TRNSCI_REPO/.venv.lock" || exit 1
    TRNSCI_ENV="$TRNSCI_REPO/.venv"
    # XLA runs on the host CPU unless this is a Neuron host (PJRT_DEVICE=NEURON set by the SDK).
    if [ -z "${PJRT_DEVICE:-}" ] && ! ls /dev/neuron0 >/dev/null 2>&1; then
        export PJRT_DEVICE=CPU
    fi
}

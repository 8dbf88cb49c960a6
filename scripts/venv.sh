# Sourced by chat.sh and test.sh: the project's virtual environment (.venv at the repository
# root), created with the machine's python3 and filled with guiderag (editable) and the
# extras asked for. Works on Debian's own Python (which refuses system-wide pip installs,
# PEP 668), pyenv or conda Pythons, as root or not. A second run reinstalls nothing unless
# pyproject.toml, the extras or the Python changed.

# Run a command as root: directly when we are root, else through sudo when there is one.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else return 1
    fi
}

apt_install() {
    echo "installing Debian packages: $*" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# ensure_venv EXTRAS: .venv exists, works, and holds guiderag[EXTRAS]; sets VENV_PY.
ensure_venv() {
    local extras="$1" py="${GUIDERAG_PYTHON:-python3}"
    if ! command -v "$py" >/dev/null 2>&1; then
        echo "error: $py not found; install Python 3.11 or newer (Debian: apt-get install python3)" >&2
        return 1
    fi
    if [ -x .venv/bin/python ] && ! .venv/bin/python -c "import sys" >/dev/null 2>&1; then
        echo "the virtual environment .venv is broken (its Python moved?): making it anew" >&2
        rm -rf .venv
    fi
    if [ ! -x .venv/bin/python ]; then
        if ! "$py" -m venv .venv >/dev/null 2>&1; then
            rm -rf .venv
            # Debian ships venv's pip bootstrap apart, in python3-venv.
            local pkg="python3-venv"
            if command -v apt-get >/dev/null 2>&1 && apt_install "$pkg" && "$py" -m venv .venv; then
                :
            else
                rm -rf .venv
                echo "error: '$py -m venv' does not work here. On Debian or Ubuntu run:" >&2
                echo "    sudo apt-get install $pkg" >&2
                echo "then run this command again." >&2
                return 1
            fi
        fi
    fi
    VENV_PY="$PWD/.venv/bin/python"
    local stamp=.venv/.guiderag-installed want
    want="$(sha256sum pyproject.toml | cut -d' ' -f1) extras=[$extras] $("$VENV_PY" -c 'import sys; print(sys.version.split()[0])')"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "installing guiderag${extras:+[$extras]} into .venv" >&2
        # wheel: lets pip build (and cache) wheels of packages published as sources only
        "$VENV_PY" -m pip install -q --disable-pip-version-check wheel &&
            "$VENV_PY" -m pip install -q --disable-pip-version-check -e ".${extras:+[$extras]}" &&
            echo "$want" > "$stamp"
    fi
}

# Shared by bin/lemon and scripts/test: make sure uv exists and the workspace env is synced
# from the lock file. Sourced, not executed.
export UV_PYTHON_DOWNLOADS="${UV_PYTHON_DOWNLOADS:-never}"
export UV_PYTHON_PREFERENCE="${UV_PYTHON_PREFERENCE:-only-system}"
lemon_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

lemon_ensure_uv() {
  if command -v uv >/dev/null 2>&1; then return 0; fi
  if [ -x "$HOME/.local/bin/uv" ]; then export PATH="$HOME/.local/bin:$PATH"; return 0; fi
  echo "lemon: uv not found; installing it with pip (once)" >&2
  local py
  py="$(command -v python3 || command -v python)" || { echo "lemon: need python3 >= 3.11" >&2; return 1; }
  "$py" -m pip install --quiet --user uv >&2 || "$py" -m pip install --quiet uv >&2 || {
    echo "lemon: could not install uv; install it (pip install uv) and retry" >&2; return 1; }
  export PATH="$HOME/.local/bin:$PATH"
  command -v uv >/dev/null 2>&1 || { echo "lemon: uv installed but not on PATH" >&2; return 1; }
}

lemon_sync() {
  (cd "$lemon_root" && uv sync --frozen --all-packages --all-groups --quiet "$@")
}

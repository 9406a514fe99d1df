# Shared by bin/lemon and scripts/test: make sure uv exists and the workspace env is synced
# from the lock file. Sourced, not executed.
export UV_PYTHON_DOWNLOADS="${UV_PYTHON_DOWNLOADS:-never}"
export UV_PYTHON_PREFERENCE="${UV_PYTHON_PREFERENCE:-only-system}"
lemon_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

lemon_ensure_uv() {
  if command -v uv >/dev/null 2>&1; then return 0; fi
  local tools="${XDG_DATA_HOME:-$HOME/.local/share}/lemon/uv-venv"
  local dir
  for dir in "$HOME/.local/bin" "$tools/bin"; do
    if [ -x "$dir/uv" ]; then export PATH="$dir:$PATH"; return 0; fi
  done
  echo "lemon: uv not found; installing it with pip (once)" >&2
  local py
  py="$(command -v python3 || command -v python)" || {
    echo "lemon: need python3 >= 3.11 on the PATH" >&2; return 1; }
  # 1. the user site; 2. on an "externally managed" Python (PEP 668), a private venv of our own.
  if "$py" -m pip install --quiet --user uv >&2 2>/dev/null && [ -x "$HOME/.local/bin/uv" ]; then
    export PATH="$HOME/.local/bin:$PATH"
  elif "$py" -m pip install --quiet uv >&2 2>/dev/null && command -v uv >/dev/null 2>&1; then
    :
  elif "$py" -m venv "$tools" >&2 && "$tools/bin/python" -m pip install --quiet uv >&2; then
    export PATH="$tools/bin:$PATH"
  else
    echo "lemon: could not install uv; install it yourself (https://docs.astral.sh/uv/) and retry" >&2
    return 1
  fi
  command -v uv >/dev/null 2>&1 || { echo "lemon: uv installed but not found on PATH" >&2; return 1; }
}

lemon_sync() {
  (cd "$lemon_root" && uv sync --frozen --all-packages --all-groups --quiet "$@")
}

# Sourced by scripts/test: Debian's Chromium for the web page's browser tests (apps/lemon_web).
# Installed with apt when it is missing and we are root (CI runs as root); otherwise the browser
# tests skip and say why. Playwright never downloads a browser of its own.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

lemon_ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then return 0; fi
  if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/test: /usr/bin/chromium is missing (not root, or no apt-get): the browser tests will skip; install it with: sudo apt-get install -y chromium" >&2
    return 0
  fi
  echo "scripts/test: installing Debian's chromium for the browser tests (apt-get)" >&2
  if ! { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
         { apt-get update -qq >/dev/null 2>&1 &&
           DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; }; }; then
    echo "scripts/test: apt-get could not install chromium: the browser tests will skip" >&2
  fi
  return 0
}

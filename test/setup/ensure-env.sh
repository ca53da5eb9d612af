#!/usr/bin/env bash
# Makes a fresh machine ready for the test suite: Debian's Chromium headless shell for Playwright, and the
# local PostgreSQL and Redis started when they are installed but stopped, and redis-server
# installed when missing (the several-instance tests start their own). Idempotent and quiet
# when everything is already there.
set -u
# The browser tests run Chromium's headless shell where there is one (Playwright's own headless:
# the same engine without the desktop browser, 40 % less time for the suite on two cores), else
# the whole browser (playwright.config.ts picks).
if [ ! -x /usr/lib/chromium/chromium-headless-shell ] && ! ls "${HOME}/.cache/ms-playwright"/chromium* >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "ensure-env: installing Debian chromium-headless-shell for the browser tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium-headless-shell >/dev/null \
      || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  elif [ ! -x /usr/bin/chromium ]; then
    echo "ensure-env: no Chromium found; install it (apt-get install chromium-headless-shell) or run 'npx playwright install chromium'" >&2
  fi
fi
# The several-instance tests run a private redis-server child (never the shared one).
if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "ensure-env: installing Debian redis-server for the several-instance tests"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "ensure-env: no redis-server found; install it (apt-get install redis-server)" >&2
  fi
fi
if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "ensure-env: starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
if command -v redis-server >/dev/null && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "ensure-env: starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
exit 0

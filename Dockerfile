# syntax=docker/dockerfile:1
# Weft: the sync server, its engines and the web app, compiled (no TypeScript loader at run time).
#
#   docker build -t weft .
#   docker run -p 8787:8787 -v weft-data:/data weft
#
# Set-ups with compose: deploy/compose.yml (one instance, SQLite) and deploy/compose.cluster.yml
# (three instances on PostgreSQL and Redis behind nginx); README, "Running in containers".

ARG NODE_VERSION=20

# --- build: every dependency, the web app (vite) and the server (esbuild) --------------------
FROM node:${NODE_VERSION}-bookworm AS build
WORKDIR /app
# The full image has make, g++ and Python: better-sqlite3 builds from source when no prebuilt
# binary matches. Dependencies first, so a change to the sources reuses this layer.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build
# Production dependencies only, installed again on this same Debian release and Node version as
# the runtime image below, so better-sqlite3's native module matches it (glibc and Node ABI).
RUN rm -rf node_modules && npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# --- runtime: Node, the compiled server, the built app, production node_modules --------------
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=8787 \
    HOST=0.0.0.0 \
    DATA_DIR=/data \
    STATIC_DIR=/app/dist
WORKDIR /app
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/dist-server ./dist-server
# bin/weft runs dist-server/weft.mjs when the sources are absent (weft backup / restore / mcp).
COPY --from=build /app/bin ./bin
# The image's `node` user (uid 1000) owns the data; a named volume mounted on /data starts
# with this ownership.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8787
# /healthz is 200 once storage is open and the engines have reconciled; Node 20 has fetch.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8787) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM starts the graceful shutdown (SHUTDOWN_TIMEOUT_MS, default 10 s): give `docker stop`
# more than that (`--time 15`, or compose's stop_grace_period).
STOPSIGNAL SIGTERM
CMD ["node", "dist-server/main.mjs"]

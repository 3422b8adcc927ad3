# reviews-bridge container image. Build: docker build -t reviews-bridge:0.1.0 .
# One image for the bridge (`run`, the default) and the upstream simulator (`simulate ...`).
# The base image is pinned to a full version tag; pin it by digest too where the registry is reachable
# (node:24.21.0-bookworm-slim@sha256:...), and bump both together; keep it on the Node version the tests run on
# (NODE24_VERSION in scripts/node.sh).
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# --- build: full dependency tree, TypeScript compiled to dist/
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# patches/: fixes to dependencies that npm ci applies (postinstall: patch-package), e.g. kafkajs#1751.
COPY patches ./patches
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# `npm run build` compiles to dist/ and copies the files read at run time beside the modules (src/redis/lua).
RUN npm run build

# --- prod-deps: runtime dependencies only, installed apart so that no dev tool reaches the final image
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# --- runtime
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HTTP_HOST=0.0.0.0 \
    HTTP_PORT=9464
WORKDIR /app
COPY --from=prod-deps --chown=root:root /app/node_modules ./node_modules
# The prod-deps stage installs without scripts (no dev tool runs there): the patched packages come from the build
# stage, where npm ci applied patches/ (kafkajs: no negative timeouts on Node 24, kafkajs#1751; ioredis: no String
# subclass at load, which slows every charCodeAt in the process). Every patched package must be copied here.
COPY --from=build --chown=root:root /app/node_modules/kafkajs ./node_modules/kafkajs
COPY --from=build --chown=root:root /app/node_modules/ioredis ./node_modules/ioredis
COPY --from=build --chown=root:root /app/dist ./dist
COPY --chown=root:root package.json ./
# Files stay owned by root and read-only for the process: it runs as the unprivileged `node` user (uid 1000)
# and needs no writable path (Kubernetes runs it with a read-only root filesystem).
USER node
EXPOSE 9464
# Liveness through the ops server; HTTP_PORT may be overridden at run time, hence read from the environment.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.HTTP_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
# No NODE_OPTIONS: `run` caps Node 24's heap itself, by the number of accounts (src/app/node-flags.ts,
# docs/benchmarks.md#memory); flags set here or at run time win over its defaults.
ENTRYPOINT ["node", "dist/src/cli.js"]
CMD ["run"]

# syntax=docker/dockerfile:1
#
# One image for every Tetraloop process type; the command picks the process:
#   docker run tetraloop                                   -> the HTTP API (port 3000)
#   docker run tetraloop worker --pool tool --metrics-port 9464
#
# There is no build step: the `tetraloop` bin loads the TypeScript sources through tsx, which is a
# production dependency of apps/cli, so `npm ci --omit=dev` is all the image needs.

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- deps: production node_modules for the whole workspace, from the lockfile ----
FROM ${NODE_IMAGE} AS deps
ENV NODE_ENV=production
WORKDIR /app
# Manifests first, so the dependency layer is cached until they change. The cli bin is copied too:
# npm links workspace bins and wants their targets to exist.
COPY package.json package-lock.json ./
COPY libs/core/package.json libs/core/
COPY libs/client/package.json libs/client/
COPY apps/api/package.json apps/api/
COPY apps/workers/package.json apps/workers/
COPY apps/cli/package.json apps/cli/
COPY apps/console/package.json apps/console/
COPY apps/cli/bin apps/cli/bin/
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --no-audit --no-fund

# ---- runtime ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
# Code and dependencies stay owned by root: the process (user `node`) can read but not change them.
COPY --from=deps /app ./
COPY libs ./libs
COPY apps ./apps
# The default agent workspace directory (TETRALOOP_WORKSPACE_DIR=.tetraloop/workspace); mount
# agent folders here. tsx keeps its transpile cache in /tmp, which is writable by everyone.
RUN mkdir -p .tetraloop/workspace && chown -R node:node .tetraloop
USER node

# 3000: the API (PORT). 9464: a worker's /healthz, /readyz and /metrics (--metrics-port).
EXPOSE 3000 9464

# No HEALTHCHECK here: the probe differs per process type (API on PORT, workers on their metrics
# port), so docker-compose.yml and the Kubernetes manifests define it per service.
ENTRYPOINT ["node", "apps/cli/bin/tetraloop.mjs"]
CMD ["api"]

# syntax=docker/dockerfile:1
#
# One image for every Tetraloop process type; the command picks the process:
#   docker run tetraloop                                   -> the HTTP API (port 3000)
#   docker run tetraloop worker --pool tool --metrics-port 9464
#
# It runs the built JavaScript (`npm run build`, staged with `--out-dir`: each package's dist/,
# manifest and files, no TypeScript sources) over production node_modules; tsx is not in it.

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
COPY libs/sdk/package.json libs/sdk/
COPY apps/api/package.json apps/api/
COPY apps/workers/package.json apps/workers/
COPY apps/cli/package.json apps/cli/
COPY apps/console/package.json apps/console/
COPY apps/cli/bin apps/cli/bin/
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --no-audit --no-fund

# ---- build: the packages' JavaScript, transpiled by esbuild (a production dependency of the
# console) and staged in /stage as they ship ----
FROM deps AS build
COPY tsconfig.json ./
COPY scripts/build.mjs scripts/
COPY libs ./libs
COPY apps ./apps
RUN npm run build -- --no-types --out-dir /stage

# ---- runtime ----
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
# Code and dependencies stay owned by root: the process (user `node`) can read but not change them.
COPY --from=deps /app ./
COPY --from=build /stage/libs ./libs
COPY --from=build /stage/apps ./apps
# The default agent workspace directory (TETRALOOP_WORKSPACE_DIR=.tetraloop/workspace); mount
# agent folders here.
RUN mkdir -p .tetraloop/workspace && chown -R node:node .tetraloop
USER node

# 3000: the API (PORT). 9464: a worker's /healthz, /readyz and /metrics (--metrics-port).
EXPOSE 3000 9464

# No HEALTHCHECK here: the probe differs per process type (API on PORT, workers on their metrics
# port), so docker-compose.yml and the Kubernetes manifests define it per service.
ENTRYPOINT ["node", "apps/cli/bin/tetraloop.mjs"]
CMD ["api"]

# One image for every role (api, worker, migrate); docker-compose.yml picks the command.
# Node 24 LTS, as package.json's engines says. The image brings its own Node, so the `node` dev dependency (the
# npm registry's Node 24 binary, for `npm run up` and `npm test` on machines with an older Node) stays out of it.
FROM node:24-bookworm-slim

WORKDIR /app
ENV NODE_ENV=production

# Dependencies first so source edits reuse this layer. tsx is a runtime dependency: the service runs its
# TypeScript directly, so dev dependencies (typescript, jest, swc) stay out of the image.
# `npm install` honours package-lock.json; `npm ci` refuses this lockfile today because it lacks the optional
# per-platform entries (@swc/core-*, @msgpackr-extract/*), the same reason scripts/lib.sh uses npm install.
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --loglevel=error && npm cache clean --force

COPY tsconfig.json ./
COPY src ./src
COPY workers ./workers
COPY scripts ./scripts

# Attachments' directory (FILES_DIR), owned by the service's user: a named volume mounted here starts with it.
RUN mkdir -p /app/data/files && chown -R node:node /app/data

USER node
EXPOSE 8080
# V8 flags for every service process (src/lib/node-options.ts says why).
ENV NODE_OPTIONS="--max-semi-space-size=16"
CMD ["npx", "tsx", "src/server.ts"]

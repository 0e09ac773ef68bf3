/**
 * npm run -s bootstrap -- --workspace "Acme" --owner-email owner@acme.test [--owner-name "Ada"] [--owner-subject sub]
 * Prints exactly one JSON object on stdout: {tenant_id, owner_user_id, api_key: {id, prefix, secret}}.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfigOrExit } from '../src/config';
import { createDb, migrateToLatest } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import { createApiKeyService } from '../src/domains/api-keys/service';
import { createAuditService } from '../src/domains/audit/service';
import { createWorkspaceService } from '../src/domains/workspaces/service';

const args = z.object({
  workspace: z.string().trim().min(1).max(120),
  'owner-email': z.email(),
  'owner-name': z.string().trim().min(1).max(200).optional(),
  'owner-subject': z.string().min(1).max(255).optional(),
});

async function main() {
  const { values } = parseArgs({
    options: {
      workspace: { type: 'string' },
      'owner-email': { type: 'string' },
      'owner-name': { type: 'string' },
      'owner-subject': { type: 'string' },
    },
  });
  const parsed = args.safeParse(values);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`--${String(issue.path[0])}: ${issue.message}`);
  }
  const config = loadConfigOrExit();
  await ensureDatabase(config.DATABASE_URL);
  const handle = createDb(config);
  try {
    await migrateToLatest(handle.db);
    // Only what a workspace needs: bootstrap must work before Redis is up.
    const audit = createAuditService({ db: handle.db });
    const workspaces = createWorkspaceService({ db: handle.db, audit, apiKeys: createApiKeyService({ db: handle.db, config, audit }) });
    const email = parsed.data['owner-email'];
    const result = await workspaces.bootstrap({
      workspace: parsed.data.workspace,
      ownerEmail: email,
      ownerName: parsed.data['owner-name'] ?? email.split('@')[0]!,
      ownerRealmSubject: parsed.data['owner-subject'],
    });
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await handle.close();
  }
}

main().catch((err) => {
  process.stderr.write(`bootstrap failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

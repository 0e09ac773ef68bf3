/**
 * A local development realm. `--ensure-keys` writes an ES256 key pair to .dev/ (used by `npm run up` when no
 * realm is configured); otherwise signs an access token:
 *   npm run dev-token -- --sub <realm_subject> --tenant <tenant_id> [--email <address>] [--minutes 60]
 * --email puts the OIDC `email` claim with `email_verified: true` in the token, as a realm does for an
 * address it has verified: the first sign-in of an invited member binds through it.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { exportPKCS8, exportSPKI, generateKeyPair, importPKCS8, SignJWT } from 'jose';

const DIR = '.dev';
const PRIVATE = `${DIR}/realm-private.pem`;
const PUBLIC = `${DIR}/realm-public.pem`;
export const DEV_ISSUER = 'urn:helpdesk:dev-realm';

async function ensureKeys() {
  if (existsSync(PRIVATE) && existsSync(PUBLIC)) return;
  mkdirSync(DIR, { recursive: true, mode: 0o700 });
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  writeFileSync(PRIVATE, await exportPKCS8(privateKey), { mode: 0o600 });
  writeFileSync(PUBLIC, await exportSPKI(publicKey));
}

async function main() {
  const { values } = parseArgs({
    options: { 'ensure-keys': { type: 'boolean' }, sub: { type: 'string' }, tenant: { type: 'string' }, email: { type: 'string' }, minutes: { type: 'string' } },
  });
  await ensureKeys();
  if (values['ensure-keys']) return;
  if (!values.sub || !values.tenant) throw new Error('usage: npm run dev-token -- --sub <realm_subject> --tenant <tenant_id> [--email <address>]');
  const key = await importPKCS8(readFileSync(PRIVATE, 'utf8'), 'ES256');
  const claims = values.email ? { tenant_id: values.tenant, email: values.email, email_verified: true } : { tenant_id: values.tenant };
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256' })
    .setSubject(values.sub)
    .setIssuer(DEV_ISSUER)
    .setIssuedAt()
    .setExpirationTime(`${Number(values.minutes ?? 60)}m`)
    .sign(key);
  process.stdout.write(`${token}\n`);
}

main().catch((err) => {
  process.stderr.write(`dev-token failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});

import type { ConfigSection } from '../../config';
import { createSealer } from '../../lib/crypto';

/**
 * Integration signing secrets, sealed at rest (AES-GCM under ENCRYPTION_KEYS), bound to their workspace and
 * integration so a sealed value copied onto another row does not open.
 */
export function createSecrets(config: ConfigSection<'secrets'>) {
  const sealer = createSealer(config.ENCRYPTION_KEYS);
  const context = (tenantId: string, integrationId: string) => `integration:${tenantId}:${integrationId}:signing_secret`;
  return {
    seal: (tenantId: string, integrationId: string, secret: string) => sealer.seal(secret, context(tenantId, integrationId)),
    open: (tenantId: string, integrationId: string, sealed: string) => sealer.open(sealed, context(tenantId, integrationId)),
  };
}

/**
 * Integration signing secrets are sealed at rest (AES-GCM under ENCRYPTION_KEYS, createFieldSealer), bound to
 * their workspace and integration so a sealed value copied onto another row does not open.
 */
export const integrationSecretContext = (tenantId: string, integrationId: string) => `integration:${tenantId}:${integrationId}:signing_secret`;

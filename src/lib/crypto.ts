import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export interface EncryptionKey {
  id: string;
  key: Buffer;
}

/**
 * AES-256-GCM with versioned keys: the last key encrypts, every key decrypts, so a deployment rotates by
 * appending a key (old values stay readable and can be re-encrypted at leisure). Sealed form:
 * `v1.<key id>.<iv>.<tag>.<ciphertext>`, base64url parts. `context` (e.g. the workspace id and field name)
 * is bound as associated data, so a value copied into another row or field does not decrypt.
 */
export function createSealer(keys: EncryptionKey[]) {
  if (keys.length === 0) throw new Error('at least one encryption key is required');
  const byId = new Map(keys.map((k) => [k.id, k.key]));
  const current = keys[keys.length - 1]!;

  return {
    seal(plaintext: string, context: string): string {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', current.key, iv);
      cipher.setAAD(Buffer.from(context));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', current.id, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
    },

    /** Throws on a tampered value, a wrong context or an unknown key id; never echoes the value. */
    open(sealed: string, context: string): string {
      const [version, id, iv, tag, body] = sealed.split('.');
      const key = id === undefined ? undefined : byId.get(id);
      if (version !== 'v1' || !key || iv === undefined || tag === undefined || body === undefined) {
        throw new Error('sealed value is malformed or its key is not configured');
      }
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },

    /** Whether a stored value is in the sealed form at all (values written before a field was sealed are not). */
    isSealed: (value: string) => value.startsWith('v1.') && value.split('.').length === 5,

    /** Whether a value is sealed with an older key (a rotation job re-seals those). */
    isStale: (sealed: string) => sealed.split('.')[1] !== current.id,
  };
}

export type Sealer = ReturnType<typeof createSealer>;

/**
 * A sealer for one kind of field: `context` names the field from the ids of the row holding it (the workspace
 * first), and is bound as the associated data of every value sealed or opened, so the ids are type-checked at
 * each call and a value copied into another row or field does not open. A context's text is what existing
 * values were sealed under: changing it makes them unreadable.
 */
export function createFieldSealer<Ids extends string[]>(keys: EncryptionKey[], context: (...ids: Ids) => string) {
  const sealer = createSealer(keys);
  /** The ids and the value of a `(...ids, value)` call. */
  const split = (args: [...Ids, string]): [Ids, string] => [args.slice(0, -1) as Ids, args[args.length - 1] as string];
  return {
    /** `seal(...ids, plaintext)`. */
    seal: (...args: [...ids: Ids, plaintext: string]): string => {
      const [ids, plaintext] = split(args);
      return sealer.seal(plaintext, context(...ids));
    },
    /** `open(...ids, sealed)`: throws on a tampered value, another row's or field's, or an unknown key id; never echoes the value. */
    open: (...args: [...ids: Ids, sealed: string]): string => {
      const [ids, sealed] = split(args);
      return sealer.open(sealed, context(...ids));
    },
    isSealed: sealer.isSealed,
    isStale: sealer.isStale,
  };
}

export type FieldSealer<Ids extends string[]> = ReturnType<typeof createFieldSealer<Ids>>;

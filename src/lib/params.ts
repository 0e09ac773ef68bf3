import { z } from 'zod';

/*
 * Zod helpers for values that arrive as strings (a query string, a form), and for the metadata a write may carry.
 * They live in lib, not in src/http, because domains declare their own query and body schemas with them: a
 * domain may not import src/http outside its routes.ts (test/layering.test.ts), and nothing here is about HTTP
 * beyond the values being text.
 */

/** Strings of digits only: "1.5", "1e2" and " 7" are not integers to a careful client. */
export const intParam = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be an integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    // What a client sends is an integer in the query string: documented as one, with its bounds (OpenAPI).
    .meta({ type: 'integer', minimum: min, maximum: max } as never);

/** `true` or `false` in the query string, documented as a boolean (OpenAPI). */
export const boolParam = z
  .enum(['true', 'false'])
  .transform((v) => v === 'true')
  .meta({ type: 'boolean' } as never);

/** Free-form key/value metadata, bounded so one field cannot bloat a row. */
export const metadata = z.record(z.string().max(100), z.unknown()).refine((m) => JSON.stringify(m).length <= 16_384, {
  message: 'metadata must serialise to at most 16 KiB',
});

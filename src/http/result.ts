import type { IntakeOutcome } from '../intake/edge';

/** What an operation's handler answers. */
export interface HandlerResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** The request was a redelivery answered from a dedupe ledger (counted in helpdesk_dedupe_hits_total). */
  duplicate?: boolean;
  /** Versioned operations: the resource's version, sent as its strong ETag. */
  version?: string;
}

/** An intake's outcome as HTTP: 202 when the worker had not answered in time (still written once), else 200. */
export const intakeAnswer = (o: IntakeOutcome): HandlerResult => ({
  status: o.accepted ? 202 : 200,
  body: o.body,
  ...(o.duplicate ? { duplicate: true } : {}),
});

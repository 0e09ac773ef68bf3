/** What an operation's handler answers; services that speak HTTP (the intake gateways) return it too. */
export interface HandlerResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** The request was a redelivery answered from a dedupe ledger (counted in helpdesk_dedupe_hits_total). */
  duplicate?: boolean;
}

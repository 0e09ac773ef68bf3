import type { WebhookEndpointRow } from '../../db/types';
import type { ClaimedDelivery, ScannedEvent } from './store';

/**
 * What one sender round sends (issue 35): pure, no I/O and no clock. delivery.ts reads the round's parked
 * deliveries and log rows, asks this what to send, sends it, and has settler.ts judge the answers.
 */

/** Log rows a round looks at past the cursor, per slot (sent, parked or passed over as another endpoint's types). */
const SCAN_ROWS_PER_SLOT = 4;
/** Events of one ticket sent one after another in a round: bounds a round's length when one ticket is busy. */
export const CHAIN_MAX = 8;

/** What the settler needs of a claimed (parked, due, leased) delivery. */
export type ClaimedHead = Pick<ClaimedDelivery, 'id' | 'event_id' | 'event_type' | 'attempts' | 'window_started_at'>;

/** A round's plan: what to send, what to park unsent, and the stretch of the log the cursor moves over. */
export interface RoundPlan<H extends ClaimedHead = ClaimedHead> {
  /** Parked deliveries claimed for this round (retries, replays, events queued behind a retry), each the head of its ticket. */
  heads: H[];
  /** Events past the cursor, one chain per ordering key in commit order: a chain's events go one after another, the chains side by side. */
  chains: ScannedEvent[][];
  /** Events past the cursor parked behind their ticket's parked delivery, unsent. */
  behind: ScannedEvent[];
  /** The cursor the round starts from, and where it ends. */
  from: string;
  to: string;
}

/**
 * How large a round is: its slots (events in flight at once) and how many log rows it reads past the cursor.
 * After its circuit was open, an endpoint is probed with one event; it gets its slots back once one is delivered.
 */
export function roundSize(ep: Pick<WebhookEndpointRow, 'circuit_opens'>, concurrency: number): { slots: number; scanRows: number } {
  const slots = ep.circuit_opens > 0 ? 1 : concurrency;
  return { slots, scanRows: SCAN_ROWS_PER_SLOT * slots };
}

/**
 * Plans a round from what it read: the claimed heads go out, and the slots they leave take the log past the
 * cursor as chains of events to send (one chain per ordering key, each in commit order), events to park behind
 * their key's parked delivery, and where the cursor ends. The plan covers a contiguous stretch of the log, so
 * the cursor can move past all of it. Null when there is nothing to do.
 */
export function planRound<H extends ClaimedHead>(read: { cursor: string; slots: number; heads: H[]; scanned: ScannedEvent[] }): RoundPlan<H> | null {
  const slots = read.slots - read.heads.length;
  const chains = new Map<string, ScannedEvent[]>();
  const behind: ScannedEvent[] = [];
  const parking = new Set<string>();
  let to = read.cursor;
  for (const e of read.scanned) {
    const key = e.ordering_key;
    if (e.wanted && (e.blocked || parking.has(key))) {
      behind.push(e);
      parking.add(key);
    } else if (e.wanted) {
      const chain = chains.get(key);
      if (chain && chain.length < CHAIN_MAX) chain.push(e);
      else if (!chain && chains.size < slots) chains.set(key, [e]);
      // No slot for another ticket (or this ticket's chain is long enough): the rest waits for the next round.
      else break;
    }
    to = e.position;
  }
  if (read.heads.length === 0 && to === read.cursor) return null;
  return { heads: read.heads, chains: [...chains.values()], behind, from: read.cursor, to };
}

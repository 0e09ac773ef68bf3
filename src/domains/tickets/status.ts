import type { TicketStatus } from '../../db/types';

export const STATUSES: readonly TicketStatus[] = ['open', 'pending', 'on_hold', 'solved', 'closed', 'spam', 'merged'];

/**
 * The status machine for PATCH, the one table both the patch rule and legal_next_states read. Reopen (solved
 * or closed → open) and merge (→ merged) are operations of their own and are not reachable by PATCH.
 */
const TRANSITIONS: Record<TicketStatus, readonly TicketStatus[]> = {
  open: ['closed', 'on_hold', 'pending', 'solved', 'spam'],
  pending: ['closed', 'on_hold', 'open', 'solved', 'spam'],
  on_hold: ['closed', 'open', 'pending', 'solved', 'spam'],
  spam: ['open'],
  closed: ['spam'],
  solved: [],
  merged: [],
};

export const legalNextStates = (status: TicketStatus): TicketStatus[] => [...TRANSITIONS[status]].sort();

export const canTransition = (from: TicketStatus, to: TicketStatus): boolean => TRANSITIONS[from].includes(to);

export const REOPENABLE: readonly TicketStatus[] = ['solved', 'closed'];

/** Statuses in which the ticket still owes a response or a resolution; SLA timers only breach here. */
export const SLA_LIVE: readonly TicketStatus[] = ['open', 'pending', 'on_hold'];

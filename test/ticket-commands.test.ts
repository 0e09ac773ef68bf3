/**
 * The tickets aggregate's front door (src/domains/tickets/commands.ts), at the service tier: commands against
 * the real database, without HTTP, where the rules live. Cheaper than driving each rule through four domains'
 * routes, and it pins the rule to the command, whoever calls it.
 */
import type { Executor } from '../src/db';
import { DomainError } from '../src/lib/errors';
import type { Principal } from '../src/domains/identity/principal';
import type { EventActor, LockedTicket, TicketCommands } from '../src/domains/tickets/commands';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

let commands: TicketCommands;
const system: EventActor = { actor_type: 'system', actor_user_id: null, actor_name: 'Test' };

const { ctx, ws } = useTestApp({ workspaces: 1 });
beforeAll(async () => {
  commands = ctx.services.tickets.commands;
});

/** The workspace owner, as a key-holding caller of the tickets' own use cases. */
const owner = (): Principal => ({ kind: 'api_key', tenantId: ws.tenantId, userId: ws.ownerId, role: 'owner', apiKeyId: null, scopes: null, agentIds: [] });
const inTx = <T>(fn: (tx: Executor) => Promise<T>) => ctx.db.transaction().execute(fn);
const statusOf = async (id: string) => (await ctx.db.selectFrom('tickets').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
const eventCount = async (id: string) => Number((await ctx.db.selectFrom('ticket_events').select((eb) => eb.fn.countAll<string>().as('n')).where('ticket_id', '=', id).executeTakeFirstOrThrow()).n);

async function mergedPair() {
  const loser = (await createTicket(ctx, ws)) as { id: string };
  const winner = (await createTicket(ctx, ws)) as { id: string };
  await ctx.services.tickets.merge(owner(), loser.id, winner.id);
  return { loser: loser.id, winner: winner.id };
}

describe('a merged ticket is closed to changes, refused by the command itself', () => {
  const moves: [string, (tx: Executor, t: LockedTicket) => Promise<unknown>][] = [
    ['applyChanges', (tx, t) => commands.applyChanges(tx, ws.tenantId, system, t, { priority: 'high' })],
    ['addMessage', (tx, t) => commands.addMessage(tx, ws.tenantId, system, t, 'internal_note', 'A note')],
    ['assign', (tx, t) => commands.assign(tx, ws.tenantId, system, t, t.team_id ?? t.id, ws.ownerId, {})],
    ['appendInbound', (tx, t) => commands.appendInbound(tx, ws.tenantId, [{ by: system, ticket: t, kind: 'inbound_email', body: 'Hello', meta: {} }])],
  ];

  test.each(moves)('%s refuses with ticket_merged and writes nothing', async (_name, move) => {
    const { loser } = await mergedPair();
    const before = await eventCount(loser);
    const err = await inTx(async (tx) => move(tx, await commands.lock(tx, ws.tenantId, loser))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ code: 'ticket_merged', detail: `Ticket ${loser} is merged; merged tickets are terminal.` });
    expect(await eventCount(loser)).toBe(before);
  });

  test('lockForChange refuses it before anything else is decided', async () => {
    const { loser } = await mergedPair();
    await expect(inTx((tx) => commands.lockForChange(tx, ws.tenantId, loser))).rejects.toMatchObject({ code: 'ticket_merged' });
  });

  test('reopen refuses it as not reopenable (only solved and closed reopen)', async () => {
    const { loser } = await mergedPair();
    await expect(inTx(async (tx) => commands.reopen(tx, ws.tenantId, system, await commands.lock(tx, ws.tenantId, loser)))).rejects.toMatchObject({
      code: 'reopen_not_allowed',
    });
  });
});

describe('threading is a ticket rule', () => {
  async function openChat(conversationKey: string) {
    const { customer_id } = (await createTicket(ctx, ws)) as { customer_id: string };
    const [opened] = await inTx((tx) =>
      commands.open(tx, ws.tenantId, [
        {
          by: system,
          fields: { subject: 'Chat', description: 'Hi', priority: 'normal', source: 'sms', customer_id, assignee_id: null, team_id: null, tags: [], metadata: {}, conversation_key: conversationKey },
          kind: 'inbound_sms',
        },
      ]),
    );
    return opened!.row.id;
  }
  const thread = (conversationKey: string) =>
    inTx(async (tx) => (await commands.threadInbound(tx, ws.tenantId, new Map([['m', { email: false, source: 'sms', conversationKey }]]))).get('m')?.id);

  test('a message continues its conversation\'s ticket', async () => {
    const key = `+1555${Date.now()}|+15550000`;
    const id = await openChat(key);
    expect(await thread(key)).toBe(id);
    expect(await thread(`${key}-other`)).toBeUndefined();
  });

  test('a merged ticket\'s conversation continues in the winner', async () => {
    const key = `+1556${Date.now()}|+15550000`;
    const loser = await openChat(key);
    const { id: winner } = (await createTicket(ctx, ws)) as { id: string };
    await ctx.services.tickets.merge(owner(), loser, winner);
    expect(await statusOf(loser)).toBe('merged');
    expect(await thread(key)).toBe(winner);
  });

  test('a closed conversation is over: the next message starts a new ticket', async () => {
    const key = `+1557${Date.now()}|+15550000`;
    const id = await openChat(key);
    await inTx(async (tx) => {
      const t = await commands.lock(tx, ws.tenantId, id);
      await commands.applyChanges(tx, ws.tenantId, system, t, { status: 'closed' });
    });
    expect(await thread(key)).toBeUndefined();
  });
});

/**
 * What the fault tests deliver and what they check afterwards: a workspace with an SMS connection and an
 * unsigned Zendesk integration, N distinct SMS messages (each from its own sender, so each must become one
 * ticket with one event) and M distinct Zendesk events over a few external tickets (each must become one
 * transcript event), and a check that the database holds each exactly once.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { TestContext } from '../helpers/context';
import { bearer, createWorkspace } from '../helpers/factories';
import { smsPayload } from '../helpers/payloads';
import { eventually } from '../helpers/wait';
import { rawOf, zendeskEvent } from '../helpers/webhooks';
import type { Delivery } from './client';

export interface IntakeCounts {
  tickets: number;
  smsEvents: number;
  distinctSmsBodies: number;
  ingestDeliveries: number;
  webhookDeliveries: number;
  transcriptEvents: number;
  distinctTranscriptEvents: number;
}

export async function intakeScenario(ctx: TestContext, opts: { sms: number; webhooks: number }) {
  const ws = await createWorkspace(ctx);
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: { phone_number: '+15550001111' } }).expect(200);
  const integration = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: 'zendesk', name: 'Zendesk (fault test)' }).expect(201);
  const integrationId = integration.body.id as string;
  const run = randomBytes(3).toString('hex');
  const externalTickets = Array.from({ length: 10 }, (_, i) => String(700_000 + i));

  const deliveries = (apiUrl: string): Delivery[] => {
    const sms = Array.from({ length: opts.sms }, (_, i) => ({
      route: 'ingest',
      url: `${apiUrl}/v1/ingest/sms`,
      body: JSON.stringify({
        tenant_id: ws.tenantId,
        payload: smsPayload({ from: `+1444${String(i).padStart(7, '0')}`, body: `fault ${run} message ${i}` }),
      }),
    }));
    const hooks = Array.from({ length: opts.webhooks }, (_, i) => ({
      route: 'webhooks',
      url: `${apiUrl}/v1/webhooks/zendesk/${integrationId}`,
      body: rawOf(zendeskEvent({ ticketId: externalTickets[i % externalTickets.length], subject: `fault ${run} event ${i}` })),
    }));
    // Interleaved, so both routes are busy whenever the fault lands.
    return Array.from({ length: Math.max(sms.length, hooks.length) }, (_, i) => [sms[i], hooks[i]]).flat().filter((d): d is Delivery => d !== undefined);
  };

  const counts = async (): Promise<IntakeCounts> => {
    const { rows } = await sql<{ [K in keyof IntakeCounts]: number }>`
      select
        (select count(*)::int from tickets where tenant_id = ${ws.tenantId}) as "tickets",
        (select count(*)::int from ticket_events where tenant_id = ${ws.tenantId} and kind = 'inbound_sms') as "smsEvents",
        (select count(distinct body)::int from ticket_events where tenant_id = ${ws.tenantId} and kind = 'inbound_sms') as "distinctSmsBodies",
        (select count(*)::int from ingest_deliveries where tenant_id = ${ws.tenantId}) as "ingestDeliveries",
        (select count(*)::int from webhook_deliveries where integration_id = ${integrationId}) as "webhookDeliveries",
        (select count(*)::int from transcript_events e join transcripts t on t.id = e.transcript_id where t.integration_id = ${integrationId}) as "transcriptEvents",
        (select count(distinct e.provider_event_id)::int from transcript_events e join transcripts t on t.id = e.transcript_id where t.integration_id = ${integrationId}) as "distinctTranscriptEvents"
    `.execute(ctx.db);
    return rows[0]!;
  };

  /** Waits (workers may still be catching up, e.g. re-running a stalled job) until every delivery is in, then checks nothing doubled. */
  const expectExactlyOnce = async (timeoutMs = 90_000) => {
    const want: IntakeCounts = {
      tickets: opts.sms,
      smsEvents: opts.sms,
      distinctSmsBodies: opts.sms,
      ingestDeliveries: opts.sms,
      webhookDeliveries: opts.webhooks,
      transcriptEvents: opts.webhooks,
      distinctTranscriptEvents: opts.webhooks,
    };
    let last: IntakeCounts | undefined;
    await eventually(
      async () => {
        last = await counts().catch(() => undefined);
        return last && last.smsEvents >= opts.sms && last.transcriptEvents >= opts.webhooks ? true : undefined;
      },
      timeoutMs,
      `every delivery to be written (last counts ${JSON.stringify(last)})`,
      250,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last counts ${JSON.stringify(last)}`);
    });
    expect(await counts()).toEqual(want);
  };

  return { ws, integrationId, deliveries, counts, expectExactlyOnce };
}

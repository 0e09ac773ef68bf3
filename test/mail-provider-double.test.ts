import { randomUUID } from 'node:crypto';
import { startMailProviderDouble, type MailProviderDouble } from './helpers/mail-provider-double';

/** The double itself, driven with plain fetch the way the real clients will drive the providers. */

const GMAIL_SCOPES = ['https://www.googleapis.com/auth/gmail.modify', 'https://www.googleapis.com/auth/userinfo.email'];
const GRAPH_SCOPES = ['https://graph.microsoft.com/Mail.ReadWrite', 'https://graph.microsoft.com/Mail.Send', 'https://graph.microsoft.com/User.Read', 'offline_access'];
const REDIRECT = 'http://127.0.0.1:9/oauth/callback';

let double: MailProviderDouble;
beforeAll(async () => {
  double = await startMailProviderDouble();
});
afterAll(async () => {
  await double.close();
});

type Provider = 'google' | 'microsoft';

async function postForm(url: string, fields: Record<string, string>) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

const tokenUrl = (p: Provider) => (p === 'google' ? double.env.GOOGLE_TOKEN_URL : double.env.MICROSOFT_TOKEN_URL);
const client = (p: Provider) =>
  p === 'google'
    ? { client_id: double.env.GOOGLE_CLIENT_ID, client_secret: double.env.GOOGLE_CLIENT_SECRET }
    : { client_id: double.env.MICROSOFT_CLIENT_ID, client_secret: double.env.MICROSOFT_CLIENT_SECRET };

function exchange(p: Provider, code: string, overrides: Record<string, string> = {}) {
  return postForm(tokenUrl(p), { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, ...client(p), ...overrides });
}

function refresh(p: Provider, refreshToken: string) {
  return postForm(tokenUrl(p), { grant_type: 'refresh_token', refresh_token: refreshToken, ...client(p) });
}

async function connect(p: Provider, email: string) {
  const code = double.issueCode(p, { email, scopes: p === 'google' ? GMAIL_SCOPES : GRAPH_SCOPES });
  const res = await exchange(p, code);
  expect(res.status).toBe(200);
  return res.body as { access_token: string; refresh_token: string };
}

async function get(url: string, token: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, ...headers } });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

const gmail = (path: string) => `${double.env.GOOGLE_GMAIL_API_URL}/gmail/v1/users/me${path}`;
const graph = (path: string) => `${double.env.MICROSOFT_GRAPH_API_URL}/v1.0${path}`;

describe('OAuth token endpoints', () => {
  test('Google code exchange returns the documented token response and the code is single use', async () => {
    const code = double.issueCode('google', { email: 'ann@example.com', scopes: GMAIL_SCOPES, refreshToken: '1//fixed-refresh' });
    const first = await exchange('google', code);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      access_token: expect.any(String),
      expires_in: 3600,
      refresh_token: '1//fixed-refresh',
      scope: GMAIL_SCOPES.join(' '),
      token_type: 'Bearer',
    });
    const again = await exchange('google', code);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    expect(typeof again.body.error_description).toBe('string');

    const unknown = await exchange('google', '4/0Anot-a-code');
    expect(unknown).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  test('wrong client_secret → 401 invalid_client for both providers', async () => {
    for (const p of ['google', 'microsoft'] as const) {
      const code = double.issueCode(p, { email: 'x@example.com', scopes: ['a'] });
      const res = await exchange(p, code, { client_secret: 'nope' });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
    }
  });

  test('access tokens are distinct per issue; refresh works, and after revoke → invalid_grant and 401', async () => {
    const tokens = await connect('google', 'bob@example.com');
    const other = await connect('google', 'bob@example.com');
    expect(other.access_token).not.toBe(tokens.access_token);

    double.setScopes('google', 'bob@example.com', ['https://www.googleapis.com/auth/gmail.readonly']);
    const refreshed = await refresh('google', tokens.refresh_token);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body).toEqual({ access_token: expect.any(String), expires_in: 3600, scope: 'https://www.googleapis.com/auth/gmail.readonly', token_type: 'Bearer' });
    expect(refreshed.body.refresh_token).toBeUndefined();

    double.revoke('google', 'bob@example.com');
    const afterRevoke = await refresh('google', tokens.refresh_token);
    expect(afterRevoke.status).toBe(400);
    expect(afterRevoke.body.error).toBe('invalid_grant');
    expect((await get(gmail('/profile'), refreshed.body.access_token)).status).toBe(401);
  });

  test('Microsoft refresh rotates the refresh token; expired access tokens answer 401 until refreshed', async () => {
    const tokens = await connect('microsoft', 'cat@contoso.com');
    expect((await get(graph('/me'), tokens.access_token)).status).toBe(200);
    double.expireAccessTokens('microsoft');
    const expired = await get(graph('/me'), tokens.access_token);
    expect(expired.status).toBe(401);
    expect(expired.body.error.code).toBe('InvalidAuthenticationToken');
    const refreshed = await refresh('microsoft', tokens.refresh_token);
    expect(refreshed.status).toBe(200);
    expect(refreshed.body).toMatchObject({ token_type: 'Bearer', expires_in: 3600, scope: GRAPH_SCOPES.join(' ') });
    expect(refreshed.body.refresh_token).toEqual(expect.any(String));
    const me = await get(graph('/me'), refreshed.body.access_token);
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: expect.any(String), displayName: expect.any(String), mail: 'cat@contoso.com', userPrincipalName: 'cat@contoso.com' });
  });
});

describe('Gmail', () => {
  test('profile with a bad token → 401 UNAUTHENTICATED', async () => {
    const res = await get(gmail('/profile'), 'ya29.bogus');
    expect(res.status).toBe(401);
    expect(res.body.error).toMatchObject({ code: 401, status: 'UNAUTHENTICATED', message: expect.any(String) });
  });

  test('history after deliver lists the new message; messages.get returns headers and body; old ids → 404', async () => {
    const { access_token: token } = await connect('google', 'dan@example.com');
    const profile = await get(gmail('/profile'), token);
    expect(profile.status).toBe(200);
    expect(profile.body).toMatchObject({ emailAddress: 'dan@example.com', messagesTotal: 0, threadsTotal: 0, historyId: expect.stringMatching(/^\d+$/) });
    const start = profile.body.historyId as string;

    const quiet = await get(gmail(`/history?startHistoryId=${start}&historyTypes=messageAdded`), token);
    expect(quiet.status).toBe(200);
    expect(quiet.body).toEqual({ historyId: start });

    const id = double.deliver('google', 'dan@example.com', {
      from: 'customer@acme.test',
      fromName: 'Cust Omer',
      subject: 'Printer on fire',
      text: 'Help, ünïcode too.',
      messageId: 'm1@acme.test',
      inReplyTo: '<m0@acme.test>',
      references: ['m-1@acme.test', '<m0@acme.test>'],
    });
    const history = await get(gmail(`/history?startHistoryId=${start}&historyTypes=messageAdded`), token);
    expect(history.status).toBe(200);
    expect(history.body.history).toEqual([{ id: expect.any(String), messages: [{ id, threadId: id }], messagesAdded: [{ message: { id, threadId: id, labelIds: expect.arrayContaining(['INBOX']) } }] }]);
    expect(Number(history.body.historyId)).toBeGreaterThan(Number(start));

    const msg = await get(gmail(`/messages/${id}?format=full`), token);
    expect(msg.status).toBe(200);
    expect(msg.body).toMatchObject({ id, threadId: id, internalDate: expect.stringMatching(/^\d+$/) });
    const headers = Object.fromEntries((msg.body.payload.headers as Array<{ name: string; value: string }>).map((h) => [h.name, h.value]));
    expect(headers).toMatchObject({
      From: '"Cust Omer" <customer@acme.test>',
      To: 'dan@example.com',
      Subject: 'Printer on fire',
      'Message-ID': '<m1@acme.test>',
      'In-Reply-To': '<m0@acme.test>',
      References: '<m-1@acme.test> <m0@acme.test>',
      Date: expect.any(String),
    });
    expect(msg.body.payload.mimeType).toBe('text/plain');
    expect(Buffer.from(msg.body.payload.body.data, 'base64url').toString('utf8')).toBe('Help, ünïcode too.');

    expect((await get(gmail('/history?startHistoryId=1'), token)).status).toBe(404);
    double.forgetHistory('google', 'dan@example.com');
    expect((await get(gmail(`/history?startHistoryId=${start}`), token)).status).toBe(404);
  });

  test('a multipart delivery comes back as payload.parts', async () => {
    const { access_token: token } = await connect('google', 'eve@example.com');
    const id = double.deliver('google', 'eve@example.com', { from: 'a@b.test', subject: 'Hi', text: 'plain', html: '<p>rich</p>', messageId: '<mp@b.test>' });
    const msg = await get(gmail(`/messages/${id}`), token);
    expect(msg.body.payload.mimeType).toBe('multipart/alternative');
    const plain = (msg.body.payload.parts as Array<{ mimeType: string; body: { data: string } }>).find((p) => p.mimeType === 'text/plain');
    expect(Buffer.from(plain!.body.data, 'base64url').toString()).toBe('plain');
  });

  test('messages.send records the decoded message and its headers, threaded into the mailbox as SENT', async () => {
    const { access_token: token } = await connect('google', 'fay@example.com');
    const inbound = double.deliver('google', 'fay@example.com', { from: 'c@acme.test', subject: 'Question ✓', text: '?', messageId: '<q1@acme.test>' });
    const rfc822 = [
      'From: fay@example.com',
      'To: c@acme.test',
      `Subject: =?UTF-8?B?${Buffer.from('Re: Question ✓').toString('base64')}?=`,
      'In-Reply-To: <q1@acme.test>',
      'References: <q1@acme.test>',
      'Message-ID: <r1@helpdesk.test>',
      'Content-Type: text/plain; charset=UTF-8',
      '',
      'Answer.',
    ].join('\r\n');
    const res = await fetch(gmail('/messages/send'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ raw: Buffer.from(rfc822).toString('base64url'), threadId: inbound }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toEqual({ id: expect.any(String), threadId: inbound, labelIds: ['SENT'] });
    expect(double.threadOf('google', 'fay@example.com', inbound)).toBe(inbound);

    const sent = double.sent('google', 'fay@example.com');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.threadId).toBe(inbound);
    expect(sent[0]!.raw).toBe(rfc822);
    expect(sent[0]!.headers).toMatchObject({ to: 'c@acme.test', subject: 'Re: Question ✓', 'in-reply-to': '<q1@acme.test>', references: '<q1@acme.test>', 'message-id': '<r1@helpdesk.test>' });
    expect(sent[0]!.text).toBe('Answer.');

    // Like Gmail, the sent message lands in the mailbox and in history (labelIds ["SENT"]).
    const history = await get(gmail(`/history?startHistoryId=${(await get(gmail('/profile'), token)).body.historyId - 1}`), token);
    expect(history.status).toBe(200);
    expect(history.body.history.at(-1).messagesAdded[0].message).toEqual({ id: body.id, threadId: inbound, labelIds: ['SENT'] });

    const missingRaw = await fetch(gmail('/messages/send'), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{}' });
    expect(missingRaw.status).toBe(400);
  });

  test('messages.send files a reply in the named thread only when it meets Gmail\'s conditions: threadId named, headers answering the thread, subject matching', async () => {
    const { access_token: token } = await connect('google', 'gus@example.com');
    const thread = double.deliver('google', 'gus@example.com', { from: 'c@acme.test', subject: 'Broken lamp', text: '?', messageId: '<lamp@acme.test>' });
    const reply = (subject: string, inReplyTo: string) =>
      ['From: gus@example.com', 'To: c@acme.test', `Subject: ${subject}`, `In-Reply-To: ${inReplyTo}`, `References: ${inReplyTo}`, `Message-ID: <${randomUUID()}@helpdesk.test>`, '', 'Answer.'].join('\r\n');
    const sendRaw = async (rfc822: string, threadId?: string) => {
      const res = await fetch(gmail('/messages/send'), {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ raw: Buffer.from(rfc822).toString('base64url'), ...(threadId ? { threadId } : {}) }),
      });
      return { status: res.status, body: (await res.json()) as { id: string; threadId: string } };
    };
    const joined = await sendRaw(reply('RE: Broken lamp', '<lamp@acme.test>'), thread);
    expect(joined.body.threadId).toBe(thread);
    const noThreadId = await sendRaw(reply('Re: Broken lamp', '<lamp@acme.test>'));
    expect(noThreadId.body.threadId).not.toBe(thread);
    const otherSubject = await sendRaw(reply('Re: Something else', '<lamp@acme.test>'), thread);
    expect(otherSubject.body.threadId).not.toBe(thread);
    const notAnswering = await sendRaw(reply('Re: Broken lamp', '<unrelated@acme.test>'), thread);
    expect(notAnswering.body.threadId).not.toBe(thread);
    expect((await sendRaw(reply('Re: Broken lamp', '<lamp@acme.test>'), 'ffffffffffffffff')).status).toBe(404);
    expect(double.sent('google', 'gus@example.com').map((m) => m.threadId)).toEqual([thread, noThreadId.body.threadId, otherSubject.body.threadId, notAnswering.body.threadId]);
  });
});

describe('Graph', () => {
  test('delta: initial sync with paging, deltaLink returns only later deliveries with their headers', async () => {
    const { access_token: token } = await connect('microsoft', 'gil@contoso.com');
    const first = double.deliver('microsoft', 'gil@contoso.com', { from: 'a@acme.test', fromName: 'A', subject: 'One', text: 'first', messageId: 'one@acme.test' });
    const second = double.deliver('microsoft', 'gil@contoso.com', { from: 'a@acme.test', subject: 'Two', text: 'second', messageId: 'two@acme.test' });

    const select = 'id,subject,from,body,internetMessageId,conversationId,receivedDateTime,internetMessageHeaders';
    const text = { prefer: 'outlook.body-content-type="text", odata.maxpagesize=1' };
    const page1 = await get(graph(`/me/mailFolders/inbox/messages/delta?$select=${select}`), token, text);
    expect(page1.status).toBe(200);
    expect(page1.body.value.map((m: { id: string }) => m.id)).toEqual([first]);
    expect(page1.body['@odata.nextLink']).toMatch(new RegExp(`^${double.baseUrl}/`));
    expect(page1.body['@odata.deltaLink']).toBeUndefined();
    expect(page1.body.value[0]).toMatchObject({
      subject: 'One',
      internetMessageId: '<one@acme.test>',
      from: { emailAddress: { address: 'a@acme.test', name: 'A' } },
      body: { contentType: 'text', content: 'first' },
      conversationId: expect.any(String),
      receivedDateTime: expect.stringMatching(/Z$/),
    });
    expect(page1.body.value[0].isRead).toBeUndefined();

    const page2 = await get(page1.body['@odata.nextLink'], token, text);
    expect(page2.body.value.map((m: { id: string }) => m.id)).toEqual([second]);
    const deltaLink = page2.body['@odata.deltaLink'] as string;
    expect(deltaLink).toMatch(new RegExp(`^${double.baseUrl}/`));

    const nothing = await get(deltaLink, token, text);
    expect(nothing.body.value).toEqual([]);
    expect(nothing.body['@odata.deltaLink']).toEqual(expect.any(String));

    const reply = double.deliver('microsoft', 'gil@contoso.com', {
      from: 'a@acme.test',
      subject: 'Re: One',
      text: 'third',
      messageId: 'three@acme.test',
      inReplyTo: 'one@acme.test',
      references: 'one@acme.test',
    });
    const later = await get(deltaLink, token, text);
    expect(later.body.value.map((m: { id: string }) => m.id)).toEqual([reply]);
    const headers = Object.fromEntries((later.body.value[0].internetMessageHeaders as Array<{ name: string; value: string }>).map((h) => [h.name, h.value]));
    expect(headers).toMatchObject({ 'In-Reply-To': '<one@acme.test>', References: '<one@acme.test>' });
    expect(later.body.value[0].conversationId).toBe(page1.body.value[0].conversationId);

    // Without the Prefer header Graph answers HTML; without $select no internetMessageHeaders.
    const plain = await get(graph('/me/mailFolders/inbox/messages/delta'), token);
    expect(plain.body.value[0].body.contentType).toBe('html');
    expect(plain.body.value[0].internetMessageHeaders).toBeUndefined();
    expect((await get(graph('/me/mailFolders/inbox/messages/delta?$select=nope'), token)).status).toBe(400);
  });

  test('sendMail with a base64 MIME body → 202 and the decoded message is recorded', async () => {
    const { access_token: token } = await connect('microsoft', 'hal@contoso.com');
    const mime = ['From: hal@contoso.com', 'To: c@acme.test', 'Subject: Re: Two', 'In-Reply-To: <two@acme.test>', 'References: <two@acme.test>', 'Content-Type: text/plain', '', 'Done.'].join('\r\n');
    const res = await fetch(graph('/me/sendMail'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
      body: Buffer.from(mime).toString('base64'),
    });
    expect(res.status).toBe(202);
    expect(await res.text()).toBe('');
    const sent = double.sent('microsoft', 'hal@contoso.com');
    expect(sent).toHaveLength(1);
    expect(sent[0]!.raw).toBe(mime);
    expect(sent[0]!.headers).toMatchObject({ to: 'c@acme.test', subject: 'Re: Two', 'in-reply-to': '<two@acme.test>', references: '<two@acme.test>' });

    const json = await fetch(graph('/me/sendMail'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: { subject: 'Hello', body: { contentType: 'Text', content: 'Hi' }, toRecipients: [{ emailAddress: { address: 'd@acme.test' } }] }, saveToSentItems: true }),
    });
    expect(json.status).toBe(202);
    expect(double.sent('microsoft', 'hal@contoso.com')[1]!.headers).toMatchObject({ to: 'd@acme.test', subject: 'Hello' });

    const badHeader = await fetch(graph('/me/sendMail'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: { subject: 'x', toRecipients: [{ emailAddress: { address: 'd@acme.test' } }], internetMessageHeaders: [{ name: 'In-Reply-To', value: '<x@y>' }] } }),
    });
    expect(badHeader.status).toBe(400);
  });

  test('message reply with a base64 MIME body → 202, filed in the original\'s conversation; an unknown message → 404 ErrorItemNotFound', async () => {
    const { access_token: token } = await connect('microsoft', 'ida@contoso.com');
    const original = double.deliver('microsoft', 'ida@contoso.com', { from: 'c@acme.test', subject: 'Three', text: '?', messageId: 'three@acme.test' });
    const mime = ['From: ida@contoso.com', 'To: c@acme.test', 'Subject: Re: Three', 'In-Reply-To: <three@acme.test>', 'References: <three@acme.test>', 'Content-Type: text/plain', '', 'Done.'].join('\r\n');
    const post = (id: string) =>
      fetch(graph(`/me/messages/${encodeURIComponent(id)}/reply`), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' }, body: Buffer.from(mime).toString('base64') });
    const res = await post(original);
    expect(res.status).toBe(202);
    const sent = double.sent('microsoft', 'ida@contoso.com');
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ raw: mime, repliedTo: original, conversationId: double.threadOf('microsoft', 'ida@contoso.com', original) });
    const missing = await post('AAMkADnope');
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('ErrorItemNotFound');
    expect(double.sent('microsoft', 'ida@contoso.com')).toHaveLength(1);
  });
});

describe('control', () => {
  test('setDown makes every endpoint of that provider answer 503; requests are logged', async () => {
    const { access_token: token } = await connect('google', 'ida@example.com');
    double.requests.splice(0);
    double.setDown('google', true);
    try {
      expect((await get(gmail('/profile'), token)).status).toBe(503);
      const code = double.issueCode('google', { email: 'ida@example.com', scopes: GMAIL_SCOPES });
      expect((await exchange('google', code)).status).toBe(503);
      // The other provider is unaffected.
      expect((await get(graph('/me'), 'bogus')).status).toBe(401);
    } finally {
      double.setDown('google', false);
    }
    expect((await get(gmail('/profile'), token)).status).toBe(200);
    expect(double.requests).toEqual([
      { provider: 'google', method: 'GET', path: '/google/gmail/gmail/v1/users/me/profile' },
      { provider: 'google', method: 'POST', path: '/google/token' },
      { provider: 'microsoft', method: 'GET', path: '/microsoft/graph/v1.0/me' },
      { provider: 'google', method: 'GET', path: '/google/gmail/gmail/v1/users/me/profile' },
    ]);
  });

  test('unknown paths → 404 JSON', async () => {
    const res = await fetch(`${double.baseUrl}/google/nothing-here`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect((await fetch(`${double.baseUrl}/elsewhere`)).status).toBe(404);
  });
});

import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * The one HTTP request a webhook attempt is, guarded against server-side request forgery: an endpoint URL
 * is an admin's input, and without a guard any workspace could make our workers POST to the cloud metadata
 * service or an internal admin port, and read the status code back from the deliveries list. Every address
 * a host resolves to is checked in the socket's own lookup (so a DNS answer cannot change between the check
 * and the connection), and IP literals, which skip the lookup, are checked before it.
 */

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** The private networks a deployment may deliver to when it says so (OUTBOUND_WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // shared address space (carrier-grade NAT)
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const) PRIVATE.addSubnet(net, prefix, 'ipv4');
PRIVATE.addSubnet('fc00::', 7, 'ipv6'); // unique local

/**
 * Every other range of the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and its updates,
 * as of 2026), plus multicast and the deprecated site-local and IPv4-compatible forms: never a webhook
 * receiver, whatever the deployment allows. Addresses that carry an IPv4 address inside (NAT64 64:ff9b::/96
 * and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) are refused whole, since the address they lead to
 * is decided by a gateway this check cannot see. Link-local holds the clouds' metadata services.
 */
const SPECIAL = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.31.196.0', 24], // AS112-v4
  ['192.52.193.0', 24], // AMT
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast
  ['192.175.48.0', 24], // direct delegation AS112
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the limited broadcast 255.255.255.255
] as const) SPECIAL.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 96], // unspecified and the deprecated IPv4-compatible addresses (::1 is judged as loopback first)
  ['::ffff:0:0:0', 96], // IPv4-translated (SIIT)
  ['64:ff9b::', 96], // NAT64 well-known prefix
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard-only
  ['100:0:0:1::', 64], // dummy prefix
  ['2001::', 23], // IETF protocol assignments: Teredo, benchmarking, AMT, AS112, ORCHID, drone remote ID
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4
  ['2620:4f:8000::', 48], // direct delegation AS112
  ['3fff::', 20], // documentation
  ['5f00::', 16], // segment routing (SRv6) SIDs
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
] as const) SPECIAL.addSubnet(net, prefix, 'ipv6');

export interface AddressPolicy {
  /** Loopback addresses may be reached (development, tests). */
  allowLoopback: boolean;
  /** Private networks may be reached (a deployment whose receivers are internal services). */
  allowPrivate: boolean;
}

/** An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) is judged as the IPv4 address it carries. */
function unmapped(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const lower = address.toLowerCase();
  if (lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4) return { address: lower.slice(7), family: 'ipv4' };
  return { address: lower, family: isIP(lower) === 6 ? 'ipv6' : 'ipv4' };
}

export function addressAllowed(raw: string, policy: AddressPolicy): boolean {
  const { address, family } = unmapped(raw);
  if (LOOPBACK.check(address, family)) return policy.allowLoopback;
  if (PRIVATE.check(address, family)) return policy.allowPrivate;
  return !SPECIAL.check(address, family);
}

const refusedAddress = () => Object.assign(new Error('refused by policy'), { code: 'EADDRNOTALLOWED' });

function guardedLookup(policy: AddressPolicy): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 4);
      const list = addresses as unknown as LookupAddress[];
      if (list.length === 0 || list.some((a) => !addressAllowed(a.address, policy))) return callback(refusedAddress(), '', 4);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, list);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };
}

/** URL hosts as written: `[::1]` → `::1`. */
const bareHost = (hostname: string) => (hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname);

/** For creation: an IP literal host that the policy refuses (names are checked when they are resolved, at send). */
export function literalRefused(url: URL, policy: AddressPolicy): boolean {
  const host = bareHost(url.hostname);
  return isIP(host) !== 0 && !addressAllowed(host, policy);
}

/**
 * Connections to receivers are kept alive between attempts: a sender at thousands of events a second would
 * otherwise spend more on TCP (and TLS) handshakes, on both sides, than on the requests. Every new connection
 * still resolves through the guarded lookup, and a kept socket stays on the address that was checked.
 */
const AGENTS = {
  'http:': new http.Agent({ keepAlive: true, maxFreeSockets: 64, timeout: 30_000, scheduling: 'lifo' }),
  'https:': new https.Agent({ keepAlive: true, maxFreeSockets: 64, timeout: 30_000, scheduling: 'lifo' }),
};

/** A receiver's answer body is read (so the connection can be reused) up to this size, then the socket is dropped. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * POSTs `body` and resolves with the status code as soon as the answer's head arrives. Rejects on a network
 * error, a refused address, or no answer within `timeoutMs` (a TimeoutError, the whole exchange including
 * the lookup counted). The answer's body is drained in the background, within the same time-out and
 * MAX_ANSWER_BYTES, so its connection can carry the next attempt; one that overruns either is destroyed.
 */
export function postJson(rawUrl: string, headers: Record<string, string>, body: string, timeoutMs: number, policy: AddressPolicy): Promise<number> {
  return new Promise((resolve, reject) => {
    const url = new URL(rawUrl);
    if (literalRefused(url, policy)) return reject(refusedAddress());
    const client = url.protocol === 'https:' ? https : http;
    const req = client.request(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      lookup: guardedLookup(policy),
      agent: AGENTS[url.protocol === 'https:' ? 'https:' : 'http:'],
    });
    const timer = setTimeout(() => req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError' })), timeoutMs);
    req.on('response', (res) => {
      resolve(res.statusCode ?? 0);
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_ANSWER_BYTES) res.destroy();
      });
      res.on('close', () => clearTimeout(timer));
      res.on('error', () => clearTimeout(timer));
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end(body);
  });
}

/** What a bounded GET read: the status, the body (whole), its declared type. */
export interface BoundedAnswer {
  status: number;
  body: Buffer;
  contentType: string | undefined;
}

/**
 * GETs a URL an admin gave (an iCal holiday feed, issue 37) under the same guard as webhook sends: every address
 * the host resolves to is checked in the socket's own lookup, IP literals before it. Redirects are not followed
 * (the answer is returned as it came). Rejects on a refused address, a network error, no whole answer within
 * `timeoutMs` (a TimeoutError, the lookup and the body included), or a body over `maxBytes` (a TooLargeError,
 * judged by Content-Length first and by the bytes as they arrive: the connection is dropped at the first byte over).
 */
export function getBounded(rawUrl: string, opts: { timeoutMs: number; maxBytes: number; policy: AddressPolicy; headers?: Record<string, string> }): Promise<BoundedAnswer> {
  return new Promise((resolve, reject) => {
    const url = new URL(rawUrl);
    if (literalRefused(url, opts.policy)) return reject(refusedAddress());
    const client = url.protocol === 'https:' ? https : http;
    // A fresh connection each time: a feed is read once a day, nothing to keep alive for.
    const req = client.request(url, { method: 'GET', headers: opts.headers ?? {}, lookup: guardedLookup(opts.policy), agent: false });
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(err);
      req.destroy();
    };
    const timer = setTimeout(() => fail(Object.assign(new Error(`no whole answer within ${opts.timeoutMs} ms`), { name: 'TimeoutError' })), opts.timeoutMs);
    const tooLarge = () => Object.assign(new Error(`the answer is larger than ${opts.maxBytes} bytes`), { name: 'TooLargeError' });
    req.on('response', (res) => {
      if (Number(res.headers['content-length']) > opts.maxBytes) return fail(tooLarge());
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > opts.maxBytes) return fail(tooLarge());
        chunks.push(chunk);
      });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), contentType: res.headers['content-type'] });
      });
      res.on('error', fail);
      res.on('close', () => {
        if (!res.complete) fail(new Error('the connection closed before the answer ended'));
      });
    });
    req.on('error', fail);
    req.end();
  });
}

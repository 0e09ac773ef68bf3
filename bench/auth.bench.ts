/**
 * Authenticated request throughput: GET /v1/members with an API key and with a realm access token, against
 * the same app's unauthenticated GET /healthz as the baseline measured in the same run.
 *   npm run bench:auth       (PostgreSQL and Redis must answer; `npm run up` or `npm test` prepares them)
 */
import autocannon from 'autocannon';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { openBenchApp } from './lib';
import { cpuPer, cpuSampleHere } from './processes';
import { autocannonLoad, createReport, runBench } from './report';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const report = createReport('auth', { title: 'Authenticated request throughput', settings: { connections: CONNECTIONS, seconds: DURATION } });

async function main() {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const bench = await openBenchApp({
    database: 'helpdesk_bench',
    redisPrefix: 'hd_bench_auth',
    env: { REALM_PUBLIC_KEY: await exportSPKI(publicKey), REALM_ISSUER: 'urn:bench', REALM_ALGORITHMS: 'ES256' },
  });
  try {
    const subject = `bench-${Date.now()}`;
    const ws = await bench.services.workspaces.bootstrap({ workspace: 'Bench', ownerEmail: `${subject}@bench.test`, ownerName: 'Bench', ownerRealmSubject: subject });
    const token = await new SignJWT({ tenant_id: ws.tenant_id }).setProtectedHeader({ alg: 'ES256' }).setSubject(subject).setIssuer('urn:bench').setExpirationTime('1h').sign(privateKey);

    const run = async (title: string, path: string, headers: Record<string, string> = {}) => {
      // The load generator runs in a worker thread so it does not share the event loop it is measuring.
      const c0 = cpuSampleHere();
      const r = await autocannon({ url: `${bench.url}${path}`, connections: CONNECTIONS, duration: DURATION, headers, workers: 1 });
      // CPU per request of the app's event loop (the load generator's thread is not counted), PostgreSQL and Redis:
      // the figure issue 35 compares against the commit before it, steadier than a rate on a shared machine.
      const cpu = cpuPer(c0, cpuSampleHere(), r.requests.total);
      const cpuMs = cpu.api! + cpu.postgres! + cpu.redis!;
      console.log(
        `${title.padEnd(34)} ${r.requests.average.toFixed(0).padStart(7)} req/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${r.non2xx + r.errors}   CPU-ms/req ${cpuMs.toFixed(3)} (api ${cpu.api!.toFixed(3)} pg ${cpu.postgres!.toFixed(3)} redis ${cpu.redis!.toFixed(3)})`,
      );
      return { ...autocannonLoad(r), cpuMs, cpuText: `api ${cpu.api!.toFixed(2)} pg ${cpu.postgres!.toFixed(2)} redis ${cpu.redis!.toFixed(2)}` };
    };

    console.log(`node ${process.version}, ${CONNECTIONS} connections, ${DURATION}s each`);
    const baseline = await run('baseline GET /healthz (no auth)', '/healthz');
    const key = await run('GET /v1/members with API key', '/v1/members', { authorization: `Bearer ${ws.api_key.secret}` });
    const jwt = await run('GET /v1/members with access token', '/v1/members', { authorization: `Bearer ${token}` });
    console.log(`API key path: ${((key.rate / baseline.rate) * 100).toFixed(0)}% of baseline; access token path: ${((jwt.rate / baseline.rate) * 100).toFixed(0)}%`);
    report.note('Issue 2 set no numeric target: the figures are read against the same-run GET /healthz baseline.');
    report.load('baseline GET /healthz (no auth)', baseline, { unit: 'req/s' });
    report.load('GET /v1/members with API key', key, { unit: 'req/s', baseline });
    report.load('GET /v1/members with access token', jwt, { unit: 'req/s', baseline });
    for (const [name, load] of [['baseline GET /healthz (no auth)', baseline], ['GET /v1/members with API key', key], ['GET /v1/members with access token', jwt]] as const) {
      report.figure({ name: `${name}: CPU-ms per request (${load.cpuText})`, value: load.cpuMs, unit: 'ms', ...(load === baseline ? {} : { baseline: baseline.cpuMs, ratio: baseline.cpuMs / load.cpuMs, ratioKind: 'baseline/value' as const }) });
    }
  } finally {
    await bench.close();
  }
}

runBench(main);

/**
 * The V8 flags every service process (API and workers) runs with, wherever it is started: the Dockerfile, the
 * npm start scripts, `npm run up`, the tests' real processes and the benches. test/node-options.test.ts checks
 * that each of those places says exactly this.
 *
 * `--max-semi-space-size=16` (MiB): Node 24 sizes V8's young generation from the machine's memory, up to 64 MiB
 * per semi-space on a 24 GiB host. Streaming a large body through JavaScript (an email's 50 MiB of base64 read
 * by the tokenizer, src/lib/spooled-json.ts) allocates short-lived strings fast, and the young generation grew to
 * its maximum: the API's RSS rose 60–68 MiB over idle for one such request (the issue's bound is 64), and idle RSS
 * was ~250 MiB. With 16 MiB (V8's long-standing default) the same request adds 5–8 MiB and idle is ~190 MiB;
 * scavenges are more frequent but each is smaller.
 */
export const SERVICE_NODE_OPTIONS = '--max-semi-space-size=16';

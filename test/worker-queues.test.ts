/**
 * A worker process runs the queues it is told to (issue 34): WORKER_QUEUES (all when empty) less
 * WORKER_QUEUES_EXCEPT, so inbound files can have a process of their own and never hold intake's event loop.
 */
import { chosenQueues } from '../workers/runtime';
import { startTestApp, type TestContext } from './helpers/context';
import { exited, killGroup, spawnWorker, workerStarted, type WorkerProcess } from './helpers/processes';

const ALL = ['ingest', 'maintenance', 'files', 'outbound'] as const;
const pick = (only: string, except = '') => chosenQueues(ALL, { WORKER_QUEUES: only, WORKER_QUEUES_EXCEPT: except });

describe('which queues a worker process runs', () => {
  test('every queue by default; only the listed ones with WORKER_QUEUES; all but the listed ones with WORKER_QUEUES_EXCEPT', () => {
    expect(pick('')).toEqual([...ALL]);
    expect(pick('files')).toEqual(['files']);
    expect(pick(' ingest , outbound ')).toEqual(['ingest', 'outbound']);
    expect(pick('', 'files')).toEqual(['ingest', 'maintenance', 'outbound']);
  });

  test('a name no queue has, or a choice that leaves nothing, stops the start and says why', () => {
    expect(() => pick('file')).toThrow('WORKER_QUEUES names no queue: file');
    expect(() => pick('', 'files,ingets')).toThrow('WORKER_QUEUES_EXCEPT names no queue: ingets');
    expect(() => pick('files', 'files')).toThrow('leave this process no queue');
  });

  describe('real processes', () => {
    let ctx: TestContext;
    const procs: WorkerProcess[] = [];
    beforeAll(async () => {
      ctx = await startTestApp();
    });
    afterAll(async () => {
      for (const p of procs) killGroup(p.proc);
      await Promise.all(procs.map((p) => exited(p.proc)));
      await ctx?.close();
    });

    test('a files-only process and an all-but-files process between them start every queue once', async () => {
      const files = spawnWorker(ctx.config, { detached: true, env: { WORKER_QUEUES: 'files' } });
      const rest = spawnWorker(ctx.config, { detached: true, env: { WORKER_QUEUES_EXCEPT: 'files' } });
      procs.push(files, rest);
      await Promise.all([workerStarted(files), workerStarted(rest)]);
      const started = (p: WorkerProcess) => (JSON.parse(p.stdout().split('\n').find((l) => l.includes('workers started'))!) as { queues: string[] }).queues;
      expect(started(files)).toEqual(['files']);
      expect(started(rest)).not.toContain('files');
      expect(started(rest)).toEqual(expect.arrayContaining(['ingest', 'maintenance', 'outbound']));
    });
  });
});

/**
 * Work a request starts after its commit and does not wait for (src/lib/after-answer.ts): it runs at once,
 * its failure is logged and never thrown at anyone, and shutdown's settle waits for all of it.
 */
import pino from 'pino';
import { createAfterAnswer } from '../src/lib/after-answer';
import { LogCapture } from './helpers/context';

const setup = () => {
  const logs = new LogCapture();
  return { logs, later: createAfterAnswer(pino({ level: 'info' }, logs)) };
};

test('settle waits for work still running, and for work that work started', async () => {
  const { later } = setup();
  const done: string[] = [];
  later.run('slow', async () => {
    await new Promise((r) => setTimeout(r, 50));
    done.push('slow');
    later.run('follow-up', async () => {
      await new Promise((r) => setTimeout(r, 20));
      done.push('follow-up');
    });
  });
  expect(done).toEqual([]);
  await later.settle();
  expect(done).toEqual(['slow', 'follow-up']);
});

test('a failure is logged with what failed and does not reject anything', async () => {
  const { later, logs } = setup();
  later.run('ticket after-commit', async () => {
    throw new Error('Redis went away');
  });
  await expect(later.settle()).resolves.toBeUndefined();
  expect(logs.parsed()).toEqual([expect.objectContaining({ err_code: 'after_answer_failed', what: 'ticket after-commit', cause: 'Redis went away' })]);
});

import { performance } from 'node:perf_hooks';
/**
 * Structured figures for bench/run.ts. A bench keeps printing what it printed before and, next to it, records
 * each figure here: its value and unit, the baseline measured in the same run (if any) and the ratio, the
 * target as text and whether it was met. When BENCH_REPORT names a file, the figures are written there as
 * JSON when the process exits (whatever the exit code), so the runner can build bench/RESULTS.md.
 * Recording never changes a bench's exit code: a missed target is reported, not a crash.
 */
import { writeFileSync } from 'node:fs';

export type FigureValue = number | string | boolean;

export interface Figure {
  name: string;
  value: FigureValue;
  unit?: string;
  /** The same measurement on the bench's baseline, taken in the same run. */
  baseline?: number | null;
  /** value ÷ baseline (the default when both are numbers), or baseline ÷ value for a speed-up of a latency. */
  ratio?: number | null;
  ratioKind?: 'value/baseline' | 'baseline/value';
  /** The target as text, naming who set it: "≥ 0.6× baseline (issue 5)", "max − min ≤ 1 (bench check)". */
  target?: string | null;
  met?: boolean | null;
}

export interface BenchReport {
  bench: string;
  title: string;
  /** The conditions of the run: connections, seconds, data sizes. */
  settings: Record<string, FigureValue>;
  figures: Figure[];
  notes: string[];
  exitCode?: number;
}

/** One load case's figures: throughput and latency percentiles. */
export interface Load {
  rate: number;
  p50: number;
  p99: number;
  /** Responses that were not 2xx, plus connection errors. */
  errors?: number;
}

/** The figures of an autocannon result, as a Load. */
/** The q-quantile (0..1) of a sample, NaN when it is empty. */
export const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

/** Milliseconds of each of `n` sequential runs of `fn` (a same-run baseline's timings). */
export async function timedRuns(fn: () => Promise<unknown>, n: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const s = performance.now();
    await fn();
    ms.push(performance.now() - s);
  }
  return ms;
}

export const autocannonLoad = (r: { requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number; errors: number }): Load => ({
  rate: r.requests.average,
  p50: r.latency.p50,
  p99: r.latency.p99,
  errors: r.non2xx + r.errors,
});

export function createReport(bench: string, opts: { title: string; settings?: Record<string, FigureValue> }) {
  const report: BenchReport = { bench, title: opts.title, settings: { ...opts.settings }, figures: [], notes: [] };
  process.on('exit', (code) => {
    const file = process.env.BENCH_REPORT;
    if (!file) return;
    try {
      writeFileSync(file, JSON.stringify({ ...report, exitCode: code }, null, 2));
    } catch (err) {
      process.stderr.write(`bench report: cannot write ${file}: ${(err as Error).message}\n`);
    }
  });

  const figure = (f: Figure): Figure => {
    const numeric = typeof f.value === 'number' && typeof f.baseline === 'number';
    const ratioKind = f.ratioKind ?? 'value/baseline';
    let ratio = f.ratio;
    if (ratio === undefined && numeric) {
      const [num, den] = ratioKind === 'value/baseline' ? [f.value as number, f.baseline as number] : [f.baseline as number, f.value as number];
      ratio = den === 0 ? null : num / den;
    }
    const recorded: Figure = { ...f, ratio: ratio ?? null, ratioKind, baseline: f.baseline ?? null, target: f.target ?? null, met: f.met ?? null };
    report.figures.push(recorded);
    return recorded;
  };

  return {
    figure,
    /** Adds to the conditions of the run. */
    settings(more: Record<string, FigureValue>) {
      Object.assign(report.settings, more);
    },
    note(text: string) {
      report.notes.push(text);
    },
    /** A load case: `<name>: <unit>`, `<name>: p50`, `<name>: p99` (and non-2xx), each against the baseline case if given. */
    load(name: string, load: Load, opts: { unit: string; baseline?: Load }) {
      const b = opts.baseline;
      figure({ name: `${name}: throughput`, value: load.rate, unit: opts.unit, baseline: b?.rate });
      figure({ name: `${name}: p50`, value: load.p50, unit: 'ms', baseline: b?.p50 });
      figure({ name: `${name}: p99`, value: load.p99, unit: 'ms', baseline: b?.p99 });
      if (load.errors !== undefined) figure({ name: `${name}: non-2xx`, value: load.errors, unit: 'responses' });
    },
  };
}

/** Runs a bench's main and exits with its outcome (0, or 1 after printing what failed): what bench/run.ts reads. */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}

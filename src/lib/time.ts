export const iso = (d: Date): string => d.toISOString();
export const isoOrNull = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);
export const addDays = (d: Date, days: number): Date => new Date(d.getTime() + days * 86_400_000);

/** Rejects with `onTimeout()` when `p` has not settled within `ms`; the timer never outlives the race. */
export function withTimeout<T>(p: Promise<T>, ms: number, onTimeout: () => Error = () => new Error('timeout')): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

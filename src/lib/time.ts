export const iso = (d: Date): string => d.toISOString();
export const isoOrNull = (d: Date | null | undefined): string | null => (d ? d.toISOString() : null);
export const addDays = (d: Date, days: number): Date => new Date(d.getTime() + days * 86_400_000);

/**
 * A report as CSV (RFC 4180): one row per day of the range, its numbers as columns, nested parts flattened with
 * `_` (sla's first_reply_share). Empty cells are the nulls of the JSON answer (a median of no tickets). The
 * range's total and agent activity's per-agent list are in the JSON answer only.
 */
export function reportCsv(days: readonly Record<string, unknown>[]): string {
  const rows = days.map((d) => flatten(d));
  const header = rows[0] ? Object.keys(rows[0]) : ['date'];
  const lines = [header.map(cell).join(','), ...rows.map((r) => header.map((h) => cell(r[h])).join(','))];
  return `${lines.join('\r\n')}\r\n`;
}

function flatten(o: Record<string, unknown>, prefix = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) Object.assign(out, flatten(v as Record<string, unknown>, `${prefix}${k}_`));
    else out[`${prefix}${k}`] = v;
  }
  return out;
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return '';
  const s = String(v);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** Whether the client asked for CSV (`Accept: text/csv`, alone or preferred by its order). */
export function wantsCsv(accept: string | undefined): boolean {
  if (!accept) return false;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  const csv = types.indexOf('text/csv');
  const json = types.findIndex((t) => t === 'application/json' || t === 'application/*');
  return csv !== -1 && (json === -1 || csv < json);
}

/** The PostgreSQL server the suite uses: DATABASE_URL's server, with a database name of our choosing. */
export function serverUrl(database: string): string {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/helpdesk');
  url.pathname = `/${database}`;
  return url.toString();
}

export const runId = (): string => {
  const id = process.env.HD_TEST_RUN;
  if (!id) throw new Error('HD_TEST_RUN is not set: run the suite through jest (globalSetup)');
  return id;
};

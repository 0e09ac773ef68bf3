/**
 * Runs the third-party OpenAPI tools over a document on disk, in a process of its own: openapi-typescript
 * and Redocly ship as ES modules, which jest's CommonJS loader cannot import (test/openapi-tooling.test.ts).
 *
 *   node test/helpers/contract-tools.mjs <openapi.json> <out-dir> <exceptions.json>
 *
 * Writes <out-dir>/api.ts (openapi-typescript at its default settings) and prints one JSON line:
 * { spectral: [{ code, severity, path, message }], redocly: [...] }. Everything is local: Spectral's oas
 * ruleset comes from the installed package, Redocly's `recommended` config is built into openapi-core.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import openapiTS, { astToString } from 'openapi-typescript';
import spectralCore from '@stoplight/spectral-core';
import spectralParsers from '@stoplight/spectral-parsers';
import spectralRulesets from '@stoplight/spectral-rulesets';
import { createConfig, lintFromString } from '@redocly/openapi-core';

const [documentPath, outDir, exceptionsPath] = process.argv.slice(2);
const text = await readFile(documentPath, 'utf8');
/** @type {{ spectral: Record<string, string>, redocly: Record<string, string> }} rule → why it is off */
const exceptions = JSON.parse(await readFile(exceptionsPath, 'utf8'));

const ast = await openapiTS(JSON.parse(text));
await writeFile(join(outDir, 'api.ts'), astToString(ast));

const spectral = new spectralCore.Spectral();
spectral.setRuleset({
  extends: [[spectralRulesets.oas, 'recommended']],
  rules: Object.fromEntries(Object.keys(exceptions.spectral).map((rule) => [rule, 'off'])),
});
const SPECTRAL_SEVERITY = ['error', 'warn', 'info', 'hint'];
const spectralProblems = (await spectral.run(new spectralCore.Document(text, spectralParsers.Json, documentPath))).map((r) => ({
  code: String(r.code),
  severity: SPECTRAL_SEVERITY[r.severity],
  path: r.path.join('.'),
  message: r.message,
}));

const config = await createConfig({ extends: ['recommended'], rules: Object.fromEntries(Object.keys(exceptions.redocly).map((rule) => [rule, 'off'])) });
const redoclyProblems = (await lintFromString({ source: text, absoluteRef: documentPath, config })).map((p) => ({
  code: p.ruleId,
  severity: p.severity,
  path: p.location[0]?.pointer ?? '',
  message: p.message,
}));

process.stdout.write(`${JSON.stringify({ spectral: spectralProblems, redocly: redoclyProblems })}\n`);

/**
 * Scraping GET /metrics as Prometheus would, read with the Prometheus project's own parser of
 * the text exposition format (prometheus_client.parser of the official Python client, Debian's
 * python3-prometheus-client, installed by .ci/run), never with regular expressions of ours.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import type { Test } from 'tap';
import { requirePart } from './system-parts.ts';

export const METRICS_TOKEN = 'test-metrics-token-0123456789';
const PYTHON = '/usr/bin/python3';

const PARSE = `
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
families = text_string_to_metric_families(sys.stdin.read())
value = lambda v: v if math.isfinite(v) else str(v)  # NaN and Inf are not JSON
print(json.dumps([{"name": f.name, "type": f.type,
  "samples": [{"name": s.name, "labels": s.labels, "value": value(s.value)} for s in f.samples]}
  for f in families]))
`;

/** A metrics test's first line: without the parser, a visible skip (a failure under CI). */
export function requirePrometheusParser(t: Test): void {
  const found = spawnSync(PYTHON, ['-c', 'import prometheus_client.parser'], { stdio: 'ignore' });
  requirePart(
    t,
    found.status === 0
      ? null
      : "Python's Prometheus parser (apt-get install python3-prometheus-client)",
  );
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface Scraped {
  /** Family names (counters without their _total, as the parser names them) and sample names. */
  names: Set<string>;
  samples: Sample[];
}

/** Parses exposition text with the official parser; throws on anything it refuses. */
async function parseExposition(text: string): Promise<Scraped> {
  const run = promisify(execFile);
  const child = run(PYTHON, ['-c', PARSE], { maxBuffer: 16 * 1024 * 1024 });
  child.child.stdin!.end(text);
  const { stdout } = await child;
  const families = JSON.parse(stdout) as { name: string; type: string; samples: Sample[] }[];
  const samples = families.flatMap((family) =>
    family.samples.map((sample) => ({ ...sample, value: Number(sample.value) })),
  );
  // The series a family has even before its first sample (a labelled counter starts empty).
  const SERIES: Record<string, string[]> = {
    counter: ['_total'],
    histogram: ['_bucket', '_sum', '_count'],
    summary: ['_sum', '_count'],
  };
  const names = new Set(samples.map((sample) => sample.name));
  for (const family of families) {
    names.add(family.name);
    for (const suffix of SERIES[family.type] ?? []) names.add(`${family.name}${suffix}`);
  }
  return { names, samples };
}

export async function scrape(
  fetchText: (headers: Record<string, string>) => Promise<{ status: number; body: string }>,
): Promise<Scraped> {
  const answer = await fetchText({ authorization: `Bearer ${METRICS_TOKEN}` });
  if (answer.status !== 200) throw new Error(`GET /metrics answered ${answer.status}`);
  return parseExposition(answer.body);
}

/** The sum of the samples named `name` whose labels include `labels` (0 when none). */
export function sampleValue(
  scraped: Scraped,
  name: string,
  labels: Record<string, string> = {},
): number {
  if (!scraped.names.has(name)) throw new Error(`no metric ${name}`);
  return scraped.samples
    .filter(
      (sample) =>
        sample.name === name &&
        Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
    )
    .reduce((sum, sample) => sum + sample.value, 0);
}

/**
 * An unlabelled counter's value in the app's own registry (0 before its first increment): for a
 * test that waits on a count, where scraping and parsing /metrics on every poll would cost more
 * than the condition it waits for.
 */
export async function counterValue(app: FastifyInstance, name: string): Promise<number> {
  return (await app.metrics!.registry.getSingleMetric(name)!.get()).values[0]?.value ?? 0;
}

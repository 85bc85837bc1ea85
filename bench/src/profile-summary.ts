/**
 * Summarises a V8 CPU profile (node --cpu-prof, or `npm run bench -- --cpu-prof DIR`):
 * the functions with the most self time, self time per package / source file, and with
 * `--stages` the busy time by stage of a request (issue #57 item 4: router, auth, rate limit,
 * validation, handler, serialization, request log, metrics, ETag, logging, the database's
 * SQL and driver), each frame placed through the bundle's source map.
 *
 *   node --import tsx bench/src/profile-summary.ts FILE.cpuprofile [--top 25]
 *     [--stages [--us-per-request N]]
 */
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';
import { stageOf } from './profile-stages.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}

export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** node_modules/<pkg> or src/..., so the table says whose code the time is spent in. */
function owner(url: string): string {
  if (!url) return '(native / V8)';
  if (url.startsWith('node:')) return 'node: core';
  const modules = url.lastIndexOf('node_modules/');
  if (modules !== -1) {
    const rest = url.slice(modules + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const src = url.indexOf('/src/');
  return src !== -1 ? url.slice(src + 1) : url.replace(/^file:\/\//, '');
}

/** Each node's self time in µs: the time deltas of the samples taken in it. */
function selfTimes(profile: Profile): Map<number, number> {
  const selfMicros = new Map<number, number>();
  profile.samples.forEach((id, i) =>
    selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)),
  );
  return selfMicros;
}

export function summarise(profile: Profile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMicros = selfTimes(profile);
  const total = profile.endTime - profile.startTime;
  const functions = new Map<string, number>();
  const owners = new Map<string, number>();
  for (const [id, micros] of selfMicros) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const name = `${functionName || '(anonymous)'} ${owner(url)}${url ? `:${lineNumber + 1}` : ''}`;
    functions.set(name, (functions.get(name) ?? 0) + micros);
    const o =
      functionName === '(idle)' ||
      functionName === '(program)' ||
      functionName === '(garbage collector)'
        ? functionName
        : owner(url);
    owners.set(o, (owners.get(o) ?? 0) + micros);
  }
  const pct = (micros: number) => `${((micros / total) * 100).toFixed(1).padStart(5)}%`;
  const rows = (map: Map<string, number>) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(
        ([name, micros]) => `${pct(micros)}  ${(micros / 1000).toFixed(0).padStart(7)} ms  ${name}`,
      );
  return [
    `profile: ${(total / 1e6).toFixed(1)} s`,
    '',
    'self time by package / file:',
    ...rows(owners),
    '',
    'self time by function:',
    ...rows(functions),
  ].join('\n');
}

const SOCKET_WRITES = new Set(['writeBuffer', 'writev', 'writeUtf8String', 'writeLatin1String']);

/**
 * Busy time (all but idle; the garbage collector and V8's own "(program)" as rows of their own)
 * by stage: a sample belongs to the innermost frame of its stack that has a stage
 * (profile-stages.ts), so a helper of src/lib called by the auth hook counts as auth and a
 * socket write issued by postgres.js as the driver's; a stack with no staged frame (Node's HTTP
 * parser, timers) is Node's. `usPerRequest` (the API's CPU per request
 * from the bench, measured from /proc) turns shares into microseconds.
 */
export function stages(profile: Profile, usPerRequest?: number): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const maps = new Map<string, SourceMap | null>();
  const sourceOf = (frame: ProfileNode['callFrame']): string => {
    if (!frame.url.startsWith('file://') || !frame.url.endsWith('.js')) return frame.url;
    let map = maps.get(frame.url);
    if (map === undefined) {
      try {
        const path = fileURLToPath(frame.url);
        map = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')) as never);
      } catch {
        map = null;
      }
      maps.set(frame.url, map);
    }
    const entry = map?.findEntry(frame.lineNumber, frame.columnNumber);
    return entry && 'originalSource' in entry ? entry.originalSource : frame.url;
  };
  const staged = new Map<number, string>();
  const visit = (node: ProfileNode, inherited: string) => {
    const stage = stageOf(node.callFrame.functionName, sourceOf(node.callFrame)) ?? inherited;
    staged.set(node.id, stage);
    for (const child of node.children ?? []) visit(byId.get(child)!, stage);
  };
  visit(profile.nodes[0]!, 'Node (HTTP parser, timers, outside any stage)');
  const busy = new Map<string, { micros: number; writes: number }>();
  let total = 0;
  for (const [id, micros] of selfTimes(profile)) {
    const name = byId.get(id)!.callFrame.functionName;
    if (name === '(idle)') continue;
    const stage = name === '(program)' || name === '(garbage collector)' ? name : staged.get(id)!;
    const row = busy.get(stage) ?? { micros: 0, writes: 0 };
    row.micros += micros;
    if (SOCKET_WRITES.has(name)) row.writes += micros;
    busy.set(stage, row);
    total += micros;
  }
  const us = (share: number) =>
    usPerRequest === undefined ? '' : ` | ${Math.round(share * usPerRequest)}`;
  return [
    `busy time by stage (${(total / 1e6).toFixed(1)} s busy)`,
    '',
    `| stage | share of busy time | of which socket writes${usPerRequest ? ' | µs a request' : ''} |`,
    `| --- | ---: | ---:${usPerRequest ? ' | ---:' : ''} |`,
    ...[...busy.entries()]
      .sort((a, b) => b[1].micros - a[1].micros)
      .map(
        ([stage, { micros, writes }]) =>
          `| ${stage} | ${((micros / total) * 100).toFixed(1)}% | ` +
          `${((writes / total) * 100).toFixed(1)}%${us(micros / total)} |`,
      ),
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  const flag = (name: string) => {
    const index = process.argv.indexOf(name);
    return index === -1 ? undefined : process.argv[index + 1];
  };
  const top = Number(flag('--top') ?? 25);
  if (!file) {
    process.stderr.write(
      'usage: profile-summary.ts FILE.cpuprofile [--top N] [--stages [--us-per-request N]]\n',
    );
    process.exit(2);
  }
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const perRequest = flag('--us-per-request');
  process.stdout.write(
    process.argv.includes('--stages')
      ? `${stages(profile, perRequest === undefined ? undefined : Number(perRequest))}\n`
      : `${summarise(profile, top)}\n`,
  );
}

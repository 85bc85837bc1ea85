/**
 * Summarises a V8 CPU profile (node --cpu-prof, or `npm run bench -- --cpu-prof DIR`):
 * the functions with the most self time, and self time per package / source file.
 *
 *   node --import tsx bench/src/profile-summary.ts FILE.cpuprofile [--top 25]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface Profile {
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

export function summarise(profile: Profile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMicros = new Map<number, number>();
  profile.samples.forEach((id, i) =>
    selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)),
  );
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

if (import.meta.url === `file://${process.argv[1]}`) {
  const file = process.argv[2];
  const topIndex = process.argv.indexOf('--top');
  const top = topIndex === -1 ? 25 : Number(process.argv[topIndex + 1]);
  if (!file) {
    process.stderr.write('usage: profile-summary.ts FILE.cpuprofile [--top N]\n');
    process.exit(2);
  }
  process.stdout.write(`${summarise(JSON.parse(readFileSync(file, 'utf8')) as Profile, top)}\n`);
}

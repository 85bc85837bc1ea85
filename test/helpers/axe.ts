/**
 * axe-core in the browser tests (docs/portal.md, one look): runs the WCAG 2 A and AA rules on
 * the page as it is and fails the test on any violation of serious or critical impact, naming
 * each rule and the elements it found. axe is evaluated through the DevTools protocol, so the
 * pages' strict CSP (no inline script) stays on.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import type { Test } from 'tap';

const source = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** The serious and critical violations on the page, as "rule: help (targets)". */
export async function accessibilityProblems(page: Page): Promise<string[]> {
  await page.evaluate(source);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (...a: unknown[]) => Promise<unknown> } })
      .axe;
    const result = (await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    })) as { violations: Violation[] };
    return result.violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
}

export async function assertAccessible(t: Test, page: Page, label: string): Promise<void> {
  t.same(await accessibilityProblems(page), [], `${label}: no serious or critical axe violation`);
}

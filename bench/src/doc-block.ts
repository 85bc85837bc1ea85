/**
 * A generated block of a document: the text from a start marker through an end marker, which a
 * bench script rewrites from its results file so no figure is typed by hand (bench/RESULTS.md,
 * docs/scaling.md). `start` may be the opening of the marker only (`<!-- bench:start`) when the
 * generated block writes the rest of that comment itself.
 */
import { readFileSync, writeFileSync } from 'node:fs';

/** The document's text and where its block runs: from its start marker to just past its end one. */
export function findBlock(
  file: string,
  start: string,
  end: string,
): { text: string; from: number; to: number } {
  const text = readFileSync(file, 'utf8');
  const from = text.indexOf(start);
  const to = from < 0 ? -1 : text.indexOf(end, from);
  if (to < 0) throw new Error(`${file} has no "${start} ... ${end}" block to fill`);
  return { text, from, to: to + end.length };
}

/** What the document holds between its two markers, trimmed. */
export function blockContent(file: string, start: string, end: string): string {
  const { text, from, to } = findBlock(file, start, end);
  return text.slice(from + start.length, to - end.length).trim();
}

/** Replaces the block, markers included, with `block` (which carries its own markers). */
export function replaceBlock(file: string, start: string, end: string, block: string): void {
  const { text, from, to } = findBlock(file, start, end);
  writeFileSync(file, text.slice(0, from) + block + text.slice(to));
}

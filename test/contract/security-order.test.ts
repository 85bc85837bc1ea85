/**
 * Anonymous access (`{}`) comes last in every operation's security list. Generated clients
 * (openapi-typescript consumers, Scalar's "Test Request", hey-api) take the first alternative
 * they can satisfy, and `{}` is always satisfiable: listed first, it makes them send no
 * credential, so a sandbox key's own listing answers 404 (issue #13).
 */
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse } from 'yaml';
import { DOCUMENT_URL } from './document.ts';

type Requirement = Record<string, string[]>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

const document = parse(readFileSync(DOCUMENT_URL, 'utf8')) as {
  security?: Requirement[];
  paths: Record<string, Record<string, { operationId?: string; security?: Requirement[] }>>;
};

const lists = Object.entries(document.paths).flatMap(([path, item]) =>
  METHODS.filter((method) => item[method]).map((method) => {
    const op = item[method]!;
    return {
      name: op.operationId ?? `${method.toUpperCase()} ${path}`,
      security: op.security ?? document.security ?? [],
    };
  }),
);

/** Where `{}` stands in a security list, or -1. */
const anonymousAt = (security: Requirement[]) =>
  security.findIndex((requirement) => Object.keys(requirement).length === 0);

t.test('credentials come before anonymous access in every security list', async (t) => {
  const mixed = lists.filter(({ security }) => security.length > 1 && anonymousAt(security) !== -1);
  t.ok(mixed.length >= 5, `${mixed.length} operations accept a credential or none`);
  const anonymousNotLast = lists
    .filter(({ security }) => ![-1, security.length - 1].includes(anonymousAt(security)))
    .map((l) => l.name);
  t.same(anonymousNotLast, [], '{} is the last alternative wherever it appears');
});

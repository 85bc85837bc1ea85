/**
 * A saved search's keys (src/db/schema.ts saved_search_keys): tokens of listings.match
 * (drizzle/0013) at least one of which every listing it matches has, so that a listing write
 * looks up only the saved searches keyed by one of its own tokens. Like a percolator's query
 * terms: the keys say which saved searches could match; the exact check (search-filters.ts
 * savedSearchMatches) says which do.
 */

/** A tsquery as websearch_to_tsquery prints it: lexemes, `!`, `&`, `|`, `<->`, `<N>`, `( )`. */
type Node =
  | { kind: 'lexeme'; text: string }
  | { kind: 'not' }
  | { kind: 'and'; parts: Node[] }
  | { kind: 'or'; parts: Node[] };

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === ' ') {
      i += 1;
    } else if (c === "'") {
      // A quoted lexeme: '' inside is a quote.
      let lexeme = '';
      i += 1;
      while (i < text.length) {
        if (text[i] === "'" && text[i + 1] === "'") {
          lexeme += "'";
          i += 2;
        } else if (text[i] === "'") {
          i += 1;
          break;
        } else {
          lexeme += text[i];
          i += 1;
        }
      }
      // A weight or prefix suffix (`:*`, `:AB`) is not part of the lexeme.
      const suffix = /^:[*A-D]+/.exec(text.slice(i));
      if (suffix) i += suffix[0].length;
      tokens.push(`'${lexeme}`);
    } else if (c === '<') {
      const end = text.indexOf('>', i);
      tokens.push('&');
      i = end + 1;
    } else {
      tokens.push(c);
      i += 1;
    }
  }
  return tokens;
}

/** Recursive descent, by the operators' precedence: `|` below `&` and phrases, `!` above. */
function parse(tokens: string[]): Node {
  let at = 0;
  const or = (): Node => {
    const parts = [and()];
    while (tokens[at] === '|') {
      at += 1;
      parts.push(and());
    }
    return parts.length === 1 ? parts[0]! : { kind: 'or', parts };
  };
  const and = (): Node => {
    const parts = [unary()];
    while (tokens[at] === '&') {
      at += 1;
      parts.push(unary());
    }
    return parts.length === 1 ? parts[0]! : { kind: 'and', parts };
  };
  const unary = (): Node => {
    const token = tokens[at++];
    if (token === '!') {
      unary();
      return { kind: 'not' };
    }
    if (token === '(') {
      const inner = or();
      at += 1; // ')'
      return inner;
    }
    if (token === undefined || !token.startsWith("'")) throw new Error(`tsquery: ${token}`);
    return { kind: 'lexeme', text: token.slice(1) };
  };
  return or();
}

/**
 * Lexemes at least one of which every document matching `node` has, the fewest there are (and
 * of those, the longest words: rarer as a rule); null when no such set exists (a negation).
 */
function required(node: Node): string[] | null {
  switch (node.kind) {
    case 'lexeme':
      return [node.text];
    case 'not':
      return null;
    case 'or': {
      const sets = node.parts.map(required);
      if (sets.some((set) => set === null)) return null;
      return [...new Set(sets.flatMap((set) => set!))];
    }
    case 'and': {
      const sets = node.parts.map(required).filter((set): set is string[] => set !== null);
      if (sets.length === 0) return null;
      const longest = (set: string[]) => Math.max(...set.map((lexeme) => lexeme.length));
      return sets.sort((a, b) => a.length - b.length || longest(b) - longest(a))[0]!;
    }
  }
}

/**
 * The words (lexemes of listings.search, hence tokens of listings.match) one of which every
 * listing that `q`'s tsquery (as PostgreSQL prints websearch_to_tsquery('english', q)) matches
 * has; null when none is required of every match (`-leather` alone), or there is no word.
 */
export function requiredWords(tsquery: string): string[] | null {
  if (tsquery.trim() === '') return null;
  return required(parse(tokenize(tsquery)));
}

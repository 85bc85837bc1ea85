/**
 * The one redactor of everything a request can put into a log: the stdout log's URLs and lines
 * (src/lib/logging.ts) and the request log's path and error message
 * (src/request-logs/request-logs-plugin.ts), hence the portal's Request logs page and `admin app
 * logs`, which show what was stored.
 *
 * - A credential of ours, wherever it appears (a path segment, a query or `;matrix` value or
 *   name, a field name quoted in an error message, percent-encoded or not), keeps its prefix
 *   and loses the rest: `svc_live_REDACTED` still says what was pasted.
 * - A query or `;matrix` parameter whose name looks secret (after decoding: `%74oken` is
 *   `token`) has its value replaced, whatever the value: `?api_key=…`, `?pwd=…`, `?sig=…`.
 * - In a text: a database error's statement values and a constraint violation's key values.
 *
 * - In a JSON body (the request log's bodies, `redactJson`): the value of a member whose name
 *   looks secret (`password`, `secret`, `client_secret`, `access_token`…), whatever its type,
 *   and credentials in any string, `\u` escapes read as what they say.
 *
 * What is secret is decided on what a reader would take the text to say (issue #43 item 5):
 * names and values are unfolded first (see `unfold`): percent-encoding and HTML character
 * references undone up to three times over (`svc%255F…`, `&#95;`, `&lowbar;`), Unicode
 * compatibility forms folded (NFKC: a full-width `＿` or `ｐ`), invisible characters dropped,
 * and Cyrillic and Greek letters that look Latin read as Latin (`tоken` with a Cyrillic о,
 * UTS #39's confusables for these scripts). What is kept of a text is the text as sent unless a
 * secret was found in it.
 */
import { PREFIX, STANDARD_WEBHOOK_PREFIX } from './secrets.ts';

export const REDACTED = 'REDACTED';

/** Parameter names whose values are never written: any name containing one of these. */
const SECRET_NAME =
  /token|key|secret|code|pass|pwd|auth|session|sig|cookie|credential|jwt|bearer|verifier/i;

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/**
 * Our credentials by prefix (src/lib/secrets.ts PREFIX), anywhere in a text: url-safe ones, and
 * webhook secrets (`svc_whsec_…`, and `whsec_…`, the Standard Webhooks form of one or `listen`'s),
 * whose base64 has `+`, `/` and `=` too (older endpoint secrets are base64url: `-` and `_`).
 */
const WEBHOOK_PREFIXES = [PREFIX.webhookSecret, STANDARD_WEBHOOK_PREFIX];
const urlSafe = Object.values(PREFIX).filter((prefix) => prefix !== PREFIX.webhookSecret);
const CREDENTIAL = new RegExp(
  `(${urlSafe.map(escape).join('|')})[A-Za-z0-9_-]+|(${WEBHOOK_PREFIXES.map(escape).join('|')})[A-Za-z0-9+/_-]+=*`,
  'g',
);
const hasCredential = (text: string) =>
  text.includes('svc_') || text.includes(STANDARD_WEBHOOK_PREFIX);
/** Drizzle's DrizzleQueryError message: "Failed query: <sql>\nparams: <values>". */
const DRIZZLE_PARAMS = /(\n\s*params: )[^\n]*/g;
/** PostgreSQL's detail of a unique or foreign-key violation: "Key (col)=(value) ...". */
const KEY_VALUES = /(Key \([^)]*\)=\()[^)]*(\))/g;

/** Credentials in a text lose their secret part (cheap when there is none: one search). */
export function redactCredentials(text: string): string {
  return hasCredential(text)
    ? text.replace(
        CREDENTIAL,
        (_all, prefix?: string, whsec?: string) => `${prefix ?? whsec}${REDACTED}`,
      )
    : text;
}

/** A message or an error's text: credentials, statement values, constraint key values. */
export function redactText(text: string): string {
  const redacted = redactCredentials(
    text.replace(DRIZZLE_PARAMS, `$1${REDACTED}`).replace(KEY_VALUES, `$1${REDACTED}$2`),
  );
  if (!FOLDABLE.test(redacted)) return redacted;
  // A credential that shows only once unfolded: the unfolded text, redacted, is what is kept.
  const seen = unfold(redacted);
  const deep = redactCredentials(seen);
  return deep === seen ? redacted : deep;
}

/** Rounds of decoding before a name or value is judged: `%25255F` is three. */
const MAX_ROUNDS = 3;
/** Text that unfolding could change: an escape of either kind, or any non-ASCII character. */
const FOLDABLE = /[%&+\u0080-\uffff]/;
const PERCENT_RUN = /(?:%[0-9a-f]{2})+/gi;
const REFERENCE = /&(?:#(\d{1,7});?|#x([0-9a-f]{1,6});?|([a-z]{2,10});)/gi;
/** Named references (WHATWG HTML) of the characters our prefixes and names are made of. */
const NAMED: Record<string, string> = {
  lowbar: '_',
  underbar: '_',
  percnt: '%',
  amp: '&',
  num: '#',
  semi: ';',
  equals: '=',
  hyphen: '-',
  dash: '-',
  period: '.',
  plus: '+',
  sol: '/',
};
/** Characters that render as nothing (zero-width spaces and joiners, soft hyphens, BOM). */
const INVISIBLE = /\p{Default_Ignorable_Code_Point}/gu;
const NON_ASCII = /[^\u0000-\u007f]/;
/** Cyrillic and Greek letters that look like Latin ones (UTS #39 confusables.txt, abridged). */
const LOOKALIKES: Record<string, string> = Object.fromEntries(
  [
    // Cyrillic
    'аa вb сc еe ёe һh іi їi јj кk мm нh оo рp ԛq ѕs тt уy хx ԝw ѡw ԁd ɡg',
    'АA ВB СC ЕE ЁE НH ІI ЇI ЈJ КK МM ОO РP ЅS ТT ХX УY ҮY ԚQ ԜW',
    // Greek
    'αa βb γy εe ιi κk νv οo ρp τt υu χx ωw',
    'ΑA ΒB ΕE ΖZ ΗH ΙI ΚK ΜM ΝN ΟO ΡP ΤT ΥY ΧX',
    // Latin letters that read as others
    'ıi ɑa',
  ]
    .join(' ')
    .split(' ')
    .map((pair) => [pair[0]!, pair[1]!]),
);
const LOOKALIKE = new RegExp(`[${Object.keys(LOOKALIKES).join('')}]`, 'g');

function percentDecode(text: string): string {
  // Run by run, so that one malformed escape leaves the others decoded.
  return text.replace(PERCENT_RUN, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run;
    }
  });
}

function referenceDecode(text: string): string {
  return text.replace(REFERENCE, (reference, decimal?: string, hex?: string, name?: string) => {
    if (name !== undefined) return NAMED[name.toLowerCase()] ?? reference;
    const code = decimal !== undefined ? Number(decimal) : parseInt(hex!, 16);
    // No surrogate halves or values past Unicode: they would make the text unencodable.
    if (code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return reference;
    return String.fromCodePoint(code);
  });
}

function foldCharacters(text: string): string {
  if (!NON_ASCII.test(text)) return text;
  return text
    .normalize('NFKC')
    .replace(INVISIBLE, '')
    .replace(LOOKALIKE, (c) => LOOKALIKES[c]!);
}

/**
 * A name or value as a reader takes it: decoded (percent-encoding, `+` as a space, character
 * references, compatibility forms, look-alike letters) until nothing changes, at most
 * MAX_ROUNDS times. Used to judge, never written down.
 */
function unfold(raw: string): string {
  let text = raw;
  for (let round = 0; round < MAX_ROUNDS && FOLDABLE.test(text); round++) {
    const next = foldCharacters(referenceDecode(percentDecode(text.replace(/\+/g, ' '))));
    if (next === text) break;
    text = next;
  }
  return text;
}

/**
 * A path segment or parameter value: unchanged unless it holds a credential, raw or encoded.
 * First as percent-decoding alone reads it, since unfolding reads `+` as a space and a webhook
 * secret's base64 has `+` (`svc_whsec_ab+cd…` would be cut at its first `+`); then unfolded.
 */
function redactValue(raw: string): string {
  let literal = raw;
  for (let round = 0; round < MAX_ROUNDS && literal.includes('%'); round++) {
    const next = percentDecode(literal);
    if (next === literal) break;
    literal = next;
  }
  const cut = hasCredential(literal) ? redactCredentials(literal) : literal;
  return redactUnfolded(cut === literal ? raw : escapeAll(cut, encodeURIComponent));
}

function redactUnfolded(raw: string): string {
  const seen = unfold(raw);
  if (!hasCredential(seen)) return raw;
  const redacted = redactCredentials(seen);
  return redacted === seen ? raw : escapeAll(redacted, encodeURIComponent);
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** U+0000 (which PostgreSQL's text and jsonb refuse) or an unpaired surrogate (no UTF-8). */
const UNSTORABLE = new RegExp(`\\u0000|${LONE_SURROGATE.source}`, 'g');

/**
 * A text a log stores, made storable: U+0000 and unpaired surrogates become U+FFFD. A request
 * can put either into what is logged of it (`?a%00b=1` is quoted by its error), and one such
 * text would fail the request log's whole batch, other apps' entries with it.
 */
export function storableText(text: string): string {
  return text.replace(UNSTORABLE, '\ufffd');
}

/** Percent-encoded for a URL; a lone surrogate (which has no UTF-8) becomes U+FFFD first. */
function escapeAll(text: string, encode: (text: string) => string): string {
  return encode(text.replace(LONE_SURROGATE, '\ufffd'));
}

/**
 * `name=value` (or a bare `value`) of a query or a `;matrix` list. The name is redacted as a
 * value is (a credential pasted as a name, `?svc_live_…=1` or `?q[svc_live_…]=x`, encoded or
 * not), and judged as it reads: a secret-looking name loses its value.
 */
function redactParameter(part: string): string {
  const eq = part.indexOf('=');
  if (eq === -1) return redactValue(part);
  const name = part.slice(0, eq);
  const shown = redactValue(name);
  if (SECRET_NAME.test(unfold(name))) return `${shown}=${REDACTED}`;
  return `${shown}=${redactValue(part.slice(eq + 1))}`;
}

/** A path segment with its `;matrix` parameters, if any. */
function redactSegment(segment: string): string {
  const [head = '', ...parameters] = segment.split(';');
  return [redactValue(head), ...parameters.map(redactParameter)].join(';');
}

/**
 * A request's URL (path and query) as it may be written down: the same characters except the
 * values redacted as above.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  // A webhook secret's base64 may hold `/`: cut across the segments before the split.
  const rawPath = q === -1 ? url : url.slice(0, q);
  const whole = hasCredential(rawPath) ? redactCredentials(rawPath) : rawPath;
  const path = whole.split('/').map(redactSegment).join('/');
  if (q === -1) return redactAcross(path);
  return redactAcross(
    `${path}?${url
      .slice(q + 1)
      .split('&')
      .map(redactParameter)
      .join('&')}`,
  );
}

/** A character reference, whose `&` and `;` are also the separators the URL was split at. */
const SPLIT_REFERENCE = /&(?:#|[a-z]{2,10};)/i;

/**
 * A credential cut by the split above: `?q=svc&#95;live&#95;…` is three query parameters, none
 * a credential alone. The whole URL is unfolded and, if that shows one, written unfolded.
 */
function redactAcross(url: string): string {
  if (!SPLIT_REFERENCE.test(url)) return url;
  const seen = unfold(url);
  const redacted = redactCredentials(seen);
  return redacted === seen ? url : escapeAll(redacted, encodeURI);
}

/**
 * Member names SECRET_NAME matches that name no secret in our bodies: the error envelope's
 * `code`, an idempotency key (a client's own label), OAuth's `token_type`, and timestamps, ids
 * and counts (`previous_secret_expires_at`, `key_id`). test/request-logs/bodies.test.ts checks the
 * document's every member name against SECRET_NAME and this list.
 */
const PLAIN_MEMBER = /^(?:code|idempotency_key|token_type(?:_hint)?)$|_(?:at|id|ids|count)$/i;

/** Whether a JSON member of this name has its value redacted. */
export function isSecretMember(name: string): boolean {
  const seen = unfold(name);
  return SECRET_NAME.test(seen) && !PLAIN_MEMBER.test(seen);
}

/** A JSON string token; the last one of a cut text may lack its closing quote. */
const JSON_STRING = /"(?:[^"\\]|\\.)*(?:"|\\?$)/g;
const MEMBER_COLON = /\s*:\s*/y;
/** A value that is not a string: a number, true, false or null (possibly cut). */
const JSON_SCALAR = /[-0-9.eE+a-z]+/y;
const REDACTED_JSON = `"${REDACTED}"`;
/**
 * What a string token must hold to hold a credential in any form unfold reads: our prefix as it
 * is, or something unfolding could change (an escape of either kind, a JSON `\\`, a non-ASCII
 * character). Most tokens, member names and plain values alike, have none and are not unfolded.
 */
const MAY_HOLD_CREDENTIAL = /svc_|[%&\\\u0080-\uffff]/;

/** A string token's text as JSON reads it (a cut one read as if closed). */
function jsonStringValue(token: string): string | undefined {
  const closed = token.length > 1 && token.endsWith('"') && !/(?<!\\)(?:\\\\)*\\"$/.test(token);
  try {
    return JSON.parse(closed ? token : `${token.replace(/\\$/, '')}"`) as string;
  } catch {
    return undefined;
  }
}

/**
 * A JSON text (possibly cut short) as it may be stored: the same text but the values of secret
 * members (isSecretMember) as `"REDACTED"`, and string tokens holding a credential (raw, `\u`
 * escaped or otherwise folded) redacted as redactText does. Tokens are read in order, so a
 * quote inside a string is never taken for the start of one; work is one pass over the text.
 */
export function redactJson(text: string): string {
  let out = '';
  let from = 0;
  JSON_STRING.lastIndex = 0;
  for (let match = JSON_STRING.exec(text); match; match = JSON_STRING.exec(text)) {
    const token = match[0];
    const end = match.index + token.length;
    MEMBER_COLON.lastIndex = end;
    if (MEMBER_COLON.test(text)) {
      // A member's name: its value may go whole.
      const name = token.includes('\\') ? (jsonStringValue(token) ?? token) : token.slice(1, -1);
      if (isSecretMember(name)) {
        const at = MEMBER_COLON.lastIndex;
        let valueEnd: number;
        if (text[at] === '"') {
          JSON_STRING.lastIndex = at;
          const value = JSON_STRING.exec(text);
          valueEnd = value && value.index === at ? at + value[0].length : text.length;
        } else if (text[at] === '{' || text[at] === '[') {
          valueEnd = endOfValue(text, at);
        } else {
          JSON_SCALAR.lastIndex = at;
          valueEnd = JSON_SCALAR.test(text) ? JSON_SCALAR.lastIndex : at;
          if (valueEnd === at) continue; // nothing after the colon: the text was cut there
        }
        out += text.slice(from, at) + REDACTED_JSON;
        from = valueEnd;
        JSON_STRING.lastIndex = valueEnd;
        continue;
      }
    }
    // Any other string, a name or a value: a credential in it, as JSON reads it, is redacted.
    if (!MAY_HOLD_CREDENTIAL.test(token)) continue;
    // One cut inside an escape is read as its raw characters.
    const value = jsonStringValue(token) ?? token.slice(1);
    const redacted = redactText(value);
    if (redacted === value) continue;
    out += text.slice(from, match.index) + JSON.stringify(redacted);
    from = end;
  }
  return from === 0 ? text : out + text.slice(from);
}

/** Where the object or array starting at `at` ends (its strings skipped), or the text's end. */
function endOfValue(text: string, at: number): number {
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      JSON_STRING.lastIndex = i;
      const string = JSON_STRING.exec(text);
      if (!string || string.index !== i) return text.length;
      i += string[0].length - 1;
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return text.length;
}

/**
 * Emits constants.ts: the document's closed word lists as plain values, so no code writes them
 * by hand. Imports nothing, so any layer (and the SDK) may use it.
 *   <SCHEMA_NAME>_VALUES  each string-enum component schema's values, in document order
 *   SCOPES, Scope         the OAuth 2.0 scopes of the oauth2 security scheme, in document order
 *   SCOPE_DESCRIPTIONS    each scope's description (developer words: docs, portal)
 *   SCOPE_CONSENT_TEXT    each scope in the end user's words, from the flow's `x-consent-text`
 *   KEY_SCOPES, KeyScope  the scopes an API key may carry: the OAuth scopes, then the key-only
 *                         ones of a security scheme's `x-key-scopes` (never requestable by OAuth)
 *   KEY_SCOPE_DESCRIPTIONS each key scope's description
 *   DOCUMENT_DIGEST       a digest of the whole document: part of every ETag, so a deployment
 *                         whose contract changed never answers 304 to a representation it no
 *                         longer sends
 */
import { createHash } from 'node:crypto';
import { GenerateError, isObject, type JsonObject, objectAt, pointer, stringAt } from './json.ts';
import { array, jsonCode, object, print, type Code } from './printer.ts';

export function generateConstants(doc: JsonObject): string {
  const components = isObject(doc.components) ? doc.components : {};
  return [...enumConstants(components), ...scopeConstants(components), digestConstant(doc)].join(
    '\n',
  );
}

function digestConstant(doc: JsonObject): string {
  const digest = createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 16);
  const comment = '/** A digest of the whole document (part of every ETag). */\n';
  return comment + constDeclaration('DOCUMENT_DIGEST', jsonCode(digest), ';');
}

/** `ListingStatus` -> `LISTING_STATUS_VALUES`; `OAuthErrorCode` -> `OAUTH_ERROR_CODE_VALUES`. */
function enumConstantName(schemaName: string): string {
  return `${schemaName.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}_VALUES`;
}

function enumConstants(components: JsonObject): string[] {
  const schemas =
    components.schemas === undefined ? {} : objectAt(components.schemas, '#/components/schemas');
  const declarations: string[] = [];
  for (const [name, schema] of Object.entries(schemas)) {
    // Only whole string enums: a nullable or mixed enum is not a list of words.
    if (!isObject(schema) || !Array.isArray(schema.enum) || schema.enum.length === 0) continue;
    if (!schema.enum.every((value) => typeof value === 'string')) continue;
    const comment = `/** Values of components.schemas.${name}, in document order. */\n`;
    const values = array(schema.enum.map(jsonCode));
    declarations.push(comment + constDeclaration(enumConstantName(name), values, ' as const;'));
  }
  return declarations;
}

function scopeConstants(components: JsonObject): string[] {
  const schemesAt = '#/components/securitySchemes';
  const schemes =
    components.securitySchemes === undefined ? {} : objectAt(components.securitySchemes, schemesAt);
  const oauth2 = Object.entries(schemes).filter(
    ([, scheme]) => isObject(scheme) && scheme.type === 'oauth2',
  );
  if (oauth2.length === 0) return [];
  const [first, ...others] = oauth2;
  if (!first || others.length > 0) {
    // One scope list per service: two schemes could disagree on what a scope means.
    throw new GenerateError(schemesAt, 'only one oauth2 security scheme is supported');
  }
  const [schemeName, scheme] = first;
  const at = pointer(schemesAt, schemeName);
  const flows = objectAt(objectAt(scheme, at).flows, pointer(at, 'flows'));
  const descriptions = new Map<string, string>();
  const consent = new Map<string, string>();
  for (const [flowName, flowValue] of Object.entries(flows)) {
    const flowAt = pointer(at, 'flows', flowName);
    const flow = objectAt(flowValue, flowAt);
    const scopes = objectAt(flow.scopes, pointer(flowAt, 'scopes'));
    for (const [scope, description] of Object.entries(scopes)) {
      const scopeAt = pointer(flowAt, 'scopes', scope);
      addOnce(descriptions, scope, stringAt(description, scopeAt), scopeAt);
    }
    if (flow['x-consent-text'] !== undefined) {
      const textAt = pointer(flowAt, 'x-consent-text');
      const texts = objectAt(flow['x-consent-text'], textAt);
      for (const scope of Object.keys(scopes)) {
        addOnce(
          consent,
          scope,
          stringAt(texts[scope], pointer(textAt, scope)),
          pointer(textAt, scope),
        );
      }
      const extra = Object.keys(texts).find((scope) => !(scope in scopes));
      if (extra !== undefined) {
        throw new GenerateError(pointer(textAt, extra), `'${extra}' is not a scope of this flow`);
      }
    }
  }
  if (descriptions.size === 0) return [];
  if (consent.size > 0 && consent.size !== descriptions.size) {
    throw new GenerateError(at, 'x-consent-text must be given for every scope or for none');
  }
  const scopeMap = (map: Map<string, string>): Code =>
    object([...map].map(([scope, text]) => [scope, jsonCode(text)]));
  const satisfies = ' as const satisfies Record<Scope, string>;';
  const declarations = [
    `/** The OAuth 2.0 scopes of ${at}, in document order. */\n` +
      constDeclaration(
        'SCOPES',
        array([...descriptions.keys()].map((scope) => jsonCode(scope))),
        ' as const;',
      ) +
      'export type Scope = (typeof SCOPES)[number];\n',
    "/** What each scope allows, in the document's words. */\n" +
      constDeclaration('SCOPE_DESCRIPTIONS', scopeMap(descriptions), satisfies),
  ];
  if (consent.size > 0) {
    declarations.push(
      "/** What each scope allows, in the end user's words (x-consent-text): the consent page. */\n" +
        constDeclaration('SCOPE_CONSENT_TEXT', scopeMap(consent), satisfies),
    );
  }
  declarations.push(...keyScopeConstants(schemes, descriptions));
  return declarations;
}

/**
 * Scopes only API keys carry (`x-key-scopes` on a security scheme: scope -> description), after
 * the OAuth scopes, which keys carry too. A key scope that is also an OAuth scope is an error:
 * OAuth clients must never be able to request it.
 */
function keyScopeConstants(schemes: JsonObject, oauth: Map<string, string>): string[] {
  const keyOnly = new Map<string, string>();
  for (const [name, scheme] of Object.entries(schemes)) {
    if (!isObject(scheme) || scheme['x-key-scopes'] === undefined) continue;
    const at = pointer('#/components/securitySchemes', name, 'x-key-scopes');
    for (const [scope, description] of Object.entries(objectAt(scheme['x-key-scopes'], at))) {
      if (oauth.has(scope))
        throw new GenerateError(pointer(at, scope), `'${scope}' is an OAuth scope already`);
      addOnce(keyOnly, scope, stringAt(description, pointer(at, scope)), pointer(at, scope));
    }
  }
  const all = new Map([...oauth, ...keyOnly]);
  const map = object([...all].map(([scope, text]) => [scope, jsonCode(text)]));
  return [
    '/** The scopes an API key may carry: the OAuth scopes, then the key-only ones. */\n' +
      constDeclaration('KEY_SCOPES', array([...all.keys()].map((s) => jsonCode(s))), ' as const;') +
      'export type KeyScope = (typeof KEY_SCOPES)[number];\n',
    "/** What each key scope allows, in the document's words. */\n" +
      constDeclaration(
        'KEY_SCOPE_DESCRIPTIONS',
        map,
        ' as const satisfies Record<KeyScope, string>;',
      ),
  ];
}

function addOnce(map: Map<string, string>, key: string, value: string, at: string): void {
  if (map.has(key) && map.get(key) !== value) {
    throw new GenerateError(at, `'${key}' is described differently in another flow`);
  }
  map.set(key, value);
}

function constDeclaration(name: string, code: Code, suffix: string): string {
  const prefix = `export const ${name} = `;
  return `${prefix}${print(code, '', prefix.length, suffix.length)}${suffix}\n`;
}

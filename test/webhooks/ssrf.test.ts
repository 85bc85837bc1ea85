/**
 * SSRF protection and endpoint rules (docs/webhooks.md, "Endpoints"), with
 * WEBHOOK_ALLOW_PRIVATE_NETWORKS unset: internal destinations are refused at creation and again at
 * delivery, and the connection goes to the address that was checked (no DNS rebinding). Live
 * endpoints need an approved app. The address tables cover the IANA special-purpose registries and
 * every IPv6 form that embeds an IPv4 address (issue #13), at creation and at delivery.
 */
import { createServer } from 'node:https';
import { readFileSync } from 'node:fs';
import { isIP, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { webhookEndpoints } from '../../src/db/outbox-schema.ts';
import { sendWebhook } from '../../src/webhooks/sender.ts';
import {
  checkDestination,
  isInternalAddress,
  parseWebhookUrl,
  REFUSED_DESTINATION,
  UnsafeDestinationError,
} from '../../src/webhooks/ssrf.ts';
import { createDeveloper } from '../helpers/accounts.ts';
import { buildLoggedApp } from '../hardening/support.ts';
import { startReceiver } from './support.ts';
import { waitUntil } from '../helpers/wait.ts';

const { app, logs } = await buildLoggedApp(t, { WEBHOOK_RETRY_SCHEDULE: '3600' });
/** Every refused destination, in the same words (no DNS oracle: issue #32). */
const REFUSED = `The URL ${REFUSED_DESTINATION}.`;
/**
 * Creates a sandbox endpoint of `dev`'s app and disables it at once: this file accepts more
 * public URLs than an app's 16 active endpoints (docs/webhooks.md), and a disabled one does not
 * count.
 */
async function createAndPark(url: string) {
  const created = await app.services.endpoints.create({ appId: dev.appId, env: 'sandbox', url });
  await app.services.endpoints.disable(created.id);
  return created;
}

/** Why the last endpoint was refused, as the operator's log says. */
const lastRefusal = () =>
  logs()
    .filter((l) => l.msg === 'webhook endpoint refused')
    .at(-1)?.refused as string | undefined;
const receiver = await startReceiver(t);
const dev = await createDeveloper(app);

const VALIDATION = { code: 'validation_error', statusCode: 400, details: [{ path: '/url' }] };

t.test('internal or malformed destinations are refused at creation', async (t) => {
  t.equal(
    app.config.webhookAllowPrivateNetworks,
    false,
    'private networks are refused in this file',
  );
  const malformed: [string, RegExp][] = [
    ['http://example.com/hook', /https/],
    ['ftp://example.com/hook', /https/],
    ['not a url', /absolute https URL/],
    ['https://user:secret@example.com/hook', /credentials/],
    ['https://example.com/hook#part', /fragment/],
  ];
  for (const [url, message] of malformed) {
    await t.rejects(
      app.services.endpoints.create({ appId: dev.appId, env: 'sandbox', url }),
      { ...VALIDATION, message },
      url,
    );
  }
  // Internal names and addresses, and names that do not resolve: one message for all, which
  // tells nothing of what a name resolves to, or whether it does.
  const refused = [
    `https://localhost:${receiver.port}/hook`,
    'https://127.0.0.1/hook',
    'https://127.1.2.3/hook',
    'https://0.0.0.0/hook',
    'https://10.1.2.3/hook',
    'https://172.16.0.1/hook',
    'https://192.168.1.1/hook',
    'https://100.64.0.1/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://224.0.0.1/hook',
    'https://255.255.255.255/hook',
    'https://[::1]/hook',
    'https://[::ffff:127.0.0.1]/hook',
    'https://[fe80::1]/hook',
    'https://[fd00::1]/hook',
    'https://[ff02::1]/hook',
    'https://no-such-host.invalid/hook',
  ];
  for (const url of refused) {
    await t.rejects(
      app.services.endpoints.create({ appId: dev.appId, env: 'sandbox', url }),
      { ...VALIDATION, message: REFUSED, details: [{ path: '/url', message: REFUSED }] },
      url,
    );
  }
  t.notMatch(REFUSED, /127\.0\.0\.1|ENOTFOUND|resolves to|does not resolve/);
  // The operator's log keeps the detail.
  const explained = logs().filter((l) => l.msg === 'webhook endpoint refused');
  t.equal(explained.length, refused.length, 'each refusal is logged');
  t.match(explained[0], { refused: /^host localhost resolves to 127\.0\.0\.1/ });
  t.match(explained.at(-1), { refused: /^host no-such-host\.invalid does not resolve/ });
  const count = await app.db.$count(webhookEndpoints);
  t.equal(count, 0, 'nothing was stored');
});

t.test('a public address is accepted; the secret is shown once', async (t) => {
  const created = await app.services.endpoints.create({
    appId: dev.appId,
    env: 'sandbox',
    url: 'https://93.184.215.14/hook',
  });
  t.match(created, {
    id: /^[0-9a-f-]{36}$/,
    url: 'https://93.184.215.14/hook',
    env: 'sandbox',
    secret: /^svc_whsec_[A-Za-z0-9+/]{43}=$/,
  });
  const shown = await app.services.endpoints.show(created.id);
  t.strictSame(Object.keys(shown).sort(), [
    'active',
    'env',
    'id',
    'last_error',
    'last_failure_at',
    'url',
  ]);
  t.notOk(JSON.stringify(shown).includes(created.secret), 'show never returns the secret');
});

t.test('live endpoints need a production-approved app', async (t) => {
  const other = await createDeveloper(app);
  const input = { appId: other.appId, env: 'live', url: 'https://93.184.215.14/live' };
  await t.rejects(app.services.endpoints.create(input), {
    code: 'forbidden',
    statusCode: 403,
    message: /production-approved/,
  });
  await t.rejects(app.services.endpoints.create({ ...input, env: 'staging' }), {
    code: 'validation_error',
    details: [{ path: '/env' }],
  });
  await app.services.apps.approve(other.appId);
  t.match(await app.services.endpoints.create(input), { env: 'live' });
});

t.test('a host that resolves to an internal address is refused again at delivery', async (t) => {
  // Stored directly, as if DNS had answered a public address at creation and changed since.
  const [endpoint] = await app.db
    .insert(webhookEndpoints)
    .values({
      appId: dev.appId,
      environment: 'sandbox',
      url: receiver.url('/rebound', 'localhost'),
      secret: 'svc_whsec_test',
    })
    .returning();
  const { delivery_id } = await app.services.endpoints.ping(endpoint!.id);
  const delivery = await waitUntil('the refused attempt', async () =>
    (await app.services.endpoints.recentDeliveries(endpoint!.id)).deliveries.find(
      (d) => d.id === delivery_id && d.attempts === 1 && d.last_error,
    ),
  );
  t.match(delivery, {
    status: 'pending',
    attempts: 1,
    last_response_code: null,
    last_error: `refused: ${REFUSED_DESTINATION}`,
  });
  await waitUntil('the detail in the log', () =>
    logs().find((l) => l.msg === 'webhook refused' && l.delivery === delivery_id),
  );
  t.match(
    logs().find((l) => l.msg === 'webhook refused' && l.delivery === delivery_id),
    { refused: /^host localhost resolves to 127\.0\.0\.1/ },
    'the operator log says why',
  );
  t.match(await app.services.endpoints.show(endpoint!.id), {
    last_error: /^refused: /,
    last_failure_at: /Z$/,
  });
  t.equal(receiver.received.length, 0, 'nothing reached the receiver');
});

t.test('address checks', async (t) => {
  for (const ip of [
    '127.0.0.1',
    '10.0.0.1',
    '169.254.1.1',
    '192.168.0.1',
    '172.31.255.255',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    '::ffff:10.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::a00:1',
    '2001:db8::1',
    'not-an-ip',
  ]) {
    t.ok(isInternalAddress(ip), `${ip} is internal`);
  }
  for (const ip of [
    '93.184.215.14',
    '8.8.8.8',
    '172.32.0.1',
    '2606:4700::1111',
    '::ffff:8.8.8.8',
  ]) {
    t.notOk(isInternalAddress(ip), `${ip} is public`);
  }
  // one internal answer among several is enough to refuse
  const resolver = async () => [
    { address: '93.184.215.14', family: 4 },
    { address: '10.0.0.7', family: 4 },
  ];
  await t.rejects(
    checkDestination(parseWebhookUrl('https://mixed.example/hook'), {
      allowPrivateNetworks: false,
      resolver,
    }),
    UnsafeDestinationError,
  );
  t.match(
    await checkDestination(parseWebhookUrl('https://mixed.example/hook'), {
      allowPrivateNetworks: true,
      resolver,
    }),
    { address: '93.184.215.14' },
  );
});

/**
 * [address, refused, what it is]: every range of the IANA IPv4 and IPv6 Special-Purpose Address
 * Registries (first and last address, or a representative), the IPv6 space outside global
 * unicast, boundaries, and public addresses. Globally reachable anycast entries inside a refused
 * block are refused with it (ssrf.ts says why).
 */
const IPV4_TABLE: [string, boolean, string][] = [
  ['0.0.0.0', true, 'this host on this network'],
  ['0.255.255.255', true, 'this network 0.0.0.0/8'],
  ['10.0.0.0', true, 'private 10/8'],
  ['10.255.255.255', true, 'private 10/8'],
  ['100.64.0.0', true, 'shared address space 100.64/10'],
  ['100.127.255.255', true, 'shared address space 100.64/10'],
  ['127.0.0.1', true, 'loopback'],
  ['127.255.255.255', true, 'loopback 127/8'],
  ['169.254.0.0', true, 'link-local'],
  ['169.254.169.254', true, 'cloud metadata'],
  ['169.254.255.255', true, 'link-local'],
  ['172.16.0.0', true, 'private 172.16/12'],
  ['172.31.255.255', true, 'private 172.16/12'],
  ['192.0.0.0', true, 'IETF protocol assignments 192.0.0/24, DS-Lite 192.0.0/29'],
  ['192.0.0.8', true, 'IPv4 dummy address'],
  ['192.0.0.9', true, 'PCP anycast (refused with 192.0.0/24)'],
  ['192.0.0.10', true, 'TURN anycast (refused with 192.0.0/24)'],
  ['192.0.0.170', true, 'NAT64/DNS64 discovery'],
  ['192.0.0.171', true, 'NAT64/DNS64 discovery'],
  ['192.0.0.255', true, 'IETF protocol assignments'],
  ['192.0.2.0', true, 'TEST-NET-1'],
  ['192.0.2.255', true, 'TEST-NET-1'],
  ['192.88.99.0', true, '6to4 relay anycast (deprecated)'],
  ['192.88.99.2', true, '6a44 relay anycast'],
  ['192.168.0.0', true, 'private 192.168/16'],
  ['192.168.255.255', true, 'private 192.168/16'],
  ['198.18.0.0', true, 'benchmarking 198.18/15'],
  ['198.19.255.255', true, 'benchmarking 198.18/15'],
  ['198.51.100.7', true, 'TEST-NET-2'],
  ['203.0.113.255', true, 'TEST-NET-3'],
  ['224.0.0.1', true, 'multicast'],
  ['239.255.255.255', true, 'multicast'],
  ['240.0.0.0', true, 'reserved 240/4'],
  ['255.255.255.254', true, 'reserved 240/4'],
  ['255.255.255.255', true, 'limited broadcast'],
  ['192.31.196.1', false, 'AS112-v4 (globally reachable)'],
  ['192.52.193.1', false, 'AMT (globally reachable)'],
  ['192.175.48.1', false, 'AS112 direct delegation (globally reachable)'],
  ['100.63.255.255', false, 'just below 100.64/10'],
  ['100.128.0.0', false, 'just above 100.64/10'],
  ['172.15.255.255', false, 'just below 172.16/12'],
  ['172.32.0.0', false, 'just above 172.16/12'],
  ['198.20.0.0', false, 'just above 198.18/15'],
  ['8.8.8.8', false, 'public'],
  ['1.1.1.1', false, 'public'],
  ['93.184.215.14', false, 'public'],
  ['223.255.255.255', false, 'public, just below multicast'],
];
const IPV6_TABLE: [string, boolean, string][] = [
  ['::', true, 'unspecified'],
  ['::1', true, 'loopback'],
  ['0:0:0:0:0:0:0:1', true, 'loopback, written in full'],
  ['::ffff:127.0.0.1', true, 'IPv4-mapped loopback'],
  ['::ffff:a9fe:a9fe', true, 'IPv4-mapped metadata, in hex'],
  ['::ffff:8.8.8.8', false, 'IPv4-mapped public'],
  ['64:ff9b::8.8.8.8', false, 'NAT64 well-known prefix, public IPv4 (globally reachable)'],
  ['64:ff9b::7f00:1', true, 'NAT64 well-known prefix, loopback IPv4'],
  ['64:ff9b:1::', true, 'local-use NAT64 64:ff9b:1::/48'],
  ['64:ff9b:1:ffff:ffff:ffff:ffff:ffff', true, 'local-use NAT64 64:ff9b:1::/48'],
  ['100::', true, 'discard-only 100::/64'],
  ['100::ffff:ffff:ffff:ffff', true, 'discard-only 100::/64'],
  ['100:0:0:1::1', true, 'dummy IPv6 prefix 100:0:0:1::/64'],
  ['2001::', true, 'IETF protocol assignments 2001::/23, Teredo 2001::/32'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', true, 'Teredo (RFC 4380 example)'],
  ['2001:1::1', true, 'PCP anycast (refused with 2001::/23)'],
  ['2001:1::2', true, 'TURN anycast (refused with 2001::/23)'],
  ['2001:1::3', true, 'DNS-SD SRP anycast (refused with 2001::/23)'],
  ['2001:2::1', true, 'benchmarking 2001:2::/48'],
  ['2001:3::1', true, 'AMT (refused with 2001::/23)'],
  ['2001:4:112::1', true, 'AS112-v6 (refused with 2001::/23)'],
  ['2001:10::1', true, 'ORCHID (deprecated)'],
  ['2001:20::1', true, 'ORCHIDv2 (refused with 2001::/23)'],
  ['2001:30::1', true, 'DRIP DETs (refused with 2001::/23)'],
  ['2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', true, 'end of 2001::/23'],
  ['2001:200::1', false, 'just above 2001::/23'],
  ['2001:db8::', true, 'documentation 2001:db8::/32'],
  ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', true, 'documentation 2001:db8::/32'],
  ['2002::', true, '6to4 2002::/16'],
  ['2002:808:808::1', true, '6to4 with a public IPv4 (refused whole)'],
  ['2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true, '6to4 2002::/16'],
  ['2620:4f:8000::1', false, 'AS112 direct delegation (globally reachable)'],
  ['3fff::', true, 'documentation 3fff::/20'],
  ['3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', true, 'documentation 3fff::/20'],
  ['5f00::1', true, 'segment routing SIDs 5f00::/16'],
  ['fc00::', true, 'unique local fc00::/7'],
  ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true, 'unique local fc00::/7'],
  ['fe80::1', true, 'link-local'],
  ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true, 'link-local fe80::/10'],
  ['fec0::1', true, 'site-local (deprecated)'],
  ['ff02::1', true, 'multicast'],
  ['ff0e::1', true, 'global-scope multicast'],
  ['200::1', true, 'reserved, outside 2000::/3'],
  ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', true, 'reserved, just below 2000::/3'],
  ['4000::1', true, 'reserved, just above 2000::/3'],
  ['e000::1', true, 'reserved'],
  ['fe80::1%eth0', true, 'link-local with a zone id'],
  ['2606:4700::1111%eth0', true, 'a zone id: scoped, never global'],
  ['2000::1', false, 'start of global unicast'],
  ['2606:4700::1111', false, 'public'],
  ['2001:4860:4860::8888', false, 'public'],
  ['2A00:1450:4001:800::200E', false, 'public, upper case'],
  ['3fff:1000::1', false, 'just above 3fff::/20'],
];

const hexGroups = (ipv4: string) => {
  const [a, b, c, d] = ipv4.split('.').map(Number) as [number, number, number, number];
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
};
const inverted = (ipv4: string) =>
  ipv4
    .split('.')
    .map((octet) => 255 - Number(octet))
    .join('.');

/** Every IPv6 form that embeds an IPv4 address, and whether a public IPv4 in it is accepted. */
const EMBEDDINGS: [string, (ipv4: string) => string, boolean][] = [
  ['IPv4-mapped', (v4) => `::ffff:${v4}`, true],
  ['IPv4-mapped, hex', (v4) => `::ffff:${hexGroups(v4)}`, true],
  ['IPv4-compatible', (v4) => `::${v4}`, false],
  ['SIIT', (v4) => `::ffff:0:${v4}`, false],
  ['NAT64', (v4) => `64:ff9b::${v4}`, true],
  ['local-use NAT64', (v4) => `64:ff9b:1::${v4}`, false],
  ['6to4', (v4) => `2002:${hexGroups(v4)}::1`, false],
  ['Teredo server', (v4) => `2001:0:${hexGroups(v4)}:8000:63bf:3fff:fdd2`, false],
  ['Teredo client', (v4) => `2001:0:4136:e378:8000:63bf:${hexGroups(inverted(v4))}`, false],
  ['ISATAP', (v4) => `2606:4700:1:2:0:5efe:${v4}`, true],
  ['ISATAP, global', (v4) => `2606:4700:1:2:200:5efe:${hexGroups(v4)}`, true],
];
const INTERNAL_IPV4 = [
  '127.0.0.1',
  '10.0.0.1',
  '172.16.0.1',
  '192.168.1.1',
  '169.254.169.254',
  '100.64.0.1',
  '0.0.0.0',
];
const EMBEDDED_TABLE: [string, boolean, string][] = EMBEDDINGS.flatMap(
  ([form, embed, publicAccepted]) => [
    ...INTERNAL_IPV4.map((v4): [string, boolean, string] => [embed(v4), true, `${form} ${v4}`]),
    [embed('8.8.8.8'), !publicAccepted, `${form} 8.8.8.8`],
  ],
);

const ADDRESS_TABLE = [...IPV4_TABLE, ...IPV6_TABLE, ...EMBEDDED_TABLE];
const literal = (address: string) => (address.includes(':') ? `[${address}]` : address);

t.test(
  'addresses: the IANA special-purpose ranges and every IPv6 form that embeds an IPv4 address',
  async (t) => {
    for (const [address, refused, what] of ADDRESS_TABLE) {
      t.equal(
        isInternalAddress(address),
        refused,
        `${address} (${what}) is ${refused ? 'refused' : 'accepted'}`,
      );
    }
  },
);

t.test('creation refuses the same addresses written in a URL, in any spelling', async (t) => {
  for (const [address, refused, what] of ADDRESS_TABLE) {
    if (address.includes('%')) continue; // a URL cannot carry a zone id
    const url = `https://${literal(address)}/h`;
    const creating = createAndPark(url);
    if (refused)
      await t.rejects(creating, { ...VALIDATION, message: REFUSED }, `${url} (${what}) is refused`);
    // Stored as the WHATWG URL serialization writes it (::ffff:8.8.8.8 is ::ffff:808:808).
    else t.match(await creating, { url: new URL(url).href }, `${url} (${what}) is accepted`);
  }
  // The two URLs of issue #13, with the whole message: the WHATWG parser rewrites the host.
  await t.rejects(
    app.services.endpoints.create({
      appId: dev.appId,
      env: 'sandbox',
      url: 'https://[::127.0.0.1]/h',
    }),
    { ...VALIDATION, message: REFUSED },
  );
  t.equal(
    lastRefusal(),
    'host ::7f00:1 resolves to ::7f00:1, a loopback, private, link-local or otherwise internal address',
  );
  await t.rejects(
    app.services.endpoints.create({
      appId: dev.appId,
      env: 'sandbox',
      url: 'https://[::ffff:0:7f00:1]/h',
    }),
    { ...VALIDATION, message: REFUSED },
  );
  t.equal(
    lastRefusal(),
    'host ::ffff:0:7f00:1 resolves to ::ffff:0:7f00:1, a loopback, private, link-local or otherwise internal address',
  );
  await t.rejects(
    app.services.endpoints.create({
      appId: dev.appId,
      env: 'sandbox',
      url: 'https://[64:ff9b::169.254.169.254]/h',
    }),
    { ...VALIDATION, message: REFUSED },
  );
  t.match(
    lastRefusal(),
    /resolves to 64:ff9b::a9fe:a9fe \(which embeds the IPv4 address 169\.254\.169\.254\), a loopback/,
  );
  await t.rejects(
    app.services.endpoints.create({
      appId: dev.appId,
      env: 'sandbox',
      url: 'https://[fe80::1%25eth0]/h',
    }),
    { ...VALIDATION, message: /absolute https URL/ },
  );
});

t.test('IPv4 shorthands in a URL are normalized by the URL parser, then checked', async (t) => {
  const shorthands: [string, string][] = [
    ['https://2130706433/h', '127.0.0.1'],
    ['https://0x7f000001/h', '127.0.0.1'],
    ['https://017700000001/h', '127.0.0.1'],
    ['https://0177.0.0.1/h', '127.0.0.1'],
    ['https://0x7f.1/h', '127.0.0.1'],
    ['https://127.1/h', '127.0.0.1'],
    ['https://2852039166/latest/meta-data', '169.254.169.254'],
    ['https://0xa9.0xfe.0xa9.0xfe/h', '169.254.169.254'],
    ['https://10.1/h', '10.0.0.1'],
  ];
  for (const [url, address] of shorthands) {
    const message = new RegExp(
      `host ${address.replaceAll('.', '\\.')} resolves to ${address.replaceAll('.', '\\.')},`,
    );
    await t.rejects(
      app.services.endpoints.create({ appId: dev.appId, env: 'sandbox', url }),
      { ...VALIDATION, message: REFUSED },
      url,
    );
    t.match(lastRefusal(), message, `${url}: the log names ${address}`);
  }
  t.match(
    await createAndPark('https://134744072/h'),
    { url: 'https://8.8.8.8/h' },
    '8.8.8.8 is public, and stored as the URL parser writes it',
  );
});

t.test('delivery refuses a host whose DNS answer is any such address', async (t) => {
  const options = { allowPrivateNetworks: false, timeoutMs: 5000 };
  for (const [address, refused, what] of ADDRESS_TABLE) {
    const resolver = async () => [{ address, family: isIP(address.replace(/%.*/, '')) }];
    if (refused) {
      const result = await sendWebhook(
        'https://hooks.example/h',
        '{}',
        {},
        { ...options, resolver },
      );
      t.match(
        result,
        {
          kind: 'failure',
          responseCode: null,
          error: `refused: ${REFUSED_DESTINATION}`,
          detail: `host hooks.example resolves to ${address}`,
        },
        `${address} (${what}) is refused`,
      );
    } else {
      // Checked only: a public address is not reachable from the test machine.
      t.match(
        await checkDestination(parseWebhookUrl('https://hooks.example/h'), {
          ...options,
          resolver,
        }),
        { address },
        `${address} (${what}) is accepted`,
      );
    }
  }
});

t.test('an endpoint stored with an embedded IPv4 literal is refused at delivery', async (t) => {
  // Stored directly, as endpoints created before this check were.
  for (const [path, host] of [
    ['/compatible', '[::7f00:1]'],
    ['/siit', '[::ffff:0:7f00:1]'],
  ] as const) {
    const [endpoint] = await app.db
      .insert(webhookEndpoints)
      .values({
        appId: dev.appId,
        environment: 'sandbox',
        url: receiver.url(path, host),
        secret: 'svc_whsec_test',
      })
      .returning();
    const { delivery_id } = await app.services.endpoints.ping(endpoint!.id);
    const delivery = await waitUntil(`the refused attempt to ${host}`, async () =>
      (await app.services.endpoints.recentDeliveries(endpoint!.id)).deliveries.find(
        (d) => d.id === delivery_id && d.attempts === 1 && d.last_error,
      ),
    );
    t.match(delivery, {
      status: 'pending',
      attempts: 1,
      last_response_code: null,
      last_error: `refused: ${REFUSED_DESTINATION}`,
    });
  }
  t.equal(receiver.received.length, 0, 'nothing reached the receiver');
});

t.test('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true still lets every address through', async (t) => {
  for (const address of [
    '::7f00:1',
    '::ffff:0:7f00:1',
    '64:ff9b::a9fe:a9fe',
    '2002:7f00:1::1',
    'fe80::1%lo',
  ]) {
    const resolver = async () => [{ address, family: 6 }];
    t.match(
      await checkDestination(parseWebhookUrl('https://hooks.example/h'), {
        allowPrivateNetworks: true,
        resolver,
      }),
      { address, family: 6 },
      address,
    );
  }
});

t.test('the request connects to the checked address, whatever DNS answers next', async (t) => {
  // A second receiver on 127.0.0.2, same port: system DNS would send "localhost" to 127.0.0.1.
  const tls = (name: string) =>
    readFileSync(fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url)));
  const hits: string[] = [];
  const other = createServer(
    { key: tls('receiver-key.pem'), cert: tls('receiver-cert.pem') },
    (req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(204).end();
    },
  );
  await new Promise<void>((resolve) => other.listen(receiver.port, '127.0.0.2', resolve));
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())));
  t.equal((other.address() as AddressInfo).address, '127.0.0.2');

  let lookups = 0;
  const rebinding = async () => {
    lookups += 1;
    // First answer 127.0.0.2 (the one checked); any later answer would point elsewhere.
    return [{ address: lookups === 1 ? '127.0.0.2' : '127.0.0.1', family: 4 }];
  };
  const result = await sendWebhook(
    receiver.url('/pinned', 'localhost'),
    '{}',
    { 'content-type': 'application/json' },
    {
      allowPrivateNetworks: true,
      timeoutMs: 5000,
      resolver: rebinding,
    },
  );
  t.match(result, { kind: 'success', responseCode: 204 });
  t.equal(lookups, 1, 'resolved once, by the check');
  t.strictSame(
    hits,
    ['/pinned'],
    'the checked address got the request (TLS verified for localhost)',
  );
  t.equal(receiver.to('/pinned').length, 0, 'and 127.0.0.1 did not');

  const refused = await sendWebhook(
    receiver.url('/pinned', 'localhost'),
    '{}',
    {},
    { allowPrivateNetworks: false, timeoutMs: 5000, resolver: rebinding },
  );
  t.match(refused, {
    kind: 'failure',
    responseCode: null,
    error: `refused: ${REFUSED_DESTINATION}`,
    detail: /^host localhost resolves to 127\.0\.0\.1/,
  });
});

/**
 * The sandbox inventory: the app's account holder's sandbox listings, exactly what the app's
 * sandbox keys see on GET /listings (ListingsReadService.sellerInventory pages the same seller
 * scope), with a status filter and keyset paging (newest first, `cursor` = the last
 * published_at). A plain GET form: filters and pages are links, usable without JavaScript.
 */
import type { FastifyInstance } from 'fastify';
import type { Listing } from '../generated/schemas.ts';
import { LISTING_STATUSES, type SellerScope } from '../listings/listings-read-service.ts';
import { html, sendPage, type SafeHtml } from '../web/html.ts';
import { appContext, attempt, type AppContext } from './context.ts';
import { appPage, when } from './layout.ts';
import { APP_ROUTE, paths } from './paths.ts';

/**
 * The inventory's page: 20 rows (the portal's documented page), fewer than the API's
 * DEFAULT_PAGE_SIZE so that a page of the table fits a screen.
 */
const INVENTORY_PAGE_SIZE = 20;

function price(listing: Listing): string {
  return `${(listing.price_cents / 100).toFixed(2)} ${listing.currency.toUpperCase()}`;
}

function pageLink(appId: string, status: string | undefined, cursor: string | undefined): string {
  const query = new URLSearchParams();
  if (status) query.set('status', status);
  if (cursor) query.set('cursor', cursor);
  const text = query.toString();
  return text ? `${paths.inventory(appId)}?${text}` : paths.inventory(appId);
}

function inventoryBody(
  ctx: AppContext,
  items: Listing[],
  status: string | undefined,
  cursor: string | undefined,
  nextCursor: string | null,
): SafeHtml {
  return html`<p>The sandbox listings of this app's account holder, @${ctx.app.ownerUsername}, from every one of their apps' sandbox keys: what <code>GET /api/v1/listings</code>
returns to this app's sandbox keys. They never appear on the public feed.</p>
<form class="filter" method="get" action="${paths.inventory(ctx.app.id)}">
<label for="status-filter">Status</label>
<select id="status-filter" name="status">
<option value=""${status ? '' : html` selected`}>All</option>
${LISTING_STATUSES.map((s) => html`<option value="${s}"${s === status ? html` selected` : ''}>${s}</option>`)}
</select>
<button type="submit">Show</button>
</form>
${
  items.length === 0
    ? html`<p class="empty">${
        cursor
          ? 'No more listings.'
          : status
            ? `No ${status} sandbox listings.`
            : 'No sandbox listings yet. Create one with a sandbox key (see API keys).'
      }</p>`
    : html`<div class="table-wrap"><table>
<caption>${items.length} listing${items.length === 1 ? '' : 's'}${status ? ` with status ${status}` : ''}${cursor ? ', older page' : ''}</caption>
<thead><tr><th scope="col">Title</th><th scope="col">Status</th><th scope="col">Price</th><th scope="col">External id</th><th scope="col">Published</th><th scope="col">Id</th></tr></thead>
<tbody>
${items.map(
  (l) => html`<tr>
<td>${l.title}</td>
<td><span class="listing-${l.status}">${l.status}</span></td>
<td class="num">${price(l)}</td>
<td>${l.external_id ? html`<code>${l.external_id}</code>` : html`<span class="muted">none</span>`}</td>
<td>${when(l.published_at)}</td>
<td><code class="small-id">${l.id}</code></td>
</tr>`,
)}
</tbody>
</table></div>`
}
<nav class="pager" aria-label="Inventory pages">
${cursor ? html`<a href="${pageLink(ctx.app.id, status, undefined)}">Newest</a>` : ''}
${nextCursor ? html`<a href="${pageLink(ctx.app.id, status, nextCursor)}" rel="next">Older listings →</a>` : ''}
</nav>`;
}

/**
 * The app's account holder as a seller in the sandbox: what the app's sandbox keys see on GET
 * /listings (they act as the holder), whichever member is signed in.
 */
function sandboxSeller(userId: string): SellerScope {
  return { kind: 'seller', sellerId: userId, environment: 'sandbox' };
}

export function registerInventoryPages(app: FastifyInstance): void {
  app.get<{ Querystring: { status?: string; cursor?: string } }>(
    `${APP_ROUTE}/inventory`,
    { config: { appAction: 'inventory.view' } },
    async (request, reply) => {
      const ctx = appContext(app, request, reply);
      const status =
        typeof request.query.status === 'string' && request.query.status !== ''
          ? request.query.status
          : undefined;
      const cursor =
        typeof request.query.cursor === 'string' && request.query.cursor !== ''
          ? request.query.cursor
          : undefined;
      const page = await attempt(() =>
        app.services.listingReads.sellerInventory(sandboxSeller(ctx.app.ownerId), {
          status,
          cursor,
          limit: INVENTORY_PAGE_SIZE,
        }),
      );
      if (page.error) {
        // A status or cursor the service refuses (typed into the URL): say why, offer the first
        // page.
        return sendPage(
          reply,
          page.error.status,
          appPage(ctx, 'inventory', {
            title: 'Sandbox inventory',
            error: page.error.message,
            body: inventoryBody(ctx, [], undefined, 'invalid', null),
          }),
        );
      }
      const { items, nextCursor } = page.value;
      return sendPage(
        reply,
        200,
        appPage(ctx, 'inventory', {
          title: 'Sandbox inventory',
          body: inventoryBody(ctx, items, status, cursor, nextCursor),
        }),
      );
    },
  );
}

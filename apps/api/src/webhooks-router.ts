/**
 * Each tenant's outbound webhooks over HTTP: subscriptions to the events of all its runs (each
 * with its own signing secret, shown once when it is made), their recent delivery attempts, and the
 * signing secret of its runs' own `webhook`s (made or replaced, and shown, by `POST
 * /v1/webhooks/secret`). Listing never shows a secret. The store's refusals (`WebhookStoreError`)
 * answer 409 through the error handler.
 */
import type { Request, RequestHandler } from 'express';
import { WebhookId, WebhookSubscriptionRequest } from '@tetraloop/core/domain';
import type { WebhookStore } from '@tetraloop/core/state';
import type { WebhookCreated, WebhookDeliveries, WebhookList, WebhookSecret } from './answers.js';
import { callerOf } from './auth.js';
import { HttpError, zodToHttp } from './http-errors.js';
import type { RouteName } from './route-table.js';

export interface WebhooksRouterDeps {
  readonly outboundWebhooks: WebhookStore;
}

function idOf(req: Request): string {
  const parsed = WebhookId.safeParse(req.params.id);
  // A malformed id names no subscription of anyone's.
  if (!parsed.success) throw new HttpError(404, 'webhook_not_found', 'no such webhook');
  return parsed.data;
}

export function webhookHandlers(deps: WebhooksRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const store = deps.outboundWebhooks;

  const create: RequestHandler = async (req, res) => {
    const body = WebhookSubscriptionRequest.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const made = await store.create(callerOf(res).tenant, body.data);
    res
      .status(201)
      .location(`/v1/webhooks/${made.subscription.id}`)
      .json({ ...made.subscription, secret: made.secret } satisfies WebhookCreated);
  };

  const list: RequestHandler = async (_req, res) => {
    res.json({ webhooks: await store.list(callerOf(res).tenant) } satisfies WebhookList);
  };

  const deliveries: RequestHandler = async (req, res) => {
    const id = idOf(req);
    const tenant = callerOf(res).tenant;
    if (!(await store.exists(tenant, id))) throw new HttpError(404, 'webhook_not_found', 'no such webhook');
    res.json({
      id,
      deliveries: await store.deliveries(tenant, { subscription: id }),
    } satisfies WebhookDeliveries);
  };

  const remove: RequestHandler = async (req, res) => {
    const id = idOf(req);
    if (!(await store.delete(callerOf(res).tenant, id)))
      throw new HttpError(404, 'webhook_not_found', 'no such webhook');
    res.status(204).end();
  };

  const secret: RequestHandler = async (_req, res) => {
    const value = await store.rotateSigningSecret(callerOf(res).tenant);
    res.status(201).json({ secret: value } satisfies WebhookSecret);
  };

  return {
    'webhooks.create': create,
    'webhooks.list': list,
    'webhooks.deliveries': deliveries,
    'webhooks.delete': remove,
    'webhooks.secret': secret,
  };
}

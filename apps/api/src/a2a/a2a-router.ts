/**
 * A2A over HTTP: each agent's Agent Card and its JSON-RPC endpoint, behind API keys like every
 * `/v1` route, and the default agent's card at `/.well-known/agent-card.json`, open (it names no
 * tenant's data; see docs/security.md). The SDK's transport handlers speak JSON-RPC: v1.0 method
 * names when the request says `A2A-Version: 1.0`, v0.3's (`message/send`…) without the header.
 */
import type { Request, RequestHandler, Response } from 'express';
import { A2A_VERSION_HEADER, SSE_HEADERS, formatSSEErrorEvent, formatSSEEvent } from '@a2a-js/sdk';
import { A2A_LEGACY_PROTOCOL_VERSION } from '@a2a-js/sdk/compat/v0_3';
import { LegacyJsonRpcTransportHandler } from '@a2a-js/sdk/compat/v0_3/server';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { SESSION_AGENT } from '@tetraloop/core/sessions';
import { hasScope, type Scope } from '@tetraloop/core/domain';
import { callerOf } from '../auth.js';
import { HttpError, zodToHttp } from '../http-errors.js';
import type { LongRequests, LongRequestKind } from '../long-requests.js';
import { AgentId } from '../requests.js';
import type { RouteName } from '../route-table.js';
import { A2A_CALL, A2AService, type A2ACall, type A2AServiceDeps } from './a2a-service.js';
import { agentCard, agentCardJson, legacyAgentCardJson } from './card.js';

export { WELL_KNOWN_CARD_PATH } from './card.js';

export interface A2ARouterDeps extends A2AServiceDeps {
  readonly longRequests: LongRequests;
}

/** Methods (both versions' names) that need more than the route's scope, and the kind of long request each is. */
const CANCEL_METHODS = new Set(['CancelTask', 'tasks/cancel']);
const SEND_METHODS = new Set(['SendMessage', 'message/send']);
const STREAM_METHODS = new Set([
  'SendStreamingMessage',
  'message/stream',
  'SubscribeToTask',
  'tasks/resubscribe',
]);

/** The base URL the client reached the API at (behind a trusted proxy, its forwarded protocol). */
const baseUrlOf = (req: Request): string => `${req.protocol}://${req.get('host') ?? 'localhost'}`;

/** The protocol version the request speaks: v0.3 without the header, as A2A says. */
const versionOf = (req: Request): string => req.get(A2A_VERSION_HEADER) || A2A_LEGACY_PROTOCOL_VERSION;
const isLegacy = (version: string): boolean => version.startsWith('0.');

/** The card in the version the client asks for; caches keep one per version. */
function sendCard(req: Request, res: Response, agentId: string): void {
  const baseUrl = baseUrlOf(req);
  res.append('Vary', A2A_VERSION_HEADER);
  res.json(
    isLegacy(versionOf(req)) ? legacyAgentCardJson(agentId, baseUrl) : agentCardJson(agentId, baseUrl),
  );
}

/** The default agent's card: the same for every caller, whatever its tenant. */
export const wellKnownCard: RequestHandler = (req, res) => {
  res.set('Cache-Control', 'public, max-age=300');
  sendCard(req, res, SESSION_AGENT);
};

export function a2aHandlers(deps: A2ARouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const service = new A2AService(deps);
  const transports = {
    current: new JsonRpcTransportHandler(service),
    legacy: new LegacyJsonRpcTransportHandler(service),
  };

  /** The route's agent, one the caller's tenant may run (`400` at `agentId` otherwise). */
  const agentOf = async (req: Request, res: Response): Promise<string> => {
    const agentId = AgentId.safeParse(req.params.agentId);
    if (!agentId.success) throw zodToHttp(agentId.error, ['params', 'agentId']);
    await deps.runs.checkAgent(callerOf(res).tenant, agentId.data);
    return agentId.data;
  };

  const card: RequestHandler = async (req, res) => {
    const agentId = await agentOf(req, res);
    res.set('Cache-Control', 'private, max-age=300');
    sendCard(req, res, agentId);
  };

  const rpc: RequestHandler = async (req, res) => {
    const agentId = await agentOf(req, res);
    const caller = callerOf(res);
    const body = req.body as { method?: unknown; params?: { message?: { taskId?: unknown } } } | undefined;
    const method = typeof body?.method === 'string' ? body.method : '';
    const needs = (scope: Scope, why: string): void => {
      if (!hasScope(caller, scope))
        throw new HttpError(403, 'forbidden', `the API key lacks the scope ${scope}: ${why}`);
    };
    if (CANCEL_METHODS.has(method)) needs('runs:write', 'cancelling a task cancels its run');
    if (body?.params?.message?.taskId)
      needs('signals:write', 'a message to a task delivers the signal it waits for');

    const version = versionOf(req);
    const transport = isLegacy(version) ? transports.legacy : transports.current;
    const errorOf = (err: unknown): unknown =>
      isLegacy(version)
        ? LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError(err)
        : JsonRpcTransportHandler.mapToJSONRPCError(err);
    const id = (req.body as { id?: unknown } | undefined)?.id ?? null;
    try {
      validateVersion(version, agentCard(agentId, ''), 'JSONRPC');
    } catch (err) {
      res.json({ jsonrpc: '2.0', id, error: errorOf(err) });
      return;
    }
    const kind: LongRequestKind | undefined = STREAM_METHODS.has(method)
      ? 'events'
      : SEND_METHODS.has(method)
        ? 'wait'
        : undefined;
    const release = kind ? deps.longRequests.admit(kind, res) : undefined;
    const gone = new AbortController();
    res.on('close', () => gone.abort());
    const context = new ServerCallContext({
      requestedVersion: version,
      user: { isAuthenticated: true, userName: caller.keyId ?? 'root' },
      state: new Map([[A2A_CALL, { caller, agentId, closed: gone.signal } satisfies A2ACall]]),
    });
    try {
      const answer = await transport.handle(req.body as Record<string, unknown>, context);
      if (!isStream(answer)) {
        res.json(answer);
        return;
      }
      await streamAnswer(res, answer, (err) => ({ jsonrpc: '2.0', id, error: errorOf(err) }));
    } finally {
      release?.();
    }
  };

  return { 'a2a.card': card, 'a2a.rpc': rpc };
}

const isStream = (value: unknown): value is AsyncGenerator<unknown> =>
  typeof (value as AsyncGenerator<unknown> | undefined)?.[Symbol.asyncIterator] === 'function';

/**
 * A streaming method's answer: server-sent events, one JSON-RPC response each. An error before
 * the first event is answered as plain JSON-RPC (nothing was streamed yet); one after it ends the
 * stream with an `error` event.
 */
async function streamAnswer(
  res: Response,
  events: AsyncGenerator<unknown>,
  errorResponse: (err: unknown) => unknown,
): Promise<void> {
  let first: IteratorResult<unknown>;
  try {
    first = await events.next();
  } catch (err) {
    res.json(errorResponse(err));
    return;
  }
  res.writeHead(200, SSE_HEADERS);
  res.flushHeaders();
  try {
    if (!first.done) res.write(formatSSEEvent(first.value));
    for (let next = await events.next(); !next.done; next = await events.next()) {
      res.write(formatSSEEvent(next.value));
    }
  } catch (err) {
    if (!res.writableEnded) res.write(formatSSEErrorEvent(errorResponse(err)));
  } finally {
    await events.return(undefined);
    res.end();
  }
}

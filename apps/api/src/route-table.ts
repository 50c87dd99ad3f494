/** Where LangGraph's Agent Protocol is mounted: the `apiUrl` of `@langchain/langgraph-sdk`'s client. */
export const LANGGRAPH_BASE = '/langgraph';

/**
 * Every route behind a key in one table (`/v1`, and the protocols' endpoints such as `/mcp` and
 * LangGraph's Agent Protocol under `/langgraph`): method, path, the scope a key needs, and which path parameter
 * names something a tenant owns. The app mounts exactly these (a handler missing or left over
 * stops the boot), and the auth test matrix is generated from it, so no route can skip either.
 */
import type { Scope } from '@tetraloop/core/domain';

export const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/**
 * What a route asks of its caller: a scope of its key (the root token has them all), `root` (only
 * the operator's root token), or `signature` (a signed webhook: no key at all).
 */
export type RouteAccess = Scope | 'root' | 'signature';

/** The thing a path parameter names, when another tenant must not find it (answered `404`). */
export type Owned =
  'run' | 'session' | 'lesson' | 'blob' | 'key' | 'secret' | 'webhook' | 'schedule' | 'trigger' | 'item';

export interface RouteSpec {
  readonly method: HttpMethod;
  readonly path: string;
  readonly access: RouteAccess;
  readonly owned?: Owned;
}

export const ROUTES = {
  'runs.submit': { method: 'post', path: '/v1/runs', access: 'runs:write' },
  'runs.list': { method: 'get', path: '/v1/runs', access: 'runs:read' },
  'runs.get': { method: 'get', path: '/v1/runs/:id', access: 'runs:read', owned: 'run' },
  'runs.wait': { method: 'get', path: '/v1/runs/:id/wait', access: 'runs:read', owned: 'run' },
  'runs.events': { method: 'get', path: '/v1/runs/:id/events', access: 'runs:read', owned: 'run' },
  'runs.explain': { method: 'get', path: '/v1/runs/:id/explain', access: 'runs:read', owned: 'run' },
  'runs.item': {
    method: 'get',
    path: '/v1/runs/:id/nodes/:nodeId/items/:index',
    access: 'runs:read',
    owned: 'run',
  },
  'runs.cancel': { method: 'post', path: '/v1/runs/:id/cancel', access: 'runs:write', owned: 'run' },
  'runs.resume': { method: 'post', path: '/v1/runs/:id/resume', access: 'runs:write', owned: 'run' },
  'runs.rerun': { method: 'post', path: '/v1/runs/:id/rerun', access: 'runs:write', owned: 'run' },
  'runs.signal': {
    method: 'post',
    path: '/v1/runs/:id/signals/:name',
    access: 'signals:write',
    owned: 'run',
  },
  'runs.feedback': { method: 'post', path: '/v1/runs/:id/feedback', access: 'runs:write', owned: 'run' },
  'blobs.get': { method: 'get', path: '/v1/blobs/:hash', access: 'runs:read', owned: 'blob' },
  'usage.get': { method: 'get', path: '/v1/usage', access: 'runs:read' },
  'tools.list': { method: 'get', path: '/v1/tools', access: 'runs:read' },
  'sessions.message': {
    method: 'post',
    path: '/v1/sessions/:sessionKey/messages',
    access: 'sessions:write',
  },
  'sessions.list': { method: 'get', path: '/v1/sessions', access: 'sessions:read' },
  'sessions.get': {
    method: 'get',
    path: '/v1/sessions/:sessionKey',
    access: 'sessions:read',
    owned: 'session',
  },
  'sessions.transcript': {
    method: 'get',
    path: '/v1/sessions/:sessionKey/transcript',
    access: 'sessions:read',
    owned: 'session',
  },
  // AG-UI (docs/interop.md#ag-ui): a message to the thread's session, answered as AG-UI events;
  // answering an interrupt (`resume`) also needs `signals:write`, checked by the handler.
  'agui.run': { method: 'post', path: '/v1/agui/:agentId', access: 'sessions:write' },
  'sources.event': { method: 'post', path: '/v1/sources/:name/events', access: 'signature' },
  'sources.list': { method: 'get', path: '/v1/sources', access: 'sessions:read' },
  // A2A (docs/interop.md): an agent's card, and its JSON-RPC endpoint (methods that cancel or
  // deliver a signal also need runs:write or signals:write).
  'a2a.card': {
    method: 'get',
    path: '/v1/a2a/:agentId/.well-known/agent-card.json',
    access: 'sessions:read',
  },
  'a2a.rpc': { method: 'post', path: '/v1/a2a/:agentId', access: 'sessions:write' },
  'agents.reflect': { method: 'post', path: '/v1/agents/:agentId/reflect', access: 'lessons:write' },
  'agents.lessons': { method: 'get', path: '/v1/agents/:agentId/lessons', access: 'runs:read' },
  'agents.memory': { method: 'get', path: '/v1/agents/:agentId/memory', access: 'runs:read' },
  'lessons.patch': { method: 'patch', path: '/v1/lessons/:id', access: 'lessons:write', owned: 'lesson' },
  'secrets.put': { method: 'put', path: '/v1/secrets/:name', access: 'secrets:write' },
  'secrets.list': { method: 'get', path: '/v1/secrets', access: 'secrets:write' },
  'secrets.delete': {
    method: 'delete',
    path: '/v1/secrets/:name',
    access: 'secrets:write',
    owned: 'secret',
  },
  'webhooks.create': { method: 'post', path: '/v1/webhooks', access: 'webhooks:write' },
  'webhooks.list': { method: 'get', path: '/v1/webhooks', access: 'webhooks:read' },
  'webhooks.secret': { method: 'post', path: '/v1/webhooks/secret', access: 'webhooks:write' },
  'webhooks.deliveries': {
    method: 'get',
    path: '/v1/webhooks/:id/deliveries',
    access: 'webhooks:read',
    owned: 'webhook',
  },
  'webhooks.delete': {
    method: 'delete',
    path: '/v1/webhooks/:id',
    access: 'webhooks:write',
    owned: 'webhook',
  },
  'schedules.create': { method: 'post', path: '/v1/schedules', access: 'schedules:write' },
  'schedules.list': { method: 'get', path: '/v1/schedules', access: 'schedules:read' },
  'schedules.get': { method: 'get', path: '/v1/schedules/:id', access: 'schedules:read', owned: 'schedule' },
  'schedules.patch': {
    method: 'patch',
    path: '/v1/schedules/:id',
    access: 'schedules:write',
    owned: 'schedule',
  },
  'schedules.delete': {
    method: 'delete',
    path: '/v1/schedules/:id',
    access: 'schedules:write',
    owned: 'schedule',
  },
  'schedules.trigger': {
    method: 'post',
    path: '/v1/schedules/:id/trigger',
    access: 'schedules:write',
    owned: 'schedule',
  },
  'events.send': { method: 'post', path: '/v1/events', access: 'events:write' },
  'triggers.create': { method: 'post', path: '/v1/triggers', access: 'triggers:write' },
  'triggers.list': { method: 'get', path: '/v1/triggers', access: 'triggers:read' },
  'triggers.get': { method: 'get', path: '/v1/triggers/:id', access: 'triggers:read', owned: 'trigger' },
  'triggers.delete': {
    method: 'delete',
    path: '/v1/triggers/:id',
    access: 'triggers:write',
    owned: 'trigger',
  },
  'keys.create': { method: 'post', path: '/v1/keys', access: 'admin' },
  'keys.list': { method: 'get', path: '/v1/keys', access: 'admin' },
  'keys.revoke': { method: 'delete', path: '/v1/keys/:keyId', access: 'admin', owned: 'key' },
  'tenants.delete': { method: 'delete', path: '/v1/tenants/:tenant', access: 'root' },
  // Flow limits span every tenant: the operator's.
  'limits.get': { method: 'get', path: '/v1/limits', access: 'root' },
  'limits.put': { method: 'put', path: '/v1/limits', access: 'root' },
  'limits.delete': { method: 'delete', path: '/v1/limits', access: 'root' },
  // MCP over streamable HTTP (docs/interop.md): every call reads; a tool that writes asks for
  // runs:write itself.
  'mcp.message': { method: 'post', path: '/mcp', access: 'runs:read' },
  'mcp.stream': { method: 'get', path: '/mcp', access: 'runs:read' },
  // LangGraph's Agent Protocol (langgraph/router.ts): a thread is a session, so a thread's routes
  // and its runs' are the session's (another tenant's thread is not found).
  'langgraph.assistants.search': {
    method: 'post',
    path: '/langgraph/assistants/search',
    access: 'runs:read',
  },
  'langgraph.assistants.get': {
    method: 'get',
    path: '/langgraph/assistants/:assistantId',
    access: 'runs:read',
  },
  'langgraph.assistants.versions': {
    method: 'post',
    path: '/langgraph/assistants/:assistantId/versions',
    access: 'runs:read',
  },
  'langgraph.threads.create': { method: 'post', path: '/langgraph/threads', access: 'sessions:write' },
  'langgraph.threads.search': { method: 'post', path: '/langgraph/threads/search', access: 'sessions:read' },
  'langgraph.threads.get': {
    method: 'get',
    path: '/langgraph/threads/:threadId',
    access: 'sessions:read',
    owned: 'session',
  },
  'langgraph.threads.delete': {
    method: 'delete',
    path: '/langgraph/threads/:threadId',
    access: 'sessions:write',
    owned: 'session',
  },
  'langgraph.threads.state': {
    method: 'get',
    path: '/langgraph/threads/:threadId/state',
    access: 'sessions:read',
    owned: 'session',
  },
  'langgraph.threads.history': {
    method: 'post',
    path: '/langgraph/threads/:threadId/history',
    access: 'sessions:read',
    owned: 'session',
  },
  'langgraph.runs.create': {
    method: 'post',
    path: '/langgraph/threads/:threadId/runs',
    access: 'sessions:write',
    owned: 'session',
  },
  'langgraph.runs.stream': {
    method: 'post',
    path: '/langgraph/threads/:threadId/runs/stream',
    access: 'sessions:write',
    owned: 'session',
  },
  'langgraph.runs.wait': {
    method: 'post',
    path: '/langgraph/threads/:threadId/runs/wait',
    access: 'sessions:write',
    owned: 'session',
  },
  'langgraph.runs.get': {
    method: 'get',
    path: '/langgraph/threads/:threadId/runs/:runId',
    access: 'sessions:read',
    owned: 'session',
  },
  'langgraph.runs.join': {
    method: 'get',
    path: '/langgraph/threads/:threadId/runs/:runId/join',
    access: 'sessions:read',
    owned: 'session',
  },
  'langgraph.runs.joinStream': {
    method: 'get',
    path: '/langgraph/threads/:threadId/runs/:runId/stream',
    access: 'sessions:read',
    owned: 'session',
  },
  'langgraph.runs.cancel': {
    method: 'post',
    path: '/langgraph/threads/:threadId/runs/:runId/cancel',
    access: 'sessions:write',
    owned: 'session',
  },
  'langgraph.stateless.create': { method: 'post', path: '/langgraph/runs', access: 'runs:write' },
  'langgraph.stateless.stream': { method: 'post', path: '/langgraph/runs/stream', access: 'runs:write' },
  'langgraph.stateless.wait': { method: 'post', path: '/langgraph/runs/wait', access: 'runs:write' },
  // The store: each tenant's own items (another tenant's are not there to find).
  'langgraph.store.put': { method: 'put', path: '/langgraph/store/items', access: 'sessions:write' },
  'langgraph.store.get': {
    method: 'get',
    path: '/langgraph/store/items',
    access: 'sessions:read',
    owned: 'item',
  },
  'langgraph.store.delete': { method: 'delete', path: '/langgraph/store/items', access: 'sessions:write' },
  'langgraph.store.search': {
    method: 'post',
    path: '/langgraph/store/items/search',
    access: 'sessions:read',
  },
  'langgraph.store.namespaces': {
    method: 'post',
    path: '/langgraph/store/namespaces',
    access: 'sessions:read',
  },
} as const satisfies Record<string, RouteSpec>;

export type RouteName = keyof typeof ROUTES;

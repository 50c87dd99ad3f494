/**
 * What `POST /mcp` takes: one JSON-RPC 2.0 message of MCP, or a batch of them. Checked here, so a
 * body that is none is a `400` naming its field like any other route's; the SDK's transport then
 * checks each message against MCP's own schemas.
 */
import { z } from 'zod';

/** Most messages in one batch (the SDK's transport refuses more). */
export const MCP_MAX_BATCH = 100;

const RequestId = z.union([z.string(), z.number().int()]);
const Params = z.record(z.string(), z.unknown());

const McpRequest = z.strictObject({
  jsonrpc: z.literal('2.0'),
  id: RequestId,
  method: z.string().min(1),
  params: Params.optional(),
});
const McpNotification = z.strictObject({
  jsonrpc: z.literal('2.0'),
  method: z.string().min(1),
  params: Params.optional(),
});
const McpResult = z.strictObject({ jsonrpc: z.literal('2.0'), id: RequestId, result: Params });
const McpErrorAnswer = z.strictObject({
  jsonrpc: z.literal('2.0'),
  id: RequestId.optional(),
  error: z.strictObject({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }),
});

const McpSingle = z.union([McpRequest, McpNotification, McpResult, McpErrorAnswer]);

export const McpMessage = z
  .union([McpSingle, z.array(McpSingle).min(1).max(MCP_MAX_BATCH)])
  .describe(
    'A JSON-RPC 2.0 message of the Model Context Protocol (a request, a notification, or an answer to a request of the server), or a batch of them.',
  );
export type McpMessage = z.infer<typeof McpMessage>;

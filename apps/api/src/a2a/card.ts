/**
 * An agent's A2A Agent Card, in the shape of each protocol version the endpoint speaks: v1.0
 * (`supportedInterfaces`, ProtoJSON security schemes) and v0.3 (`url`, `preferredTransport`,
 * OpenAPI-like security schemes) for older clients, which ask for the card without an
 * `A2A-Version` header. Pure; a card names the agent, the endpoint and the auth scheme, nothing of
 * any tenant.
 */
import { A2A_PROTOCOL_VERSION, AgentCard, type AgentSkill } from '@a2a-js/sdk';
import { A2A_LEGACY_PROTOCOL_VERSION } from '@a2a-js/sdk/compat/v0_3';

/** The security scheme's name in the card: a Tetraloop API key as a bearer token. */
const SCHEME = 'apiKey';
const SCHEME_DESCRIPTION = 'A Tetraloop API key (or the root token), as Authorization: Bearer <key>';
const MODES = ['text/plain', 'application/json'];
/** The card's `version`: the version of this mapping, which changes when what a card says does. */
const CARD_VERSION = '1.0.0';

/** Where the default agent's card is, for clients that discover an agent from a host. */
export const WELL_KNOWN_CARD_PATH = '/.well-known/agent-card.json';

/** Where an agent's JSON-RPC endpoint and its card are, below the API's base URL. */
export const a2aEndpointPath = (agentId: string): string => `/v1/a2a/${encodeURIComponent(agentId)}`;

const describe = (agentId: string): string =>
  `Tetraloop agent "${agentId}": each message starts a run of the agent in the session its contextId names (one is made when none is given); the task is the run.`;

const skill = (agentId: string): AgentSkill => ({
  id: 'converse',
  name: 'Converse',
  description: `Send a task or a question in words; agent "${agentId}" plans and runs it with its tools and answers.`,
  tags: ['tetraloop', 'agent'],
  examples: [],
  inputModes: MODES,
  outputModes: MODES,
  securityRequirements: [],
});

/** The v1.0 card, as the SDK's types hold it. */
export function agentCard(agentId: string, baseUrl: string): AgentCard {
  const url = `${baseUrl}${a2aEndpointPath(agentId)}`;
  return {
    name: agentId,
    description: describe(agentId),
    // Both versions at one URL: the `A2A-Version` header of each request says which it speaks.
    // No `tenant`: the API key decides it.
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: A2A_PROTOCOL_VERSION, tenant: '' },
      { url, protocolBinding: 'JSONRPC', protocolVersion: A2A_LEGACY_PROTOCOL_VERSION, tenant: '' },
    ],
    provider: undefined,
    version: CARD_VERSION,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {
      [SCHEME]: {
        scheme: {
          $case: 'httpAuthSecurityScheme',
          value: { description: SCHEME_DESCRIPTION, scheme: 'Bearer', bearerFormat: '' },
        },
      },
    },
    securityRequirements: [{ schemes: { [SCHEME]: { list: [] } } }],
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills: [skill(agentId)],
    signatures: [],
  };
}

/** The v1.0 card as JSON (ProtoJSON field names and oneofs). */
export const agentCardJson = (agentId: string, baseUrl: string): unknown =>
  AgentCard.toJSON(agentCard(agentId, baseUrl));

/** The v0.3 card (the A2A v0.3 JSON schema's `AgentCard`). */
export function legacyAgentCardJson(agentId: string, baseUrl: string): unknown {
  const url = `${baseUrl}${a2aEndpointPath(agentId)}`;
  const { name, description, skills } = agentCard(agentId, baseUrl);
  return {
    protocolVersion: '0.3.0',
    name,
    description,
    url,
    preferredTransport: 'JSONRPC',
    version: CARD_VERSION,
    capabilities: { streaming: true, pushNotifications: false, stateTransitionHistory: false },
    securitySchemes: { [SCHEME]: { type: 'http', scheme: 'bearer', description: SCHEME_DESCRIPTION } },
    security: [{ [SCHEME]: [] }],
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills: skills.map(({ id, name: skillName, description: text, tags, inputModes, outputModes }) => ({
      id,
      name: skillName,
      description: text,
      tags,
      inputModes,
      outputModes,
    })),
    supportsAuthenticatedExtendedCard: false,
  };
}

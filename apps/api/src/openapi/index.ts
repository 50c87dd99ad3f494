export { openApiDocument, openApiPath, API_VERSION } from './document.js';
export { OPEN_OPERATIONS, OPENAPI_PATH, DOCS_PATH, DOCS_SCRIPT_PATH } from './open-operations.js';
export { DOCS_CONTENT_SECURITY_POLICY } from './reference-page.js';
export type { OperationSettings } from './operations.js';

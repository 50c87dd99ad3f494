export * from './secret-ref.js';
export * from './secret-scope.js';
export * from './secret-cipher.js';
export * from './call-key.js';

export * from './ceilings.js';
export * from './open-slots.js';

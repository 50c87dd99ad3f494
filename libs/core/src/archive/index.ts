export * from './archive-record.js';
export * from './directory-archive.js';
export * from './run-archiver.js';

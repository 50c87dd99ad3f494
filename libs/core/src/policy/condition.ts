/** Exit conditions of loop nodes, evaluated by the harness (never by a model). Pure. */
import { isDeepStrictEqual } from 'node:util';
import { getPath } from '../graph/references.js';
import type { Condition } from '../graph/schema.js';

export function conditionHolds(condition: Condition, subject: unknown): boolean {
  const value = getPath(subject, condition.path.split('.'));
  if ('equals' in condition) return isDeepStrictEqual(value, condition.equals);
  if (condition.in !== undefined) return condition.in.some((v) => isDeepStrictEqual(value, v));
  if (condition.exists !== undefined) return (value !== undefined && value !== null) === condition.exists;
  if (condition.gte !== undefined) return typeof value === 'number' && value >= condition.gte;
  if (condition.lte !== undefined) return typeof value === 'number' && value <= condition.lte;
  return false;
}

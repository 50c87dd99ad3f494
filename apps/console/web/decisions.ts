/**
 * What a person decides for a waiting node: the signal it waits for, posted to
 * `POST /v1/runs/:id/signals/:name`. A wait node or a tool call held for approval gets Approve or
 * Reject with an optional comment (`{"approved": true|false, "comment"?}`: an approval lets its
 * call go only on `approved: true`, and a wait node's output is the body); a model call paused
 * over the money budget (`budget.<nonce>`) gets a raise (`{"costUsd"}`) or a stop (`{"stop": true}`).
 */
import { unwrap, type TetraloopClient } from '@tetraloop/client';
import { describeError, form, h } from './dom.js';
import type { NodeFields } from './node-details.js';

export function decisionForm(
  client: TetraloopClient,
  runId: string,
  nodeId: string,
  node: NodeFields,
  done: () => void,
): HTMLElement | undefined {
  const signal = node.signal ?? node.waits?.at(-1)?.signal;
  if (node.status !== 'waiting' || !signal) return undefined;
  const wait = node.waits?.at(-1);
  const error = h('span', { class: 'error', 'data-role': 'decision-error' });
  const send = (body: unknown): void => {
    error.textContent = '';
    for (const b of decision.querySelectorAll('button')) b.disabled = true;
    client.api
      .POST('/v1/runs/{id}/signals/{name}', {
        params: { path: { id: runId, name: signal } },
        body: body as never,
      })
      .then(unwrap)
      .then(done, (err: unknown) => {
        for (const b of decision.querySelectorAll('button')) b.disabled = false;
        error.textContent = describeError(err);
      });
  };
  const about = wait?.approval
    ? `approve the ${wait.approval.tool} call${wait.approval.reason ? ` (${wait.approval.reason})` : ''}`
    : wait?.budget
      ? `the money budget ($${wait.budget.costUsd}) is spent ($${wait.budget.spentUsd})`
      : `waits for the signal ${signal}`;
  // Its buttons decide; submitting it (Enter in the comment) does nothing.
  const decision = form(
    { class: 'decision', 'data-role': 'decision', 'data-node-id': nodeId, 'data-signal': signal },
    () => undefined,
  );
  decision.append(h('strong', {}, nodeId), ` ${about} `);
  if (signal.startsWith('budget.')) {
    const cost = h('input', {
      type: 'number',
      name: 'costUsd',
      min: 0,
      step: 'any',
      placeholder: 'new budget, USD',
    });
    decision.append(
      cost,
      h(
        'button',
        { type: 'button', 'data-action': 'raise', onclick: () => send({ costUsd: Number(cost.value) }) },
        'Raise',
      ),
      h('button', { type: 'button', 'data-action': 'stop', onclick: () => send({ stop: true }) }, 'Stop'),
    );
  } else {
    const comment = h('input', { name: 'comment', placeholder: 'comment (optional)', maxlength: 2000 });
    const decide = (approved: boolean) => (): void =>
      send({ approved, ...(comment.value.trim() ? { comment: comment.value.trim() } : {}) });
    decision.append(
      comment,
      h('button', { type: 'button', 'data-action': 'approve', onclick: decide(true) }, 'Approve'),
      h(
        'button',
        { type: 'button', 'data-action': 'reject', class: 'danger', onclick: decide(false) },
        'Reject',
      ),
    );
  }
  decision.append(error);
  return decision;
}

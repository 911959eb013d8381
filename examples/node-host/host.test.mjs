// Tests of the example host: `node --test examples/node-host/` (needs a built turnstile-driver,
// see README.md). Each test starts its own driver and stops it; none waits on a fixed sleep for
// the engine, only on the events the host reports, so they finish in about a second.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DriverError, RejectedError, TurnstileHost, ev, isRunComplete, sleepTool } from './host.mjs';

const TIMEOUT = { timeout: 10_000 };

/**
 * The scripted model. It reads the session's history as a provider request would: the newest
 * user message is the prompt. "sleep N ..." makes step 0 call the `sleep` tool for N ms and
 * step 1 answer with the tool's result; anything else is answered at once.
 */
function provider(session, step, history) {
  const prompt = history.filter((m) => m.role === 'user').at(-1);
  const sleep = /^sleep (\d+)/.exec(prompt.text);
  if (!sleep) return [ev.text(`Hello from ${session}.`), ev.finish('stop')];
  if (step === 0) {
    return [
      ev.text('Let me sleep first.'),
      ev.toolCall(`call-${prompt.id}`, 'sleep', { ms: Number(sleep[1]) }),
      ev.finish('tool_calls'),
    ];
  }
  // The history ends with this step's own (empty) assistant message; the one before holds the
  // tool call and its result.
  const result = history.at(-2).calls[0].result.content;
  return [ev.text(`Done: ${result}`), ev.finish('stop')];
}

/** Resolves with the first `event` emitted by `emitter` that satisfies `pred`. */
function waitFor(emitter, event, pred = () => true) {
  return new Promise((resolve) => {
    const on = (e) => {
      if (!pred(e)) return;
      emitter.off(event, on);
      resolve(e);
    };
    emitter.on(event, on);
  });
}

/** Starts a host, runs `body` with it, always stops it (and shows its log if `body` failed). */
async function withHost(options, body) {
  const host = await TurnstileHost.start({ provider, ...options });
  try {
    await body(host);
  } catch (err) {
    console.error(host.log.join('\n'));
    throw err;
  } finally {
    const code = await host.stop();
    assert.equal(code, 0, 'the driver exits 0 at the end of its input');
  }
}

test('a prompt whose model calls a tool, then answers, completes', TIMEOUT, () =>
  withHost({}, async (host) => {
    const done = await host.submit('s', 'sleep 20 then tell me', 'r1');

    assert.ok(isRunComplete(done), 'the promise resolves with the RunComplete');
    assert.equal(done.run_id, 'r1');
    assert.equal(done.outcome, 'completed');
    assert.equal(done.stop_reason, 'end_turn');
    assert.equal(done.text, 'Done: slept 20 ms', 'the last assistant message saw the tool result');
    assert.equal(
      host.transcript('s'),
      [
        'user: sleep 20 then tell me',
        'assistant: Let me sleep first. [tool_use]',
        '  tool sleep {"ms":20} -> slept 20 ms',
        'assistant: Done: slept 20 ms [end_turn]',
      ].join('\n'),
    );
    assert.equal(host.store.ledger.get(done.seq).state, 'completed', 'the ledger row has the outcome');
    assert.deepEqual(host.runCompletes.map((c) => c.run_id), ['r1']);
  }));

test('a cancel while `sleep` runs aborts the tool; the next prompt completes', TIMEOUT, () => {
  let signal = null; // the sleep call's AbortSignal, to see that the tool really stopped
  const base = sleepTool();
  const sleep = { ...base, run: (args, io) => ((signal = io.signal), base.run(args, io)) };
  return withHost({ tools: { sleep } }, async (host) => {
    const started = waitFor(host, 'tool', (e) => e.event === 'start');
    const aborted = waitFor(host, 'tool', (e) => e.event === 'abort');
    const r1 = host.submit('s', 'sleep 10000 please', 'r1');
    await started;

    const before = performance.now();
    const outputs = await host.cancel('s');
    const c1 = await r1;

    assert.equal(c1.run_id, 'r1');
    assert.equal(c1.outcome, 'cancelled');
    assert.ok(performance.now() - before < 3000, 'a dropped tool does not hold the cancel back (it sleeps 10 s)');
    assert.equal((await aborted).name, 'sleep');
    assert.equal(signal.aborted, true, 'the sleep was stopped');
    assert.deepEqual(
      outputs.map((o) => o.kind.type).slice(0, 1),
      ['abort_tool'],
      'the engine says abort_tool first (the tool is `drop`)',
    );
    assert.match(host.transcript('s'), /tool sleep \{"ms":10000\} -> error \(synthetic\) Error: user cancelled assistant tool calling/);
    assert.match(host.transcript('s'), /\[canceled: User canceled request\]/);

    const c2 = await host.submit('s', 'are you there?', 'r2');
    assert.equal(c2.outcome, 'completed');
    assert.equal(c2.text, 'Hello from s.');
    assert.deepEqual(host.runCompletes.map((c) => [c.run_id, c.outcome]), [['r1', 'cancelled'], ['r2', 'completed']]);
  });
});

test('a cancel leaves a `finish` tool running; the grace timer (a real timer) cleans up', TIMEOUT, () =>
  withHost({ tools: { sleep: sleepTool({ on_abort: 'finish' }) }, config: { cancel_grace_ms: 200 } }, async (host) => {
    const started = waitFor(host, 'tool', (e) => e.event === 'start');
    const late = waitFor(host, 'exchange', (e) => e.input.type === 'tool_result');
    let abortedTools = 0;
    host.on('tool', (e) => (abortedTools += e.event === 'abort'));
    const r1 = host.submit('s', 'sleep 600 carefully', 'r1');
    await started;

    const before = performance.now();
    const outputs = await host.cancel('s');
    assert.deepEqual(outputs.map((o) => o.kind.type), ['set_timer'], 'no abort: only the grace timer');
    assert.equal(outputs[0].kind.purpose.timer, 'cancel_grace');
    const c1 = await r1;
    const waited = performance.now() - before;

    assert.equal(c1.outcome, 'cancelled');
    assert.ok(waited >= 190, `clean-up waited for the grace deadline (${waited} ms)`);
    assert.ok(host.log.some((l) => /timer \d+ \(cancel_grace\) fires/.test(l)));
    assert.match(host.transcript('s'), /-> error \(synthetic\) Error: user cancelled assistant tool calling/);

    // The tool finishes after clean-up; its result is reported and ignored (no outputs).
    const { reply } = await late;
    assert.deepEqual(reply.outputs, [], 'a result after clean-up is stale');
    assert.equal(abortedTools, 0, 'a tool left to finish is never aborted');

    assert.equal((await host.submit('s', 'next', 'r2')).outcome, 'completed');
  }));

test('a cancel waits for a `finish` tool that reports within the grace', TIMEOUT, () =>
  withHost({ tools: { sleep: sleepTool({ on_abort: 'finish' }) } }, async (host) => {
    const started = waitFor(host, 'tool', (e) => e.event === 'start');
    const r1 = host.submit('s', 'sleep 150 carefully', 'r1');
    await started;
    await host.cancel('s');
    const c1 = await r1;

    assert.equal(c1.outcome, 'cancelled');
    // The real result was written, not the synthetic one, and the turn did not go on to step 1.
    assert.match(host.transcript('s'), /tool sleep \{"ms":150\} -> slept 150 ms/);
    assert.doesNotMatch(host.transcript('s'), /synthetic|Done:/);
  }));

test('every RunId hears exactly one RunComplete across concurrent sessions', TIMEOUT, () =>
  withHost({}, async (host) => {
    const b1Running = waitFor(host, 'tool', (e) => e.event === 'start' && e.call.session === 'b');
    const runs = {
      a1: host.submit('a', 'sleep 100 first', 'a1'),
      a2: host.submit('a', 'sleep 10 second', 'a2'),
      a3: host.submit('a', 'third', 'a3'),
      b1: host.submit('b', 'sleep 10000 long', 'b1'),
      b2: host.submit('b', 'queued behind b1', 'b2'),
    };
    // The same submission again is the same run; a different one with its RunId is refused.
    const a1Again = host.submit('a', 'sleep 100 first', 'a1');
    const conflict = assert.rejects(
      host.submit('a', 'something else', 'a1'),
      (err) => err instanceof RejectedError && err.rejection.reason === 'run_id_conflict',
    );

    await host.cancelRun('a2'); // a2 is still waiting: it ends at once
    await b1Running;
    await host.cancel('b'); // b1 (its tool runs) and b2 (waiting): both were accepted before
    runs.b3 = host.submit('b', 'after the cancel', 'b3');

    const outcomes = {};
    for (const [id, p] of Object.entries(runs)) outcomes[id] = (await p).outcome;
    assert.deepEqual(outcomes, {
      a1: 'completed', a2: 'cancelled', a3: 'completed',
      b1: 'cancelled', b2: 'cancelled', b3: 'completed',
    });
    const again = await a1Again;
    assert.equal(again.seq, (await runs.a1).seq, 'the resubmission is the same run');
    await conflict;

    // Shut down (nothing is left unfinished), then count: one RunComplete per RunId, no more.
    await host.stop();
    const counts = {};
    for (const c of host.runCompletes) counts[c.run_id] = (counts[c.run_id] ?? 0) + 1;
    assert.deepEqual(counts, { a1: 1, a2: 1, a3: 1, b1: 1, b2: 1, b3: 1 });
    assert.equal(host.completions.length, 6, 'every outcome published carried a RunId');
  }));

test('an invalid input line gets an `error` naming the field, and the host goes on', TIMEOUT, () =>
  withHost({}, async (host) => {
    await assert.rejects(host.send({ type: 'cancel', session: 's', up_to: 'x' }), (err) => {
      assert.ok(err instanceof DriverError);
      assert.equal(err.type, 'error');
      assert.equal(err.field, 'input.up_to');
      assert.equal(err.line, 2, 'line 1 was the header');
      assert.match(err.message, /input\.up_to/);
      return true;
    });
    await assert.rejects(host.send({ type: 'submit', session: 's', prompt: 'hi', colour: 'red' }), { type: 'error', field: 'input.colour' });
    await assert.rejects(host.send('{not json'), { type: 'error', field: null });
    // Host misuse is `refused` (with a code) rather than `error`: nothing changed either.
    await assert.rejects(host.send({ type: 'cancel', session: 's', up_to: 99 }), { type: 'refused', code: 'watermark_ahead' });
    // A submission the engine itself rejects is a `reply`, not a driver error.
    await assert.rejects(host.submit('s', '', 'r0'), (err) => err instanceof RejectedError && err.rejection.reason === 'prompt_empty');

    const done = await host.submit('s', 'sleep 5 still fine', 'r1');
    assert.equal(done.outcome, 'completed');
    assert.deepEqual(host.runCompletes.map((c) => c.run_id), ['r1']);
  }));

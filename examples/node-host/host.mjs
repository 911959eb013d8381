// An example host for turnstile in plain Node (ES modules, no dependencies).
//
// The turnstile core decides the lifecycle of agent sessions but does no IO. `turnstile-driver`
// runs one engine behind JSON Lines: we write a trace header, then one input per line
// (`{"at": ms, "input": {...}}`), and the driver answers every line with exactly one line
// (`outputs`, `error`, `refused` or `failed`). This file is the host around it:
//
//   * `DriverProcess` spawns the driver and turns "write a line, read its reply" into a promise.
//   * `MemoryStore` is the durable store the outputs write to (ledger rows, messages, titles).
//   * `TurnstileHost` runs the host protocol of core/src/lib.rs: it sends ONE input at a time,
//     acts on every output of its reply in order, and queues the inputs those outputs produce
//     (a preparation, a model stream, a tool result, a timer firing), exactly like
//     core/examples/sync_host.rs, but with real async tools and real timers.
//
// Time: this host uses the real (monotonic) clock, and real `setTimeout` timers reported back as
// `timer_fired`. Virtual time (as in sync_host.rs) is deterministic only when every piece of IO
// answers synchronously; here the tools are real async functions that take real time (`sleep`),
// so a virtual clock would have to be advanced by hand to line up with them. With the real clock
// the two agree by construction, and the engine's own rules keep it safe: `at` never decreases
// (we clamp it), and a timer is reported only once the clock has reached its deadline.

import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

// ---------------------------------------------------------------------------------------------
// Locating and talking to the driver
// ---------------------------------------------------------------------------------------------

/** The driver binary: $TURNSTILE_DRIVER, else the workspace's debug build, else the PATH. */
export function driverPath() {
  if (process.env.TURNSTILE_DRIVER) return process.env.TURNSTILE_DRIVER;
  for (const name of ['turnstile-driver', 'turnstile-driver.exe']) {
    const local = fileURLToPath(new URL(`../../target/debug/${name}`, import.meta.url));
    if (existsSync(local)) return local;
  }
  return 'turnstile-driver';
}

/** A reply of type `error`, `refused` or `failed`, or a driver that went away. */
export class DriverError extends Error {
  constructor(reply, input) {
    const where = reply.field ? ` (field ${reply.field})` : '';
    const code = reply.code ? ` [${reply.code}]` : '';
    const message = reply.message ?? JSON.stringify(reply); // a `mismatch` has no message
    super(`driver ${reply.type} on line ${reply.line}${code}${where}: ${message}`);
    this.name = 'DriverError';
    this.type = reply.type; // 'error' | 'refused' | 'failed' | 'exited' ('mismatch' with `expect`)
    this.line = reply.line;
    this.field = reply.field ?? null;
    this.code = reply.code ?? null;
    this.reply = reply;
    this.input = input;
  }
}

/** A submission the engine rejected (`reply: rejected`): no sequence, no RunComplete. */
export class RejectedError extends Error {
  constructor(rejection, input) {
    super(`submission rejected: ${JSON.stringify(rejection)}`);
    this.name = 'RejectedError';
    this.rejection = rejection; // e.g. { reason: 'run_id_conflict', id: 'r1' }
    this.input = input;
  }
}

/**
 * One driver process. `request(line)` writes one line and resolves with the one reply line the
 * driver writes for it. The driver answers lines strictly in order, so a FIFO of waiters is all
 * the matching we need; we still check the reply's `line` against our own count.
 */
class DriverProcess {
  #child;
  #waiting = []; // [{ line, resolve, reject }] in the order the lines were written
  #line = 0; // lines written so far (the driver numbers every line from 1, the header included)
  #stderr = '';
  exited; // a promise of the exit code

  constructor(path, args = []) {
    this.#child = spawn(path, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.#child.stderr.setEncoding('utf8');
    this.#child.stderr.on('data', (d) => (this.#stderr += d));
    // A closed stdin while the driver has exited would otherwise surface as an unhandled error.
    this.#child.stdin.on('error', () => {});
    createInterface({ input: this.#child.stdout }).on('line', (text) => this.#onLine(text));
    this.exited = new Promise((resolve) => {
      this.#child.on('error', (err) => {
        // Spawning failed (e.g. ENOENT): nothing will ever answer.
        this.#failAll(`cannot run ${path}: ${err.message}`);
        resolve(null);
      });
      this.#child.on('exit', (code, signal) => {
        this.#failAll(`driver exited (code ${code}, signal ${signal}) ${this.#stderr.trim()}`);
        resolve(code);
      });
    });
  }

  /** Writes one line (an object, or raw text for tests of bad input) and awaits its reply. */
  request(line) {
    const text = typeof line === 'string' ? line : JSON.stringify(line);
    if (text.includes('\n')) throw new Error('a line must not contain a newline');
    this.#line += 1;
    return new Promise((resolve, reject) => {
      this.#waiting.push({ line: this.#line, resolve, reject });
      this.#child.stdin.write(text + '\n');
    });
  }

  /** Closes stdin (the driver exits 0 at the end of its input) and awaits the exit code. */
  async close() {
    this.#child.stdin.end();
    return this.exited;
  }

  #onLine(text) {
    const waiter = this.#waiting.shift();
    if (!waiter) return; // never happens: the driver writes one line per line read
    let reply;
    try {
      reply = JSON.parse(text);
    } catch (err) {
      return waiter.reject(new Error(`driver wrote a line that is not JSON: ${text}`));
    }
    // `ready` (the header's reply) has no line number; every other reply names its line.
    if (reply.type !== 'ready' && reply.line !== waiter.line) {
      return waiter.reject(new Error(`reply for line ${reply.line}, expected ${waiter.line}`));
    }
    waiter.resolve(reply);
  }

  #failAll(message) {
    for (const w of this.#waiting.splice(0)) {
      w.reject(new DriverError({ type: 'exited', line: w.line, message }));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Output classes (core/src/lib.rs, "Host protocol")
// ---------------------------------------------------------------------------------------------

// Every `outputs` reply carries each output's class beside it (`classes`): `must_answer` (start
// the IO and send its answer later), `must_perform` (do it now, in order) or `may_ignore`. The
// switch below handles the kinds this host knows; for any other kind the class decides, so an
// output that needs an answer is never dropped in silence.

/** A `finished` output (or completion record) is a RunComplete exactly when it has a RunId. */
export function isRunComplete(kind) {
  return kind.type === 'finished' && kind.run_id != null;
}

// Helpers for scripted providers: the StepEvent objects of the schema.
export const ev = {
  text: (text) => ({ kind: 'text_delta', text }),
  toolCall: (id, name, input = {}) => ({ kind: 'tool_call', id, name, input: JSON.stringify(input) }),
  finish: (reason = 'stop') => ({ kind: 'finished', reason }),
};

/** The example tool: sleeps `ms` milliseconds, and stops at once when its signal aborts. */
export function sleepTool({ on_abort = 'drop' } = {}) {
  return {
    on_abort,
    run: ({ ms = 100 }, { signal }) =>
      new Promise((resolve, reject) => {
        const t = setTimeout(() => resolve(`slept ${ms} ms`), ms);
        signal.addEventListener('abort', () => {
          clearTimeout(t);
          reject(signal.reason);
        });
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// The in-memory store
// ---------------------------------------------------------------------------------------------

/**
 * What the `store` and `commit` outputs write, kept in memory (so every commit is durable at
 * once). It is also what the scripted provider reads its history from: a `start_step` comes
 * after every write it depends on, so the store is up to date when the step starts.
 */
export class MemoryStore {
  ledger = new Map(); // seq -> { session, seq, runId, prompt, state, completion }
  messages = new Map(); // message id -> { id, session, seq, role, text, calls, finish }
  sessions = new Map(); // session -> { title, prompt_tokens, completion_tokens, cost_micros }
  #uncommitted = new Map(); // session -> sequences whose outcome is written but not committed

  /** Inserts a ledger row when the engine accepts a submission (before answering the caller). */
  insertRow(seq, input) {
    this.ledger.set(seq, {
      session: input.session, seq, runId: input.run_id ?? null, prompt: input.prompt,
      state: 'waiting', completion: null,
    });
  }

  /** Applies one `store` output. Writes of a session arrive, and are applied, in order. */
  apply(op) {
    const msg = () => this.messages.get(op.id);
    const call = () => msg().calls.find((c) => c.call === op.call);
    const session = () => {
      if (!this.sessions.has(op.session)) {
        const fresh = { title: null, prompt_tokens: 0, completion_tokens: 0, cost_micros: 0 };
        this.sessions.set(op.session, fresh);
      }
      return this.sessions.get(op.session);
    };
    switch (op.op) {
      case 'ledger_activated': this.ledger.get(op.seq).state = 'active'; break;
      case 'ledger_paused': this.ledger.get(op.seq).state = 'paused'; break;
      case 'ledger_outcome': {
        const c = op.completion;
        this.#uncommitted.set(c.session, [...(this.#uncommitted.get(c.session) ?? []), c.seq]);
        const row = this.ledger.get(c.seq);
        if (row) Object.assign(row, { state: c.outcome, completion: c });
        break;
      }
      case 'child_accepted':
        // A sub-agent's submission: a ledger row of its own, without a RunId.
        this.ledger.set(op.seq, {
          session: op.session, seq: op.seq, runId: null, prompt: op.prompt, state: 'active', completion: null,
        });
        session().title = op.title;
        break;
      case 'user_message': this.#newMessage(op, 'user', op.text); break;
      case 'assistant_message': this.#newMessage(op, 'assistant', ''); break;
      case 'summary_message': this.#newMessage(op, 'summary', ''); break;
      case 'append_text':
      case 'summary_text': msg().text += op.text; break;
      case 'message_reset': // a retried attempt starts the message over
      case 'summary_reset': Object.assign(msg(), { text: '', calls: [] }); break;
      case 'summary_deleted': this.messages.delete(op.id); break;
      case 'summary_done':
        msg().finish = { reason: 'summary' };
        Object.assign(session(), { prompt_tokens: 0, completion_tokens: op.completion_tokens });
        break;
      case 'summary_failed': msg().finish = { reason: 'error', title: op.title, message: op.message }; break;
      case 'tool_input_started':
        msg().calls.push({ call: op.call, name: op.name, input: null, result: null });
        break;
      case 'tool_call': {
        const existing = call();
        if (existing) Object.assign(existing, { name: op.name, input: op.input });
        else msg().calls.push({ call: op.call, name: op.name, input: op.input, result: null });
        break;
      }
      case 'tool_result':
        call().result = { content: op.content, is_error: op.is_error, synthetic: op.synthetic };
        break;
      case 'message_finished': msg().finish = op.finish; break;
      case 'title': session().title = op.title; break;
      case 'session_usage': {
        const s = session();
        if (op.prompt_tokens != null) s.prompt_tokens = op.prompt_tokens;
        if (op.completion_tokens != null) s.completion_tokens = op.completion_tokens;
        s.cost_micros += op.cost_micros; // the cost is added, the gauges are set
        break;
      }
      // Reasoning is kept by a real store for the next request; this example does not show it.
      case 'reasoning_started': case 'append_reasoning': case 'reasoning_ended': break;
      case 'flush': break; // nothing is deferred in memory
      default: throw new Error(`unknown store op ${op.op}`);
    }
  }

  #newMessage(op, role, text) {
    const seq = op.seq ?? null; // a summary message belongs to no submission
    this.messages.set(op.id, { id: op.id, session: op.session, seq, role, text, calls: [], finish: null });
  }

  /** A `commit` ends the session's transaction; in memory it is durable at once. */
  commit(session) {
    this.#uncommitted.delete(session);
  }

  /** True once the write of this submission's outcome is committed (so it may be published). */
  isDurable(session, seq) {
    return !(this.#uncommitted.get(session) ?? []).includes(seq);
  }

  /** The session's messages in order: what a provider request is built from. */
  history(session) {
    return [...this.messages.values()]
      .filter((m) => m.session === session)
      .sort((a, b) => a.id - b.id)
      .map((m) => structuredClone(m));
  }

  /** The session's history as readable lines. */
  transcript(session) {
    const lines = [];
    for (const m of this.history(session)) {
      const why = m.finish?.message ? `: ${m.finish.message}` : '';
      const finish = m.finish ? ` [${m.finish.reason}${why}]` : '';
      lines.push(`${m.role}: ${m.text}${m.role === 'assistant' ? finish : ''}`);
      for (const c of m.calls) {
        const r = c.result;
        const flags = `${r?.is_error ? 'error ' : ''}${r?.synthetic ? '(synthetic) ' : ''}`;
        const shown = r ? `${flags}${r.content}` : '(no result)';
        lines.push(`  tool ${c.name} ${c.input} -> ${shown}`);
      }
    }
    return lines.join('\n');
  }
}

// ---------------------------------------------------------------------------------------------
// The host
// ---------------------------------------------------------------------------------------------

/** The key of one tool call (`CallIo`): a call id is unique only within its step. */
const callKey = (io) => `${io.session}/${io.seq}/${io.turn}/${io.step}/${io.call}`;

/**
 * A host over one `turnstile-driver`.
 *
 *   const host = await TurnstileHost.start({ provider, tools });
 *   const done = await host.submit('s', 'hello', 'run-1');   // its RunComplete
 *   await host.stop();
 *
 * Events (for tests and UIs): 'exchange' {input, reply} after each input, 'tool' {event, name,
 * call} when a tool starts/finishes/is aborted, 'finished' {completion}, 'log' line.
 */
export class TurnstileHost extends EventEmitter {
  store = new MemoryStore();
  log = []; // what happened, one line each: "  123 ms  ..."
  runCompletes = []; // every RunComplete published, in order
  completions = []; // every outcome published (with or without a RunId)

  #driver;
  #provider;
  #tools;
  #inbox = []; // inputs waiting to be sent: [{ input, waiter }]
  #pumping = false;
  #waiters = new Map(); // seq -> [{ resolve, reject }] waiting for that submission's completion
  #timers = new Map(); // timer id -> setTimeout handle
  #running = new Map(); // callKey -> { controller, name } for tools that are running
  #t0 = performance.now();
  #at = 0; // the last `at` sent: never decreases
  #broken = null; // the error that made this host unusable (the engine failed, the driver died)
  #stopped = false;

  /**
   * Options: `provider(session, step, history)` returns the stream events of one model step
   * (an array, or a promise of one); `tools` maps a name to `{ run(input, {signal, call}),
   * on_abort? }` where `run` returns the result text (or a ToolOutput object); `config` and
   * `start` go into the trace header; `driver` overrides the binary; `record` asks the driver
   * for a flight recording at that path (replayable with the simulator).
   */
  static async start(options = {}) {
    const host = new TurnstileHost(options);
    const header = { format: 'turnstile-trace', version: 1 };
    if (options.config) header.config = options.config;
    if (options.start) header.start = options.start;
    const ready = await host.#driver.request(header);
    if (ready.type !== 'ready') {
      await host.#driver.exited;
      throw new DriverError(ready, header);
    }
    host.#note('driver ready');
    return host;
  }

  constructor({ provider, tools = { sleep: sleepTool() }, driver = driverPath(), record } = {}) {
    super();
    if (typeof provider !== 'function') throw new TypeError('a provider function is required');
    this.#provider = provider;
    this.#tools = tools;
    this.#driver = new DriverProcess(driver, record ? ['--record', record] : []);
    // If the driver dies, nothing will ever answer: fail every waiter instead of hanging.
    this.#driver.exited.then((code) => {
      if (this.#stopped) return;
      this.#fail(new DriverError({ type: 'exited', line: null, message: `driver exited with code ${code}` }));
    });
  }

  // --- the client commands ---------------------------------------------------------------

  /**
   * Hands a prompt to a session. Resolves with the run's RunComplete (the `finished` output that
   * carries this RunId), whatever its outcome: completed, failed, cancelled, interrupted. Rejects
   * with a RejectedError if the engine rejects the submission, a DriverError if the driver does.
   * Without a RunId it resolves with the submission's outcome (there is no RunComplete then).
   */
  submit(session, prompt, runId) {
    const input = { type: 'submit', session, prompt };
    if (runId != null) input.run_id = runId;
    return new Promise((resolve, reject) => this.#enqueue(input, { kind: 'submit', resolve, reject }));
  }

  /**
   * Escape on a session: cancels every unfinished submission of the session accepted so far
   * (`up_to` omitted = the newest sequence; right for a host whose acceptor is the core).
   * Resolves with the outputs of the cancel's transition once they have been acted on.
   */
  cancel(session) {
    return this.send({ type: 'cancel', session });
  }

  /** Cancels exactly one run (a finished or unknown run is a no-op). */
  cancelRun(runId) {
    return this.send({ type: 'cancel_run', run_id: runId });
  }

  /** Sends any input (or a raw line, for tests of bad input); resolves with its outputs. */
  send(input) {
    return new Promise((resolve, reject) => this.#enqueue(input, { kind: 'plain', resolve, reject }));
  }

  /** The session's history as readable lines. */
  transcript(session) {
    return this.store.transcript(session);
  }

  /**
   * Shuts the engine down (every unfinished run ends `interrupted` and hears its RunComplete),
   * waits for `stopped`, then stops timers and tools and closes the driver. Resolves with the
   * driver's exit code.
   */
  async stop() {
    if (!this.#broken && !this.#stopped) {
      const stopped = new Promise((resolve) => this.once('stopped', resolve));
      try {
        const outputs = await this.send({ type: 'shutdown' });
        // `stopped` comes at once when nothing is unfinished, else once clean-up is done (the
        // tools left to finish report, or the shutdown-deadline timer fires).
        if (!outputs.some((o) => o.kind.type === 'stopped')) await stopped;
      } catch {
        // The driver is gone already; clean up below.
      }
    }
    this.#stopped = true;
    for (const handle of this.#timers.values()) clearTimeout(handle);
    this.#timers.clear();
    for (const { controller } of this.#running.values()) controller.abort(new Error('host stopped'));
    this.#running.clear();
    return this.#driver.close();
  }

  // --- the loop: one input at a time ------------------------------------------------------

  /** The host's clock in ms since it started: monotonic, and never below what was sent. */
  #clock() {
    this.#at = Math.max(this.#at, Math.floor(performance.now() - this.#t0));
    return this.#at;
  }

  #enqueue(input, waiter = null) {
    if (this.#broken) return waiter?.reject(this.#broken);
    if (this.#stopped) return waiter?.reject(new Error('host stopped'));
    this.#inbox.push({ input, waiter });
    this.#pump();
  }

  /**
   * Steps 1 and 2 of the host protocol: send the next input, await its reply, act on each of
   * its outputs in order (which may queue more inputs), and repeat until the inbox is empty.
   * Only one pump runs at a time, so the driver never sees two inputs in flight.
   */
  async #pump() {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#inbox.length > 0 && !this.#broken) {
        const { input, waiter } = this.#inbox.shift();
        const line = typeof input === 'string' ? input : { at: this.#clock(), input };
        let reply;
        try {
          reply = await this.#driver.request(line);
        } catch (err) {
          waiter?.reject(err);
          this.#fail(err);
          break;
        }
        this.emit('exchange', { input, reply });
        if (reply.type !== 'outputs') {
          this.#onProblem(reply, input, waiter);
          continue;
        }
        try {
          reply.outputs.forEach((out, i) => this.#act(out.kind, reply.classes[i], waiter, input));
        } catch (err) {
          // A host bug or an output this host does not know: stop rather than hang.
          waiter?.reject(err);
          this.#fail(err);
          break;
        }
        if (waiter?.kind === 'plain') waiter.resolve(reply.outputs);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** An `error` (bad line), `refused` (host misuse) or `failed` (engine failed) reply. */
  #onProblem(reply, input, waiter) {
    const err = new DriverError(reply, input);
    this.#note(`${reply.type}: ${err.message}`);
    if (reply.type === 'failed') {
      // The engine accepts nothing more and the driver exits 70.
      waiter?.reject(err);
      this.#fail(err);
    } else if (waiter) {
      // A client command went wrong; the engine changed nothing and goes on.
      waiter.reject(err);
    } else {
      // An input this host generated itself was refused: a host bug, and the submission that
      // needed it would wait forever. Fail loudly.
      this.#fail(err);
    }
  }

  /** Makes the host unusable and rejects everything still waiting. */
  #fail(err) {
    if (this.#broken) return;
    this.#broken = err;
    this.#note(`host failed: ${err.message}`);
    for (const list of this.#waiters.values()) for (const w of list) w.reject(err);
    this.#waiters.clear();
    for (const { waiter } of this.#inbox.splice(0)) waiter?.reject(err);
    this.emit('failed', err);
  }

  // --- acting on one output -------------------------------------------------------------

  #act(kind, outputClass, waiter, input) {
    switch (kind.type) {
      // The answer to a submit: always the first output of its transition.
      case 'reply': return this.#onReply(kind, waiter, input);

      // must_answer: start the IO; its reply becomes a later input.
      case 'prepare': {
        // A real host resolves the model, credentials and tool servers here.
        const setup = this.#setup();
        return this.#enqueue({ type: 'prepared', session: kind.session, seq: kind.seq, setup });
      }
      case 'start_step': return this.#startStep(kind.step);
      case 'run_tool': return this.#runTool(kind);
      case 'set_timer': return this.#setTimer(kind.timer, kind.deadline, kind.purpose);
      case 'refresh_credentials':
        // A provider said 401; this example always "refreshes" successfully.
        return this.#enqueue({ type: 'credentials_refreshed', attempt: kind.attempt, ok: true });
      case 'start_summary':
        // Only with a known context window or a manual summarize; answer with a fixed summary.
        this.#enqueue({ type: 'summary', io: kind.io, event: ev.text('Summary of the talk so far.') });
        return this.#enqueue({ type: 'summary', io: kind.io, event: ev.finish('stop') });

      // must_perform: do it now, in order.
      case 'store': return this.store.apply(kind);
      case 'commit': return this.store.commit(kind.session);
      case 'finished': return this.#publish(kind);

      // may_ignore: stop IO nothing waits for any more.
      case 'abort_tool': return this.#abortTool(kind.call);
      case 'cancel_timer': {
        clearTimeout(this.#timers.get(kind.timer));
        this.#timers.delete(kind.timer);
        return;
      }
      case 'request_title': {
        // Optional: nothing waits for it. A "title model" that takes the first few words.
        const title = kind.prompt.split(/\s+/).slice(0, 5).join(' ');
        return this.#enqueue({ type: 'title_generated', session: kind.session, seq: kind.seq, title });
      }
      case 'abort_step': // the scripted stream is already queued; its late events are ignored
      case 'abort_preparation': // preparation answers at once here
      case 'abort_refresh':
      case 'abort_summary':
      case 'abort_title':
        return this.#note(`${kind.type} (nothing to stop)`);
      case 'stopped':
        this.#note('stopped');
        return this.emit('stopped');

      default:
        // Never `default: break`: an output this host does not know might need an answer.
        if (outputClass === 'may_ignore') return this.#note(`${kind.type} (may be ignored)`);
        throw new Error(`unhandled output ${kind.type} (class ${outputClass})`);
    }
  }

  #onReply(kind, waiter, input) {
    if (waiter?.kind !== 'submit') return; // a summarize's reply: nothing waits for it here
    switch (kind.reply) {
      case 'accepted':
        // Insert the ledger row (durable at once in memory), then the caller waits for the end.
        this.store.insertRow(kind.seq, input);
        this.#note(`accepted ${kind.session} #${kind.seq} run=${kind.run_id ?? '-'} (${kind.mode})`);
        return this.#wait(kind.seq, waiter);
      case 'existing': {
        // A resubmission of a known RunId: the same run, never run again.
        this.#note(`existing run ${kind.run_id} #${kind.seq} outcome=${kind.outcome ?? 'pending'}`);
        if (kind.outcome == null) return this.#wait(kind.seq, waiter);
        const row = this.store.ledger.get(kind.seq);
        const { session, seq, run_id, outcome } = kind;
        return waiter.resolve(row?.completion ?? { type: 'finished', session, seq, run_id, outcome });
      }
      case 'rejected':
        this.#note(`rejected ${JSON.stringify(kind.error)}`);
        return waiter.reject(new RejectedError(kind.error, input));
      default:
        throw new Error(`unknown reply ${kind.reply}`);
    }
  }

  #wait(seq, waiter) {
    if (!this.#waiters.has(seq)) this.#waiters.set(seq, []);
    this.#waiters.get(seq).push(waiter);
  }

  /** `finished`: publish the outcome (and the RunComplete) once its commit is durable. */
  #publish(c) {
    if (!this.store.isDurable(c.session, c.seq)) throw new Error(`completion of #${c.seq} before its commit`);
    this.completions.push(c);
    if (isRunComplete(c)) this.runCompletes.push(c);
    const what = isRunComplete(c) ? `RunComplete ${c.run_id}` : 'outcome';
    this.#note(`#${c.seq} ${what} ${c.outcome}${c.text ? ` text=${JSON.stringify(c.text)}` : ''}`);
    this.emit('finished', c);
    for (const w of this.#waiters.get(c.seq) ?? []) w.resolve(c);
    this.#waiters.delete(c.seq);
  }

  /** What preparation resolves: the tools (with what an abort does to each). */
  #setup() {
    const tools = Object.entries(this.#tools).map(([name, t]) => ({ name, on_abort: t.on_abort ?? 'drop' }));
    // context_window 0: unknown, so the session never summarizes in this example.
    return { tools, context_window: 0, titled: false };
  }

  /** A model step: ask the scripted provider, and queue its events as `step` inputs in order. */
  #startStep(step) {
    const history = this.store.history(step.session);
    const events = this.#provider(step.session, step.step, history);
    const queue = (list) => {
      for (const event of list) this.#enqueue({ type: 'step', step, event });
    };
    this.#note(`step ${step.session} #${step.seq} step ${step.step} attempt ${step.attempt}`);
    if (typeof events?.then === 'function') events.then(queue, (err) => this.#fail(err));
    else queue(events);
  }

  /** A tool call: run the tool as a real async function, and report its result when it ends. */
  #runTool({ call, name, input }) {
    const tool = this.#tools[name];
    const key = callKey(call);
    const controller = new AbortController();
    this.#running.set(key, { controller, name });
    this.#note(`tool ${name} ${input} starts (${call.call})`);
    this.emit('tool', { event: 'start', name, call });
    let args;
    try {
      args = JSON.parse(input);
    } catch {
      args = {}; // the engine never runs a call whose input is not JSON; be safe anyway
    }
    Promise.resolve()
      .then(() => tool.run(args, { signal: controller.signal, call }))
      .then(
        (value) => (typeof value === 'string' ? { content: value, is_error: false } : { ...value }),
        (err) => ({ content: `Error: ${err?.message ?? err}`, is_error: true }),
      )
      .then((result) => {
        this.#running.delete(key);
        if (controller.signal.aborted) {
          // The engine said abort_tool (or the host stopped): nothing waits for this call.
          return;
        }
        this.#note(`tool ${name} (${call.call}) reports ${JSON.stringify(result.content)}`);
        this.emit('tool', { event: 'result', name, call, result });
        // Reported even for a turn being cancelled: a tool left to finish is written if it
        // arrives before clean-up; a late one is ignored by the engine (no outputs).
        this.#enqueue({ type: 'tool_result', call, result });
      });
  }

  #abortTool(call) {
    const running = this.#running.get(callKey(call));
    if (!running) return; // already finished: its result is stale and ignored
    this.#running.delete(callKey(call));
    this.#note(`tool ${running.name} (${call.call}) aborted`);
    this.emit('tool', { event: 'abort', name: running.name, call });
    running.controller.abort(new Error('aborted by the engine'));
  }

  /** A real timer; reported only once our clock has reached the deadline (else: refused). */
  #setTimer(timer, deadline, purpose) {
    const arm = () => {
      const handle = setTimeout(() => {
        if (this.#clock() < deadline) return arm(); // a timer may fire a hair early
        this.#timers.delete(timer);
        this.#note(`timer ${timer} (${purpose.timer}) fires`);
        this.#enqueue({ type: 'timer_fired', timer });
      }, Math.max(0, deadline - this.#clock()));
      this.#timers.set(timer, handle);
    };
    // Every model step arms a stream watchdog (cancelled when the stream ends): not logged.
    if (purpose.timer !== 'stream_idle') this.#note(`timer ${timer} (${purpose.timer}) at ${deadline} ms`);
    arm();
  }

  #note(text) {
    const line = `${String(this.#clock()).padStart(6)} ms  ${text}`;
    this.log.push(line);
    if (process.env.TURNSTILE_HOST_LOG) console.error(line);
    this.emit('log', line);
  }
}

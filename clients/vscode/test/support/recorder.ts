/**
 * A conversation host for the Node tests: records what the daemon sent (events, permission
 * requests, messages, sessions) and answers permission requests with a script.
 */

import type {
  McpServerChangedParams,
  PermissionRequestParams,
  PermissionRequestResult,
  SessionNewResult,
  TurnEventParams,
} from "../../src/protocol.generated";
import type { ConversationHost, ShowMessageParams } from "../../src/session";
import { EMPTY, reduce, type Block, type Transcript } from "../../src/transcript";
import { deadline } from "./processes";

/** A conversation host that records events and answers permission requests with a script. */
export class Recorder implements ConversationHost {
  events: TurnEventParams[] = [];
  asked: PermissionRequestParams[] = [];
  messages: ShowMessageParams[] = [];
  mcpChanges: McpServerChangedParams[] = [];
  sessions: SessionNewResult[] = [];
  transcript: Transcript = EMPTY;
  private waiters: Array<{ test: () => boolean; done: () => void }> = [];

  constructor(public answer: (request: PermissionRequestParams, signal: AbortSignal) => Promise<PermissionRequestResult>) {}

  onEvent(params: TurnEventParams): void {
    this.events.push(params);
    this.transcript = reduce(this.transcript, { type: "event", params }).transcript;
    this.wake();
  }

  onSession(session: SessionNewResult): void {
    this.sessions.push(session);
  }

  showMessage(params: ShowMessageParams): void {
    this.messages.push(params);
    this.wake();
  }

  onMcpServerChanged(params: McpServerChangedParams): void {
    this.mcpChanges.push(params);
    this.wake();
  }

  askPermission(request: PermissionRequestParams, signal: AbortSignal): Promise<PermissionRequestResult> {
    this.asked.push(request);
    this.wake();
    return this.answer(request, signal);
  }

  /** Resolves once `test` holds, re-checked on every event; bounded by `ms`. */
  until(test: () => boolean, what: string, ms = 10000): Promise<void> {
    if (test()) return Promise.resolve();
    return deadline(new Promise<void>((done) => this.waiters.push({ test, done })), ms, what);
  }

  kinds(): string[] {
    return this.events.map((e) => e.event.kind);
  }

  blocks<K extends Block["kind"]>(kind: K): Array<Extract<Block, { kind: K }>> {
    return this.transcript.blocks.filter((b): b is Extract<Block, { kind: K }> => b.kind === kind);
  }

  private wake(): void {
    this.waiters = this.waiters.filter((w) => {
      if (!w.test()) return true;
      w.done();
      return false;
    });
  }
}

export const allow = (decision: "allowOnce" | "allowAlways") => async (request: PermissionRequestParams) => {
  const option = request.options.find((o) => o.decision === decision);
  return option?.rule ? { decision, rule: option.rule } : { decision };
};

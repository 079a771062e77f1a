/**
 * The language client that runs the Heddle daemon over stdio, and its restart.
 *
 * Handlers registered here survive restarts: every new `LanguageClient` gets them again. Each
 * start bumps `generation`, so the conversation knows its session died with the old daemon.
 */

import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  State,
  type ClientCapabilities,
  type LanguageClientOptions,
  type ServerOptions,
  type StaticFeature,
} from "vscode-languageclient/node";
import { PROTOCOL_VERSION, type ServerHeddleCapabilities } from "./protocol.generated";
import type { CancellationSignal, Disposable, Rpc } from "./session";
import * as settings from "./settings";

const STOP_TIMEOUT_MS = 3000;

/** Announces `capabilities.experimental.heddle` so the daemon sends permission requests. */
class HeddleFeature implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = { ...(capabilities.experimental as object), heddle: { permissionRequests: true } };
  }
  initialize(): void {}
  getState() {
    return { kind: "static" as const };
  }
  clear(): void {}
}

type Handler = (params: any, token: CancellationSignal) => unknown;

export class Daemon implements Rpc, vscode.Disposable {
  private client?: LanguageClient;
  private starting?: Promise<LanguageClient>;
  private readonly notificationHandlers = new Map<string, Handler>();
  private readonly requestHandlers = new Map<string, Handler>();
  private readonly stateEmitter = new vscode.EventEmitter<"starting" | "running" | "stopped">();
  readonly onDidChangeState = this.stateEmitter.event;
  generation = 0;
  server?: ServerHeddleCapabilities;

  constructor(private readonly log: vscode.LogOutputChannel) {}

  get isRunning(): boolean {
    return this.client?.state === State.Running;
  }

  /** The running client, starting the daemon if it is not running. */
  ready(): Promise<LanguageClient> {
    if (this.client?.state === State.Running) return Promise.resolve(this.client);
    if (!this.starting) {
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  async restart(): Promise<LanguageClient> {
    await this.stop();
    return this.ready();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    try {
      if (client.needsStop()) await client.stop(STOP_TIMEOUT_MS);
    } catch (error) {
      this.log.warn(`stopping the daemon: ${String(error)}`);
    }
    await client.dispose(STOP_TIMEOUT_MS).catch(() => undefined);
    this.stateEmitter.fire("stopped");
  }

  async sendRequest<R>(method: string, params: unknown): Promise<R> {
    const client = await this.ready();
    return client.sendRequest<R>(method, params);
  }

  async sendNotification(method: string, params: unknown): Promise<void> {
    const client = this.client;
    if (client?.state === State.Running) await client.sendNotification(method, params);
  }

  onNotification(method: string, handler: (params: any) => void): Disposable {
    return this.register(this.notificationHandlers, method, handler, (c, h) => c.onNotification(method, h));
  }

  onRequest(method: string, handler: Handler): Disposable {
    return this.register(this.requestHandlers, method, handler, (c, h) => c.onRequest(method, h));
  }

  dispose(): void {
    void this.stop();
    this.stateEmitter.dispose();
  }

  private register(
    table: Map<string, Handler>,
    method: string,
    handler: Handler,
    attach: (client: LanguageClient, handler: Handler) => vscode.Disposable,
  ): Disposable {
    table.set(method, handler);
    const attached = this.client ? attach(this.client, handler) : undefined;
    return {
      dispose: () => {
        if (table.get(method) === handler) table.delete(method);
        attached?.dispose();
      },
    };
  }

  private async start(): Promise<LanguageClient> {
    const launch = settings.daemonLaunch();
    const workspace = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    // No `transport`: the daemon speaks stdio and gets no extra `--stdio` argument.
    const serverOptions: ServerOptions = {
      command: launch.command,
      args: launch.args,
      options: { env: { ...process.env, ...launch.env }, cwd: workspace },
    };
    const clientOptions: LanguageClientOptions = {
      outputChannel: this.log,
      // The daemon reads files itself; it needs no document sync.
      documentSelector: [],
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          this.log.error("The Heddle daemon stopped. Run “Heddle: Restart daemon” to start it again.");
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      initializationFailedHandler: () => false,
    };
    const client = new LanguageClient("heddle", "Heddle", serverOptions, clientOptions);
    client.registerFeature(new HeddleFeature());
    for (const [method, handler] of this.notificationHandlers) client.onNotification(method, handler);
    for (const [method, handler] of this.requestHandlers) client.onRequest(method, handler);
    client.onDidChangeState((event) => {
      if (event.newState === State.Stopped && this.client === client) this.stateEmitter.fire("stopped");
    });
    this.client = client;
    this.generation++;
    this.stateEmitter.fire("starting");
    this.log.info(`starting the daemon: ${[launch.command, ...launch.args].join(" ")}`);
    try {
      await client.start();
    } catch (error) {
      if (this.client === client) this.client = undefined;
      await client.dispose(STOP_TIMEOUT_MS).catch(() => undefined);
      this.stateEmitter.fire("stopped");
      throw new DaemonStartError(launch, error);
    }
    this.server = (client.initializeResult?.capabilities.experimental as { heddle?: ServerHeddleCapabilities } | undefined)?.heddle;
    if (this.server && this.server.protocolVersion !== PROTOCOL_VERSION) {
      this.log.warn(`the daemon speaks protocol ${this.server.protocolVersion}, this extension ${PROTOCOL_VERSION}`);
    }
    this.log.info(`daemon ready: heddle ${this.server?.serverVersion ?? "(unknown version)"}`);
    this.stateEmitter.fire("running");
    return client;
  }
}

export class DaemonStartError extends Error {
  constructor(launch: settings.DaemonLaunch, cause: unknown) {
    super(`Could not start the Heddle daemon (${[launch.command, ...launch.args].join(" ")}): ${messageOf(cause)}`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

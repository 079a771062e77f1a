/**
 * The language client that runs the Heddle daemon over stdio, and its restart.
 *
 * Handlers registered here survive restarts: every new `LanguageClient` gets them again. Each
 * start bumps `generation`, so the conversation knows its session died with the old daemon.
 */

import * as vscode from "vscode";
import {
  CancellationToken,
  CloseAction,
  ErrorAction,
  LanguageClient,
  State,
  type ClientCapabilities,
  type DocumentSelector,
  type LanguageClientOptions,
  type ServerOptions,
  type StaticFeature,
} from "vscode-languageclient/node";
import { applyWorkspaceEdit } from "./applyEdit";
import { DiagnosticsSource } from "./diagnostics";
import { Methods, PROTOCOL_VERSION, type ApplyWorkspaceEditParams, type ClientHeddleCapabilities, type DiagnosticsListParams, type ServerHeddleCapabilities } from "./protocol.generated";
import type { CancellationSignal, Disposable, Rpc } from "./session";
import * as settings from "./settings";

const STOP_TIMEOUT_MS = 3000;

/** What the daemon may register dynamically: document sync and workspace notifications. */
const DYNAMIC_METHODS = new Set([
  "textDocument/didOpen",
  "textDocument/didChange",
  "textDocument/didClose",
  "workspace/didChangeWorkspaceFolders",
  "workspace/didChangeWatchedFiles",
]);

/**
 * Announces `capabilities.experimental.heddle`: the daemon sends permission requests, edits
 * can be answered per hunk (the review diff), and the daemon may ask for a document's
 * diagnostics around an edit (`diagnostics/list`). The standard `workspace.applyEdit` and
 * `workspaceEdit.documentChanges` the LanguageClient declares itself.
 */
class HeddleFeature implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    const heddle: ClientHeddleCapabilities = { permissionRequests: true, reviewHunks: true, diagnosticRequests: true };
    capabilities.experimental = { ...(capabilities.experimental as object), heddle };
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
  private readonly diagnostics = new DiagnosticsSource();

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
    this.diagnostics.dispose();
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
      // The daemon sees the buffers of the workspace's files (reads get the unsaved text, edits
      // go through the editor). Nothing else: it provides no language features.
      documentSelector: documentSelector(),
      middleware: {
        // Only document sync may be registered dynamically, so the daemon can never take over
        // completion, hover or the like for the user's files.
        handleRegisterCapability: async (params, next) => {
          await next({ registrations: params.registrations.filter((r) => DYNAMIC_METHODS.has(r.method)) }, CancellationToken.None);
        },
      },
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
    // Installed after the client's own handler, so it takes its place: it says why an edit was
    // not applied and saves per `heddle.saveAfterEdit` (vscode-languageclient 9 has no middleware
    // for this request).
    client.onRequest(Methods.WorkspaceApplyEdit, (params: ApplyWorkspaceEditParams) =>
      applyWorkspaceEdit(params, client.protocol2CodeConverter, this.log));
    client.onRequest(Methods.DiagnosticsList, (params: DiagnosticsListParams) => this.diagnostics.list(params));
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

/** `file:` documents under the workspace folders (as the window opened with them). */
function documentSelector(): DocumentSelector {
  // A RelativePattern, not a glob of the path, so folders with `[` or `{` in their names work;
  // vscode-languageclient hands the pattern to VS Code's matcher as it is.
  return (vscode.workspace.workspaceFolders ?? [])
    .filter((folder) => folder.uri.scheme === "file")
    .map((folder) => ({ scheme: "file", pattern: new vscode.RelativePattern(folder, "**/*") as unknown as string }));
}

export class DaemonStartError extends Error {
  constructor(launch: settings.DaemonLaunch, cause: unknown) {
    super(`Could not start the Heddle daemon (${[launch.command, ...launch.args].join(" ")}): ${messageOf(cause)}`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

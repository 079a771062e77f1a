/**
 * A thin wrapper over the vscode API for what Heddle needs from the editor: the workspace, the
 * active file and selection as context, a context key, the read-only texts of diff views, and
 * the writable proposal documents of the edit review.
 */

import * as path from "node:path";
import * as vscode from "vscode";
import type { ContextItem } from "./protocol.generated";

const DIFF_SCHEME = "heddle-diff";
export const PROPOSAL_SCHEME = "heddle-proposal";

/** The folder sessions run in: the first workspace folder, else the active file's folder. */
export function workspaceFolder(): string | undefined {
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (folder?.uri.scheme === "file") return folder.uri.fsPath;
  const active = vscode.window.activeTextEditor?.document.uri;
  return active?.scheme === "file" ? path.dirname(active.fsPath) : undefined;
}

/** The active file (its unsaved text if dirty) and the selection, as `turn/start` context. */
export function activeContext(): ContextItem[] {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== "file") return [];
  const document = editor.document;
  const item: ContextItem = { path: document.uri.fsPath, language: document.languageId };
  const selection = editor.selection;
  if (!selection.isEmpty) {
    item.text = document.getText(selection);
    // A selection ending at column 0 does not include that line.
    const endLine = selection.end.character === 0 && selection.end.line > selection.start.line
      ? selection.end.line - 1
      : selection.end.line;
    item.range = { startLine: selection.start.line + 1, endLine: endLine + 1 };
  } else if (document.isDirty) {
    item.text = document.getText();
  }
  return [item];
}

/**
 * The workspace files a prompt @-mentions, as `turn/start` context: those that exist inside
 * `workspace` (a mention of anything else is left as text), with their unsaved text if open.
 */
export async function mentionContext(workspace: string, paths: string[]): Promise<ContextItem[]> {
  const items: ContextItem[] = [];
  for (const relative of paths) {
    const absolute = path.resolve(workspace, relative);
    if (absolute !== workspace && !absolute.startsWith(workspace + path.sep)) continue;
    const uri = vscode.Uri.file(absolute);
    try {
      const stat = await vscode.workspace.fs.stat(uri);
      if (stat.type !== vscode.FileType.File) continue;
    } catch {
      continue;
    }
    const open = vscode.workspace.textDocuments.find((doc) => doc.uri.toString() === uri.toString());
    const item: ContextItem = { path: absolute };
    if (open) item.language = open.languageId;
    if (open?.isDirty) item.text = open.getText();
    items.push(item);
  }
  return items;
}

/** A quick pick of the workspace's files (as VS Code's search excludes them); the relative path. */
export async function pickWorkspaceFile(): Promise<string | undefined> {
  const files = await vscode.workspace.findFiles("**/*", undefined, 5000);
  const items = files
    .map((uri) => vscode.workspace.asRelativePath(uri, false))
    .sort()
    .map((label) => ({ label }));
  const choice = await vscode.window.showQuickPick(items, { title: "Mention a file", placeHolder: "The file goes along with the request as context", matchOnDescription: true });
  return choice?.label;
}

export function setContextKey(key: string, value: unknown): void {
  void vscode.commands.executeCommand("setContext", key, value);
}

/** Serves the before/after texts of proposed edits to VS Code's diff editor. */
export class DiffDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly texts = new Map<string, string>();
  private readonly registration = vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, this);

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? "";
  }

  /** A read-only document with `text`, for the left side of a diff view. */
  register(key: string, side: string, filePath: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${key}/${side}/${path.basename(filePath)}` });
    this.texts.set(uri.toString(), text);
    return uri;
  }

  /** Open the diff view of `before` → `after` for the file at `filePath`. */
  async show(key: string, filePath: string, before: string, after: string, title: string): Promise<void> {
    const name = path.basename(filePath);
    const left = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${key}/before/${name}` });
    const right = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${key}/after/${name}` });
    this.texts.set(left.toString(), before);
    this.texts.set(right.toString(), after);
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: true, preserveFocus: true });
  }

  /** Open `text` (a plan) read-only as Markdown beside the editor, without taking the focus. */
  async showMarkdown(key: string, text: string): Promise<void> {
    const uri = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${key}/plan/Plan.md` });
    this.texts.set(uri.toString(), text);
    const document = await vscode.workspace.openTextDocument(uri);
    await vscode.languages.setTextDocumentLanguage(document, "markdown").then(undefined, () => undefined);
    await vscode.window.showTextDocument(document, { preview: true, preserveFocus: true, viewColumn: vscode.ViewColumn.Beside });
  }

  /** Drop the texts for `key` and close its views: once answered, the proposal is stale. */
  async forget(key: string): Promise<void> {
    const prefix = `/${key}/`;
    const ours = (uri: vscode.Uri) => uri.scheme === DIFF_SCHEME && uri.path.startsWith(prefix);
    const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs).filter((tab) =>
      (tab.input instanceof vscode.TabInputTextDiff && ours(tab.input.modified)) ||
      (tab.input instanceof vscode.TabInputText && ours(tab.input.uri)));
    if (tabs.length) await vscode.window.tabGroups.close(tabs, true).then(undefined, () => undefined);
    for (const uri of [...this.texts.keys()]) {
      if (vscode.Uri.parse(uri).path.startsWith(prefix)) this.texts.delete(uri);
    }
  }

  dispose(): void {
    this.registration.dispose();
    this.texts.clear();
  }
}

/**
 * The proposals under review, as files in memory: the right side of the review diff, which the
 * user may edit (and even save, which keeps the text here) before answering.
 */
export class ProposalFiles implements vscode.FileSystemProvider, vscode.Disposable {
  private readonly files = new Map<string, Uint8Array>();
  private readonly changes = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.changes.event;
  private readonly registration = vscode.workspace.registerFileSystemProvider(PROPOSAL_SCHEME, this, { isCaseSensitive: true });

  /** The proposal for the file at `filePath`: its path (so the breadcrumbs read as the file's), `key` its query. */
  create(key: string, filePath: string, text: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: vscode.Uri.file(filePath).path, query: key });
    this.files.set(uri.toString(), new TextEncoder().encode(text));
    return uri;
  }

  delete(uri: vscode.Uri): void {
    this.files.delete(uri.toString());
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  stat(uri: vscode.Uri): vscode.FileStat {
    const data = this.files.get(uri.toString());
    if (data) return { type: vscode.FileType.File, ctime: 0, mtime: 0, size: data.byteLength };
    throw vscode.FileSystemError.FileNotFound(uri);
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }

  readFile(uri: vscode.Uri): Uint8Array {
    const data = this.files.get(uri.toString());
    if (!data) throw vscode.FileSystemError.FileNotFound(uri);
    return data;
  }

  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    if (!this.files.has(uri.toString())) throw vscode.FileSystemError.NoPermissions(uri);
    this.files.set(uri.toString(), content);
    this.changes.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  createDirectory(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  rename(uri: vscode.Uri): void {
    throw vscode.FileSystemError.NoPermissions(uri);
  }

  dispose(): void {
    this.registration.dispose();
    this.changes.dispose();
    this.files.clear();
  }
}

/** The group to open a review in: the one showing the file, else the active editor's, else the first. */
export function columnFor(filePath: string): vscode.ViewColumn {
  const editors = vscode.window.visibleTextEditors.filter((e) => e.viewColumn !== undefined);
  const showing = editors.find((e) => e.document.uri.scheme === "file" && e.document.uri.fsPath === filePath);
  return showing?.viewColumn ?? vscode.window.activeTextEditor?.viewColumn ?? editors[0]?.viewColumn ?? vscode.ViewColumn.One;
}

/** Close every tab showing `uri` (alone or as a diff's right side), without asking to save. */
export async function closeTabs(uri: vscode.Uri): Promise<void> {
  const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs).filter((tab) => showsUri(tab, uri));
  if (tabs.length) await vscode.window.tabGroups.close(tabs, true).then(undefined, () => undefined);
}

export function showsUri(tab: vscode.Tab, uri: vscode.Uri): boolean {
  const input = tab.input;
  const shown = input instanceof vscode.TabInputTextDiff ? input.modified : input instanceof vscode.TabInputText ? input.uri : undefined;
  return shown?.toString() === uri.toString();
}

export async function readFileOrEmpty(filePath: string): Promise<string> {
  try {
    return new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.file(filePath)));
  } catch {
    return "";
  }
}

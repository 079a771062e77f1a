/**
 * A thin wrapper over the vscode API for what Heddle needs from the editor: the workspace, the
 * active file and selection as context, a context key, and a before/after diff view.
 */

import * as path from "node:path";
import * as vscode from "vscode";
import type { ContextItem } from "./protocol.generated";

const DIFF_SCHEME = "heddle-diff";

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

  /** Open the diff view of `before` → `after` for the file at `filePath`. */
  async show(key: string, filePath: string, before: string, after: string, title: string): Promise<void> {
    const name = path.basename(filePath);
    const left = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${key}/before/${name}` });
    const right = vscode.Uri.from({ scheme: DIFF_SCHEME, path: `/${key}/after/${name}` });
    this.texts.set(left.toString(), before);
    this.texts.set(right.toString(), after);
    await vscode.commands.executeCommand("vscode.diff", left, right, title, { preview: true, preserveFocus: true });
  }

  /** Drop the texts for `key` and close its diff view: once answered, the proposal is stale. */
  async forget(key: string): Promise<void> {
    const prefix = `/${key}/`;
    const tabs = vscode.window.tabGroups.all.flatMap((group) => group.tabs).filter((tab) =>
      tab.input instanceof vscode.TabInputTextDiff &&
      tab.input.modified.scheme === DIFF_SCHEME &&
      tab.input.modified.path.startsWith(prefix));
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

export async function readFileOrEmpty(filePath: string): Promise<string> {
  try {
    return new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.file(filePath)));
  } catch {
    return "";
  }
}

/**
 * `workspace/applyEdit` from the daemon: its edit of a file open in the editor is applied to the
 * buffer (so undo works and unsaved changes are kept), then saved or not per
 * `heddle.saveAfterEdit`. An edit made for another version of the buffer than the editor's is
 * refused, with a reason the daemon passes on to the model.
 */

import * as vscode from "vscode";
import type { Protocol2CodeConverter } from "vscode-languageclient/node";
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "./protocol.generated";
import * as settings from "./settings";

export const STALE_VERSION = "the file changed in the editor since the agent read it";

interface Target {
  uri: vscode.Uri;
  /** It had unsaved changes before the edit (a document that was not open had none). */
  dirtyBefore: boolean;
}

export async function applyWorkspaceEdit(
  params: ApplyWorkspaceEditParams,
  converter: Protocol2CodeConverter,
  log: vscode.LogOutputChannel,
): Promise<ApplyWorkspaceEditResult> {
  const open = new Map(vscode.workspace.textDocuments.map((document) => [document.uri.toString(), document]));
  const targets: Target[] = [];
  for (const change of params.edit.documentChanges ?? []) {
    const uri = converter.asUri(change.textDocument.uri);
    const document = open.get(uri.toString());
    // vscode.workspace.applyEdit cannot be told which version an edit is for (it checks only
    // that the buffer did not change while the edit travelled to the window), so the version
    // the daemon computed the edit on is checked here, as vscode-languageclient's own handler
    // does, but with a reason.
    if (document && document.version !== change.textDocument.version) {
      log.info(`refused ${params.label}: the buffer is at version ${document.version}, the edit is for ${change.textDocument.version}`);
      return { applied: false, failureReason: STALE_VERSION };
    }
    targets.push({ uri, dirtyBefore: document?.isDirty ?? false });
  }
  const edit = await converter.asWorkspaceEdit(params.edit);
  let applied: boolean;
  try {
    applied = await vscode.workspace.applyEdit(edit);
  } catch (error) {
    return { applied: false, failureReason: `VS Code could not apply it (${error instanceof Error ? error.message : String(error)})` };
  }
  // VS Code refuses an edit when the buffer changed on the way, or the file cannot be edited.
  if (!applied) return { applied: false, failureReason: `${STALE_VERSION}, or it cannot be edited` };
  await save(targets, settings.saveAfterEdit(), log);
  return { applied: true };
}

async function save(targets: Target[], mode: settings.SaveAfterEdit, log: vscode.LogOutputChannel): Promise<void> {
  for (const target of targets) {
    if (mode === "never" || (mode === "ifClean" && target.dirtyBefore)) continue;
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === target.uri.toString());
    if (document && !(await document.save())) log.warn(`could not save ${target.uri.fsPath} after the agent's edit`);
  }
}

/**
 * `diagnostics/list` from the daemon: an open document's diagnostics (every source: language
 * servers, linters, VS Code's own validators), which the daemon asks for around the agent's edit
 * of the document to tell the model of the errors and warnings the edit brought.
 *
 * The answer's `generation` counts VS Code's `onDidChangeDiagnostics` events for the document
 * since the extension started, so the daemon can tell that a language server has checked the
 * edited text even when it found the same problems as before.
 */

import * as vscode from "vscode";
import type { Diagnostic, DiagnosticsListParams, DiagnosticsListResult } from "./protocol.generated";

/** VS Code numbers severities from 0 (error), LSP and the protocol from 1. */
const SEVERITY: Record<vscode.DiagnosticSeverity, Diagnostic["severity"]> = {
  [vscode.DiagnosticSeverity.Error]: 1,
  [vscode.DiagnosticSeverity.Warning]: 2,
  [vscode.DiagnosticSeverity.Information]: 3,
  [vscode.DiagnosticSeverity.Hint]: 4,
};

export class DiagnosticsSource implements vscode.Disposable {
  private readonly generations = new Map<string, number>();
  private readonly listening: vscode.Disposable;

  constructor() {
    this.listening = vscode.languages.onDidChangeDiagnostics((event) => {
      for (const uri of event.uris) {
        const key = uri.toString();
        this.generations.set(key, (this.generations.get(key) ?? 0) + 1);
      }
    });
  }

  list(params: DiagnosticsListParams): DiagnosticsListResult {
    const uri = vscode.Uri.parse(params.uri);
    return {
      diagnostics: vscode.languages.getDiagnostics(uri).map(toWire),
      generation: this.generations.get(uri.toString()) ?? 0,
    };
  }

  dispose(): void {
    this.listening.dispose();
  }
}

function toWire(d: vscode.Diagnostic): Diagnostic {
  const code = typeof d.code === "object" ? d.code.value : d.code;
  return {
    range: {
      start: { line: d.range.start.line, character: d.range.start.character },
      end: { line: d.range.end.line, character: d.range.end.character },
    },
    severity: SEVERITY[d.severity] ?? 1,
    message: d.message,
    ...(d.source ? { source: d.source } : {}),
    ...(code !== undefined ? { code } : {}),
  };
}

/**
 * Quick picks over the daemon's session state: the sessions list (open and continue one), the
 * permission rules (list, revoke, add), and the session's permission mode and model.
 */

import * as vscode from "vscode";
import type { PermissionRule, SessionInfo } from "../protocol.generated";
import type { Conversation, PermissionMode } from "../session";
import { describeReason } from "../transcript";

/** A sessions-list row: title, when, where, how its last turn ended. */
export function sessionItem(info: SessionInfo, now = Date.now()): vscode.QuickPickItem & { sessionId: string } {
  const parts = [ago(Date.parse(info.updatedAt), now), `${info.turns} turn${info.turns === 1 ? "" : "s"}`];
  if (info.lastReason) parts.push(describeReason(info.lastReason));
  if (info.live) parts.push("open");
  return { label: info.title || "(no prompt yet)", description: parts.join(" · "), detail: `${info.workspace} · ${info.model}`, sessionId: info.sessionId };
}

/** `just now`, `5 min ago`, `3 h ago`, else the date. */
export function ago(then: number, now: number): string {
  const minutes = Math.round((now - then) / 60000);
  if (!Number.isFinite(minutes)) return "";
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  if (minutes < 24 * 60) return `${Math.round(minutes / 60)} h ago`;
  return new Date(then).toISOString().slice(0, 10);
}

/** The sessions of `workspace`, newest first; the chosen one's id. */
export async function pickSession(conversation: Conversation, workspace: string | undefined): Promise<string | undefined> {
  const sessions = await conversation.list(workspace);
  if (!sessions.length) {
    void vscode.window.showInformationMessage("Heddle has no sessions for this folder yet.");
    return undefined;
  }
  const now = Date.now();
  const current = conversation.sessionInfo?.sessionId;
  const items = sessions.map((info) => {
    const item = sessionItem(info, now);
    return info.sessionId === current ? { ...item, description: `${item.description} · shown` } : item;
  });
  const choice = await vscode.window.showQuickPick(items, {
    title: "Heddle sessions",
    placeHolder: "Open a session to see its history and continue it",
    matchOnDescription: true,
    matchOnDetail: true,
  });
  return choice?.sessionId;
}

type RuleItem = vscode.QuickPickItem & { rule?: PermissionRule; add?: boolean };

const REVOKE: vscode.QuickInputButton = { iconPath: new vscode.ThemeIcon("trash"), tooltip: "Revoke this rule" };

/** "Manage permission rules": every rule the session applies, each revocable, and "Add a rule…". */
export async function manageRules(conversation: Conversation): Promise<void> {
  const pick = vscode.window.createQuickPick<RuleItem>();
  pick.title = "Heddle permission rules";
  pick.placeholder = "Pick a rule to revoke it, or add one";
  const refresh = async () => {
    pick.busy = true;
    const listed = await conversation.listRules();
    pick.items = [
      { label: "$(add) Add a rule…", add: true, alwaysShow: true },
      ...listed.rules.map((rule): RuleItem => ({
        label: rule.rule,
        description: `${rule.kind} · ${rule.scope}`,
        detail: rule.scope === "user" ? listed.userSettings : rule.scope === "project" ? listed.projectSettings : "this session",
        buttons: [REVOKE],
        rule,
      })),
    ];
    pick.busy = false;
  };
  const revoke = async (rule: PermissionRule) => {
    const answer = await conversation.revokeRule({ rule: rule.rule, kind: rule.kind, scope: rule.scope });
    void vscode.window.showInformationMessage(answer.revoked.length
      ? `Revoked ${answer.revoked.map((r) => `${r.kind} ${r.rule} (${r.scope})`).join(", ")}.`
      : `${rule.rule} was not found; nothing was revoked.`);
  };
  const done = new Promise<void>((resolve) => pick.onDidHide(() => resolve()));
  pick.onDidTriggerItemButton(async (event) => {
    if (event.item.rule) await revoke(event.item.rule).catch(showError);
    await refresh().catch(showError);
  });
  pick.onDidAccept(async () => {
    const item = pick.selectedItems[0];
    if (!item) return;
    if (item.add) {
      pick.hide();
      await addRule(conversation).catch(showError);
      return;
    }
    if (item.rule) {
      const yes = await vscode.window.showWarningMessage(`Revoke ${item.rule.kind} rule ${item.rule.rule} (${item.rule.scope})?`, { modal: true }, "Revoke");
      if (yes === "Revoke") await revoke(item.rule).catch(showError);
      await refresh().catch(showError);
      pick.show();
    }
  });
  await refresh().catch((error) => {
    pick.hide();
    showError(error);
  });
  pick.show();
  await done;
  pick.dispose();
}

async function addRule(conversation: Conversation): Promise<void> {
  const rule = await vscode.window.showInputBox({ title: "Add a permission rule", prompt: "As in the settings: Bash(git status:*), Edit(src/**), Read", ignoreFocusOut: true });
  if (!rule?.trim()) return;
  const kind = await vscode.window.showQuickPick(
    [{ label: "allow", description: "runs without asking" }, { label: "ask", description: "always asks" }, { label: "deny", description: "never runs" }],
    { title: `Kind of rule ${rule.trim()}` },
  );
  if (!kind) return;
  const scope = await vscode.window.showQuickPick(
    [
      { label: "session", description: "for this session only" },
      { label: "project", description: "written to the project's .heddle/settings.toml" },
      { label: "user", description: "written to your settings.toml, for every project" },
    ],
    { title: `Where to keep ${kind.label} ${rule.trim()}` },
  );
  if (!scope) return;
  const added = await conversation.addRule({ rule: rule.trim(), kind: kind.label as PermissionRule["kind"], scope: scope.label as PermissionRule["scope"] });
  void vscode.window.showInformationMessage(`Added ${added.rule.kind} rule ${added.rule.rule} (${added.rule.scope}).`);
}

export const MODES: { mode: PermissionMode; description: string }[] = [
  { mode: "default", description: "reads run; edits and commands ask first" },
  { mode: "acceptEdits", description: "edits run without asking; commands still ask" },
  { mode: "plan", description: "read-only: edits and commands are refused" },
  { mode: "bypassPermissions", description: "everything runs without asking" },
];

export async function pickMode(current: string | undefined): Promise<PermissionMode | undefined> {
  const choice = await vscode.window.showQuickPick(
    MODES.map((m) => ({ label: m.mode, description: m.description, picked: m.mode === current, detail: m.mode === current ? "current" : undefined })),
    { title: "Heddle permission mode for this session's next turns" },
  );
  return choice?.label as PermissionMode | undefined;
}

export async function pickModel(current: string | undefined): Promise<string | undefined> {
  const model = await vscode.window.showInputBox({ title: "Heddle model for this session's next turns", value: current, prompt: "A model id, e.g. claude-sonnet-4-5" });
  return model?.trim() || undefined;
}

function showError(error: unknown): void {
  void vscode.window.showErrorMessage(`Heddle: ${error instanceof Error ? error.message : String(error)}`);
}

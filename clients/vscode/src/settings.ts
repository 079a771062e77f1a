/**
 * Typed reads of the settings declared in package.json (`contributes.configuration`), which is
 * the one place that defines their names, types and defaults.
 */

import * as vscode from "vscode";
import type manifest from "../package.json";
import { launchFor, type DaemonLaunch } from "./launch";
import type { PermissionMode } from "./session";

type Declared = typeof manifest.contributes.configuration.properties;
type Key = keyof Declared extends `heddle.${infer K}` ? K : never;

export const SECTION = "heddle";

function read<T>(key: Key): T {
  // The default comes from package.json through VS Code; it is never repeated here.
  return vscode.workspace.getConfiguration(SECTION).get<T>(key) as T;
}

export type { DaemonLaunch } from "./launch";

/** How to start the daemon: `python -I -m heddle serve` when a Python path is set, else `heddle serve`. */
export function daemonLaunch(): DaemonLaunch {
  const env = read<Record<string, string>>("server.env") ?? {};
  return launchFor(read<string>("server.pythonPath").trim(), read<string>("server.command").trim(), env);
}

export function model(): string | undefined {
  return read<string>("model").trim() || undefined;
}

/** The mode the user chose, or undefined when unset: the daemon then takes the settings files'
 * mode (`permissions.mode`, a project's only once trusted), else `default`. */
export function permissionMode(): PermissionMode | undefined {
  const inspected = vscode.workspace.getConfiguration(SECTION).inspect<PermissionMode>("permissionMode");
  return inspected?.globalValue ?? inspected?.globalLanguageValue;
}

export type SaveAfterEdit = "ifClean" | "always" | "never";

/** Whether to save a file after the agent's edit of it went through the editor. */
export function saveAfterEdit(): SaveAfterEdit {
  return read<SaveAfterEdit>("saveAfterEdit");
}

export function affectsDaemon(event: vscode.ConfigurationChangeEvent): boolean {
  return event.affectsConfiguration(`${SECTION}.server`);
}

export function affectsSession(event: vscode.ConfigurationChangeEvent): boolean {
  return event.affectsConfiguration(`${SECTION}.model`) || event.affectsConfiguration(`${SECTION}.permissionMode`);
}
